"""`decide frontier` as plain text (a fixed-width table) or markdown."""

from __future__ import annotations

from disagg_decider.frontier_map import WinnerMap, cell_text
from disagg_decider.frontier_sweep import Frontier, Row
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


def frontier_text(f: Frontier) -> str:
    cols = [SHORT[m] for m in f.modes]
    head = f"{'tok/s/user':>11} {'TPOT ms':>8} " + " ".join(f"{c:>13}" for c in cols)
    head += f"  {'winner (lead)':<24} layout of the winner"
    lines = [*_header(f), "", head]
    for r in f.rows:
        vals = " ".join(f"{r.modes[m].tokens_per_s_per_gpu:>13.1f}" for m in f.modes)
        layout = r.modes[r.winner].layout if r.winner else ""
        mark = "*" if r.is_target else " "
        lines.append(
            f"{r.tokens_per_s_per_user:>10.1f}{mark} {r.tpot_target_ms:>8.2f} {vals}  "
            f"{_lead(r):<24} {layout}"
        )
    return "\n".join([*lines, "", *_footer(f)]) + "\n"


def frontier_markdown(f: Frontier) -> str:
    cols = [SHORT[m] for m in f.modes]
    lines = [f"## Frontier: {f.workload}", "", *(f"{h}  " for h in _header(f)), ""]
    lines.append("| tok/s/user | TPOT ms | " + " | ".join(cols) + " | winner (lead) | layout |")
    lines.append("|---:|---:|" + "---:|" * len(cols) + "---|---|")
    for r in f.rows:
        vals = " | ".join(f"{r.modes[m].tokens_per_s_per_gpu:.1f}" for m in f.modes)
        layout = r.modes[r.winner].layout if r.winner else ""
        mark = " (yours)" if r.is_target else ""
        lines.append(
            f"| {r.tokens_per_s_per_user:.1f}{mark} | {r.tpot_target_ms:.2f} | {vals} | "
            f"{_lead(r)} | {layout} |"
        )
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
