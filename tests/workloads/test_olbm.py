"""olbm: mass conservation with bounce-back, equilibrium moments, and the kernel against numpy."""

from __future__ import annotations

import numpy as np

from buddylib.workloads import get
from buddylib.workloads.hpc import _d3q19 as d3q19
from buddylib.workloads.hpc.olbm import ACCEL, FLAGS, MARGIN_PLANES, OBSTACLE, OMEGA, cavity_flags


def test_equilibrium_has_the_right_moments() -> None:
    rng = np.random.default_rng(3)
    rho = rng.uniform(0.5, 1.5, 200)
    u = rng.uniform(-0.1, 0.1, (3, 200))
    feq = d3q19.equilibrium(rho, u)
    assert feq.shape == (19, 200) and (feq > 0).all()
    m0, j, pi = d3q19.moments(feq)
    np.testing.assert_allclose(m0, rho, rtol=1e-14)
    np.testing.assert_allclose(j, rho * u, rtol=1e-13, atol=1e-16)
    expect = rho * (np.eye(3)[:, :, None] * d3q19.CS2 + u[:, None] * u[None, :])
    np.testing.assert_allclose(pi, expect, rtol=1e-13, atol=1e-16)
    # at rest the equilibrium is the lattice weights, and the lattice is symmetric
    np.testing.assert_array_equal(d3q19.equilibrium(1.0, np.zeros(3)), d3q19.W)
    np.testing.assert_array_equal(d3q19.C[d3q19.OPP], -d3q19.C)


def test_mass_is_conserved_with_bounce_back_walls() -> None:
    w = get("olbm")
    w.setup(3 << 20, np.random.default_rng(5))
    obstacles = (w.flags()[MARGIN_PLANES:-MARGIN_PLANES, 1:-1, 1:-1] & OBSTACLE).mean()
    assert 0.005 < obstacles < 0.5  # the spheres are there, inside the walls
    m0 = w.mass()
    # at rest every fluid cell holds density 1, each in-transit obstacle slot its weight
    assert abs(m0 - w.n_fluid - (w._transit * d3q19.W).sum()) < 1e-12 * m0
    for _ in range(6):
        for _ in range(50):
            w.advance()
        assert abs(w.mass() - m0) <= 1e-12 * m0
    rho, u = w.density_velocity()
    assert np.abs(u).max() > 1e-3  # the lids drive a real flow ...
    assert np.ptp(rho[rho > 0]) > 1e-4  # ... with density waves, so conservation is not trivial
    fluid_only = w.src.reshape(-1, 20)[w._fluid, :19].sum()
    assert abs(fluid_only - m0) > 1e-9 * m0  # mass in transit inside obstacles must be counted
    # far from equilibrium too: every slot random, so any misrouted value shows
    rng = np.random.default_rng(2)
    w.src[..., :19] = d3q19.W * (1 + 0.3 * rng.standard_normal((*w.src.shape[:-1], 19)))
    m1 = w.mass()
    for _ in range(20):
        w.advance()
        assert abs(w.mass() - m1) <= 1e-12 * m1


def _reference_step(src: np.ndarray, dst: np.ndarray, off: np.ndarray, nz: int) -> np.ndarray:
    """470.lbm's stream-collide, transcribed independently with numpy fancy indexing."""
    f = src.reshape(-1, 20)
    flags = src.view(np.uint32).reshape(-1, 40)[:, 2 * FLAGS]
    plane = src.shape[1] * src.shape[2]
    cells = np.arange(MARGIN_PLANES * plane, (MARGIN_PLANES + nz) * plane)
    fc = f[cells, :19]
    rho, j, _ = d3q19.moments(fc.T)
    u = j / rho
    accel = (flags[cells] & ACCEL) != 0
    u[:, accel] = np.array([0.005, 0.002, 0.0])[:, None]
    post = (1 - OMEGA) * fc + OMEGA * d3q19.equilibrium(rho, u).T
    obstacle = (flags[cells] & OBSTACLE) != 0
    post[obstacle] = 0
    post[np.ix_(obstacle, d3q19.OPP)] = fc[obstacle]  # DST_opp(i) = SRC_i
    out = dst.reshape(-1, 20).copy()
    for k in range(19):
        out[cells + off[k], k] = post[:, k]
    return out.reshape(dst.shape)


def test_one_step_matches_a_numpy_transcription() -> None:
    rng = np.random.default_rng(11)
    w = get("olbm")
    w.setup_grid(cavity_flags(13, 10, 11, rng, n_spheres=2))
    for g in (w.src, w.dst):  # a random, non-equilibrium state everywhere (margins too)
        g[..., :19] = d3q19.W * (1 + 0.2 * rng.standard_normal((*g.shape[:-1], 19)))
    src0, dst0 = w.src.copy(), w.dst.copy()
    expect = _reference_step(src0, dst0, w.off, w.nz)
    w.advance()
    got = w.src  # swapped: the new grid is now srcGrid
    np.testing.assert_array_equal(w.dst, src0)  # the old grid is untouched
    np.testing.assert_allclose(got[..., :19], expect[..., :19], rtol=1e-13, atol=1e-16)
    np.testing.assert_array_equal(got[..., FLAGS], dst0[..., FLAGS])  # the flag words stay in place


def test_flags_live_inside_the_grid() -> None:
    w = get("olbm")
    w.setup(3 << 20, np.random.default_rng(0))
    words = w.src.view(np.uint32)[..., 2 * FLAGS:2 * FLAGS + 2]
    assert (words[..., 1] == 0).all()  # the high half of the FLAGS double is zero
    flags = w.flags()
    dom = flags[MARGIN_PLANES:-MARGIN_PLANES]
    assert (dom[0] & OBSTACLE).all() and (dom[-1] & OBSTACLE).all() and (dom[:, 0] & OBSTACLE).all()
    assert (dom[1, 2:-2, 2:-2] & ACCEL).all() and (dom[-2, 2:-2, 2:-2] & ACCEL).all()
    np.testing.assert_array_equal(w.dst.view(np.uint32)[..., 2 * FLAGS], flags)  # both grids carry them
    for _ in range(5):
        w.advance()
    np.testing.assert_array_equal(w.flags(), flags)
