"""Compare recorded outputs by meaning: structure and text exact, floats within a tolerance.

Golden outputs used to be compared byte for byte, which records one machine's floating-point
behaviour: numpy takes different exp/log code paths on CPUs with and without AVX-512, and the
last bit of a result moves. Moving every exp by 1-4 ulp changes the bytes of most verdicts and
no decision, layout, size or sentence; the largest relative change in any number is ~4e-14.

So a recorded value and a computed one are equal when
  - dicts have the same keys and lists the same length, compared item by item;
  - strings, booleans, None and integers are identical (decisions, layouts, sizes, text);
  - floats agree within `REL_TOL` relative, or `ABS_TOL` absolute near zero.

`REL_TOL` is five orders of magnitude above the largest ulp-level drift measured and far below
anything a physics or rule change moves (those move numbers by 1e-4 and more).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

REL_TOL = 1e-9
ABS_TOL = 1e-12
STORED_DIGITS = 12  # significant digits a fixture keeps: its own rounding stays ~5e-13 relative


@dataclass(frozen=True)
class Difference:
    path: str
    recorded: Any
    computed: Any

    def __str__(self) -> str:
        text = f"{self.path}: recorded {_short(self.recorded)}, computed {_short(self.computed)}"
        rel = relative_difference(self.recorded, self.computed)
        return text if rel is None else f"{text} (relative difference {rel:.3g})"


def relative_difference(a: Any, b: Any) -> float | None:
    """|a - b| / max(|a|, |b|) for two real numbers; None for anything else."""
    if not (_is_float_like(a) and _is_float_like(b)):
        return None
    if a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b))


def differences(recorded: Any, computed: Any, path: str = "") -> list[Difference]:
    """Every place where `computed` means something other than `recorded`."""
    if isinstance(recorded, dict) and isinstance(computed, dict):
        out: list[Difference] = []
        for key in sorted(set(recorded) | set(computed), key=str):
            here = f"{path}.{key}" if path else str(key)
            if key not in computed:
                out.append(Difference(here, recorded[key], "<missing>"))
            elif key not in recorded:
                out.append(Difference(here, "<missing>", computed[key]))
            else:
                out.extend(differences(recorded[key], computed[key], here))
        return out
    if isinstance(recorded, list) and isinstance(computed, list):
        if len(recorded) != len(computed):
            return [Difference(f"{path} (length)", len(recorded), len(computed))]
        out = []
        for i, (r, c) in enumerate(zip(recorded, computed, strict=True)):
            out.extend(differences(r, c, f"{path}[{i}]"))
        return out
    return (
        [] if same_leaf(recorded, computed) else [Difference(path or "<root>", recorded, computed)]
    )


def same_leaf(recorded: Any, computed: Any) -> bool:
    if isinstance(recorded, float) or isinstance(computed, float):
        if not (_is_float_like(recorded) and _is_float_like(computed)):
            return False
        if math.isnan(recorded) or math.isnan(computed):
            return math.isnan(recorded) and math.isnan(computed)
        return math.isclose(recorded, computed, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return type(recorded) is type(computed) and recorded == computed


def rounded(value: Any, digits: int = STORED_DIGITS) -> Any:
    """`value` with every float kept to `digits` significant digits, so fixtures compress."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value


def _is_float_like(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- another CPU's last bits, made here --------------------------------------------------


def move_exp_and_log(monkeypatch: Any, ulps: int) -> None:
    """Move every exp and log result (numpy's and math's) `ulps` units in the last place up.

    What numpy's other exp/log code paths do on another CPU, done on this one, so portability
    is checked before a stop rather than on a user's clone.
    """
    monkeypatch.setattr(np, "exp", _moved_ufunc(np.exp, ulps))
    monkeypatch.setattr(np, "log", _moved_ufunc(np.log, ulps))
    monkeypatch.setattr(math, "exp", _moved_scalar(math.exp, ulps))
    monkeypatch.setattr(math, "log", _moved_scalar(math.log, ulps))


def _moved_ufunc(ufunc: Any, ulps: int) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        result = ufunc(*args, **kwargs)
        moved = np.asarray(result, dtype=np.float64)
        for _ in range(ulps):
            moved = np.nextafter(moved, np.inf)
        out = kwargs.get("out")
        if out is not None:
            target = out[0] if isinstance(out, tuple) else out
            target[...] = moved
            return target
        return moved if isinstance(result, np.ndarray) else np.float64(moved)

    return call


def _moved_scalar(fn: Any, ulps: int) -> Any:
    def call(*args: Any) -> float:
        value = fn(*args)
        for _ in range(ulps):
            value = math.nextafter(value, math.inf)
        return value

    return call
