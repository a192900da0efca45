"""How long does an agent wait for a verdict? One `decide_disaggregation` call, in-process.

Run from the repository root:

    python benchmarks/mcp_latency.py [--calls 200] [--workload examples/FILE.yaml]

Reports median and p90 over N calls of:
  - the bare tool function (`mcp_tools.decide_disaggregation`, workload validated each call),
  - the server's side alone (`server.call_tool`: argument validation, the tool in a worker
    process (one pickle of the workload and one of the verdict over a pipe), conversion to
    structured content and JSON text),
  - the same call through the SDK's in-memory `mcp.Client`, which adds dispatch and the
    client's own jsonschema check of the result against the advertised output schema.
The target is under 20 ms median through the client. Transport (stdio pipe, HTTP) adds the
host's I/O on top and is not measured here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import anyio
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))

from mcp import Client  # noqa: E402

from disagg_decider.mcp_server import build_server  # noqa: E402
from disagg_decider.mcp_tools import decide_disaggregation  # noqa: E402
from disagg_decider.workload import Workload  # noqa: E402

TARGET_MS = 20.0


def summary(label: str, samples_ms: list[float]) -> str:
    ordered = sorted(samples_ms)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return (
        f"{label:<34} median {statistics.median(ordered):6.2f} ms   p90 {p90:6.2f} ms   "
        f"(n={len(ordered)})"
    )


def time_bare(workload: dict, calls: int) -> list[float]:
    decide_disaggregation(Workload.model_validate(workload))  # warm caches (catalog, rulebook)
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        decide_disaggregation(Workload.model_validate(workload))
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


async def time_server(workload: dict, calls: int) -> list[float]:
    server = build_server()
    await server.call_tool("decide_disaggregation", {"workload": workload})  # warm-up
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        await server.call_tool("decide_disaggregation", {"workload": workload})
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


async def time_client(workload: dict, calls: int) -> list[float]:
    samples = []
    async with Client(build_server()) as client:
        await client.call_tool("decide_disaggregation", {"workload": workload})  # warm-up
        for _ in range(calls):
            start = time.perf_counter()
            result = await client.call_tool("decide_disaggregation", {"workload": workload})
            samples.append((time.perf_counter() - start) * 1e3)
            if result.is_error:
                raise SystemExit(f"tool error: {result.content[0].text}")
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per measurement")
    parser.add_argument(
        "--workload",
        type=Path,
        default=ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml",
        help="workload YAML passed as the tool argument",
    )
    args = parser.parse_args()
    workload = yaml.safe_load(args.workload.read_text())

    bare = time_bare(workload, args.calls)
    server = anyio.run(time_server, workload, args.calls)
    client = anyio.run(time_client, workload, args.calls)
    print(f"decide_disaggregation on {args.workload.name}, one call at a time, in-process")
    print(summary("bare tool function", bare))
    print(summary("server.call_tool (no client)", server))
    print(summary("in-memory MCP client (mcp.Client)", client))
    verdict = "meets" if statistics.median(client) < TARGET_MS else "MISSES"
    print(f"target: under {TARGET_MS:g} ms median through the client: {verdict}")
    shown = args.workload.resolve()
    shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown
    load_1m = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, 1-min load average "
        f"{load_1m:.1f} (other work on the machine inflates these figures)"
    )
    print("reproduce from the repository root:")
    print(f"  python benchmarks/mcp_latency.py --calls {args.calls} --workload {shown}")


if __name__ == "__main__":
    main()
