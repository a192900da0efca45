"""Physics: one forward pass of an engine and what it moves, with no load and no queue.

What a model costs per token (`model_costs`), KV-cache bytes (`kv`), MoE expert parallelism
(`moe`), how a replica spreads over its GPUs (`parallel`), a step as a roofline or fitted terms
(`step`, `step_split`; constants shared between equal engines: `engine_cache`) or from
measured kernels (`silicon`, `silicon_steps`), and the KV's path and transfer time from
prefill to decode (`kvpath`, `transfer`).

May import: `calc.result` and the data below the calculator (`workload`, `catalog`, `dtypes`,
`errors`); nothing of the other `calc` layers.
"""
