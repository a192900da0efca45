"""The MCP tools that look things up rather than decide: the catalog's GPUs, models and links with
their figures (`list_catalog`), and one rule of the rulebook with its thresholds and sources
(`explain_rule`). Plain typed functions with no MCP imports, as in `mcp_tools`, whose
`ToolOutput` they return.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from disagg_decider import catalog
from disagg_decider.errors import UserError
from disagg_decider.mcp_tools import Scalar, ToolOutput
from disagg_decider.rules.loader import find_rule, rule_parameters, shipped
from disagg_decider.verdict import Reference, RuleIdentity

# --- list_catalog -----------------------------------------------------------------------------

CatalogKind = Literal["gpus", "models", "links"]

CATALOG_UNITS = (
    "Units are in the field names: _tflops dense 1e12 FLOP/s, hbm_gb 1e9 bytes, _tb_per_s and "
    "_gb_per_s bytes per second (scale-up: one way), _gbps 1e9 bits per second per GPU, _us "
    "microseconds, params_*_b 1e9 parameters. Every record lists its sources."
)


class CatalogListing(ToolOutput):
    units: str
    gpus: list[catalog.Gpu] | None = None
    models: list[catalog.ModelSpec] | None = None
    links: list[catalog.Link] | None = None


def list_catalog(
    kind: Annotated[
        CatalogKind | None,
        Field(description="gpus, models or links; omit for all three."),
    ] = None,
) -> CatalogListing:
    """List the GPUs, models or network links the calculator knows, with their figures
    (peak TFLOPS, HBM size and bandwidth, NVLink and NIC rates; model dimensions, KV heads,
    MoE and MLA shapes; link rates, RDMA, latency, achieved efficiency) and a source per record.

    Call it to find the ids that decide_disaggregation, estimate_kv_transfer and find_crossover
    accept (workload.model, cluster.gpu, cluster.network), or to check a figure. An unknown
    model can still be used through {hf_config: path/to/config.json} in a workload.
    """
    kinds: tuple[CatalogKind, ...] = (kind,) if kind else ("gpus", "models", "links")
    tables = {"gpus": catalog.gpus, "models": catalog.models, "links": catalog.links}
    lists = {k: list({r.id: r for r in tables[k]().values()}.values()) for k in kinds}
    return CatalogListing(units=CATALOG_UNITS, **lists)  # type: ignore[arg-type]


# --- explain_rule -----------------------------------------------------------------------------


class RuleParameterInfo(ToolOutput):
    name: str
    value: Scalar
    unit: str
    doc: str
    source: str
    min: float | None = Field(default=None, description="lowest value an override may take")
    max: float | None = Field(default=None, description="highest value an override may take")


class RuleExplanation(RuleIdentity):
    weight: float | None = Field(
        description="effect weight; null for a veto (which always wins) or advice (which weighs "
        "nothing)"
    )
    when: dict[str, Any] = Field(description="the condition tree: all/any/not over comparisons")
    parameters: list[RuleParameterInfo] = Field(
        description="the named thresholds the rule compares against (override them by name)"
    )
    rationale: str
    references: list[Reference]
    examples: dict[str, Any] = Field(description="metric values on which it fires / is silent")
    rule_file: str


def explain_rule(
    rule_id: Annotated[
        str,
        Field(
            max_length=100,
            description="A rule id such as DSG007 (as in a verdict's fired_rules) or name.",
        ),
    ],
) -> RuleExplanation:
    """Explain one rule of the rulebook: its condition, the parameters (thresholds) it uses with
    their values, units and sources, its rationale and its references.

    Call it when a user asks why a rule fired in a verdict, where a threshold comes from, or
    which parameter to override to test a different assumption. Pass the rule id from
    fired_rules (e.g. DSG007) or its name (e.g. gain-above-minimum).
    """
    loaded = shipped()
    try:
        rule = find_rule(loaded.book, rule_id)
    except UserError as exc:
        raise UserError(f"rule_id: {exc}") from None
    names = rule_parameters(rule)
    params = loaded.book.parameters
    return RuleExplanation(
        id=rule.id,
        name=rule.name,
        title=rule.title,
        category=rule.category,
        kind=rule.kind,
        pushes=rule.pushes,
        weight=rule.effect.weight if rule.effect is not None else None,
        when=rule.model_dump(mode="json", by_alias=True, exclude_none=True)["when"],
        parameters=[RuleParameterInfo(name=n, **params[n].model_dump()) for n in names],
        rationale=rule.rationale.strip(),
        references=[Reference(**ref.model_dump()) for ref in rule.references],
        examples=rule.examples.model_dump(mode="json"),
        rule_file=Path(loaded.origin.get(rule.id, "rulebook")).name,
    )
