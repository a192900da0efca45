"""The shipped rulebook and catalogs load from their JSON snapshot (`shipped_data.py`) only
when it holds exactly the YAML's data, and fall back to the YAML otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from disagg_decider import shipped_data
from disagg_decider.rules.loader import load_files, read_rule_file, rulebook_dir
from disagg_decider.yamlio import load_yaml_file

REGENERATE = "PYTHONPATH=skill python -m disagg_decider render"


def test_the_snapshot_is_current():
    assert shipped_data.snapshot_current(rulebook_dir()), (
        f"{shipped_data.SNAPSHOT.name} is stale (a shipped YAML file changed): run `{REGENERATE}`"
    )


@pytest.mark.parametrize("path", shipped_data.shipped_files(rulebook_dir()), ids=lambda p: p.name)
def test_each_shipped_file_loads_from_the_snapshot_with_the_yamls_data(path):
    def no_yaml(p: Path):
        raise AssertionError(f"{p} was parsed as YAML: the snapshot has no line for it")

    data = shipped_data.load_shipped(path, no_yaml)
    assert data == load_yaml_file(path)
    assert json.dumps(data, sort_keys=True) == json.dumps(load_yaml_file(path), sort_keys=True)


@pytest.fixture
def own_snapshot(tmp_path, monkeypatch):
    snapshot = tmp_path / "shipped_data.jsonl"
    monkeypatch.setattr(shipped_data, "SNAPSHOT", snapshot)
    shipped_data._lines.cache_clear()
    yield snapshot
    shipped_data._lines.cache_clear()


def test_an_edited_file_is_read_from_its_yaml_not_the_stale_snapshot(tmp_path, own_snapshot):
    rules = tmp_path / "rules.yaml"
    original = shipped_data.shipped_files(rulebook_dir())[0].read_text("utf-8")
    rules.write_text(original, "utf-8")
    own_snapshot.write_text(shipped_data.snapshot_text([rules]), "utf-8")
    assert shipped_data.load_shipped(rules, read_rule_file) == load_yaml_file(rules)

    edited = original.replace("rulebook: disaggregation", "rulebook: edited", 1)
    assert edited != original
    rules.write_text(edited, "utf-8")
    seen = []

    def parse(p: Path):
        seen.append(p)
        return read_rule_file(p)

    assert shipped_data.load_shipped(rules, parse)["rulebook"] == "edited"
    assert seen == [rules]


@pytest.mark.parametrize(
    "content",
    ["", "not json\n", '{"generated": "someone else", "format": 1}\n', None],
    ids=["empty", "garbage", "foreign-header", "missing"],
)
def test_a_missing_or_foreign_snapshot_means_the_yaml(tmp_path, own_snapshot, content):
    rules = shipped_data.shipped_files(rulebook_dir())[0]
    if content is not None:
        lines = content + shipped_data.snapshot_text([rules]).split("\n", 1)[1]
        own_snapshot.write_text(lines, "utf-8")
    parsed = []
    data = shipped_data.load_shipped(rules, lambda p: parsed.append(p) or load_yaml_file(p))
    assert parsed == [rules]
    assert data == load_yaml_file(rules)


def test_a_line_that_does_not_parse_means_the_yaml(tmp_path, own_snapshot):
    rules = shipped_data.shipped_files(rulebook_dir())[0]
    header, line = shipped_data.snapshot_text([rules]).splitlines()
    own_snapshot.write_text(f"{header}\n{line[:200]}\n", "utf-8")  # truncated
    parsed = []
    shipped_data.load_shipped(rules, lambda p: parsed.append(p) or load_yaml_file(p))
    assert parsed == [rules]


@pytest.mark.parametrize(
    "yaml_text",
    ["when: 2024-01-01\n", "1: one\n", "x: .nan\n", "x: [1, {2: b}]\n"],
    ids=["date", "int-key", "nan", "nested-int-key"],
)
def test_data_json_cannot_carry_exactly_is_left_to_the_yaml(tmp_path, yaml_text):
    path = tmp_path / "odd.yaml"
    path.write_text(yaml_text, "utf-8")
    assert shipped_data.snapshot_text([path]).count("\n") == 1  # the header only


def test_the_rulebook_from_the_snapshot_equals_the_one_from_yaml():
    from disagg_decider.rules.loader import rulebook_dir, shipped

    from_yaml = load_files(sorted(rulebook_dir().glob("*.yaml")))
    assert shipped().book == from_yaml.book
    assert shipped().origin == from_yaml.origin


def test_catalogs_from_the_snapshot_equal_the_ones_from_yaml(monkeypatch):
    from disagg_decider import catalog

    loaded = {kind: getattr(catalog, kind)() for kind in ("gpus", "models", "links")}
    monkeypatch.setattr(shipped_data, "_lines", lambda: {})  # no snapshot: the YAML
    records = {"gpus": catalog.Gpu, "models": catalog.ModelSpec, "links": catalog.Link}
    for kind, record in records.items():
        assert catalog._load(kind, record) == loaded[kind]


def test_render_check_names_a_stale_snapshot_and_render_rewrites_it(own_snapshot, capsys):
    """In a checkout's outputs/ (the repository's render): `--check` fails on a stale snapshot
    with everything else current, and `render` writes the snapshot, leaving outputs/ as is."""
    from tests.hostile_support import run_decide

    own_snapshot.write_text(json.dumps(shipped_data.HEADER) + "\n", "utf-8")  # no file lines
    root = Path(__file__).resolve().parents[1]
    dirs = ("--out-dir", str(root / "outputs"), "--examples-dir", str(root / "examples"))
    check = run_decide(capsys, "render", "--check", *dirs)
    assert check.code == 1
    assert check.stdout.count("stale: ") == 1  # outputs/ is current: render writes nothing there
    assert f"stale: {own_snapshot}" in check.stdout and "run `decide render`" in check.stdout

    written = run_decide(capsys, "render", *dirs)
    assert written.code == 0
    assert f"wrote {own_snapshot}" in written.stdout and "already current" in written.stdout
    assert own_snapshot.read_text("utf-8") == shipped_data.snapshot_text(
        shipped_data.shipped_files(rulebook_dir())
    )
    assert run_decide(capsys, "render", "--check", *dirs).code == 0
