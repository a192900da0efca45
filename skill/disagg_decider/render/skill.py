"""The skill an agent loads: the decision procedure, generated from the rulebook.

`outputs/disaggregation-decider/` is an Agent Skill: SKILL.md (front matter with `name` equal
to its folder and a `description` carrying the trigger phrases, then a short body: when to use,
refusal conditions, workflow with its verification gate, which MCP tool when), the reference
files it links to (`references/*.md`: inputs, rules, physics, orchestrators, verdict, examples)
and `evals.yaml` (routing cases). `outputs/skill-disaggregation-decider.md` is the same body
followed by every reference, one page for people and design docs. Every rule id, parameter,
threshold, rationale and reference comes from the loaded rulebook, so the skill cannot say
anything `decide` does not do.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from disagg_decider import catalog, metrics
from disagg_decider.render.env import render
from disagg_decider.render.skill_layout import (
    EVALS_FILE,
    REFERENCES,
    SKILL_DIR_FILE,
    SKILL_FILE,
    SKILL_NAME,
    reference_files,
    reference_path,
)
from disagg_decider.render.tables import worked_table
from disagg_decider.rules.loader import LoadedRulebook, rule_leaves, rule_parameters
from disagg_decider.rules.schema import Parameter, Rule
from disagg_decider.rules.text import condition_text, effect_text, scalar_text

# Phrases that should make an agent load the skill. The description lists them verbatim and
# evals.yaml's router matches them as whole words (tests/test_skill_evals.py): each one must be
# specific to prefill/decode disaggregation, so a word shared with nearby topics ("Dynamo",
# "prefill", "KV cache") is not one.
TRIGGER_PHRASES: tuple[str, ...] = (
    "disaggregate",
    "disaggregation",
    "disaggregated serving",
    "split prefill and decode",
    "prefill/decode",
    "prefill and decode pools",
    "KV-cache transfer",
    "KV transfer",
    "colocated or disaggregated",
    "Dynamo or llm-d",
    "Dynamo vs llm-d",
    "eff_isl_threshold",
    "nonCachedTokens",
)

DESCRIPTION = (
    "Decides whether an LLM serving workload should run prefill and decode on separate GPU pools "
    "(disaggregated serving on NVIDIA Dynamo or llm-d) or stay colocated, sizes the pools and the "
    "conditional-disaggregation threshold, and checks the plan in a simulator, with the `decide` "
    "CLI or its MCP tools. Use it when someone asks whether to disaggregate, how to size prefill "
    "and decode pools, or which orchestrator or threshold to set. Trigger phrases: "
    + ", ".join(f'"{p}"' for p in TRIGGER_PHRASES)
    + ". Needs the model, GPU type and count, traffic and p99 TTFT/TPOT targets; asks for what "
    "is missing; no verdict for hardware or models outside its catalog."
)


@dataclass(frozen=True)
class Refusal:
    """A condition under which the skill gives no verdict (evals.yaml covers each id)."""

    id: str
    when: str
    instead: str


REFUSALS: tuple[Refusal, ...] = (
    Refusal(
        "missing-model",
        "no model is named",
        "ask for it; `list_catalog` with `kind: models` lists the known ones",
    ),
    Refusal(
        "missing-hardware",
        "the GPU type or the GPU count is not given",
        "ask for both, and for GPUs per node and the network",
    ),
    Refusal(
        "unknown-hardware",
        "the GPU (or accelerator) is not in the catalog",
        "say the decider has no figures for it; offer the catalog's GPUs, never substitute "
        "one silently",
    ),
    Refusal(
        "unknown-model",
        "the model is not in the catalog and no Hugging Face `config.json` is given",
        "ask for the config (`model: {hf_config: path}`) or a catalog model",
    ),
    Refusal(
        "missing-traffic",
        "prompt or output lengths (p50, p99) or the request rate are unknown",
        "ask; `decide trace summarize` measures them from request logs",
    ),
    Refusal(
        "missing-targets",
        "no p99 TTFT or TPOT target",
        "ask for both; a default target decides the answer for the user",
    ),
    Refusal(
        "invalid-input",
        "a tool error or exit code 2 names a field",
        "fix that field with the user and call again; never answer from a failed call",
    ),
    Refusal(
        "infeasible",
        "the verdict says `feasible: false`",
        "present no plan: report each of `limits` (memory, context, slo, rate) and what would "
        "lift it",
    ),
)


@dataclass(frozen=True)
class ToolUse:
    """When an agent should call one MCP tool (the server's TOOLS, each covered by evals.yaml)."""

    name: str
    when: str


TOOL_GUIDE: tuple[ToolUse, ...] = (
    ToolUse(
        "decide_disaggregation",
        "first, once the workload is complete: the verdict, fired rules, both modes, pool sizes, "
        "the conditional threshold, limits",
    ),
    ToolUse(
        "find_crossover",
        "the user asks from which prompt length the split pays, or how the gain moves with "
        "prompt length",
    ),
    ToolUse(
        "frontier",
        "the user asks how the answer moves with the per-user speed target (tokens/s per user), "
        "or wants each layout's throughput-interactivity frontier",
    ),
    ToolUse(
        "estimate_kv_transfer",
        "the question is only about KV bytes or transfer time on a link (no full workload needed)",
    ),
    ToolUse(
        "explain_rule",
        "explaining why a rule in `fired_rules` fired, or what a rule id means",
    ),
    ToolUse(
        "list_catalog",
        "checking that a model, GPU or link is known, before refusing `unknown-hardware` or "
        "`unknown-model`",
    ),
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


def _ref_linker(prefix: str):
    """ref(stem) in the templates: the link to a reference file, refusing an unknown stem."""
    stems = {stem for stem, _, _ in REFERENCES}

    def ref(stem: str) -> str:
        if stem not in stems:
            raise KeyError(f"no reference file {stem!r} (known: {sorted(stems)})")
        return prefix + reference_path(stem)

    return ref


def skill_context(loaded: LoadedRulebook, link_prefix: str = "") -> dict:
    """What every skill template renders from; `link_prefix` is where references/ sits."""
    params = loaded.book.parameters
    rules = [rule_view(r, params) for r in loaded.book.rules]
    return {
        "skill_name": SKILL_NAME,
        "ref": _ref_linker(link_prefix),
        "references": REFERENCES,
        "refusals": REFUSALS,
        "tools": TOOL_GUIDE,
        "triggers": TRIGGER_PHRASES,
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


def render_reference(loaded: LoadedRulebook, stem: str) -> str:
    """`references/<stem>.md` of the skill folder."""
    title = next(title for s, title, _ in REFERENCES if s == stem)
    return render(f"skill_ref_{stem}.md.j2", title=title, **skill_context(loaded))


def render_skill_md(loaded: LoadedRulebook) -> str:
    """`outputs/disaggregation-decider/SKILL.md`: front matter and the short body."""
    return render("SKILL.md.j2", **skill_context(loaded))


def render_evals(loaded: LoadedRulebook) -> str:
    """`evals.yaml`: hand-written routing cases under the rendered trigger phrases."""
    return render("evals.yaml.j2", **skill_context(loaded))


def _references(loaded: LoadedRulebook) -> dict[str, str]:
    return {stem: render_reference(loaded, stem) for stem, _, _ in REFERENCES}


def _page(loaded: LoadedRulebook, references: dict[str, str]) -> str:
    """The design-doc page: the body with links into the folder, then every reference."""
    context = skill_context(loaded, link_prefix=f"{SKILL_NAME}/")
    return "\n".join([render("skill_file.md.j2", **context), *references.values()])


def render_skill_file(loaded: LoadedRulebook) -> str:
    """`outputs/skill-disaggregation-decider.md`: the body, then every reference, one page."""
    return _page(loaded, _references(loaded))


def skill_outputs(loaded: LoadedRulebook) -> dict[str, str]:
    """Every generated skill file: path under outputs/ -> text."""
    references = _references(loaded)
    files = {
        SKILL_FILE: _page(loaded, references),
        SKILL_DIR_FILE: render_skill_md(loaded),
        EVALS_FILE: render_evals(loaded),
    }
    paths = reference_files()
    files.update({paths[stem]: text for stem, text in references.items()})
    return files
