"""Output paths under attack: each case of issue 12's "Why" for `deploy`, `render` and the
text that reaches markdown, HTML comments, YAML and terminals.

Nothing is written through a symlink without `--force` (and with it, the link is replaced,
never followed); a refused or failed run leaves the output folder as it was; `render` replaces
only files whose first lines carry its marker.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from disagg_decider.deploy.writer import write_files
from disagg_decider.errors import UserError
from disagg_decider.render import outputs
from disagg_decider.render.text import md, one_line
from disagg_decider.rules.loader import shipped
from tests.conftest import RAG_EXAMPLE
from tests.hostile_support import assert_user_error, run_decide

FILES = {"README.md": "readme\n", "k8s/decode.yaml": "a: 1\n", "k8s/prefill.yaml": "b: 2\n"}


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): ("link->" + os.readlink(p)) if p.is_symlink() else p.read_text()
        for p in sorted(folder.rglob("*"))
        if p.is_symlink() or p.is_file()
    }


# --- deploy ---------------------------------------------------------------------------------


def test_deploy_never_writes_through_a_symlinked_folder(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    os.symlink(elsewhere, out / "k8s")
    with pytest.raises(UserError, match="symbolic link"):
        write_files(out, FILES, force=False)
    assert list(elsewhere.iterdir()) == [] and snapshot(out) == {"k8s": f"link->{elsewhere}"}
    write_files(out, FILES, force=True)  # the link is replaced by a real folder
    assert list(elsewhere.iterdir()) == []
    assert (out / "k8s").is_dir() and not (out / "k8s").is_symlink()
    assert (out / "k8s" / "decode.yaml").read_text() == "a: 1\n"


def test_deploy_with_a_file_where_a_folder_goes_writes_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "k8s").write_text("mine\n")
    with pytest.raises(UserError, match="nothing was written"):
        write_files(out, FILES, force=True)
    assert snapshot(out) == {"k8s": "mine\n"}  # README.md was not written first


def test_deploy_failure_while_writing_leaves_nothing_half_written(tmp_path, monkeypatch):
    out = tmp_path / "out"

    def full_disk(self, *args, **kwargs):
        if self.name == "prefill.yaml":
            raise OSError(28, "No space left on device")
        return original(self, *args, **kwargs)

    original = Path.write_text
    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(UserError, match="No space left"):
        write_files(out, FILES, force=False)
    assert snapshot(out) == {}  # staged in a temporary folder, which is gone


def test_deploy_cli_refuses_a_symlinked_manifest(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "victim.yaml"
    os.symlink(target, out / "dynamo-graph.yaml")
    args = ["deploy", "-w", str(RAG_EXAMPLE), "-t", "dynamo", "-o", str(out)]
    assert_user_error(run_decide(capsys, *args), "symbolic link", "nothing was written")
    assert not target.exists() and not (out / "README.md").exists()


# --- render ---------------------------------------------------------------------------------


@pytest.fixture
def one_example(tmp_path) -> tuple[Path, dict[str, str]]:
    examples = tmp_path / "examples"
    examples.mkdir()
    shutil.copy(RAG_EXAMPLE, examples / RAG_EXAMPLE.name)
    return examples, outputs.expected_outputs(shipped(), examples)


def report_rel() -> str:
    return f"{outputs.REPORTS_DIR}/{RAG_EXAMPLE.stem}.md"


def test_render_never_writes_through_a_symlinked_report(tmp_path, one_example):
    _, expected = one_example
    out = tmp_path / "outputs"
    outputs.write_outputs(expected, out, force=False)
    victim = tmp_path / "victim.md"
    victim.write_text("my file\n")
    (out / report_rel()).unlink()
    os.symlink(victim, out / report_rel())
    with pytest.raises(UserError, match="symbolic link"):
        outputs.write_outputs(expected, out, force=False)
    assert victim.read_text() == "my file\n"
    outputs.write_outputs(expected, out, force=True)
    assert victim.read_text() == "my file\n"
    assert not (out / report_rel()).is_symlink()


def test_render_keeps_a_note_that_merely_quotes_the_marker(tmp_path, one_example):
    _, expected = one_example
    out = tmp_path / "outputs"
    outputs.write_outputs(expected, out, force=False)
    note = out / outputs.REPORTS_DIR / "my-notes.md"
    note.write_text("# My notes\n\n" + "text\n" * 20 + f"Reports say: {outputs.MARKER}\n")
    _written, removed = outputs.write_outputs(expected, out, force=False)
    assert removed == [] and note.exists()
    # A real orphan (marker in its first line) is still removed.
    orphan = out / outputs.REPORTS_DIR / "gone.md"
    orphan.write_text(f"<!-- {outputs.MARKER} from examples/gone.yaml -->\n\nold\n")
    _, removed = outputs.write_outputs(expected, out, force=False)
    assert removed == [f"{outputs.REPORTS_DIR}/gone.md"] and not orphan.exists()


def test_render_with_reports_as_a_file_writes_nothing(tmp_path, one_example):
    _, expected = one_example
    out = tmp_path / "outputs"
    out.mkdir()
    (out / outputs.REPORTS_DIR).write_text("a file, not a folder\n")
    with pytest.raises(UserError, match="not a folder"):
        outputs.write_outputs(expected, out, force=False)
    assert snapshot(out) == {"reports": "a file, not a folder\n"}  # no SKILL.md either


def test_render_handles_a_non_utf8_existing_report(tmp_path, one_example):
    _, expected = one_example
    out = tmp_path / "outputs"
    outputs.write_outputs(expected, out, force=False)
    (out / report_rel()).write_bytes(b"\xff\xfe not utf-8 \x80\n")
    status = outputs.stale_outputs(expected, out)
    assert status.changed == [report_rel()]
    with pytest.raises(UserError, match="not generated by `decide render`"):
        outputs.write_outputs(expected, out, force=False)
    outputs.write_outputs(expected, out, force=True)
    assert (out / report_rel()).read_text(encoding="utf-8") == expected[report_rel()]


def test_render_cli_non_utf8_report_is_a_message_not_a_traceback(tmp_path, capsys, one_example):
    examples, expected = one_example
    out = tmp_path / "outputs"
    outputs.write_outputs(expected, out, force=False)
    (out / report_rel()).write_bytes(b"\xff\xfe\x80\n")
    check = run_decide(
        capsys, "render", "--check", "--out-dir", str(out), "--examples-dir", str(examples)
    )
    assert check.code == 1 and "stale" in check.stdout and "Traceback" not in check.stderr
    write = run_decide(capsys, "render", "--out-dir", str(out), "--examples-dir", str(examples))
    assert_user_error(write, "not generated by `decide render`")


def test_example_file_name_cannot_break_out_of_the_html_comment(tmp_path):
    examples = tmp_path / "examples"
    examples.mkdir()
    name = "x --><img src=x onerror=alert(1)><!-- \u202e.yaml"
    shutil.copy(RAG_EXAMPLE, examples / name)
    text = outputs.report_file(examples / name, examples, shipped())
    first = text.splitlines()[0]
    assert first.startswith("<!--") and first.endswith("-->")
    assert first.count("-->") == 1 and "<img" not in first and "\u202e" not in first


# --- text sanitising ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad", ["\x1b[31m", "\x1b]8;;https://evil.example\x07", "\u202e", "\u2066", "\x00", "\x9b"]
)
def test_markdown_text_drops_control_and_bidi_characters(bad):
    for render in (one_line, md):
        out = render(f"name{bad}tail")
        assert bad not in out and "\x1b" not in out and "name" in out and "tail" in out


def test_markdown_text_keeps_one_line_on_u2028():
    assert "\u2028" not in md("a\u2028b") and "\n" not in md("a\u2028b")
