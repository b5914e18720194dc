"""Thread counts come back after every block that changes them, an exception or an analysis included."""

import numba
import numpy as np
import pytest

from buddylib import analysis
from buddylib.threads import numba_threads, torch_threads


def test_numba_threads_restored_after_exception():
    before = numba.get_num_threads()
    with pytest.raises(RuntimeError), numba_threads(1):
        assert numba.get_num_threads() == 1
        raise RuntimeError("inside")
    assert numba.get_num_threads() == before


def test_numba_threads_none_restores_what_the_block_set():
    before = numba.get_num_threads()
    with numba_threads(None):
        numba.set_num_threads(1)
    assert numba.get_num_threads() == before


def test_torch_threads_restored_after_exception():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), torch_threads(1):
        assert torch.get_num_threads() == 1
        raise RuntimeError("inside")
    assert torch.get_num_threads() == before


def test_analysis_restores_numba_threads():
    """A dask worker's thread share (``threads``) must not outlive its chunk, nor an analysis."""
    before = numba.get_num_threads()
    x = np.arange(4096, dtype=np.float32)
    analysis._hist_of_bytes(x.view(np.uint8), ["bpc32"], True, threads=1)
    assert numba.get_num_threads() == before
    analysis.analyze({"x": x}, ["bpc32"], progress=False)
    assert numba.get_num_threads() == before
    with pytest.raises(ValueError):
        analysis._hist_of_bytes(x.view(np.uint8), ["no-such"], True, threads=1)
    assert numba.get_num_threads() == before


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="one numba thread: no parallel step")
def test_grid_kernels_parallel_and_serial_write_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """workloads.base.grid_kernel compiles one body twice: a big step on an idle machine runs the parallel
    compile, a loaded machine the serial one, and their bytes are the same (SWIM at 256 x 256 points)."""
    import os

    from buddylib import workloads
    from buddylib.workloads.hpc import swim

    digests, used = {}, {}
    kernels = {which: getattr(swim._calc1, which) for which in ("serial", "parallel")}
    for load in (0.0, 99.0):  # idle: two threads, parallel; loaded: one, serial
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        w = workloads.get("swim")
        w.setup(16 << 20, np.random.default_rng(0))
        assert w.m * w.n >= 1 << 16
        calls = used[load] = {"serial": 0, "parallel": 0}
        for which in calls:
            monkeypatch.setattr(swim._calc1, which, _counted(kernels[which], calls, which))
        for _ in range(3):
            w.advance()
        digests[load] = {n: a.tobytes() for n, (a, _) in w.allocations().items()}
    assert used == {0.0: {"serial": 0, "parallel": 3}, 99.0: {"serial": 3, "parallel": 0}}
    assert digests[0.0] == digests[99.0]


def _counted(kernel, calls: dict[str, int], which: str):
    def call(*args):
        calls[which] += 1
        return kernel(*args)
    return call
