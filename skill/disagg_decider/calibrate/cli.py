"""`decide calibrate`: benchmark results in, a calibration file out."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from disagg_decider import catalog
from disagg_decider.calibrate.source import Limits
from disagg_decider.cli_options import ForceOut, count
from disagg_decider.errors import UserError

MAX_BATCH = 16_384  # max_num_seqs: vLLM's default is 256 (1,024 on some GPUs)
MAX_CHUNK_TOKENS = 1_048_576  # max_num_batched_tokens

ChunkTokens = count("--chunk-tokens", MAX_CHUNK_TOKENS, "max_num_batched_tokens of the server.")
MaxBatch = count("--max-batch", MAX_BATCH, "max_num_seqs of the server.")
MaxFiles = count("--max-files", 100_000, "Refuse more result files than this.")
MaxRuns = count(
    "--max-runs",
    1_000_000,
    "Refuse more runs than this in all (each is fitted, ~0.25 CPU-s apiece).",
)
MaxFileMb = count("--max-file-mb", 4_000, "Refuse larger result files (MB).")
MaxValues = count(
    "--max-values",
    1_000_000_000,
    "Refuse result files with more JSON values than this (numbers, lists, ...).",
)


def calibrate_command(
    results: Annotated[
        list[Path],
        typer.Argument(
            metavar="RESULTS",
            help="vllm bench serve --save-result JSON, AIPerf/GenAI-Perf profile export JSON or "
            "SGLang bench_serving JSONL files (format detected from their keys).",
        ),
    ],
    model: Annotated[
        str, typer.Option("--model", help="Catalog model id (decide catalog models).")
    ],
    gpu: Annotated[str, typer.Option("--gpu", help="Catalog GPU id (decide catalog gpus).")],
    engine: Annotated[str, typer.Option("--engine", help="vllm, sglang or trtllm.")] = "vllm",
    tp: Annotated[int, typer.Option("--tp", min=1, help="Tensor-parallel degree of the runs.")] = 1,
    weights_dtype: Annotated[
        str, typer.Option("--weights-dtype", help="bf16, fp8 or fp4.")
    ] = "bf16",
    chunk_tokens: ChunkTokens = 8192,
    max_batch: MaxBatch = 256,
    max_files: MaxFiles = Limits.max_files,
    max_runs: MaxRuns = Limits.max_runs,
    max_file_mb: MaxFileMb = Limits.max_file_bytes // 1_000_000,
    max_values: MaxValues = Limits.max_values,
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Calibration file to write (YAML).")
    ] = None,
    force: ForceOut = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the fit as JSON.")] = False,
) -> None:
    """Fit prefill MFU, decode MBU and the per-step overhead to your own benchmark runs.

    The fit compares the calculator's prediction of each run (mean TTFT, TPOT/ITL and output
    throughput at the run's request rate or concurrency, queueing included) with what was
    measured, and writes the constants, the files they came from (with SHA-256) and every
    residual. Fits from one load point or one prompt length say so.

    \b
    Example:
      decide calibrate runs/*.json --model llama-3.1-8b --gpu h100 --engine vllm --tp 1 \\
          --out calibration.yaml
      decide --workload w.yaml --calibration calibration.yaml
    """
    from disagg_decider.calibrate.build import calibrate

    if engine not in ("vllm", "sglang", "trtllm"):
        raise UserError(f"--engine {engine!r}: valid: vllm, sglang, trtllm")
    if weights_dtype not in ("bf16", "fp8", "fp4"):
        raise UserError(f"--weights-dtype {weights_dtype!r}: valid: bf16, fp8, fp4")
    if out_file is not None and out_file.exists() and not force:
        raise UserError(f"{out_file}: already exists; pass --force to overwrite it")
    cal = calibrate(
        results,
        model=catalog.get_model(model),
        gpu=catalog.get_gpu(gpu),
        engine=engine,
        tp=tp,
        weights_dtype=weights_dtype,
        chunk_tokens=chunk_tokens,
        max_batch=max_batch,
        limits=Limits(max_files, max_runs, max_file_mb * 1_000_000, max_values),
    )
    if out_file is not None:
        from disagg_decider.calibrate.file import dump_calibration

        try:
            out_file.parent.mkdir(parents=True, exist_ok=True)
            out_file.write_text(dump_calibration(cal), encoding="utf-8")
        except OSError as exc:
            raise UserError(f"--out {out_file}: cannot write ({exc.strerror})") from None
    if as_json:
        sys.stdout.write(json.dumps(cal.model_dump(mode="json"), indent=2) + "\n")
    else:
        print_calibration(cal, out_file)


BY = {
    "simulator": "the simulator replaying the run (open loops)",
    "mean-field": "the mean-field model (closed loops)",
}


# What each metric measures, with its unit, for the table's metric column.
METRIC_LABELS = {
    "ttft_ms": "TTFT ms",
    "tpot_ms": "TPOT ms",
    "output_tokens_per_s": "output tok/s",
}


def fitted_text(e) -> str:
    """`prefill_mfu 0.55 (+/-3%), decode_mbu 0.98 (unbounded)`: each constant and its spread."""
    from disagg_decider.calibrate.file import UNBOUNDED

    def spread(k: str) -> str:
        u = e.uncertainty.get(k)
        if u is None:
            return ""
        return " (unbounded: the runs cannot pin it)" if u == UNBOUNDED else f" (+/-{u:.0%})"

    return ", ".join(f"{k} {getattr(e.efficiency, k):.3g}{spread(k)}" for k in e.fitted)


def print_calibration(cal, out_file: Path | None) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from disagg_decider.render.text import terminal_text as safe

    console = Console()
    for e in cal.entries:
        console.print(f"[bold]calibration[/] {safe(e.label())}", highlight=False)
        console.print(f"fitted: {safe(fitted_text(e))}", highlight=False)
        console.print(safe(e.residual_text()), highlight=False)
        for name, why in e.held.items():
            console.print(f"held: {safe(name)} ({safe(why)})", highlight=False)
        files = sorted({p.file for p in e.points})
        one_file = len(files) == 1
        if one_file:
            console.print(f"runs from {safe(files[0])}", highlight=False)
        table = Table(
            title="measured vs predicted (tokens per request; error = predicted / measured - 1)",
            title_justify="left",
            box=box.SIMPLE_HEAD,  # no cell borders: 80 columns hold every column unclipped
            padding=(0, 1),
            pad_edge=False,
        )
        columns = (() if one_file else ("file",)) + (
            "run",
            "load",
            "prompt",
            "output",
            "metric",
            "measured",
            "predicted",
            "error",
        )
        for col in columns:
            table.add_column(
                col,
                justify="left" if col in ("file", "run", "load", "metric") else "right",
                min_width=len(col),
            )
        for p in e.points:
            table.add_row(  # file and run names come from the user's files: never markup
                *(() if one_file else (safe(p.file),)),
                safe(p.run),
                safe(p.load),
                f"{p.prompt_tokens:.0f}",
                f"{p.output_tokens:.0f}",
                safe(f"{METRIC_LABELS.get(p.metric, p.metric)} ({_statistic(p)})"),
                f"{p.measured:.4g}",
                "-" if p.predicted is None else f"{p.predicted:.4g}",
                "-" if p.error is None else f"{p.error:+.1%}",
            )
        console.print(table)
        if any(p.predicted is None for p in e.points):
            console.print(
                "predicted -: the calculator predicts no value there (the run's load saturates "
                "its model)",
                highlight=False,
            )
        by = {name: sum(p.predicted_by == name for p in e.points) for name in BY}
        said = ", ".join(f"{BY[name]}: {n} points" for name, n in by.items() if n)
        console.print(f"predicted by {said}", highlight=False)
        for w in e.warnings:
            console.print(f"[yellow]warning:[/] {safe(w)}", highlight=False)
    if out_file is not None:
        Console(stderr=True).print(f"wrote {safe(out_file)}", highlight=False)


def _statistic(p) -> str:
    """`mean`, `median`: the statistic, without the metric's name that some readers repeat."""
    words = [w for w in p.statistic.split() if w.lower() not in ("tpot", "itl", "ttft")]
    return " ".join(words) or p.statistic
