"""A discrete-event simulator of colocated and disaggregated serving.

It checks the analytic calculator under what closed forms average away: Poisson or bursty
arrivals, length distributions, queues, KV memory limits and a shared KV-transfer link. Every
iteration's time, every prefill, KV size and transfer comes from `calc/` (`step.iteration_ms`,
`prefill.prefill_ms`, `kv.kv_bytes`, `transfer.transfer_ms`), so simulator and calculator can
never disagree on physics, only on what queueing and batching do with it.

Modules, in the order a request meets them: `arrivals` and `lengths` (or `trace`) make the
requests, `steps` holds the calculator's step times on grids, `batch` is a continuous decode
batch, `colocated` and `disaggregated` are the two serving modes, `metrics` turns per-request
times into percentiles, goodput and cost, `goodput` searches the highest rate within the SLO,
`run` wires a workload and its verdict to all of it, and `cli` is the `decide` commands.
"""
