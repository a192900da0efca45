"""Seeded simulations whose results `tests/test_sim_seeded.py` pins, compared by meaning.

Each case runs one simulated mode on seeded requests and reduces the outcome to a signature of
its first-token and done times (`signature`): the count, NaNs, sum, sum of squares, a sum
weighted by request index (so a swap shows), 33 quantiles and 64 requests picked by index.
The CLI cases keep the whole JSON a user gets. Signatures are compared as the golden verdicts
are (`tests/meaning.py`): counts and text exact, floats within 1e-9 relative, so the last bit
of numpy's exp/log on another CPU passes and any change to the order of events, the step
times or the event loop's arithmetic beyond that fails.

The cases cover colocated (chunked and prefill-first, every router, bursty and overloaded
traffic so that queues, KV limits and run cuts are hit), disaggregated (plain and layer-wise
transfer, every router, overloaded so that prefilled requests wait for decode seats),
conditional (both router policies) and an MoE/EP layout (DeepSeek-V3, DP/EP attention), plus
the JSON of `decide simulate` and `decide sweep --simulate` as a user gets it.

Regenerate the pinned signatures after a deliberate change (calculator physics, simulator
behaviour), and only then:

    PYTHONPATH=skill python tests/sim_signature_cases.py --write

It rewrites `tests/data/sim_signatures.json`; review the diff (which cases moved) in the commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: the repository root, for `tests.*`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests import meaning
from tests.bimodal_support import bimodal_data

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SIGNATURES = Path(__file__).resolve().parent / "data" / "sim_signatures.json"
RAG = EXAMPLES / "rag-8k-h200-rdma-dynamo.yaml"
CHAT = EXAMPLES / "chat-short-colocate.yaml"
MOE = EXAMPLES / "deepseek-v3-32xh200-colocate.yaml"

BIMODAL = bimodal_data()


QUANTILES = np.linspace(0.0, 1.0, 33)
PICKS = 64


def signature(a: np.ndarray) -> dict[str, Any]:
    """Enough of an array of times that any change beyond the last bits moves some of it."""
    x = np.asarray(a, dtype=np.float64)
    finite = x[np.isfinite(x)]
    picks = np.linspace(0, len(x) - 1, min(PICKS, len(x))).astype(int) if len(x) else []
    return meaning.rounded(
        {
            "n": len(x),
            "not_finite": int(len(x) - len(finite)),
            "sum": float(finite.sum()),
            "sum_of_squares": float(np.square(finite).sum()),
            # Order-sensitive: two requests that swap times move it, picked or not.
            "index_weighted_sum": float(
                np.nansum(np.arange(len(x)) * np.where(np.isfinite(x), x, 0.0))
            ),
            "quantiles": [float(q) for q in np.quantile(finite, QUANTILES)] if len(finite) else [],
            "picked": [float(v) if np.isfinite(v) else str(v) for v in x[picks]],
        }
    )


def signatures(first_token_ms: np.ndarray, done_ms: np.ndarray) -> dict[str, Any]:
    return {"first_token_ms": signature(first_token_ms), "done_ms": signature(done_ms)}


@cache
def _resolved(path: Path | None, layerwise: bool = False):
    from disagg_decider.decide import decide
    from disagg_decider.workload import Workload, load_workload, resolve

    if path is None:
        w = Workload.model_validate(BIMODAL)
        base = None
    else:
        w = load_workload(path)
        base = path.parent
    if layerwise:
        data = w.model_dump(mode="json")
        data["efficiency"]["kv_transfer"] = "layerwise"
        w = Workload.model_validate(data)
    r = resolve(w, base) if base is not None else resolve(w)
    v = decide(w, base_dir=base) if base is not None else decide(w)
    return r, v


def _mode(path, mode, n, seed, rate_x=1.0, cv=1.0, layerwise=False, **setup_kw) -> str:
    from disagg_decider.sim import run

    r, v = _resolved(path, layerwise)
    s = run.setup(r, v, **setup_kw)
    rate = r.workload.traffic.requests_per_second * rate_x
    requests = run.synthetic_requests(r, n, seed, rate, cv)
    out = run.simulate_mode(s, mode, requests)
    return signatures(out.first_token_ms, out.done_ms)


def _conditional(policy: str, n: int, seed: int, rate_x: float = 1.0) -> str:
    from disagg_decider.sim import conditional, run

    r, v = _resolved(None)
    cfg = conditional.config_of(r, v, policy)
    assert cfg is not None, "the bimodal mix should give a conditional verdict"
    requests = run.synthetic_requests(r, n, seed, r.workload.traffic.requests_per_second * rate_x)
    out = conditional.simulate(
        run.engine(r, cfg.prefill_tp), run.engine(r, cfg.decode_tp), requests, cfg
    )
    return signatures(out.first_token_ms, out.done_ms)


def _cli(*args: str) -> dict[str, Any]:
    """`decide ...` in a fresh process, as a user runs it: its JSON output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    proc = subprocess.run(
        [sys.executable, "-m", "disagg_decider", *args, "--quiet", "--jobs", "1", "-f", "json"],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return meaning.rounded(json.loads(proc.stdout))


CASES = {
    "colocated-rag-chunked": lambda: _mode(RAG, "colocated", 4000, 1),
    "colocated-rag-overload-bursty": lambda: _mode(RAG, "colocated", 3000, 2, 1.6, 3.0),
    "colocated-rag-prefill-first-rr": lambda: _mode(
        RAG, "colocated", 3000, 3, 1.2, policy="prefill-first", router="round-robin"
    ),
    "colocated-chat-random-verdict-cap": lambda: _mode(
        CHAT, "colocated", 4000, 4, 1.5, router="random", batch_cap="verdict"
    ),
    "disaggregated-rag": lambda: _mode(RAG, "disaggregated", 4000, 1),
    "disaggregated-rag-overload-verdict-cap": lambda: _mode(
        RAG, "disaggregated", 3000, 5, 1.8, 2.0, batch_cap="verdict"
    ),
    "disaggregated-rag-layerwise-rr": lambda: _mode(
        RAG, "disaggregated", 3000, 6, 1.2, layerwise=True, router="round-robin"
    ),
    "disaggregated-chat-random": lambda: _mode(CHAT, "disaggregated", 3000, 7, router="random"),
    "conditional-isl-bounding": lambda: _conditional("isl_bounding", 3000, 1),
    "conditional-prefill-load-overload": lambda: _conditional("prefill_load", 3000, 2, 1.4),
    "moe-ep-colocated": lambda: _mode(MOE, "colocated", 3000, 1, 1.3),
    "moe-ep-disaggregated": lambda: _mode(MOE, "disaggregated", 3000, 1, 1.3),
    "cli-simulate-rag": lambda: _cli("simulate", "--workload", str(RAG), "-n", "3000"),
    "cli-simulate-moe-bursty": lambda: _cli(
        "simulate", "--workload", str(MOE), "-n", "2000", "--cv", "2", "--seed", "3"
    ),
    "cli-sweep-rag": lambda: _cli(
        "sweep", "--workload", str(RAG), "--simulate", "-n", "1000", "--steps", "2"
    ),
}


def pinned() -> dict[str, Any]:
    return json.loads(SIGNATURES.read_text())


def write() -> None:
    pinned_now = {name: case() for name, case in CASES.items()}
    SIGNATURES.write_text(json.dumps(pinned_now, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(pinned_now)} signatures to {SIGNATURES.relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: PYTHONPATH=skill python tests/sim_signature_cases.py --write")
    write()
