"""ostencil: 3-D 7-point Jacobi heat diffusion (proxy of SPEC ACCEL 303.ostencil / Parboil stencil).

Two single-precision grids with a one-cell halo, ``A0`` and ``Anext`` as in Parboil, swap
roles every iteration. The problem: a cold cube whose halo is held at T = 0 except the
bottom face (z = 0), held at T = sin(pi x / L) sin(pi y / L). Heat moves up from the bottom,
so early snapshots are mostly zeros and later ones a smooth 3-D field. The discrete steady
state is known in closed form, T = sin(pi i/L) sin(pi j/L) sinh(mu (L - k)) / sinh(mu L) with
L = n + 1 and cosh(mu) = 3 - 2 cos(pi / L), and Jacobi iterations approach it (``error()``).

Arrays, ours / upstream. SPEC ACCEL's source is not public; SPEC's description of 303.ostencil
(spec.org/accel/Docs/303.ostencil.html) credits Li-Wen Chang and John A. Stratton, the authors of
Parboil's ``stencil``, with Mathew Colgrove's OpenACC port. Parboil's CUDA version
(``benchmarks/stencil/src/cuda/main.cu``, read in a public Parboil copy, jovan-djukic/parboil)
allocates exactly two device grids:

* ``A0`` / ``d_A0`` and ``Anext`` / ``d_Anext``: float32, nx x ny x nz, the outermost layer being
  the fixed boundary the kernel never writes. Ours are the same two arrays with nx = ny = nz =
  n + 2 (our "halo" is Parboil's boundary layer). No differences; Parboil reads ``A0`` from an
  input file, ours sets it from the problem above.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import QUICK_LIMIT, Access, AccessProfile, Kernel, Workload
from buddylib.workloads.hpc import _libm


@nb.njit(parallel=True, cache=True)
def _jacobi(a0, anext):
    """Anext = mean of the six neighbours of A0, on the interior (the halo is fixed)."""
    nz, ny, nx = a0.shape
    sixth = np.float32(1 / 6)
    for k in nb.prange(1, nz - 1):
        for j in range(1, ny - 1):
            for i in range(1, nx - 1):
                anext[k, j, i] = sixth * (a0[k - 1, j, i] + a0[k + 1, j, i] + a0[k, j - 1, i]
                                          + a0[k, j + 1, i] + a0[k, j, i - 1] + a0[k, j, i + 1])


def steady_state(n: int) -> np.ndarray:
    """The discrete steady state on the (n+2)^3 grid, halo included (float64)."""
    big_l = n + 1
    s = _libm.sin(np.pi * np.arange(n + 2) / big_l)
    mu = math.acosh(3 - 2 * math.cos(np.pi / big_l))
    f = _libm.sinh(mu * (big_l - np.arange(n + 2))) / math.sinh(mu * big_l)
    return f[:, None, None] * s[None, :, None] * s[None, None, :]


@register
class OStencil(Workload):
    name = "ostencil"
    proxies = "SPEC ACCEL 303.ostencil (Parboil stencil)"

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        side = max(8, round((footprint / 8) ** (1 / 3)))  # two float32 grids of side^3
        self.n = side - 2
        self.n_steps = 96 if footprint <= QUICK_LIMIT else 160
        self.a0 = np.zeros((side, side, side), np.float32)
        self.a0[0] = steady_state(self.n)[0]  # the heated bottom face
        self.anext = self.a0.copy()

    def step(self) -> None:
        _jacobi(self.a0, self.anext)
        self.a0, self.anext = self.anext, self.a0

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {"A0": (self.a0, "field"), "Anext": (self.anext, "field")}

    def profile(self) -> AccessProfile:
        # neighbours come from cache: each grid crosses the memory bus once per sweep
        return AccessProfile(self.name, [
            Kernel("jacobi", [Access("A0", "read"), Access("Anext", "write")], flops=7.0 * self.n**3),
        ])

    def error(self) -> float:
        """Largest deviation of the current field from the discrete steady state."""
        return float(np.abs(self.a0 - steady_state(self.n)).max())
