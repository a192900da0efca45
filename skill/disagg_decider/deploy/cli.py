"""`decide deploy`: write the configs for one target from a workload's verdict.

Imports stay light here (typer only); the emitters load inside the command so that
`decide --workload` starts fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from disagg_decider.cli_options import RuleFiles, RuleSets

TARGET_HELP = (
    "dynamo (DynamoGraphDeployment), llm-d (modelservice + EPP + KEDA values), vllm or sglang "
    "(launch script + plain Kubernetes Deployments)."
)


def deploy_command(
    workload: Annotated[
        Path, typer.Option("--workload", "-w", help="Workload YAML file (see examples/).")
    ],
    target: Annotated[
        str, typer.Option("--target", "-t", metavar="dynamo|llm-d|vllm|sglang", help=TARGET_HELP)
    ],
    out_dir: Annotated[
        Path, typer.Option("--out-dir", "-o", help="Folder to write into (created if missing).")
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Replace files that already exist in --out-dir.")
    ] = False,
    dynamo_api: Annotated[
        str,
        typer.Option(
            "--dynamo-api",
            metavar="v1beta1|v1alpha1",
            help="DGD API version: v1beta1 (current, spec.components) or v1alpha1 "
            "(deprecated, spec.services).",
        ),
    ] = "v1beta1",
    layout: Annotated[
        str,
        typer.Option(
            "--layout",
            metavar="auto|disaggregated|colocated",
            help="auto follows the verdict; disaggregated or colocated emits that sizing from "
            "the same verdict (for comparison runs).",
        ),
    ] = "auto",
    image: Annotated[
        str | None,
        typer.Option("--image", help="Container image for the engines instead of the pinned one."),
    ] = None,
    model_path: Annotated[
        str | None,
        typer.Option(
            "--model-path",
            help="Hugging Face repo or local path the engines load (default: the catalog's "
            "hf_repo for the workload's model).",
        ),
    ] = None,
    served_model_name: Annotated[
        str | None,
        typer.Option("--served-model-name", help="Model name clients send (default: model path)."),
    ] = None,
    sets: RuleSets = None,
    rules: RuleFiles = None,
    gpu_label_key: Annotated[
        str,
        typer.Option(
            "--gpu-label-key",
            help="Node label that names the GPU type, for per-pool node selectors (GPU Feature "
            "Discovery's, by default).",
        ),
    ] = "nvidia.com/gpu.product",
    gpu_products: Annotated[
        list[str] | None,
        typer.Option(
            "--gpu-product",
            help="Pin pools to nodes whose --gpu-label-key has this value: VALUE for every pool "
            "or ROLE=VALUE (prefill|decode|colocated). Heterogeneous clusters get a selector per "
            "pool by default (e.g. prefill=NVIDIA-B200); this replaces its value.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the files written and warnings as JSON.")
    ] = False,
) -> None:
    """Write deployable configs for the verdict's layout: replicas, TP, batch limits, the
    conditional-disaggregation threshold and SLO targets all come from the verdict.

    Example: decide deploy -w examples/rag-8k-h200-rdma-dynamo.yaml -t dynamo -o out/dynamo
    """
    from rich.console import Console

    from disagg_decider.cli_common import parse_sets
    from disagg_decider.decide import decide
    from disagg_decider.deploy.bundle import build, check_options
    from disagg_decider.deploy.placement import parse_gpu_products
    from disagg_decider.deploy.writer import write_files
    from disagg_decider.render.text import terminal_text
    from disagg_decider.workload import load_workload

    # Text that ends up in launch scripts: refused before anything is decided (deploy/fields.py).
    text = {"model_path": model_path, "served_model_name": served_model_name, "image": image}
    check_options(target, dynamo_api, layout, **text)
    products = parse_gpu_products(gpu_products or [])
    w = load_workload(workload)
    verdict = decide(
        w, base_dir=workload.parent, rule_files=rules or [], overrides=parse_sets(sets or [])
    )
    bundle = build(
        w,
        verdict,
        target,
        dynamo_api=dynamo_api,
        layout=layout,  # type: ignore[arg-type]
        base_dir=workload.parent,
        gpu_label_key=gpu_label_key,
        gpu_products=products,
        **text,
    )
    written = write_files(out_dir, bundle.files, force=force)
    if as_json:
        payload = {
            "target": target,
            "decision": verdict.decision,
            "layout": bundle.plan.layout,
            "threshold_tokens": bundle.plan.threshold_tokens if bundle.plan.disaggregated else None,
            "files": [str(p) for p in written],
            "warnings": bundle.warnings,
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    err = Console(stderr=True)
    for w_text in bundle.warnings:
        err.print(f"[yellow]warning:[/] {terminal_text(w_text)}", highlight=False)
    for path in written:  # a folder may be named like rich markup ("out[/]")
        err.print(f"wrote {terminal_text(path)}", highlight=False)
