"""`decide simulate` and `decide sweep`, and the registration of `decide trace summarize`
(in `sim/cli_trace.py`).

Module-level imports stay light (typer only) so `decide --workload` starts fast; numpy, the
calculator, rich progress and matplotlib load inside the commands.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from disagg_decider.cli_common import ReportFormat, choices
from disagg_decider.errors import UserError
from disagg_decider.progress import Progress
from disagg_decider.sim.cli_conditional import (
    BusyOpt,
    LayoutChoice,
    LayoutOpt,
    PdThresholdOpt,
    RatioOpt,
    RouterPolicy,
    RouterPolicyOpt,
    SweepLayout,
    calculator_p99s,
    conditional_config,
    print_simulation,
)
from disagg_decider.sim.cli_trace import trace_summarize

OutFormat = choices("OutFormat", "text", "json")


RouterChoice = choices("RouterChoice", "least-work", "round-robin", "random")


BatchCap = choices("BatchCap", "engine", "verdict")


ColocatedPolicy = choices("ColocatedPolicy", "chunked", "prefill-first")


WorkloadOpt = Annotated[
    Path,
    typer.Option(
        "--workload", "-w", help="Workload YAML file, e.g. examples/chat-short-colocate.yaml."
    ),
]
SeedOpt = Annotated[
    int, typer.Option("--seed", help="Random seed; the same seed gives the same run.")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]


def pool_gpus(role: str) -> Any:
    """`--<role>-gpus`: a pool's size in GPUs, the verdict's where not given."""
    return Annotated[
        int | None,
        typer.Option(f"--{role}-gpus", help=f"{role.capitalize()} pool size (default: verdict's)."),
    ]


ColocatedGpus, PrefillGpus, DecodeGpus = (pool_gpus(r) for r in ("colocated", "prefill", "decode"))


JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        help="Worker processes for the simulations (default: 2, or 1 on a one-CPU machine). "
        "1 runs them one after the other in this process; every N gives the same results.",
    ),
]
PolicyOpt = Annotated[
    ColocatedPolicy,
    typer.Option(
        "--colocated-policy",
        help="chunked: prefill chunks share each iteration's token budget with decodes (vLLM "
        "chunked prefill, the default). prefill-first: a waiting prompt stalls every decode "
        "(vLLM before chunked prefill; DistServe's baseline).",
    ),
]


def register(app: typer.Typer) -> None:
    """Add the simulator's commands to the `decide` app."""
    app.command("simulate")(simulate)
    app.command("sweep")(sweep)
    trace_app = typer.Typer(help="Read Azure CSV or Mooncake JSONL request traces.")
    trace_app.command("summarize")(trace_summarize)
    app.add_typer(trace_app, name="trace")


# --- shared helpers -----------------------------------------------------------------------------


def _load(workload: Path):
    from disagg_decider.calibrate.apply import calibrated_workload
    from disagg_decider.decide import decide
    from disagg_decider.workload import load_workload, resolve

    w = load_workload(workload)
    calibrated = calibrated_workload(w, workload.parent)  # the constants the verdict uses
    return w, resolve(calibrated, workload.parent), decide(w, base_dir=workload.parent)


def _refuse_overwrite(path: Path, force: bool, flag: str = "--out") -> None:
    from disagg_decider.outfiles import check_target

    check_target(path, force, flag)


def _dump(payload: dict) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, allow_nan=False) + "\n")


# --- decide simulate ----------------------------------------------------------------------------


def simulate(
    workload: WorkloadOpt,
    requests: Annotated[
        int, typer.Option("--requests", "-n", min=1, help="Requests to simulate (default 20000).")
    ] = 20000,
    seed: SeedOpt = 0,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Replay this Azure CSV or Mooncake JSONL trace instead of the workload's "
            "traffic (its first --requests requests, arrivals and lengths as recorded).",
        ),
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option("--rate", help="Requests per second (default: the workload's)."),
    ] = None,
    cv: Annotated[
        float,
        typer.Option(
            "--cv",
            help="Burstiness: inter-arrival coefficient of variation, 1 = Poisson, 3 = bursty "
            "(gamma gaps). Azure 2023 conversation trace: 1.09, code: 13.2.",
        ),
    ] = 1.0,
    colocated_gpus: ColocatedGpus = None,
    prefill_gpus: PrefillGpus = None,
    decode_gpus: DecodeGpus = None,
    policy: PolicyOpt = ColocatedPolicy.chunked,
    batch_cap: Annotated[
        BatchCap,
        typer.Option(
            "--batch-cap",
            help="engine: up to efficiency.max_decode_batch sequences per replica, KV memory "
            "binding (default). verdict: the verdict's batch as a hard max_num_seqs.",
        ),
    ] = BatchCap.engine,
    router: Annotated[
        RouterChoice,
        typer.Option(
            "--router",
            help="How arrivals pick a replica. least-work (default): the prefill replica free "
            "soonest, the colocated replica with the fewest requests in flight (what the "
            "calculator assumes: one M/G/c queue per pool). round-robin, random: blind to load.",
        ),
    ] = RouterChoice.least_work,
    layout: LayoutOpt = LayoutChoice.both,
    pd_threshold: PdThresholdOpt = None,
    router_policy: RouterPolicyOpt = RouterPolicy.isl_bounding,
    prefill_busy_threshold: BusyOpt = 1.0,
    eff_isl_ratio_threshold: RatioOpt = None,
    fmt: Annotated[
        OutFormat, typer.Option("--format", "-f", help="text or json.")
    ] = OutFormat.text,
    quiet: QuietOpt = False,
    jobs: JobsOpt = None,
) -> None:
    """Simulate the serving modes with the verdict's pools and report latency, goodput, cost.

    Example: decide simulate --workload examples/rag-8k-h200-rdma-dynamo.yaml --requests 50000

    Example: decide simulate -w mix.yaml --layout all --policy isl_or_load
    """
    from disagg_decider.sim import limits, run
    from disagg_decider.sim import requests as reqs
    from disagg_decider.sim import trace as traces

    limits.check_simulate_flags(requests, rate, cv, seed, jobs, prefill_busy_threshold)
    w, r, verdict = _load(workload)
    cond_cfg = None
    if layout is not LayoutChoice.both:
        cond_cfg = conditional_config(
            r,
            verdict,
            router_policy.value,
            pd_threshold,
            prefill_busy_threshold,
            eff_isl_ratio_threshold,
        )
    elif pd_threshold is not None:
        raise UserError("--pd-threshold sets the conditional layout's threshold; add --layout all")
    s = None
    if layout is not LayoutChoice.conditional:
        s = run.setup(
            r,
            verdict,
            colocated_gpus=colocated_gpus,
            prefill_gpus=prefill_gpus,
            decode_gpus=decode_gpus,
            policy=policy.value,
            batch_cap=batch_cap.value,
            router=router.value,
        )
    if trace is not None:
        batch = reqs.from_trace(traces.load(trace), r.model.max_context_tokens, requests)
        if rate is not None:
            batch = reqs.scaled(batch, rate)
    else:
        batch = run.synthetic_requests(r, requests, seed, rate, cv)
    n = len(batch)
    if s is not None:
        limits.check_work(n, run.replicas_of(s))
    from disagg_decider.sim.parallel import default_jobs

    modes = ([] if s is None else list(run.MODES)) + ([] if cond_cfg is None else ["conditional"])
    done = dict.fromkeys(modes, 0)  # the bar runs through every mode

    def progress(mode: str, routed: int) -> None:
        done[mode] = routed
        bar.set(sum(done.values()), mode)

    results, share = {}, None
    with Progress(len(modes) * n, "simulating", quiet) as bar:
        if s is not None:
            results = run.simulate_both(s, batch, progress, jobs or default_jobs())
        if cond_cfg is not None:
            from disagg_decider.sim import conditional as sim_conditional

            results["conditional"], share = sim_conditional.simulate_and_score(
                r, cond_cfg, batch, lambda k: progress("conditional", k)
            )
    source = str(trace) if trace is not None else f"synthetic, seed {seed}, cv {cv:g}"
    offered = (
        (n - 1) / (float(batch.arrival_ms[-1]) / 1e3) if n > 1 and batch.arrival_ms[-1] > 0 else 0
    )
    calc = calculator_p99s(verdict, results, cond_cfg)
    if fmt is OutFormat.json:
        payload = {
            "workload": w.name,
            "requests": n,
            "source": source,
            "offered_rate_per_s": offered,
            "slo": {"ttft_ms": w.slo.ttft_ms, "tpot_ms": w.slo.tpot_ms},
            "calculator": calc,
            **{mode: m.as_dict() for mode, m in results.items()},
        }
        if cond_cfg is not None:
            payload["conditional"] |= {
                "threshold_tokens": cond_cfg.threshold_tokens,
                "policy": cond_cfg.policy,
                "prefill_busy_tokens": cond_cfg.prefill_busy_tokens,
                "eff_isl_ratio_threshold": cond_cfg.eff_isl_ratio_threshold,
                "share_to_prefill": share,
            }
        _dump(payload)
        return
    print_simulation(w, results, calc, n, source, offered, share)


# --- decide sweep -------------------------------------------------------------------------------


def sweep(
    workload: WorkloadOpt,
    prompt_tokens: Annotated[
        str,
        typer.Option(
            "--prompt-tokens",
            help="Prompt p50 range LOW:HIGH, log-spaced (p99 keeps the workload's p99/p50 ratio).",
        ),
    ] = "256:32768",
    steps: Annotated[int, typer.Option("--steps", min=2, max=64, help="Points in the range.")] = 8,
    do_simulate: Annotated[
        bool,
        typer.Option(
            "--simulate",
            help="Also measure the gain by simulation: each mode's goodput per GPU (highest rate "
            "meeting --attainment) by bisection over the rate, with the verdict's pools.",
        ),
    ] = False,
    requests: Annotated[
        int, typer.Option("--requests", "-n", min=100, help="Requests per simulated run.")
    ] = 2000,
    attainment: Annotated[
        float,
        typer.Option(
            "--attainment",
            min=0.5,
            max=1.0,
            help="Share of requests that must meet both SLOs (0.99: the workload's p99 targets).",
        ),
    ] = 0.99,
    seed: SeedOpt = 0,
    policy: PolicyOpt = ColocatedPolicy.chunked,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Write a PNG chart here (needs matplotlib: pip install 'disagg-decider[plot]').",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --plot if it exists.")] = False,
    layout: Annotated[
        SweepLayout,
        typer.Option(
            "--layout",
            help="both (default): the gain of always-disaggregated over colocated. all: also the "
            "conditional layout at each length (the calculator's threshold, share to prefill "
            "and gain; with --simulate the verdict's conditional pools behind the router).",
        ),
    ] = SweepLayout.both,
    pd_threshold: PdThresholdOpt = None,
    router_policy: RouterPolicyOpt = RouterPolicy.isl_bounding,
    prefill_busy_threshold: BusyOpt = 1.0,
    fmt: Annotated[
        ReportFormat,
        typer.Option("--format", "-f", help="text, json or markdown (table + mermaid chart)."),
    ] = ReportFormat.text,
    quiet: QuietOpt = False,
    jobs: JobsOpt = None,
) -> None:
    """Gain of disaggregation (goodput per GPU, disaggregated / colocated) against prompt length.

    Example: decide sweep --workload examples/rag-8k-h200-rdma-dynamo.yaml
    --prompt-tokens 256:32768 --simulate --plot gain.png
    """
    from disagg_decider.sim import limits, sweep_render
    from disagg_decider.sim import sweep as sweeps
    from disagg_decider.sim.parallel import default_jobs

    lo, hi = limits.prompt_range(prompt_tokens)
    limits.check_sweep_flags(steps, requests, seed, jobs, prefill_busy_threshold)
    if pd_threshold is not None and layout is SweepLayout.both:
        raise UserError("--pd-threshold sets the conditional layout's threshold; add --layout all")
    if plot is not None:
        if plot.suffix.lower() != ".png":  # matplotlib would quietly write plot + ".png"
            raise UserError(f"--plot {plot}: expected a .png file name, e.g. --plot gain.png")
        _refuse_overwrite(plot, force, "--plot")
        sweep_render.require_matplotlib()
    from disagg_decider.workload import load_workload

    w = load_workload(workload)
    total = steps if do_simulate else 0
    with Progress(total, "sweeping", quiet or not do_simulate) as bar:
        result = sweeps.run_sweep(
            w,
            workload.parent,
            lo,
            hi,
            steps,
            simulate=do_simulate,
            requests=requests,
            attainment=attainment,
            seed=seed,
            policy=policy.value,
            on_point=lambda p: bar.advance(f"prompt {p:,.0f}"),
            jobs=jobs or default_jobs(),
            conditional=layout is SweepLayout.all,
            pd_threshold=pd_threshold,
            router_policy=router_policy.value,
            prefill_busy_threshold=prefill_busy_threshold,
        )
    if plot is not None:
        from disagg_decider.outfiles import write_with

        write_with(plot, lambda tmp: sweep_render.write_plot(result, tmp), force, "--plot")
        print(f"wrote {plot}", file=sys.stderr)
    if fmt is ReportFormat.json:
        _dump(result.as_dict())
    elif fmt is ReportFormat.markdown:
        sys.stdout.write(sweep_render.markdown(result))
    else:
        sys.stdout.write(sweep_render.text(result))


# --- decide trace summarize ---------------------------------------------------------------------
