"""Replicas: one prefill, decode or colocated replica, or a pool of them, at a load.

The length mix a pool sees (`lengths`, `mixed_members`), prefill and decode replicas' step
times and rates (`prefill`, `decode`), the colocated replica with chunked prefill and its runs
of chunk-carrying steps (`colocated`, `chunk_runs`, `low_load`, `colocated_load`), the KV
transfer queue at a decode replica (`ingress_queue`), report-only p99 TTFTs solved together
(`reported_ttft`) and what a benchmark run of one replica would measure (`benchmark`).

May import: the queues and physics layers, `calc.result` and the data below the calculator.
"""
