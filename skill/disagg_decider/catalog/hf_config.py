"""Build a `ModelSpec` from a local Hugging Face `config.json`.

Users often serve a model the catalog does not list. Its `config.json` already holds every
dimension the calculator needs, so we read it from disk (never from the network: the tool must
work air-gapped and must not leak which model a user runs) and derive parameter counts from the
architecture, because config files rarely state them.
"""

import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from disagg_decider.catalog import Mla, ModelSpec, Moe
from disagg_decider.errors import UserError, clip, excerpt
from disagg_decider.userfiles import read_text

_EXPERT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")
_ACTIVE_KEYS = ("num_experts_per_tok", "experts_per_token")


def param_counts(
    *,
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    ffn_dim: int,
    vocab: int,
    moe: Moe | None = None,
    mla: Mla | None = None,
    tied_embeddings: bool = False,
) -> tuple[float, float]:
    """(total, active) parameters in billions, from the architecture alone.

    Counts the matrices that dominate memory and FLOPs (physics.md §2.1): attention projections
    (MLA's low-rank ones when `mla` is set), SwiGLU FFN (3 matrices), MoE router, embeddings.
    Norms and biases are ignored (<0.1%); so are multi-token-prediction layers, which serving
    usually skips. Active swaps the routed experts for k of them (+ shared) and keeps both
    embedding matrices, the convention of most published "active" figures (Mixtral 12.9B,
    Qwen3-235B 22B, DeepSeek-V3 37B) and of the catalog's dense models (active = total).
    gpt-oss-120b's published 5.1B leaves out the input embedding (5.7B counted here).
    """
    d = hidden
    if mla is None:
        attn = d * heads * head_dim + 2 * d * kv_heads * head_dim + heads * head_dim * d
    else:
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        if mla.q_lora_rank is None:
            q_proj = d * heads * qk
        else:
            q_proj = d * mla.q_lora_rank + mla.q_lora_rank * heads * qk
        kv_proj = d * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank * heads * (
            mla.qk_nope_head_dim + mla.v_head_dim
        )
        attn = q_proj + kv_proj + heads * mla.v_head_dim * d

    dense_ffn = 3 * d * ffn_dim
    if moe is None:
        total = active = layers * (attn + dense_ffn)
    else:
        dense_layers = min(moe.dense_layers, layers)
        expert = 3 * d * moe.expert_ffn_dim
        router = d * moe.experts
        moe_total = (moe.experts + moe.shared_experts) * expert + router
        moe_active = (moe.experts_active + moe.shared_experts) * expert + router
        dense_part = dense_layers * (attn + dense_ffn)
        sparse_layers = layers - dense_layers
        total = dense_part + sparse_layers * (attn + moe_total)
        active = dense_part + sparse_layers * (attn + moe_active)

    embed = vocab * d if tied_embeddings else 2 * vocab * d
    total += embed
    active += embed
    return total / 1e9, active / 1e9


def model_from_hf_config(path: Path) -> ModelSpec:
    """Read a local `config.json` (or a directory holding one) into a `ModelSpec`.

    Raises `UserError` naming the file and the field for anything missing or invalid, so the
    user can fix the file rather than read a traceback.
    """
    given = Path(path).expanduser()
    path = given / "config.json" if _is_dir(given) else given
    where = clip(str(path), 300)
    raw = _parse_json(read_text(path, what="a Hugging Face config.json", given=given), where)
    if not isinstance(raw, dict):
        raise UserError(f"{where}: expected a JSON object at the top level")
    # Multimodal wrappers (Llama 4, Gemma 3, ...) keep the language model under text_config.
    cfg: dict[str, Any] = raw
    if "num_hidden_layers" not in raw and isinstance(raw.get("text_config"), dict):
        cfg = {**raw, **raw["text_config"]}

    def opt(key: str, *, zero_ok: bool = False) -> int | None:
        value = cfg.get(key)
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value != int(value)
        ):
            raise UserError(f"{where}: field '{key}' must be an integer, got {_kind(value)}")
        if value < 0 or (value == 0 and not zero_ok):
            raise UserError(f"{where}: field '{key}' must be positive, got {excerpt(value)}")
        if value > MAX_DIMENSION:
            raise UserError(
                f"{where}: field '{key}' is {excerpt(value)}; at most {MAX_DIMENSION:,} is accepted"
            )
        return int(value)

    def req(key: str) -> int:
        value = opt(key)
        if value is None:
            raise UserError(f"{where}: missing required field '{key}'")
        return value

    def first(keys: tuple[str, ...], *, zero_ok: bool = False) -> int | None:
        return next((opt(k, zero_ok=zero_ok) for k in keys if cfg.get(k) is not None), None)

    layers = req("num_hidden_layers")
    hidden = req("hidden_size")
    heads = req("num_attention_heads")
    ffn_dim = req("intermediate_size")
    vocab = req("vocab_size")
    max_ctx = req("max_position_embeddings")
    kv_heads = opt("num_key_value_heads") or heads

    mla = None
    if cfg.get("kv_lora_rank") is not None:
        mla = Mla(
            kv_lora_rank=req("kv_lora_rank"),
            qk_rope_head_dim=req("qk_rope_head_dim"),
            qk_nope_head_dim=req("qk_nope_head_dim"),
            v_head_dim=req("v_head_dim"),
            q_lora_rank=opt("q_lora_rank"),
        )

    # For MLA, hidden/heads (56 for DeepSeek-V3) is no real head size, and transformers may
    # write head_dim = qk_rope_head_dim (64); the value head (128) is what the catalog uses.
    head_dim = (mla.v_head_dim if mla else None) or opt("head_dim")
    if head_dim is None:
        if hidden % heads:
            raise UserError(
                f"{where}: missing field 'head_dim' and hidden_size {hidden} is not divisible "
                f"by num_attention_heads {heads}"
            )
        head_dim = hidden // heads

    moe = None
    experts = first(_EXPERT_KEYS, zero_ok=True)  # some dense configs say num_experts: 0
    if experts is not None and experts > 1:
        active = first(_ACTIVE_KEYS)
        if active is None:
            raise UserError(
                f"{where}: MoE config ({experts} experts) is missing field 'num_experts_per_tok'"
            )
        if active > experts:
            raise UserError(
                f"{where}: field 'num_experts_per_tok' ({active}) exceeds the expert count "
                f"({experts})"
            )
        moe = Moe(
            experts=experts,
            experts_active=active,
            shared_experts=opt("n_shared_experts", zero_ok=True) or 0,
            expert_ffn_dim=opt("moe_intermediate_size") or ffn_dim,
            dense_layers=opt("first_k_dense_replace", zero_ok=True) or 0,
        )

    sliding_window, sliding_layers = _sliding(cfg, layers, max_ctx, req)

    tied = bool(cfg.get("tie_word_embeddings", False))
    # The shape both the parameter count and the record read, named once.
    shape = dict(
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        ffn_dim=ffn_dim,
        vocab=vocab,
        moe=moe,
        mla=mla,
    )
    total_b, active_b = param_counts(**shape, tied_embeddings=tied)

    model_id, display, hf_repo = _names(cfg, path)
    weights_dtype, kv_dtype, dtype_source = checkpoint_formats(raw, moe is not None, where)
    try:
        return ModelSpec(
            id=model_id,
            name=display,
            hf_repo=hf_repo,
            **shape,
            sliding_window=sliding_window,
            sliding_window_layers=sliding_layers,
            params_total_b=round(total_b, 3),
            params_active_b=round(active_b, 3),
            max_context_tokens=max_ctx,
            weights_dtype=weights_dtype,
            kv_cache_dtype=kv_dtype,
            dtype_source=dtype_source,
            sources=[Path(os.path.abspath(path)).as_uri()],
            notes="params derived from config dimensions (norms and biases not counted)",
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors(include_url=False)[:5]
        )
        raise UserError(f"{where}: config does not describe a valid model: {problems}") from None


# quantization_config methods and what their checkpoints hold. 4-bit integer formats (AWQ,
# GPTQ, bitsandbytes) are not priced: the calculator has no integer-dequantizing GEMM model.
_SUPPORTED_METHODS = (
    "fp8, fbgemm_fp8, mxfp4, modelopt (FP8, NVFP4), "
    "compressed-tensors (float-quantized, nvfp4-pack-quantized)"
)
_MODELOPT_ALGOS = {"FP8": "fp8", "NVFP4": "nvfp4"}
_COMPRESSED_FORMATS = {"float-quantized": "fp8", "nvfp4-pack-quantized": "nvfp4"}


def checkpoint_formats(cfg: dict[str, Any], is_moe: bool, where: str) -> tuple[str, str, str]:
    """(weights precision, KV format, where they come from) of a config's checkpoint.

    Without `quantization_config` the weights are the config's 16-bit dtype (priced bf16).
    MXFP4 checkpoints (gpt-oss) quantize the routed experts only and list attention, router,
    embeddings and head in `modules_to_not_convert`: experts mxfp4, the rest bf16. FP8 with a
    `weight_block_size` is block-scaled (DeepSeek-V3). ModelOpt and compressed-tensors
    checkpoints may also quantize the KV cache (`kv_cache_quant_algo`, `kv_cache_scheme`).
    """
    qc = cfg.get("quantization_config")
    if qc is None:
        return "bf16", "bf16", "config.json: no quantization_config (16-bit weights)"
    field = "quantization_config"
    if not isinstance(qc, dict):
        raise UserError(f"{where}: field '{field}' must be a JSON object, got {_kind(qc)}")
    method = qc.get("quant_method")
    unsupported = UserError(
        f"{where}: {field}.quant_method is {_kind(method)}, a format the calculator does not "
        f"price; supported: {_SUPPORTED_METHODS}. Remove {field} and set weights_dtype in "
        "the workload to price the checkpoint as one of bf16, fp8, mxfp4, nvfp4"
    )
    kv = "bf16"
    if method == "mxfp4":
        weights = "mxfp4-experts/bf16" if is_moe else "mxfp4"
    elif method in ("fp8", "fbgemm_fp8"):
        weights = "fp8_block" if qc.get("weight_block_size") is not None else "fp8"
    elif method == "modelopt":
        weights = _MODELOPT_ALGOS.get(_text(qc.get("quant_algo")), "")
        kv = _MODELOPT_ALGOS.get(_text(qc.get("kv_cache_quant_algo")), "bf16")
    elif method == "compressed-tensors":
        weights = _COMPRESSED_FORMATS.get(_text(qc.get("format")), "")
        if not weights:
            groups = qc.get("config_groups")
            found = {
                _COMPRESSED_FORMATS.get(_text(g.get("format")), "")
                for g in (groups.values() if isinstance(groups, dict) else ())
                if isinstance(g, dict)
            }
            weights = found.pop() if len(found) == 1 else ""
        scheme = qc.get("kv_cache_scheme")
        if isinstance(scheme, dict) and scheme.get("num_bits") == 8:
            kv = "fp8"
    else:
        raise unsupported
    if not weights:
        raise unsupported
    return weights, kv, f"config.json {field} ({method})"


def _text(value: Any) -> str:
    return value if isinstance(value, str) and len(value) <= 100 else ""


MAX_DIMENSION = 100_000_000  # any layer count, width, vocabulary or context a config may state
MAX_JSON_DEPTH = 64
_SLUG = re.compile(r"[^a-z0-9._-]+")


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _parse_json(text: str, where: str) -> Any:
    """JSON with finite numbers only and bounded nesting; errors name the line, never content."""

    def line_of(literal: str) -> int:
        return text[: max(text.find(literal), 0)].count("\n") + 1

    def no_constant(name: str) -> Any:
        raise ValueError(f"line {line_of(name)}: {name} is not a JSON number")

    def finite(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise ValueError(
                f"line {line_of(literal)}: a number of {len(literal)} characters overflows"
            )
        return value

    depth = max_depth = 0
    for ch in text:  # cheap pre-scan: json recursion on 100,000 brackets is a RecursionError
        if ch in "[{":
            depth += 1
            max_depth = max(max_depth, depth)
        elif ch in "]}":
            depth -= 1
    if max_depth > MAX_JSON_DEPTH:
        raise UserError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=no_constant, parse_float=finite)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{where}: unsupported JSON value at {clip(str(exc), 80)}") from None


def _kind(value: Any) -> str:
    """What a value is, without echoing a string from the file (it may be a secret)."""
    if isinstance(value, str):
        return f"a string of {len(value):,} characters"
    if isinstance(value, bool | int | float):
        return excerpt(value)
    return f"a JSON {type(value).__name__}"


def _names(cfg: dict[str, Any], path: Path) -> tuple[str, str, str]:
    """(id, display name, hf_repo): from `_name_or_path`, else `model_type`, else the file name.

    The folder a config sits in (often `snapshots/<hash>` or `tmp`) says nothing about the model.
    """
    repo = cfg.get("_name_or_path")
    repo = repo if isinstance(repo, str) and 0 < len(repo) <= 200 else ""
    hf_repo = repo if re.fullmatch(r"[\w.-]+/[\w.-]+", repo) else ""
    kind = cfg.get("model_type")
    kind = kind if isinstance(kind, str) and 0 < len(kind) <= 100 else ""
    stem = path.stem if path.stem.lower() != "config" else ""
    for candidate in (repo.rstrip("/").rsplit("/", 1)[-1], kind, stem):
        slug = _SLUG.sub("-", candidate.lower()).strip("-.")[:64]
        if slug:
            display = hf_repo or candidate
            return slug, _SLUG.sub("-", display)[:100] if display != hf_repo else display, hf_repo
    return "hf-config", "hf-config", hf_repo


def _sliding(
    cfg: dict[str, Any], layers: int, max_ctx: int, req: Callable[[str], int]
) -> tuple[int | None, int]:
    """(window, number of window layers); (None, 0) when every layer sees the full context.

    `layer_types` (gpt-oss, newer transformers) names each layer. Without it a set
    `sliding_window` applies to all layers (Mistral semantics) unless `use_sliding_window` is
    false (Qwen keeps a window value it does not use). A window no shorter than the context
    changes nothing, so it is dropped.
    """
    if cfg.get("sliding_window") is None or cfg.get("use_sliding_window") is False:
        return None, 0
    window = req("sliding_window")
    types = cfg.get("layer_types")
    is_list = isinstance(types, list)
    count = sum(t == "sliding_attention" for t in types) if is_list else layers
    if count == 0 or window >= max_ctx:
        return None, 0
    return window, min(count, layers)
