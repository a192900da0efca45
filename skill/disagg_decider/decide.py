"""The pipeline behind every front end: workload -> calculator -> rulebook -> Verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from disagg_decider.assumptions import assumed
from disagg_decider.calc.compare import analyze_banded
from disagg_decider.calc.modes.local_prefill_share import cold_local_share, dynamo_layout
from disagg_decider.calc.result import Analysis
from disagg_decider.confidence import confidence
from disagg_decider.gcpause import paused_collector
from disagg_decider.interactivity import (
    DEFAULT_MARGIN,
    GainCurve,
    band_curves,
    band_tpot_ms,
    on_basis,
)
from disagg_decider.metrics import metric_values
from disagg_decider.plan import plans, price_inputs
from disagg_decider.plan_text import (
    close_call_sentence,
    next_steps,
    step_inputs,
)
from disagg_decider.provenance import labelled, labelled_json
from disagg_decider.rules import engine
from disagg_decider.rules.loader import LoadedRulebook, apply_overrides, load_files, with_extra
from disagg_decider.summary_text import summarize
from disagg_decider.verdict import Metrics, PricedDtypes, Sizing, Verdict
from disagg_decider.workload import Resolved, Workload, load_workload, resolve


def decide(
    workload: Workload,
    *,
    base_dir: Path | None = None,
    rule_files: Sequence[Path] = (),
    overrides: Mapping[str, Any] | None = None,
    overrides_source: str = "--set",
    rulebook: LoadedRulebook | None = None,
    calibration: Path | None = None,
) -> Verdict:
    """`overrides` (from `--set`, or an MCP call) apply after the workload's `overrides:` block.

    `overrides_source` names where they came from in messages and in `overrides_applied`.
    `rulebook` replaces the shipped rulebook (`decide render --rules-dir`); `rule_files` are
    merged on top of whichever rulebook is used.
    """
    return decide_many(
        [workload],
        base_dir=base_dir,
        rule_files=rule_files,
        overrides=overrides,
        overrides_source=overrides_source,
        rulebook=rulebook,
        calibration=calibration,
    )[0]


def decide_many(
    workloads: Sequence[Workload],
    *,
    base_dir: Path | Sequence[Path | None] | None = None,
    rule_files: Sequence[Path] = (),
    overrides: Mapping[str, Any] | None = None,
    overrides_source: str = "--set",
    rulebook: LoadedRulebook | None = None,
    calibration: Path | None = None,
    band: bool = True,
    provenance: bool = True,
) -> list[Verdict]:
    """One verdict per workload, in order, each equal to `decide` on it alone.

    The calculator searches workloads that share a model, GPU and engine together
    (`calc.compare.analyze_many`), so a sweep costs a fraction of a decision per workload.
    `base_dir` (where relative `hf_config` paths start) may be one folder or one per workload.
    `calibration` (`--calibration`) replaces each workload's own `calibration:` file.
    `band=False` leaves `interactivity_band` null: `decide frontier` sweeps the targets itself.
    `provenance=False` leaves `provenance` null, for a front end that shows none (the CSV
    and table rows of `decide batch`): the labels cost as much as the rulebook.
    """
    with paused_collector():
        verdicts, calibrated = _unlabelled(
            workloads,
            base_dir=base_dir,
            rule_files=rule_files,
            overrides=overrides,
            overrides_source=overrides_source,
            rulebook=rulebook,
            calibration=calibration,
            band=band,
        )
        if not provenance:
            return verdicts
        return [
            labelled(v, w, calibrated=bool(c.notes), overrides=overrides or {})
            for v, w, c in zip(verdicts, workloads, calibrated, strict=True)
        ]


def decide_many_json(
    workloads: Sequence[Workload], **options: Any
) -> list[tuple[Verdict, dict[str, Any]]]:
    """`decide_many`'s verdicts, each with its JSON (`model_dump(mode="json")`), for a front
    end that writes JSON (`decide batch`): labelling the verdict dumps it already."""
    overrides = options.get("overrides") or {}
    with paused_collector():
        verdicts, calibrated = _unlabelled(workloads, **options)
        return [
            (v, labelled_json(v, w, calibrated=bool(c.notes), overrides=overrides))
            for v, w, c in zip(verdicts, workloads, calibrated, strict=True)
        ]


def _unlabelled(
    workloads: Sequence[Workload],
    *,
    base_dir: Path | Sequence[Path | None] | None = None,
    rule_files: Sequence[Path] = (),
    overrides: Mapping[str, Any] | None = None,
    overrides_source: str = "--set",
    rulebook: LoadedRulebook | None = None,
    calibration: Path | None = None,
    band: bool = True,
) -> tuple[list[Verdict], list[Any]]:
    """`decide_many`'s verdicts before `labelled`, with each workload's calibration
    (`calibrate.apply.Applied`), which labelling reads."""
    if base_dir is None or isinstance(base_dir, Path):
        base_dirs: Sequence[Path | None] = [base_dir] * len(workloads)
    else:
        base_dirs = base_dir
    if rulebook is None:
        loaded = with_extra(list(rule_files))
    else:
        loaded = load_files(list(rule_files), seed=rulebook) if rule_files else rulebook
    calibrated = [_calibrated(w, d, calibration) for w, d in zip(workloads, base_dirs, strict=True)]
    resolved = [resolve(c.workload, d) for c, d in zip(calibrated, base_dirs, strict=True)]
    # The band's TPOT targets ride in the decision's own search (`analyze_banded`).
    found, searched = analyze_banded(resolved, band_tpot_ms() if band else ())
    analyses = [on_basis(r, a) for r, a in zip(resolved, found, strict=True)]
    curves = band_curves(resolved, analyses, searched) if band else [None] * len(resolved)
    verdicts = [
        _verdict(loaded, r, a, overrides or {}, overrides_source, curve)
        for r, a, curve in zip(resolved, analyses, curves, strict=True)
    ]
    # Each verdict is this call's own, fresh from `_verdict`: filled in where it stands
    # (a copy per field set costs more than the verdict's rules).
    for v, c, r in zip(verdicts, calibrated, resolved, strict=True):
        if c.notes or c.warnings or r.workload.slo.basis != "p99-under-load":
            v.calibration = c.notes
            v.warnings = [*v.warnings, *c.warnings]
            v.slo_basis = r.workload.slo.basis
    return verdicts, calibrated


def _calibrated(workload: Workload, base_dir: Path | None, cli: Path | None):
    """The workload with its calibration file's constants (calibrate/apply.py)."""
    from disagg_decider.calibrate.apply import Applied, apply_calibration, calibration_path

    path = calibration_path(workload, base_dir, cli)
    if path is None:
        return Applied(workload, [], [])
    return apply_calibration(workload, path)


def _verdict(
    loaded: LoadedRulebook,
    resolved: Resolved,
    analysis: Analysis,
    overrides: Mapping[str, Any],
    overrides_source: str,
    curve: GainCurve | None = None,
) -> Verdict:
    workload = resolved.workload
    params, notes = effective_parameters(loaded, workload, overrides, overrides_source)
    if curve is not None:  # the analysis is this decision's own (`decide_many`)
        analysis.interactivity_band = curve.band(float(params.get("min_gain", DEFAULT_MARGIN)))
    metrics = metric_values(resolved, analysis, engine.metrics_read(loaded.book))
    outcome = engine.decide(loaded.book, metrics, params)
    chosen = analysis.colocated if outcome.decision == "colocate" else analysis.disaggregated
    layout = analysis.conditional.layout if analysis.conditional else "colocated"
    cold = cold_local_share(workload, analysis.conditional)
    on_dynamo = dynamo_layout(layout, cold, params.get(MATERIAL_COLD, DEFAULT_MATERIAL_COLD))
    threshold = analysis.conditional_disagg_threshold_tokens
    if not _anything_feasible(analysis):
        # No layout meets the targets: name none, rather than the search's last candidate
        # ("disaggregated", threshold 0), which reads as a plan.
        layout, on_dynamo, threshold = "none", "none", None
    step_source = _step_source(resolved, analysis.warnings)
    verdict = Verdict(
        workload=workload.name,
        model=resolved.model.id,
        gpu=resolved.gpu.id,
        decision=outcome.decision,
        disaggregate=outcome.decision != "colocate",
        feasible=chosen.feasible,
        summary="",
        fired_rules=outcome.fired,
        scores=outcome.scores,
        metrics=_metrics(analysis, cold),
        sizing=_sizing(analysis, workload.cluster.gpus),
        colocated=analysis.colocated,
        disaggregated=analysis.disaggregated,
        conditional_disagg_threshold_tokens=threshold,
        layout=layout,
        conditional=analysis.conditional,
        dynamo_layout=on_dynamo,
        limits=analysis.limits,
        thresholds=params,
        overrides_applied=notes,
        assumptions=assumed(workload, resolved.efficiency_from),
        dtypes=PricedDtypes(
            weights=workload.priced_weights_dtype,
            kv_cache=workload.kv_dtype,
            source=resolved.dtypes_from,
        ),
        interactivity_band=analysis.interactivity_band,
        # Given, not defaulted: pydantic deep-copies a list default for every verdict.
        calibration=[],
        alternatives=[],
        next_steps=[],
        confidence=confidence(
            outcome.fired,
            analysis.gain,
            analysis.conditional if layout != "none" else None,
            outcome.deciding_veto,
        ),
        **{"warnings": analysis.warnings, **step_source},
    )
    plan, alternatives = plans(verdict, price_inputs(resolved))
    # The verdict is built here: its plan, summary and steps are filled in where it stands.
    verdict.plan, verdict.alternatives = plan, alternatives
    summary = summarize(
        resolved,
        analysis,
        outcome,
        cold if on_dynamo != layout else None,
        band_swept=curve is not None,
        plan=plan,
        alternatives=alternatives,
        close_call=close_call_sentence(verdict),
    )
    verdict.next_steps = next_steps(verdict, step_inputs(resolved))
    verdict.summary = summary
    return verdict


def _step_source(resolved: Resolved, warnings: list[str]) -> dict[str, Any]:
    """The verdict's `step_source` and its warnings, for a workload that asks for silicon."""
    if resolved.workload.step_source == "default":
        return {}
    from disagg_decider.calc.physics.silicon_steps import verdict_notes

    used, notes = verdict_notes(resolved)
    return {"step_source": used, "warnings": [*warnings, *notes]}


def _anything_feasible(a: Analysis) -> bool:
    k = a.conditional
    return a.colocated.feasible or a.disaggregated.feasible or (k is not None and k.feasible)


def effective_parameters(
    loaded: LoadedRulebook, workload: Workload, cli: Mapping[str, Any], source: str = "--set"
) -> tuple[dict[str, Any], list[str]]:
    params, notes = apply_overrides(
        loaded, loaded.param_values(), dict(workload.overrides), "workload overrides"
    )
    params, cli_notes = apply_overrides(loaded, params, dict(cli), source)
    return params, notes + cli_notes


# The rulebook parameter that makes a share of cache-cold local prefills material (Dynamo's
# plan then is the always-split pools); its default where a rulebook does not define it.
MATERIAL_COLD = "material_cold_local_share"
DEFAULT_MATERIAL_COLD = 0.05


def _metrics(a: Analysis, cold_local_share: float | None = None) -> Metrics:
    # A model that fits no replica has no prefill or decode time to report.
    loads = not any(x.kind == "memory" and x.mode == "both" for x in a.limits)
    return Metrics(
        kv_bytes_per_token=a.kv_bytes_per_token,
        kv_bytes_per_request=a.kv_bytes_per_request,
        kv_transfer_ms=a.kv_transfer_ms,
        kv_transfer_serialized_ms=a.kv_transfer_serialized_ms,
        kv_transfer_layerwise_ms=a.kv_transfer_layerwise_ms,
        kv_transfer_path=a.kv_transfer_path,
        kv_transfer_gb_per_s=a.kv_transfer_gb_per_s,
        kv_transfer_rdma=a.kv_transfer_rdma,
        prefill_ms=a.prefill_ms if loads else None,
        decode_step_ms=a.decode_step_ms if loads else None,
        effective_prompt_tokens=a.effective_prompt_tokens,
        goodput_per_gpu_colocated=a.colocated.goodput_per_gpu,
        goodput_per_gpu_disaggregated=a.disaggregated.goodput_per_gpu,
        gain=a.gain,
        crossover_prompt_tokens=a.crossover_prompt_tokens,
        conditional_cold_local_share=cold_local_share,
    )


def _sizing(a: Analysis, cluster_gpus: int) -> Sizing:
    c, d = a.colocated, a.disaggregated
    return Sizing(
        cluster_gpus=cluster_gpus,
        prefill_gpus=d.prefill_gpus,
        decode_gpus=d.decode_gpus,
        colocated_gpus=c.gpus,
        prefill_replicas=d.prefill_replicas,
        decode_replicas=d.decode_replicas,
        colocated_replicas=c.replicas,
        prefill_tp=d.prefill_tp,
        decode_tp=d.decode_tp,
        colocated_tp=c.tp,
        prefill_dp=d.prefill_dp,
        decode_dp=d.decode_dp,
        colocated_dp=c.dp,
        prefill_ep=d.prefill_ep,
        decode_ep=d.decode_ep,
        colocated_ep=c.ep,
        decode_max_batch=d.max_batch,
        colocated_max_batch=c.max_batch,
        colocated_chunk_tokens=c.chunk_tokens,
    )


def decide_file(path: Path, **kwargs: Any) -> Verdict:
    return decide(load_workload(path), base_dir=path.parent, **kwargs)
