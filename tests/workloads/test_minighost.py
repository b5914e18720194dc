"""minighost: the blocked stencil with ghost exchange equals the global stencil; sum + flux out = sources."""

from __future__ import annotations

import numpy as np
import pytest

from buddylib.workloads import get
from buddylib.workloads.hpc.minighost import MiniGhost


def _global_step(g: np.ndarray, points: int) -> np.ndarray:
    """The stencil on the undivided grid with zero ghosts (independent numpy form)."""
    p = np.pad(g, 1)
    nz, ny, nx = g.shape
    if points == 27:
        s = sum(p[1 + dk:1 + dk + nz, 1 + dj:1 + dj + ny, 1 + di:1 + di + nx]
                for dk in (-1, 0, 1) for dj in (-1, 0, 1) for di in (-1, 0, 1))
        return s / 27.0
    s = (p[:-2, 1:-1, 1:-1] + p[2:, 1:-1, 1:-1] + p[1:-1, :-2, 1:-1] + p[1:-1, 2:, 1:-1] + p[1:-1, 1:-1, :-2]
         + p[1:-1, 1:-1, 2:] + p[1:-1, 1:-1, 1:-1])
    return s / 7.0


@pytest.mark.parametrize(("n", "blocks", "points"), [((6, 5, 4), (2, 2, 1), 27), ((4, 4, 3), (2, 2, 2), 27),
                                                     ((5, 3, 4), (3, 1, 2), 7), ((4, 4, 4), (2, 2, 1), 7)])
def test_blocked_run_equals_global_stencil(n: tuple[int, int, int], blocks: tuple[int, int, int], points: int) -> None:
    w = MiniGhost()
    w.n_steps = 6  # the second spike goes in before step 4
    w.init(n, np.random.default_rng(5), num_vars=2, blocks=blocks, points=points)
    ref = [w.global_grid(v) for v in range(2)]
    b, i, j, k = (int(x) for x in w.spike_loc[:, 1])
    ib, jb, kb = w.coords[b]
    where = (kb * n[2] + k - 1, jb * n[1] + j - 1, ib * n[0] + i - 1)
    for t in range(1, 7):
        if t == 4:
            for v in range(2):
                ref[v][where] += w.spikes[v, 1]
        w.step()
        for v in range(2):
            ref[v] = _global_step(ref[v], points)
            np.testing.assert_allclose(w.global_grid(v), ref[v], rtol=1e-13, atol=0)


def test_no_exchange_would_differ() -> None:
    """The exchange matters: blocks stepped without it drift from the global stencil."""
    w = MiniGhost()
    w.init((6, 6, 4), np.random.default_rng(1), num_vars=1)
    ref = _global_step(w.global_grid(0), 27)
    w.exchange = lambda: None  # type: ignore[method-assign]
    w.n_steps = 100
    with pytest.raises(RuntimeError, match="GRIDSUM"):  # the conservation check catches it too
        w.step()
    assert not np.allclose(w.global_grid(0), ref)


def test_sum_plus_flux_out_equals_sources() -> None:
    w = MiniGhost()
    w.setup(3 << 20, np.random.default_rng(2))
    sums, fluxes, sources = [], [], []
    for _ in range(w.n_steps):
        w.step()
        sums.append(w.grid_sum(0))
        fluxes.append(w.flux_out[0])
        sources.append(w.source_total[0])
        assert w.check_error.max() < 1e-12  # miniGhost checks 1e-8; here it holds to round-off
    np.testing.assert_allclose(np.array(sums) + np.array(fluxes), sources, rtol=1e-12)
    assert len(set(sources)) == 2  # the two spikes
    assert np.all(np.diff(fluxes) > 0)  # heat leaves through the Dirichlet boundary every step
    half = w.n_steps // 2
    assert np.all(np.diff(sums[:half]) < 0)  # and the mass falls between spikes
    assert sums[half] > sums[half - 1]  # the second spike adds mass


def test_snapshots_and_profile() -> None:
    run = get("minighost").run("quick", compressors=["bpc32"], keep_bytes=True)
    first = {a.name: np.asarray(a.data) for a in run.snapshots[0].allocations}
    last = {a.name: np.asarray(a.data) for a in run.snapshots[-1].allocations}
    assert {"blk0.GRID0", "blk3.GRID4", "blk0.WORK", "blk0.SEND_BUFFER_EAST", "blk3.RECV_BUFFER_SOUTH"} <= set(first)
    assert "blk0.SEND_BUFFER_WEST" not in first  # block 0 sits on the west boundary: no neighbour, no buffer
    g0 = first["blk0.GRID0"]
    assert g0[1:-1, 1:-1, 1:-1].min() >= 0 and not g0[0].any()  # random inside, zero ghosts
    assert not first["blk0.WORK"].any() and not first["blk0.SEND_BUFFER_EAST"].any()
    assert last["blk0.RECV_BUFFER_EAST"].any() and last["blk1.GRID0"][:, :, 0].any()  # ghosts filled
    # the stencil smooths the random start: neighbouring values grow alike
    assert np.median(np.abs(np.diff(last["blk0.GRID0"][2:-2, 2:-2, 2:-2], axis=2))) < 0.2 * np.median(
        np.abs(np.diff(g0[2:-2, 2:-2, 2:-2], axis=2)))
    names = [k.name for k in run.profile.kernels]
    assert names.count("stencil blk0.GRID0") == 1 and sum(n.startswith("pack") for n in names) == 8
