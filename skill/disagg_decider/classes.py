"""Request classes of mixed traffic as log-normal components, and the moments of their mix.

A workload's traffic is one class (its `prompt_tokens`, `output_tokens`, prefix-cache hit rate)
or several (`traffic.classes`, shares summing to 1). The workload's one-class figures take the
mix as the log-normal with its mean and second moment, which keeps what the queues' means
depend on (Pollaczek-Khinchine: the mean and squared coefficient of variation of service);
the colocated mode is priced on it. The always-disaggregated mode reads the mix's own shape
(`calc/replicas/mixed_members.py`: `mixture_quantiles`, `cached_per_uncached`, `batch_mix`). The
conditional layout splits every class at the routing threshold (`calc/modes/conditional.py`), which
needs the partial moments below.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass
from typing import Any

Z99 = 2.3263478740408408


@dataclass(frozen=True)
class Component:
    weight: float  # share of requests
    prompt_p50: float
    prompt_sigma: float
    hit_rate: float
    output_p50: float
    output_sigma: float


def sigma_of(p50: float, p99: float) -> float:
    return math.log(p99 / p50) / Z99


def components(workload: Any) -> list[Component]:
    """The workload's (or its traffic's) classes, or its one class, as log-normal components."""
    t = getattr(workload, "traffic", workload)
    classes = getattr(t, "classes", None)
    if not classes:
        return [
            Component(
                1.0,
                t.prompt_tokens.p50,
                sigma_of(t.prompt_tokens.p50, t.prompt_tokens.p99),
                t.prefix_cache_hit_rate,
                t.output_tokens.p50,
                sigma_of(t.output_tokens.p50, t.output_tokens.p99),
            )
        ]
    return [
        Component(
            c.share,
            c.prompt_tokens.p50,
            sigma_of(c.prompt_tokens.p50, c.prompt_tokens.p99),
            c.prefix_cache_hit_rate,
            c.output_tokens.p50,
            sigma_of(c.output_tokens.p50, c.output_tokens.p99),
        )
        for c in classes
    ]


def class_context_tokens(workload: Any) -> list[float]:
    """Each class's p99 prompt plus p99 output (mixed traffic), [] for one class.

    The context window bounds each request, so a mix is served when every class's own p99
    request fits; the fitted log-normal's p99 (the mix's one-class stand-in) reaches far past
    the longest class when short and long classes are mixed, and must not be checked instead.
    """
    t = getattr(workload, "traffic", workload)
    classes = getattr(t, "classes", None) or []
    return [c.prompt_tokens.p99 + c.output_tokens.p99 for c in classes]


def fit_moments(mean: float, second: float) -> tuple[float, float]:
    """(p50, sigma) of the log-normal with this mean and second moment."""
    var_log = max(math.log(max(second / (mean * mean), 1.0)), 0.0)
    sigma = math.sqrt(var_log)
    return mean / math.exp(var_log / 2.0), sigma


def mixture_quantiles(comps: list[Component], probabilities) -> list[float]:
    """Prompt lengths of the mix of classes at each probability (root of the mix's CDF in log
    length: Newton steps kept inside a shrinking bisection bracket, to 1e-12 in log length).

    The one log-normal with the mix's moments has not the mix's tail (a few long RAG prompts
    among short chat turns have a shorter p99 than the log-normal with the same mean and
    second moment), and a prefill pool's p99 TTFT is read off that tail.
    """
    logs = [(c.weight, math.log(c.prompt_p50), max(c.prompt_sigma, 1e-9)) for c in comps]
    lo0 = min(m - 12.0 * s - 1.0 for _, m, s in logs)
    hi0 = max(m + 12.0 * s + 1.0 for _, m, s in logs)

    def cdf_pdf(x: float) -> tuple[float, float]:
        cdf = pdf = 0.0
        for w, m, s in logs:
            z = (x - m) / s
            cdf += w * _phi(z)
            pdf += w * math.exp(-0.5 * z * z) / (s * _SQRT_2PI)
        return cdf, pdf

    out = []
    for p in probabilities:
        lo, hi = lo0, hi0
        x = sum(w * m for w, m, _ in logs)
        for _ in range(200):
            cdf, pdf = cdf_pdf(x)
            if cdf < p:
                lo = x
            else:
                hi = x
            step = (cdf - p) / pdf if pdf > 0 else math.inf
            nxt = x - step
            if not lo < nxt < hi:  # Newton left the bracket: bisect instead
                nxt = 0.5 * (lo + hi)
            if abs(nxt - x) < 1e-12 or hi - lo < 1e-12:
                x = nxt
                break
            x = nxt
        out.append(math.exp(x))
    return out


_SQRT_2PI = math.sqrt(2.0 * math.pi)


def uncached(comps: list[Component]) -> list[Component]:
    """The classes with their prompts cut to the uncached part (prompt x (1 - hit rate)):
    the tokens a prefill computes and a KV transfer moves."""
    return [Component(c.weight, c.prompt_p50 * (1.0 - c.hit_rate), *astuple(c)[2:]) for c in comps]


def cached_per_uncached(comps: list[Component], uncached_tokens: float) -> float:
    """Expected cached tokens per uncached token of a request with `uncached_tokens` uncached.

    Classes hit the prefix cache at different rates; given a request's uncached length, the
    class it came from is known only in probability (Bayes over the classes' log-normal
    densities of uncached length), so its cached prefix is u x E[h / (1 - h) | u].
    """
    x = math.log(max(uncached_tokens, 1e-9))
    posts, ratios = [], []
    for c in comps:
        u50 = c.prompt_p50 * (1.0 - c.hit_rate)
        s = max(c.prompt_sigma, 1e-3)
        z = (x - math.log(u50)) / s
        posts.append(c.weight * math.exp(-0.5 * z * z) / s)
        ratios.append(c.hit_rate / (1.0 - c.hit_rate))
    total = sum(posts)
    if total <= 0.0:  # beyond every class's reach: the nearest class in log length
        nearest = min(
            range(len(comps)),
            key=lambda i: abs(x - math.log(comps[i].prompt_p50 * (1.0 - comps[i].hit_rate))),
        )
        return ratios[nearest]
    return sum(w * r for w, r in zip(posts, ratios, strict=True)) / total


def _phi(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def mixture_percentiles(
    comps: list[Component],
) -> tuple[tuple[float, float], tuple[float, float], float]:
    """The mix as one class: prompt (p50, p99), output (p50, p99) of the moment-matched
    log-normals, and the token-weighted prefix-cache hit rate."""
    p1 = sum(c.weight * c.prompt_p50 * math.exp(c.prompt_sigma**2 / 2) for c in comps)
    p2 = sum(c.weight * c.prompt_p50**2 * math.exp(2 * c.prompt_sigma**2) for c in comps)
    cached = sum(
        c.weight * c.hit_rate * c.prompt_p50 * math.exp(c.prompt_sigma**2 / 2) for c in comps
    )
    o1 = sum(c.weight * c.output_p50 * math.exp(c.output_sigma**2 / 2) for c in comps)
    o2 = sum(c.weight * c.output_p50**2 * math.exp(2 * c.output_sigma**2) for c in comps)
    p50, sigma = fit_moments(p1, p2)
    o50, osigma = fit_moments(o1, o2)
    prompt = (p50, p50 * math.exp(Z99 * sigma))
    output = (o50, o50 * math.exp(Z99 * osigma))
    return prompt, output, cached / p1


def class_seats(comps: list[Component]) -> tuple[list[float], list[float], list[float]]:
    """Per class: its share of decode seats (share x mean output: a request holds its seat for
    its output, Little's law per class), mean prompt, and the output a seat of the class holds
    (seat-weighted within the class too: E[O^2] / E[O] = E[O] exp(sigma^2), as
    `decode.held_tokens` for one class)."""
    p = [c.prompt_p50 * math.exp(c.prompt_sigma**2 / 2) for c in comps]
    o = [c.output_p50 * math.exp(c.output_sigma**2 / 2) for c in comps]
    seats = [c.weight * oi for c, oi in zip(comps, o, strict=True)]
    held = [oi * math.exp(c.output_sigma**2) for c, oi in zip(comps, o, strict=True)]
    return seats, p, held


def batch_context_tokens(workload: Any) -> float:
    """The mean context of a decode batch serving the workload's classes; nan for one class.

    A request holds its seat for its output, so classes with long outputs fill more of the
    batch (Little's law per class): the mean context is output-weighted,
    sum(w o (p + h / 2)) / sum(w o) over class means, h the output a seat of the class holds
    (`class_seats`). With one class it is the calculator's convention
    (`Lengths.decode_context_mean`), and nan says so.
    """
    comps = components(workload)
    if len(comps) == 1:
        return math.nan
    seats, p, o = class_seats(comps)
    return sum(s * (pi + oi / 2) for s, pi, oi in zip(seats, p, o, strict=True)) / sum(seats)


def batch_mix(workload: Any) -> tuple[float, float]:
    """What else a decode batch of the workload's classes holds: (context scv, held tokens).

    - context scv: the squared coefficient of variation of a seat's context across classes
      (seat-weighted class means, as `batch_context_tokens`). A batch of n seats reads
      n x mean context of KV per step only on average: which classes hold the seats varies,
      and with 16K-token RAG contexts beside 500-token chat turns the KV read per step varies
      about sqrt(1 + scv) times as much as the seat count alone makes it (compound Poisson).
    - held tokens: the KV a seat reserves (prompt + whole output, the reservation rule shared
      with the simulator), seat-weighted: long-output classes hold more of the seats, and
      within a class the long outputs.

    (nan, nan) for one class: the calculator's one-class convention applies there.
    """
    comps = components(workload)
    if len(comps) == 1:
        return math.nan, math.nan
    seats, p, o = class_seats(comps)
    total = sum(seats)
    held = sum(s * (pi + oi) for s, pi, oi in zip(seats, p, o, strict=True)) / total
    return seat_context_scv(comps), held


def seat_context_scv(comps: list[Component]) -> float:
    """The squared CV of a decode seat's context across the classes (seat-weighted class
    means, `batch_mix`); 0 for one class."""
    seats, p, o = class_seats(comps)
    total = sum(seats)
    ctx = [pi + oi / 2 for pi, oi in zip(p, o, strict=True)]
    mean = sum(s * c for s, c in zip(seats, ctx, strict=True)) / total
    second = sum(s * c * c for s, c in zip(seats, ctx, strict=True)) / total
    return max(second / (mean * mean) - 1.0, 0.0)


def chunk_prompt_tokens(workload: Any) -> float:
    """The uncached prompt a chunked-prefill token belongs to, on average over the classes'
    means; nan for one class.

    A chunk's attention reads the prompt computed before it, so a chunk-carrying iteration
    costs what a token at the middle of the prompt it belongs to costs. Prompt tokens belong
    to long prompts more often than prompts are long (size-biased): with 16K-token RAG prompts
    beside 500-token chat turns the average token sits in a prompt ~4x the mean prompt. The
    spread between class means is counted, sum(w u^2) / sum(w u) over the classes' mean
    uncached prompts u; the spread within a class keeps the one-class convention (the mean
    prompt), so one class and several identical classes price the same.
    """
    comps = components(workload)
    return math.nan if len(comps) == 1 else class_size_biased(comps)


def class_size_biased(comps: list[Component]) -> float:
    """sum(w u^2) / sum(w u) over the classes' mean uncached prompts u (`chunk_prompt_tokens`)."""
    u = [(1.0 - c.hit_rate) * c.prompt_p50 * math.exp(c.prompt_sigma**2 / 2) for c in comps]
    first = sum(c.weight * ui for c, ui in zip(comps, u, strict=True))
    return sum(c.weight * ui * ui for c, ui in zip(comps, u, strict=True)) / first
