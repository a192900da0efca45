"""The analytic transfer-vs-gain calculator: pure functions, one module per concern, no I/O.

`analyze` in `calc/compare.py` is the entry point: it sizes both serving modes for a resolved
workload and returns the metrics the rulebook, renderers, simulator and emitters all read.
"""
