"""Hostile input through the command line: each case of issue 12's "Why", replayed.

Every case must end in exit code 2 with one short message naming the file, field or line and
what is valid (never a traceback), within a second or two and without growing memory; output
paths and terminal text must not be abused. `decide` runs through its real entry point,
in-process (`hostile_support.run_decide`), so the module stays fast.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.conftest import LLAMA_8B_CONFIG
from tests.hostile_support import (
    MAX_CPU_SECONDS,
    alias_bomb,
    assert_user_error,
    make_fifo,
    run_decide,
    workload_data,
    workload_text,
)


def write(tmp_path: Path, text: str, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def write_data(tmp_path: Path, data: dict, name: str = "w.yaml") -> Path:
    return write(tmp_path, yaml.safe_dump(data, sort_keys=False), name)


# --- alias bombs ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["decide", "batch"])
def test_alias_bomb_inside_a_field_is_refused_fast(tmp_path, capsys, command):
    block, top = alias_bomb()
    text = block + workload_text(description=f"*{top}")
    path = write(tmp_path, text)
    args = ["--workload", str(path)] if command == "decide" else ["batch", str(path)]
    result = run_decide(capsys, *args, trace_memory=True)
    assert_user_error(result, "w.yaml:", "expands to more than")
    assert result.cpu_seconds < MAX_CPU_SECONDS and result.peak_bytes < 200e6


def test_alias_bomb_at_top_level_is_refused(tmp_path, capsys):
    block, top = alias_bomb()
    path = write(tmp_path, block.replace("bomb:", "x:") + f"name: *{top}\n")
    assert_user_error(run_decide(capsys, "--workload", str(path)), "expands to more than")


def test_a_few_aliases_still_work(tmp_path, capsys):
    data = workload_data()
    text = yaml.safe_dump(data, sort_keys=False).replace(
        "  ttft_ms: ", "  ttft_ms: &t "
    )  # an anchor that is never used is harmless
    result = run_decide(capsys, "--workload", str(write(tmp_path, text)), "--format", "json")
    assert result.code == 0, result.stderr


# --- huge values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("y" * 10_000_000, "1", "unknown key"),
        ("model", "m" * 10_000_000, "model"),
        ("name", "n" * 50_000_000, "name"),
    ],
    ids=["10MB-unknown-key", "10MB-model-id", "50MB-name"],
)
def test_huge_values_are_cut_in_messages(tmp_path, capsys, key, value, field):
    path = write(tmp_path, workload_text(**{key: value}))
    result = run_decide(capsys, "--workload", str(path))
    # Over 1 MB: refused before parsing. The same data in-process is quoted as 80 characters.
    assert_user_error(result, "larger than 1,000,000 bytes")
    assert result.cpu_seconds < MAX_CPU_SECONDS

    from disagg_decider.errors import UserError
    from disagg_decider.workload import parse_workload

    data = {**workload_data(), key: value}
    with pytest.raises(UserError) as err:
        parse_workload(data, "w.yaml")
    message = str(err.value)
    assert field in message and "characters)" in message and len(message) < 2000


def test_huge_rule_id_over_set(capsys):
    result = run_decide(capsys, "rules", "show", "R" * 10_000_000)
    assert_user_error(result, "unknown rule", "characters)")
    assert result.cpu_seconds < MAX_CPU_SECONDS


# --- numbers --------------------------------------------------------------------------------

NUMBER_CASES = [
    ({"cost": {"usd_per_gpu_hour": ".inf"}}, "cost.usd_per_gpu_hour", "finite"),
    ({"traffic.requests_per_second": "1e-308"}, "traffic.requests_per_second", "greater than"),
    ({"traffic.prompt_tokens.p99": ".inf"}, "traffic.prompt_tokens.p99", "finite"),
    ({"traffic.prompt_tokens.p99": "1e308"}, "traffic.prompt_tokens.p99", "less than"),
    ({"cluster.gpus": "9" * 5000}, "w.yaml:", "too large"),
    ({"traffic.requests_per_second": "true"}, "traffic.requests_per_second", "boolean"),
    ({"parallelism": {"colocated_tp": "1.0e+9"}}, "parallelism.colocated_tp", "less than"),
    ({"slo.ttft_ms": ".nan"}, "slo.ttft_ms", "finite"),
]


@pytest.mark.parametrize(("change", "field", "what"), NUMBER_CASES)
def test_numbers_are_finite_in_range_and_not_booleans(tmp_path, capsys, change, field, what):
    data = workload_data()
    for dotted, raw in change.items():
        if field == "w.yaml:":
            break
        value = raw if isinstance(raw, dict) else yaml.safe_load(f"x: {raw}")["x"]
        if isinstance(raw, dict):
            value = {k: yaml.safe_load(f"x: {v}")["x"] for k, v in raw.items()}
        *parents, leaf = dotted.split(".")
        node = data
        for p in parents:
            node = node[p]
        node[leaf] = value
    text = yaml.safe_dump(data, sort_keys=False)
    if field == "w.yaml:":  # a 5,000-digit integer cannot even be built by yaml.safe_dump
        text = workload_text().replace("  gpus: 16", "  gpus: " + "9" * 5000)
    path = write(tmp_path, text)
    result = run_decide(capsys, "--workload", str(path), "--format", "json")
    assert_user_error(result, field, what)


def test_chunk_tokens_list_is_capped(tmp_path, capsys):
    data = workload_data(efficiency={"chunk_tokens": list(range(1, 100_001))})
    path = write(tmp_path, json.dumps(data))  # JSON is YAML; 100,000 entries < 1 MB
    result = run_decide(capsys, "--workload", str(path), trace_memory=True)
    assert_user_error(result, "w.yaml: ", "list items; at most 20,000")
    assert result.cpu_seconds < MAX_CPU_SECONDS and result.peak_bytes < 200e6
    # Within the file limits the list itself is capped by the schema, naming the field.
    data["efficiency"]["chunk_tokens"] = list(range(1, 1001))
    path = write(tmp_path, yaml.safe_dump(data, default_flow_style=True), "w2.yaml")
    assert_user_error(
        run_decide(capsys, "--workload", str(path)), "efficiency.chunk_tokens", "at most 64"
    )


def test_duplicate_keys_name_both_lines(tmp_path, capsys):
    text = workload_text() + "cluster:\n  gpu: h100\n  gpus: 8\n"
    result = run_decide(capsys, "--workload", str(write(tmp_path, text)))
    first = 1 + next(i for i, line in enumerate(text.splitlines()) if line.startswith("cluster:"))
    assert_user_error(result, "duplicate key 'cluster'", f"first at line {first}")


# --- hf_config: files that are not what they claim ------------------------------------------


def hf_workload(tmp_path: Path, target: str) -> Path:
    return write_data(tmp_path, workload_data(model={"hf_config": target}))


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda d: "/dev/zero", "is a device"),
        (lambda d: str(make_fifo(d / "fifo")), "named pipe"),
        (lambda d: str(d), "file not found"),  # a directory: its config.json is missing
        (lambda d: str(_loop(d)), "symlink loop"),
        (lambda d: str(_json(d, "[" * 100_000 + "]" * 100_000)), "nested deeper"),
        (lambda d: str(_json(d, json.dumps(LLAMA_8B_CONFIG)[:-1] + ', "x": 1e400}')), "JSON"),
        (
            lambda d: str(_json(d, json.dumps({**LLAMA_8B_CONFIG, "vocab_size": float("nan")}))),
            "NaN",
        ),
        (lambda d: str(_json(d, " " * 1_000_001)), "larger than 1,000,000 bytes"),
    ],
    ids=["dev-zero", "fifo", "directory", "symlink-loop", "deep-json", "1e400", "nan", "big"],
)
def test_hf_config_that_is_not_a_config_is_refused_fast(tmp_path, capsys, make, fragment):
    target = make(tmp_path)
    result = run_decide(capsys, "--workload", str(hf_workload(tmp_path, target)), trace_memory=True)
    assert_user_error(result, fragment)
    assert result.cpu_seconds < MAX_CPU_SECONDS and result.peak_bytes < 200e6


def _loop(d: Path) -> Path:
    os.symlink(d / "b.json", d / "a.json")
    os.symlink(d / "a.json", d / "b.json")
    return d / "a.json"


def _json(d: Path, text: str, name: str = "cfg.json") -> Path:
    (d / name).write_text(text, encoding="utf-8")
    return d / name


def test_hf_config_values_are_never_echoed(tmp_path, capsys):
    secret = "SECRET-TOKEN-abc123"
    path = _json(tmp_path, json.dumps({**LLAMA_8B_CONFIG, "num_hidden_layers": secret}))
    result = run_decide(capsys, "--workload", str(hf_workload(tmp_path, str(path))))
    assert_user_error(result, "num_hidden_layers", "a string of 19 characters")
    assert secret not in result.stderr


def test_hf_config_non_json_file_names_the_line_not_the_content(tmp_path, capsys):
    path = _json(tmp_path, "root:x:0:0:SECRET:/root:/bin/bash\n", "passwd")
    result = run_decide(capsys, "--workload", str(hf_workload(tmp_path, str(path))))
    assert_user_error(result, "invalid JSON at line 1")
    assert "SECRET" not in result.stderr


def test_hf_config_model_is_named_from_the_config(tmp_path, capsys):
    folder = tmp_path / "tmp"
    folder.mkdir()
    _json(folder, json.dumps({**LLAMA_8B_CONFIG, "_name_or_path": "meta-llama/Llama-3.1-8B"}))
    path = write_data(tmp_path, workload_data(model={"hf_config": "tmp/cfg.json"}))
    result = run_decide(capsys, "--workload", str(path), "--format", "json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["model"] == "llama-3.1-8b"


# --- workload files that are not files --------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda d: "/dev/zero", "is a device"),
        (lambda d: str(make_fifo(d / "w.yaml")), "named pipe"),
        (lambda d: str(d), "is a directory"),
    ],
    ids=["dev-zero", "fifo", "directory"],
)
def test_workload_path_must_be_a_regular_file(tmp_path, capsys, make, fragment):
    result = run_decide(capsys, "--workload", make(tmp_path))
    assert_user_error(result, fragment)
    assert result.cpu_seconds < MAX_CPU_SECONDS


# --- terminal and markdown injection ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("[/]", "[/]"),
        ("[link=https://evil.example]click me[/link]", "[link=https://evil.example]"),
        ("[bold red]x", "[bold red]x"),
    ],
)
def test_rich_markup_in_a_name_prints_literally(tmp_path, capsys, name, fragment):
    path = write_data(tmp_path, workload_data(name=name))
    result = run_decide(capsys, "--workload", str(path))
    assert result.code == 0, result.stderr
    assert fragment in result.stdout  # shown as typed, never interpreted as markup
    assert "\x1b]8;" not in result.stdout  # no OSC 8 hyperlink


@pytest.mark.parametrize(
    "bad",
    ["\x1b[31mred", "\x1b]8;;https://evil.example\x07x", "abc\u202eexe.txt", "a\u2028b"],
    ids=["esc", "osc", "bidi", "u2028"],
)
def test_control_and_bidi_characters_in_a_name_are_refused(tmp_path, capsys, bad):
    path = write_data(tmp_path, workload_data(name=bad))
    result = run_decide(capsys, "--workload", str(path))
    assert_user_error(result, "name: contains the control or bidi character")
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr


def test_control_characters_in_a_description_are_refused_but_newlines_are_fine(tmp_path, capsys):
    ok = write_data(tmp_path, workload_data(description="line one\nline two\tend"), "ok.yaml")
    assert run_decide(capsys, "--workload", str(ok), "--format", "json").code == 0
    bad = write_data(tmp_path, workload_data(description="see \x1b]0;pwned\x07"), "bad.yaml")
    assert_user_error(run_decide(capsys, "--workload", str(bad)), "description")


# --- output paths ------------------------------------------------------------------------------


def test_out_never_follows_a_dangling_symlink(tmp_path, capsys, rag_file):
    outside = tmp_path / "outside" / "pwned.json"
    outside.parent.mkdir()
    link = tmp_path / "out.json"
    os.symlink(outside, link)
    result = run_decide(capsys, "--workload", str(rag_file), "--format", "json", "-o", str(link))
    assert_user_error(result, "symbolic link")
    assert not outside.exists()
    forced = run_decide(
        capsys, "--workload", str(rag_file), "--format", "json", "-o", str(link), "--force"
    )
    assert forced.code == 0, forced.stderr
    assert not outside.exists() and not link.is_symlink() and link.is_file()


def test_plot_never_follows_a_dangling_symlink(tmp_path, capsys, rag_file):
    outside = tmp_path / "outside" / "gain.png"
    outside.parent.mkdir()
    link = tmp_path / "gain.png"
    os.symlink(outside, link)
    result = run_decide(capsys, "sweep", "-w", str(rag_file), "--plot", str(link))
    assert_user_error(result, "--plot", "symbolic link")
    assert not outside.exists()


@pytest.fixture
def rag_file(tmp_path) -> Path:
    return write_data(tmp_path, workload_data(), "rag.yaml")


def test_unexpected_errors_are_one_line_without_a_traceback(capsys, monkeypatch, rag_file):
    import disagg_decider.decide as decide_module

    def boom(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(decide_module, "decide", boom)
    monkeypatch.delenv("DECIDE_DEBUG", raising=False)
    result = run_decide(capsys, "--workload", str(rag_file))
    assert result.code == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "internal error (ZeroDivisionError" in result.stderr


def test_a_huge_calibration_path_is_refused_by_the_schema(tmp_path, capsys) -> None:
    """`calibration:` is a path like `hf_config`: bounded before anything tries to open it."""
    path = tmp_path / "w.yaml"
    path.write_text(workload_text(calibration="c" * 500_000))
    result = run_decide(capsys, "--workload", str(path))
    assert_user_error(result, "calibration", "4096 characters", max_stderr=1000)
