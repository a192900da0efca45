"""`decide frontier` as plain text (a fixed-width table) or markdown."""

from __future__ import annotations

from disagg_decider.frontier_map import WinnerMap, cell_text
from disagg_decider.frontier_rows import Frontier, Row
from disagg_decider.interactivity import band_sentence

SHORT = {"colocated": "colocated", "disaggregated": "always-split", "conditional": "conditional"}


def _lead(r: Row) -> str:
    if r.winner is None:
        return "none meets"
    if r.winner_over_next is None:
        return f"{SHORT[r.winner]} alone"
    return f"{SHORT[r.winner]} {r.winner_over_next:.2f}x"


def _header(f: Frontier) -> list[str]:
    return [
        f"{f.workload}: {f.model} on {f.gpus} x {f.gpu}, p99 TTFT target {f.ttft_target_ms:g} ms",
        f"basis: {f.basis} ({f.basis_label})",
        "output tokens/s per GPU at each TPOT target (tokens/s per user = 1000 / TPOT ms); "
        "0 = misses the targets; * = your target",
    ]


def _footer(f: Frontier) -> list[str]:
    lines = []
    if f.winner_changes:
        changes = ", ".join(
            f"{c.tokens_per_s_per_user:.0f} ({SHORT.get(c.below or '', 'none')} -> "
            f"{SHORT.get(c.above or '', 'none')})"
            for c in f.winner_changes
        )
        lines.append(f"winner changes at tokens/s per user: {changes}")
    for o in f.only_one_meets:
        lines.append(
            f"only {SHORT[o.mode]} meets the targets from {o.low_tokens_per_s_per_user:.0f} "
            f"to {o.high_tokens_per_s_per_user:.0f} tokens/s per user"
        )
    lines.append(band_sentence(f.band, f.target_tokens_per_s_per_user))
    for fr in f.fronts:
        pts = ", ".join(
            f"{p.tokens_per_s_per_user:.0f}:{p.tokens_per_s_per_gpu:.0f}" for p in fr.points
        )
        lines.append(f"Pareto {SHORT[fr.mode]} (tok/s/user:tok/s/GPU): {pts or 'none'}")
    lines.extend(f"note: {n}" for n in f.notes)
    return lines


def _cells(f: Frontier, r: Row) -> list[str]:
    """One row's cells: interactivity (* your target), TPOT, each mode, the winner, its layout."""
    layout = r.modes[r.winner].layout if r.winner else ""
    return [
        f"{r.tokens_per_s_per_user:.1f}{'*' if r.is_target else ''}",
        f"{r.tpot_target_ms:.2f}",
        *(f"{r.modes[m].tokens_per_s_per_gpu:.1f}" for m in f.modes),
        _lead(r),
        layout,
    ]


def frontier_text(f: Frontier) -> str:
    names = ["tok/s/user", "TPOT ms", *(SHORT[m] for m in f.modes), "winner (lead)", "layout"]
    widths = [11, 8, *(13 for _ in f.modes), 24]

    def line(cells: list[str]) -> str:
        numbers = " ".join(f"{c:>{w}}" for c, w in zip(cells, widths[:-1], strict=False))
        return f"{numbers}  {cells[-2]:<{widths[-1]}} {cells[-1]}".rstrip()

    table = [line(names), *(line(_cells(f, r)) for r in f.rows)]
    return "\n".join([*_header(f), "", *table, "", *_footer(f)]) + "\n"


def frontier_markdown(f: Frontier) -> str:
    names = ["tok/s/user", "TPOT ms", *(SHORT[m] for m in f.modes), "winner (lead)", "layout"]
    lines = [f"## Frontier: {f.workload}", "", *(f"{h}  " for h in _header(f)), ""]
    lines.append("| " + " | ".join(names) + " |")
    lines.append("|" + "---:|" * (len(names) - 2) + "---|---|")
    lines.extend("| " + " | ".join(_cells(f, r)) + " |" for r in f.rows)
    lines.append("")
    lines.extend(f"- {x}" for x in _footer(f))
    return "\n".join(lines) + "\n"


def map_text(m: WinnerMap, markdown: bool = False) -> str:
    tps = [f"{u:.0f}" for u in m.tokens_per_s_per_user]
    title = (
        f"{m.workload}: winner by (p99 TTFT target, TPOT target), basis {m.basis}; "
        "C colocated, D always-split, K conditional; ratio = best split over colocated "
        "per GPU; 'only' = the one layout meeting both targets; - = none"
    )
    if markdown:
        lines = [f"## Winner map: {m.workload}", "", title, ""]
        lines.append("| TTFT ms \\ tok/s/user | " + " | ".join(tps) + " |")
        lines.append("|---:|" + "---|" * len(tps))
        for t, line in zip(m.ttft_targets_ms, m.cells, strict=True):
            lines.append(f"| {t:.0f} | " + " | ".join(cell_text(c) for c in line) + " |")
        return "\n".join(lines) + "\n"
    lines = [title, "", f"{'TTFT ms':>8} " + " ".join(f"{u:>9}" for u in tps)]
    for t, line in zip(m.ttft_targets_ms, m.cells, strict=True):
        lines.append(f"{t:>8.0f} " + " ".join(f"{cell_text(c):>9}" for c in line))
    lines.append(
        f"your targets: TTFT {m.target_ttft_ms:g} ms, {m.target_tokens_per_s_per_user:.0f} "
        "tokens/s per user"
    )
    return "\n".join(lines) + "\n"
