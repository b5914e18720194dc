"""ostencil: Parboil's input generator and kernel, bit for bit, and what 100 iterations leave."""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest

from buddylib.workloads import get
from buddylib.workloads.hpc import ostencil


def test_generator_is_glibc_rand() -> None:
    """Parboil's input is glibc ``srand(54321); rand()``: the first values as glibc documents them for seed 1,
    and the C library itself where it is glibc."""
    out = np.empty(3, np.int64)
    ostencil.glibc_rand(1, out)
    assert out.tolist() == [1804289383, 846930886, 1681692777]
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 (glibc only)
    except (OSError, AttributeError, TypeError):
        pytest.skip("not glibc")
    libc.srand(ostencil.SEED)
    want = [libc.rand() for _ in range(5000)]
    out = np.empty(5000, np.int64)
    ostencil.glibc_rand(ostencil.SEED, out)
    assert out.tolist() == want


def test_kernel_is_parboils_in_float32() -> None:
    a = ostencil.parboil_input((6, 10, 12))
    assert a.dtype == np.float32 and 0 <= a.min() and a.max() <= 1
    b = a.copy()
    ostencil._stencil(a, b)
    s = (a[2:, 1:-1, 1:-1] + a[:-2, 1:-1, 1:-1] + a[1:-1, 2:, 1:-1] + a[1:-1, :-2, 1:-1] + a[1:-1, 1:-1, 2:]
         + a[1:-1, 1:-1, :-2])
    want = s * np.float32(1 / 36) - a[1:-1, 1:-1, 1:-1] * np.float32(1 / 6)
    assert want.dtype == np.float32
    np.testing.assert_array_equal(b[1:-1, 1:-1, 1:-1], want)
    b[1:-1, 1:-1, 1:-1] = a[1:-1, 1:-1, 1:-1]
    np.testing.assert_array_equal(a, b)  # the boundary is never written


def test_default_scale_is_parboils_default_dataset() -> None:
    assert ostencil.grid_shape(128 << 20) == (64, 512, 512)  # -- 512 512 64 100


def test_interior_decays_to_zeros_away_from_the_boundary() -> None:
    """Every mode is damped by at most 1/3 per iteration, so far from the random boundary the field reaches
    exact float32 zeros within Parboil's 100 iterations; beside it, a boundary-fed steady state stays."""
    a = ostencil.parboil_input((72, 72, 72))
    b = a.copy()
    for _ in range(ostencil.ITERATIONS):
        ostencil._stencil(a, b)
        a, b = b, a
    assert np.all(a[31:-31, 31:-31, 31:-31] == 0)  # beyond ~28 layers of the boundary
    assert np.mean(a[1, 1:-1, 1:-1] != 0) > 0.99  # beside it


def test_heated_face_is_the_sensitivity_input() -> None:
    w = get("ostencil")
    w.initial = "heated_face"
    try:
        run = w.run("quick", n_snapshots=8, compressors=["bpc32"])
    finally:
        w.initial = "parboil"
    zero_share = [np.mean(a.sectors["bpc32"] == 0) for s in run.snapshots for a in s.allocations[:1]]
    assert zero_share[0] > 0.9 and zero_share[-1] < zero_share[0]  # zeros before the face's heat spreads
    w.initial = "nonsense"
    with pytest.raises(ValueError, match="initial"):
        w.setup(1 << 20, np.random.default_rng(0))
    w.initial = "parboil"
