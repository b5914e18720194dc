"""cloverleaf: conservation of mass and energy, and the shock speed of the exact Riemann problem."""

from __future__ import annotations

import numpy as np

from buddylib.workloads import get
from buddylib.workloads.hpc.cloverleaf import GAMMA, RECT, STATES


def _setup(n: int):
    w = get("cloverleaf")
    w.setup(0, np.random.default_rng(0), n=n)
    return w


def test_mass_and_energy_conservation() -> None:
    w = _setup(100)
    start = w.field_summary()
    assert start["kinetic"] == 0.0
    np.testing.assert_allclose(start["mass"], 100 * (0.2 + 0.8 * 0.1), rtol=1e-12)  # 0.2 everywhere, 1.0 on 10 %
    for _ in range(60):
        before = w.field_summary()
        w.lagrangian_step()
        # Lagrangian phase: PdV work on the cells equals the work of the nodal forces, to round-off
        lag = w.field_summary("density0", "energy1", "xvel1", "yvel1")
        assert abs(lag["total"] - before["total"]) < 1e-12 * before["total"]
        w.advection_step()
        after = w.field_summary()
        # the remap moves mass and internal energy conservatively; the walls pass nothing
        assert abs(after["mass"] - start["mass"]) < 1e-12 * start["mass"]
        assert abs(after["internal"] - lag["internal"]) < 1e-12 * lag["internal"]
        # momentum remap can only dissipate kinetic energy (van Leer upwinding), never create it
        assert after["kinetic"] <= lag["kinetic"] * (1 + 1e-12)
    end = w.field_summary()
    assert end["kinetic"] > 0.05 * end["total"]  # a real flow developed
    assert abs(end["total"] - start["total"]) < 5e-3 * start["total"]  # remap dissipation stays small
    assert np.all(w.interior("density0") > 0) and np.all(w.interior("energy0") > 0)


def _riemann_shock_speed() -> tuple[float, float]:
    """Post-shock pressure and speed of the right-moving shock of the clover.in Riemann problem."""
    (rho_r, e_r), (rho_l, e_l) = STATES
    p_l, p_r = (GAMMA - 1) * rho_l * e_l, (GAMMA - 1) * rho_r * e_r
    c_l, c_r = np.sqrt(GAMMA * p_l / rho_l), np.sqrt(GAMMA * p_r / rho_r)

    def f(p: float) -> float:
        rare = 2 * c_l / (GAMMA - 1) * ((p / p_l) ** ((GAMMA - 1) / (2 * GAMMA)) - 1)
        a, b = 2 / ((GAMMA + 1) * rho_r), (GAMMA - 1) / (GAMMA + 1) * p_r
        return rare + (p - p_r) * np.sqrt(a / (p + b))

    lo, hi = p_r, p_l
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    p_star = 0.5 * (lo + hi)
    return p_star, c_r * np.sqrt((GAMMA + 1) / (2 * GAMMA) * p_star / p_r + (GAMMA - 1) / (2 * GAMMA))


def _shock_x(w, p_mid: float) -> float:
    """Where the pressure on the row next to the y = 0 wall last falls through p_mid."""
    p = w.interior("pressure")[0]
    x = w.f["cellx"][2:2 + w.n]
    i = int(np.nonzero(p > p_mid)[0].max())
    return float(x[i] + (p[i] - p_mid) / (p[i] - p[i + 1]) * (x[i + 1] - x[i]))


def test_shock_runs_outward_at_the_riemann_speed() -> None:
    p_star, speed = _riemann_shock_speed()
    assert 0.2 < p_star < 0.5 and 1.0 < speed < 2.0
    p_mid = 0.5 * (p_star + (GAMMA - 1) * STATES[0][0] * STATES[0][1])
    w = _setup(200)
    times, xs = [], []
    while w.time < 1.2:
        w.advance()
        if w.time > 0.4:
            times.append(w.time)
            xs.append(_shock_x(w, p_mid))
    assert np.all(np.diff(xs) >= 0) and xs[0] > RECT[0]  # outward, monotonically
    slope, icept = np.polyfit(times, xs, 1)
    assert abs(slope - speed) < 0.04 * speed, (slope, speed)
    assert abs(icept - RECT[0]) < 0.1  # it started from the edge of the high-pressure rectangle


def test_fields_fill_in_from_zero() -> None:
    run = get("cloverleaf").run("quick", n_snapshots=2, compressors=["bpc32"])
    first, last = run.snapshots[0], run.snapshots[-1]
    zero = {a.name: np.mean(a.sectors["bpc32"] == 0) for a in first.allocations}
    zero_end = {a.name: np.mean(a.sectors["bpc32"] == 0) for a in last.allocations}
    for name in ("xvel0", "yvel0", "viscosity", "vol_flux_x", "mass_flux_y", "work_array4"):
        assert zero[name] > 0.99 and zero_end[name] < zero[name], name
