"""Layouts: pools on a GPU budget and the search over them.

Disaggregated pools and the best prefill/decode split (`pools`, `pool_rates`), the search over
every serving configuration of both modes (`search`, with its cost budget `budget`), pinned
parallelism checked (`pins`), routing thresholds and the cluster splits they are priced on
(`thresholds`, `split_grid`), the layouts to deploy at the workload's rate (`rate_layout`), and
what limits a layout, in words (`limits`).

May import: the replicas, queues and physics layers, `calc.result` and the data below the
calculator.
"""
