"""Reading a file a user (or an MCP client) named: regular files only, size-capped, confined.

Every file the tool reads on someone's behalf comes through `read_text`:
- it must be a regular file (after resolving symlinks): a FIFO, a device such as /dev/zero or a
  socket is refused from `os.stat` before it is opened, so a read cannot block or grow without
  end; the file is then opened with O_NONBLOCK and checked again on the open descriptor;
- it is read up to a cap (workloads and config.json 1 MB, traces `TRACE_MAX_BYTES`) plus one
  byte, so a file that grows while being read is refused too;
- under an MCP server, `allowed_dirs` confines reads to the directories the server was started
  with (`decide mcp --allow-dir DIR`); with none, no local file is read at all. A refusal there
  says the same thing whether or not the path exists, so the client learns nothing about it.

The policy is a context variable: the CLI leaves it unrestricted, the MCP server sets it for each
tool call (anyio copies the context into the worker thread that runs the tool).
"""

from __future__ import annotations

import contextvars
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from disagg_decider.errors import UserError

CONFIG_MAX_BYTES = 1_000_000  # a workload YAML or a Hugging Face config.json
TRACE_MAX_BYTES = 256_000_000  # the Azure 2024 week-long traces are ~100 MB


@dataclass(frozen=True)
class FilePolicy:
    """None: any path the process can read (the CLI). A tuple: only under these directories."""

    allowed_dirs: tuple[Path, ...] | None = None

    @property
    def confined(self) -> bool:
        return self.allowed_dirs is not None


_UNRESTRICTED = FilePolicy()
_POLICY: contextvars.ContextVar[FilePolicy | None] = contextvars.ContextVar(
    "disagg_file_policy", default=None
)


_READS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "disagg_file_reads", default=None
)


@contextmanager
def recording_reads(into: list[str]) -> Iterator[None]:
    """Collect the text of every file `read_text` returns meanwhile (the MCP worker uses it
    to keep a file's content out of the error it sends back)."""
    token = _READS.set(into)
    try:
        yield
    finally:
        _READS.reset(token)


def current_policy() -> FilePolicy:
    return _POLICY.get() or _UNRESTRICTED


@contextmanager
def file_policy(policy: FilePolicy) -> Iterator[None]:
    token = _POLICY.set(policy)
    try:
        yield
    finally:
        _POLICY.reset(token)


def confined_policy(dirs: Sequence[Path]) -> FilePolicy:
    """The policy for `--allow-dir` values: each resolved, each must be an existing directory."""
    resolved = []
    for d in dirs:
        path = Path(d).expanduser()
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise UserError(f"--allow-dir {path}: not an existing directory") from None
        if not real.is_dir():
            raise UserError(f"--allow-dir {path}: not a directory")
        resolved.append(real)
    return FilePolicy(tuple(resolved))


def base_dir_for_tools(policy: FilePolicy) -> Path | None:
    """Where a relative path given to an MCP tool is read from: the first allowed directory.

    None without one: the path is then refused as given, so the answer does not reveal the
    server's working directory.
    """
    if policy.allowed_dirs:
        return policy.allowed_dirs[0]
    return None if policy.confined else Path.cwd()


def _shipped_dirs() -> tuple[Path, ...]:
    """This package's own data (catalog, rulebook): readable under any policy."""
    package = Path(__file__).resolve().parent
    return (package, package.parents[1] / "rules")


def _allowed(real: Path, policy: FilePolicy) -> bool:
    dirs = (*(policy.allowed_dirs or ()), *_shipped_dirs())
    return any(real.is_relative_to(d) for d in dirs)


def _refused(shown: str, policy: FilePolicy) -> UserError:
    if not policy.allowed_dirs:
        return UserError(
            f"{shown}: this MCP server reads no local files; start it with "
            "`decide mcp --allow-dir DIR` to allow regular files under DIR"
        )
    dirs = ", ".join(str(d) for d in policy.allowed_dirs)
    return UserError(f"{shown}: not a readable regular file under the allowed directories ({dirs})")


def read_text(
    path: Path, *, what: str, max_bytes: int = CONFIG_MAX_BYTES, given: Path | None = None
) -> str:
    """The file's text (UTF-8), or a `UserError` that names the path and what was expected.

    `what` names the expected content ("a workload YAML file"). Under a confined policy every
    failure reads alike, so the answer never tells a client whether a path exists; `given` is
    the path the client named when `path` was derived from it by looking at the file system
    (a directory's config.json), and the refusal names that one instead.
    """
    policy = current_policy()
    shown = str(path)[:300]
    if policy.confined and given is not None:
        return _read_confined(path, what, max_bytes, str(given)[:300])
    try:
        real = Path(path).expanduser().resolve(strict=True)
    except FileNotFoundError:
        if policy.confined:
            raise _refused(shown, policy) from None
        raise UserError(f"{shown}: file not found (expected {what})") from None
    except (OSError, RuntimeError, ValueError):  # symlink loop, name too long, NUL byte
        if policy.confined:
            raise _refused(shown, policy) from None
        raise UserError(
            f"{shown}: cannot resolve the path (symlink loop?); expected {what}"
        ) from None
    if policy.confined and not _allowed(real, policy):
        raise _refused(shown, policy)
    try:
        data = _read_regular(real, max_bytes)
    except _NotRegular as exc:
        if policy.confined:
            raise _refused(shown, policy) from None
        raise UserError(f"{shown}: {exc}; expected {what}") from None
    except _TooBig:
        raise UserError(f"{shown}: larger than {max_bytes:,} bytes; expected {what}") from None
    except OSError as exc:
        if policy.confined:
            raise _refused(shown, policy) from None
        raise UserError(f"{shown}: cannot read ({exc.strerror or exc}); expected {what}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(
            f"{shown}:{line}: not UTF-8 text (byte {exc.start:,}); expected {what}"
        ) from None
    reads = _READS.get()
    if reads is not None:
        reads.append(text)
    return text


def _read_confined(path: Path, what: str, max_bytes: int, given: str) -> str:
    try:
        return read_text(path, what=what, max_bytes=max_bytes)
    except UserError as exc:
        refusal = _refused(str(path)[:300], current_policy())
        if str(exc) == str(refusal):
            raise _refused(given, current_policy()) from None
        raise


class _NotRegular(Exception):
    pass


class _TooBig(Exception):
    pass


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISFIFO(mode):
        return "is a named pipe (FIFO), not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file"
    return "is not a regular file"


def _read_regular(real: Path, max_bytes: int) -> bytes:
    """Refuse anything but a regular file before opening it; read at most max_bytes + 1."""
    mode = os.stat(real).st_mode
    if not stat.S_ISREG(mode):
        raise _NotRegular(_kind(mode))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(real, flags)
    try:
        info = os.fstat(fd)  # the file opened is the one checked (no swap in between)
        if not stat.S_ISREG(info.st_mode):
            raise _NotRegular(_kind(info.st_mode))
        if info.st_size > max_bytes:
            raise _TooBig
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise _TooBig
    return data
