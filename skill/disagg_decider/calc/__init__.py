"""The analytic transfer-vs-gain calculator: pure functions, one module per concern, no I/O.

`analyze` in `calc/compare.py` is the entry point: it sizes both serving modes for a resolved
workload and returns the metrics the rulebook, renderers, simulator and emitters all read.

The modules sit in layers, each a subpackage; a module imports only from its own layer and the
layers below it (`tests/test_import_layers.py` holds every module to that), and below them all
from the data the calculator is given (`workload`, `catalog`, `dtypes`, `errors`):

- `result.py`: the records the calculator hands downstream (imports nothing of `calc`);
- `physics/`: one forward pass and what it moves: model costs, KV sizes, MoE, parallel
  layouts, the KV transfer, measured step tables;
- `queues/`: waits and tails of a pool of busy servers, and bisections on load;
- `replicas/`: one prefill, decode or colocated replica (or a pool of them) at a load: its
  step times, its p99 TTFT and TPOT, the lengths it sees;
- `layouts/`: pools on a GPU budget: the search over layouts, pins, routing thresholds,
  sizing for the workload's rate, and what limits a layout;
- `modes/`: the conditional and heterogeneous layouts built on the search, and the router's
  local-prefill share;
- `compare.py`, `static.py` (top): the comparison that produces the verdict's numbers, on
  p99 under load or, for `slo.basis: static`, as static-batch planners size; beside them
  `mode_records.py` (each mode's record at the workload's own rate, priced over the entries
  of `mode_entries.py`) and `crossover.py` (the
  prompt length where the split starts to win, read off the gain curve).
"""

# Bottom to top: a module of a layer may import modules of its own layer and of those before it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("records", ("result",)),
    ("physics", ("physics",)),
    ("queues", ("queues",)),
    ("replicas", ("replicas",)),
    ("layouts", ("layouts",)),
    ("modes", ("modes",)),
    ("comparison", ("compare", "crossover", "mode_entries", "mode_records", "static")),
)
