"""Queues: how long a request waits for a pool of busy servers, the tails of wait plus service,
and the largest load that keeps a p99 within a target.

Erlang C (`erlang`), the wait and p99 of wait + service (`queueing`, `p99_check`), the
standard-normal grid service times are given on (`normal_quantiles`), bisections on load
(`load_bisection`, `bisection_replay`) and along a grid of batch sizes (`batch_edge`), and the
array helpers all of them lean on (`array_helpers`).

May import: the physics layer, `calc.result` and the data below the calculator; nothing above.
"""
