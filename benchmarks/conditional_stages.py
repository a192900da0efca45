"""Python-level calls the conditional search spends in each of its stages (issue 27).

Run from the repository root (or give another checkout's root, to compare two versions):

    python benchmarks/conditional_stages.py [--root PATH] [--workloads 256]

`conditional_calls.py` counts the whole search; this splits it by stage, so a change to one
stage shows where it lands: the candidates (`candidates_many`, with its prefill-pool
bisection `prefill_pools` and decode-worker search `decode_workers`), the settling of each
threshold's candidates (`settle_rows`; the walk's later rounds are inside `_best_of_many`),
the lift onto the overall TTFT target (`priced_rows`, with `overall_ttft.lift`), the sizing
for the rate (`sized_rows`) and the report of the chosen layout (`report_rows` and the
function it returns). Stages nest (a stage's calls include its parts') and a profiler cannot,
so each stage is counted in a run of its own: the counts are the same on every run, per
decision over a seeded batch (`workload_mix.py`, seed 7) and for one example decided alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

# (label, module, attribute): the attribute the stage is called through.
STAGES = (
    ("candidates_many", "disagg_decider.calc.modes.conditional", "candidates_many"),
    ("  prefill_pools", "disagg_decider.calc.layouts.thresholds", "prefill_pools"),
    ("  decode_workers", "disagg_decider.calc.layouts.thresholds", "decode_workers"),
    ("settle_rows", "disagg_decider.calc.modes.conditional", "settle_rows"),
    ("_best_of_many (walk)", "disagg_decider.calc.modes.conditional", "_best_of_many"),
    ("priced_rows (lift)", "disagg_decider.calc.modes.conditional", "priced_rows"),
    ("  overall_ttft.lift", "disagg_decider.calc.modes.overall_ttft", "lift"),
    ("sized_rows", "disagg_decider.calc.modes.conditional", "sized_rows"),
    ("report_rows (+ its function)", "disagg_decider.calc.modes.conditional_report", "report_rows"),
)


def stage_calls(root: Path, workloads: int, example: str) -> dict[str, tuple[float, float]]:
    """Per stage: (calls per decision over the batch, calls deciding `example` alone)."""
    sys.path[:0] = [str(root / "skill"), str(root / "benchmarks")]
    import importlib

    from conditional_calls import counting
    from disagg_decider.decide import decide, decide_many
    from disagg_decider.workload import load_workload
    from workload_mix import workload_mix

    mix = workload_mix(workloads)
    one = load_workload(root / "examples" / f"{example}.yaml")
    decide_many(mix[:64])  # warm: tables and caches built outside the counts
    decide(one)
    out = {}
    for label, module, name in STAGES:
        owner = importlib.import_module(module)
        original, total = getattr(owner, name), [0]
        setattr(owner, name, counting(original, total))
        try:
            decide_many(mix)
            batched = total[0] / len(mix)
            total[0] = 0
            decide(one)
            out[label] = (batched, float(total[0]))
        finally:
            setattr(owner, name, original)
    return out


def main() -> None:
    from decide_calls import arguments

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    args = arguments(__doc__.splitlines()[0])
    example = "rag-8k-h200-rdma-dynamo"
    found = stage_calls(args.root, args.workloads, example)
    print(f"{args.root}")
    print(f"{'calls per decision':<32} {'batched':>9} {example:>26}")
    for label, (batched, alone) in found.items():
        print(f"  {label:<30} {batched:>9,.0f} {alone:>26,.0f}")


if __name__ == "__main__":
    main()
