"""Where every number in a verdict comes from: the workload, the catalog, a calibration file...

A platform engineer acting on a verdict must tell a figure they gave (the rate) from one the
tool looked up (a GPU's bandwidth), one it assumed (an efficiency the workload left out), one a
calibration file set, and one the calculator computed from all of those. `provenance` labels
each numeric leaf of the verdict's JSON by its generalised path (list indices dropped:
`conditional.curve[].goodput_per_gpu`), from one declarative table (`FIELDS`) and the verdict's
actual inputs. A leaf the table does not know gets no label, so a new numeric field added
without one fails `tests/test_provenance.py` instead of being labelled by a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from disagg_decider.verdict import Provenance, Verdict
from disagg_decider.workload import Efficiency, Workload

Source = Literal[
    "workload",  # the workload file (or the MCP call) gave it
    "catalog",  # the shipped GPU, model or link catalog
    "calibrated",  # a calibration file from `decide calibrate`
    "silicon",  # measured kernel times (step_source: silicon)
    "fitted",  # the physics table fitted to measured silicon (calc/step_fit.json)
    "default",  # a default the tool filled in where the workload said nothing
    "rulebook",  # a rule's parameter or weight as shipped (or from --rules)
    "override",  # a rule parameter the workload's overrides: or --set changed
    "benchmark",  # a measured error figure shipped with the tool (calc/error_bands.json)
    "derived",  # computed by the calculator or the rule engine from the sources above
]
SOURCES: tuple[str, ...] = get_args(Source)


def _fitted_names() -> frozenset[str]:
    """Efficiency constants whose defaults come from the fitted physics table
    (`calc/step_fit.json`, the default physics) rather than a plain default."""
    from disagg_decider.catalog.step_fit import _table

    return frozenset(name for fit in _table()["fits"] for name in fit["constants"])


FITTED_DEFAULTS: frozenset[str] = _fitted_names()

_DERIVED = "derived"
# The chosen plan and each alternative are the same model (plan.Plan, plan.Pool).
_PLAN_FIELDS = (
    "gpus gpus_needed_for_rate max_rate_per_s threshold_tokens share_to_prefill chunk_tokens "
    "cost_per_year_usd cost_per_million_tokens_usd"
)
_POOL_FIELDS = "replicas tp dp ep gpus"
# Blocks whose numeric fields the calculator computes, field by field: a field not listed here
# is unlabelled (and the property test fails) until someone says where it comes from.
_COMPUTED = {
    "metrics": (
        "kv_bytes_per_token kv_bytes_per_request kv_transfer_ms kv_transfer_serialized_ms "
        "kv_transfer_layerwise_ms kv_transfer_gb_per_s effective_prompt_tokens "
        "goodput_per_gpu_colocated goodput_per_gpu_disaggregated gain crossover_prompt_tokens "
        "conditional_cold_local_share"
    ),
    "sizing": (
        "prefill_gpus decode_gpus colocated_gpus prefill_replicas decode_replicas "
        "colocated_replicas prefill_tp decode_tp colocated_tp prefill_dp decode_dp colocated_dp "
        "prefill_ep decode_ep colocated_ep decode_max_batch colocated_max_batch "
        "colocated_chunk_tokens"
    ),
    "colocated": (
        "gpus gpus_needed_for_rate max_rate_per_s goodput_per_gpu ttft_p99_ms tpot_p99_ms "
        "cost_per_million_tokens_usd cost_per_year_usd tp dp ep replicas chunk_tokens max_batch"
    ),
    "disaggregated": (
        "gpus gpus_needed_for_rate max_rate_per_s goodput_per_gpu ttft_p99_ms tpot_p99_ms "
        "cost_per_million_tokens_usd cost_per_year_usd prefill_tp decode_tp prefill_dp "
        "decode_dp prefill_ep decode_ep prefill_replicas decode_replicas prefill_gpus "
        "decode_gpus max_batch transfer_ms_p99"
    ),
    "conditional": (
        "threshold_tokens share_to_prefill max_rate_per_s goodput_per_gpu prefill_tp decode_tp "
        "prefill_replicas decode_replicas chunk_tokens ttft_p99_ms tpot_p99_ms "
        "pooled_ttft_p99_ms local_ttft_p99_ms gain_over_colocated gain_over_disaggregated"
    ),
    "conditional.curve[]": "threshold_tokens goodput_per_gpu share_to_prefill",
    "interactivity_band": (
        "low_tokens_per_s_per_user high_tokens_per_s_per_user target_tokens_per_s_per_user"
    ),
    "plan": _PLAN_FIELDS,
    "plan.pools[]": _POOL_FIELDS,
    "alternatives[]": _PLAN_FIELDS,
    "alternatives[].pools[]": _POOL_FIELDS,
    "confidence": "gain margin distance_in_error_bands",
    "confidence.cliff": "threshold_tokens",
    "confidence.cliff.neighbours[]": "threshold_tokens goodput_ratio",
}


_COMPUTED_SETS = {block: frozenset(names.split()) for block, names in _COMPUTED.items()}


@dataclass(frozen=True)
class Inputs:
    """What a verdict rests on beyond its own JSON: which inputs came from where."""

    workload: Workload  # as the user gave it, before any calibration file was applied
    calibrated: frozenset[str] = frozenset()  # efficiency fields a calibration file set
    overridden: frozenset[str] = frozenset()  # rule parameters overrides: or --set changed
    silicon: bool = False  # step times from measured kernels (step_source silicon, used)


def labelled(
    v: Verdict, given: Workload, *, calibrated: bool, overrides: Mapping[str, Any]
) -> Verdict:
    """The verdict with `provenance`, set on `v` itself (the pipeline's own verdict, fresh:
    a copy of a whole verdict costs more than its labels). `given` is the workload before a
    calibration file was applied (`calibrated`: one matched), `overrides` the `--set` (or
    MCP) parameter values."""
    labelled_json(v, given, calibrated=calibrated, overrides=overrides)
    return v


def labelled_json(
    v: Verdict, given: Workload, *, calibrated: bool, overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """`labelled`, returning the verdict's JSON (`v.model_dump(mode="json")`, the same keys in
    the same order): the labels are read off the verdict's JSON anyway, so a front end that
    writes JSON (`decide batch`) takes it from here instead of dumping the verdict again."""
    inputs = Inputs(
        workload=given,
        calibrated=_calibrated_fields(given) if calibrated else frozenset(),
        overridden=frozenset(given.overrides) | frozenset(overrides),
        silicon=v.step_source == "silicon",
    )
    doc = v.model_dump(mode="json", exclude={"provenance"})
    fields, sources = _shape_labels(doc, inputs), _shared_inputs(inputs)
    # Not validated again: both are str -> str dicts built here (validating ~150 labels cost
    # five times the copies). The verdict's are its own copies, which a caller may change.
    v.provenance = Provenance.model_construct(fields=dict(fields), inputs=dict(sources))
    # `provenance` is the verdict's last field: its JSON's last key. Its two dicts are the
    # `Shared` ones every verdict with these labels gets (a batch writes their text once).
    doc["provenance"] = {"fields": fields, "inputs": sources}
    return doc


class Shared(dict):
    """Labels that every verdict with them shares in `labelled_json`'s docs: a shape's
    `fields`, an input set's `inputs`. Read them, never change them: they are kept for the
    next verdict. `texts` keeps their JSON text per layout, for a writer that meets the same
    labels in every row (`batch_json`: ~6 KB of a verdict's ~18 KB, in a few dozen kinds)."""

    __slots__ = ("texts",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.texts: dict[Any, str] = {}


def _calibrated_fields(given: Workload) -> frozenset[str]:
    """The efficiency constants a calibration file sets: those the workload left to it."""
    from disagg_decider.calibrate.apply import FIELDS

    explicit = given.efficiency.model_fields_set
    return frozenset(f for f in FIELDS if f not in explicit)


def _fixed(inputs: Inputs, doc: dict[str, Any]) -> dict[str, str]:
    """Labels that depend on the verdict's inputs, for paths outside `_COMPUTED`."""
    steps = "silicon" if inputs.silicon else _DERIVED
    band = "override" if "min_gain" in inputs.overridden else "rulebook"
    return {
        "conditional_disagg_threshold_tokens": _DERIVED,
        "sizing.cluster_gpus": "workload",
        "metrics.prefill_ms": steps,
        "metrics.decode_step_ms": steps,
        "fired_rules[].weight": "rulebook",
        "fired_rules[].compared[].actual": _DERIVED,
        "fired_rules[].compared[].threshold": "override" if inputs.overridden else "rulebook",
        "interactivity_band.margin": band,
        "interactivity_band.grid_low_tokens_per_s_per_user": "default",
        "interactivity_band.grid_high_tokens_per_s_per_user": "default",
        "interactivity_band.grid_points": "default",
        "confidence.threshold": _param_source(inputs, (doc.get("confidence") or {}).get("param")),
        "confidence.error_band_low": "benchmark",
        "confidence.error_band_high": "benchmark",
        "confidence.cliff.drop_share": "benchmark",
    }


def _param_source(inputs: Inputs, param: str | None) -> str:
    return "override" if param in inputs.overridden else "rulebook"


_PARAM = "param"  # a rule parameter's label: the rulebook's, or an override's (per verdict)
_THRESHOLDS_AT = len("thresholds.")


def _table_label(path: str) -> str | None:
    """The label `_COMPUTED` and the block rules give `path`, whatever the verdict's inputs
    (`_PARAM` where the inputs decide it): the same for every verdict, so `field_labels`
    keeps it per path in `_TABLE_LABELS` instead of re-deriving it for every leaf."""
    block, _, name = path.rpartition(".")
    if name in _COMPUTED_SETS.get(block, ()):
        return _DERIVED
    if block == "thresholds":  # every entry is a rule parameter, by construction
        return _PARAM
    if block == "scores":  # every entry is a rule engine's sum of weights
        return _DERIVED
    if path.startswith("assumptions[].value"):  # the value, or any number inside it
        return "default"  # an assumption is a default filled in, by definition
    return None


# `_table_label` per generalised path. The paths are the verdict schema's plus the rulebook's
# parameter and rule names, so few; the cap only keeps a long-lived server with ever new
# `--rules` files from growing it without bound.
_TABLE_LABELS: dict[str, str | None] = {}
_TABLE_LABELS_MAX = 4096


def numeric_paths(doc: Any) -> set[str]:
    """Each int/float leaf's generalised JSON path (booleans are not numbers here)."""
    out: dict[str, None] = {}
    _numeric_into(doc, "", out)
    return set(out)


def _numeric_into(node: Any, path: str, out: dict[str, None]) -> None:
    """`numeric_paths` into `out`'s keys. A batch labels every verdict, so the walk tests a
    leaf's exact type (JSON from `model_dump(mode="json")` has only plain types; anything else
    falls back to `isinstance`) and recurses only into containers: a few hundred leaves cost
    no call each. A dict's entries and a list's items are walked in loops of their own (one
    list entry's path serves all its items), with no list of (path, value) pairs built."""
    kind = type(node)
    if kind is dict:
        prefix = f"{path}." if path else ""
        for key, value in node.items():
            leaf = type(value)
            if leaf is float or leaf is int:
                out[prefix + key] = None
            elif leaf is dict or leaf is list:
                _numeric_into(value, prefix + key, out)
            elif leaf is not str and leaf is not bool and value is not None and _is_number(value):
                out[prefix + key] = None
    elif kind is list:
        at = f"{path}[]"
        for value in node:
            leaf = type(value)
            if leaf is float or leaf is int:
                out[at] = None
            elif leaf is dict or leaf is list:
                _numeric_into(value, at, out)
            elif leaf is not str and leaf is not bool and value is not None and _is_number(value):
                out[at] = None
    elif _is_number(node):
        out[path] = None


def _is_number(node: Any) -> bool:
    return isinstance(node, (int, float)) and not isinstance(node, bool)


def field_labels(doc: dict[str, Any], inputs: Inputs) -> dict[str, str]:
    """Every numeric leaf of the verdict's JSON that the table knows, with its source.

    The labels depend only on which paths hold numbers and on the inputs `_labels_of` reads
    (steps from silicon, the overridden parameters, the confidence's parameter), and a batch's
    verdicts come in a few dozen shapes: so they are kept per shape in `_SHAPE_LABELS`."""
    return dict(_shape_labels(doc, inputs))


def _shape_labels(doc: dict[str, Any], inputs: Inputs) -> Shared:
    """`field_labels`, the kept dict itself (`Shared`: not to be changed)."""
    found: dict[str, None] = {}
    _numeric_into(doc, "", found)
    param = (doc.get("confidence") or {}).get("param")
    key = (tuple(found), inputs.silicon, inputs.overridden, param)
    return _kept(_SHAPE_LABELS, key, lambda: _labels_of(found, inputs, doc))


def _kept(table: dict[Any, Shared], key: Any, labels: Callable[[], dict[str, str]]) -> Shared:
    """`table[key]`, or the `labels()` made `Shared` and kept there while the table is under
    its cap (a long-lived server's table stays bounded)."""
    out = table.get(key)
    if out is None:
        out = Shared(labels())
        if len(table) < _SHAPE_LABELS_MAX:
            table[key] = out
    return out


# `_labels_of` per (numeric paths in walk order, silicon, overridden parameters, confidence
# parameter): what it reads. The walk order of one set of paths is the verdict schema's, so
# a shape is one entry; ~45 for 2,000 workloads of the seeded mix. The cap bounds a long-lived
# server's table (an entry is ~130 short strings).
_SHAPE_LABELS: dict[tuple[Any, ...], Shared] = {}
_SHAPE_LABELS_MAX = 512


def _labels_of(found: dict[str, None], inputs: Inputs, doc: dict[str, Any]) -> dict[str, str]:
    """The labels of `found`'s paths, sorted: this verdict's fixed labels (`_fixed`) first,
    then the table's per path (`_table_label`, kept in `_TABLE_LABELS`), a rule parameter's
    resolved against the verdict's overrides."""
    fixed = _fixed(inputs, doc)
    out: dict[str, str] = {}
    for path in sorted(found):
        if path in fixed:
            out[path] = fixed[path]
            continue
        if path in _TABLE_LABELS:
            source = _TABLE_LABELS[path]
        else:
            source = _table_label(path)
            if len(_TABLE_LABELS) < _TABLE_LABELS_MAX:
                _TABLE_LABELS[path] = source
        if source is _PARAM:
            source = _param_source(inputs, path[_THRESHOLDS_AT:])
        if source is not None:
            out[path] = source
    return out


def input_labels(inputs: Inputs) -> dict[str, str]:
    """What the derived figures rest on: the model, GPU, link, efficiency constants, steps."""
    return _inputs_of(_input_key(inputs))


def _input_key(inputs: Inputs) -> tuple[Any, ...]:
    """Everything `input_labels` reads of the inputs: a batch's workloads share a few."""
    w = inputs.workload
    given = w.model_fields_set
    explicit = w.efficiency.model_fields_set if "efficiency" in given else ()
    return (
        isinstance(w.model, str),
        _network(w, w.cluster.model_fields_set),
        "cost" in given and _cost_set(w),
        frozenset(explicit),
        inputs.calibrated,
        inputs.silicon,
    )


def _inputs_of(key: tuple[Any, ...]) -> dict[str, str]:
    catalog_model, network, cost_set, explicit, calibrated, silicon = key
    out = {
        "model": "catalog" if catalog_model else "workload",
        "gpu": "catalog",
        "traffic": "workload",
        "slo": "workload",
        "cluster.gpus": "workload",
        "cluster.network": network,
        "cost.usd_per_gpu_hour": _given(cost_set),
    }
    for name in Efficiency.model_fields:
        out[f"efficiency.{name}"] = _efficiency(name, explicit, calibrated)
    out["step_times"] = "silicon" if silicon else _DERIVED
    return out


def _shared_inputs(inputs: Inputs) -> Shared:
    """`input_labels`, kept per `_input_key` (`Shared`: not to be changed)."""
    key = _input_key(inputs)
    return _kept(_INPUT_LABELS, key, lambda: _inputs_of(key))


# `input_labels` per `_input_key`: a handful for a fleet (which constants each file sets).
_INPUT_LABELS: dict[tuple[Any, ...], Shared] = {}


def _network(w: Workload, cluster_set: set[str]) -> str:
    if "network" not in cluster_set:
        return "default"
    return "catalog" if isinstance(w.cluster.network, str) else "workload"


def _cost_set(w: Workload) -> bool:
    return "usd_per_gpu_hour" in w.cost.model_fields_set


def _given(given: bool) -> str:
    return "workload" if given else "default"


def _efficiency(name: str, explicit: frozenset[str], calibrated: frozenset[str]) -> str:
    if name in explicit:
        return "workload"
    if name in calibrated:
        return "calibrated"
    return "fitted" if name in FITTED_DEFAULTS else "default"
