"""Writing a file the user named (`-o`, `--write-workload`, `--plot`) without surprises.

A target that exists is replaced only with `--force`; a target that is a symlink (dangling or
not) is never written *through*: without `--force` it is refused, with `--force` the link itself
is replaced by the new file, so nothing outside the named path is created or changed. Content
goes to a temporary file beside the target and is renamed into place, so an interrupted run
leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from disagg_decider.errors import UserError


def check_target(path: Path, force: bool, flag: str = "--out") -> None:
    """Refuse a symlink, a directory or an existing file (the last two unless `force`)."""
    if path.is_symlink():
        if not force:
            raise UserError(
                f"{flag} {path}: is a symbolic link; refusing to write through it (pass --force "
                "to replace the link itself with a file)"
            )
        return
    if path.is_dir():
        raise UserError(f"{flag} {path}: is a directory; give a file name inside it")
    if path.exists() and not force:
        raise UserError(f"{path}: already exists; pass --force to overwrite it")
    if path.exists() and not path.is_file():
        raise UserError(f"{flag} {path}: is not a regular file; refusing to replace it")


def write_with(path: Path, write: Callable[[Path], None], force: bool, flag: str = "--out") -> None:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it onto `path`."""
    check_target(path, force, flag)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix
        )
    except OSError as exc:
        raise UserError(f"{flag} {path}: cannot write ({exc.strerror})") from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)  # replaces a symlink itself, never its target
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{flag} {path}: cannot write ({exc.strerror})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str, force: bool, flag: str = "--out") -> None:
    write_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), force, flag)
