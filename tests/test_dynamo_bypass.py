"""Issue 14b: Dynamo's router keeps a prompt local only when part of it is cached.

Dynamo's `isl_bounding` bypasses the prefill pool iff eff_isl < eff_isl_threshold AND
eff_isl / prompt < eff_isl_ratio_threshold (at most 1.0, equality: no bypass), so a cache-cold
prompt always splits. The calculator's conditional layout routes on uncached length alone
(llm-d's prefix-based-pd-decider). These tests hold the metric that measures the gap
(`conditional_cold_local_share`), the rules that report it (DSG018 advice, ORC009 effect), the
verdict's Dynamo plan (`dynamo_layout`) and what `decide deploy` emits for each target, on a
cache-cold bimodal mix and on the same mix with the short class warm (hit rate 0.3).
"""

from __future__ import annotations

import functools
import json
import math

import pytest
import yaml

from disagg_decider.calc.modes.local_prefill_share import cold_local_share, dynamo_layout
from disagg_decider.decide import decide
from disagg_decider.deploy.bundle import build
from disagg_decider.render.text import inline
from disagg_decider.workload import Workload, load_workload_text
from tests.deploy_helpers import deployed

LONG = {
    "share": 0.4,
    "prompt_tokens": {"p50": 8192, "p99": 16384},
    "output_tokens": {"p50": 300, "p99": 800},
    "prefix_cache_hit_rate": 0.1,
}


def mix_data(short_hit: float, **ops) -> dict:
    """60% short chat turns (hit rate `short_hit`) beside 40% 8K RAG prompts (hit rate 0.1),
    Llama-3.3-70B FP8 on 16 H200 over 400G InfiniBand, p99 TTFT 1.5 s: the calculator's best
    layout is conditional with T between the classes. (At the 3 s it had on the roofline, the
    fitted physics' faster prefill sends nearly every prompt to the prefill pool: T 752, 1.006x
    over always-split.)"""
    short = {
        "share": 0.6,
        "prompt_tokens": {"p50": 600, "p99": 2000},
        "output_tokens": {"p50": 300, "p99": 800},
        "prefix_cache_hit_rate": short_hit,
    }
    return {
        "name": f"mix-hit-{short_hit}",
        "model": "llama-3.3-70b",
        "weights_dtype": "fp8",
        "kv_cache_dtype": "fp8",
        "engine": "vllm",
        "traffic": {"requests_per_second": 3, "classes": [short, LONG]},
        "slo": {"ttft_ms": 1500, "tpot_ms": 10},
        "cluster": {
            "gpu": "h200",
            "gpus": 16,
            "gpus_per_node": 8,
            "network": "ib-ndr-400",
            "kubernetes": ops.pop("kubernetes", True),
        },
        "ops": {"maturity": "high", "orchestrator_preference": "any", **ops},
    }


def mix(short_hit: float, **ops) -> Workload:
    return load_workload_text(yaml.safe_dump(mix_data(short_hit, **ops)), source="test")


@functools.cache
def verdict(short_hit: float, pref: str = "any", kubernetes: bool = True, margin=None):
    w = mix(short_hit, orchestrator_preference=pref, kubernetes=kubernetes)
    over = {} if margin is None else {"conditional_margin": margin}
    return w, decide(w, overrides=over)


def _lognormal_cdf(x: float, p50: float, p99: float) -> float:
    sigma = math.log(p99 / p50) / 2.3263478740408408
    return 0.5 * (1 + math.erf(math.log(x / p50) / (sigma * math.sqrt(2))))


def _ids(v) -> set[str]:
    return {f.id for f in v.fired_rules}


def test_cold_local_share_is_the_cold_classes_share_below_the_threshold() -> None:
    w, v = verdict(0.0)
    k = v.conditional
    assert k.layout == "conditional" and 600 < k.threshold_tokens < 8192
    expected = 0.6 * _lognormal_cdf(k.threshold_tokens, 600, 2000)  # the long class is warm
    assert v.metrics.conditional_cold_local_share == pytest.approx(expected, rel=1e-9)
    assert cold_local_share(w, k) == pytest.approx(expected, rel=1e-9)
    assert expected > 0.55  # nearly every short prompt is kept local, all of them cold


def test_warm_classes_pass_dynamos_ratio_check() -> None:
    w, v = verdict(0.3)
    assert v.layout == "conditional"
    assert v.metrics.conditional_cold_local_share == 0.0
    assert v.dynamo_layout == "conditional"
    # no conditional layout, no share
    assert cold_local_share(w, v.conditional.model_copy(update={"layout": "disaggregated"})) is None
    assert dynamo_layout("conditional", 0.049, 0.05) == "conditional"
    assert dynamo_layout("conditional", 0.05, 0.05) == "disaggregated"
    assert dynamo_layout("colocated", 0.9, 0.05) == "colocated"


def test_cold_mix_on_dynamo_presents_the_always_split_pools_and_says_why() -> None:
    _, v = verdict(0.0)
    assert v.decision == "dynamo" and v.layout == "conditional"
    assert v.dynamo_layout == "disaggregated"
    assert "DSG018" in _ids(v) and "ORC009" not in _ids(v)  # gain 1.08x < conditional_margin
    d = v.disaggregated
    assert v.summary.startswith(
        f"Deploy on NVIDIA Dynamo: {d.prefill_replicas} prefill x {d.prefill_layout} + "
        f"{d.decode_replicas} decode x {d.decode_layout} ({d.gpus} GPUs), every request"
    )
    assert "nothing cached" in v.summary and "prefix-based-pd-decider" in v.summary
    assert "routing prompts above" not in v.summary.split(". Why:")[0]


def test_warm_mix_on_dynamo_keeps_the_conditional_plan() -> None:
    _, v = verdict(0.3)
    assert v.decision == "dynamo" and "DSG018" not in _ids(v)
    assert "routing prompts above" in v.summary.split(". Why:")[0]


def test_orc009_moves_a_material_gain_to_llm_d_unless_the_team_wants_dynamo() -> None:
    _, free = verdict(0.0, margin=1.05)  # the layout's 1.08x gain now counts as material
    assert "ORC009" in _ids(free) and free.decision == "llm-d"
    assert free.scores["llm-d"] == 1.0 and free.scores["dynamo"] == 0.0
    assert "routing prompts above" in free.summary.split(". Why:")[0]  # llm-d: conditional
    _, managed = verdict(0.0, pref="managed-stack", margin=1.05)
    assert managed.decision == "dynamo" and managed.dynamo_layout == "disaggregated"
    _, bare = verdict(0.0, kubernetes=False, margin=1.05)
    assert bare.decision == "dynamo"  # ORC008: llm-d needs Kubernetes
    assert bare.summary.startswith("Deploy on NVIDIA Dynamo: ")
    assert "every request prefilled on the prefill pool" in bare.summary.split(". Why:")[0]
    # the conditional figures are the calculator's, whoever runs them
    assert managed.conditional == free.conditional


def _frontend_args(files: dict[str, str]) -> list[str]:
    doc = yaml.safe_load(files["dynamo-graph.yaml"])
    comps = {c["type"]: c for c in doc["spec"]["components"]}
    return comps["frontend"]["podTemplate"]["spec"]["containers"][0]["args"], comps


def test_deploy_dynamo_cold_emits_always_split_pools_and_warns() -> None:
    w, v = verdict(0.0)
    bundle = build(w, v, "dynamo")
    args, comps = _frontend_args(bundle.files)
    assert not any("conditional-disagg" in a for a in args)
    assert bundle.plan.threshold_tokens == 0
    pools = deployed(w, v, "dynamo")
    assert pools.threshold == 0 and pools.prefill_replicas == v.sizing.prefill_replicas
    assert comps["prefill"]["replicas"] == v.sizing.prefill_replicas
    assert comps["decode"]["replicas"] == v.sizing.decode_replicas
    assert [p.replicas for p in bundle.plan.pools] == [
        v.sizing.prefill_replicas,
        v.sizing.decode_replicas,
    ]
    warning = next(x for x in bundle.warnings if x.startswith("Dynamo's router cannot run"))
    assert "nothing cached" in warning and "--target llm-d" in warning and "isl_or_load" in warning
    readme = bundle.files["README.md"]
    shown = inline(warning)  # the README escapes warnings like all other generated text
    assert shown in readme and "cache-cold prompts local, which Dynamo's router cannot" in readme
    assert "so the verdict's absolute threshold decides" not in readme  # the old false claim


def test_deploy_llm_d_cold_keeps_the_conditional_layout() -> None:
    w, v = verdict(0.0)
    bundle = build(w, v, "llm-d")
    epp = yaml.safe_load(bundle.files["epp-config.yaml"])
    decider = next(p for p in epp["plugins"] if p["type"] == "prefix-based-pd-decider")
    assert decider["parameters"]["nonCachedTokens"] == v.conditional.threshold_tokens
    assert bundle.plan.pools[0].replicas == v.conditional.prefill_replicas
    assert not any(x.startswith("Dynamo's router") for x in bundle.warnings)


def test_deploy_dynamo_warm_emits_the_threshold_and_the_true_ratio_note() -> None:
    w, v = verdict(0.3)
    bundle = build(w, v, "dynamo")
    args, _ = _frontend_args(bundle.files)
    cfg = json.loads(args[args.index("--router-conditional-disagg-config") + 1])
    assert cfg == {
        "policy": "isl_bounding",
        "eff_isl_threshold": v.conditional.threshold_tokens,
        "eff_isl_ratio_threshold": 1.0,
    }
    assert [p.replicas for p in bundle.plan.pools] == [
        v.conditional.prefill_replicas,
        v.conditional.decode_replicas,
    ]
    readme = bundle.files["README.md"]
    assert "a prompt with nothing cached always goes to the prefill pool" in readme
    assert not any(x.startswith("Dynamo's router cannot run") for x in bundle.warnings)


def test_deploy_cli_says_it_on_stderr(tmp_path) -> None:
    from tests.conftest import run_cli

    path = tmp_path / "cold.yaml"
    path.write_text(yaml.safe_dump(mix_data(0.0)))
    out = tmp_path / "out"
    r = run_cli("deploy", "--workload", str(path), "--target", "dynamo", "--out-dir", str(out))
    assert r.returncode == 0, r.stderr
    assert "Dynamo's router cannot run" in " ".join(r.stderr.split())
    assert "--router-conditional-disagg" not in (tmp_path / "out" / "dynamo-graph.yaml").read_text()


def test_report_and_terminal_label_the_always_split_pools_as_the_dynamo_plan() -> None:
    import io

    from rich.console import Console

    from disagg_decider.render.report import render_report
    from disagg_decider.verdict_text import print_verdict
    from disagg_decider.workload import resolve

    w, v = verdict(0.0)
    report = render_report(v, resolve(w))
    assert "**Prefill pool (always-disaggregated: the plan on Dynamo" in report
    assert "the conditional layout below is the plan" not in report
    share = round(100 * v.metrics.conditional_cold_local_share)
    assert f"Not the Dynamo plan: it prefills {share}% of requests locally" in report
    assert "eff_isl_threshold" not in report  # no router config for a layout it cannot route
    out = io.StringIO()
    print_verdict(v, Console(file=out, width=80, color_system=None))
    text = " ".join(out.getvalue().split())
    assert "on Dynamo the always-disaggregated pools: its router sends prompts" in text
    assert max(len(line) for line in out.getvalue().splitlines()) <= 80
    # warm: the conditional layout is the Dynamo plan, with the ratio the deploy emits
    w2, v2 = verdict(0.3)
    warm = render_report(v2, resolve(w2))
    assert '"eff_isl_ratio_threshold":1.0' in warm and "the plan on Dynamo" not in warm
