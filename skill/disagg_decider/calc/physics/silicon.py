"""Step times from measured kernels: aiconfigurator-core's database (the `silicon` extra).

`pip install 'disagg-decider[silicon]'` brings aiconfigurator-core, which composes a forward
pass from per-operation timings measured on each GPU under each serving engine (GEMMs,
attention, MoE, all-reduce, all-to-all). A workload with `step_source: silicon` takes every
step time from it instead of the roofline in `calc/physics/step.py`.

Calling it per step would be far too slow for the calculator's arrays, so each parallel layout
gets a table, built once per process from the compiled estimator (here) and interpolated with
numpy (`calc/physics/silicon_steps.py`; log-log, a quarter of an octave apart in tokens, an octave
in batch and context):

- `decode_step[batch, context]`: a pure decode step (aiconfigurator's own decode estimate,
  whose operations differ from a mixed step's for some engines);
- for passes carrying prompt tokens, the parts aiconfigurator sums into its mixed step:
  `non_attention[tokens]` (GEMMs, MoE, communication, norms for a pass of that many tokens on
  one attention rank), `prompt_attention[P]` (causal attention of a whole P-token prompt, so
  that a chunk of n new tokens after s cached ones costs `A(s + n) - A(s)`) and
  `decode_attention[batch, context]`.

The replica's decode batch and prompt tokens are spread evenly over its attention (DP) ranks,
keeping the pass's attention work (`model_costs.attention_flops`) whole. aiconfigurator-core is
imported only when a table is built: the default install never loads it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
from dataclasses import dataclass
from functools import cache

import numpy as np

PACKAGE = "aiconfigurator_core"
TESTED_VERSION = "0.12.0"

# Catalog model id -> the Hugging Face id of a config bundled with aiconfigurator-core (it
# cannot download one offline). Llama 3.3 70B has Llama 3.1 70B's dimensions. Mixtral 8x7B and
# Kimi K2 ship configs that 0.12.0 still tries to download, so they are left out.
MODELS: dict[str, str] = {
    "llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
    "llama-3.3-70b": "meta-llama/Meta-Llama-3.1-70B",
    "llama-3.1-405b": "meta-llama/Meta-Llama-3.1-405B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "llama-4-maverick": "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
}
# The weight format each checkpoint ships in: that dtype is left to aiconfigurator to read from
# the bundled config (block-scaled FP8, MXFP4 experts with BF16 attention); others are forced.
NATIVE_DTYPES: dict[str, str] = {"deepseek-v3": "fp8", "gpt-oss-120b": "fp4"}
# Catalog GPU id -> aiconfigurator system with measured data (MI300X and H800 have none).
SYSTEMS: dict[str, str] = {
    "h100": "h100_sxm",
    "h200": "h200_sxm",
    "b200": "b200_sxm",
    "gb200": "gb200",
    "a100-80g": "a100_sxm",
    "l40s": "l40s",
}
ENGINES = ("vllm", "sglang", "trtllm")
# Our weight dtype -> aiconfigurator's GEMM and MoE quantization modes where it is not native.
_GEMM_QUANT = {"bf16": "bfloat16", "fp8": "fp8", "fp4": "nvfp4"}
_KV_QUANT = {"bf16": "bfloat16", "fp8": "fp8"}

# Table grids, per attention rank. Beyond the top the curves are extended as power laws.
TOKEN_GRID = np.unique(np.round(2.0 ** np.arange(0.0, 17.01, 0.25))).astype(float)  # 1..128K
PROMPT_GRID = np.unique(np.round(2.0 ** np.arange(4.0, 17.01, 0.25))).astype(float)  # 16..128K
BATCH_GRID = 2.0 ** np.arange(0, 12)  # 1..2048 sequences
CONTEXT_GRID = 2.0 ** np.arange(4, 18)  # 16..128K tokens


class Refused(Exception):
    """aiconfigurator-core lacks data for this model, GPU, engine, dtype or layout."""


def _reason(exc: Exception) -> str:
    """One short line saying why the database refused (its messages end in a local path)."""
    text = str(exc).split(" at /")[0].strip()
    return f"{type(exc).__name__}: {text[:160]}"


@cache
def installed() -> bool:
    """Whether the `silicon` extra is installed (without importing it)."""
    return importlib.util.find_spec(PACKAGE) is not None


def coverage_gap(model_id: str, gpu_id: str, engine: str, weights_dtype: str) -> str | None:
    """Why the database cannot price this workload, or None where it may (layouts may still be
    refused when their table is built)."""
    if not installed():
        return "aiconfigurator-core is not installed (pip install 'disagg-decider[silicon]')"
    if model_id not in MODELS:
        return f"model {model_id!r} has no config bundled with aiconfigurator-core"
    if gpu_id not in SYSTEMS:
        return f"GPU {gpu_id!r} has no measured data in aiconfigurator-core"
    if engine not in ENGINES:
        return f"engine {engine!r} has no measured data in aiconfigurator-core"
    if weights_dtype not in _GEMM_QUANT and NATIVE_DTYPES.get(model_id) != weights_dtype:
        return f"weights dtype {weights_dtype!r} is not mapped to aiconfigurator-core"
    return None


@dataclass(frozen=True)
class Key:
    """What a silicon table depends on, besides the parallel layout."""

    model_id: str
    gpu_id: str
    engine: str
    weights_dtype: str
    kv_dtype: str


def compile_kwargs(key: Key, tp: int, dp: int, ep: int, moe: bool) -> dict[str, object]:
    """aiconfigurator's parallel and quantization arguments for one layout."""
    kw: dict[str, object] = {"tp_size": tp, "attention_dp_size": dp}
    if moe:
        kw["moe_ep_size"] = ep
        kw["moe_tp_size"] = max(tp * dp // ep, 1)
    if NATIVE_DTYPES.get(key.model_id) != key.weights_dtype:
        quant = _GEMM_QUANT[key.weights_dtype]
        kw["gemm_quant_mode"] = quant
        if moe:
            kw["moe_quant_mode"] = quant
    if key.kv_dtype in _KV_QUANT:
        kw["kvcache_quant_mode"] = _KV_QUANT[key.kv_dtype]
    return kw


@cache
def handle(key: Key, tp: int, dp: int, ep: int, moe: bool):
    """aiconfigurator-core's compiled estimator for one layout (its database loads once per GPU
    and engine); Refused where it has no data."""
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
    from aiconfigurator_core.sdk.engine import EngineHandle

    system = SYSTEMS[key.gpu_id]
    try:
        # It prints notes about low-fidelity rows while loading a database; keep them off stdout.
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return EngineHandle.compile(
                MODELS[key.model_id],
                system,
                key.engine,
                **compile_kwargs(key, tp, dp, ep, moe),
            )
    except Exception as exc:  # it raises many types; any of them means "no estimate here"
        raise Refused(_reason(exc)) from None


def _call(fn, *args) -> float:
    try:
        value = float(fn(*args))
    except Exception as exc:
        raise Refused(_reason(exc)) from None
    if not np.isfinite(value) or value <= 0:
        raise Refused(f"non-positive estimate {value} at {args}")
    return value


def prefill_ms(h, tokens: int) -> float:
    """aiconfigurator's time for one prompt of `tokens` on each attention rank."""
    return _call(h.predict_prefill_latency, 1, int(tokens), 0)


def decode_ms(h, batch: int, context: int) -> float:
    """aiconfigurator's decode step, `batch` sequences per attention rank at `context` tokens
    (it evaluates at `isl + osl // 2 + 1`, hence the two tokens taken off)."""
    return _call(h.decode_step_latency, int(batch), max(int(context) - 2, 1), 2)


def mixed_ms(h, chunk: int, batch: int, prompt: int) -> float:
    """aiconfigurator's mixed step: a `chunk`-token slice of a `prompt`-token prompt plus
    `batch` decode sequences at about `prompt` tokens of context, per attention rank."""
    return _call(h.mixed_step_latency, int(chunk), int(batch), int(prompt), 2)


@dataclass(frozen=True)
class LayoutTable:
    """One layout's curves, in milliseconds on the grids above. The database may cover a
    layout's decode steps and not its prompt passes (attention kernels it lacks) or the other
    way round: the side it refused is None, with the reason."""

    decode_step: np.ndarray | None  # BATCH_GRID x CONTEXT_GRID
    prompt_non_attention: np.ndarray | None  # TOKEN_GRID
    prompt_attention: np.ndarray | None  # PROMPT_GRID
    decode_attention: np.ndarray | None  # BATCH_GRID x CONTEXT_GRID (in mixed passes)
    decode_refused: str | None = None
    prompt_refused: str | None = None


@cache
def layout_table(key: Key, tp: int, dp: int, ep: int, moe: bool) -> LayoutTable:
    """Tabulate one layout from aiconfigurator-core (about 450 calls, a few tens of ms);
    Refused where it covers neither decode steps nor prompt passes."""
    h = handle(key, tp, dp, ep, moe)
    breakdown = h.mixed_step_breakdown  # (total, non-attention, prompt attention, decode attn)

    def parts(ctx_tokens: int, gen_tokens: int, isl: int) -> tuple[float, ...]:
        try:
            out = tuple(float(v) for v in breakdown(ctx_tokens, gen_tokens, isl, 2))
        except Exception as exc:
            raise Refused(_reason(exc)) from None
        if not np.isfinite(out[0]) or out[0] <= 0:
            raise Refused(f"non-positive estimate at {(ctx_tokens, gen_tokens, isl)}")
        return out

    def decode_side() -> np.ndarray:
        return np.asarray(
            [[decode_ms(h, int(b), int(c)) for c in CONTEXT_GRID] for b in BATCH_GRID]
        )

    def prompt_side() -> tuple[np.ndarray, ...]:
        na = [parts(int(t), 0, int(t))[1] for t in TOKEN_GRID]
        attention = [parts(int(p), 0, int(p))[2] for p in PROMPT_GRID]
        decode_attention = [
            [parts(0, int(b), max(int(c) - 2, 1))[3] for c in CONTEXT_GRID] for b in BATCH_GRID
        ]
        return np.asarray(na), np.asarray(attention), np.asarray(decode_attention)

    decode, decode_refused = None, None
    try:
        decode = decode_side()
    except Refused as exc:
        decode_refused = str(exc)
    prompt, prompt_refused = (None, None, None), None
    try:
        prompt = prompt_side()
    except Refused as exc:
        prompt_refused = str(exc)
    if decode_refused and prompt_refused:
        raise Refused(prompt_refused)
    return LayoutTable(decode, *prompt, decode_refused, prompt_refused)


def key_of(r) -> Key:
    """A resolved workload's table key."""
    w = r.workload
    return Key(r.model.id, r.gpu.id, w.engine, w.weights_dtype, w.kv_dtype)
