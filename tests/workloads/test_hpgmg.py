"""hpgmg: V-cycles cut the residual by a steady factor; the solution converges at second order."""

from __future__ import annotations

import numpy as np

from buddylib.workloads import get
from buddylib.workloads.hpc.hpgmg import BOTTOM_VECTORS, HPGMG, VECTORS, allocation_names, evaluate_beta, exact_solution


def _solved(n: int, cycles: int) -> HPGMG:
    w = HPGMG()
    w.init(n)
    for _ in range(cycles):
        w.step()
    return w


def test_residual_falls_by_a_steady_factor_per_vcycle() -> None:
    w = HPGMG()
    w.setup(3 << 20, np.random.default_rng(0))
    assert w.sizes == [28, 14, 7]
    for _ in range(10):
        w.step()
    h = np.array(w.residual_history)  # max|f - Au| / max|f|, from 1 at u = 0
    factors = h[1:] / h[:-1]
    assert np.all(factors < 0.2), factors
    assert np.all(factors > 0.02)  # a multigrid rate, not an exact solve
    assert h[-1] < 1e-9


def test_converges_to_manufactured_solution_at_second_order() -> None:
    errors = [_solved(n, 10).error() for n in (16, 32, 64)]
    ratios = [errors[0] / errors[1], errors[1] / errors[2]]
    assert all(3.4 < r < 4.4 for r in ratios), ratios  # h^2: four-fold per halving
    assert abs(ratios[1] - 4) < abs(ratios[0] - 4)  # closing in on the asymptotic rate
    w = _solved(32, 10)
    more = _solved(32, 14)
    # ten V-cycles already leave only discretisation error: more cycles change nothing visible
    assert abs(w.error() - more.error()) < 1e-6 * w.error()


def test_coefficients_and_boundaries() -> None:
    w = HPGMG()
    w.init(16)
    fine = w.levels[0]
    b, *_ = evaluate_beta(np.array([0.5, 0.0]), np.array([0.5, 0.0]), np.array([0.5, 0.0]))
    assert b[0] < 1.1 and b[1] > 9.9  # HPGMG's beta: 1 at the centre, 10 at the corners
    assert fine["beta_i"][1:-1, 1:-1, 1:].min() >= 1.0 and fine["beta_i"].max() <= 10.0
    coarse = w.levels[1]
    # face restriction keeps the coefficient's range; D^-1 is positive inside and zero in the ghosts
    assert 1.0 <= coarse["beta_j"][1:-1, 1:, 1:-1].min() and coarse["beta_j"].max() <= 10.0
    assert np.all(fine["dinv"][1:-1, 1:-1, 1:-1] > 0) and not fine["dinv"][0].any()
    # e holds the inverse L1 row norm rebuild_operator_blackbox leaves there: 1/(1.5 A_ii) inside,
    # up to D^-1 where boundary faces make the diagonal dominant (corners)
    e, dinv = fine["e"][1:-1, 1:-1, 1:-1], fine["dinv"][1:-1, 1:-1, 1:-1]
    assert np.all(e <= dinv) and np.all(e[1:-1, 1:-1, 1:-1] < dinv[1:-1, 1:-1, 1:-1])
    np.testing.assert_allclose(e[1:-1, 1:-1, 1:-1], dinv[1:-1, 1:-1, 1:-1] / 1.5, rtol=1e-14)
    assert e[0, 0, 0] == dinv[0, 0, 0]
    # temp holds the blackbox's last probe until a residual overwrites it: 1 where the 1-based i, j, k are even
    probe = fine["temp"][1:-1, 1:-1, 1:-1]
    assert probe.sum() == 8**3 and probe[1::2, 1::2, 1::2].all()
    for _ in range(8):
        w.step()
    u = fine["u"]
    np.testing.assert_array_equal(u[0, 1:-1, 1:-1], -u[1, 1:-1, 1:-1])  # Dirichlet ghosts: u = 0 on the face
    assert w.error() < 0.01 * np.abs(exact_solution(16)).max()  # within 1% on a 16^3 grid already


def test_snapshots_start_at_zero_and_fill_in() -> None:
    run = get("hpgmg").run("quick", compressors=["bpc32"], keep_bytes=True)
    first = {a.name: np.asarray(a.data) for a in run.snapshots[0].allocations}
    last = {a.name: np.asarray(a.data) for a in run.snapshots[-1].allocations}
    assert not first["L0.u"].any() and not first["L1.u"].any() and not first["L1.r"].any()
    np.testing.assert_array_equal(first["L0.r"], first["L0.f"])  # MGSolve: R = F
    assert first["L1.f"].any() and first["L2.f"].any()  # the driver's f for its 2h and 4h solves
    assert last["L0.u"].any() and last["L1.r"].any() and last["L2.cg_r"].any() and last["L2.cg_z"].any()
    for lv in range(3):  # MGSolve never touches e: the L1 norms stay as MGBuild left them
        np.testing.assert_array_equal(first[f"L{lv}.e"], last[f"L{lv}.e"])
    assert all(a.dtype == np.float64 for a in first.values())
    names = [k.name for k in run.profile.kernels]
    assert names.count("gsrb L0") == 12 and "bottom_cg L2" in names and names[-1] == "norm L0"


def test_allocations_are_hpgmg_fvs_vectors_per_level() -> None:
    """Exactly the vectors HPGMG-FV's default build (fv2, GSRB, CG bottom solver, Poisson) allocates."""
    # defines.h without USE_HELMHOLTZ / USE_L1JACOBI, in its order: no alpha, no l1inv, no valid mask
    assert VECTORS == ("temp", "u", "f", "e", "r", "dinv", "beta_i", "beta_j", "beta_k")
    assert BOTTOM_VECTORS == ("cg_r0", "cg_r", "cg_p", "cg_Ap", "cg_z")  # solvers/cg.c: r0, r, p, Ap, z
    run = get("hpgmg").run("quick", compressors=["bpc32"], keep_bytes=True)
    sizes = run.workload.sizes
    assert sizes == [28, 14, 7]
    expected = [f"L{lv}.{v}" for lv in range(3) for v in VECTORS] + [f"L2.{v}" for v in BOTTOM_VECTORS]
    assert allocation_names(sizes) == expected
    for snap in run.snapshots:
        assert [a.name for a in snap.allocations] == expected
        for a in snap.allocations:
            s = sizes[int(a.name[1:a.name.index(".")])]
            data = np.asarray(a.data)
            assert data.shape == (s + 2,) * 3 and data.dtype == np.float64 and a.kind == "field"
