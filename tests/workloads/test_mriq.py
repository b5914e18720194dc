"""mriq: Q equals the direct complex128 sum, chunk by chunk, to float32 tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from buddylib.workloads import get
from buddylib.workloads.hpc.mriq import MRIQ


def test_q_matches_direct_sum_after_every_chunk() -> None:
    w = MRIQ()
    w.setup_problem(14, 3000, np.random.default_rng(0), chunk=512)  # 2744 voxels, 6 chunks (the last partial)
    assert w.n_steps == 6
    total = float(w.phiMag.astype(np.float64).sum())
    for _ in range(w.n_steps):
        w.step()
        ref = w.reference()
        q = w.Qr.astype(np.float64) + 1j * w.Qi.astype(np.float64)
        # float32 data and sums: within a few float32 ulps of sum |phi|^2
        assert np.abs(q - ref).max() < 5e-7 * total
    assert w.done == 3000
    assert np.abs(ref).std() > 0.01 * total  # Q has structure: the check is not of a constant
    assert np.abs(ref.imag).max() > 0.01 * total  # centre-out spokes: Q is complex, so sin is checked too


def test_origin_voxel_and_phi_magnitude() -> None:
    w = MRIQ()
    w.setup_problem(10, 2048, np.random.default_rng(1))
    np.testing.assert_allclose(w.phiMag, w.phiR**2 + w.phiI**2, rtol=1e-6)
    assert np.all(np.abs(w.kVals[:, :3]) <= w.side / 2 + 1e-3)  # up to the grid's Nyquist limit
    for _ in range(w.n_steps):
        w.step()
    origin = np.flatnonzero((w.x == 0) & (w.y == 0) & (w.z == 0))
    assert origin.size == 1
    # exp(0) = 1 for every sample: Q(0) = sum |phi|^2, and it is the largest |Q|
    assert w.Qr[origin[0]] == pytest.approx(float(w.phiMag.astype(np.float64).sum()), rel=1e-5)
    assert abs(w.Qi[origin[0]]) < 1e-5 * w.Qr[origin[0]]
    assert np.abs(w.Qr + 1j * w.Qi).max() <= w.Qr[origin[0]] * (1 + 1e-5)


def test_quick_run_outputs_fill_in() -> None:
    run = get("mriq").run("quick", compressors=["bpc32"], keep_bytes=True)
    w = run.workload
    assert w.chunk == 1024 and w.n_steps == 8
    first = {a.name: a for a in run.snapshots[0].allocations}
    last = {a.name: a for a in run.snapshots[-1].allocations}
    assert set(last) == {"x", "y", "z", "phiR", "phiI", "phiMag", "kVals", "Qr", "Qi"}
    assert all(a.dtype == "float32" for a in last.values())
    assert first["Qr"].sectors["bpc32"].max() == 0 and first["Qi"].sectors["bpc32"].max() == 0  # zeroed outputs
    assert last["Qr"].sectors["bpc32"].mean() > 2  # filled with full-mantissa sums
    # a sample of voxels against the direct sum over the whole of k-space
    idx = np.random.default_rng(0).choice(w.x.size, 200, replace=False)
    ref = w.reference(idx)
    total = float(w.phiMag.astype(np.float64).sum())
    assert np.abs(w.Qr[idx] + 1j * w.Qi[idx] - ref).max() < 5e-7 * total
