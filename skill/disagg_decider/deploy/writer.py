"""Put generated files on disk without ever clobbering a user's file by accident.

Every path is checked before anything is written, so a refused run leaves the folder exactly
as it was; with `force` the files are replaced, each through a temporary file and a rename so
an interrupted run never leaves half a manifest behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path, PurePosixPath

from disagg_decider.errors import UserError

EXECUTABLE_SUFFIXES = (".sh",)


def existing(out_dir: Path, files: dict[str, str]) -> list[Path]:
    return [out_dir / rel for rel in sorted(files) if (out_dir / rel).exists()]


def write_files(out_dir: Path, files: dict[str, str], *, force: bool) -> list[Path]:
    """Write `files` (relative path -> text) under `out_dir`; returns the paths written."""
    for rel in files:
        _check_relative(rel)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out-dir {out_dir}: exists and is not a directory")
    clashes = existing(out_dir, files)
    if clashes and not force:
        listed = "\n  ".join(str(p) for p in clashes)
        raise UserError(
            f"{len(clashes)} file(s) already exist; nothing was written. Pass --force to "
            f"replace them, or choose another --out-dir:\n  {listed}"
        )
    for path in clashes:
        if path.is_dir():
            raise UserError(f"{path}: is a directory, cannot replace it with a file")
    written = []
    for rel in sorted(files):
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, files[rel], executable=rel.endswith(EXECUTABLE_SUFFIXES))
        written.append(path)
    return written


def _check_relative(rel: str) -> None:
    """Emitters only produce plain relative paths; refuse anything that could escape."""
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ValueError(f"refusing to write outside the output folder: {rel!r}")


def _atomic_write(path: Path, text: str, *, executable: bool) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        mode = 0o755 if executable else 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
