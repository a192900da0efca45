"""Load on the hardened HTTP transport: do malformed calls slow down everyone else?

Run from the repository root (loopback only; bounded: 50 clients x 20 calls per run, 300 s cap):

    python benchmarks/mcp_http_load.py [--clients 50] [--calls 20] [--malformed 0.10]

Each client connects from its own loopback address (127.0.0.2, 127.0.0.3, ...: the whole
127/8 is loopback), as separate machines would, since the server caps connections per
client address.

Starts `decide mcp --transport http` on 127.0.0.1 (a free port) in a subprocess, then makes two
runs of CLIENTS concurrent MCP sessions x CALLS tool calls each:
  1. every call well-formed;
  2. the same, with a share MALFORMED of calls replaced by hostile ones (a p99 of 1e308,
     a boolean rate, a 500 KB name, 40-deep nested overrides, a 10,000-item list, an unknown
     rule id of 100 KB), each of which must come back as an error.
Good calls are `estimate_kv_transfer` (llama-3.3-70b, 8K prompt, ib-ndr-400, h200: the
calculator, no search) and, with --good decide, `decide_disaggregation` on the RAG example.
Reports p50/p99 latency of the good calls in each run, counts of errors (good calls that
failed, malformed calls that did not), and whether run 2's good-call p99 is within 2x of
run 1's. Exit status 1 if it is not or if any call was answered wrongly.

Then two probes (skip with --no-probes): a ping from one client while another has 200
`decide_disaggregation` calls queued (the ping's latency, 5 pings), and SIGTERM with two
costly calls in flight (`cluster.gpus: 1024`, ~37 CPU-s each): seconds until the server
process is gone.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
import yaml
from mcp import Client

ROOT = Path(__file__).resolve().parents[1]
RAG = ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml"
MAX_RUN_S = 300


def good_call(kind: str, workload: dict) -> tuple[str, dict]:
    if kind == "decide":
        return "decide_disaggregation", {"workload": workload}
    return "estimate_kv_transfer", {
        "model": "llama-3.3-70b",
        "prompt_tokens": 8192,
        "link": "ib-ndr-400",
        "gpu": "h200",
        "kv_dtype": "fp8",
    }


def malformed_calls(workload: dict) -> list[tuple[str, dict]]:
    def edited(**changes) -> dict:
        w = yaml.safe_load(yaml.safe_dump(workload))
        for dotted, value in changes.items():
            *parents, leaf = dotted.split(".")
            node = w
            for p in parents:
                node = node[p]
            node[leaf] = value
        return w

    deep: dict = {}
    node = deep
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    return [
        ("decide_disaggregation", {"workload": edited(**{"traffic.prompt_tokens.p99": 1e308})}),
        ("decide_disaggregation", {"workload": edited(**{"traffic.requests_per_second": True})}),
        ("decide_disaggregation", {"workload": edited(name="n" * 500_000)}),
        ("decide_disaggregation", {"workload": edited(overrides=deep)}),
        (
            "decide_disaggregation",
            {"workload": edited(efficiency={"chunk_tokens": list(range(1, 10_001))})},
        ),
        ("explain_rule", {"rule_id": "R" * 100_000}),
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "disagg_decider", "mcp", "-t", "http", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not start")


def source_address(i: int) -> str:
    """The loopback address client `i` connects from: 127.0.0.2 .. 127.0.0.251."""
    return f"127.0.0.{2 + i % 250}"


def client_from(url: str, source: str, max_connections: int = 4, mode: str = "auto") -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(
        transport=httpx2.AsyncHTTPTransport(
            local_address=source, limits=httpx2.Limits(max_connections=max_connections)
        ),
        timeout=httpx2.Timeout(MAX_RUN_S),
    )
    return Client(streamable_http_client(url, http_client=http), mode=mode)


async def one_run(
    url: str, clients: int, calls: int, share: float, good: tuple, bad: list, seed: int
) -> dict:
    rng = random.Random(seed)
    plan = [[rng.random() < share for _ in range(calls)] for _ in range(clients)]
    good_ms: list[float] = []
    bad_ms: list[float] = []
    wrong = {"good_failed": 0, "malformed_accepted": 0, "transport_errors": 0}

    async def client_task(i: int, flags: list[bool]) -> None:
        try:
            async with client_from(url, source_address(i)) as client:
                for is_bad in flags:
                    name, args = rng.choice(bad) if is_bad else good
                    start = time.perf_counter()
                    result = await client.call_tool(name, args)
                    elapsed = (time.perf_counter() - start) * 1e3
                    (bad_ms if is_bad else good_ms).append(elapsed)
                    if is_bad and not result.is_error:
                        wrong["malformed_accepted"] += 1
                    if not is_bad and result.is_error:
                        wrong["good_failed"] += 1
        except Exception as exc:  # a refused connection or a protocol error counts, not aborts
            wrong["transport_errors"] += 1
            print(f"  client error: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)

    start = time.perf_counter()
    with anyio.fail_after(MAX_RUN_S):
        async with anyio.create_task_group() as tg:
            for i, flags in enumerate(plan):
                tg.start_soon(client_task, i, flags)
    return {
        "wall_s": time.perf_counter() - start,
        "good_ms": good_ms,
        "bad_ms": bad_ms,
        **wrong,
    }


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def report(label: str, run: dict) -> str:
    g, b = run["good_ms"], run["bad_ms"]
    line = (
        f"{label:<22} good calls n={len(g):4d}  p50 {pct(g, 0.5):7.1f} ms  p99 "
        f"{pct(g, 0.99):7.1f} ms"
    )
    if b:
        line += f" | malformed n={len(b):3d}  p50 {pct(b, 0.5):6.1f} ms  p99 {pct(b, 0.99):6.1f} ms"
    line += (
        f" | wall {run['wall_s']:.1f} s; errors: good failed {run['good_failed']}, malformed "
        f"accepted {run['malformed_accepted']}, transport {run['transport_errors']}"
    )
    return line


async def flood(url: str, source: str, calls: int) -> None:
    """One client's burst: `calls` decisions at once over up to 48 connections (legacy
    sessions), from `source`; run in its own process so the pinging client's process is idle."""
    workload = yaml.safe_load(RAG.read_text())
    async with (
        client_from(url, source, 48, mode="legacy") as client,
        anyio.create_task_group() as tg,
    ):
        for _ in range(calls):
            tg.start_soon(client.call_tool, "decide_disaggregation", {"workload": workload})


async def ping_under_burst(url: str, burst: int = 200, pings: int = 5) -> list[float]:
    """Ping latencies (ms) of one client while another process has `burst` decisions queued."""
    flooder = subprocess.Popen(
        [sys.executable, __file__, "--flood", url, "--flood-calls", str(burst)],
        env={**os.environ, "PYTHONPATH": str(ROOT / "skill")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    latencies: list[float] = []
    try:
        with anyio.fail_after(MAX_RUN_S):
            async with Client(url, mode="legacy") as other:
                await anyio.sleep(3.0)  # the burst is sent, queued and computing
                for _ in range(pings):
                    start = time.perf_counter()
                    await other.send_ping()
                    latencies.append((time.perf_counter() - start) * 1e3)
                    await anyio.sleep(0.2)
    finally:
        flooder.kill()
        flooder.wait()
    return latencies


def descendants(pid: int) -> set[int]:
    """Live processes below `pid` (Linux /proc; empty elsewhere)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def sigterm_seconds(workload: dict) -> float:
    """Seconds from SIGTERM to the server's exit, with two costly calls in flight (sessions of
    the 2025 protocol, whose calls run in the server's session task group)."""
    port = free_port()
    proc = start_server(port)
    url = f"http://127.0.0.1:{port}/mcp"
    costly = yaml.safe_load(yaml.safe_dump(workload))
    costly["cluster"]["gpus"] = 1024
    result: list[float] = []

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            for source in ("127.0.0.253", "127.0.0.254"):

                async def call(source: str = source) -> None:
                    try:
                        async with client_from(url, source, mode="legacy") as client:
                            await client.call_tool("decide_disaggregation", {"workload": costly})
                    except Exception:
                        pass  # the server went away mid-call, as intended

                tg.start_soon(call)
            deadline = time.monotonic() + 30
            while len(descendants(proc.pid)) < 3 and time.monotonic() < deadline:
                await anyio.sleep(0.1)  # the forkserver and two busy workers
            await anyio.sleep(0.5)
            start = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            await anyio.to_thread.run_sync(lambda: proc.wait(timeout=60))
            result.append(time.monotonic() - start)
            tg.cancel_scope.cancel()

    try:
        anyio.run(scenario)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return result[0] if result else float("inf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--malformed", type=float, default=0.10)
    parser.add_argument("--good", choices=["kv", "decide"], default="kv")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-probes", action="store_true", help="skip the ping and SIGTERM probes")
    parser.add_argument("--flood", metavar="URL", help=argparse.SUPPRESS)  # the probe's burst
    parser.add_argument("--flood-calls", type=int, default=200, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flood:
        anyio.run(flood, args.flood, "127.0.0.252", min(args.flood_calls, 500))
        return 0
    if not (1 <= args.clients <= 200 and 1 <= args.calls <= 100 and 0 <= args.malformed < 1):
        raise SystemExit("bounded: 1-200 clients, 1-100 calls, malformed share in [0, 1)")
    workload = yaml.safe_load(RAG.read_text())
    good = good_call(args.good, workload)
    bad = malformed_calls(workload)
    port = free_port()
    proc = start_server(port)
    url = f"http://127.0.0.1:{port}/mcp"
    pings: list[float] = []
    try:
        clean = anyio.run(one_run, url, args.clients, args.calls, 0.0, good, bad, args.seed)
        mixed = anyio.run(
            one_run, url, args.clients, args.calls, args.malformed, good, bad, args.seed
        )
        if not args.no_probes:
            pings = anyio.run(ping_under_burst, url)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(
        f"{args.clients} clients x {args.calls} calls on {url}; good call: {good[0]}; "
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    )
    print(report("all well-formed", clean))
    print(report(f"{args.malformed:.0%} malformed", mixed))
    ratio = pct(mixed["good_ms"], 0.99) / max(pct(clean["good_ms"], 0.99), 1e-9)
    ok = ratio <= 2.0 and all(
        run[k] == 0 for run in (clean, mixed) for k in ("good_failed", "malformed_accepted")
    )
    ok = ok and clean["transport_errors"] == 0 and mixed["transport_errors"] == 0
    verdict = "ok" if ok else "FAIL"
    print(f"good-call p99 with malformed / without: {ratio:.2f}x (limit 2x) -> {verdict}")
    both = statistics.median(clean["good_ms"] + mixed["good_ms"])
    print(f"median of good calls, both runs: {both:.1f} ms")
    if not args.no_probes:
        shown = ", ".join(f"{ms:.0f}" for ms in pings)
        print(f"ping while another client has 200 decisions queued: {shown} ms")
        print(
            f"SIGTERM with two costly calls in flight: exit after {sigterm_seconds(workload):.2f} s"
        )
    flags = f"--clients {args.clients} --calls {args.calls} --malformed {args.malformed:g}"
    flags += f" --good {args.good} --seed {args.seed}" + (" --no-probes" if args.no_probes else "")
    command = f"python benchmarks/mcp_http_load.py {flags}"
    print(f"reproduce: {command}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
