"""The plan in words, and the commands that act on it: one builder for every front end.

The summary (terminal, `--format json`, the markdown report, MCP and the skill all show it)
opens with what to deploy and what it costs; the alternatives follow with a cost only where
they carry the rate, since a layout priced on the GPUs it is capped at (serving less than the
rate) reads cheaper than the plan that serves it. The next steps are commands built from the
workload's path and the plan: deploy it, simulate all three layouts, benchmark one replica and
calibrate the calculator with the run.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from disagg_decider.calc.result import Limit
from disagg_decider.plan import Plan

if TYPE_CHECKING:
    from disagg_decider.verdict import Verdict
    from disagg_decider.workload import Resolved

ORCHESTRATORS = {"dynamo": "NVIDIA Dynamo", "llm-d": "llm-d"}
# The path next steps carry until a front end that knows the workload file puts it in.
WORKLOAD_PLACEHOLDER = "WORKLOAD.yaml"
CALIBRATION_FILE = "calibration.yaml"
BENCH_FILE = "bench.json"
LAYOUT_NAMES = {
    "colocated": "colocated",
    "disaggregated": "always-disaggregated",
    "conditional": "conditional (routing by prompt length)",
}


class StepInputs(BaseModel):
    """What the commands need from the workload besides the verdict."""

    model_config = ConfigDict(extra="forbid")

    engine: str
    hf_repo: str
    prompt_p50_tokens: int
    output_p50_tokens: int
    requests_per_second: float


class NextStep(BaseModel):
    """One command to run next: `argv` for scripts, `command` to paste, `why` for the reader."""

    model_config = ConfigDict(extra="forbid")

    command: str
    argv: list[str]
    why: str


def pools_text(plan: Plan) -> str:
    """`3 prefill x TP2 + 1 decode x TP8`, or `2 replicas x TP8` for one colocated pool."""
    if plan.layout == "colocated":
        pool = plan.pools[0]
        return f"{_count(pool.replicas, 'replica')} x {pool.layout}"
    return " + ".join(f"{p.replicas} {p.role} x {p.layout}" for p in plan.pools)


def cost_text(plan: Plan) -> str:
    """`$473,040/year, $0.562 per 1M tokens` (no tokens served: no per-token figure)."""
    year = f"${plan.cost_per_year_usd:,.0f}/year"
    m = plan.cost_per_million_tokens_usd
    return year if m is None else f"{year}, ${m:,.3f} per 1M tokens"


def plan_sentence(plan: Plan, rate_per_s: float, cluster_gpus: int) -> str:
    """The first clause of every verdict: what to deploy, on how many GPUs, at what cost."""
    gpus = _count(plan.gpus, "GPU")
    if plan.layout == "colocated":
        head = f"Stay colocated: {pools_text(plan)} ({gpus}"
        head += f", chunked prefill {plan.chunk_tokens:,} tokens)"
    else:
        where = ORCHESTRATORS.get(plan.orchestrator or "", "a split")
        head = f"Deploy on {where}: {pools_text(plan)} ({gpus})"
        if plan.layout == "conditional":
            head += (
                f", routing prompts above {plan.threshold_tokens:,} uncached tokens "
                f"({plan.share_to_prefill:.0%} of requests) to the prefill pool"
            )
        else:
            head += ", every request prefilled on the prefill pool"
    if not plan.carries_rate:
        head += f", {_shortfall(plan, rate_per_s, cluster_gpus)}"
    return f"{head}; {cost_text(plan)}"


def layout_name(plan: Plan) -> str:
    """`always-disaggregated 3 prefill x TP2 + 1 decode x TP4`: what an alternative is."""
    name = f"{LAYOUT_NAMES[plan.layout]} {pools_text(plan)}"
    if plan.layout == "conditional":
        name += f" above {plan.threshold_tokens:,} tokens"
    return name


def alternative_text(plan: Plan, rate_per_s: float, cluster_gpus: int) -> str:
    """One alternative: priced where it carries the rate, else what it lacks (never a cost that
    is cheaper only because it serves less)."""
    if plan.carries_rate:
        return f"{layout_name(plan)} ({_count(plan.gpus, 'GPU')}, {cost_text(plan)})"
    return f"{layout_name(plan)} {_shortfall(plan, rate_per_s, cluster_gpus)}"


def alternatives_sentence(alternatives: list[Plan], rate_per_s: float, cluster_gpus: int) -> str:
    if not alternatives:
        return ""
    each = "; ".join(alternative_text(p, rate_per_s, cluster_gpus) for p in alternatives)
    return f"Alternatives: {each}."


def why_split(outcome) -> str:
    """The rules that pushed toward the split and its orchestrator (`engine.Outcome`), vetoes
    marked: the "why" of a split verdict."""
    pushing = [
        f"{'veto ' if f.kind == 'veto' else ''}{f.id} ({f.title})"
        for f in outcome.fired
        if f.kind != "advice" and f.pushes in ("disaggregate", outcome.decision)
    ]
    return ", ".join(pushing) or "no rule against a split"


def plan_limits(limits: list[Limit], layout: str) -> str:
    """What stops the plan's own mode (the conditional pools: only what stops both); the
    alternatives' shortfalls are said where they are listed."""
    mode = {"colocated": "colocated", "disaggregated": "disaggregated"}.get(layout)
    return "; ".join(x.detail for x in limits if x.mode in ("both", mode))


def carrying_alternative(alternatives: list[Plan]) -> Plan | None:
    """The cheapest alternative that carries the rate (fewest GPUs first), if any does."""
    carrying = [p for p in alternatives if p.carries_rate]
    return min(carrying, key=lambda p: (p.gpus, p.cost_per_year_usd), default=None)


def _shortfall(plan: Plan, rate_per_s: float, cluster_gpus: int) -> str:
    if not plan.fits_cluster or (plan.gpus_needed_for_rate or 0) > cluster_gpus:
        return (
            f"does not fit: it needs {plan.gpus_needed_for_rate} GPUs for {rate_per_s:g} req/s, "
            f"the cluster has {cluster_gpus}"
        )
    return f"serves at most {plan.max_rate_per_s:.2f} of the {rate_per_s:g} req/s"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def close_call_sentence(v: Verdict) -> str | None:
    """The confidence block's one sentence, where the verdict has one (set on close calls)."""
    confidence = getattr(v, "confidence", None)
    sentence = getattr(confidence, "summary", None)
    return sentence.strip() if isinstance(sentence, str) and sentence.strip() else None


# --- next steps --------------------------------------------------------------------------------


def step_inputs(r: Resolved) -> StepInputs:
    w = r.workload
    return StepInputs(
        engine=w.engine,
        hf_repo=r.model.hf_repo,
        prompt_p50_tokens=round(w.traffic.prompt_tokens.p50),
        output_p50_tokens=round(w.traffic.output_tokens.p50),
        requests_per_second=w.traffic.requests_per_second,
    )


def next_steps(
    v: Verdict, x: StepInputs, workload_path: str = WORKLOAD_PLACEHOLDER
) -> list[NextStep]:
    """Deploy the plan, simulate the three layouts, benchmark one replica and calibrate."""
    steps: list[NextStep] = []
    plan, engine = v.plan, x.engine
    if plan is not None:
        target = plan.orchestrator or ("sglang" if engine == "sglang" else "vllm")
        steps.append(
            _step(
                ["decide", "deploy", "--workload", workload_path, "--target", target,
                 "--out-dir", f"deploy/{target}"],
                f"write the {ORCHESTRATORS.get(target, target)} configs for this plan",
            )
        )  # fmt: skip
    steps.append(
        _step(
            ["decide", "simulate", "--workload", workload_path, "--layout", "all"],
            "check the three layouts at this rate in the discrete-event simulator",
        )
    )
    if plan is not None:
        steps.extend(_calibration_steps(v, plan, x, workload_path))
    return steps


def with_workload_path(steps: list[NextStep], workload_path: str) -> list[NextStep]:
    """The steps with the placeholder path replaced by the workload file the user gave."""
    return [
        _step([workload_path if a == WORKLOAD_PLACEHOLDER else a for a in s.argv], s.why)
        for s in steps
    ]


def for_workload_file(verdict: Verdict, path: str) -> Verdict:
    """The verdict with its next steps naming the workload file the user gave."""
    return verdict.model_copy(update={"next_steps": with_workload_path(verdict.next_steps, path)})


def _calibration_steps(v: Verdict, plan: Plan, x: StepInputs, workload_path: str) -> list[NextStep]:
    """A benchmark of one replica of the pool that decodes, at the workload's p50 lengths and
    its share of the rate, then the fit and the verdict again with the fitted constants."""
    pool = plan.pools[-1]  # the colocated pool, or the decode pool of a split
    per_replica = pool.tp * pool.dp  # a DP/EP replica is fitted as that many GPUs of TP
    rate = max(round(x.requests_per_second / max(pool.replicas, 1), 3), 0.001)
    bench = [
        "vllm", "bench", "serve", "--base-url", "http://SERVER:8000",
        "--model", x.hf_repo or v.model, "--dataset-name", "random",
        "--random-input-len", str(x.prompt_p50_tokens),
        "--random-output-len", str(x.output_p50_tokens),
        "--request-rate", f"{rate:g}", "--num-prompts", "1000",
        "--save-result", "--result-filename", BENCH_FILE,
    ]  # fmt: skip
    fit = [
        "decide", "calibrate", BENCH_FILE, "--model", v.model, "--gpu", v.gpu,
        "--engine", x.engine, "--tp", str(per_replica),
    ]  # fmt: skip
    dtype = _calibration_dtype(v)
    if dtype is not None:
        fit += ["--weights-dtype", dtype]
    if plan.chunk_tokens:
        fit += ["--chunk-tokens", str(plan.chunk_tokens)]
    fit += ["--out", CALIBRATION_FILE]
    again = ["decide", "--workload", workload_path, "--calibration", CALIBRATION_FILE]
    return [
        _step(bench, f"benchmark one {pool.layout} replica serving it at its share of the rate"),
        _step(fit, "fit prefill MFU, decode MBU and step overhead to that run"),
        _step(again, "decide again with the measured constants"),
    ]


def _calibration_dtype(v: Verdict) -> str | None:
    """The weights format as `decide calibrate --weights-dtype` takes it (bf16, fp8, fp4)."""
    weights = v.dtypes.weights if v.dtypes is not None else "bf16"
    if weights.startswith("fp8"):
        return "fp8"
    if weights in ("fp4", "nvfp4", "mxfp4"):
        return "fp4"
    return "bf16" if weights == "bf16" else None


def _step(argv: list[str], why: str) -> NextStep:
    return NextStep(command=_shell_join(argv), argv=argv, why=why)


# What `shlex.quote` leaves unquoted is a word of these characters (its own test, spelled out).
_UNSAFE = re.compile(r"[^\w@%+=:,./-]", re.ASCII)


def _shell_join(argv: list[str]) -> str:
    """`shlex.join(argv)`: where no word needs quoting (every step's words but a user's odd
    path), one test over all of them instead of `shlex.quote` on each; a batch writes four
    steps of about twenty words for every verdict."""
    if "" in argv or _UNSAFE.search("".join(argv)) is not None:
        return shlex.join(argv)
    return " ".join(argv)
