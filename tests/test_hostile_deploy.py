"""Hostile input through `decide deploy` (issue 29): text that would run as code, names
Kubernetes refuses, markup in the README and in terminal output.

What `decide deploy` writes is run: launch.sh under bash, the README's benchmark commands, the
`sh -c` scripts of multi-node pods. Each is run here in a temporary folder with stub engines
first on PATH (`tests/deploy_shell.py`: they record their argv and start nothing), and must
pass every value to the engine verbatim and create nothing. A value no quoting makes safe is
refused with exit 2, its flag named. The property test at the end fuzzes every text flag.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from disagg_decider.deploy.yamltext import yaml_docs_text
from tests.conftest import ROOT
from tests.deploy_shell import (
    container_images,
    launch_roles,
    live_markup,
    readme_commands,
    run_cli_in_process,
    run_shell,
    shell_scripts,
    strings_in,
    yaml_docs,
)

EXAMPLES_DIR = ROOT / "examples"
CHAT = EXAMPLES_DIR / "chat-short-colocate.yaml"
WIDE = EXAMPLES_DIR / "deepseek-v3-32xh200-colocate.yaml"  # replicas span nodes
LWS_ENV = {"LWS_LEADER_ADDRESS": "10.0.0.1", "LWS_WORKER_INDEX": "1"}

# The payloads: closing the default's quotes, command substitution, backticks, and
# single quotes (what a naive quoting would wrap the value in).
INJECTIONS = [
    'org/m}"; touch PWNED-1; : "',
    "org/$(touch PWNED-2)",
    "org/`touch PWNED-3`",
    "org/m'; touch PWNED-4; echo '",
    'org/m" && touch PWNED-5 #',
]


def deploy(out: Path, *extra: str, workload: Path = CHAT, target: str = "vllm"):
    return run_cli_in_process(
        "deploy", "-w", str(workload), "-t", target, "-o", str(out), "--force", *extra
    )


def assert_refused(result, *fragments: str) -> None:
    assert result.code == 2, (result.code, result.stderr[:2000])
    assert "Traceback" not in result.stderr + result.stdout
    assert len(result.stderr) < 2000, len(result.stderr)
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


def assert_inert(out: Path, scratch: Path, value: str) -> None:
    """Run everything the bundle holds that a shell runs; `value` must reach each engine as one
    argument, unchanged, and nothing may be created."""
    if (out / "launch.sh").exists():
        usage = run_shell(["bash", str(out / "launch.sh")], scratch)
        assert usage.code == 2 and usage.calls == [] and usage.left_behind == [], usage
        roles = launch_roles(out)
        assert roles
        for role in roles:
            run = run_shell(["bash", str(out / "launch.sh"), role], scratch)
            assert run.code == 0, run.stderr
            assert run.left_behind == [], (role, run.left_behind)
            assert len(run.calls) == 1 and value in run.calls[0], (role, run.calls)
    commands = readme_commands(out)
    assert len(commands) == 2
    for command in commands:
        run = run_shell(["bash", "-c", command], scratch, {"ENDPOINT": "10.0.0.2"})
        assert run.code == 0 and run.left_behind == [], (command, run)
        assert len(run.calls) == 1 and value in run.calls[0], (command, run.calls)
    docs = yaml_docs(out)
    scripts = shell_scripts(docs)
    assert scripts or value in strings_in(docs)  # an argument of its own, or run below
    for script in scripts:
        run = run_shell(["/bin/sh", "-c", script], scratch, LWS_ENV)
        assert run.code == 0 and run.left_behind == [], (script, run)
        assert len(run.calls) == 1 and value in run.calls[0], (script, run.calls)


# --- command injection ------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["vllm", "sglang"])
@pytest.mark.parametrize("flag", ["--model-path", "--served-model-name"])
@pytest.mark.parametrize("value", INJECTIONS, ids=[f"payload{i}" for i in range(len(INJECTIONS))])
def test_deploy_text_never_runs_as_a_command(tmp_path, target, flag, value):
    out = tmp_path / "out"
    result = deploy(out, flag, value, target=target)
    assert result.code == 0, result.stderr
    assert_inert(out, tmp_path / "scratch", value)


@pytest.mark.parametrize(
    ("target", "engine"), [("vllm", "sglang"), ("sglang", "sglang"), ("llm-d", "vllm")]
)
def test_multi_node_scripts_pass_the_model_path_verbatim(tmp_path, target, engine):
    workload = tmp_path / "wide.yaml"
    workload.write_text(re.sub(r"(?m)^engine: .*$", f"engine: {engine}", WIDE.read_text()))
    out = tmp_path / "out"
    value = INJECTIONS[1]
    assert deploy(out, "--model-path", value, workload=workload, target=target).code == 0
    assert shell_scripts(yaml_docs(out)), "expected LeaderWorkerSet pods with sh -c scripts"
    assert_inert(out, tmp_path / "scratch", value)


def test_launch_script_defaults_are_single_quoted_words(tmp_path):
    out = tmp_path / "out"
    assert deploy(out, "--model-path", INJECTIONS[0]).code == 0
    text = (out / "launch.sh").read_text()
    assert "MODEL='org/m}\"; touch PWNED-1; : \"'" in text
    assert "${MODEL:-org" not in text


# --- values no quoting makes safe -------------------------------------------------------------

UNSAFE = [
    ("org/m\ntouch PWNED", "U+000A"),
    ("org/m\rx", "U+000D"),
    ("org/\x00m", "U+0000"),
    ("org/\x1b[31mm", "U+001B"),
    ("org/m\u2028x", "U+2028"),
    ("org/\u202em", "U+202E"),
    ("org/\udcffm", "not valid UTF-8"),
    ("--trust-remote-code", "starts with '-'"),
    ("", "is empty"),
    ("   ", "is empty"),
    (" org/m", "starts or ends with a space"),
    ("o" * 5000, "longer than"),
]


@pytest.mark.parametrize("flag", ["--model-path", "--served-model-name"])
@pytest.mark.parametrize(("value", "why"), UNSAFE, ids=[w for _, w in UNSAFE])
def test_unquotable_values_are_refused_with_the_flag_named(tmp_path, flag, value, why):
    out = tmp_path / "out"
    assert_refused(deploy(out, flag, value), flag, why)
    assert not out.exists()


@pytest.mark.parametrize(
    "image",
    [
        "vllm/vllm-openai:$(touch PWNED)",
        "vllm openai",
        "Vllm/Openai",
        "vllm/vllm-openai:v1\nx",
        "-image",
        "registry:5000/a/b:" + "t" * 200,
        "vllm/vllm-openai@sha256:xyz",
    ],
)
def test_images_outside_the_reference_grammar_are_refused(tmp_path, image):
    assert_refused(deploy(tmp_path / "out", "--image", image), "--image")


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0.0",
        "localhost:5000/team/vllm_custom__x.y:v0.18.2-cu128",
        "ghcr.io/org/img@sha256:" + "a" * 64,
        "vllm",
    ],
)
def test_real_images_are_accepted_and_emitted_verbatim(tmp_path, image):
    out = tmp_path / "out"
    assert deploy(out, "--image", image).code == 0
    assert image in container_images(yaml_docs(out))


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--gpu-label-key", "k" * 900_000), ("--gpu-product", "decode=" + "v" * 900_000)],
)
def test_label_flags_are_cut_in_messages(tmp_path, flag, value):
    assert_refused(deploy(tmp_path / "out", flag, value), flag, "900,00")


# --- Kubernetes names -------------------------------------------------------------------------

DNS_1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


@pytest.mark.parametrize("target", ["vllm", "sglang", "dynamo", "llm-d"])
@pytest.mark.parametrize("name", ["8B chat", "9" * 60, "ÄÖ--ü", "x" * 200])
def test_object_names_are_dns_labels(tmp_path, target, name):
    data = yaml.safe_load(CHAT.read_text()) | {"name": name}
    workload = tmp_path / "w.yaml"
    workload.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert deploy(out, workload=workload, target=target).code == 0
    for doc in yaml_docs(out):
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        if not meta:
            continue
        obj = meta["name"]
        assert len(obj) <= 63 and DNS_1123_LABEL.fullmatch(obj), obj
        if doc.get("kind") == "Service":  # Services need a letter first (DNS-1035)
            assert DNS_1035_LABEL.fullmatch(obj), obj


# --- YAML --------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_yaml_text_keeps_its_structure_whatever_the_strings(value, comment):
    """A value with ': ', '#', quotes or line breaks stays one string; a comment stays a
    comment (a line break in it cannot start YAML)."""
    docs = [{"name": value, "args": [value, "--x", value], "nested": {"k": value}}]
    text = yaml_docs_text(docs, [f"workload {comment}", comment])
    assert list(yaml.safe_load_all(text)) == docs


# --- markdown and terminals -------------------------------------------------------------------

HOSTILE_NAME = "q` <script>alert(1)</script> ` [a](javascript:alert(1)) ](javascript:y)"


@pytest.mark.parametrize("target", ["vllm", "dynamo", "llm-d"])
def test_readme_shows_workload_text_inert(tmp_path, target):
    data = yaml.safe_load(CHAT.read_text()) | {"name": HOSTILE_NAME}
    workload = tmp_path / "w.yaml"
    workload.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    served = "<img src=x onerror=alert(1)>"
    assert deploy(out, "--served-model-name", served, workload=workload, target=target).code == 0
    readme = (out / "README.md").read_text()
    assert live_markup(readme) == [], live_markup(readme)
    assert readme.count("\n# ") == 0 and readme.startswith("# ")  # the heading stays one line


def test_live_markup_finds_what_a_renderer_would_act_on():
    """The checker itself: it must see raw HTML and script links, and not code spans."""
    assert live_markup("a <script>x</script>") != []
    assert live_markup("[a](javascript:alert(1))") != []
    assert live_markup("`q` <b>x</b> `") != []  # a backtick in the text closes the span early
    assert live_markup("`<b>` and \\<i\\> and [t](<https://example.com/a>)") == []


def test_out_dir_named_like_markup_is_printed_not_parsed(tmp_path):
    out = tmp_path / "OUT[/]"
    result = deploy(out)
    assert result.code == 0, result.stderr
    assert "OUT[/]" in result.stderr and "launch.sh" in result.stderr  # shown, not parsed


def test_decide_out_file_named_like_markup_is_printed_not_parsed(tmp_path):
    out = tmp_path / "o[/].md"
    result = run_cli_in_process("--workload", str(CHAT), "--format", "markdown", "--out", str(out))
    assert result.code == 0, result.stderr
    assert out.exists() and "[/]" in result.stderr


def test_sweep_markdown_escapes_the_workload_name():
    from disagg_decider.sim.sweep import SweepResult
    from disagg_decider.sim.sweep_render import markdown

    res = SweepResult(
        workload='w <script>x</script> [a](javascript:y) ") title "z',
        prompt_tokens=[512, 1024],
        analytic_gain=[0.9, 1.2],
        simulated_gain=None,
        colocated_goodput_per_gpu=None,
        disaggregated_goodput_per_gpu=None,
        crossover_analytic=1024,
        crossover_simulated=None,
        attainment=None,
    )
    text = markdown(res)
    assert live_markup(text) == []
    title = next(line for line in text.splitlines() if line.strip().startswith("title "))
    assert title.count('"') == 2 and "<" not in title, title


# --- property test: every text flag, fuzzed ---------------------------------------------------

LARGE = os.environ.get("HYPOTHESIS_PROFILE") == "large"
DEPLOY_EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", "1000" if LARGE else "25"))

# What each scenario covers: launch.sh roles (colocated, prefill, decode; one node and
# replicas spanning nodes), the LeaderWorkerSet `sh -c` scripts, Dynamo's and llm-d's
# manifests, and every README's benchmark commands.
SCENARIOS = [
    (CHAT, "vllm", "colocated"),
    (CHAT, "vllm", "disaggregated"),
    (CHAT, "sglang", "colocated"),
    (CHAT, "sglang", "disaggregated"),
    (WIDE, "vllm", "auto"),
    (WIDE, "sglang", "auto"),
    (CHAT, "dynamo", "disaggregated"),
    (CHAT, "llm-d", "disaggregated"),
    (None, "llm-d", "auto"),  # WIDE on vLLM: llm-d's LeaderWorkerSet `sh -c` script
]
SHELL_FRAGMENTS = [
    *INJECTIONS,
    "$(id)",
    "${IFS}",
    "$((1+1))",
    "$HOME",
    "${MODEL}",
    "'",
    '"',
    "\\",
    "`",
    ";",
    "&",
    "|",
    ">PWNED",
    "<",
    "#",
    "!!",
    "~",
    "*",
    "?",
    "[a]",
    "{a,b}",
    "%",
    " ",
    "--x",
    "\n",
    "\t",
    "\x1b[2J",
    "\u202e",
    "\x00",
    "ü",
    "模型",
    "}",
    ": ",
    "- ",
    "<script>",
    "](javascript:x)",
]
VALUES = st.one_of(
    st.text(max_size=30),
    st.lists(
        st.one_of(
            st.sampled_from(SHELL_FRAGMENTS),
            st.text(alphabet=st.characters(codec="ascii", exclude_categories=["Cc"]), max_size=6),
        ),
        min_size=1,
        max_size=6,
    ).map("".join),
    st.from_regex(r"[a-z0-9]{1,8}(/[a-z0-9._-]{1,8}){0,2}(:[a-z0-9.]{1,6})?", fullmatch=True),
)
FLAGS = ["--model-path", "--served-model-name", "--image"]


@settings(
    max_examples=DEPLOY_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    value=VALUES,
    flag=st.sampled_from(FLAGS),
    scenario=st.sampled_from(SCENARIOS),
)
def test_deploy_text_flags_are_refused_or_inert(tmp_path_factory, value, flag, scenario):
    """Every value is refused (exit 2, the flag named, no traceback) or reaches the engine as
    one argument, unchanged, from launch.sh, the README and the pods' scripts, creating
    nothing; the README never carries it as live HTML or a link."""
    workload, target, layout = scenario
    folder = tmp_path_factory.mktemp("fuzz")
    if workload is None:
        workload = folder / "wide-vllm.yaml"
        workload.write_text(re.sub(r"(?m)^engine: .*$", "engine: vllm", WIDE.read_text()))
    out = folder / "out"
    result = deploy(out, flag, value, "--layout", layout, workload=workload, target=target)
    assert "Traceback" not in result.stderr + result.stdout
    if result.code != 0:
        assert_refused(result, flag)
        event(f"{flag} refused")
        return
    event(f"{flag} accepted and run")
    if flag == "--image":
        assert value in container_images(yaml_docs(out))
        assert_inert(out, folder / "scratch", _served(out))
    else:
        assert_inert(out, folder / "scratch", value)
    assert live_markup((out / "README.md").read_text()) == []


def _served(out: Path) -> str:
    """The served model name a bundle uses (when the flag under test is the image)."""
    command = next(c for c in readme_commands(out) if c.startswith("aiperf "))
    return shlex.split(command)[3]  # aiperf profile --model NAME ...


MARKDOWN_FRAGMENTS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "](javascript:alert(1))",
    "[a](javascript:x)",
    "[b]: javascript:y",
    "`",
    "``",
    "<!--",
    "-->",
    "|",
    "\n# h",
    "\n---\n",
    "*",
    "_",
    "&lt;b&gt;",
    "<https://x.org>",
    "\\",
    "\t",
]
WORKLOAD_TEXT = st.lists(
    st.one_of(st.sampled_from(MARKDOWN_FRAGMENTS), st.text(max_size=5)), min_size=1, max_size=6
).map("".join)


@settings(
    max_examples=DEPLOY_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(name=WORKLOAD_TEXT, description=WORKLOAD_TEXT)
def test_workload_text_is_inert_in_every_markdown_output(tmp_path_factory, name, description):
    """A workload's name and description reach the report and the deploy README escaped, or
    the workload is refused (control characters) with exit 2."""
    folder = tmp_path_factory.mktemp("md")
    data = yaml.safe_load(CHAT.read_text()) | {"name": name, "description": description}
    workload = folder / "w.yaml"
    workload.write_text(yaml.safe_dump(data), encoding="utf-8")
    report = run_cli_in_process("--workload", str(workload), "--format", "markdown")
    assert "Traceback" not in report.stderr
    if report.code != 0:
        assert_refused(report, "w.yaml")
        event("workload refused")
        return
    event("report and README rendered")
    assert live_markup(report.stdout) == [], live_markup(report.stdout)
    out = folder / "out"
    assert deploy(out, workload=workload).code == 0
    readme = (out / "README.md").read_text()
    assert live_markup(readme) == [], live_markup(readme)
