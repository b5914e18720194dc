"""cg: NPB's matrix and zeta, a symmetric matrix with the NPB spectrum bounds, CG residuals that collapse."""

from __future__ import annotations

import numpy as np

from buddylib.workloads import get
from buddylib.workloads.hpc.cg import CG, CLASSES, NAS_TRAN, RCOND, makea


def _dense(w: CG) -> np.ndarray:
    m = np.zeros((w.n, w.n))
    rows = np.repeat(np.arange(w.n), np.diff(w.rowstr))
    m[rows, w.colidx] = w.a
    return m


def test_class_s_reproduces_npb_verification_value() -> None:
    na, nonzer, niter, shift, zeta_verify = CLASSES["S"]
    w = CG()
    w.init(na, nonzer, shift, NAS_TRAN)
    assert w.a.size == 78148  # NPB class S nonzeros
    for _ in range(niter):
        w.advance()
    assert abs(w.zeta - zeta_verify) / zeta_verify <= 1e-10  # NPB's own verification test


def test_matrix_is_symmetric_and_npb_spectrum_bounds_hold() -> None:
    w = CG()
    w.init(1000, 7, 10.0, tran=12345677)
    assert w.rowstr.dtype == np.int32 and w.colidx.dtype == np.int32 and w.a.dtype == np.float64
    assert w.rowstr[0] == 0 and w.rowstr[-1] == w.a.size and np.all(np.diff(w.rowstr) > 0)
    for j in range(w.n):  # columns sorted and unique within each row, the diagonal present
        cols = w.colidx[w.rowstr[j]:w.rowstr[j + 1]]
        assert np.all(np.diff(cols) > 0) and j in cols
    m = _dense(w)
    np.testing.assert_allclose(m, m.T, rtol=1e-14, atol=1e-15)
    shifted = m + w.shift * np.eye(w.n)  # sum of weighted outer products + rcond I
    eig = np.linalg.eigvalsh(shifted)
    assert eig[0] >= RCOND * (1 - 1e-9)  # positive definite, smallest eigenvalue bounded by rcond
    assert eig[-1] < w.shift  # -A is positive definite: the CG solve is well posed
    assert np.all(np.linalg.eigvalsh(-m) > 0)
    for _ in range(15):
        w.advance()
    # inverse power method: zeta -> shift + 1/(x.A^-1 x) = largest eigenvalue of A + shift I
    assert abs(w.zeta - eig[-1]) < 1e-8 * eig[-1]


def test_cg_residual_falls_by_orders_of_magnitude() -> None:
    w = CG()
    w.setup(3 << 20, np.random.default_rng(3))
    w.advance()
    h = w.history
    assert h[0] == np.sqrt(w.n)  # r = x = 1 at the start
    assert h[10] < 1e-4 * h[0] and h[-1] < 1e-11 * h[0]  # ten iterations: four orders; 25: eleven
    assert np.all(h[2:21] < 0.6 * h[1:20])  # a steady geometric fall
    assert w.rnorm < 1e-10 * h[0]  # explicit ||x - A z|| confirms the recursion
    x_before = w.x.copy()
    w.advance()
    assert np.isclose(np.linalg.norm(x_before), 1.0) and w.history[-1] < 1e-11


def test_same_seed_same_matrix_other_seed_other_matrix() -> None:
    _, c1, a1 = makea(500, 7, RCOND, 10.0, 99)
    _, c2, a2 = makea(500, 7, RCOND, 10.0, 99)
    assert np.array_equal(c1, c2) and np.array_equal(a1, a2)
    _, c3, _ = makea(500, 7, RCOND, 10.0, 101)
    assert c3.size != c1.size or not np.array_equal(c1, c3)


def test_snapshots_start_with_zero_vectors_and_profile_gathers_p() -> None:
    run = get("cg").run("quick", compressors=["bpc32"], keep_bytes=True)
    first = {a.name: np.asarray(a.data) for a in run.snapshots[0].allocations}
    last = {a.name: np.asarray(a.data) for a in run.snapshots[-1].allocations}
    assert np.all(first["x"] == 1.0) and not first["z"].any() and not first["p"].any()
    assert last["z"].any() and np.array_equal(first["colidx"], last["colidx"])
    spmv = [k for k in run.profile.kernels if k.name.startswith("spmv")]
    assert len(spmv) == 26
    assert any(a.pattern == "gather" and a.index == "colidx" and a.allocation == "p" for a in spmv[0].accesses)
