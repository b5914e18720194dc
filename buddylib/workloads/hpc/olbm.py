"""olbm: D3Q19 lattice Boltzmann with obstacle flags (proxy of SPEC ACCEL 304.olbm / SPEC CPU 470.lbm).

The original (Thomas Pohl's ``lbm``, the kernel of a free-surface metal-foam code) runs a
BGK lattice Boltzmann model on a D3Q19 lattice of 100 x 100 x 130 cells: each step,
``LBM_performStreamCollide`` reads every cell of ``srcGrid``, collides the 19 distributions
(relaxation ``OMEGA = 1.95``) and pushes them into the neighbouring cells of ``dstGrid``;
then the two grids swap. Cells flagged ``OBSTACLE`` (the cavity walls and the obstacles read
from the ``.of`` file) do bounce-back instead: they send each value back where it came from.
In the lid-driven cavity set-up the planes next to the top and bottom walls are flagged
``ACCEL``: their velocity is forced to (0.005, 0.002, 0).

This proxy runs that exact kernel (same direction order, same arithmetic in the same order,
same push scheme through linear cell indices) on a cavity of n x n x 1.3 n cells sized to the
footprint, with a few random spheres from ``rng`` as the obstacles.

Data structures, kept as in 470.lbm because they drive compressibility:

* ``srcGrid`` and ``dstGrid`` are float64 arrays of shape (nz + 4, ny, nx, 20): an
  array of structures of 19 distributions plus a 20th ``FLAGS`` entry per cell, with two
  margin planes before and after the domain (``LBM_allocateGrid``'s margin). The flags live
  *inside* the grid, as in the original: the low 32 bits of the 20th double hold the
  ``unsigned int`` flag word (OBSTACLE = 1, ACCEL = 2), the high 32 bits stay zero, so every
  cell carries one tiny denormal-looking double between its distributions.
* Every cell starts at rest at the equilibrium weights (1/3, 1/18, 1/36), so the first
  snapshot is a perfectly periodic pattern; the flow spreads from the lids (acoustic waves
  first, then shear), perturbing low mantissa bits everywhere, while obstacle interiors and
  the margins keep their initial values for ever.

Check (``tests/workloads/test_olbm.py``): with bounce-back walls the total mass — the
distributions of every fluid cell plus those in transit inside obstacle cells (pushed in
last step, to be bounced back next step) — is conserved to round-off; the equilibrium has
the right moments (density, momentum, momentum flux); and one step equals an independent
numpy transcription of the kernel (to 1e-13).

Run length, ours / upstream (spec.org/cpu2006/Docs/470.lbm.html, the same for SPEC ACCEL 304.olbm):
the ref input runs 3,000 time steps of the lid-driven cavity on 100 x 100 x 130 cells (train 300, test 20,
channel flow); Parboil's lbm runs 3,000 ("long") or 100 ("short") on 120 x 120 x 150. Ours runs the ref's
3,000 time steps at every size (:data:`TIME_STEPS`; one ``step`` of the workload is 1/28 of them,
:mod:`~buddylib.workloads.hpc._schedule`), or a stated share where the whole run does not fit the time one
size is given (:data:`REACH`, snapshots on the same fractions at every size): the whole run at quick (18 x
18 x 23) and 32 MiB (42 x 42 x 55); 1/4 (750 steps) at 128 MiB (67 x 67 x 87), which ``make reproduce``
runs; 1/2 (1,500) at 1 GiB (136 x 136 x 177); 1/7 (429) at 4 GiB.

Arrays, ours / upstream. The sources of SPEC ACCEL 304.olbm and SPEC CPU 470.lbm are not public;
SPEC's descriptions of 470.lbm (and of ACCEL's 104.lbm) give a cell of 20 words (19
distributions and a flag word) and two grids swapped every step. The public descendant read here
is Parboil's ``lbm`` (Pohl's code, jovan-djukic/parboil and abduld/Parboil:
``benchmarks/lbm/src/cpu/lbm.c``, ``lbm_1d_array.h``, ``cuda/lbm.cu``, ``cuda/layout_config.h``):

=====================  =======================================================================
ours                   upstream
=====================  =======================================================================
``srcGrid``            ``srcGrid``: ``LBM_allocateGrid`` = SIZE_Z x SIZE_Y x SIZE_X x
``dstGrid``            N_CELL_ENTRIES (20) plus a margin of 2 x SIZE_X x SIZE_Y x 20 entries
                       before and after (two planes each side); ``dstGrid`` the same
=====================  =======================================================================

Where ours differs, and why: float64, as 470.lbm's ``double`` (Parboil's versions use float32);
the array-of-structures layout with the flags inside the grid, as 470.lbm and Parboil's CPU
version (Parboil's CUDA version, and the layout a GPU-tuned port may choose, is a padded
structure of arrays, 19 + 1 arrays of (SIZE_X + 8) x SIZE_Y x (SIZE_Z + 4) floats: the same
values in another order plus padding). Nothing else is allocated on the device by either.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, AccessProfile, Kernel, Workload
from buddylib.workloads.hpc._d3q19 import CX, CY, CZ, OPP, Q, W
from buddylib.workloads.hpc._schedule import Scheduled, reach

N_CELL_ENTRIES = 20
FLAGS = 19
OBSTACLE = 1
ACCEL = 2
IN_OUT_FLOW = 4
OMEGA = 1.95
MARGIN_PLANES = 2
#: FLOPs of one fluid-cell update: moments (18 + 27 adds, 3 divides), u2 (6), 19 directions x 9.
FLOPS_PER_FLUID_CELL = 18 + 27 + 3 + 6 + 19 * 9


@nb.njit(parallel=True, cache=True)
def _stream_collide(src, dst, flags, off, nz, ny, nx, omega):
    """LBM_performStreamCollide: collide every cell of ``src`` and push into ``dst`` (flat arrays).

    ``flags`` is the uint32 view of ``src``; ``off`` the linear cell offset of each direction.
    """
    cx = CX.astype(np.float64)
    cy = CY.astype(np.float64)
    cz = CZ.astype(np.float64)
    for z in nb.prange(nz):
        for y in range(ny):
            for x in range(nx):
                c = ((z + MARGIN_PLANES) * ny + y) * nx + x
                i0 = c * N_CELL_ENTRIES
                flag = flags[2 * (i0 + FLAGS)]  # low word of the FLAGS double (little-endian)
                if flag & OBSTACLE:
                    for i in range(Q):  # DST_opp(i) = SRC_i: send it back where it came from
                        o = OPP[i]
                        dst[(c + off[o]) * N_CELL_ENTRIES + o] = src[i0 + i]
                    continue
                rho = 0.0
                ux = 0.0
                uy = 0.0
                uz = 0.0
                for i in range(Q):
                    rho += src[i0 + i]
                for i in range(Q):
                    v = src[i0 + i]
                    if cx[i] > 0:
                        ux += v
                    elif cx[i] < 0:
                        ux -= v
                    if cy[i] > 0:
                        uy += v
                    elif cy[i] < 0:
                        uy -= v
                    if cz[i] > 0:
                        uz += v
                    elif cz[i] < 0:
                        uz -= v
                ux /= rho
                uy /= rho
                uz /= rho
                if flag & ACCEL:
                    ux = 0.005
                    uy = 0.002
                    uz = 0.000
                u2 = 1.5 * (ux * ux + uy * uy + uz * uz)
                for i in range(Q):
                    cu = cx[i] * ux + cy[i] * uy + cz[i] * uz
                    dst[(c + off[i]) * N_CELL_ENTRIES + i] = ((1.0 - omega) * src[i0 + i]
                                                              + W[i] * omega * rho * (1.0 + cu * (4.5 * cu + 3.0) - u2))


def cavity_flags(nz: int, ny: int, nx: int, rng: np.random.Generator, n_spheres: int = 6) -> np.ndarray:
    """Flag words of every cell, margins included, shape (nz + 4, ny, nx), uint32.

    Random sphere obstacles in the domain (``LBM_loadObstacleFile``), then the lid-driven
    cavity's walls and ACCEL planes (``LBM_initializeSpecialCellsForLDC``, margins included).
    """
    flags = np.zeros((nz + 2 * MARGIN_PLANES, ny, nx), np.uint32)
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    dom = flags[MARGIN_PLANES:MARGIN_PLANES + nz]
    for _ in range(n_spheres):
        r = rng.uniform(0.06, 0.12) * min(nx, ny)
        cz, cy, cx = (rng.uniform(min(r + 3, s / 2), max(s - r - 4, s / 2)) for s in (nz, ny, nx))
        dom[(z - cz) ** 2 + (y - cy) ** 2 + (x - cx) ** 2 <= r * r] |= OBSTACLE
    zz = np.arange(-MARGIN_PLANES, nz + MARGIN_PLANES)[:, None, None]
    yy = np.arange(ny)[None, :, None]
    xx = np.arange(nx)[None, None, :]
    wall = (xx == 0) | (xx == nx - 1) | (yy == 0) | (yy == ny - 1) | (zz == 0) | (zz == nz - 1)
    lid = (~wall) & ((zz == 1) | (zz == nz - 2)) & (xx > 1) & (xx < nx - 2) & (yy > 1) & (yy < ny - 2)
    flags[wall] |= OBSTACLE
    flags[lid] |= ACCEL
    return flags


#: Time steps of SPEC's ref input (470.lbm, 304.olbm)
TIME_STEPS = 3000
#: The share of the ref's steps a run of up to so many bytes goes to: the whole run where it fits the time one
#: size is given
REACH = ((64 << 20, 1.0), (256 << 20, 1 / 4), (2 << 30, 1 / 2), (math.inf, 1 / 7))



@register
class OLbm(Scheduled, Workload):
    name = "olbm"
    proxies = "SPEC ACCEL 304.olbm (SPEC CPU 470.lbm)"

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        def nbytes(n: int) -> int:  # two grids of (round(1.3 n) + 4) x n x n cells of 20 doubles
            return 2 * (round(1.3 * n) + 2 * MARGIN_PLANES) * n * n * N_CELL_ENTRIES * 8

        n = 8
        while nbytes(n + 1) <= footprint:
            n += 1
        self.nx = self.ny = n
        self.nz = round(1.3 * n)
        self.setup_grid(cavity_flags(self.nz, self.ny, self.nx, rng))
        self.begin(math.inf, TIME_STEPS, reach(REACH, footprint))

    def setup_grid(self, flags: np.ndarray) -> None:
        """LBM_initializeGrid (equilibrium at rest, flags cleared), then set ``flags`` in both grids."""
        self.nz, self.ny, self.nx = flags.shape[0] - 2 * MARGIN_PLANES, flags.shape[1], flags.shape[2]
        grid = np.zeros((*flags.shape, N_CELL_ENTRIES), np.float64)
        grid[..., :Q] = W
        grid.view(np.uint32)[..., 2 * FLAGS] = flags
        self.src = grid
        self.dst = grid.copy()
        nx, plane = self.nx, self.nx * self.ny
        self.off = (CX + CY * nx + CZ * plane).astype(np.int64)
        # Which cells and slots hold the fluid's mass (see mass()).
        ncell = flags.size
        in_domain = np.zeros(ncell, bool)
        in_domain[MARGIN_PLANES * plane:(MARGIN_PLANES + self.nz) * plane] = True
        obstacle = (flags.reshape(-1) & OBSTACLE) != 0
        self._fluid = in_domain & ~obstacle
        cell = np.arange(ncell)
        self._transit = np.zeros((ncell, Q), bool)
        for i in range(Q):
            s = cell - self.off[i]
            ok = (s >= 0) & (s < ncell)
            self._transit[:, i] = in_domain & obstacle & ok & self._fluid[np.clip(s, 0, ncell - 1)]
        self.n_fluid = int(self._fluid.sum())
        self.time, self.cycles = 0.0, 0  # lattice units: progress is time steps

    def advance(self) -> None:
        """One time step (LBM_performStreamCollide, LBM_swapGrids)."""
        self.cycles += 1
        src = self.src.reshape(-1)
        _stream_collide(src, self.dst.reshape(-1), src.view(np.uint32), self.off, self.nz, self.ny, self.nx, OMEGA)
        self.src, self.dst = self.dst, self.src  # LBM_swapGrids

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {"srcGrid": (self.src, "field"), "dstGrid": (self.dst, "field")}

    def profile(self) -> AccessProfile:
        # Every domain cell of srcGrid is read once (19 values + the flag word); each value is
        # pushed to a neighbouring cell of dstGrid: 19 interleaved unit-stride write streams.
        domain = self.nz / (self.nz + 2 * MARGIN_PLANES)
        return AccessProfile(self.name, [
            Kernel("LBM_performStreamCollide", [
                Access("srcGrid", "read", fraction=domain),
                Access("dstGrid", "write", fraction=domain * Q / N_CELL_ENTRIES),
            ], flops=float(FLOPS_PER_FLUID_CELL * self.n_fluid)),
        ])

    def flags(self) -> np.ndarray:
        """The flag word of every cell (margins included), read back from inside ``srcGrid``."""
        return self.src.view(np.uint32)[..., 2 * FLAGS].copy()

    def mass(self) -> float:
        """Fluid mass: all distributions of fluid cells plus those in transit in obstacle cells.

        With the push scheme a value pushed into an obstacle cell waits there one step before
        it is bounced back, so it is counted in the obstacle's slot i when the cell it came
        from (one step against direction i) is fluid.
        """
        f = self.src.reshape(-1, N_CELL_ENTRIES)[:, :Q]
        return float(f[self._fluid].sum() + f[self._transit].sum())

    def density_velocity(self) -> tuple[np.ndarray, np.ndarray]:
        """Density (nz, ny, nx) and velocity (3, nz, ny, nx) of the domain cells (obstacles: rho 0)."""
        f = self.src[MARGIN_PLANES:MARGIN_PLANES + self.nz, ..., :Q]
        fluid = self._fluid.reshape(self.src.shape[:3])[MARGIN_PLANES:MARGIN_PLANES + self.nz]
        rho = np.where(fluid, f.sum(axis=-1), 0.0)
        j = np.stack([f @ c.astype(np.float64) for c in (CX, CY, CZ)])
        return rho, np.divide(j, rho, out=np.zeros_like(j), where=fluid)
