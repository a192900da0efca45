"""The calculator against published figures (sources in shared/reference/physics.md)."""

from __future__ import annotations

import pytest

from disagg_decider import catalog
from disagg_decider.calc.physics import kv, transfer
from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.replicas.decode import decode_step_ms
from disagg_decider.calc.replicas.prefill import prefill_ms
from disagg_decider.workload import Efficiency


def engine(model: str, gpu: str, tp: int, dtype: str = "bf16") -> Engine:
    return Engine(catalog.get_model(model), catalog.get_gpu(gpu), dtype, dtype, tp, Efficiency())


def test_llama70b_kv_at_4096_tokens_matches_published_bf16_and_fp8():
    m = catalog.get_model("llama-3.3-70b")
    assert float(kv.kv_bytes(m, "bf16", 4096)) == pytest.approx(1.342e9, rel=0.02)
    assert float(kv.kv_bytes(m, "fp8", 4096)) == pytest.approx(0.671e9, rel=0.02)


def test_deepseek_v3_mla_latent_is_70272_bytes_per_token_bf16():
    m = catalog.get_model("deepseek-v3")
    assert kv.kv_bytes_per_token(m, "bf16") == 70_272
    # Pricing it as GQA with 128 KV heads would overstate it ~25x (physics.md 2.2).
    gqa_like = 2 * m.layers * 128 * 56 * 2
    assert gqa_like / kv.kv_bytes_per_token(m, "bf16") > 20


@pytest.mark.parametrize(
    ("model", "bytes_per_token"),
    [
        ("llama-3.1-8b", 131_072),
        ("llama-3.3-70b", 327_680),
        ("llama-3.1-405b", 516_096),
        ("qwen3-32b", 262_144),
        ("qwen3-235b-a22b", 192_512),
        ("mixtral-8x7b", 131_072),
    ],
)
def test_gqa_kv_bytes_per_token_table(model: str, bytes_per_token: int):
    assert kv.kv_bytes_per_token(catalog.get_model(model), "bf16") == bytes_per_token


def test_sliding_window_layers_cap_gpt_oss_kv():
    m = catalog.get_model("gpt-oss-120b")
    # Short contexts: every layer stores every token (73,728 B/token, physics.md table).
    assert kv.kv_bytes_per_token(m, "bf16", 100) == pytest.approx(73_728)
    # Long contexts: half the layers keep only a 128-token window.
    long = 100_000
    expected = 36_864 * long + 36_864 * 128
    assert float(kv.kv_bytes(m, "bf16", long)) == pytest.approx(expected)


def test_kv_transfer_times_for_4k_fp8_70b():
    size = float(kv.kv_bytes(catalog.get_model("llama-3.3-70b"), "fp8", 4096))
    assert float(transfer.transfer_ms(size, 100.0)) == pytest.approx(6.7, rel=0.02)
    assert float(transfer.transfer_ms(size, 10.0)) == pytest.approx(67.0, rel=0.02)


def test_link_bandwidth_per_gpu_nvlink_from_the_gpu_network_from_the_link():
    nvlink, ndr = catalog.get_link("nvlink"), catalog.get_link("ib-ndr-400")
    h200, l40s = catalog.get_gpu("h200"), catalog.get_gpu("l40s")
    assert catalog.link_gbps_per_gpu(nvlink, h200) == 450 * 8  # NVLink 4, one way, in Gb/s
    assert catalog.link_gbps_per_gpu(ndr, h200) == 400
    assert catalog.link_gbps_per_gpu(ndr, None) == 400
    assert catalog.link_gbps_per_gpu(nvlink, l40s) == 0  # PCIe card: no scale-up link
    assert catalog.link_gbps_per_gpu(nvlink, None) == 0


def test_layerwise_transfer_hides_behind_prefill():
    size = 1.342e9
    serial = float(transfer.transfer_ms(size, 50.0, 0.01))
    hidden = float(transfer.layerwise_exposed_ms(size, 50.0, 0.01, 400.0, 80))
    assert hidden < serial / 20
    # When the link is slower than prefill, the excess shows.
    slow = float(transfer.layerwise_exposed_ms(size, 1.0, 0.0, 400.0, 80))
    assert slow == pytest.approx(1342.0 - 400.0, rel=1e-6)


@pytest.mark.parametrize(("tp", "measured_ms"), [(8, 136.8), (4, 200.7), (2, 310.3)])
def test_prefill_2048_tokens_70b_on_h100_within_40_percent_of_splitwise(tp, measured_ms):
    """Splitwise's vLLM measurements of Llama2-70B (same dims) on H100 (physics.md V10)."""
    got = float(prefill_ms(engine("llama-3.3-70b", "h100", tp), 2048))
    assert got == pytest.approx(measured_ms, rel=0.40)


def test_decode_step_70b_h100_tp2_batch1_within_40_percent_of_splitwise():
    got = float(decode_step_ms(engine("llama-3.3-70b", "h100", 2), 1, 2048))
    assert got == pytest.approx(37.0, rel=0.40)


def test_kv_heads_replicate_when_tp_exceeds_them():
    m = catalog.get_model("qwen3-235b-a22b")  # 4 KV heads
    assert float(kv.kv_replication(m, 4)) == 1.0
    assert float(kv.kv_replication(m, 8)) == 2.0
    assert float(kv.kv_replication(catalog.get_model("deepseek-v3"), 8)) == 8.0
