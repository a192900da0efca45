"""The fast paths of the calculator's primitives give the reference paths' bits.

A single pool's p99 and load bisections run in plain floats (`normal_quantiles.Row`,
`queueing._p99_of_one`, `load_bisection._FewEntries`, `p99_check._finish_in_floats`), the load test
skips operations that are identities in its range (`_LoadTest.misses(below_one=True)`), and
`batch_edge._pick` reads by flat position; the general array code stays the reference. Each test
feeds both the same entries, including the edges (saturated pools, targets below the first node or
past the last, flat node segments, loads at the Erlang table's ends), and compares bit for bit.
"""

import numpy as np

from disagg_decider.calc.queues import load_bisection, normal_quantiles, queueing


def _nodes(rng, n):
    base = rng.uniform(5.0, 500.0, n)[:, None]
    nodes = base * np.exp(rng.uniform(0.0, 1.2, n)[:, None] * normal_quantiles.Z_NODES)
    flat = rng.random(n) < 0.2  # some rows with runs of equal nodes (a capped service time)
    nodes[flat] = np.minimum(nodes[flat], np.median(nodes[flat], axis=-1, keepdims=True))
    return nodes


def _bits(a) -> bytes:
    return np.ascontiguousarray(a, dtype=float).tobytes()


def test_normal_sf_of_one_float_is_the_arrays():
    z = np.concatenate([np.random.default_rng(0).uniform(-9.0, 9.0, 5000), [0.0, -0.0, 4.5]])
    expected = normal_quantiles.normal_sf(z)
    got = np.array([normal_quantiles.normal_sf_float(v) for v in z.tolist()])
    assert _bits(got) == _bits(expected)


def test_one_row_exceed_is_the_grids():
    rng = np.random.default_rng(1)
    nodes = _nodes(rng, 300)
    span = nodes[:, -1] - nodes[:, 0]
    checked = 0
    for k in range(4):
        # Targets below the first node, past the last, on nodes exactly, and in between.
        targets = nodes[:, 0] + span * rng.uniform(-0.2, 1.2, len(nodes))
        if k == 1:
            targets = nodes[np.arange(len(nodes)), rng.integers(0, 25, len(nodes))]
        with np.errstate(divide="ignore", invalid="ignore"):
            expected = normal_quantiles.NodeGrid(nodes, (len(nodes),)).exceed(targets)
        for row, t, want in zip(nodes, targets.tolist(), expected.tolist(), strict=True):
            one = normal_quantiles.Row.of(row)
            assert one is not None
            assert _bits(one.exceed(t)) == _bits(want)
            checked += 1
    assert checked == 1200
    # A grid of a few rows reads them one by one; the same bits as the big grid's rows.
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = normal_quantiles.NodeGrid(nodes, (len(nodes),)).exceed(targets)
        for size in range(1, normal_quantiles.FEW_ROWS + 1):
            few = normal_quantiles.NodeGrid(nodes[:size], (size,))
            assert few.rows is not None
            assert _bits(few.exceed(targets[:size])) == _bits(expected[:size])
            # Targets that are not finite go to the array code: the same answers there.
            odd = targets[:size].copy()
            odd[0] = [np.inf, -np.inf, np.nan][size % 3]
            reference = normal_quantiles.NodeGrid(
                nodes[: normal_quantiles.FEW_ROWS + 1], (normal_quantiles.FEW_ROWS + 1,)
            )
            assert reference.rows is None
            padded = np.concatenate([odd, targets[size : normal_quantiles.FEW_ROWS + 1]])
            assert _bits(few.exceed(odd)) == _bits(reference.exceed(padded)[:size])
    assert (
        normal_quantiles.Row.of(np.array([1.0, np.nan] + [2.0] * 23)) is None
    )  # not finite: the grid
    assert normal_quantiles.Row.of(np.linspace(2.0, 1.0, 25)) is None  # not ascending: the grid


def _pools(seed, n):
    rng = np.random.default_rng(seed)
    servers = rng.integers(1, 9, n).astype(float)
    mean_ms = rng.uniform(5.0, 200.0, n)
    rho = rng.uniform(0.0, 1.1, n)  # some idle, some saturated (p99 infinite)
    scv = rng.uniform(0.0, 3.0, n)
    return rho * servers / mean_ms, servers, mean_ms, scv, _nodes(rng, n)


def test_p99_of_one_entry_is_the_arrays():
    rate, servers, mean_ms, scv, nodes = _pools(2, 200)
    expected = queueing.p99_of_sum_ms(rate, servers, mean_ms, scv, nodes)  # the array loop
    assert np.isinf(expected).any() and np.isfinite(expected).any()
    for i in range(len(rate)):
        one = queueing.p99_of_sum_ms(rate[i], servers[i], mean_ms[i], scv[i], nodes[i])
        assert one.shape == ()
        assert _bits(one) == _bits(expected[i])
        # A one-entry column (shape (1,)) takes the same path and keeps its shape.
        col = queueing.p99_of_sum_ms(rate[i : i + 1], servers[i], mean_ms[i], scv[i], nodes[i])
        assert col.shape == (1,) and _bits(col) == _bits(expected[i])


def test_load_bisection_of_a_few_entries_is_the_arrays():
    rng = np.random.default_rng(3)
    _, servers, mean_ms, scv, nodes = _pools(3, 400)
    # Targets from below the idle p99 (rate 0) to far above it (capped at the top load).
    target = nodes[:, 0] + (nodes[:, -1] - nodes[:, 0]) * rng.uniform(-0.1, 3.0, len(nodes))
    expected = queueing.max_rate_per_ms(servers, mean_ms, scv, nodes, target)
    assert len(expected) > load_bisection.FEW_ENTRIES  # the array path
    assert (expected == 0).any() and (expected > 0).any()
    top = expected == queueing.RHO_MAX * servers / mean_ms
    assert top.any() and (~top & (expected > 0)).any()  # capped and bisected entries both
    for size in range(1, load_bisection.FEW_ENTRIES + 1):
        for start in range(0, len(servers) - size, size):
            part = slice(start, start + size)
            got = queueing.max_rate_per_ms(
                servers[part], mean_ms[part], scv[part], nodes[part], target[part]
            )
            assert _bits(got) == _bits(expected[part])
    one = queueing.max_rate_per_ms(servers[0], mean_ms[0], scv[0], nodes[0], target[0])
    assert one.shape == () and _bits(one) == _bits(expected[0])


def test_few_entries_test_each_load_as_the_arrays():
    _, servers, mean_ms, scv, nodes = _pools(4, 64)
    target = nodes[:, 12] * 2.0
    over = queueing.exceed_probability(nodes, target)
    test = load_bisection._LoadTest(servers, mean_ms, scv, nodes, target, over, (64,))
    # Loads across the Erlang table, its ends and past saturation.
    for rho in (0.0, 1e-9, 0.3, 0.7, 0.95, 0.999, 1.0, 1.2):
        with np.errstate(divide="ignore", invalid="ignore"):
            expected = test.misses(np.full(64, rho))
        for start in range(0, 64, 4):
            few = load_bisection._FewEntries.of(test.subset(np.arange(64) // 4 == start // 4))
            assert few is not None
            assert few.misses([rho] * 4) == expected[start : start + 4].tolist()
    bad = test.subset(np.arange(64) < 2)
    bad.c = np.array([0.0, 1.0])  # no servers: not a well-defined float test, the arrays
    assert load_bisection._FewEntries.of(bad) is None


def test_p99_check_of_a_few_rows_is_the_arrays():
    from disagg_decider.calc.queues.p99_check import p99_of_sum_within

    rate, servers, mean_ms, scv, nodes = _pools(5, 240)
    p99 = queueing.p99_of_sum_ms(rate, servers, mean_ms, scv, nodes)  # the array loop
    rng = np.random.default_rng(6)
    limit = np.where(np.isfinite(p99), p99, 1e3) * rng.choice([0.5, 1.0, 1.000001, 2.0], 240)
    expected = p99 <= limit
    assert 0 < expected.sum() < expected.size
    taken = 0
    for size in (1, 2, 3, 5, 8, normal_quantiles.FEW_ROWS):
        for start in range(0, 240 - size, 7 * size):
            part = slice(start, start + size)

            def within(x, rows, limit=limit[part]):
                return x <= limit[rows]

            got = p99_of_sum_within(
                rate[part], servers[part], mean_ms[part], scv[part], nodes[part], within
            )
            assert np.array_equal(got, expected[part])
            taken += 1
    assert taken > 50


def test_load_test_below_one_skips_only_identities():
    """`_LoadTest.misses(rho, below_one=True)`: the clamps and selections it skips change
    nothing for loads up to 0.99 (the rounding bound in `_LoadTest.below_one`)."""
    rng = np.random.default_rng(7)
    _, servers, mean_ms, scv, nodes = _pools(7, 500)
    servers[:50] = rng.integers(1, 64, 50)  # larger pools too
    mean_ms[:20] = rng.uniform(1e-3, 1e-2, 20)  # fast service: a large capacity
    target = nodes[:, 0] + (nodes[:, -1] - nodes[:, 0]) * rng.uniform(-0.1, 3.0, 500)
    over = queueing.exceed_probability(nodes, target)
    test = load_bisection._LoadTest(servers, mean_ms, scv, nodes, target, over, (500,))
    assert test.below_one(0.95) and test.below_one(0.99) and not test.below_one(0.995)
    outcomes = set()
    with np.errstate(divide="ignore", invalid="ignore"):
        for rho in (0.0, 2.0**-17, 1e-3, 0.25, 0.5, 0.9, 0.95, 0.98, 0.99):
            loads = np.full(500, rho) * rng.uniform(0.5, 1.0, 500) if rho else np.zeros(500)
            expected = test.misses(loads)
            assert np.array_equal(test.misses(loads, below_one=True), expected)
            outcomes.update(expected.tolist())
    assert outcomes == {True, False}
    extreme = load_bisection._LoadTest(
        np.array([1.0, 2.0]), np.array([1e-120, 5.0]), 0.5, nodes[:2], target[:2], over[:2], (2,)
    )
    assert not extreme.below_one(0.95)  # outside the range the bound is argued for


def test_flat_position_pick_is_fancy_indexing():
    from disagg_decider.calc.queues import batch_edge

    rng = np.random.default_rng(8)
    for shape, k in (((), 5), ((1,), 1), ((7,), 15), ((4, 3), 25)):
        values = rng.random((*shape, k))
        index = rng.integers(0, k, shape)
        got, want = batch_edge._pick(values, index), batch_edge.pick(values, index)
        assert type(got) is type(want) and got.shape == want.shape
        assert _bits(got) == _bits(want)
        row = rng.random(k)  # broadcast along the leading axes
        got, want = batch_edge._pick(row, index), batch_edge.pick(row, index)
        assert type(got) is type(want) and got.shape == want.shape
        assert _bits(got) == _bits(want)


def test_flat_position_pick_of_one_index_per_row_is_fancy_indexing():
    """`_pick`'s path for a flat index (one per row, the callers' usual case), and `_pick_pair`'s
    two at once: small unsigned and int64 indices, rows read from a strided view and one row
    broadcast over all."""
    from disagg_decider.calc.queues import batch_edge

    rng = np.random.default_rng(9)
    for n, k in ((1, 1), (2, 15), (16, 15), (64, 25)):
        wide = rng.random((n, 2 * k))
        for values in (wide[:, :k].copy(), wide[:, ::2], rng.random((1, k)), rng.random(k)):
            for dtype in (np.uint8, np.int64):
                index = rng.integers(0, k, n).astype(dtype)
                got, want = batch_edge._pick(values, index), batch_edge.pick(values, index)
                assert type(got) is type(want) and got.shape == want.shape == (n,)
                assert got.dtype == want.dtype and _bits(got) == _bits(want)
                assert _bits(got) == _bits(np.broadcast_to(values, (n, k))[np.arange(n), index])
                other = rng.integers(0, k, n).astype(dtype)
                pair = batch_edge._pick_pair(values, index, other)
                assert [_bits(v) for v in pair] == [
                    _bits(want),
                    _bits(batch_edge.pick(values, other)),
                ]


def test_count_at_most_is_the_boolean_sum():
    from disagg_decider.calc.queues.array_helpers import count_at_most

    rng = np.random.default_rng(9)
    for shape, k in (((), 25), ((1,), 1), ((300,), 25), ((7, 5), 15), ((4,), 300)):
        values = rng.random((*shape, k))
        values[values < 0.05] = np.nan
        limits = rng.random(shape)
        got = count_at_most(values, limits)
        want = np.add.reduce(values <= limits[..., None], axis=-1)
        assert np.shape(got) == np.shape(want)
        assert np.array_equal(got, want)


def test_evaluate_without_headroom_keeps_every_other_field():
    """`colocated.evaluate(with_headroom=False)` (load placement) skips only the miss
    probability; every field it returns is the full evaluation's, bit for bit."""
    from disagg_decider import catalog
    from disagg_decider.calc.physics.step import Engine
    from disagg_decider.calc.replicas import colocated
    from disagg_decider.calc.replicas.decode import batch_grid
    from disagg_decider.calc.replicas.lengths import Lengths
    from disagg_decider.workload import Efficiency

    rng = np.random.default_rng(10)
    n = 12
    engine = Engine(
        catalog.get_model("llama-3.3-70b"),
        catalog.get_gpu("h200"),
        "fp8",
        "fp8",
        rng.choice([2, 4, 8], n)[:, None],
        Efficiency(),
    )
    lengths = Lengths.build(
        rng.uniform(200, 8000, n)[:, None],
        rng.uniform(0.2, 1.0, n)[:, None],
        rng.uniform(0.0, 0.5, n)[:, None],
        rng.uniform(50, 800, n)[:, None],
        rng.uniform(0.2, 1.0, n)[:, None],
    )
    at = colocated.lines(
        engine,
        lengths,
        rng.uniform(200, 3000, n)[:, None],
        rng.uniform(10, 80, n)[:, None],
        rng.choice([512, 2048, 8192], n)[:, None],
        rng.integers(1, 5, n)[:, None].astype(float),
    )
    batches = batch_grid(engine.eff.max_decode_batch)
    full = colocated.evaluate(at, batches)
    part = colocated.evaluate(at, batches, with_headroom=False)
    assert part.headroom is None and full.headroom is not None
    for name in ("rate_per_s", "tpot_p99_ms", "idle_ttft_ms", "idle_tpot_ms"):
        assert _bits(getattr(part, name)) == _bits(getattr(full, name)), name
