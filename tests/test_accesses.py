"""The timing model from a summary's compact accesses (buddylib.timing.accesses) against the per-entry replay."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from buddylib import regions
from buddylib.studies import fixtures
from buddylib.timing import accesses, caches, model
from buddylib.timing.hardware import gpu, link

#: Quick fixtures whose profiles hold every kind of access: random draws, gathers and prefix streams (md),
#: gathers through an index (cg, lulesh, biglstm's embedding), strided sweeps (minighost).
RUNS = ("md", "cg", "minighost", "biglstm")


def _both(name: str) -> tuple[model.Workset, accesses.Accesses]:
    ws = model.Workset.load(fixtures.FOLDER / f"{name}-quick-s0.nc")
    acc = accesses.Accesses.from_workset(ws)
    block, blob = acc.encode()
    kept = accesses.decode(block, blob, acc.name, acc.snapshots, acc.counts, acc.region_counts, acc.flops)
    return ws, kept


@pytest.mark.parametrize("name", RUNS)
def test_a_summarys_accesses_give_the_replays_slowdown(name: str) -> None:
    ws, kept = _both(name)
    grid = dict(thresholds=[0.1, 0.3, 0.5], bandwidth_credit=(False, True), metadata_cache_bytes=[4 << 10, 64 << 10])
    for gran in regions.GRANULARITIES:
        for rule in regions.RULES if gran else ["budget"]:
            for targets in ((1, 4 / 3, 2, 4), (1, 4 / 3, 2, 4, 8, 16)):
                a = model.sweep(ws, region=gran, rule=rule, targets=targets, **grid)
                b = model.sweep(kept, region=gran, rule=rule, targets=targets, **grid)
                # the same sums in another order: equal to far below the 0.1-point the issue asks
                np.testing.assert_allclose(b.slowdown, a.slowdown, rtol=1e-12, err_msg=f"{gran} {rule}")
                np.testing.assert_array_equal(b.metadata_hit_rate, a.metadata_hit_rate)
    for page in accesses.UM_PAGES:
        p = model.Params(um_page_bytes=page)
        assert model.um_slowdown(kept, 1.5, gpu("H100-80GB"), link("NVLink4"), p) == \
            model.um_slowdown(ws, 1.5, gpu("H100-80GB"), link("NVLink4"), p)


def test_what_is_not_kept_is_named() -> None:
    _, kept = _both("md")
    with pytest.raises(ValueError, match="metadata misses are kept for caches of"):
        model.sweep(kept, metadata_cache_bytes=[32 << 10])
    with pytest.raises(ValueError, match="Unified Memory is kept for pages of"):
        model.um_slowdown(kept, 1.5, gpu("H100-80GB"), link("NVLink4"), model.Params(um_page_bytes=8 << 10))


def test_a_damaged_block_is_refused() -> None:
    ws = model.Workset.load(fixtures.FOLDER / "md-quick-s0.nc")
    acc = accesses.Accesses.from_workset(ws)
    block, blob = acc.encode()
    args = (acc.name, acc.snapshots, acc.counts, acc.region_counts, acc.flops)
    with pytest.raises(ValueError, match="SHA-256 differs"):
        accesses.decode(block, blob[:-1] + bytes([blob[-1] ^ 1]), *args)
    with pytest.raises(ValueError, match="kernel or shape it does not have"):
        accesses.decode(block | {"terms": [[0, len(block["shapes"]), 1.0]]}, blob, *args)
    counts = next(i for i, s in enumerate(block["shapes"]) if s["kind"] == "counts")
    shapes = [dict(s) for s in block["shapes"]]
    shapes[counts]["offset"] = 1 << 40
    with pytest.raises(ValueError, match="outside their"):
        accesses.decode(block | {"shapes": shapes}, blob, *args)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 11), min_size=1, max_size=60), st.integers(1, 13), st.integers(0, 60))
@example(one=[0, 0, 1], capacity=1, cut=8)  # CI's find: a warm-up cut past the first copy
def test_stack_distances_in_parts_give_lrus_faults_at_every_capacity(one: list[int], capacity: int, cut: int) -> None:
    seq = np.array(one + one, np.int64)
    sd = caches.StackDistances(12)
    half = min(cut // 2, len(one))  # the warm-up is the first copy, split anywhere within it
    sd.run(seq[:half], count=False)  # warmed in two parts (latest times only, the tree rebuilt after)
    sd.run(seq[half:len(one)], count=False)
    sd.run(seq[len(one):len(one) + cut])  # fed in two parts, the window renumbered on the way
    sd.run(seq[len(one) + cut:])
    assert int(sd.hist[capacity:].sum()) == caches.page_faults(seq, capacity, warm_start=len(one))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=400), st.integers(0, 400))
def test_an_lru_fed_in_parts_gives_the_replays_hits(lines: list[int], cut: int) -> None:
    seq = np.array(lines, np.int64)
    want = caches.metadata_hits(np.zeros(seq.size, np.int32), seq, np.zeros(1, np.int64), 1, [cut, seq.size],
                                1024, 32, 4)  # twice, the second counted
    lru = caches.LineLRU(1024, 32, 4)
    lru.run(seq)
    assert [lru.run(seq[:cut]), lru.run(seq[cut:])] == [int(want[0]), int(want[1])]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 50), max_size=40), min_size=1, max_size=5), st.integers(1, 17))
def test_merged_streams_a_part_at_a_time_are_the_merge(streams: list[list[int]], part: int) -> None:
    """The walk's merge, ``part`` accesses at a time, is :func:`caches.merge` of the whole kernel."""
    arrays = [np.array(x, np.int64) for x in streams]
    sizes = np.array([a.size for a in arrays])
    which, entry = np.empty(sizes.sum(), np.int32), np.empty(sizes.sum(), np.int64)
    caches.merge(np.concatenate(arrays), sizes, np.arange(sizes.size), which, entry)
    merged = caches.MergedStreams(list(arrays), range(sizes.size))
    got = [merged.next(part) for _ in range(-(-int(sizes.sum()) // part))]
    assert merged.left == 0
    assert np.concatenate([w for w, _ in got] + [np.zeros(0, np.int32)]).tolist() == which.tolist()
    assert np.concatenate([e for _, e in got] + [np.zeros(0, np.int64)]).tolist() == entry.tolist()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=50), st.integers(1, 40), st.sampled_from([1, 2, 4, 8]),
       st.floats(0.0, 1.0), st.sampled_from([np.int32, np.int64, np.uint16]))
def test_a_compiled_gather_touches_the_rows_entries(rows: list[int], row: int, itemsize: int, fraction: float,
                                                    dtype: type) -> None:
    """Each row's entries (one or more, or straddling two), a repeat of the entry just touched dropped: the
    arithmetic written out in numpy; a row outside the allocation is an error naming how many."""
    idx = np.array(rows, dtype)
    n_items = 41 * row
    flat = idx.astype(np.int64)[:max(1, round(fraction * idx.size))]
    first = flat * row * itemsize // 128
    count = ((flat + 1) * row * itemsize - 1) // 128 - first + 1
    ids = np.concatenate([np.arange(f, f + c) for f, c in zip(first, count, strict=True)] + [np.zeros(0, int)])
    want = ids[np.r_[True, ids[1:] != ids[:-1]]] if ids.size else ids
    assert caches.gather_entries(idx, fraction, row, n_items, itemsize, 128).tolist() == want.tolist()
    if rows:
        with pytest.raises(ValueError, match=f"^{len(rows)} of {len(rows)} indices .* outside the 0 rows"):
            caches.gather_entries(idx, fraction, row, 0, itemsize, 128)
