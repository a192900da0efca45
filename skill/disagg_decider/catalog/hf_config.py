"""Build a `ModelSpec` from a local Hugging Face `config.json`.

Users often serve a model the catalog does not list. Its `config.json` already holds every
dimension the calculator needs, so we read it from disk (never from the network: the tool must
work air-gapped and must not leak which model a user runs) and derive parameter counts from the
architecture, because config files rarely state them.
"""

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from disagg_decider.catalog import Mla, ModelSpec, Moe
from disagg_decider.errors import UserError

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
    path = Path(path).expanduser().resolve()
    if path.is_dir():
        path = path / "config.json"
    where = str(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{where}: file not found (expected a Hugging Face config.json)") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise UserError(f"{where}: cannot read file: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
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
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise UserError(f"{where}: field '{key}' must be an integer, got {value!r}")
        if value < 0 or (value == 0 and not zero_ok):
            raise UserError(f"{where}: field '{key}' must be positive, got {value!r}")
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
    total_b, active_b = param_counts(
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        ffn_dim=ffn_dim,
        vocab=vocab,
        moe=moe,
        mla=mla,
        tied_embeddings=tied,
    )

    repo = cfg.get("_name_or_path")
    hf_repo = repo if isinstance(repo, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", repo) else ""
    dir_name = path.parent.name
    model_id = re.sub(r"[^a-z0-9._-]+", "-", dir_name.lower()).strip("-") or "hf-config"
    try:
        return ModelSpec(
            id=model_id,
            name=hf_repo or dir_name or "hf-config",
            hf_repo=hf_repo,
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            ffn_dim=ffn_dim,
            vocab=vocab,
            moe=moe,
            mla=mla,
            sliding_window=sliding_window,
            sliding_window_layers=sliding_layers,
            params_total_b=round(total_b, 3),
            params_active_b=round(active_b, 3),
            max_context_tokens=max_ctx,
            sources=[path.as_uri()],
            notes="params derived from config dimensions (norms and biases not counted)",
        )
    except ValidationError as exc:
        raise UserError(f"{where}: config does not describe a valid model: {exc}") from None


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
