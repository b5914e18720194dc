"""Notebook 10's arithmetic (:mod:`buddylib.studies.llm`) on small hand-made numbers: the capacity question and the
kernel-scale replay of the timing model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr

from buddylib.snapshot import Allocation, Snapshot
from buddylib.studies import llm, llm_measure
from buddylib.timing import gpu
from buddylib.workloads import Access, AccessProfile, Kernel


def _study(slow_ebo: list[float], weights: float = 1.25, kv: float = 1.5) -> xr.Dataset:
    """A study result holding only what :func:`llm.capacity` reads: effective ratios per group (every code the
    same on a group), and decode slowdowns (bpc codes never within any budget; EBO's per threshold)."""
    groups = [g for g, *_ in llm.GROUPS]
    comps, thr = list(llm.COMPRESSORS), list(llm.THRESHOLDS)
    eff = np.ones((len(groups), len(comps), len(thr)))
    eff[0], eff[2] = weights, kv
    slow = np.full((1, len(comps), len(llm.CAPACITY_GPUS), len(thr), 2), 2.0)
    slow[0, comps.index("ebo-bf16"), :, :, 0] = slow_ebo
    return xr.Dataset({
        "effective_ratio": (("group", "compressor", "threshold"), eff),
        "decode_slowdown": (("kernel_scale", "compressor", "gpu", "threshold", "bandwidth_credit"), slow),
    }, coords={"group": groups, "compressor": comps, "threshold": thr, "kernel_scale": [16],
               "gpu": [g for g, _ in llm.CAPACITY_GPUS], "bandwidth_credit": [False, True]})


def test_capacity_counts_sequences_beside_the_compressed_weights() -> None:
    ds = _study([1.01, 1.015, 1.03, 1.04])
    cap = llm.capacity(ds, budget=0.02, context=1000)
    c = llm.LLAMA2_7B
    weights, per_seq = 2 * c["params"], 2 * c["layers"] * c["kv_heads"] * c["head_dim"] * 2 * 1000
    for g, _ in llm.CAPACITY_GPUS:
        mem = gpu(g).capacity
        base = cap.loc[(g, "none")]
        assert base.sequences == math.floor((mem - weights) / per_seq) and base.gain == 1.0
        ebo = cap.loc[(g, "ebo-bf16")]
        assert ebo.threshold == 0.2  # the most aggressive threshold within 2%
        assert ebo.sequences == math.floor((mem - weights / 1.25) / (per_seq / 1.5))
        assert ebo.gain == pytest.approx(ebo.sequences / base.sequences)
        assert (g, "bpc32") not in cap.index  # never within the budget: no row


def test_capacity_with_no_code_within_budget_is_the_uncompressed_answer_alone() -> None:
    cap = llm.capacity(_study([1.5] * 4), budget=0.02)
    assert list(cap.index.get_level_values("compressor")) == ["none"] * len(llm.CAPACITY_GPUS)


def test_kernel_scale_repeats_every_kernels_bytes_and_flops() -> None:
    a = Allocation.from_array("w", np.arange(64, dtype=np.float32), kind="weights")
    a.sectors = {"bpc32": np.array([4, 4], np.uint8)}
    snap = Snapshot("t", [a])
    prof = AccessProfile("t", [Kernel("k", [Access("w", "read", fraction=0.5)], 10.0)])
    allocs, rep = llm_measure._repeated(snap, prof, 3)
    assert [x.name for x in allocs] == ["w#0", "w#1", "w#2"] and all(x.sectors is a.sectors for x in allocs)
    (k,) = rep.kernels
    assert k.flops == 30.0 and [(x.allocation, x.fraction) for x in k.accesses] == [(f"w#{i}", 0.5) for i in range(3)]
    assert llm_measure._repeated(snap, prof, 1) == (snap.allocations, prof)


def test_entry_sectors_generalise_ebo_to_bigger_entries_and_finer_sectors() -> None:
    """EBO's length for 128-, 256- and 512-byte entries (as many values, a mask of as many bits) in 32- and 16-byte
    sectors: the module docstring's formula, raw where longer than the entry, 0 for an all-zero entry; at 128 and
    32 bytes the registered code's sectors."""
    from buddylib import compressors
    from buddylib.compressors.ebo import entry_sectors

    ones = np.full(256, 0x3F80, np.uint16)  # 1.0 in bf16: z = 0, k = 0, 8 bits a value
    assert entry_sectors(ones, "bf16", 256, 32).tolist() == [-(-(1 + 8 + 3 + 128 * 8) // 256)] * 2  # 5 of 8
    assert entry_sectors(ones, "bf16", 512, 16).tolist() == [-(-(1 + 8 + 3 + 256 * 8) // 128)]  # 17 of 32
    assert entry_sectors(np.zeros(300, np.uint16), "bf16", 512, 16).tolist() == [0, 0]  # padded to whole entries
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 1 << 16, 4096, dtype=np.uint16)
    assert (entry_sectors(noise, "bf16", 256, 16) == 16).all()  # raw: longer than the entry
    w = (rng.standard_normal(8192).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    assert np.array_equal(entry_sectors(w, "bf16", 128, 32), compressors.sectors(w, "ebo-bf16"))
    f8 = rng.integers(0, 256, 8192, dtype=np.uint8)
    assert np.array_equal(entry_sectors(f8, "e4m3", 128, 32), compressors.sectors(f8, "ebo-e4m3"))


def _gather_workset() -> tuple:
    """A hand-made step: one bf16 table of 4 KiB read whole, then 3 of its 64-element rows gathered."""
    from buddylib.timing import Workset

    rng = np.random.default_rng(1)
    w = (rng.standard_normal(2048).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    a = Allocation("w", kind="weights", dtype="bfloat16", shape=(32, 64), nbytes=w.nbytes, data=w)
    prof = AccessProfile("t", [Kernel("stream", [Access("w")], 1e3),
                               Kernel("gather", [Access("w", "read", "gather", index="rows", row=64)], 1e3)])
    return Workset("t", [Snapshot("t", [a])], prof, {"rows": np.array([1, 2, 17])}, "ebo-bf16"), w


def test_entry_traffic_at_128_and_32_bytes_is_the_timing_models() -> None:
    from buddylib.compressors.ebo import entry_sectors
    from buddylib.timing import Params, model

    ws, w = _gather_workset()
    s = entry_sectors(w, "bf16", 128, 32)
    ws.last.allocations[0].sectors = {"ebo-bf16": s.astype(np.uint8)}
    for held in (1, 2, 3, 4):
        ours = llm_measure.entry_traffic(ws, {"w": s}, {"w": held}, 128, 32)
        theirs = model.traffic(ws, {"w": 4 / held})
        for k in ("baseline_bytes", "device_bytes", "link_bytes", "flops"):
            assert np.array_equal(ours[k], theirs[k]), (held, k)
        assert np.array_equal(ours["device_bytes_uncredited"], theirs["baseline_bytes"])
    assert np.array_equal(llm_measure.entry_metadata_misses(ws, 128, 32, Params()),
                          model._metadata_misses(ws, Params()))


def test_a_bigger_entry_moves_the_whole_compressed_entry_for_any_block_of_it() -> None:
    """Rows 1 and 2 (128 bytes each) share a 512-byte entry, row 17 has one alone: 2 entries touched for 3 blocks
    needed, each moving all its sectors."""
    from buddylib.compressors.ebo import entry_sectors

    ws, w = _gather_workset()
    s = entry_sectors(w, "bf16", 512, 16)
    held = int(s.max())  # nothing overflows
    tr = llm_measure.entry_traffic(ws, {"w": s}, {"w": held}, 512, 16)
    assert tr["baseline_bytes"][1] == 3 * 128 and tr["link_bytes"][1] == 0
    assert tr["device_bytes"][1] == 16 * (s[0] + s[4])  # rows 1, 2 in entry 0; row 17 in entry 4
    assert tr["device_bytes_uncredited"][1] == max(16 * s[0], 256) + max(16 * s[4], 128)
    assert tr["device_bytes"][0] == 16 * s.sum() and tr["baseline_bytes"][0] == w.nbytes  # a stream: no over-fetch
    tr = llm_measure.entry_traffic(ws, {"w": s}, {"w": 10}, 512, 16)
    assert tr["link_bytes"][1] == 16 * (max(s[0] - 10, 0) + max(s[4] - 10, 0)) > 0


def test_held_sectors_is_the_fewest_that_overflow_at_most_the_threshold() -> None:
    s = np.array([0, 1, 2, 2, 3, 4, 4, 4, 4, 4])
    assert llm_measure.held_sectors(s, 4, 0.5) == 3  # 5 above 2, 5 above 3: 50% allowed
    assert llm_measure.held_sectors(s, 4, 0.0) == 4 and llm_measure.held_sectors(s, 4, 1.0) == 1
    assert [llm_measure.metadata_bits(n) for n in (4, 8, 16, 32)] == [4, 5, 6, 7]


def test_decode_workset_gathers_the_rows_a_decode_step_touches() -> None:
    """Each sequence reads its next token's row of each embedding table (128-byte rows here: one entry each) and
    appends one 64-byte row to every head's cache at its last position; the weights' and cache's reads stay
    whole, and ``k`` copies repeat it all."""
    b, heads, t, hd, hidden = 2, 3, 5, 32, 64

    def bf16(name: str, shape: tuple[int, ...], kind: str = "weights") -> Allocation:
        data = np.zeros(shape, np.uint16)
        return Allocation(name, kind=kind, dtype="bfloat16", shape=shape, nbytes=data.nbytes, data=data)

    ids = np.array([[101, 7, 9, 102], [101, 11, 13, 102]], np.int64)
    snap = Snapshot("minilm_kv", [
        bf16("embeddings.word_embeddings.weight", (20, hidden)), bf16("embeddings.position_embeddings.weight",
                                                                       (8, hidden)),
        bf16("embeddings.token_type_embeddings.weight", (2, hidden)), bf16("w", (hidden, hidden)),
        Allocation.from_array("input_ids", ids, kind="input"), bf16("kv.key", (b, heads, t, hd), "kv_cache")])
    prof = AccessProfile("minilm_kv", [
        Kernel("decode.embeddings", [Access(n, "read") for n in ("embeddings.word_embeddings.weight",
                                                                 "embeddings.position_embeddings.weight",
                                                                 "embeddings.token_type_embeddings.weight")], 1.0),
        Kernel("decode.layer", [Access("w"), Access("kv.key"), Access("kv.key", "write", fraction=1 / t)], 2.0)])
    ws = llm_measure.decode_workset(snap, prof)
    words, pos, types = [e.tolist() for _, e, _ in ws.streams()[0]]
    assert words == [9, 13] and pos == [t] and types == [0]  # the last text tokens' rows, position t, type 0
    (_, w, _), (_, read, _), (_, append, _) = ws.streams()[1]
    assert w.size == hidden * hidden * 2 // 128 and read.size == b * heads * t * hd * 2 // 128
    assert append.tolist() == [(s * t + t - 1) * hd * 2 // 128 for s in range(b * heads)]
    assert [k.flops for k in ws.profile.kernels] == [1.0, 2.0]
    wide = llm_measure.decode_workset(snap, prof, 3)
    assert len(wide.last.allocations) == 3 * len(snap.allocations) and wide.profile.kernels[1].flops == 6.0
