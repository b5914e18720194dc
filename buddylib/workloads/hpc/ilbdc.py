"""ilbdc: sparse lattice Boltzmann with indirect addressing (proxy of SPEC ACCEL 360.ilbdc).

The original (ILBDC, the "International Lattice Boltzmann Development Consortium" kernel
from RRZE Erlangen, also SPEC OMP2012 360.ilbdc) simulates flow through porous media with a
D3Q19 lattice Boltzmann model that stores *only the fluid cells*: a 1-D list of fluid
cells, the distributions as (19, n_fluid) arrays (two copies, ping-pong), and an adjacency
list that tells each cell, per direction, where to fetch its incoming value. The fused
stream-collide kernel gathers through that list, relaxes with a two-relaxation-time (TRT)
collision and writes the new distributions contiguously.

This proxy builds a periodic random packing of overlapping spheres from ``rng`` (40 % of the
box solid, so a large share of the lattice is *not* stored), numbers the fluid cells in
lexicographic (z, y, x) order, and builds ``adjacency[i, j]``: the flat index into the
(19, n_fluid) distribution array of the value that streams into cell j along direction i —
slot i of the upstream cell j - c_i when that cell is fluid, or slot opp(i) of cell j
itself when it is solid (half-way bounce-back, encoded in the index array, no flags). A
constant body force along x (a pressure drop) drives the flow; TRT rates 1.6 (even) and
0.5 (odd) keep the magic parameter at 3/16.

Data structures and why they matter for compressibility:

* ``pdf_src`` / ``pdf_dst``: float64 (19, n_fluid), structure-of-arrays, swapped every
  step. They start at the rest equilibrium, so each row is one repeated value; as the flow
  develops the low mantissa bits fill in, fastest near the pore throats.
* ``adjacency``: int32 (19, n_fluid). Row i is mostly ``i * n_fluid + j - offset`` (a
  smooth ramp: the upstream cell sits a near-constant distance back in the lexicographic
  order), broken by bounce-back entries that jump to another row; never changes.

Check (``tests/workloads/test_ilbdc.py``): mass (the sum of all distributions) is conserved
to round-off, the force builds momentum along x, and on a tiny box the sparse solver equals
an independent dense D3Q19 reference (full grid, ``np.roll`` streaming, solid-cell
bounce-back) step for step.

Run length, ours / upstream: SPEC's 360.ilbdc initialises every distribution to 1.0 and runs exactly
``MAX_ITERAT`` steps, a number SPEC does not publish (nor its ref geometry; spec.org's page gives the grids:
test 100^3, train 150^3, ref 500 x 300 x 300). Ours runs 200 steps at quick and 400 at every larger size.

Arrays, ours / upstream. The source of 360.ilbdc (SPEC OMP2012, and its OpenACC port in SPEC
ACCEL) is not public. SPEC's published description (spec.org/accel/Docs/360.ilbdc.html) states a
"list-based sparse data representation resulting in indirect data access patterns" for a D3Q19
TRT kernel and about 400 MB for a 100^3 domain, i.e. about 400 bytes per cell; the ILBDC papers
(Zeiser et al.) describe that representation as two distribution arrays over the fluid cells
and one adjacency (index) list:

* ``pdf_src``, ``pdf_dst``: float64 (19, n_fluid), the two distribution copies;
* ``adjacency``: int32 (19, n_fluid), where each incoming value is fetched from.

That is 2 x 19 x 8 + 19 x 4 = 380 bytes per fluid cell, the published footprint's order. What
we cannot check without the source: its exact array shapes and index width, and whether it keeps
a fluid-cell coordinate list or flags beside them (we keep none: the kernel does not read one).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import QUICK_LIMIT, Access, AccessProfile, Kernel, Workload
from buddylib.workloads.hpc._d3q19 import CX, CY, CZ, OPP, Q, W

#: TRT relaxation rates (even / odd); (1/LAMBDA_E - 1/2)(1/LAMBDA_O - 1/2) = 3/16.
LAMBDA_E = 1.6
LAMBDA_O = 0.5
#: Body force per cell and step (pressure drop along x).
FORCE = (1e-5, 0.0, 0.0)
SOLID_FRACTION = 0.4
BYTES_PER_FLUID_CELL = 2 * Q * 8 + Q * 4
#: FLOPs of one cell update: moments (18 + 27 adds, 3 divides), u2 (6), 9 direction pairs x 24, rest 6.
FLOPS_PER_CELL = 18 + 27 + 3 + 6 + 9 * 24 + 6
_BLOCK = 2048


@nb.njit(parallel=True, cache=True)
def _stream_collide(src, dst, adj, lam_e, lam_o, fx, fy, fz):
    """Gather each fluid cell's 19 incoming values through ``adj`` (flat indices into ``src``),
    relax them with TRT plus the body force, and write them contiguously into ``dst`` (19, n)."""
    n = dst.shape[1]
    cx = CX.astype(np.float64)
    cy = CY.astype(np.float64)
    cz = CZ.astype(np.float64)
    for b in nb.prange((n + _BLOCK - 1) // _BLOCK):
        f = np.empty(Q)
        for j in range(b * _BLOCK, min(n, (b + 1) * _BLOCK)):
            rho = 0.0
            ux = 0.0
            uy = 0.0
            uz = 0.0
            for i in range(Q):
                v = src[adj[i, j]]
                f[i] = v
                rho += v
                ux += cx[i] * v
                uy += cy[i] * v
                uz += cz[i] * v
            ux /= rho
            uy /= rho
            uz /= rho
            u2 = 1.5 * (ux * ux + uy * uy + uz * uz)
            for i in range(Q):
                cu = cx[i] * ux + cy[i] * uy + cz[i] * uz
                wr = W[i] * rho
                eq_even = wr * (1.0 + 4.5 * cu * cu - u2)
                eq_odd = wr * 3.0 * cu
                o = OPP[i]
                f_even = 0.5 * (f[i] + f[o])
                f_odd = 0.5 * (f[i] - f[o])
                dst[i, j] = (f[i] - lam_e * (f_even - eq_even) - lam_o * (f_odd - eq_odd)
                             + 3.0 * W[i] * (cx[i] * fx + cy[i] * fy + cz[i] * fz))


def sphere_packing(side: int, solid_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Periodic random packing of overlapping spheres: a (side, side, side) bool solid mask."""
    solid = np.zeros((side, side, side), bool)
    target = solid_fraction * solid.size
    while solid.sum() < target:
        r = rng.uniform(0.05, 0.09) * side + 0.5
        c = rng.uniform(0, side, 3)
        ax = [np.arange(np.floor(ck - r), np.ceil(ck + r) + 1) for ck in c]
        d2 = sum(((a - ck) ** 2).reshape([-1 if k == m else 1 for m in range(3)])
                 for k, (a, ck) in enumerate(zip(ax, c, strict=True)))
        solid[np.ix_(*[a.astype(np.int64) % side for a in ax])] |= d2 <= r * r
    return solid


def build_adjacency(solid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fluid-cell index of every lattice cell (-1: solid) and the (19, n_fluid) int32 pull adjacency.

    ``adjacency[i, j]`` is the flat index, into a (19, n_fluid) array, of the value streaming
    into fluid cell j along direction i: slot i of the upstream cell (periodic box), or slot
    opp(i) of cell j itself when the upstream cell is solid (bounce-back).
    """
    fluid = ~solid
    n = int(fluid.sum())
    if Q * n >= 2**31:
        raise ValueError(f"{n} fluid cells: flat indices overflow int32")
    index = np.full(solid.shape, -1, np.int64)
    index[fluid] = np.arange(n)
    own = np.arange(n)
    adj = np.empty((Q, n), np.int32)
    for i in range(Q):
        up = np.roll(index, shift=(CZ[i], CY[i], CX[i]), axis=(0, 1, 2))[fluid]  # index of cell x - c_i
        adj[i] = np.where(up >= 0, i * n + up, OPP[i] * n + own)
    return index, adj


@register
class ILbdc(Workload):
    name = "ilbdc"
    proxies = "SPEC ACCEL 360.ilbdc"

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        side = max(6, int((footprint / BYTES_PER_FLUID_CELL / (1 - SOLID_FRACTION)) ** (1 / 3)))
        self.n_steps = 200 if footprint <= QUICK_LIMIT else 400
        self.setup_geometry(sphere_packing(side, SOLID_FRACTION, rng))

    def setup_geometry(self, solid: np.ndarray) -> None:
        """Fluid-cell list and adjacency for ``solid`` (periodic box), distributions at rest."""
        self.solid = solid
        self.index, self.adjacency = build_adjacency(solid)
        self.n_fluid = self.adjacency.shape[1]
        self.pdf_src = np.repeat(W[:, None], self.n_fluid, axis=1)
        self.pdf_dst = self.pdf_src.copy()

    def step(self) -> None:
        _stream_collide(self.pdf_src.reshape(-1), self.pdf_dst, self.adjacency, LAMBDA_E, LAMBDA_O, *FORCE)
        self.pdf_src, self.pdf_dst = self.pdf_dst, self.pdf_src

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {"pdf_src": (self.pdf_src, "field"), "pdf_dst": (self.pdf_dst, "field"),
                "adjacency": (self.adjacency, "index")}

    def profile(self) -> AccessProfile:
        # One fused kernel: stream the adjacency list, gather pdf_src through it, write pdf_dst.
        return AccessProfile(self.name, [
            Kernel("stream_collide_trt", [
                Access("adjacency", "read"),
                Access("pdf_src", "read", pattern="gather", index="adjacency"),
                Access("pdf_dst", "write"),
            ], flops=float(FLOPS_PER_CELL * self.n_fluid)),
        ])

    def mass(self) -> float:
        """Sum of all distributions (fluid cells are all there is)."""
        return float(self.pdf_src.sum())

    def momentum(self) -> np.ndarray:
        """Total momentum (3,)."""
        return np.array([float((c.astype(np.float64) @ self.pdf_src).sum()) for c in (CX, CY, CZ)])
