"""Seeded simulations whose exact results `tests/test_sim_identical.py` pins by digest.

Each case runs one simulated mode on seeded requests and reduces the outcome to a SHA-256 of
the raw bytes of its first-token and done times (float64, bit for bit), so any change to the
order of events, the step times or the floating-point arithmetic of the event loop shows.
The cases cover colocated (chunked and prefill-first, every router, bursty and overloaded
traffic so that queues, KV limits and run cuts are hit), disaggregated (plain and layer-wise
transfer, every router, overloaded so that prefilled requests wait for decode seats),
conditional (both router policies) and an MoE/EP layout (DeepSeek-V3, DP/EP attention), plus
the JSON of `decide simulate` and `decide sweep --simulate` as a user gets it.

Regenerate the pinned digests after a deliberate change (calculator physics, simulator
behaviour), and only then:

    PYTHONPATH=skill /work/venv/bin/python tests/sim_digest_cases.py --write

It rewrites `tests/data/sim_digests.json`; review the diff (which cases moved) in the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: the repository root, for `tests.*`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.bimodal_support import bimodal_data

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DIGESTS = Path(__file__).resolve().parent / "data" / "sim_digests.json"
RAG = EXAMPLES / "rag-8k-h200-rdma-dynamo.yaml"
CHAT = EXAMPLES / "chat-short-colocate.yaml"
MOE = EXAMPLES / "deepseek-v3-32xh200-colocate.yaml"

BIMODAL = bimodal_data()


def digest_arrays(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()[:32]


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
    return digest_arrays(out.first_token_ms, out.done_ms)


def _conditional(policy: str, n: int, seed: int, rate_x: float = 1.0) -> str:
    from disagg_decider.sim import conditional, run

    r, v = _resolved(None)
    cfg = conditional.config_of(r, v, policy)
    assert cfg is not None, "the bimodal mix should give a conditional verdict"
    requests = run.synthetic_requests(r, n, seed, r.workload.traffic.requests_per_second * rate_x)
    out = conditional.simulate(
        run.engine(r, cfg.prefill_tp), run.engine(r, cfg.decode_tp), requests, cfg
    )
    return digest_arrays(out.first_token_ms, out.done_ms)


def _cli(*args: str) -> str:
    """`decide ...` in a fresh process, as a user runs it: a digest of its stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    proc = subprocess.run(
        [sys.executable, "-m", "disagg_decider", *args, "--quiet", "--jobs", "1", "-f", "json"],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return hashlib.sha256(proc.stdout).hexdigest()[:32]


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
        "sweep", "--workload", str(RAG), "--simulate", "-n", "300", "--steps", "2"
    ),
}


def pinned() -> dict[str, str]:
    return json.loads(DIGESTS.read_text())


def write() -> None:
    digests = {name: case() for name, case in CASES.items()}
    DIGESTS.write_text(json.dumps(digests, indent=2, sort_keys=True) + "\n")
    print(f"wrote {len(digests)} digests to {DIGESTS.relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: PYTHONPATH=skill python tests/sim_digest_cases.py --write")
    write()
