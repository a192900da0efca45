"""Running what `decide deploy` writes, safely: launch.sh roles, README commands and the
Kubernetes `sh -c` scripts, under bash/sh in a temporary folder, with stub engines first on
PATH that record their argv and start nothing. Shared by the hostile deploy tests and their
property test.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

# Every program the generated commands start; each stub writes its argv (NUL-separated) to a
# new file in $ARGV_DIR and exits 0.
STUBS = ("vllm", "python3", "vllm-router", "aiperf", "curl")
_STUB = (
    '#!/bin/sh\nprintf \'%s\\0\' "$(basename "$0")" "$@" > "$(mktemp "$ARGV_DIR/call.XXXXXX")"\n'
)
SYSTEM_PATH = "/usr/bin:/bin"


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


def run_cli_in_process(*args: str) -> Outcome:
    """`decide ARGS` through its real entry point, in this process (no pytest fixture, so
    hypothesis can call it many times)."""
    from disagg_decider.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_argv = sys.argv
    sys.argv = ["decide", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old_argv
    return Outcome(code, out.getvalue(), err.getvalue())


def make_stubs(folder: Path) -> Path:
    """A bin folder holding the stub engines; returns it."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in STUBS:
        path = bin_dir / name
        path.write_text(_STUB)
        path.chmod(0o755)
    return bin_dir


@dataclass
class ShellRun:
    code: int
    stderr: str
    calls: list[list[str]]  # argv of each stub call, program name first
    left_behind: list[str]  # files the run created in its working folder


def run_shell(argv: list[str], folder: Path, env_extra: dict[str, str] | None = None) -> ShellRun:
    """Run `argv` (bash or sh) in an empty working folder under `folder`, stubs first on PATH
    and no MODEL/SERVED_MODEL_NAME in the environment."""
    bin_dir = make_stubs(folder)
    work, calls_dir = folder / "work", folder / "calls"
    for d in (work, calls_dir):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
    env = {
        "PATH": f"{bin_dir}:{SYSTEM_PATH}",
        "HOME": str(work),
        "ARGV_DIR": str(calls_dir),
        "LANG": "C.UTF-8",
        **(env_extra or {}),
    }
    proc = subprocess.run(
        argv,
        cwd=work,
        env=env,
        capture_output=True,
        timeout=60,  # only to detect a hang; these runs take milliseconds
        start_new_session=True,
    )
    calls = []
    for f in sorted(calls_dir.iterdir()):
        parts = f.read_bytes().split(b"\0")[:-1]
        calls.append([p.decode("utf-8", "surrogateescape") for p in parts])
    left = sorted(str(p.relative_to(work)) for p in work.rglob("*"))
    return ShellRun(proc.returncode, proc.stderr.decode("utf-8", "replace"), calls, left)


def launch_roles(out_dir: Path) -> list[str]:
    """The pool roles launch.sh offers (its `case` arms), router and local left out."""
    text = (out_dir / "launch.sh").read_text()
    return re.findall(r"^  (prefill|decode|colocated)\) ", text, flags=re.M)


def readme_commands(out_dir: Path) -> list[str]:
    """The benchmark commands of the README's bash blocks (the ones that name the model)."""
    text = (out_dir / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [
        line for b in blocks for line in b.splitlines() if line.startswith(("vllm ", "aiperf "))
    ]


def yaml_docs(out_dir: Path) -> list[dict]:
    docs = []
    for path in sorted(out_dir.rglob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return docs


def walk(node: object):
    """Every mapping in a YAML tree."""
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


def shell_scripts(docs: list[dict]) -> list[str]:
    """The `sh -c` scripts of the containers (multi-node replicas derive their rank flags)."""
    found = []
    for node in walk(docs):
        cmd = node.get("command")
        if isinstance(cmd, list) and cmd[:2] == ["/bin/sh", "-c"]:
            whole = cmd[2:] + list(node.get("args") or [])  # the script, then $0, $1...
            found.append(whole[0])
    return found


def container_images(docs: list[dict]) -> list[str]:
    return [n["image"] for n in walk(docs) if isinstance(n.get("image"), str)]


def strings_in(docs: list[dict]) -> list[str]:
    """Every string value (and list item) in the manifests."""
    out: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, dict):
            for v in node.values():
                visit(v)
        elif isinstance(node, list):
            for v in node:
                visit(v)

    visit(docs)
    return out


def env_for_scripts() -> dict[str, str]:
    """What LeaderWorkerSet sets in each pod."""
    return {"LWS_LEADER_ADDRESS": "10.0.0.1", "LWS_WORKER_INDEX": "1"}


# --- markdown: raw HTML and links outside code ------------------------------------------------

_SAFE_LINK = re.compile(r"\]\(<https?://[^\s<>`]*>\)")


def strip_code_spans(line: str) -> str:
    """The line with CommonMark code spans (a run of N backticks to the next run of exactly N)
    replaced by a space: their content is shown literally."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "`" and (i == 0 or line[i - 1] != "\\"):
            j = i
            while j < len(line) and line[j] == "`":
                j += 1
            close = re.compile(rf"(?<!`)`{{{j - i}}}(?!`)").search(line, j)
            if close:
                out.append(" ")
                i = close.end()
                continue
            out.append(line[i:j])
            i = j
            continue
        out.append(line[i])
        i += 1
    return "".join(out)


def live_markup(text: str) -> list[str]:
    """Raw HTML tags and link targets other than plain http(s) ones, outside fenced blocks
    and code spans: what a markdown renderer would act on."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        plain = _SAFE_LINK.sub(")", strip_code_spans(line))
        found += re.findall(r"(?<!\\)<[A-Za-z/!?][^>]{0,40}", plain)
        found += re.findall(r"(?<!\\)\]\([^)]{0,40}", plain)
    return found
