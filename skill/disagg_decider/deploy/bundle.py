"""One call from a workload and its Verdict to the files of one target, checked.

The CLI, tests and any other front end call `build`; it refuses (UserError listing every
problem) before producing anything when the layout could not run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from disagg_decider.deploy import TARGETS, dynamo, llmd, plain
from disagg_decider.deploy.fields import check_deploy_text
from disagg_decider.deploy.placement import GPU_PRODUCT_LABEL
from disagg_decider.deploy.plan import LAYOUTS, DeployPlan, Layout, make_plan
from disagg_decider.deploy.plan_checks import check
from disagg_decider.deploy.readme import readme
from disagg_decider.errors import UserError
from disagg_decider.verdict import Verdict
from disagg_decider.workload import Workload


@dataclass
class Bundle:
    plan: DeployPlan
    files: dict[str, str]  # relative path -> text
    warnings: list[str] = field(default_factory=list)


def check_options(
    target: str,
    dynamo_api: str,
    layout: str,
    *,
    model_path: str | None = None,
    served_model_name: str | None = None,
    image: str | None = None,
) -> None:
    """Refuse an unknown target, Dynamo API or layout, and text no quoting makes safe in a
    launch script (deploy/fields.py); the CLI calls it before deciding."""
    check_deploy_text(model_path, served_model_name, image)
    if target not in TARGETS:
        raise UserError(f"--target {target!r}: unknown target; valid: {', '.join(TARGETS)}")
    if dynamo_api not in dynamo.API_VERSIONS:
        raise UserError(f"--dynamo-api {dynamo_api!r}: valid: {', '.join(dynamo.API_VERSIONS)}")
    if layout not in LAYOUTS:
        raise UserError(f"--layout {layout!r}: valid: {', '.join(LAYOUTS)}")


def build(
    workload: Workload,
    verdict: Verdict,
    target: str,
    *,
    dynamo_api: str = "v1beta1",
    layout: Layout = "auto",
    image: str | None = None,
    model_path: str | None = None,
    served_model_name: str | None = None,
    base_dir: Path | None = None,
    gpu_label_key: str = GPU_PRODUCT_LABEL,
    gpu_products: dict[str, str] | None = None,
) -> Bundle:
    check_options(
        target,
        dynamo_api,
        layout,
        model_path=model_path,
        served_model_name=served_model_name,
        image=image,
    )
    plan = make_plan(
        workload,
        verdict,
        target,
        layout=layout,
        model_path=model_path,
        served_model_name=served_model_name,
        image=image,
        base_dir=base_dir,
        gpu_label_key=gpu_label_key,
        gpu_products=gpu_products,
    )
    errors, warnings = check(plan)
    if errors:
        problems = "\n  ".join(errors)
        raise UserError(
            f"refusing to emit {target} configs for {workload.name!r}; they would not run:\n"
            f"  {problems}"
        )
    warnings = plan.warnings + warnings
    if target == "dynamo":
        files = dynamo.files(plan, dynamo_api)  # type: ignore[arg-type]
    elif target == "llm-d":
        files = llmd.files(plan)
    else:
        files = plain.files(plan)
    files["README.md"] = readme(plan, sorted(files), warnings, dynamo_api)
    return Bundle(plan=plan, files=files, warnings=warnings)
