"""The Agent Skill folder an agent loads: a short SKILL.md whose links all resolve.

The Agent Skills guidance keeps SKILL.md's body under about 5,000 tokens and moves details into
files it links one level deep. These tests read the committed folder (what an agent installs)
and the rendering (what `decide render` would write), and check that the thresholds in both
come from the rulebook rather than from the templates.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pytest

from disagg_decider.render import skill
from disagg_decider.render.skill_layout import REFERENCES, SKILL_NAME, reference_files
from disagg_decider.rules.loader import shipped
from disagg_decider.rules.text import scalar_text
from tests.conftest import ROOT
from tests.render_helpers import front_matter, section

OUTPUTS = ROOT / "outputs"
FOLDER = OUTPUTS / SKILL_NAME
MAX_BODY_TOKENS = 5_000  # the Agent Skills guidance for SKILL.md's body
CHARS_PER_TOKEN = 4  # the usual estimate for English prose and markdown
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(<?([^)>\s]+)>?\)")


def body_tokens(text: str) -> float:
    """SKILL.md's body (after the front matter) in tokens, at four characters a token."""
    _, body = front_matter(text)
    return len(body) / CHARS_PER_TOKEN


def local_links(text: str) -> list[str]:
    """Link targets that are files next to the text (not URLs, not in-page anchors)."""
    found = [m.group(1) for m in _LINK.finditer(text)]
    return [t.split("#")[0] for t in found if not re.match(r"[a-z]+:|#", t)]


def test_body_within_the_token_budget() -> None:
    committed = (FOLDER / "SKILL.md").read_text(encoding="utf-8")
    rendered = skill.render_skill_md(shipped())
    for text in (committed, rendered):
        assert body_tokens(text) <= MAX_BODY_TOKENS, f"{body_tokens(text):.0f} tokens"


def test_budget_check_counts_the_body() -> None:
    """The measure fails a body over the budget and ignores the front matter."""
    meta = "---\nname: x\ndescription: " + "d" * 30_000 + "\n---\n"
    assert body_tokens(meta + "# Short\n") < 10
    assert body_tokens(meta + "x" * (4 * MAX_BODY_TOKENS + 4)) > MAX_BODY_TOKENS


def test_every_link_in_the_folder_resolves() -> None:
    """Every relative link in SKILL.md and its references names a file in the folder."""
    texts = {p: p.read_text(encoding="utf-8") for p in sorted(FOLDER.rglob("*.md"))}
    assert FOLDER / "SKILL.md" in texts and len(texts) == 1 + len(REFERENCES)
    checked = 0
    for path, text in texts.items():
        for target in local_links(text):
            resolved = (path.parent / target).resolve()
            assert resolved.is_file(), f"{path.relative_to(ROOT)}: link {target} resolves nowhere"
            assert FOLDER.resolve() in resolved.parents, f"{target} leaves the skill folder"
            checked += 1
    assert checked >= len(REFERENCES)


def test_skill_md_links_every_reference_one_level_deep() -> None:
    text = (FOLDER / "SKILL.md").read_text(encoding="utf-8")
    links = set(local_links(text))
    for stem, path in reference_files().items():
        relative = PurePosixPath(path).relative_to(SKILL_NAME).as_posix()
        assert relative in links, f"SKILL.md does not link {relative}"
        assert relative.count("/") == 1 and (OUTPUTS / path).is_file(), stem
    for target in links:  # and nothing it links reaches further than one folder down
        assert target.count("/") <= 1, target


def test_design_page_links_resolve_from_outputs() -> None:
    page = OUTPUTS / skill.SKILL_FILE
    targets = local_links(page.read_text(encoding="utf-8"))
    assert {f"{SKILL_NAME}/references/{stem}.md" for stem, _, _ in REFERENCES} <= set(targets)
    for target in targets:
        assert (page.parent / target).is_file(), target


def test_link_reader_finds_a_broken_link(tmp_path: Path) -> None:
    """The reader the link test relies on sees relative links and skips URLs and anchors."""
    text = "[a](references/gone.md) [b](<https://x.org/y>) [c](#here) [d](x.md#part)"
    assert local_links(text) == ["references/gone.md", "x.md"]
    assert not (tmp_path / local_links(text)[0]).is_file()


def _distinct(value: object) -> object:
    """A value no template could contain by accident: what the rendered files must show."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return 1234567 if isinstance(value, int) else 0.4321


def test_thresholds_come_from_the_rulebook() -> None:
    """Replace every numeric parameter: the new values show, the shipped ones vanish.

    A threshold typed into a template would survive the replacement and fail here.
    """
    loaded = shipped()
    changed = loaded.book.model_copy(deep=True)
    numeric = {
        name: p
        for name, p in changed.parameters.items()
        if isinstance(p.value, int | float) and not isinstance(p.value, bool)
    }
    assert len(numeric) >= 10
    for name, p in numeric.items():
        changed.parameters[name] = p.model_copy(update={"value": _distinct(p.value)})
    other = type(loaded)(changed, dict(loaded.origin))
    files = skill.skill_outputs(other)
    gates = section(files[skill.SKILL_DIR_FILE], "How the verdict is decided")
    rules = files[reference_files()["rules"]]
    for name, p in numeric.items():
        old, new = scalar_text(p.value), scalar_text(changed.parameters[name].value)
        assert f"| `{name}` | {new} |" in rules, name
        for path, text in files.items():
            assert f"`{name}` ({old} " not in text, f"{path}: {name} still shows {old}"
        if f"`{name}`" in gates:
            assert f"`{name}` ({new} " in gates, name


@pytest.mark.parametrize("stem", [stem for stem, _, _ in REFERENCES])
def test_reference_files_carry_the_marker(stem: str) -> None:
    """`decide render` replaces only files with its marker in the first lines."""
    from disagg_decider.render.outputs import has_marker

    assert has_marker(OUTPUTS / reference_files()[stem])
    assert has_marker(OUTPUTS / skill.EVALS_FILE)


def test_mcp_serves_every_linked_file_where_the_link_points() -> None:
    """An agent reading SKILL.md over MCP resolves its links against the skill's URI."""
    from disagg_decider import mcp_server

    served = {uri: relative for uri, _, relative in mcp_server.SKILL_RESOURCES}
    base = mcp_server.SKILL_URI.rsplit("/", 1)[0]
    for target in local_links((FOLDER / "SKILL.md").read_text(encoding="utf-8")):
        uri = f"{base}/{target}"
        assert served.get(uri) == f"{SKILL_NAME}/{target}", f"{uri} is not served"
