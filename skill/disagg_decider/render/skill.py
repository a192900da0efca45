"""The skill file an agent loads: the decision procedure, generated from the rulebook.

Two renderings of one body: `outputs/skill-disaggregation-decider.md` (for people and design
docs) and `outputs/disaggregation-decider/SKILL.md` (an Agent Skill: front matter with `name`
equal to its folder and a `description` under 1024 characters). Every rule id, parameter,
threshold, rationale and reference comes from the loaded rulebook, so the skill cannot say
anything `decide` does not do.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from disagg_decider import catalog, metrics
from disagg_decider.render.env import render
from disagg_decider.render.tables import worked_table
from disagg_decider.rules.loader import LoadedRulebook, rule_leaves, rule_parameters
from disagg_decider.rules.schema import Parameter, Rule
from disagg_decider.rules.text import condition_text, effect_text, scalar_text

SKILL_NAME = "disaggregation-decider"
SKILL_FILE = "skill-disaggregation-decider.md"
SKILL_DIR_FILE = f"{SKILL_NAME}/SKILL.md"

DESCRIPTION = (
    "Decides whether to serve an LLM with disaggregated prefill and decode (separate GPU pools "
    "on NVIDIA Dynamo or llm-d) or keep them colocated, for a given workload (model, prompt and "
    "output lengths, request rate, p99 TTFT/TPOT targets, prefix-cache hit rate) and cluster "
    "(GPU type and count, NVLink/RDMA/TCP network, Kubernetes, team maturity). Use it when "
    "someone asks whether to disaggregate or split prefill/decode, how to size prefill and "
    "decode pools and their tensor parallelism, whether the KV-cache transfer pays for itself, "
    "Dynamo versus llm-d, or which conditional-disaggregation threshold to set "
    "(eff_isl_threshold, nonCachedTokens). It runs the `decide` CLI or the "
    "decide_disaggregation MCP tool and explains the verdict with the rulebook's thresholds."
)

DISAGGREGATION_PUSHES = ("colocate", "disaggregate")
ORCHESTRATOR_PUSHES = ("dynamo", "llm-d")


@dataclass(frozen=True)
class ParameterView:
    name: str
    value: str
    unit: str
    doc: str
    source: str
    used_by: tuple[str, ...]


@dataclass(frozen=True)
class RuleView:
    id: str
    name: str
    title: str
    category: str
    veto: bool
    pushes: str
    weight: float
    condition: str
    rationale: str
    references: tuple[tuple[str, str], ...]

    @property
    def effect(self) -> str:
        return effect_text(self.veto, self.weight, self.pushes)


def rule_view(rule: Rule, parameters: dict[str, Parameter]) -> RuleView:
    return RuleView(
        id=rule.id,
        name=rule.name,
        title=rule.title,
        category=rule.category,
        veto=rule.veto is not None,
        pushes=rule.pushes,
        weight=rule.effect.weight if rule.effect else 0.0,
        condition=condition_text(rule.when, parameters),
        rationale=" ".join(rule.rationale.split()),
        references=tuple((r.title, r.url) for r in rule.references),
    )


def parameter_views(loaded: LoadedRulebook) -> list[ParameterView]:
    users: dict[str, list[str]] = {name: [] for name in loaded.book.parameters}
    for rule in loaded.book.rules:
        for name in rule_parameters(rule):
            users[name].append(rule.id)
    return [
        ParameterView(
            name=name,
            value=scalar_text(p.value),
            unit=p.unit,
            doc=p.doc,
            source=p.source,
            used_by=tuple(users[name]),
        )
        for name, p in loaded.book.parameters.items()
    ]


def used_metrics(loaded: LoadedRulebook) -> list[metrics.Metric]:
    """The metrics some rule compares, in the metric table's order."""
    names = {leaf.metric for rule in loaded.book.rules for leaf in rule_leaves(rule)}
    return [m for m in metrics.METRICS if m.name in names]


def rulebook_digest(loaded: LoadedRulebook) -> str:
    """A short content hash: any change to the rulebook changes the skill file's provenance."""
    data = loaded.book.model_dump(mode="json", by_alias=True)
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def skill_context(loaded: LoadedRulebook) -> dict:
    params = loaded.book.parameters
    rules = [rule_view(r, params) for r in loaded.book.rules]
    return {
        "skill_name": SKILL_NAME,
        "description": DESCRIPTION,
        "digest": rulebook_digest(loaded),
        "rule_count": len(rules),
        "parameters": parameter_views(loaded),
        "disaggregation_rules": [r for r in rules if r.pushes in DISAGGREGATION_PUSHES],
        "orchestrator_rules": [r for r in rules if r.pushes in ORCHESTRATOR_PUSHES],
        "colocate_rules": [r for r in rules if r.pushes == "colocate"],
        "advice_rules": [r for r in rules if r.pushes == "advice"],
        "metrics": used_metrics(loaded),
        "worked": worked_table(),
        "catalog_ids": catalog_ids(),
    }


def catalog_ids() -> dict[str, list[str]]:
    """Valid ids for the workload's `model`, `cluster.gpu` and `cluster.network`."""
    tables = {"models": catalog.models(), "gpus": catalog.gpus(), "links": catalog.links()}
    return {kind: list(dict.fromkeys(r.id for r in t.values())) for kind, t in tables.items()}


def render_skill_file(loaded: LoadedRulebook) -> str:
    """`outputs/skill-disaggregation-decider.md`: the body with a title block, no front matter."""
    return render("skill_file.md.j2", **skill_context(loaded))


def render_skill_md(loaded: LoadedRulebook) -> str:
    """`outputs/disaggregation-decider/SKILL.md`: the same body as an Agent Skill."""
    return render("SKILL.md.j2", **skill_context(loaded))
