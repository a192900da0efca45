"""The skill's routing evals: which questions load the skill, which tools and refusals follow.

`outputs/disaggregation-decider/evals.yaml` holds hand-written questions that should and should
not load the skill. An agent decides to load a skill from its description, so the router here
reads the trigger phrases out of SKILL.md's description (not from the evals file) and matches
them as whole words, case-insensitive: a phrase too broad for the skill ("Dynamo", "prefill")
routes a negative case and fails; a phrase dropped from the description strands a positive one.
The cases must also cover every MCP tool the server registers and every refusal condition
SKILL.md states, and a refusal case must really lack (or name unknown) what it refuses on.
"""

from __future__ import annotations

import re
from functools import cache

import pytest
import yaml

from disagg_decider import catalog, mcp_server
from disagg_decider.errors import UserError
from disagg_decider.render import skill
from disagg_decider.rules.loader import shipped
from tests.conftest import ROOT
from tests.render_helpers import front_matter

SKILL_MD = ROOT / "outputs" / skill.SKILL_DIR_FILE
EVALS = ROOT / "outputs" / skill.EVALS_FILE


@cache
def evals() -> dict:
    return yaml.safe_load(EVALS.read_text(encoding="utf-8"))


@cache
def description() -> str:
    meta, _ = front_matter(SKILL_MD.read_text(encoding="utf-8"))
    return meta["description"]


@cache
def body() -> str:
    return front_matter(SKILL_MD.read_text(encoding="utf-8"))[1]


def description_triggers(text: str) -> list[str]:
    """The quoted phrases after "Trigger phrases:" in a description."""
    _, marker, rest = text.partition("Trigger phrases:")
    assert marker, "the description lists no trigger phrases"
    listed = re.match(r'\s*((?:"[^"]+"(?:,\s*)?)+)', rest)
    assert listed, "no quoted phrases after 'Trigger phrases:'"
    return re.findall(r'"([^"]+)"', listed.group(1))


def contains(text: str, phrase: str) -> bool:
    """Whether `phrase` occurs in `text` as whole words, ignoring case and spacing."""
    words = r"\s+".join(re.escape(w) for w in phrase.split())
    return re.search(rf"(?<!\w){words}(?!\w)", text, re.IGNORECASE) is not None


def routes(question: str, triggers: list[str]) -> list[str]:
    """The triggers a question matches; the skill loads when there is at least one."""
    return [t for t in triggers if contains(question, t)]


def squash(text: str) -> str:
    """Letters and digits only, lowercased: "Llama 3.3 70B" and "llama-3.3-70b" agree."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def names_any(question: str, ids: list[str]) -> list[str]:
    return [i for i in ids if squash(i) in squash(question)]


POSITIVE = evals()["should_trigger"]
NEGATIVE = evals()["should_not_trigger"]
SERVER_TOOLS = {fn.__name__ for fn, _ in mcp_server.TOOLS}
REFUSAL_IDS = {r.id for r in skill.REFUSALS}


def test_committed_evals_are_current() -> None:
    assert EVALS.read_text(encoding="utf-8") == skill.render_evals(shipped())


def test_triggers_are_the_descriptions() -> None:
    triggers = description_triggers(description())
    assert triggers == list(skill.TRIGGER_PHRASES) == evals()["triggers"]
    assert len(triggers) == len({t.lower() for t in triggers})


def test_enough_cases_with_unique_ids() -> None:
    ids = [case["id"] for case in POSITIVE + NEGATIVE]
    assert len(ids) == len(set(ids))
    assert len(POSITIVE) >= 10 and len(NEGATIVE) >= 8


@pytest.mark.parametrize("case", POSITIVE, ids=lambda c: c["id"])
def test_positive_question_loads_the_skill(case: dict) -> None:
    assert routes(case["question"], description_triggers(description())), case["question"]


@pytest.mark.parametrize("case", NEGATIVE, ids=lambda c: c["id"])
def test_negative_question_does_not_load_the_skill(case: dict) -> None:
    matched = routes(case["question"], description_triggers(description()))
    assert not matched, f"{case['id']} matches {matched}"
    # A near miss: it shares a word with the description, which alone must not route it.
    assert contains(case["question"], case["near_miss"]), case["near_miss"]
    assert case["near_miss"].lower() in description().lower(), case["near_miss"]
    assert case["route_instead"]


def test_every_trigger_is_exercised() -> None:
    """A trigger no positive question needs is untested breadth: each must route one."""
    for trigger in description_triggers(description()):
        assert any(contains(c["question"], trigger) for c in POSITIVE), trigger


def test_cases_cover_every_server_tool() -> None:
    named = {tool for case in POSITIVE for tool in case["tools"]}
    assert named <= SERVER_TOOLS, named - SERVER_TOOLS
    assert named == SERVER_TOOLS, f"no eval calls {sorted(SERVER_TOOLS - named)}"


def test_skill_md_says_when_to_call_every_server_tool() -> None:
    assert len(skill.TOOL_GUIDE) == len(SERVER_TOOLS)
    assert {t.name for t in skill.TOOL_GUIDE} == SERVER_TOOLS
    for tool in SERVER_TOOLS:
        assert f"| `{tool}` |" in body(), tool


def test_cases_cover_every_refusal_condition() -> None:
    named = {case["refusal"] for case in POSITIVE if case.get("refusal")}
    assert named == REFUSAL_IDS, f"unknown {named - REFUSAL_IDS}, uncovered {REFUSAL_IDS - named}"
    for refusal in REFUSAL_IDS:
        assert f"| `{refusal}` |" in body(), refusal


def _model_ids() -> list[str]:
    return list(catalog.models())


def _gpu_ids() -> list[str]:
    return list(catalog.gpus())


@pytest.mark.parametrize("case", POSITIVE, ids=lambda c: c["id"])
def test_refusal_case_lacks_what_it_refuses_on(case: dict) -> None:
    """Each refusal case is the situation it names; a complete case names model and GPU."""
    question, refusal = case["question"], case.get("refusal")
    if refusal == "missing-model":
        assert not names_any(question, _model_ids())
    elif refusal == "missing-hardware":
        assert not names_any(question, _gpu_ids())
    elif refusal == "unknown-hardware":
        assert squash(case["gpu"]) in squash(question)
        with pytest.raises(UserError):
            catalog.get_gpu(case["gpu"].replace(" ", "-"))
        assert not names_any(question, _gpu_ids())
    elif refusal == "unknown-model":
        assert squash(case["model"]) in squash(question)
        with pytest.raises(UserError):
            catalog.get_model(case["model"].replace(" ", "-"))
        assert not names_any(question, _model_ids())
    elif refusal == "missing-traffic":
        assert not re.search(r"req/s|requests|prompt|answer|token", question, re.IGNORECASE)
    elif refusal == "missing-targets":
        assert not re.search(r"TTFT|TPOT|latency", question, re.IGNORECASE)
    elif refusal == "infeasible":
        assert "feasible" in question
    elif refusal == "invalid-input":
        assert "error" in question
    elif "decide_disaggregation" in case["tools"]:
        assert names_any(question, _model_ids()) and names_any(question, _gpu_ids()), question
    else:
        assert refusal is None


def test_router_rejects_a_too_broad_trigger() -> None:
    """The check can fail: "Dynamo" as a trigger would load the skill for an install question."""
    broad = [*description_triggers(description()), "Dynamo"]
    install = next(c for c in NEGATIVE if c["id"] == "install-dynamo")
    assert routes(install["question"], broad) == ["Dynamo"]
    assert not contains("Our Ceph cluster uses disaggregated storage", "disaggregate")
    assert contains("Should we Disaggregate  prefill?", "disaggregate")
