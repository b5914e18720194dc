"""ilbdc: mass conservation, and the sparse indirect solver against a dense D3Q19 reference."""

from __future__ import annotations

import numpy as np

from buddylib.workloads import get
from buddylib.workloads.hpc import _d3q19 as d3q19
from buddylib.workloads.hpc.ilbdc import FORCE, LAMBDA_E, LAMBDA_O, SOLID_FRACTION


def test_mass_is_conserved_and_the_force_drives_flow() -> None:
    w = get("ilbdc")
    w.setup(3 << 20, np.random.default_rng(4))
    assert SOLID_FRACTION <= w.solid.mean() < SOLID_FRACTION + 0.05  # a real porous medium
    m0 = w.mass()
    assert abs(m0 - w.n_fluid) < 1e-12 * m0  # at rest: density 1 in every fluid cell
    for _ in range(5):
        for _ in range(40):
            w.step()
        assert abs(w.mass() - m0) <= 1e-12 * m0
    p = w.momentum()
    # the body force injects n_fluid * F per step; the walls of the pores take some of it away
    assert 0.02 * 200 * FORCE[0] * w.n_fluid < p[0] < 200 * FORCE[0] * w.n_fluid
    assert abs(p[1]) < 0.2 * p[0] and abs(p[2]) < 0.2 * p[0]
    # far from equilibrium too (a smooth flow hides a wrong bounce-back: its wall flux is ~0)
    rng = np.random.default_rng(1)
    w.pdf_src[:] = d3q19.W[:, None] * (1 + 0.3 * rng.standard_normal(w.pdf_src.shape))
    m1 = w.mass()
    for _ in range(20):
        w.step()
        assert abs(w.mass() - m1) <= 1e-12 * m1


def test_adjacency_encodes_streaming_and_bounce_back() -> None:
    w = get("ilbdc")
    w.setup(3 << 20, np.random.default_rng(0))
    adj, n = w.adjacency, w.n_fluid
    assert adj.dtype == np.int32 and adj.shape == (19, n)
    assert w.pdf_src.dtype == np.float64 and w.pdf_src.shape == (19, n)
    own = np.arange(n)
    np.testing.assert_array_equal(adj[0], own)  # the rest population stays put
    row, cell = np.divmod(adj.astype(np.int64), n)
    bounce = row != np.arange(19)[:, None]
    np.testing.assert_array_equal(row[bounce], np.broadcast_to(d3q19.OPP[:, None], adj.shape)[bounce])
    np.testing.assert_array_equal(cell[bounce], np.broadcast_to(own, adj.shape)[bounce])
    assert 0.05 < bounce.mean() < 0.5  # plenty of solid walls
    # streaming entries point one lattice step upstream (periodic box)
    coords = np.argwhere(~w.solid)  # (z, y, x) of each fluid cell, in list order
    c_zyx = d3q19.C[:, ::-1]
    up = (coords[None, :, :] - c_zyx[:, None, :]) % np.array(w.solid.shape)
    np.testing.assert_array_equal(coords[cell[~bounce]], up[~bounce])
    # every value of the old array is read exactly once: the gather is a permutation
    np.testing.assert_array_equal(np.sort(adj.reshape(-1)), np.arange(19 * n))


def _dense_step(f: np.ndarray, solid: np.ndarray) -> np.ndarray:
    """One pull-stream + TRT step on the full periodic grid, half-way bounce-back at solid cells."""
    g = np.empty_like(f)
    for i in range(19):
        shift = (d3q19.CZ[i], d3q19.CY[i], d3q19.CX[i])
        g[i] = np.roll(f[i], shift, axis=(0, 1, 2))
        blocked = np.roll(solid, shift, axis=(0, 1, 2))
        g[i][blocked] = f[d3q19.OPP[i]][blocked]
    g[:, solid] = d3q19.W[:, None]  # placeholder density in solids, zeroed below
    rho, j, _ = d3q19.moments(g)
    feq = d3q19.equilibrium(rho, j / rho)
    even, odd = 0.5 * (g + g[d3q19.OPP]), 0.5 * (g - g[d3q19.OPP])
    eq_even, eq_odd = 0.5 * (feq + feq[d3q19.OPP]), 0.5 * (feq - feq[d3q19.OPP])
    force = 3 * d3q19.W * (d3q19.C.astype(np.float64) @ np.array(FORCE))
    out = g - LAMBDA_E * (even - eq_even) - LAMBDA_O * (odd - eq_odd) + force[:, None, None, None]
    out[:, solid] = 0.0
    return out


def test_sparse_solver_equals_dense_reference() -> None:
    rng = np.random.default_rng(7)
    solid = rng.random((6, 7, 9)) < 0.3  # a non-cubic box catches swapped axes
    w = get("ilbdc")
    w.setup_geometry(solid)
    w.pdf_src[:] = d3q19.W[:, None] * (1 + 0.3 * rng.standard_normal(w.pdf_src.shape))  # far from equilibrium
    dense = np.zeros((19, *solid.shape))
    dense[:, ~solid] = w.pdf_src
    for _ in range(6):
        w.step()
        dense = _dense_step(dense, solid)
        np.testing.assert_allclose(w.pdf_src, dense[:, ~solid], rtol=1e-12, atol=1e-15)
    assert np.abs(dense[:, ~solid] - d3q19.W[:, None]).max() > 1e-3  # still far from rest: a real test
