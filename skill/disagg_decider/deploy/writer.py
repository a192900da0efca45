"""Put generated files on disk without ever clobbering a user's file by accident.

Every path is checked before anything is written, so a refused run leaves the folder exactly
as it was: an existing file needs `force`, and a symlink anywhere below the output folder (a
linked `k8s/`, a linked manifest) or a file where a folder must go is refused unless `force`
(then the link is replaced, never written through). The whole set is first written to a
temporary folder beside its destination and only then renamed into place, so a failure while
writing leaves nothing half-written.
"""

from __future__ import annotations

import os
import shutil
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
    _check_no_links(out_dir, files, force)
    clashes = existing(out_dir, files)
    if clashes and not force:
        listed = "\n  ".join(str(p) for p in clashes)
        raise UserError(
            f"{len(clashes)} file(s) already exist; nothing was written. Pass --force to "
            f"replace them, or choose another --out-dir:\n  {listed}"
        )
    for path in clashes:
        if path.is_dir() and not path.is_symlink():
            raise UserError(f"{path}: is a directory, cannot replace it with a file")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=out_dir, prefix=".decide-staging-"))
    except OSError as exc:
        raise UserError(f"--out-dir {out_dir}: cannot write ({exc.strerror})") from None
    try:
        for rel in sorted(files):
            staged = staging / rel
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.write_text(files[rel], encoding="utf-8", newline="\n")
            os.chmod(staged, 0o755 if rel.endswith(EXECUTABLE_SUFFIXES) else 0o644)
        written = []
        for rel in sorted(files):
            path = out_dir / rel
            _replace_links_in(out_dir, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / rel, path)
            written.append(path)
    except OSError as exc:
        raise UserError(f"--out-dir {out_dir}: cannot write ({exc.strerror})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written


def _check_no_links(out_dir: Path, files: dict[str, str], force: bool) -> None:
    """Every existing component below out_dir must be a real folder (or the file itself)."""
    for rel in sorted(files):
        parts = PurePosixPath(rel).parts
        node = out_dir
        for i, part in enumerate(parts):
            node = node / part
            last = i == len(parts) - 1
            if node.is_symlink():
                if not force:
                    raise UserError(
                        f"{node}: is a symbolic link; nothing was written. Refusing to write "
                        "through it (pass --force to replace the link)"
                    )
            elif not last and node.exists() and not node.is_dir():
                raise UserError(
                    f"{node}: exists and is not a folder, but {rel} goes inside it; nothing "
                    "was written"
                )


def _replace_links_in(out_dir: Path, rel: str) -> None:
    """With --force: remove symlinks on the way to `rel` so the write lands under out_dir."""
    node = out_dir
    for part in PurePosixPath(rel).parts:
        node = node / part
        if node.is_symlink():
            node.unlink()


def _check_relative(rel: str) -> None:
    """Emitters only produce plain relative paths; refuse anything that could escape."""
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ValueError(f"refusing to write outside the output folder: {rel!r}")
