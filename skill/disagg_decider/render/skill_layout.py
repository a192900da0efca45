"""Where the generated skill's files live under outputs/, and which of them an agent reads.

Names only, no imports beyond the standard library: the MCP server serves these files as
resources and must not load jinja2 or the calculator to learn their paths.
"""

from __future__ import annotations

SKILL_NAME = "disaggregation-decider"
SKILL_FILE = "skill-disaggregation-decider.md"  # one page for people and design docs
SKILL_DIR_FILE = f"{SKILL_NAME}/SKILL.md"  # the Agent Skill an agent loads
EVALS_FILE = f"{SKILL_NAME}/evals.yaml"  # routing cases, checked by tests/test_skill_evals.py

# (stem, title, read it when): the files SKILL.md links to, one level deep as the Agent Skills
# format asks. Each renders from templates/skill_ref_<stem>.md.j2 to references/<stem>.md.
REFERENCES: tuple[tuple[str, str, str], ...] = (
    ("inputs", "Inputs", "writing a workload: every field, the catalog ids, a complete file"),
    ("rules", "Rules reference", "explaining a verdict: metrics, parameters, every rule"),
    ("physics", "Transfer versus gain", "checking a KV transfer or a gain by hand"),
    (
        "orchestrators",
        "Dynamo or llm-d",
        "choosing the orchestrator or configuring the conditional threshold",
    ),
    ("verdict", "Calling decide", "CLI commands, MCP arguments, reading the verdict JSON"),
    ("examples", "Examples", "routing a question: which tool, when to refuse, how to answer"),
)


def reference_path(stem: str) -> str:
    """A reference file's path relative to the skill folder (as SKILL.md links it)."""
    return f"references/{stem}.md"


def reference_files() -> dict[str, str]:
    """Reference stem -> path under outputs/."""
    return {stem: f"{SKILL_NAME}/{reference_path(stem)}" for stem, _, _ in REFERENCES}
