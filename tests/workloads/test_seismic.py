"""seismic: the wavefront moves at the P-wave speed; energy is injected, bounded, then absorbed by the C-PML."""

from __future__ import annotations

import numpy as np

from buddylib.workloads import get
from buddylib.workloads.hpc.seismic import DELTA


def _setup(n: int, npml: int, n_layers: int = 1, seed: int = 0):
    w = get("seismic")
    w.setup(0, np.random.default_rng(seed), n=n, n_layers=n_layers, npml=npml)
    return w


def test_wavefront_radius_grows_at_the_p_wave_speed() -> None:
    w = _setup(64, 10)
    cp = w.cp_source
    assert cp == 3300.0 and np.all(w.f["vx"] == 0)
    times, radii = [], []
    while w.it < 120:
        w.step()
        if w.time > 2 * w.t0 and w.it % 5 == 0:  # the source has stopped; the front is a free P wave
            times.append(w.time)
            radii.append(w.front_radius(1e-3))
    slope, icept = np.polyfit(times, radii, 1)
    assert abs(slope - cp) < 0.05 * cp, (slope, cp)  # P, not S (cs = cp / 1.73)
    delay = -icept / cp  # r = cp (t - delay): the threshold is crossed a little after the wavelet starts
    assert 0 <= delay < w.t0, (delay, w.t0)
    for t, r in zip(times, radii, strict=True):
        assert abs(r - cp * (t - delay)) < 3 * DELTA  # within three cells of the fitted line


def _energies(w, steps: int) -> np.ndarray:
    out = []
    for _ in range(steps):
        w.step()
        out.append(w.energy())
    return np.array(out)


def test_energy_injected_then_bounded_then_absorbed() -> None:
    steps = 260
    rigid = _setup(36, 0)  # no absorbing layer: the rigid box keeps what the source put in
    absorbing = _setup(36, 8)
    e_rigid, e_cpml = _energies(rigid, steps), _energies(absorbing, steps)
    t0 = round(rigid.t0 / rigid.dt)
    peak = e_rigid.max()
    # the source injects: energy rises through the wavelet and peaks before the wavelet ends
    assert e_rigid[t0 // 2] < 0.01 * peak < e_rigid[t0] < e_rigid[3 * t0 // 2]
    assert t0 <= e_rigid.argmax() <= 2 * t0
    after = e_rigid[2 * t0:]
    assert after.max() < 1.02 * after[0] and after.min() > 0.98 * after[0]  # then bounded (conserved)
    # the same start with C-PML layers, until the wave reaches them; then they absorb it
    np.testing.assert_allclose(e_cpml[:t0], e_rigid[:t0], rtol=1e-6)
    assert e_cpml.max() < 1.02 * peak
    assert e_cpml[-1] < 0.03 * e_cpml.max()


def test_layers_and_memory_variables() -> None:
    w = _setup(32, 6, n_layers=4, seed=3)
    rho = w.f["rho"]
    assert len(np.unique(rho)) == 4 and np.all(rho == rho[:, :1, :1])  # horizontal layers from rng
    assert np.all(w.f["b_x"][7:-7] == 1) and np.all(w.f["a_x"][7:-7] == 0)  # no damping inside
    while w.it < 150:
        w.step()
    assert np.isfinite(w.energy())
    inner = np.s_[7:-7, 7:-7, 7:-7]
    for name in ("memory_dvx_dx", "memory_dsigmazz_dz"):
        m = w.f[name]
        assert np.all(m[inner] == 0) and np.abs(m).max() > 0, name  # non-zero only inside the C-PML
