"""The calculator's step times, precomputed on grids so the event loop never calls numpy.

`calc.physics.step.iteration_ms` costs about 90 microseconds per scalar call (numpy overhead), too
slow for tens of thousands of simulated requests per second. So each table evaluates it once, as one
vectorised call over a grid, and the simulator interpolates linearly between grid points. The
values at the grid points are `iteration_ms`'s own; `tests/test_sim_steps.py` checks that the
interpolated values stay close to direct calls (decode passes within 0.2%, mixed passes within
a few percent where the fitted pass's maxima kink inside a cell).

`DecodeTable` holds pure decode passes for every integer batch size (exact in the batch) on a
uniform grid of mean context, along which the roofline is piecewise linear. `MixedTable` holds
passes that carry prompt tokens (chunked-prefill iterations, prefill-only passes) on a
four-dimensional grid: decode batch, prompt tokens in the pass and decode context (both
square-root spaced), prompt context.
"""

from __future__ import annotations

from math import sqrt

import numpy as np

from disagg_decider.calc.physics.step import Engine, iteration_ms

CONTEXT_POINTS = 257
MIXED_CONTEXT_POINTS = 13
MIXED_TOKEN_POINTS = 41
MIXED_PROMPT_CONTEXT_POINTS = 17


class DecodeTable:
    """Time of a decode-only pass: `ms(batch, mean_context)` with batch in 1..max_batch."""

    def __init__(self, engine: Engine, max_batch: int, max_context: float) -> None:
        self.max_batch = int(max_batch)
        self.step = max(float(max_context), 1.0) / (CONTEXT_POINTS - 1)
        self.inv_step = 1.0 / self.step
        batch = np.arange(1, self.max_batch + 1, dtype=float)[:, None]
        context = np.arange(CONTEXT_POINTS, dtype=float) * self.step
        rows = np.asarray(iteration_ms(engine, batch, context, 0.0, 0.0), dtype=float).tolist()
        self.rows: list[list[float]] = [[0.0] * CONTEXT_POINTS, *rows]  # row 0: an empty pass

    def ms(self, batch: int, mean_context: float) -> float:
        x = mean_context * self.inv_step
        i = int(x)
        if i > CONTEXT_POINTS - 2:
            i = CONTEXT_POINTS - 2  # beyond the grid: extend the last segment linearly
        row = self.rows[batch]
        lo = row[i]
        return lo + (row[i + 1] - lo) * (x - i)


def _batch_nodes(max_batch: int) -> list[int]:
    """Every batch up to 8, then about four points per doubling: the roofline is smooth in B."""
    nodes = set(range(min(max_batch, 8) + 1))
    nodes.update(round(x) for x in np.geomspace(8, max(max_batch, 8), 16))
    nodes.add(max_batch)
    return sorted(n for n in nodes if n <= max_batch)


class MixedTable:
    """Time of a pass carrying prompt tokens: `ms(batch, decode_context, tokens, prompt_context)`.

    `tokens` runs from 1 to `max_tokens` (a pass with no prompt token is a decode pass: the
    calculator switches MFU there, so it has its own table). `prompt_context` is the number of
    earlier tokens the new prompt tokens attend to, from 0 to `max_prompt_context`.
    """

    def __init__(
        self,
        engine: Engine,
        max_batch: int,
        max_context: float,
        max_tokens: int,
        max_prompt_context: float,
    ) -> None:
        self.b_nodes = _batch_nodes(int(max_batch))
        self.c_max = max(float(max_context), 1.0)
        self.t_max = max(int(max_tokens), 2)
        self.s_max = max(float(max_prompt_context), 1.0)
        nb, nc, nt, ns = (
            len(self.b_nodes),
            MIXED_CONTEXT_POINTS,
            MIXED_TOKEN_POINTS,
            MIXED_PROMPT_CONTEXT_POINTS,
        )
        b = np.asarray(self.b_nodes, dtype=float).reshape(nb, 1, 1, 1)
        # Decode context on a square-root grid as well: where the KV read and the attention
        # FLOPs cross (MLA's absorbed attention: about 1K tokens on DeepSeek-V3), the fitted
        # pass has a kink that an even grid of 9 points smeared by up to 17% (issue 24).
        uc = np.linspace(0.0, 1.0, nc)
        c = (self.c_max * uc * uc).reshape(1, nc, 1, 1)
        # Prompt tokens on a square-root grid: dense at the bottom, where MoE expert traffic
        # saturates within the first hundred tokens; even enough at the top for causal n^2.
        u = np.linspace(0.0, 1.0, nt)
        t = (1.0 + (self.t_max - 1.0) * u * u).reshape(1, 1, nt, 1)
        s = np.linspace(0.0, self.s_max, ns).reshape(1, 1, 1, ns)
        grid = np.broadcast_to(iteration_ms(engine, b, c, t, s), (nb, nc, nt, ns))
        self.flat: list[float] = np.ascontiguousarray(grid, dtype=float).ravel().tolist()
        self.shape = (nb, nc, nt, ns)
        self.inv_c_span = 1.0 / self.c_max
        self.c_cells = nc - 1
        self.c_nodes = (self.c_max * uc * uc).tolist()
        self.inv_t_span = 1.0 / (self.t_max - 1.0)
        self.t_cells = nt - 1
        self.t_nodes = [(self.t_max - 1.0) * v * v for v in u.tolist()]  # tokens - 1 at nodes
        self.c_last, self.t_last, self.s_last = nc - 2, nt - 2, ns - 2
        self.row_c = nt * ns
        self.row_b = nc * nt * ns
        self.inv_s = (ns - 1) / self.s_max
        # Integer batch -> (lower node index, fraction towards the next node).
        self.b_index: list[tuple[int, float]] = []
        for batch in range(int(max_batch) + 1):
            j = max(k for k, node in enumerate(self.b_nodes) if node <= batch)
            if j == nb - 1:
                self.b_index.append((j - 1 if nb > 1 else 0, 1.0 if nb > 1 else 0.0))
            else:
                lo, hi = self.b_nodes[j], self.b_nodes[j + 1]
                self.b_index.append((j, (batch - lo) / (hi - lo)))
        # The same as offsets into `flat`: (lower node * row_b, fraction).
        self.b_offset = [(j * self.row_b, fb) for j, fb in self.b_index]
        self.t_offset: dict[float, tuple[int, float]] = {}  # tokens -> (cell * ns, fraction)

    def ms(self, batch: int, decode_context: float, tokens: float, prompt_context: float) -> float:
        """Multilinear interpolation; written out flat (both batch rows inline) because it
        runs once per event. The token axis's cell and fraction depend on `tokens` alone, and
        a run carries a few distinct counts, so they are kept per count."""
        p, fb = self.b_offset[batch]
        fc = fs = 0.0
        if decode_context > 0.0:
            ic = int(sqrt(decode_context * self.inv_c_span) * self.c_cells)
            if ic > self.c_last:
                ic = self.c_last
            lo = self.c_nodes[ic]
            fc = (decode_context - lo) / (self.c_nodes[ic + 1] - lo)  # linear inside the cell
            p += ic * self.row_c
        cell = self.t_offset.get(tokens)
        if cell is None:
            cell = self.t_offset[tokens] = self._token_cell(tokens)
        p += cell[0]
        ft = cell[1]
        y = prompt_context * self.inv_s
        if y > 0.0:
            i_s = int(y)
            if i_s > self.s_last:
                i_s = self.s_last
            fs = y - i_s
            p += i_s
        ns = self.shape[3]
        f = self.flat
        a0, a1, b0, b1 = f[p], f[p + 1], f[p + ns], f[p + ns + 1]
        lo = a0 + (a1 - a0) * fs
        value = lo + (b0 + (b1 - b0) * fs - lo) * ft
        if fc > 0.0:
            q = p + self.row_c
            a0, a1, b0, b1 = f[q], f[q + 1], f[q + ns], f[q + ns + 1]
            lo = a0 + (a1 - a0) * fs
            value += (lo + (b0 + (b1 - b0) * fs - lo) * ft - value) * fc
        if fb > 0.0:
            p += self.row_b
            a0, a1, b0, b1 = f[p], f[p + 1], f[p + ns], f[p + ns + 1]
            lo = a0 + (a1 - a0) * fs
            upper = lo + (b0 + (b1 - b0) * fs - lo) * ft
            if fc > 0.0:
                q = p + self.row_c
                a0, a1, b0, b1 = f[q], f[q + 1], f[q + ns], f[q + ns + 1]
                lo = a0 + (a1 - a0) * fs
                upper += (lo + (b0 + (b1 - b0) * fs - lo) * ft - upper) * fc
            value += (upper - value) * fb
        return value

    def _token_cell(self, tokens: float) -> tuple[int, float]:
        """(offset of the token cell in `flat`, fraction inside it): the square-root grid."""
        it, ft = 0, 0.0
        u = tokens - 1.0
        if u > 0.0:
            it = int(sqrt(u * self.inv_t_span) * self.t_cells)
            if it > self.t_last:
                it = self.t_last
            lo = self.t_nodes[it]
            ft = (u - lo) / (self.t_nodes[it + 1] - lo)  # linear in tokens inside the cell
        return it * self.shape[3], ft
