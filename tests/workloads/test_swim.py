"""swim: mass conservation to round-off, energy conservation and bounded, balanced flow."""

from __future__ import annotations

import numpy as np

from buddylib.workloads import get
from buddylib.workloads.hpc.swim import DX, DY


def _setup(m: int):
    w = get("swim")
    w.setup(0, np.random.default_rng(0), m=m)
    return w


def _periodic(a: np.ndarray) -> bool:
    return bool(np.all(a[-1, :] == a[0, :]) and np.all(a[:, -1] == a[:, 0]))


def test_initial_state_is_swims_stream_function_flow() -> None:
    w = _setup(64)
    f = w.f
    # velocities are the curl of the stream function, P the balancing height field
    np.testing.assert_allclose(f["u"][:-1, 1:], -(f["psi"][1:, 1:] - f["psi"][:-1, 1:]) / DY)
    np.testing.assert_allclose(f["v"][1:, :-1], (f["psi"][1:, 1:] - f["psi"][1:, :-1]) / DX)
    assert np.all(f["uold"] == f["u"]) and np.all(f["pold"] == f["p"])
    for name in ("cu", "cv", "z", "h", "unew", "vnew", "pnew"):
        assert not f[name].any(), name  # filled in by the first step
    assert abs(f["p"].mean() - 50000) < 1


def test_mass_conserved_and_balanced_flow_stays_bounded() -> None:
    w = _setup(96)
    m0, e0 = w.mass(), w.energy()
    u0, p0 = w.f["u"].copy(), w.f["p"].copy()
    for _ in range(1500):
        w.advance()
        assert abs(w.mass() - m0) < 1e-12 * m0 and abs(w.mass("pold") - m0) < 1e-12 * m0
    for name in ("u", "v", "p", "uold", "pold", "unew", "cu", "z", "h"):
        assert _periodic(w.f[name]), name
    # SWIM's initial flow is nearly balanced: it stays close to itself and keeps its energy for 1500 steps
    assert np.linalg.norm(w.f["u"] - u0) < 1e-2 * np.linalg.norm(u0)
    assert 0.95 < np.ptp(w.f["p"]) / np.ptp(p0) < 1.05 and np.abs(w.f["p"] - p0).max() < 0.25 * np.ptp(p0)
    assert abs(w.energy() - e0) < 1e-8 * e0


def test_gravity_waves_conserve_mass_and_energy() -> None:
    w = _setup(64)
    x = np.arange(65)
    bump = 50.0 * np.exp(-((x[None, :] - 20) ** 2 + (x[:, None] - 30) ** 2) / 20.0)
    bump[-1, :], bump[:, -1] = bump[0, :], bump[:, 0]
    w.f["p"] += bump
    w.f["pold"] += bump
    m0, e0, spread = w.mass(), w.energy(), np.ptp(w.f["p"])
    for i in range(2000):
        w.advance()
        if i % 100 == 0:
            assert abs(w.mass() - m0) < 1e-12 * m0
            assert abs(w.energy() - e0) < 1e-5 * e0  # Sadourny's scheme; the time filter takes a little
            assert np.ptp(w.f["p"]) <= spread and np.abs(w.f["u"]).max() < 10  # stable, bounded
    assert np.ptp(w.f["p"]) < 0.7 * spread  # the bump has spread out as gravity waves
