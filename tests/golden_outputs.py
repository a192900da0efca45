"""Golden verdicts: the exact JSON `decide` writes, recorded so speed work shows it changed none.

The fixture (`tests/data/golden_outputs.json.gz`) holds, for
  - every file in `examples/`: the full `decide --workload FILE --format json` text;
  - a seeded batch of 800 workloads around the examples (`benchmarks/workload_mix.py`, seed 17),
    decided together by `decide_many` (the `decide batch` path);
  - a seeded set of heterogeneous-pool variants of the B200/H200 example (their own path,
    `calc/hetero.py`, which the mix leaves out);
the SHA-256 of each verdict's JSON (exactly as `decide --format json` prints it), a digest of
each input workload (so a changed generator reads as "inputs changed", not as a wrong output)
and a few readable figures per verdict for diagnosing a mismatch. `tests/test_golden_outputs.py`
recomputes them and compares; identical means byte-identical JSON, no rounding.

Refresh it after a deliberate change to outputs (a new rule, new physics, a catalog fix), and
commit the new fixture with the change that explains it:

    PYTHONPATH=skill python tests/golden_outputs.py --update

`python tests/golden_outputs.py` (no flag) compares and prints the first differences.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "skill", ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from disagg_decider.cli import verdict_json  # noqa: E402
from disagg_decider.decide import decide, decide_file, decide_many  # noqa: E402
from disagg_decider.verdict import Verdict  # noqa: E402
from disagg_decider.workload import Workload, load_workload  # noqa: E402
from workload_mix import workload_mix  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "golden_outputs.json.gz"
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
HETERO_EXAMPLE = ROOT / "examples" / "b200-prefill-h200-decode-dynamo.yaml"
MIX_WORKLOADS = 800
MIX_SEED = 17
HETERO_WORKLOADS = 12
HETERO_SEED = 17


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def workload_digest(w: Workload) -> str:
    return digest(json.dumps(w.model_dump(mode="json"), sort_keys=True))


def key_figures(v: Verdict) -> dict[str, Any]:
    """What a reader checks first when a digest differs: the call and the numbers behind it."""
    m = v.metrics
    return {
        "decision": v.decision,
        "feasible": v.feasible,
        "gain": m.gain,
        "goodput_per_gpu_colocated": m.goodput_per_gpu_colocated,
        "goodput_per_gpu_disaggregated": m.goodput_per_gpu_disaggregated,
        "crossover_prompt_tokens": m.crossover_prompt_tokens,
        "threshold_tokens": v.conditional_disagg_threshold_tokens,
        "pools": [v.sizing.prefill_gpus, v.sizing.decode_gpus, v.sizing.colocated_gpus],
    }


def hetero_variants(n: int, seed: int = HETERO_SEED) -> list[Workload]:
    """`n` seeded variations of the heterogeneous example: rate, lengths, SLOs, pool sizes."""
    rng = random.Random(seed)
    data0 = load_workload(HETERO_EXAMPLE).model_dump(mode="json", exclude_none=True)
    out = []
    for i in range(n):
        data = json.loads(json.dumps(data0))
        t, slo, cluster = data["traffic"], data["slo"], data["cluster"]
        t["requests_per_second"] *= rng.choice((0.25, 0.5, 1.0, 2.0, 4.0))
        for key in ("prompt_tokens", "output_tokens"):
            p50 = max(16.0, round(t[key]["p50"] * rng.choice((0.25, 0.5, 1.0, 2.0))))
            t[key] = {"p50": p50, "p99": p50 * rng.choice((1.0, 2.0, 3.0))}
        slo["ttft_ms"] *= rng.choice((0.5, 1.0, 2.0))
        slo["tpot_ms"] *= rng.choice((0.7, 1.0, 1.5, 3.0))
        cluster["prefill_gpus"], cluster["decode_gpus"] = rng.choice(((8, 8), (4, 8), (8, 16)))
        cluster["gpus"] = cluster["prefill_gpus"] + cluster["decode_gpus"]
        data["name"] = f"{data['name']}-{i}"
        out.append(Workload.model_validate(data))
    return out


def _records(workloads: Sequence[Workload], verdicts: Sequence[Verdict]) -> list[dict]:
    return [
        {
            "workload": workload_digest(w),
            "verdict": digest(verdict_json(v)),
            "figures": key_figures(v),
        }
        for w, v in zip(workloads, verdicts, strict=True)
    ]


def compute() -> dict[str, Any]:
    """Every golden output of the current code (about as long as 800 batched verdicts take)."""
    examples = {}
    for path in EXAMPLES:
        text = verdict_json(decide_file(path))
        examples[path.name] = {"verdict": digest(text), "json": text}
    mix = workload_mix(MIX_WORKLOADS, seed=MIX_SEED)
    hetero = hetero_variants(HETERO_WORKLOADS)
    return {
        "examples": examples,
        "mix": _records(mix, decide_many(mix)),
        "hetero": _records(hetero, [decide(w) for w in hetero]),
    }


def load() -> dict[str, Any]:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as f:
        return json.load(f)


def save(data: dict[str, Any]) -> None:
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=0, sort_keys=True)
    # mtime=0: the same outputs give the same bytes, so an unchanged refresh is no git change.
    with open(FIXTURE, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(text.encode())


def differences(expected: dict[str, Any], actual: dict[str, Any], limit: int = 10) -> list[str]:
    """Readable lines, one per differing verdict (at most `limit`), empty when identical."""
    lines = []
    for name in sorted(set(expected["examples"]) | set(actual["examples"])):
        e, a = expected["examples"].get(name), actual["examples"].get(name)
        if e is None or a is None or e["verdict"] != a["verdict"]:
            lines.append(f"examples/{name}: {_first_json_difference(e, a)}")
    for part in ("mix", "hetero"):
        e_rows, a_rows = expected[part], actual[part]
        if len(e_rows) != len(a_rows):
            lines.append(f"{part}: {len(e_rows)} recorded workloads, {len(a_rows)} now")
        for i, (e, a) in enumerate(zip(e_rows, a_rows, strict=False)):
            if e["workload"] != a["workload"]:
                lines.append(f"{part}[{i}]: the input workload changed (generator edited?)")
            elif e["verdict"] != a["verdict"]:
                changed = {
                    k: (e["figures"].get(k), v)
                    for k, v in a["figures"].items()
                    if e["figures"].get(k) != v
                }
                lines.append(f"{part}[{i}]: verdict JSON differs; figures (was, now): {changed}")
    return lines[:limit] + ([f"... {len(lines) - limit} more"] if len(lines) > limit else [])


def _first_json_difference(e: dict | None, a: dict | None) -> str:
    if e is None or a is None:
        return "missing from the " + ("fixture" if e is None else "current examples")
    pairs = zip(e["json"].splitlines(), a["json"].splitlines(), strict=False)
    for n, (x, y) in enumerate(pairs, start=1):
        if x != y:
            return f"line {n}: was {x.strip()!r}, now {y.strip()!r}"
    return "lengths differ"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="record the current outputs")
    args = parser.parse_args(argv)
    actual = compute()
    if args.update:
        save(actual)
        print(f"wrote {FIXTURE.relative_to(ROOT)} ({FIXTURE.stat().st_size} bytes)")
        return 0
    lines = differences(load(), actual)
    print("\n".join(lines) if lines else "identical")
    return 1 if lines else 0


if __name__ == "__main__":
    raise SystemExit(main())
