"""`Pool.sizing` reads back the rate of a size it tried bit for bit as `max_rate_per_s` gives
it, and says where it did not try one."""

import numpy as np

from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas.prefill import Pool


def test_rates_read_back_equal_a_fresh_bisection():
    rng = np.random.default_rng(5)
    n = 12
    base = rng.uniform(50.0, 400.0, n)[:, None]
    pool = Pool(
        mean_ms=rng.uniform(20.0, 300.0, n),
        scv=rng.uniform(0.0, 2.0, n),
        nodes_ms=base * np.exp(rng.uniform(0.1, 0.8, n)[:, None] * queueing.Z_NODES),
        target_ms=rng.uniform(500.0, 3000.0, n),
    )
    rate = rng.uniform(1.0, 80.0, n)
    sized = pool.sizing(rate, np.full(n, 64.0))
    assert np.array_equal(sized.servers, pool.servers_needed(rate, np.full(n, 64.0)))
    tried_sizes = sized.rates_per_s.shape[-1]
    for servers in (sized.servers, np.ones(n), np.full(n, float(tried_sizes + 3))):
        got, known = sized.rate_at(servers)
        fresh = pool.max_rate_per_s(servers)
        assert np.array_equal(known, servers <= tried_sizes)
        assert np.array_equal(got[known], fresh[known])  # bit for bit, not approximately
    assert sized.rate_at(sized.servers)[1].any()
