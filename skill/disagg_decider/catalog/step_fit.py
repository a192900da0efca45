"""The default step physics: efficiency constants fitted to measured silicon (issue 24).

`benchmarks/fit_step_physics.py` fits the constants of the pass model (`calc/physics/step_split.py`)
per GPU x engine x model family x weight format to aiconfigurator-core's estimates, which
compose measured kernel timings, and writes them with their source and residuals to
`calc/step_fit.json`. A workload that does not set an `efficiency.*` constant is priced with the
fitted one (`workload.resolve`); one it sets, or a calibration file sets, is kept. Reading the
table needs nothing beyond the standard library: the default install does not need
aiconfigurator-core.

The database covers H100, H200, B200 and GB200 under vLLM, SGLang and TensorRT-LLM. Other GPUs
take the nearest covered one's constants (`GPU_FALLBACK`: efficiencies are shares of each
GPU's own peak and bandwidth, so a GPU of the same generation and memory class is the closest
stand-in); a weight format the grid lacks for a family takes that family's BF16 entry.

Some entries were fitted on decode steps only (the database has DeepSeek-V3's and gpt-oss's
decode kernels under SGLang, and DeepSeek-V3's under TensorRT-LLM, but not their prompt passes).
Their prompt-only constants (`PROMPT_ONLY`) were never constrained: coordinate descent left
prefill_mfu at its grid's first value, 0.02, which priced a 4,000-token DeepSeek-V3 prefill on
TP8 H200 under SGLang at 1,234 ms against vLLM's fitted 210 ms (measured 217 ms). Those constants
come from the same GPU x family x format entry of an engine whose data had prompt passes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from disagg_decider import dtypes

# The table stays beside the calculator that it parameterises, under the name verdicts cite
# ("calc/step_fit.json <entry>"); this reader sits with the catalogs, below both `workload`
# (which fills in the constants when it resolves a workload) and the calculator.
TABLE_PATH = Path(__file__).resolve().parents[1] / "calc" / "step_fit.json"

# GPUs the database lacks -> the covered GPU whose constants they take, and why.
GPU_FALLBACK: dict[str, tuple[str, str]] = {
    "a100-80g": ("h100", "no A100 data; H100 (the previous generation's nearest)"),
    "h800": ("h100", "H800 is an H100 with a cut NVLink"),
    "l40s": ("h100", "no L40S data; H100"),
    "mi300x": ("h200", "no AMD data; H200 (the nearest in HBM capacity and bandwidth)"),
}


# Constants only a pass carrying prompt tokens uses: a decode-only fit cannot determine them.
PROMPT_ONLY: tuple[str, ...] = ("prefill_mfu", "prefill_overhead_ms")
# Engines tried, in order, for the prompt constants of a decode-only entry.
PROMPT_DONORS: tuple[str, ...] = ("vllm", "trtllm", "sglang")


@dataclass(frozen=True)
class Fitted:
    """The constants a workload is priced with when it does not set them."""

    constants: dict[str, float]
    entry: str  # the table entry used: "h200 vllm moe bf16"
    note: str  # where they come from, fallbacks named

    def source(self) -> str:
        """The entry and the data it was fitted to, e.g. "calc/step_fit.json h200 vllm dense
        bf16 (aiconfigurator-core 0.12.0 (PyPI))"."""
        data = table_source().split(",")[0]
        return f"calc/step_fit.json {self.entry} ({data}){self.note}"


@cache
def _table() -> dict:
    return json.loads(TABLE_PATH.read_text())


@cache
def _entries() -> dict[tuple[str, str, str, str], dict[str, float]]:
    return {
        (f["gpu"], f["engine"], f["family"], f["format"]): f["constants"] for f in _table()["fits"]
    }


@cache
def _fitted_on_prompts() -> frozenset[tuple[str, str, str, str]]:
    """Entries whose data had prompt passes (a `prefill` row in their residuals)."""
    return frozenset(
        (f["gpu"], f["engine"], f["family"], f["format"])
        for f in _table()["fits"]
        if "prefill" in f["residuals"]
    )


def _prompt_donor(key: tuple[str, str, str, str]) -> tuple[str, str, str, str] | None:
    """For a decode-only entry, the same GPU x family x format entry of the first engine in
    `PROMPT_DONORS` fitted on prompt passes; None where the entry needs none or none exists."""
    covered = _fitted_on_prompts()
    if key in covered:
        return None
    gpu, _, family, fmt = key
    for engine in PROMPT_DONORS:
        if (gpu, engine, family, fmt) in covered:
            return gpu, engine, family, fmt
    return None


def weight_format(weights_dtype: str) -> str:
    """The table's format class of a priced weight format: the experts' (or all weights')
    format decides which tensor-core path the GEMMs take: fp4, fp8 or bf16."""
    experts = dtypes.parts(weights_dtype)[1]
    if experts in dtypes.FOUR_BIT:
        return "fp4"
    if experts in dtypes.LOW_PRECISION:
        return "fp8"
    return "bf16"


@cache
def fitted(gpu_id: str, engine: str, moe: bool, weights_dtype: str) -> Fitted | None:
    """The fitted constants for a GPU (catalog id), engine, family and weight format; None
    where no entry serves (an engine the table does not know)."""
    family, fmt = ("moe" if moe else "dense"), weight_format(weights_dtype)
    notes = []
    gpu = gpu_id
    if gpu_id in GPU_FALLBACK:
        gpu, why = GPU_FALLBACK[gpu_id]
        notes.append(f"{gpu_id} priced as {gpu}: {why}")
    entries = _entries()
    if (gpu, engine, family, fmt) not in entries and fmt != "bf16":
        notes.append(f"no {family} {fmt} fit: {family} bf16 constants")
        fmt = "bf16"
    key = (gpu, engine, family, fmt)
    constants = entries.get(key)
    if constants is None:
        return None
    constants = dict(constants)
    donor = _prompt_donor(key)
    if donor is not None:
        constants.update({name: entries[donor][name] for name in PROMPT_ONLY})
        names = ", ".join(PROMPT_ONLY)
        notes.append(f"fitted on decode steps only: {names} from {' '.join(donor)}")
    note = f" ({'; '.join(notes)})" if notes else ""
    return Fitted(constants, f"{gpu} {engine} {family} {fmt}", note)


def table_source() -> str:
    """Where the table's constants come from (the data and the script)."""
    return _table()["source"]
