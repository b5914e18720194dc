"""md: velocity Verlet conserves energy (error ~ dt^2) and momentum; forces and neighbour lists are right."""

from __future__ import annotations

import numpy as np
import pytest

from buddylib.workloads import get
from buddylib.workloads.hpc.md import MD


def _system(nc: int = 6, dt: float = 0.005, seed: int = 0):
    w = MD()
    w.dt = dt
    w.every = max(1, round(10 * 0.005 / dt))  # the same rebuild interval in time
    w.setup_lattice(nc, np.random.default_rng(seed))
    return w


def _energy_error(dt: float, t_end: float = 2.0) -> tuple[float, float, float]:
    """Largest |E(t) - E(0)| / |E(0)| over the run, the end's, and the largest |total momentum|."""
    w = _system(dt=dt)
    e0 = w.energy()
    worst, p = 0.0, 0.0
    for s in range(round(t_end / dt)):
        w.step()
        if s % 5 == 0:
            worst = max(worst, abs(w.energy() - e0) / abs(e0))
            p = max(p, float(np.abs(w.momentum()).max()))
    return worst, abs(w.energy() - e0) / abs(e0), p


def test_energy_and_momentum_conserved_with_second_order_error() -> None:
    worst, end, p = _energy_error(0.005)  # 400 steps: the FCC lattice melts (T 1.44 -> ~0.7)
    assert end < 1e-3 and worst < 1e-3
    assert p < 1e-10  # zero to rounding: every pair force is computed from both sides, exactly opposite
    worst_half, _, _ = _energy_error(0.0025)
    assert 2.5 < worst / worst_half < 6  # velocity Verlet: error ~ dt^2


def test_lattice_start_melts() -> None:
    w = _system()
    t0 = w.temperature_now()
    assert t0 == pytest.approx(1.44)
    pe0 = w.potential_energy() / w.n
    assert -6.5 < pe0 < -6.2  # a perfect FCC crystal at rho 0.8442 (shifted LJ, rc 2.5)
    for _ in range(200):
        w.step()
    # half the kinetic energy goes into the potential as the lattice disorders
    assert 0.55 < w.temperature_now() < 0.9
    assert w.potential_energy() / w.n > pe0 + 0.6


def _brute_pairs(pos: np.ndarray, box: float, r: float) -> np.ndarray:
    d = pos[:, None, :] - pos[None, :, :]
    d -= box * np.rint(d / box)
    r2 = np.sum(d**2, axis=-1)
    np.fill_diagonal(r2, np.inf)
    return r2 < r * r


def test_neighbour_list_is_complete_and_never_misses_a_pair() -> None:
    w = _system()  # 864 atoms, 3 cells a side: the smallest box the cell list allows
    for s in range(300):
        w.step()
        n = w.n
        listed = np.zeros((n, n), bool)
        rows = np.repeat(np.arange(n), np.diff(w.neigh_offsets))
        listed[rows, w.neigh_list[: w.neigh_offsets[-1]]] = True
        assert listed.sum() == w.neigh_offsets[-1]  # no duplicates
        if w.it % w.every == 0:  # just rebuilt: exactly the pairs within cutoff + skin
            np.testing.assert_array_equal(listed, _brute_pairs(w.pos, w.box, w.rc + w.skin))
            assert np.all(np.diff(w.neigh_offsets) >= 0) and np.all(w.pos >= 0) and np.all(w.pos < w.box)
            starts = w.cell_start
            assert starts[0] == 0 and starts[-1] == n and np.all(np.diff(starts) >= 0)
            assert np.all(w.atom_cell[w.cell_atoms] == np.repeat(np.arange(starts.size - 1), np.diff(starts)))
        if s % 10 == 5:  # between rebuilds: every pair within the cutoff is still listed
            true = _brute_pairs(w.pos, w.box, w.rc)
            assert not np.any(true & ~listed)


def test_forces_are_minus_the_energy_gradient() -> None:
    w = _system()
    for _ in range(30):
        w.step()
    rng = np.random.default_rng(3)
    h = 1e-5
    for i, d in zip(rng.integers(0, w.n, 6), rng.integers(0, 3, 6), strict=True):
        w.compute_forces()
        f = w.force[i, d]
        x = w.pos[i, d]
        w.pos[i, d] = x + h
        w.compute_forces()
        up = w.potential_energy()
        w.pos[i, d] = x - h
        w.compute_forces()
        down = w.potential_energy()
        w.pos[i, d] = x
        assert f == pytest.approx(-(up - down) / (2 * h), rel=1e-5, abs=1e-6)
    w.compute_forces()
    assert abs(w.force.sum(axis=0)).max() < 1e-10


def test_snapshots_hold_the_lists_and_lattice_start() -> None:
    run = get("md").run("quick", compressors=["bpc32"], keep_bytes=True)
    first, last = run.snapshots[0], run.snapshots[-1]
    names = {a.name: a for a in last.allocations}
    assert {"pos", "vel", "force", "neigh_offsets", "neigh_list", "cell_start", "cell_atoms"} <= set(names)
    assert names["neigh_list"].dtype == "int32" and names["pos"].dtype == "float64"
    gathers = [a for k in run.profile.kernels for a in k.accesses if a.pattern == "gather"]
    assert any(a.allocation == "pos" and a.index == "neigh_list" for a in gathers)
    mean = {(s.step, a.name): a.sectors["bpc32"].mean() for s in (first, last) for a in s.allocations}
    # forces on the perfect lattice are rounding noise around zero, regular; in the liquid, full doubles
    assert mean[0, "force"] < mean[last.step, "force"] == 4
    assert mean[last.step, "neigh_list"] < 2.5 and mean[last.step, "neigh_offsets"] < 1.5  # local integer structure


def test_start_is_minimds() -> None:
    """miniMD's create_atoms: FCC sites in its sub-box order, each atom's velocity from the Park-Miller stream
    seeded by its lattice id (5 draws skipped before each component); then zero momentum, T = 1.44."""
    from buddylib.workloads.hpc import md

    state = 1
    for _ in range(10_000):
        state, _u = md._park_miller(state)
    assert state == 1043618065  # Park and Miller's published check value
    sites = md._minimd_sites(10)
    assert len(sites) == 4 * 10**3 and np.all(sites.sum(axis=1) % 2 == 0)
    assert len(np.unique(sites, axis=0)) == len(sites)
    first = sites[: 4 * 4**3]  # the first 8^3 sub-box of half-lattice sites holds 4^3 unit cells
    assert first.max() == 7 and sites[0].tolist() == [0, 0, 0] and sites[1].tolist() == [2, 0, 0]
    vel = np.empty((1, 3))
    md._minimd_velocities(sites[:1], 10, vel)
    seq, state = [], 1  # site (0, 0, 0): lattice id 1, the stream from 1
    for _ in range(18):
        state, u = md._park_miller(state)
        seq.append(u)
    assert vel[0].tolist() == [seq[5], seq[11], seq[17]] and seq[5] == 470211272 / 2147483647


def test_rebuild_sorts_the_atoms_by_cell() -> None:
    w = _system()
    assert not np.all(np.diff(w.atom_cell) >= 0)  # as created: miniMD's sub-box order
    e0 = w.energy()
    w.rebuild()
    w.compute_forces()
    assert np.all(np.diff(w.atom_cell) >= 0) and np.array_equal(w.cell_atoms, np.arange(w.n))
    assert w.energy() == pytest.approx(e0, rel=1e-12)  # a relabelling: the same system
