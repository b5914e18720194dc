"""lulesh: the Sedov blast keeps its energy budget, its shock follows Sedov-Taylor, its symmetry holds."""

from __future__ import annotations

import itertools

import numpy as np

from buddylib.workloads.hpc.lulesh import ETA_P, XI_P, ZETA_P, Lulesh, build_mesh, elem_volume


def _run(n: int, cycles: int, every: int, box: bool = True) -> tuple[Lulesh, list[tuple[float, ...]]]:
    w = Lulesh()
    w.setup_mesh(n, np.random.default_rng(0), box=box)
    samples = []
    for c in range(1, cycles + 1):
        w.advance()
        if c % every == 0:
            internal, kinetic = w.energy()
            samples.append((w.cycles, w.time, internal, kinetic, w.hourglass_work, w.shock_radius()))
    return w, samples


def test_energy_is_conserved_and_the_shock_follows_sedov_taylor() -> None:
    w = Lulesh()
    w.setup_mesh(16, np.random.default_rng(0))
    e0 = sum(w.energy())
    assert e0 == w.e[0] * w.volo[0] and w.energy()[1] == 0.0  # all energy in the corner element
    w, samples = _run(16, 360, 30)
    cycle, t, internal, kinetic, hourglass, radius = (np.array(c) for c in zip(*samples, strict=True))
    total = internal + kinetic
    # LULESH's hourglass control dissipates kinetic energy without heating; with that work counted,
    # internal + kinetic energy is conserved: a few percent lost in the first cycles (one hot element
    # expanding by large volume ratios per step), then no measurable drift
    budget = (total + hourglass) / e0
    assert np.all(np.abs(budget - 1) < 0.06), budget
    late = budget[cycle >= 120]
    assert np.ptp(late) < 3e-3, late
    assert np.all(np.diff(hourglass) >= 0) and hourglass[-1] < 0.2 * e0
    assert np.all(kinetic > 0.25 * total) and np.all(kinetic < 0.45 * total)  # a blast, not a fizzle
    # the shock (max-pressure element) moves outward every sample and tracks R = 1.15 (E t^2 / rho)^(1/5),
    # E the energy of the full (eight-octant) blast
    assert np.all(np.diff(radius) > 0), radius
    sedov = 1.15 * (8 * e0 * t**2) ** 0.2
    ratio = radius[cycle >= 120] / sedov[cycle >= 120]
    assert np.all((ratio > 0.85) & (ratio < 1.05)), ratio


def test_blast_keeps_the_symmetry_of_the_problem() -> None:
    w, _ = _run(12, 200, 200)
    n = w.n
    for name in ("e", "p", "q", "ss", "v", "delv"):
        f = getattr(w, name).reshape(n, n, n)
        scale = np.abs(f).max()
        for axes in itertools.permutations(range(3)):
            np.testing.assert_allclose(f.transpose(axes), f, rtol=0, atol=1e-12 * scale, err_msg=name)
    xd, yd = w.xd.reshape((n + 1,) * 3), w.yd.reshape((n + 1,) * 3)
    np.testing.assert_allclose(yd, xd.transpose(0, 2, 1), rtol=0, atol=1e-12 * np.abs(xd).max())


def test_blast_box_gives_the_same_bytes_as_full_recomputation() -> None:
    boxed, _ = _run(14, 150, 150)
    full, _ = _run(14, 150, 150, box=False)
    assert boxed.extent < 14  # the box (which only grows) never covered the whole mesh
    for name, (arr, _) in boxed.allocations().items():
        assert np.array_equal(arr, full.allocations()[name][0]), name


def test_mesh_index_structures() -> None:
    n = 5
    m = build_mesh(n)
    nl = m["nodelist"]
    assert nl.dtype == np.int32 and nl.shape == (n**3, 8)
    vols = [elem_volume(m["x"][c], m["y"][c], m["z"][c]) for c in nl]
    np.testing.assert_allclose(vols, (1.125 / n) ** 3, rtol=1e-12)  # right-handed, unit-cube lattice
    # node -> corner CSR: every corner of every element exactly once, under its own node
    start, corners = m["nodeElemStart"], m["nodeElemCornerList"]
    assert np.array_equal(np.sort(corners), np.arange(8 * n**3))
    owner = np.repeat(np.arange((n + 1) ** 3), np.diff(start))
    assert np.array_equal(nl.ravel()[corners], owner)
    # face neighbours share a face (four nodes) wherever the boundary flags let Q read them
    bc = m["elemBC"]
    for name, d, flag in (("lxip", 1, XI_P), ("letap", n, ETA_P), ("lzetap", n * n, ZETA_P)):
        nb = m[name]
        inner = np.nonzero((bc & flag) == 0)[0]
        assert inner.size == n**3 - n**2 and np.all(nb[inner] == inner + d)
        assert {len(set(nl[i]) & set(nl[nb[i]])) for i in inner} == {4}
    assert (bc != 0).sum() == n**3 - (n - 2) ** 3  # flags only on boundary elements
    assert set(m["symmX"].tolist()) == set(np.nonzero(m["x"] == 0)[0].tolist())


def test_a_run_goes_to_lulesh_stop_time_in_its_cycles() -> None:
    """LULESH 2.0 at -s 30 stops at t = 1e-2 after 932 cycles (upstream's documented count); a quick run goes
    to the same stop time, its snapshots on the same fractions of it."""
    from buddylib.workloads.hpc.lulesh import STOPTIME

    w = Lulesh()
    w.setup_mesh(30, np.random.default_rng(0))
    while w.time < STOPTIME:
        w.advance()
    assert w.cycles == 932 and w.time == STOPTIME
    run = Lulesh().run("quick", compressors=["bpc32"])
    done = run.workload.schedule()
    assert done["reach"] == 1.0 and done["simulated_time"] == STOPTIME and done["progress"] == 1.0
    assert [s.step for s in run.snapshots] == [0, 4, 8, 12, 16, 20, 24, 28]
