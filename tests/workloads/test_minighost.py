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
    w.initial = "random"
    w.init(n, np.random.default_rng(5), num_vars=2, blocks=blocks, points=points, num_spikes=2, tsteps=3)
    ref = [w.global_grid(v) for v in range(2)]
    for t in range(1, 7):
        if t in (1, 4):  # each spike goes in before its three steps
            b, i, j, k = (int(x) for x in w.spike_loc[:, t // 3])
            ib, jb, kb = w.coords[b]
            for v in range(2):
                ref[v][kb * n[2] + k - 1, jb * n[1] + j - 1, ib * n[0] + i - 1] += w.spikes[v, t // 3]
        w.advance()
        for v in range(2):
            ref[v] = _global_step(ref[v], points)
            np.testing.assert_allclose(w.global_grid(v), ref[v], rtol=1e-13, atol=0)


def test_no_exchange_would_differ() -> None:
    """The exchange matters: blocks stepped without it drift from the global stencil."""
    w = MiniGhost()
    w.initial = "random"
    w.init((6, 6, 4), np.random.default_rng(1), num_vars=1)
    w.exchange = lambda: None  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="GRIDSUM"):  # the conservation check catches it too
        w.advance()
    w2 = MiniGhost()
    w2.initial = "random"
    w2.init((6, 6, 4), np.random.default_rng(1), num_vars=1)
    w2.advance()
    assert not np.allclose(w.global_grid(0), w2.global_grid(0))


def test_upstream_start_and_run_length() -> None:
    """miniGhost 1.0's start: every cell the same draw (48), the first spike at the global centre; 100 steps."""
    w = MiniGhost()
    w.setup(3 << 20, np.random.default_rng(0))
    assert w.end_cycles == 100 and w.n_steps == 28
    g = np.stack([w.global_grid(v) for v in range(w.num_vars)])
    assert np.all(g == 48.0)
    w.step()
    spike = np.argwhere(w.global_grid(0) == w.global_grid(0).max())[0]
    assert tuple(spike) == tuple((s + 1) // 2 - 1 for s in w.global_shape)
    assert w.source_total[0] == 48.0 * g[0].size + g[0].size  # the first spike: the global cell count
    while w.cycles < 100:
        w.step()
    assert w.n_steps == w.interval and w.cycles == 100


def test_sum_plus_flux_out_equals_sources() -> None:
    w = MiniGhost()
    w.initial = "random"
    w.init((8, 7, 6), np.random.default_rng(2), num_spikes=2, tsteps=20)
    sums, fluxes, sources = [], [], []
    for _ in range(40):
        w.advance()
        sums.append(w.grid_sum(0))
        fluxes.append(w.flux_out[0])
        sources.append(w.source_total[0])
        assert w.check_error.max() < 1e-12  # miniGhost checks 1e-8; here it holds to round-off
    np.testing.assert_allclose(np.array(sums) + np.array(fluxes), sources, rtol=1e-12)
    assert len(set(sources)) == 2  # the two spikes
    assert np.all(np.diff(fluxes) > 0)  # heat leaves through the Dirichlet boundary every step
    assert np.all(np.diff(sums[:20]) < 0)  # and the mass falls between spikes
    assert sums[20] > sums[19]  # the second spike adds mass


def test_snapshots_and_profile() -> None:
    run = get("minighost").run("quick", compressors=["bpc32"], keep_bytes=True)
    first = {a.name: np.asarray(a.data) for a in run.snapshots[0].allocations}
    last = {a.name: np.asarray(a.data) for a in run.snapshots[-1].allocations}
    assert {"blk0.GRID0", "blk3.GRID4", "blk0.WORK", "blk0.SEND_BUFFER_EAST", "blk3.RECV_BUFFER_SOUTH"} <= set(first)
    assert "blk0.SEND_BUFFER_WEST" not in first  # block 0 sits on the west boundary: no neighbour, no buffer
    g0 = first["blk0.GRID0"]
    assert np.all(g0[1:-1, 1:-1, 1:-1] == 48.0) and not g0[0].any()  # miniGhost 1.0's start, zero ghosts
    assert not first["blk0.WORK"].any() and not first["blk0.SEND_BUFFER_EAST"].any()
    assert last["blk0.RECV_BUFFER_EAST"].any() and last["blk1.GRID0"][:, :, 0].any()  # ghosts filled
    # heat leaves through the Dirichlet boundary: the cells next to it fall below the start
    g = last["blk0.GRID1"]
    assert g[1, 1:-1, 1:-1].max() < 48.0 and g[1, 1:-1, 1:-1].max() < g[g.shape[0] // 2, 1:-1, 1:-1].max()
    names = [k.name for k in run.profile.kernels]
    assert names.count("stencil blk0.GRID0") == 1 and sum(n.startswith("pack") for n in names) == 8
