"""Catalog integrity and the Hugging Face config reader.

The calculator trusts these records blindly, so the tests pin the published figures it relies
on, insist every figure is traceable to a source, and check that parameter counts derived from
the dimensions agree with the published totals (a typo in a dimension shows up there).
"""

import json
from importlib import resources
from pathlib import Path

import pytest
import yaml

from disagg_decider.catalog import (
    ModelSpec,
    get_gpu,
    get_link,
    get_model,
    gpus,
    links,
    models,
)
from disagg_decider.catalog.hf_config import model_from_hf_config, param_counts
from disagg_decider.errors import UserError
from tests.conftest import LLAMA_8B_CONFIG

REQUIRED_GPUS = {"a100-80g", "h100", "h200", "b200", "gb200", "mi300x", "l40s"}
REQUIRED_MODELS = {
    "kimi-k2",
    "llama-4-maverick",
    "qwen3-30b-a3b",
    "llama-3.1-8b",
    "llama-3.3-70b",
    "llama-3.1-405b",
    "qwen3-32b",
    "qwen3-235b-a22b",
    "deepseek-v3",
    "mixtral-8x7b",
    "gpt-oss-120b",
}
REQUIRED_LINKS = {
    "nvlink",
    "ib-ndr-400",
    "ib-hdr-200",
    "roce-100",
    "roce-200",
    "roce-400",
    "efa",
    "tcp-10",
    "tcp-25",
    "tcp-100",
}


def _records(table: dict) -> list:
    """Distinct records (aliases map several keys to one record)."""
    return list({item.id: item for item in table.values()}.values())


def _dims(spec: ModelSpec) -> dict:
    return dict(
        layers=spec.layers,
        hidden=spec.hidden,
        heads=spec.heads,
        kv_heads=spec.kv_heads,
        head_dim=spec.head_dim,
        ffn_dim=spec.ffn_dim,
        vocab=spec.vocab,
        moe=spec.moe,
        mla=spec.mla,
    )


# --- catalog integrity -------------------------------------------------------------------------


def test_required_ids_present() -> None:
    assert not REQUIRED_GPUS - {g.id for g in _records(gpus())}
    assert not REQUIRED_MODELS - {m.id for m in _records(models())}
    assert not REQUIRED_LINKS - {k.id for k in _records(links())}


@pytest.mark.parametrize("table", [gpus, models, links], ids=["gpus", "models", "links"])
def test_every_entry_has_an_http_source(table) -> None:
    records = _records(table())
    assert records
    for item in records:
        assert any(s.startswith(("http://", "https://")) for s in item.sources), item.id
        assert not any(s.startswith("file://") for s in item.sources), item.id


@pytest.mark.parametrize("kind", ["gpus", "models", "links"])
def test_ids_and_aliases_are_unique(kind: str) -> None:
    """The loader silently lets a later key win, so a clash must be caught here."""
    text = resources.files("disagg_decider.catalog").joinpath(f"{kind}.yaml").read_text("utf-8")
    keys = [k for e in yaml.safe_load(text)[kind] for k in (e["id"], *e.get("aliases", []))]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)


def test_getters_return_the_keyed_record() -> None:
    for gpu_id in REQUIRED_GPUS:
        assert get_gpu(gpu_id).id == gpu_id
    for model_id in REQUIRED_MODELS:
        assert get_model(model_id).id == model_id
    for link_id in REQUIRED_LINKS:
        assert get_link(link_id).id == link_id


def test_deepseek_r1_alias_resolves_to_v3() -> None:
    assert get_model("deepseek-r1") is get_model("deepseek-v3")
    assert get_model("deepseek-r1").id == "deepseek-v3"


@pytest.mark.parametrize(
    ("getter", "bad", "hint"),
    [
        (get_model, "llama-3.3-7b", "llama-3.3-70b"),
        (get_gpu, "h10", "h100"),
        (get_link, "roce100", "roce-100"),
    ],
)
def test_unknown_id_suggests_nearest(getter, bad, hint) -> None:
    with pytest.raises(UserError) as err:
        getter(bad)
    assert bad in str(err.value)
    assert f"'{hint}'" in str(err.value)


# --- published figures -------------------------------------------------------------------------


def test_gpu_spot_checks() -> None:
    h100 = get_gpu("h100")
    assert h100.bf16_dense_tflops == pytest.approx(989.4)
    assert h100.fp8_dense_tflops == pytest.approx(1978.9)
    assert h100.scaleup_gb_per_s == 450  # one way, not the 900 GB/s bidirectional total
    h200 = get_gpu("h200")
    assert h200.hbm_gb == 141
    assert h200.hbm_tb_per_s == pytest.approx(4.8)
    assert get_gpu("a100-80g").fp8_dense_tflops is None
    assert get_gpu("b200").hbm_gb == 180
    assert get_gpu("gb200").scaleup_domain_gpus == 72
    l40s = get_gpu("l40s")
    assert (l40s.scaleup_gb_per_s, l40s.scaleup_domain_gpus) == (0, 1)


def test_gpu_ordering_is_sane() -> None:
    """Newer parts must not be slower than older ones: catches swapped or mistyped rows."""
    assert (
        get_gpu("a100-80g").bf16_dense_tflops
        < get_gpu("h100").bf16_dense_tflops
        < get_gpu("b200").bf16_dense_tflops
        <= get_gpu("gb200").bf16_dense_tflops
    )
    for g in _records(gpus()):
        if g.fp8_dense_tflops is not None:
            assert g.fp8_dense_tflops == pytest.approx(2 * g.bf16_dense_tflops, rel=0.03), g.id


def test_model_spot_checks() -> None:
    llama70 = get_model("llama-3.3-70b")
    assert (llama70.layers, llama70.kv_heads, llama70.head_dim) == (80, 8, 128)
    assert llama70.hf_repo == "meta-llama/Llama-3.3-70B-Instruct"
    ds = get_model("deepseek-v3")
    assert ds.mla is not None and ds.moe is not None
    assert (ds.mla.kv_lora_rank, ds.mla.qk_rope_head_dim) == (512, 64)
    assert (ds.moe.experts, ds.moe.experts_active, ds.moe.dense_layers) == (256, 8, 3)
    oss = get_model("gpt-oss-120b")
    assert (oss.sliding_window, oss.sliding_window_layers) == (128, 18)
    assert get_model("qwen3-32b").vocab == 151936


def test_moe_and_window_fields_are_consistent() -> None:
    for m in _records(models()):
        assert m.params_active_b <= m.params_total_b, m.id
        if m.moe is None:
            assert m.params_active_b == m.params_total_b, m.id
        else:
            assert m.moe.experts_active < m.moe.experts, m.id
            assert m.params_active_b < m.params_total_b / 2, m.id
        assert m.sliding_window_layers <= m.layers, m.id
        assert (m.sliding_window is None) == (m.sliding_window_layers == 0), m.id


def test_link_figures() -> None:
    assert get_link("nvlink").kind == "scale-up"
    assert get_link("nvlink").gbps is None
    for link in _records(links()):
        if link.kind == "scale-out":
            assert link.gbps is not None and link.gbps > 0, link.id
        if link.id.startswith("tcp-"):
            assert not link.rdma and link.efficiency <= 0.5, link.id
        else:
            assert link.rdma, link.id
    assert get_link("efa").gbps == 400  # 3200 Gb/s per 8 GPUs
    assert get_link("roce-100").efficiency > get_link("tcp-100").efficiency


# --- parameter counts --------------------------------------------------------------------------


@pytest.mark.parametrize("model_id", sorted(REQUIRED_MODELS))
def test_param_counts_reproduce_published_totals(model_id: str) -> None:
    spec = get_model(model_id)
    total, active = param_counts(**_dims(spec))
    assert total == pytest.approx(spec.params_total_b, rel=0.03)
    assert active <= total


@pytest.mark.parametrize(
    "model_id",
    [
        "llama-3.1-8b",
        "qwen3-32b",
        "qwen3-235b-a22b",
        "qwen3-30b-a3b",
        "deepseek-v3",
        "kimi-k2",
        "llama-4-maverick",
        "mixtral-8x7b",
    ],
)
def test_param_counts_reproduce_published_active(model_id: str) -> None:
    spec = get_model(model_id)
    _, active = param_counts(**_dims(spec))
    assert active == pytest.approx(spec.params_active_b, rel=0.03)


def test_param_counts_tied_embeddings_drop_one_matrix() -> None:
    dims = _dims(get_model("llama-3.1-8b"))
    untied, _ = param_counts(**dims)
    tied, _ = param_counts(**dims, tied_embeddings=True)
    assert untied - tied == pytest.approx(128256 * 4096 / 1e9)


def test_param_counts_mla_without_q_lora() -> None:
    spec = get_model("deepseek-v3")
    assert spec.mla is not None
    no_q_lora = spec.mla.model_copy(update={"q_lora_rank": None})
    with_lora, _ = param_counts(**_dims(spec))
    without, _ = param_counts(**{**_dims(spec), "mla": no_q_lora})
    d, h, qk, r = 7168, 128, 192, 1536
    per_layer_delta = d * h * qk - (d * r + r * h * qk)
    assert without - with_lora == pytest.approx(61 * per_layer_delta / 1e9)


# --- Hugging Face config.json ------------------------------------------------------------------

DEEPSEEK_V3_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "first_k_dense_replace": 3,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
}

GPT_OSS_CONFIG = {
    "hidden_size": 2880,
    "head_dim": 64,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072,
    "num_attention_heads": 64,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "num_local_experts": 128,
    "experts_per_token": 4,
    "sliding_window": 128,
    "vocab_size": 201088,
}


def _write(tmp_path: Path, name: str, config: dict | str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    path = folder / "config.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config), encoding="utf-8")
    return path


def test_hf_llama_maps_fields_and_params(tmp_path: Path) -> None:
    config = {**LLAMA_8B_CONFIG, "_name_or_path": "meta-llama/Llama-3.1-8B"}
    path = _write(tmp_path, "snapshot-abc123", config)
    spec = model_from_hf_config(path)
    assert spec.id == "llama-3.1-8b"  # named from the config, not the folder
    assert spec.name == spec.hf_repo == "meta-llama/Llama-3.1-8B"
    assert (spec.layers, spec.hidden, spec.heads, spec.kv_heads) == (32, 4096, 32, 8)
    assert spec.head_dim == 128  # hidden / heads when head_dim is absent
    assert (spec.ffn_dim, spec.vocab, spec.max_context_tokens) == (14336, 128256, 131072)
    assert spec.moe is None and spec.mla is None and spec.sliding_window is None
    assert spec.params_total_b == pytest.approx(8.03, rel=0.01)
    assert spec.params_active_b == spec.params_total_b
    assert spec.sources == [path.resolve().as_uri()]
    assert spec.sources[0].startswith("file://")


def test_hf_directory_path_and_defaults(tmp_path: Path) -> None:
    cfg = {k: v for k, v in LLAMA_8B_CONFIG.items() if k != "num_key_value_heads"}
    path = _write(tmp_path, "MHA Model", {**cfg, "model_type": "llama"})
    spec = model_from_hf_config(path.parent)
    assert spec.id == "llama"  # model_type when there is no _name_or_path
    assert spec.kv_heads == spec.heads == 32


def test_hf_deepseek_maps_moe_mla(tmp_path: Path) -> None:
    spec = model_from_hf_config(_write(tmp_path, "DeepSeek-V3", DEEPSEEK_V3_CONFIG))
    assert spec.moe is not None and spec.mla is not None
    assert (spec.moe.experts, spec.moe.experts_active, spec.moe.shared_experts) == (256, 8, 1)
    assert (spec.moe.expert_ffn_dim, spec.moe.dense_layers) == (2048, 3)
    assert spec.mla.kv_lora_rank == 512 and spec.mla.q_lora_rank == 1536
    assert spec.head_dim == 128  # not hidden/heads = 56
    assert spec.params_total_b == pytest.approx(671, rel=0.01)  # MTP layer excluded
    assert spec.params_active_b == pytest.approx(37, rel=0.03)
    catalog = get_model("deepseek-v3")
    assert (spec.moe, spec.mla) == (catalog.moe, catalog.mla)


def test_hf_gpt_oss_sliding_window(tmp_path: Path) -> None:
    spec = model_from_hf_config(_write(tmp_path, "gpt-oss-120b", GPT_OSS_CONFIG))
    assert (spec.sliding_window, spec.sliding_window_layers) == (128, 18)
    assert spec.moe is not None and spec.moe.experts_active == 4
    assert spec.params_total_b == pytest.approx(116.8, rel=0.03)


def test_hf_unused_window_is_ignored(tmp_path: Path) -> None:
    cfg = {**LLAMA_8B_CONFIG, "sliding_window": 4096, "use_sliding_window": False}
    spec = model_from_hf_config(_write(tmp_path, "qwen-like", cfg))
    assert (spec.sliding_window, spec.sliding_window_layers) == (None, 0)


def test_hf_named_from_the_file_name_without_names_in_it(tmp_path: Path) -> None:
    path = tmp_path / "tmp" / "Mistral-Large.json"
    path.parent.mkdir()
    path.write_text(json.dumps(LLAMA_8B_CONFIG), encoding="utf-8")
    assert model_from_hf_config(path).id == "mistral-large"
    plain = _write(tmp_path, "some-folder", LLAMA_8B_CONFIG)
    assert model_from_hf_config(plain).id == "hf-config"  # never the folder's name


def test_hf_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        model_from_hf_config(tmp_path / "nope" / "config.json")


def test_hf_invalid_json(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken", "{not json")
    with pytest.raises(UserError, match="invalid JSON") as err:
        model_from_hf_config(path)
    assert str(path.resolve()) in str(err.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_hidden_layers": None}, "num_hidden_layers"),
        ({"hidden_size": None}, "hidden_size"),
        ({"vocab_size": None}, "vocab_size"),
        ({"intermediate_size": 0}, "intermediate_size"),
        ({"num_attention_heads": -4}, "num_attention_heads"),
        ({"num_key_value_heads": "eight"}, "num_key_value_heads"),
    ],
)
def test_hf_bad_field_named(tmp_path: Path, change: dict, field: str) -> None:
    cfg = {k: v for k, v in {**LLAMA_8B_CONFIG, **change}.items() if v is not None}
    path = _write(tmp_path, "bad", cfg)
    with pytest.raises(UserError) as err:
        model_from_hf_config(path)
    message = str(err.value)
    assert f"'{field}'" in message
    assert "config.json" in message


def test_hf_moe_without_top_k_is_rejected(tmp_path: Path) -> None:
    cfg = {k: v for k, v in DEEPSEEK_V3_CONFIG.items() if k != "num_experts_per_tok"}
    with pytest.raises(UserError, match="num_experts_per_tok"):
        model_from_hf_config(_write(tmp_path, "moe", cfg))


def test_hf_mla_missing_rope_dim_is_rejected(tmp_path: Path) -> None:
    cfg = {k: v for k, v in DEEPSEEK_V3_CONFIG.items() if k != "qk_rope_head_dim"}
    with pytest.raises(UserError, match="'qk_rope_head_dim'"):
        model_from_hf_config(_write(tmp_path, "mla", cfg))
