"""Bad input: a clear message naming the file, field or line, exit code 2, no traceback."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import DELETE, RAG_EXAMPLE, ROOT, decide_json, run_cli
from tests.conftest import edited_example as edited


def write(tmp_path, data, name="w.yaml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def fails(tmp_path, data, *expected: str):
    path = write(tmp_path, data)
    proc = run_cli("--workload", str(path), "--format", "json")
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    for text in expected:
        assert text in proc.stderr, proc.stderr
    return proc.stderr


def test_missing_file(tmp_path):
    proc = run_cli("--workload", str(tmp_path / "nope.yaml"))
    assert proc.returncode == 2
    assert "nope.yaml: file not found" in proc.stderr


def test_malformed_yaml_names_the_line(tmp_path):
    fails(
        tmp_path, "name: x\ntraffic: {prompt_tokens: [1, 2\nslo: {}\n", "w.yaml:3", "malformed YAML"
    )


def test_python_tags_are_rejected(tmp_path):
    fails(tmp_path, "name: !!python/object/apply:os.system ['echo hi']\n", "unsupported YAML tag")


def test_unknown_key_suggests_the_nearest(tmp_path):
    data = edited()
    data["traffic"]["prompt_tokns"] = data["traffic"].pop("prompt_tokens")
    err = fails(tmp_path, data, "traffic.prompt_tokns: unknown key", "prompt_tokens")
    assert "did you mean 'prompt_tokens'" in err


def test_unknown_top_level_key(tmp_path):
    data = edited()
    data["clustr"] = data.pop("cluster")
    fails(tmp_path, data, "clustr: unknown key", "cluster")


def test_unknown_model_lists_close_ids(tmp_path):
    fails(tmp_path, edited(model="llama-3.3-7b"), "unknown model 'llama-3.3-7b'", "llama-3.3-70b")


def test_unknown_gpu(tmp_path):
    fails(tmp_path, edited(**{"cluster.gpu": "h900"}), "unknown gpu 'h900'")


def test_unknown_network(tmp_path):
    fails(tmp_path, edited(**{"cluster.network": "infiniband"}), "unknown network link")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cluster.gpus", 0, "cluster.gpus"),
        ("cluster.gpus", -4, "cluster.gpus"),
        ("traffic.requests_per_second", 0, "traffic.requests_per_second"),
        ("traffic.prefix_cache_hit_rate", 1.5, "traffic.prefix_cache_hit_rate"),
        ("traffic.prefix_cache_hit_rate", -0.1, "traffic.prefix_cache_hit_rate"),
        ("slo.ttft_ms", -1, "slo.ttft_ms"),
        ("traffic.prompt_tokens", {"p50": 8192, "p99": 100}, "must be >= p50"),
        ("traffic.output_tokens", 0, "traffic.output_tokens"),
        ("weights_dtype", "int3", "weights_dtype"),
        ("engine", "tgi", "engine"),
    ],
)
def test_out_of_range_values(tmp_path, field, value, message):
    fails(tmp_path, edited(**{field: value}), message)


def test_missing_required_field(tmp_path):
    fails(tmp_path, edited(slo=DELETE), "slo: required field is missing")


def test_not_a_mapping(tmp_path):
    fails(tmp_path, "- just\n- a list\n", "a workload is a YAML mapping")


def test_missing_hf_config(tmp_path):
    fails(tmp_path, edited(model={"hf_config": "missing/config.json"}), "config.json")


def test_impossible_slo_is_a_verdict_not_an_error(tmp_path):
    path = write(tmp_path, edited(**{"slo.ttft_ms": 5, "slo.tpot_ms": 1}))
    proc = run_cli("--workload", str(path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    verdict = yaml.safe_load(proc.stdout)
    assert verdict["decision"] == "colocate"
    assert not verdict["colocated"]["feasible"]
    assert not verdict["disaggregated"]["feasible"]
    assert verdict["feasible"] is False and verdict["disaggregate"] is False
    assert verdict["summary"].startswith("No layout meets the targets")
    assert {x["kind"] for x in verdict["limits"]} == {"slo"}


def test_bad_set_override(tmp_path):
    path = RAG_EXAMPLE
    proc = run_cli("--workload", str(path), "--set", "min_gian=1.3")
    assert proc.returncode == 2
    assert "min_gain" in proc.stderr
    proc = run_cli("--workload", str(path), "--set", "min_gain=lots")
    assert proc.returncode == 2
    assert "expected a float" in proc.stderr


def test_out_file_is_not_overwritten_without_force(tmp_path):
    path = ROOT / "examples" / "chat-short-colocate.yaml"
    target = tmp_path / "verdict.json"
    target.write_text("keep me")
    proc = run_cli("--workload", str(path), "--format", "json", "--out", str(target))
    assert proc.returncode == 2
    assert "--force" in proc.stderr
    assert target.read_text() == "keep me"
    proc = run_cli("--workload", str(path), "--format", "json", "--out", str(target), "--force")
    assert proc.returncode == 0
    assert '"decision"' in target.read_text()


def test_messages_keep_brackets_and_user_text_verbatim(tmp_path):
    """User text (ids, paths, extras like [plot]) is printed as is, never read as markup."""
    fails(tmp_path, edited(model="llama[plot]"), "unknown model 'llama[plot]'")


def test_unknown_catalog_ids_name_the_file_and_field(tmp_path):
    err = fails(tmp_path, edited(model="llama-99"), "w.yaml: model: unknown model 'llama-99'")
    assert "decide catalog models" in err
    err = fails(tmp_path, edited(**{"cluster.network": "ib-xdr"}), "w.yaml: cluster.network:")
    assert "decide catalog links" in err


def test_out_onto_a_directory_or_unwritable_path_is_a_user_error(tmp_path):
    for fmt in ("text", "json"):
        proc = run_cli("-w", str(RAG_EXAMPLE), "-f", fmt, "-o", str(tmp_path), "--force")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "is a directory" in proc.stderr
    blocker = tmp_path / "file"
    blocker.write_text("mine")
    proc = run_cli("-w", str(RAG_EXAMPLE), "-o", str(blocker / "v.txt"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"--out {blocker / 'v.txt'}: cannot write" in proc.stderr
    assert blocker.read_text() == "mine"


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("deploy", "--help"),
        ("rules", "lint", "--help"),
        ("rules", "list", "--help"),
        ("simulate", "--help"),
        ("sweep", "--help"),
        ("trace", "summarize", "--help"),
    ],
)
def test_help_names_values_not_python_types(args):
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    for python_type in ("<list[", "<path>", "<str>", "<int", "<float", "list[Path]"):
        assert python_type not in proc.stdout, (python_type, proc.stdout)


def test_top_level_help_lists_examples_one_per_line():
    proc = run_cli("--help")
    lines = [line.strip() for line in proc.stdout.splitlines()]
    assert "decide catalog models" in lines
    assert "decide schema workload > workload.schema.json" in lines


def test_text_verdict_reads_for_a_decision():
    proc = run_cli("-w", str(RAG_EXAMPLE))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.startswith("DISAGGREGATE on NVIDIA Dynamo")
    # colocated cannot carry the rate on this cluster: the table says so, with its ceiling
    needed = decide_json(RAG_EXAMPLE)["colocated"]["gpus_needed_for_rate"]
    assert needed > 16 and f"needs {needed}, has 16" in text
    # three columns (the conditional layout's too) in 80: the short label, with the ceiling
    row = next(line for line in text.splitlines() if "max req/s" in line)
    assert f"{decide_json(RAG_EXAMPLE)['colocated']['max_rate_per_s']:.2f}" in row
    # Crossover and routing threshold in one sentence (issue 14).
    words = " ".join(text.split())  # the terminal wraps lines
    assert "always-disaggregated wins over colocated above a p50 prompt of" in words
    assert "uncached tokens" in words and "crossover at n/a" not in text
    assert "`decide rules show DSG007`" in text
