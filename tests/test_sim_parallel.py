"""`--jobs`: simulations in worker processes give the same results as one after the other.

Fixed seeds make every simulation a pure function of its inputs; these tests hold the
parallel path (`sim.parallel`, fork workers) to the sequential one (`jobs=1`, the path the
simulator had before `--jobs`), field for field.
"""

from __future__ import annotations

import json

from disagg_decider.decide import decide
from disagg_decider.sim import run
from disagg_decider.sim.parallel import default_jobs, run_all
from disagg_decider.sim.sweep import run_sweep
from disagg_decider.workload import load_workload, resolve
from tests.conftest import RAG_EXAMPLE, ROOT

CHAT = ROOT / "examples" / "chat-short-colocate.yaml"


def test_simulate_both_in_two_processes_equals_one_after_the_other():
    w = load_workload(RAG_EXAMPLE)
    r = resolve(w, RAG_EXAMPLE.parent)
    s = run.setup(r, decide(w, base_dir=RAG_EXAMPLE.parent))
    batch = run.synthetic_requests(r, 3000, seed=7)
    heard: list[tuple[str, int]] = []
    sequential = run.simulate_both(s, batch, jobs=1)
    parallel = run.simulate_both(s, batch, lambda m, n: heard.append((m, n)), jobs=2)
    assert {m: v.as_dict() for m, v in parallel.items()} == {
        m: v.as_dict() for m, v in sequential.items()
    }
    assert sorted(heard) == [("colocated", 3000), ("disaggregated", 3000)]
    assert sequential["colocated"].as_dict() != sequential["disaggregated"].as_dict()


def test_sweep_simulated_points_in_processes_equal_the_sequential_sweep():
    w = load_workload(CHAT)
    points: list[float] = []
    kwargs = {"simulate": True, "requests": 400, "seed": 3}
    sequential = run_sweep(w, CHAT.parent, 512, 4096, 2, **kwargs, jobs=1)
    parallel = run_sweep(w, CHAT.parent, 512, 4096, 2, **kwargs, jobs=3, on_point=points.append)
    assert json.dumps(parallel.as_dict()) == json.dumps(sequential.as_dict())
    assert sorted(points) == [float(p) for p in sequential.prompt_tokens]
    assert all(g > 0 for g in sequential.colocated_goodput_per_gpu)


def _square(x: int) -> int:
    return x * x


def test_run_all_keeps_the_order_of_the_calls_and_defaults_to_at_most_two_jobs():
    calls = [(i,) for i in range(7)]
    assert run_all(_square, calls, 3) == [i * i for i in range(7)] == run_all(_square, calls, 1)
    assert 1 <= default_jobs() <= 2
