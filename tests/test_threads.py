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
