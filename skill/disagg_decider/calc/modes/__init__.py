"""Modes built on the search: conditional disaggregation and heterogeneous inventories.

The conditional layout (a prefill pool for long uncached prompts, local prefill for the rest):
its candidates (`conditional_rows`), its TTFT target over all requests (`overall_ttft`), its
sizing for the workload's rate (`conditional_sizing`) and the layout itself (`conditional`);
the share of local prefills Dynamo's router keeps local (`local_prefill_share`); one GPU type
for prefill and another for decode (`hetero`). Colocated and always-disaggregated serving are
the search's own (`layouts.search` over `replicas.colocated` and `layouts.pools`).

May import: every layer below (layouts, replicas, queues, physics), `calc.result` and the data
below the calculator.
"""
