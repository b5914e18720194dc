"""seismic: the wavefront moves at the P-wave speed; energy is injected, bounded, then absorbed by the C-PML;
the run is SEISMIC_CPML's model and its 4 s at every size."""

from __future__ import annotations

import math

import numpy as np

from buddylib.workloads import get
from buddylib.workloads.hpc import seismic
from buddylib.workloads.hpc.seismic import CP, Seismic

DELTA = 10.0


def _init(n: int, npml: int) -> Seismic:
    """A cube of ``n`` points 10 m apart, a source of ten-cell P wavelength at its centre."""
    w = Seismic()
    w.init((n, n, n), DELTA, 1.05e-3, npml, CP / (10 * DELTA), (n // 2, n // 2, n // 2))
    return w


def test_wavefront_radius_grows_at_the_p_wave_speed() -> None:
    w = _init(64, 10)
    assert np.all(w.f["vx"] == 0)
    times, radii = [], []
    while w.cycles < 120:
        w.advance()
        if w.time > 2 * w.t0 and w.cycles % 5 == 0:  # the source has stopped; the front is a free P wave
            times.append(w.time)
            radii.append(w.front_radius(1e-3))
    slope, icept = np.polyfit(times, radii, 1)
    assert abs(slope - CP) < 0.05 * CP, (slope, CP)  # P, not S (cs = cp / 1.73)
    delay = -icept / CP  # r = cp (t - delay): the threshold is crossed a little after the wavelet starts
    assert 0 <= delay < w.t0, (delay, w.t0)
    for t, r in zip(times, radii, strict=True):
        assert abs(r - CP * (t - delay)) < 3 * DELTA  # within three cells of the fitted line


def _energies(w: Seismic, steps: int) -> np.ndarray:
    out = []
    for _ in range(steps):
        w.advance()
        out.append(w.energy())
    return np.array(out)


def test_energy_injected_then_bounded_then_absorbed() -> None:
    steps = 260
    rigid = _init(36, 0)  # no absorbing layer: the rigid box keeps what the source put in
    absorbing = _init(36, 8)
    e_rigid, e_cpml = _energies(rigid, steps), _energies(absorbing, steps)
    t0 = round(rigid.t0 / rigid.dt)
    peak = e_rigid.max()
    # the source injects while its wavelet lasts (about t0 either side of t0), then stops
    assert e_rigid[t0 // 3] < 0.01 * peak
    after = e_rigid[2 * t0:]
    assert after.max() < 1.02 * after[0] and after.min() > 0.98 * after[0]  # then bounded (conserved)
    # the same start with C-PML layers, until the wave reaches them; then they absorb it
    np.testing.assert_allclose(e_cpml[:t0], e_rigid[:t0], rtol=1e-6)
    assert e_cpml.max() < 1.02 * peak
    assert e_cpml[-1] < 0.03 * e_cpml.max()


def test_memory_variables_only_in_the_layers() -> None:
    w = _init(32, 6)
    assert np.all(w.f["b_x"][7:-7] == 1) and np.all(w.f["a_x"][7:-7] == 0)  # no damping inside
    while w.cycles < 150:
        w.advance()
    assert np.isfinite(w.energy())
    inner = np.s_[7:-7, 7:-7, 7:-7]
    for name in ("memory_dvx_dx", "memory_dsigmazz_dz"):
        m = w.f[name]
        assert np.all(m[inner] == 0) and np.abs(m).max() > 0, name  # non-zero only inside the C-PML


def test_upstream_model_at_every_size() -> None:
    """SEISMIC_CPML's slab (1000 x 6400 x 6390 m) at a spacing the footprint allows, its Courant number, and
    its 4 s: the finer the grid, the more steps."""
    steps = []
    for mib in (3, 32, 128):
        shape, delta = seismic.upstream_grid(mib << 20)
        assert math.isclose((shape[0] - 1) * delta, 1000.0) and abs((shape[1] - 1) * delta - 6400.0) <= delta
        assert seismic.grid_bytes(shape) <= mib << 20
        steps.append(round(seismic.END_TIME / (seismic.UPSTREAM_DELTAT * delta / seismic.UPSTREAM_DELTA)))
    assert steps == sorted(steps) and steps[0] < seismic.NSTEP
    w = get("seismic")
    w.setup(3 << 20, np.random.default_rng(0))
    assert w.end_time == 4.0 and w.n_steps == 28
    assert math.isclose(CP * w.dt * math.sqrt(3) / w.delta, CP * 1.6e-3 * math.sqrt(3) / 10.0)  # upstream's Courant
    while w.interval < w.n_steps:
        w.step()
    assert w.time >= 4.0 - 1e-9 and w.cycles == round(4.0 / w.dt)
    assert np.abs(w.f["vx"]).max() > 0
