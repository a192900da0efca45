"""Step times from measured kernels: aiconfigurator-core's database (the `silicon` extra).

`pip install 'disagg-decider[silicon]'` brings aiconfigurator-core, which composes a forward
pass from per-operation timings measured on each GPU under each serving engine (GEMMs,
attention, MoE, all-reduce, all-to-all). A workload with `step_source: silicon` takes every
step time from it instead of the roofline in `calc/step.py`.

Calling it per step would be far too slow for the calculator's arrays, so each parallel layout
gets a table, built once per process from the compiled estimator and interpolated with numpy
(log-log, between points a quarter of an octave apart in tokens, an octave in batch and context):

- `decode_step[batch, context]`: a pure decode step (aiconfigurator's own decode estimate,
  whose operations differ from a mixed step's for some engines);
- for passes carrying prompt tokens, the parts aiconfigurator sums into its mixed step:
  `non_attention[tokens]` (GEMMs, MoE, communication, norms for a pass of that many tokens on
  one attention rank), `prompt_attention[P]` (causal attention of a whole P-token prompt, so
  that a chunk of n new tokens after s cached ones costs `A(s + n) - A(s)`) and
  `decode_attention[batch, context]`.
 The replica's decode batch and
prompt tokens are spread evenly over its attention (DP) ranks, keeping the pass's attention work
(`arch.attention_flops`) whole. aiconfigurator-core is imported only when a table is built:
the default install never loads it.
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
    """One layout's curves, in milliseconds on the grids above."""

    prompt_non_attention: np.ndarray  # TOKEN_GRID
    decode_step: np.ndarray  # BATCH_GRID x CONTEXT_GRID
    prompt_attention: np.ndarray  # PROMPT_GRID
    decode_attention: np.ndarray  # BATCH_GRID x CONTEXT_GRID


@cache
def layout_table(key: Key, tp: int, dp: int, ep: int, moe: bool) -> LayoutTable:
    """Tabulate one layout from aiconfigurator-core (a few hundred calls, ~20 ms)."""
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

    tokens = [int(t) for t in TOKEN_GRID]
    prompt_na = [parts(t, 0, t)[1] for t in tokens]
    prompt_attn = [parts(int(p), 0, int(p))[2] for p in PROMPT_GRID]
    decode_attn = [
        [parts(0, int(b), max(int(c) - 2, 1))[3] for c in CONTEXT_GRID] for b in BATCH_GRID
    ]
    decode_step = [[decode_ms(h, int(b), int(c)) for c in CONTEXT_GRID] for b in BATCH_GRID]
    return LayoutTable(
        prompt_non_attention=np.asarray(prompt_na),
        decode_step=np.asarray(decode_step),
        prompt_attention=np.asarray(prompt_attn),
        decode_attention=np.asarray(decode_attn),
    )


_LOG_TOKENS = np.log(TOKEN_GRID)
_LOG_PROMPTS = np.log(PROMPT_GRID)
_LOG_BATCHES = np.log(BATCH_GRID)
_LOG_CONTEXTS = np.log(CONTEXT_GRID)
_TINY_MS = 1e-9  # keeps a zero curve (no such operation) finite in log space


def _segment(log_grid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the grid segment holding each x and the weight of its upper end; above the
    grid's top the last segment is extended (weight > 1: a power law)."""
    lx = np.log(np.maximum(x, np.exp(log_grid[0])))
    j = np.clip(np.searchsorted(log_grid, lx, side="right") - 1, 0, len(log_grid) - 2)
    w = (lx - log_grid[j]) / (log_grid[j + 1] - log_grid[j])
    return j, w


def _curve(log_grid: np.ndarray, log_values: np.ndarray, layout: np.ndarray, x) -> np.ndarray:
    """Log-log interpolation of each layout's curve (rows of `log_values`) at x."""
    layout, x = np.broadcast_arrays(layout, np.asarray(x, dtype=float))
    j, w = _segment(log_grid, x)
    return np.exp(log_values[layout, j] * (1.0 - w) + log_values[layout, j + 1] * w)


def _surface(
    log_values: np.ndarray, layout: np.ndarray, batch, context, scale_below_one: bool = True
) -> np.ndarray:
    """Bilinear log-log interpolation of a (batch, context) surface; below one sequence it
    scales with the batch (attention) or stays at one sequence's (a whole step)."""
    layout, b, c = np.broadcast_arrays(
        layout, np.asarray(batch, dtype=float), np.asarray(context, dtype=float)
    )
    i, u = _segment(_LOG_BATCHES, b)
    j, v = _segment(_LOG_CONTEXTS, c)
    lo = log_values[layout, i, j] * (1.0 - v) + log_values[layout, i, j + 1] * v
    hi = log_values[layout, i + 1, j] * (1.0 - v) + log_values[layout, i + 1, j + 1] * v
    out = np.exp(lo * (1.0 - u) + hi * u)
    if not scale_below_one:
        return out
    return np.where(b < 1.0, out * np.maximum(b, 0.0), out)


@dataclass(frozen=True)
class Stacked:
    """The tables of several layouts, one row each, in log milliseconds; `covered` is False
    for a layout the database refused (its row is a placeholder)."""

    prompt_non_attention: np.ndarray
    decode_step: np.ndarray
    prompt_attention: np.ndarray
    decode_attention: np.ndarray
    covered: np.ndarray


class SiliconSteps:
    """A workload's measured step source: one table per parallel layout, built on first use.

    Shared by every engine of the workload (`Engine.steps`); layouts the database refuses are
    priced by the roofline and listed in `refused` for the verdict's warnings.
    """

    def __init__(self, key: Key, moe: bool) -> None:
        self.key, self.moe = key, moe
        self.refused: dict[str, str] = {}  # layout label -> reason
        self.priced: set[str] = set()  # layout labels with a table
        self._stacks: dict[tuple, tuple[Stacked, np.ndarray]] = {}

    def _layout(self, tp: int, dp: int, ep: int) -> LayoutTable | None:
        from disagg_decider.calc.parallel import label

        try:
            table = layout_table(self.key, tp, dp, ep, self.moe)
        except Refused as exc:
            self.refused.setdefault(label(tp, dp, ep), str(exc))
            return None
        self.priced.add(label(tp, dp, ep))
        return table

    def stack(self, tp, dp, ep) -> tuple[Stacked, np.ndarray]:
        """The tables of the engine's layouts and each element's row in them."""
        tp_a, dp_a, ep_a = (np.asarray(v, dtype=np.int64) for v in (tp, dp, ep))
        cache_key = tuple(
            (a.shape, a.tobytes()) for a in (tp_a, dp_a, ep_a)
        )  # small: a few candidates
        hit = self._stacks.get(cache_key)
        if hit is not None:
            return hit
        t, d, e = np.broadcast_arrays(tp_a, dp_a, ep_a)
        triples = np.stack([t.ravel(), d.ravel(), e.ravel()], axis=1)
        unique, inverse = np.unique(triples, axis=0, return_inverse=True)
        tables = [self._layout(int(a), int(b), int(c)) for a, b, c in unique]
        ok = [tab for tab in tables if tab is not None]
        filler = ok[0] if ok else None

        def rows(field: str) -> np.ndarray:
            if filler is None:
                return np.zeros((len(tables), 1))
            return np.log(
                np.maximum(np.stack([getattr(tab or filler, field) for tab in tables]), _TINY_MS)
            )

        stacked = Stacked(
            prompt_non_attention=rows("prompt_non_attention"),
            decode_step=rows("decode_step"),
            prompt_attention=rows("prompt_attention"),
            decode_attention=rows("decode_attention"),
            covered=np.array([tab is not None for tab in tables]),
        )
        result = (stacked, inverse.reshape(t.shape))
        self._stacks[cache_key] = result
        return result

    def pass_ms(self, tp, dp, ep, decode_batch, decode_context, prefill_tokens, prefill_context):
        """One pass's time per the database, and where it covers the layout (elsewhere the
        caller takes the roofline). Batch and prompt tokens are the replica's, spread evenly
        over its `dp` attention ranks with the pass's attention work kept whole."""
        stacked, layout = self.stack(tp, dp, ep)
        if not stacked.covered.any():
            return None, stacked.covered[layout]
        ranks = np.asarray(dp, dtype=float)
        b = np.asarray(decode_batch, dtype=float) / ranks
        c_total = np.asarray(prefill_tokens, dtype=float)
        c = c_total / ranks
        s = np.maximum(np.asarray(prefill_context, dtype=float) + (ranks - 1.0) * c / 2.0, 0.0)
        has_prompt = c_total > 0
        ms = _surface(stacked.decode_step, layout, b, decode_context, scale_below_one=False)
        if np.any(has_prompt):
            tokens = np.maximum(b + c, 1.0)
            mixed = _curve(_LOG_TOKENS, stacked.prompt_non_attention, layout, tokens)
            attention = _prompt_attention(stacked, layout, s + c) - _prompt_attention(
                stacked, layout, s
            )
            mixed = mixed + np.maximum(attention, 0.0)
            decode = _surface(stacked.decode_attention, layout, b, decode_context)
            mixed = mixed + np.where(b > 0, decode, 0.0)
            ms = np.where(has_prompt, mixed, ms)
        return ms, stacked.covered[layout]


def _prompt_attention(stacked: Stacked, layout: np.ndarray, tokens) -> np.ndarray:
    """Attention of a whole prompt of `tokens`; below the grid it falls linearly to zero."""
    x = np.asarray(tokens, dtype=float)
    a = _curve(_LOG_PROMPTS, stacked.prompt_attention, layout, x)
    low = PROMPT_GRID[0]
    return np.where(x < low, a * np.maximum(x, 0.0) / low, a)


@cache
def steps_for(key: Key, moe: bool) -> SiliconSteps:
    """One step source per workload key per process: its tables are built once."""
    return SiliconSteps(key, moe)


def key_of(r) -> Key:
    """A resolved workload's table key."""
    w = r.workload
    return Key(r.model.id, r.gpu.id, w.engine, w.weights_dtype, w.kv_dtype)


def steps_of(r) -> SiliconSteps | None:
    """The measured step source of a resolved workload, None where the database lacks it."""
    w = r.workload
    if coverage_gap(r.model.id, r.gpu.id, w.engine, w.weights_dtype) is not None:
        return None
    return steps_for(key_of(r), r.model.moe is not None)


def verdict_notes(r) -> tuple[str, list[str]]:
    """(the step source the verdict used, warnings about it): the silicon source where the
    workload asks for it and the database covers it; layouts it refused, or a workload it lacks
    entirely, are priced by the default roofline, and the warnings say which."""
    w = r.workload
    if w.step_source != "silicon":
        return "default", []
    gap = coverage_gap(r.model.id, r.gpu.id, w.engine, w.weights_dtype)
    if gap is not None:
        return "default", [f"step_source silicon unavailable, default physics used: {gap}"]
    steps = steps_for(key_of(r), r.model.moe is not None)
    if steps.refused and not steps.priced:
        why = next(iter(steps.refused.values()))
        return "default", [f"step_source silicon unavailable, default physics used: {why}"]
    by_reason: dict[str, list[str]] = {}
    for lay, why in sorted(steps.refused.items()):
        by_reason.setdefault(why, []).append(lay)
    notes = [
        f"step_source silicon: layouts {', '.join(lays)} priced by the default physics ({why})"
        for why, lays in by_reason.items()
    ]
    return "silicon", notes
