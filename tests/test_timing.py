"""Timing model against cases solvable by hand (SPEC §4)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from buddylib.snapshot import Allocation, Snapshot
from buddylib.timing import LINKS, Params, Workset, gpu, link, sweep, traffic, um_slowdown
from buddylib.timing.caches import merge_order, metadata_hits, page_faults, page_sequence, set_associative_hits
from buddylib.timing.model import _metadata_misses, kernel_times, targets_for
from buddylib.workloads import Access, AccessProfile, Kernel

E = 1 << 14  # entries (2 MiB)
V100, NVLINK2 = gpu("V100-32GB"), link("NVLink2")


def workset(sectors: int | np.ndarray, flops: float = 0.0, pattern: str = "stream") -> Workset:
    """One float64 allocation of E entries with the given sectors, read by one kernel."""
    s = np.broadcast_to(np.asarray(sectors, np.uint8), (E,)).copy()
    a = Allocation(name="x", kind="field", dtype="float64", shape=(E * 16,), nbytes=E * 128, sectors={"bpc32": s})
    prof = AccessProfile("toy", [Kernel("k", [Access("x", "read", pattern)], flops)])
    return Workset("toy", [Snapshot("toy", [a])], prof)


def test_all_compressible_saves_device_traffic_and_needs_no_link() -> None:
    ws = workset(1)  # every entry compresses to one sector
    tr = traffic(ws, {"x": 4.0})
    assert tr["link_bytes"].sum() == 0
    assert tr["baseline_bytes"].sum() == E * 128
    assert 1 - tr["device_bytes"].sum() / tr["baseline_bytes"].sum() == pytest.approx(0.75)  # the sector saving


def test_incompressible_at_target_2_moves_half_over_the_link() -> None:
    ws = workset(4)
    tr = traffic(ws, {"x": 2.0})
    assert tr["link_bytes"].sum() == E * 128 / 2
    assert tr["device_bytes"].sum() == E * 128 / 2
    # memory bound: baseline E*128 B / 900 GB/s; Buddy max(E*64 / 900 GB/s, E*64 / 150 GB/s) + latency
    base, buddy = kernel_times(tr, np.zeros(1), V100, NVLINK2, Params(), V100.fp64_flops)
    on_paper = (E * 64 / NVLINK2.bandwidth + NVLINK2.latency) / (E * 128 / V100.hbm_bandwidth)
    assert buddy.sum() / base.sum() == pytest.approx(on_paper)


def test_compute_bound_kernel_does_not_slow() -> None:
    ws = workset(1, flops=1e12)
    base, buddy = kernel_times(traffic(ws, {"x": 4.0}), np.zeros(1), V100, NVLINK2, Params(), V100.fp64_flops)
    assert buddy.sum() == base.sum()


def test_little_law_caps_link_bandwidth() -> None:
    tr = traffic(workset(4), {"x": 2.0})
    few = Params(outstanding=16)  # 16 x 32 B per 0.7 us = 0.73 GB/s, far below NVLink2
    _, slow = kernel_times(tr, np.zeros(1), V100, NVLINK2, few, V100.fp64_flops)
    assert slow.sum() == pytest.approx(E * 64 / (16 * 32 / NVLINK2.latency) + NVLINK2.latency)


def test_metadata_cache_hit_rates() -> None:
    p = Params(metadata_cache_bytes=4096)  # the stream's 8 KiB of metadata does not fit: steady state
    stream = _metadata_misses(workset(1), p).sum()
    assert 1 - stream / E == pytest.approx(1 - 1 / p.entries_per_metadata_line)
    # random entries over a footprint whose metadata (E / 64 lines x 32 B = 8 KiB) dwarfs a 1 KiB cache
    rnd = _metadata_misses(workset(1, pattern="random"), Params(metadata_cache_bytes=1024)).sum()
    assert 1 - rnd / E < 0.2
    lines = np.arange(10_000) // 4  # 4 accesses per line, pure stream
    assert set_associative_hits(lines, 4096, 32, 8) == 10_000 - 2_500


def _lru_hits(lines: list[int], n_sets: int, ways: int) -> int:
    """The set-associative LRU by the book: each set an ordered list, most recent last."""
    sets: list[list[int]] = [[] for _ in range(n_sets)]
    hits = 0
    for line in lines:
        s = sets[line % n_sets]
        if line in s:
            hits += 1
            s.remove(line)
        elif len(s) == ways:
            s.pop(0)
        s.append(line)
    return hits


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), max_size=60), min_size=1, max_size=4),
       st.sampled_from([(1024, 32, 2), (768, 32, 8), (4096, 64, 4)]), st.integers(1, 70))
def test_compiled_replays_are_the_textbook_ones(streams, cache, per_line) -> None:
    """The streams' merge is the stable sort by (i + 1/2) / n; the metadata cache's hits those of a plain LRU
    over the lines, counted in the second replay; the pages each kernel touches, repeats dropped."""
    sizes = np.array([len(x) for x in streams])
    order = merge_order(sizes)
    times = np.concatenate([(np.arange(n) + 0.5) / n for n in sizes])
    assert order.tolist() == np.argsort(times, kind="stable").tolist()
    first = np.array([0, 3, 7, 20])
    which = np.concatenate([np.full(n, i, np.int32) for i, n in enumerate(sizes)])[order]
    entry = np.concatenate([np.asarray(x, np.int64) for x in streams] + [np.zeros(0, np.int64)])[order]
    bounds = np.array([entry.size // 2, entry.size])  # two kernels
    lines = (first[which] + entry // per_line).tolist()
    size, line_bytes, ways = cache
    hits = metadata_hits(which, entry, first, per_line, bounds, size, line_bytes, ways)
    n_sets = size // line_bytes // ways
    twice = _lru_hits(lines + lines, n_sets, ways) - _lru_hits(lines, n_sets, ways)
    assert hits.sum() == twice
    pages = (first[which] + entry * 128 // (per_line * 64)).tolist()
    expected = [p for lo, hi in [(0, bounds[0]), (bounds[0], bounds[1])]
                for i, p in enumerate(pages[lo:hi]) if i == 0 or p != pages[lo + i - 1]]
    assert page_sequence(which, entry, bounds, first, 128, per_line * 64).tolist() == expected


def test_unified_memory_thrashes_on_cyclic_sweep() -> None:
    capacity = 100
    sweep_pages = np.tile(np.arange(2 * capacity), 3)  # cyclic over twice the capacity, LRU
    assert page_faults(sweep_pages, capacity) == sweep_pages.size  # every access faults
    assert page_faults(np.tile(np.arange(capacity), 3), capacity, warm_start=capacity) == 0  # fits: no faults
    ws = workset(4)
    slow, faults = um_slowdown(ws, 2.0, V100, NVLINK2, Params())
    assert faults == E * 128 // Params().um_page_bytes  # every page of the sweep faults each iteration
    assert slow > 10


def test_sweep_dataset() -> None:
    ws = workset(np.r_[np.ones(E // 2), 4 * np.ones(E // 2)].astype(np.uint8))
    ds = sweep(ws, links=["PCIe3-x16", "NVLink2", "NVLink-C2C"], thresholds=[0.0, 0.5],
               latency_scales=[1, 4], metadata_cache_bytes=[4096, 65536])
    s = ds.slowdown.sel(gpu="V100-32GB", latency_scale=1, metadata_cache_bytes=65536)
    assert (s.sel(threshold=0.0) <= 1.0).all()  # target 1/compressed reads only save bandwidth
    faster = s.sel(threshold=0.5).values
    assert faster[0] > faster[1] > faster[2]  # a faster link slows less
    assert ds.slowdown.dims == ("gpu", "link", "threshold", "latency_scale", "metadata_cache_bytes", "outstanding",
                                "bandwidth_credit")
    assert ds.slowdown.attrs["units"] == "1"
    with pytest.raises(ValueError, match="unknown link preset"):
        sweep(ws, links=["NVLink9"])


def test_gather_rows_land_on_their_entries() -> None:
    from buddylib.timing.model import _entries

    # atom j of an (N, 3) float64 array sits at bytes 24 j .. 24 j + 23 of its 128-byte entries
    alloc = Allocation(name="pos", dtype="float64", shape=(64, 3), nbytes=64 * 24)
    idx = {"nbr": np.array([0, 5, 6, 60])}
    acc = Access("pos", "read", "gather", index="nbr", row=3)
    got = _entries(acc, alloc, {}, idx, np.random.default_rng(0)).tolist()
    # atom 0 -> entry 0; atom 5 (bytes 120..143) straddles 0 and 1; atom 6 (144..167) -> 1; atom 60 -> 11
    assert got == [0, 1, 11]
    # an embedding row of 80 float32 (320 bytes) spans three entries, every one of them read
    table = Allocation(name="emb", dtype="float32", shape=(16, 80), nbytes=16 * 320)
    rows = _entries(Access("emb", "read", "gather", index="tok", row=80), table, {}, {"tok": np.array([0, 4, 1])},
                    np.random.default_rng(0)).tolist()
    assert rows == [0, 1, 2, 10, 11, 12, 2, 3, 4]  # row 4: bytes 1280..1599; row 1: 320..639


def test_requests_in_flight_are_swept() -> None:
    """Fewer outstanding requests cap the link (Little's law) and slow a link-bound kernel; beyond the
    bandwidth-delay product (150 GB/s x 0.7 us / 32 B = 3,281) more change nothing."""
    ws = workset(4)
    ds = sweep(ws, thresholds=[1.0], outstanding=[16, 1024, 5120, 20480])
    s = ds.slowdown.sel(gpu="V100-32GB", link="NVLink2", threshold=1.0, latency_scale=1.0).squeeze().values
    assert s[0] > s[1] > s[2] == s[3]
    tr = traffic(ws, targets_for(ws, [1.0])[0])  # every entry at target 4: three sectors of four over the link
    few = Params(outstanding=16)
    _, by_hand = kernel_times(tr, _metadata_misses(ws, few), V100, NVLINK2, few, V100.fp64_flops)
    assert ds.buddy_seconds.squeeze().values[0] == pytest.approx(by_hand.sum())
    with pytest.raises(ValueError, match="at least one link request"):
        sweep(ws, outstanding=[0])


def test_unknown_dtype_and_stray_gather_indices_are_errors() -> None:
    from buddylib.timing.model import _entries, _itemsize

    raw = Allocation(name="blob", dtype="float4_e2m1", shape=(8,), nbytes=128)
    with pytest.raises(ValueError, match="'blob': dtype 'float4_e2m1' has no known element size"):
        _entries(Access("blob", "read", "strided", stride=2), raw, {}, {}, np.random.default_rng(0))
    # every small float numpy does not know has its width in its name (ml_dtypes' and torch's spellings)
    for name, size in (("bfloat16", 2), ("float8_e4m3", 1), ("float8_e4m3fn", 1), ("float8_e5m2fnuz", 1)):
        assert _itemsize(Allocation(name="q", dtype=name, shape=(256,), nbytes=256 * size)) == size
    pos = Allocation(name="pos", dtype="float64", shape=(64, 3), nbytes=64 * 24)
    for bad in (np.array([0, 64]), np.array([-1, 3])):  # past the last row, or a negative one
        with pytest.raises(ValueError, match=r"gather of 'pos' through 'nbr': 1 of 2 indices .* 64 rows"):
            _entries(Access("pos", "read", "gather", index="nbr", row=3), pos, {}, {"nbr": bad},
                     np.random.default_rng(0))


def test_every_preset_value_has_a_source_or_says_it_is_an_assumption() -> None:
    from buddylib.timing.hardware import GPUS, LINKS

    assert all(g.source for g in GPUS.values())
    for lk in LINKS.values():
        assert lk.source and lk.latency_source.startswith("assumption: ")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.floats(0, 1e7), st.integers(0, 10)), min_size=1, max_size=8),
       st.sampled_from([1.0, 4 / 3, 2.0, 4.0]), st.sampled_from(list(LINKS)), st.floats(0.1, 10),
       st.integers(1, 20000))
def test_without_bandwidth_credit_buddy_never_beats_the_ideal_gpu(kernels, target, link_name, scale, flight) -> None:
    """Property: every accessed entry costing its uncompressed bytes, overflow, metadata misses and link latency
    can only add time, whatever the sectors, target, link, latency or requests in flight."""
    sizes = np.array([k[0] for k in kernels])
    entries = np.array([k[2] for k in kernels], float)
    share = 128 / target
    tr = {"baseline_bytes": 128 * entries, "device_bytes": entries * np.minimum(32 * sizes, share),
          "link_bytes": entries * np.maximum(32 * sizes - share, 0), "flops": np.array([k[1] for k in kernels])}
    misses = np.array([k[2] % 3 for k in kernels], float)
    base, buddy = kernel_times(tr, misses, V100, link(link_name), Params(), V100.fp32_flops, scale, flight, False)
    assert (buddy >= base).all()
    _, credited = kernel_times(tr, misses, V100, link(link_name), Params(), V100.fp32_flops, scale, flight, True)
    assert (credited <= buddy).all()  # the credit only ever removes HBM bytes


def test_no_fixture_workload_beats_the_ideal_gpu_without_credit() -> None:
    """The same property on every committed workload, over the whole sweep."""
    from buddylib import workloads
    from buddylib.studies import experiments, fixtures

    names = [n for s in fixtures.SUITES for n in workloads.names(s)]
    slow = experiments.slowdowns(names, "quick", data=fixtures.FOLDER, progress=False).slowdown
    assert float(slow.sel(bandwidth_credit=False).min()) >= 1.0
    assert float(slow.sel(bandwidth_credit=True).min()) < 1.0  # with the credit, some do
