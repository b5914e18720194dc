"""ostencil: Parboil's 3-D 7-point stencil (proxy of SPEC ACCEL 303.ostencil / Parboil stencil).

Two single-precision grids, ``A0`` and ``Anext``, swap roles every iteration; each interior point
becomes ``c1 * (sum of its six neighbours) - c0 * itself`` with Parboil's ``c0 = 1/6`` and
``c1 = 1/36``, and the outermost layer of both grids is a fixed boundary the kernel never writes.

Upstream (Parboil 2.5 ``benchmarks/stencil``: ``src/cpu/main.c``, ``kernels.c``, ``file.c``; read in a
public Parboil copy, jovan-djukic/parboil; the datasets' DESCRIPTION files in fengzhangcs/CoRunBench):

* the input: ``A0`` is read from a raw float32 file, x fastest, and copied into ``Anext``. The file
  holds glibc ``srand(54321); rand() / (float)RAND_MAX`` for every point in storage order: checked bit
  for bit on the small dataset's ``128x128x32.bin`` (and 100 iterations of the kernel on it reproduce
  its reference output bit for bit); the default dataset's 64 MiB file is not in the public copies
  read, and the older Parboil's ``generate_data`` made its input in memory with the same generator.
  Ours makes it the same way (:func:`glibc_rand`), so at the small size our ``A0`` is Parboil's input
  byte for byte.
* the iterations: 100 for both datasets, "small" (``-- 128 128 32 100``) and "default"
  (``-- 512 512 64 100``). Ours runs 100 at every size.
* the shape: nx = ny = 8 nz as in the default dataset, nz = footprint^(1/3) / 8 rounded: the default
  scale (128 MiB, two grids) is Parboil's default dataset exactly, 512 x 512 x 64; quick is
  144 x 144 x 18, 32 MiB 320 x 320 x 40, 1 GiB 1024 x 1024 x 128, 4 GiB 1624 x 1624 x 203.
* SPEC ACCEL's 303.ostencil source is not public. SPEC's page says it takes the grid and the
  iteration count on the command line (no input file) and credits Parboil's authors, so the kernel is
  Parboil's; its ref size and count are not public (a third-party run script, ORNL OpenARC, uses
  512 x 512 x 98 and 20000 iterations).

What that makes of the bytes: the update damps every Fourier mode by a factor between 0 and 1/3 per
iteration (the smooth ones vanish at once), so the random interior decays below float32's smallest
subnormal (1.4e-45) within about 100 iterations and becomes exact zeros, except within ~28 layers of
the fixed random boundary, which feeds a steady state that falls ~38x per layer. The first snapshots
are incompressible random floats; the last ones are zeros inside a shell of boundary-fed values, a
shell whose share of the grid shrinks as the grid grows. ``initial = "heated_face"`` (the sensitivity
row of notebook 09) starts instead from zeros with the bottom face held at sin(pi x/L) sin(pi y/L),
the physical heat problem this proxy ran before.

Arrays, ours / upstream: exactly Parboil's two device grids, ``A0`` / ``d_A0`` and ``Anext`` /
``d_Anext``, float32, nx x ny x nz including the boundary layer. No differences.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, AccessProfile, Kernel, Workload
from buddylib.workloads.hpc import _libm

#: Parboil's coefficients (main.c: ``c0 = 1.0f/6.0f; c1 = 1.0f/6.0f/6.0f``)
C0 = np.float32(np.float32(1.0) / np.float32(6.0))
C1 = np.float32(C0 / np.float32(6.0))
#: Parboil's input: glibc ``srand(54321)``
SEED = 54321
#: Parboil's iterations, both datasets
ITERATIONS = 100
INITIAL = ("parboil", "heated_face")


@nb.njit(cache=True)
def glibc_rand(seed: int, out: np.ndarray) -> None:
    """Fill ``out`` (int64) with glibc's ``rand()`` after ``srand(seed)``: the TYPE_3 additive feedback
    generator, r[i] = r[i-3] + r[i-31] (mod 2^32) seeded by Park-Miller, 310 outputs discarded."""
    r = np.empty(34, np.int64)
    word = seed if seed != 0 else 1
    r[0] = word
    for i in range(1, 31):
        hi, lo = word // 127773, word % 127773
        word = 16807 * lo - 2836 * hi
        if word < 0:
            word += 2147483647
        r[i] = word
    for i in range(31, 34):
        r[i] = r[i - 31]
    # r holds r[k-34 .. k-1] in a ring of 34: r[k] = r[k-31] + r[k-3]
    k = 34
    n = out.size
    for j in range(n + 310):
        v = (r[(k - 31) % 34] + r[(k - 3) % 34]) & 0xFFFFFFFF
        r[k % 34] = v
        k += 1
        if j >= 310:
            out[j - 310] = v >> 1


@nb.njit(parallel=True, cache=True)
def _stencil(a0, anext):
    """Parboil's kernel on the interior: Anext = c1 * (six neighbours) - c0 * A0, in float32, summed in
    Parboil's order (k+1, k-1, j+1, j-1, i+1, i-1)."""
    nz, ny, nx = a0.shape
    for k in nb.prange(1, nz - 1):
        for j in range(1, ny - 1):
            for i in range(1, nx - 1):
                s = (a0[k + 1, j, i] + a0[k - 1, j, i] + a0[k, j + 1, i] + a0[k, j - 1, i]
                     + a0[k, j, i + 1] + a0[k, j, i - 1])
                anext[k, j, i] = s * C1 - a0[k, j, i] * C0


def parboil_input(shape: tuple[int, int, int]) -> np.ndarray:
    """Parboil's input grid of ``shape`` (nz, ny, nx): ``rand() / (float)RAND_MAX`` after ``srand(54321)``,
    x fastest, in float32 as C computes it."""
    raw = np.empty(int(np.prod(shape)), np.int64)
    glibc_rand(SEED, raw)
    return (raw.astype(np.float32) / np.float32(2147483647)).reshape(shape)


def heated_face(shape: tuple[int, int, int]) -> np.ndarray:
    """Zeros with the bottom face (z = 0) at sin(pi x / L) sin(pi y / L): the sensitivity input."""
    _, ny, nx = shape
    a = np.zeros(shape, np.float32)
    a[0] = (_libm.sin(np.pi * np.arange(ny) / (ny - 1))[:, None] * _libm.sin(np.pi * np.arange(nx) / (nx - 1))[None]
            ).astype(np.float32)
    return a


def grid_shape(footprint: int) -> tuple[int, int, int]:
    """(nz, ny, nx) with nx = ny = 8 nz, two float32 grids in about ``footprint`` bytes."""
    nz = max(3, round((footprint / 8 / 64) ** (1 / 3)))
    side = 8 * nz
    return nz, side, side


@register
class OStencil(Workload):
    name = "ostencil"
    proxies = "SPEC ACCEL 303.ostencil (Parboil stencil)"
    #: the input: "parboil" (upstream's generated random field) or "heated_face" (notebook 09's sensitivity)
    initial = "parboil"

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        if self.initial not in INITIAL:
            raise ValueError(f"ostencil: initial {self.initial!r} is not one of {INITIAL}")
        shape = grid_shape(footprint)
        self.n_steps = ITERATIONS
        self.a0 = parboil_input(shape) if self.initial == "parboil" else heated_face(shape)
        self.anext = self.a0.copy()  # main.c copies A0 into Anext: both hold the boundary

    def step(self) -> None:
        _stencil(self.a0, self.anext)
        self.a0, self.anext = self.anext, self.a0

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {"A0": (self.a0, "field"), "Anext": (self.anext, "field")}

    def profile(self) -> AccessProfile:
        # neighbours come from cache: each grid crosses the memory bus once per sweep
        interior = float(np.prod([s - 2 for s in self.a0.shape]))
        return AccessProfile(self.name, [
            Kernel("stencil", [Access("A0", "read"), Access("Anext", "write")], flops=8.0 * interior),
        ])
