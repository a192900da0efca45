"""The skill files: a valid Agent Skill, generated from the whole rulebook and the calculator.

SKILL.md carries a short body (what an agent needs on every call, at most 5,000 tokens); the
details live in the reference files it links to, and the design-doc page holds both.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from disagg_decider import catalog
from disagg_decider.calc.physics import kv, transfer
from disagg_decider.render import skill
from disagg_decider.render.skill_layout import REFERENCES
from disagg_decider.render.tables import WORKED_LINKS, WORKED_PROMPTS, unique_models
from disagg_decider.rules.loader import shipped
from disagg_decider.rules.text import scalar_text
from disagg_decider.workload import load_workload_text
from tests.render_helpers import assert_tables_rectangular, front_matter, headings, section, tables

BODY_SECTIONS = (  # SKILL.md: what an agent needs on every call
    "When to use",
    "Refusal conditions",
    "Workflow",
    "Answer contract",
    "MCP tools: when to call which",
    "Command safety",
    "How the verdict is decided",
    "Reference files",
)
REFERENCE_SECTIONS = {  # references/<stem>.md: the details SKILL.md links to
    "inputs": ("Fields", "Catalog ids", "A complete workload file", "Optional fields"),
    "rules": (
        "What the calculator measures",
        "Decision order",
        "Parameters",
        "Split or stay colocated",
        "When not to disaggregate",
        "Dynamo or llm-d",
        "Layout advice",
    ),
    "physics": ("The arithmetic", "Worked tables"),
    "orchestrators": ("Two orchestrators", "Set the conditional-disaggregation threshold"),
    "verdict": ("Command line", "MCP tools", "Reading the verdict", "When nothing is feasible"),
    "examples": (
        "A complete question: decide, then verify",
        "Missing inputs: ask, do not guess",
        "Hardware or model outside the catalog: refuse",
        "Narrow questions: the smaller tools",
        "An infeasible verdict: no plan",
    ),
}


@pytest.fixture(scope="module")
def skill_md() -> str:
    return skill.render_skill_md(shipped())


@pytest.fixture(scope="module")
def skill_file() -> str:
    return skill.render_skill_file(shipped())


@pytest.fixture(scope="module")
def refs() -> dict[str, str]:
    return {stem: skill.render_reference(shipped(), stem) for stem, _, _ in REFERENCES}


def test_skill_md_front_matter_is_a_valid_agent_skill(skill_md: str) -> None:
    meta, _ = front_matter(skill_md)
    folder = skill.SKILL_DIR_FILE.split("/")[0]
    assert meta["name"] == folder == "disaggregation-decider"
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta["name"]) and len(meta["name"]) <= 64
    assert 0 < len(meta["description"]) < 1024
    assert "Use it when" in meta["description"]
    assert meta["description"] == skill.DESCRIPTION
    assert all(isinstance(v, str) for v in meta["metadata"].values())
    assert meta["metadata"]["rulebook-digest"] == skill.rulebook_digest(shipped())
    assert set(meta) <= {"name", "description", "license", "compatibility", "metadata"}


def test_both_files_share_one_body(skill_md: str, skill_file: str, refs: dict[str, str]) -> None:
    """The page is SKILL.md's body (links pointing into the folder), then every reference."""
    _, body = front_matter(skill_md)
    start = "## When to use"
    first_ref = skill_file.index(refs["inputs"])
    page_body = skill_file[skill_file.index(start) : first_ref].rstrip("\n") + "\n"
    assert (
        page_body.replace("](disaggregation-decider/references/", "](references/")
        == (body[body.index(start) :])
    )
    assert skill_file[first_ref:] == "\n".join(refs[stem] for stem, _, _ in REFERENCES)
    assert not skill_file.startswith("---")


@pytest.mark.parametrize("heading", BODY_SECTIONS)
def test_required_sections(skill_md: str, heading: str) -> None:
    assert heading in headings(skill_md, 2)


@pytest.mark.parametrize(
    ("stem", "heading"), [(stem, h) for stem, hs in REFERENCE_SECTIONS.items() for h in hs]
)
def test_reference_sections(refs: dict[str, str], stem: str, heading: str) -> None:
    assert heading in headings(refs[stem], 2)
    title = next(title for s, title, _ in REFERENCES if s == stem)
    assert refs[stem].startswith(f"# {title}\n")


def test_every_rule_and_parameter_appears_with_its_value(refs: dict[str, str]) -> None:
    book = shipped().book
    rule_headings = headings(refs["rules"], 4)
    for rule in book.rules:
        assert any(h.startswith(f"{rule.id} {rule.name}:") for h in rule_headings), rule.id
    params = {row[0]: row for row in tables(section(refs["rules"], "Parameters"))[0][1:]}
    for name, p in book.parameters.items():
        assert params[f"`{name}`"][1] == scalar_text(p.value), name
        assert params[f"`{name}`"][2] == p.unit


def test_rule_conditions_show_parameter_values(refs: dict[str, str]) -> None:
    dsg001 = section(refs["rules"], "DSG001 too-few-gpus: Fewer GPUs than two pools need")
    value = shipped().book.parameters["min_gpus_for_disaggregation"].value
    assert f"`cluster_gpus` < `min_gpus_for_disaggregation` ({value} GPUs)" in dsg001


def test_when_not_to_disaggregate_lists_every_colocate_rule(
    skill_md: str, refs: dict[str, str]
) -> None:
    colocate = [r for r in shipped().book.rules if r.pushes == "colocate"]
    text = section(refs["rules"], "When not to disaggregate")
    assert colocate and all(f"({r.id}," in text for r in colocate)
    body = section(skill_md, "How the verdict is decided")  # the gates travel with SKILL.md
    assert all(f"- **{r.id}** {r.name} (" in body for r in colocate)


def test_orchestrator_section_has_every_orchestrator_rule(refs: dict[str, str]) -> None:
    text = section(refs["rules"], "Dynamo or llm-d")
    ids = [r.id for r in shipped().book.rules if r.pushes in ("dynamo", "llm-d")]
    assert ids and all(f"#### {rid} " in text for rid in ids)
    listed = section(refs["orchestrators"], "Two orchestrators")
    assert all(f"- **{rid}** " in listed for rid in ids)


def test_conditional_thresholds_name_both_knobs_and_the_flip(refs: dict[str, str]) -> None:
    text = section(refs["orchestrators"], "Set the conditional-disaggregation threshold")
    for needle in (
        "--router-conditional-disagg-config",
        "eff_isl_threshold",
        "prefix-based-pd-decider",
        "nonCachedTokens",
        "pd-profile-handler",
        "threshold: 0",
    ):
        assert needle in text


def test_mcp_tools_are_documented(refs: dict[str, str]) -> None:
    text = refs["verdict"]
    for tool in (
        "decide_disaggregation",
        "estimate_kv_transfer",
        "find_crossover",
        "list_catalog",
        "explain_rule",
    ):
        assert f"`{tool}`" in text
    assert "decide mcp" in text


def _worked(physics: str) -> tuple[list[list[str]], list[list[str]]]:
    found = tables(section(physics, "Worked tables"))
    sizes = next(t for t in found if t[0][0] == "model" and t[0][1] == "attention")
    times = next(t for t in found if t[0][:2] == ["model", "link"])
    return sizes, times


def test_worked_table_has_every_model_and_prompt_column(refs: dict[str, str]) -> None:
    sizes, times = _worked(refs["physics"])
    labels = ["1K", "4K", "8K", "32K"]
    assert WORKED_PROMPTS == (1024, 4096, 8192, 32768)
    assert times[0][2:] == labels
    assert sizes[0][4:] == [f"{label} prompt" for label in labels]
    ids = [m.id for m in unique_models()]
    assert [row[0] for row in sizes[1:]] == [f"`{i}`" for i in ids]
    assert len(times) - 1 == len(ids) * len(WORKED_LINKS)
    assert {row[1] for row in times[1:]} == {"NVLink", "RDMA", "TCP"}


def test_worked_cells_equal_the_calculator(refs: dict[str, str]) -> None:
    """Spot-check llama-3.3-70b at 4K over RDMA against kv_bytes and transfer_ms."""
    sizes, times = _worked(refs["physics"])
    model = catalog.get_model("llama-3.3-70b")
    size = float(kv.kv_bytes(model, "fp8", 4096))
    link = catalog.get_link("ib-ndr-400")
    gb_per_s = transfer.effective_gb_per_s(link.gbps, link.efficiency, 1)
    ms = float(transfer.transfer_ms(size, gb_per_s, link.latency_us / 1e3))
    size_row = next(r for r in sizes if r[0] == "`llama-3.3-70b`")
    assert size_row[5] == f"{size / 1e6:,.0f} MB"
    assert size_row[3] == f"{kv.kv_bytes_per_token(model, 'fp8'):,.0f}"
    time_row = next(r for r in times if r[0] == "`llama-3.3-70b`" and r[1] == "RDMA")
    assert float(time_row[3].replace(",", "")) == pytest.approx(ms, rel=5e-3)
    assert size == 80 * 2 * 8 * 128 * 1 * 4096  # the GQA formula the section states


def test_worked_nvlink_uses_the_gpu_scaleup_bandwidth(refs: dict[str, str]) -> None:
    _, times = _worked(refs["physics"])
    model = catalog.get_model("deepseek-v3")
    size = float(kv.kv_bytes(model, "fp8", 32768))
    gbps = catalog.get_gpu("h200").scaleup_gb_per_s * 8
    nvlink = catalog.get_link("nvlink")
    bw = transfer.effective_gb_per_s(gbps, nvlink.efficiency, 1)
    ms = float(transfer.transfer_ms(size, bw, nvlink.latency_us / 1e3))
    row = next(r for r in times if r[0] == "`deepseek-v3`" and r[1] == "NVLink")
    assert float(row[5]) == pytest.approx(ms, rel=5e-3)


def test_example_workload_in_the_skill_is_valid(refs: dict[str, str]) -> None:
    block = re.search(r"```yaml\n(name: .*?)```", refs["inputs"], re.S)
    assert block is not None
    workload = load_workload_text(block.group(1), "skill example")
    assert workload.model == "llama-3.3-70b"


def test_example_tool_call_is_a_valid_workload(refs: dict[str, str]) -> None:
    """The decide_disaggregation arguments in the examples file parse as a workload."""
    block = re.search(r"```json\n(.*?)```", refs["examples"], re.S)
    assert block is not None
    arguments = json.loads(block.group(1))
    workload = load_workload_text(yaml.safe_dump(arguments["workload"]), "skill example call")
    assert (workload.model, workload.cluster.gpu) == ("llama-3.3-70b", "h200")


def test_catalog_ids_listed(refs: dict[str, str]) -> None:
    text = section(refs["inputs"], "Catalog ids")
    for table in (catalog.models(), catalog.gpus(), catalog.links()):
        for record in table.values():
            assert f"`{record.id}`" in text


def test_tables_rectangular_and_spacing(
    skill_file: str, skill_md: str, refs: dict[str, str]
) -> None:
    for text in (skill_file, skill_md, *refs.values()):
        assert_tables_rectangular(text)
        assert "\n\n\n" not in text
        assert text.endswith("\n") and not text.endswith("\n\n")


def test_deterministic(skill_md: str) -> None:
    assert skill.render_skill_md(shipped()) == skill_md
    assert "/work/" not in skill_md and "/home/" not in skill_md


def test_digest_follows_the_rulebook() -> None:
    loaded = shipped()
    changed = loaded.book.model_copy(deep=True)
    changed.parameters["min_gain"] = changed.parameters["min_gain"].model_copy(
        update={"value": 1.2}
    )
    other = type(loaded)(changed, dict(loaded.origin))
    assert skill.rulebook_digest(other) != skill.rulebook_digest(loaded)
    assert "| `min_gain` | 1.2 |" in skill.render_skill_file(other)
    assert "| `min_gain` | 1.2 |" in skill.render_reference(other, "rules")
