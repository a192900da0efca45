"""Golden verdicts: what `decide` answers, recorded so a change that moves any of it shows.

The fixture (`tests/data/golden_outputs.json.xz`) holds, for
  - every file in `examples/`: the full `decide --workload FILE --format json` output;
  - a seeded batch of 800 workloads around the examples (`benchmarks/workload_mix.py`, seed 17),
    decided together by `decide_many` (the `decide batch` path);
  - a seeded set of heterogeneous-pool variants of the B200/H200 example (their own path,
    `calc/modes/hetero.py`, which the mix leaves out);
each verdict's JSON and each input workload (so a changed generator reads as "inputs
changed", not as a wrong output), floats kept to 12 significant digits.
`tests/test_golden_outputs.py` recomputes them and compares by meaning (`tests/meaning.py`):
decisions, fired rules, layouts, sizes, thresholds, limits and every text field identical,
every float within 1e-9 relative. A byte comparison would record one machine's last bits:
numpy's exp/log differ by an ulp between CPUs with and without AVX-512.

Refresh it after a deliberate change to outputs (a new rule, new physics, a catalog fix), and
commit the new fixture with the change that explains it:

    PYTHONPATH=skill python tests/golden_outputs.py --update

`python tests/golden_outputs.py` (no flag) compares and prints the first differences.
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "skill", ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from disagg_decider.cli import verdict_json  # noqa: E402
from disagg_decider.decide import decide, decide_file, decide_many  # noqa: E402
from disagg_decider.verdict import Verdict  # noqa: E402
from disagg_decider.workload import Workload, load_workload  # noqa: E402
from tests import meaning  # noqa: E402
from workload_mix import workload_mix  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "golden_outputs.json.xz"
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
HETERO_EXAMPLE = ROOT / "examples" / "b200-prefill-h200-decode-dynamo.yaml"
MIX_WORKLOADS = 800
MIX_SEED = 17
HETERO_WORKLOADS = 12
HETERO_SEED = 17


def verdict_data(v: Verdict) -> dict[str, Any]:
    """The verdict exactly as `decide --format json` prints it, parsed back."""
    return json.loads(verdict_json(v))


def workload_data(w: Workload) -> dict[str, Any]:
    return w.model_dump(mode="json")


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
        {"workload": workload_data(w), "verdict": verdict_data(v)}
        for w, v in zip(workloads, verdicts, strict=True)
    ]


def compute() -> dict[str, Any]:
    """Every golden output of the current code (about as long as 800 batched verdicts take)."""
    mix = workload_mix(MIX_WORKLOADS, seed=MIX_SEED)
    hetero = hetero_variants(HETERO_WORKLOADS)
    return {
        "examples": {p.name: {"verdict": verdict_data(decide_file(p))} for p in EXAMPLES},
        "mix": _records(mix, decide_many(mix)),
        "hetero": _records(hetero, [decide(w) for w in hetero]),
    }


def load() -> dict[str, Any]:
    return json.loads(lzma.decompress(FIXTURE.read_bytes()))


def save(data: dict[str, Any]) -> None:
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(meaning.rounded(data), separators=(",", ":"), sort_keys=True)
    # xz keeps 800 full verdicts in ~0.2 MB (gzip: 0.9 MB); the same outputs give the same bytes.
    FIXTURE.write_bytes(lzma.compress(text.encode(), preset=9 | lzma.PRESET_EXTREME))


def differences(expected: dict[str, Any], actual: dict[str, Any], limit: int = 10) -> list[str]:
    """Readable lines, one per differing field (at most `limit`), empty when equal in meaning.

    Each line names the verdict (`examples/FILE` or `mix[i] NAME`), the field's path in the
    verdict JSON, both values and, for numbers, their relative difference.
    """
    lines = []
    for name in sorted(set(expected["examples"]) | set(actual["examples"])):
        e, a = expected["examples"].get(name), actual["examples"].get(name)
        if e is None or a is None:
            lines.append(
                f"examples/{name}: missing from the " + ("fixture" if e is None else "examples")
            )
            continue
        lines += [f"examples/{name}: {d}" for d in meaning.differences(e["verdict"], a["verdict"])]
    for part in ("mix", "hetero"):
        e_rows, a_rows = expected[part], actual[part]
        if len(e_rows) != len(a_rows):
            lines.append(f"{part}: {len(e_rows)} recorded workloads, {len(a_rows)} now")
        for i, (e, a) in enumerate(zip(e_rows, a_rows, strict=False)):
            label = f"{part}[{i}] {a['workload'].get('name', '?')}"
            changed_input = meaning.differences(e["workload"], a["workload"])
            if changed_input:
                lines.append(
                    f"{label}: the input workload changed (generator edited?): {changed_input[0]}"
                )
                continue
            lines += [f"{label}: {d}" for d in meaning.differences(e["verdict"], a["verdict"])]
    return lines[:limit] + ([f"... {len(lines) - limit} more"] if len(lines) > limit else [])


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
    print("\n".join(lines) if lines else "equal in meaning")
    return 1 if lines else 0


if __name__ == "__main__":
    raise SystemExit(main())
