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
