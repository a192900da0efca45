"""What the verdict's provenance and confidence blocks cost per verdict, in CPU time.

Every verdict (a batch's too) is dumped to JSON once more and its numeric leaves labelled
(`provenance.labelled`), and its gain set against the error band (`confidence.confidence`).
This times both on one example's verdict, repeated, so a change that makes them a visible share
of a decision (about 2.9 ms each in a batch) shows here.

    python benchmarks/provenance_cost.py [--workload examples/rag-8k-h200-rdma-dynamo.yaml]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "skill") not in sys.path:
    sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.confidence import confidence  # noqa: E402
from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.provenance import labelled  # noqa: E402
from disagg_decider.workload import load_workload  # noqa: E402


def cpu_ms_per_call(fn, repeats: int) -> float:
    start = time.process_time()
    for _ in range(repeats):
        fn()
    return (time.process_time() - start) / repeats * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", type=Path, default=ROOT / "examples/rag-8k-h200-rdma-dynamo.yaml")
    ap.add_argument("--repeats", type=int, default=500)
    args = ap.parse_args(argv)
    w = load_workload(args.workload)
    v = decide(w, base_dir=args.workload.parent)
    label = cpu_ms_per_call(lambda: labelled(v, w, calibrated=False, overrides={}), args.repeats)
    sure = cpu_ms_per_call(
        lambda: confidence(v.fired_rules, v.metrics.gain, v.conditional, None), args.repeats
    )
    whole = cpu_ms_per_call(lambda: decide(w, base_dir=args.workload.parent), 20)
    print(f"workload        {args.workload.name}")
    print(f"provenance      {label:.3f} ms CPU per verdict ({len(v.provenance.fields)} paths)")
    print(f"confidence      {sure:.3f} ms CPU per verdict")
    print(f"whole decision  {whole:.1f} ms CPU (decide, one workload)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
