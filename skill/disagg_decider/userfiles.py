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
import io
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
    if current_policy().confined and given is not None:
        return _read_confined(path, what, max_bytes, str(given)[:300])
    data = read_bytes(path, what=what, max_bytes=max_bytes)
    text = decode_utf8(data, str(path)[:300], what)
    reads = _READS.get()
    if reads is not None:  # an MCP worker keeps what it read out of its error messages
        reads.append(text)
    return text


def _read_confined(path: Path, what: str, max_bytes: int, given: str) -> str:
    """`read_text` whose refusal names the path the client gave, not the one derived from it."""
    try:
        return read_text(path, what=what, max_bytes=max_bytes)
    except UserError as exc:
        refusal = _refused(str(path)[:300], current_policy())
        if str(exc) == str(refusal):
            raise _refused(given, current_policy()) from None
        raise


def read_bytes(
    path: Path, *, what: str, max_bytes: int = CONFIG_MAX_BYTES, raise_with: str = ""
) -> bytes:
    """The file's bytes under the same rules as `read_text` (for callers that hash them)."""
    with open_regular(path, what=what, max_bytes=max_bytes, raise_with=raise_with) as f:
        return f.read()


def decode_utf8(data: bytes, shown: str, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(
            f"{shown}:{line}: not UTF-8 text (byte {exc.start:,}); expected {what}"
        ) from None


@contextmanager
def open_regular(
    path: Path, *, what: str, max_bytes: int, raise_with: str = ""
) -> Iterator[io.BufferedReader]:
    """The checked file, open for reading in binary: a stream for readers that parse line by
    line (a big JSON Lines file is never held whole). Reading past `max_bytes` (a file that
    grows while read) raises the same `UserError` as a file that was too big to begin with;
    `raise_with` names the flag that raises the cap ("--max-file-mb")."""
    policy = current_policy()
    shown = str(path)[:300]
    real = _resolve(path, what, policy, shown)
    too_big = f"{shown}: larger than {max_bytes:,} bytes; expected {what}" + (
        f" (raise the cap with {raise_with})" if raise_with else ""
    )
    try:
        fd = _open_checked(real, max_bytes)
    except _NotRegular as exc:
        if policy.confined:
            raise _refused(shown, policy) from None
        raise UserError(f"{shown}: {exc}; expected {what}") from None
    except _TooBig:
        raise UserError(too_big) from None
    except OSError as exc:
        raise _unreadable(shown, exc, what, policy) from None
    stream = io.BufferedReader(_Capped(fd, max_bytes), buffer_size=1 << 20)
    try:
        yield stream
    except _TooBig:
        raise UserError(too_big) from None
    except OSError as exc:  # a read error part-way (EIO, ...): named like the others
        raise _unreadable(shown, exc, what, policy) from None
    finally:
        stream.close()


def _unreadable(shown: str, exc: OSError, what: str, policy: FilePolicy) -> UserError:
    if policy.confined:
        return _refused(shown, policy)
    return UserError(f"{shown}: cannot read ({exc.strerror or exc}); expected {what}")


def _resolve(path: Path, what: str, policy: FilePolicy, shown: str) -> Path:
    """The real path (symlinks resolved), confined under the policy."""
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
    return real


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


def _open_checked(real: Path, max_bytes: int) -> int:
    """Refuse anything but a regular file before opening it; the open descriptor is checked
    again (the file opened is the one checked, no swap in between)."""
    mode = os.stat(real).st_mode
    if not stat.S_ISREG(mode):
        raise _NotRegular(_kind(mode))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(real, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _NotRegular(_kind(info.st_mode))
        if info.st_size > max_bytes:
            raise _TooBig
    except BaseException:
        os.close(fd)
        raise
    return fd


class _Capped(io.RawIOBase):
    """A descriptor read at most `max_bytes` + 1 bytes deep: one byte more is `_TooBig`."""

    def __init__(self, fd: int, max_bytes: int) -> None:
        self._fd, self._left = fd, max_bytes + 1

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        if self._left <= 0:
            raise _TooBig
        view = memoryview(buffer).cast("B")
        n = os.readv(self._fd, [view[: min(len(view), self._left)]])
        self._left -= n
        if self._left <= 0:
            raise _TooBig
        return n

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()
