"""minighost: multi-variable 3-D stencil with ghost-cell exchange between blocks (proxy of SPEC ACCEL 359.miniGhost).

miniGhost (Mantevo; SPEC ACCEL 359.miniGhost is its OpenACC port) applies a 27-point (or
7-point) averaging stencil to several float64 variables on a domain split among ranks, each
rank's grid carrying a one-cell ghost layer. Each time step it runs the BSPMA scheme: pack
the faces of all variables into one send buffer per neighbour, exchange, unpack into the
ghost layers, then per variable accumulate the flux leaving through the domain boundary,
compute the stencil into ``WORK`` and copy it back, and check the global sum (GRIDSUM).

This proxy holds 2 x 2 x 1 blocks (the ranks of a GPU port, each its own arrays):
``blk{b}.GRID{v}`` per variable, one ``blk{b}.WORK``, and packed ``SEND_BUFFER_*`` /
``RECV_BUFFER_*`` per neighbour face (EAST/WEST along x, NORTH/SOUTH along y, FRONT/BACK
along z), plus the tiny ``SPIKES``/``SPIKE_LOC`` source tables. To give the 27-point
stencil its edge and corner ghosts, the exchange runs x, then y (faces widened over the x
ghosts), then z, as miniGhost's diagonal variant does. Boundaries are miniGhost's
Dirichlet zero: the domain's outer ghost cells stay 0 and what the stencil moves into them
is counted as flux out.

Initial data as upstream makes it (``MG_GRID_INIT``, ``MG_SPIKE_INIT`` in ``ref/MG_UTILS.F``): miniGhost
1.0 means to give each cell ``MOD(INT(100 r), NX*NY*NZ) + 1`` for a random ``r`` (an integer 1..100), but
it calls ``MG_RANDOM_SEED`` (which puts a fixed seed) before every ``RANDOM_NUMBER``, so every cell of
every variable gets the same draw: 48 with gfortran's generator (``r`` = 0.47107, :data:`FIRST_DRAW`). Ours
does the same (``initial = "minighost"``). The first spike goes in at the centre of the global grid, of
size NX*NY*NZ for the first variable and ``(r + 1)`` NX*NY*NZ*NUMPES for the others; any further spike at a
random cell. Whether SPEC's 359.miniGhost kept the re-seeding cannot be checked (its source is not public),
so notebook 09 also runs ``initial = "random"``, the fill the code means (a fresh integer 1..100 per cell),
and shows both.

For compressibility: the constant start compresses almost entirely; the stencil lowers the cells near the
Dirichlet boundary (a shell some sigma = 8 cells deep after 100 steps of the 27-point average) and spreads
the spike, while the core stays exactly 48 (the average of 27 equal values is exact); the ghost layers and
unused buffers hold zeros, and the send/receive buffers hold packed face copies. Under the random fill the
stencil averages dense integers into dense mantissas everywhere. The check: the blocked run equals the same
stencil on the undivided global grid (the exchange is right), and per variable the sum of the grid plus the
accumulated flux out equals the sources put in (miniGhost's conservation check, to round-off).

Run length, ours / upstream (Mantevo/miniGhost ``ref/default-settings.h``): ``num_tsteps`` = 100 time steps
per spike and ``num_spikes`` = 1, so 100 steps; SPEC publishes no ``num_tsteps`` for 359.miniGhost. Ours
runs those 100 at every size (:data:`TIME_STEPS`, :data:`NUM_SPIKES`), the whole run at each; one ``step``
of the workload is 1/28 of it (:mod:`~buddylib.workloads.hpc._schedule`), so its snapshots fall on the same
fractions as the other proxies'. The stencil is SPEC's default, 3D27PT (miniGhost's own default is
2D5PT); the variables are miniGhost's default 5. Per block (global grid 2m x 2m x m): quick m = 22,
32 MiB 52, 128 MiB 85, 1 GiB 174, 4 GiB 278.

Arrays, ours / upstream (read: Mantevo/miniGhost ``ref/DRIVER.F``, ``MG_UTILS.F``,
``MG_BUFINIT.F``, ``MG_CONSTANTS.F``; SPEC ACCEL 359.miniGhost's own source is not public), per
rank (ours: per block):

* ``blk{b}.GRID{v}``, (nz+2, ny+2, nx+2) per variable / ``GRID(0:NX+1, 0:NY+1, 0:NZ+1, NVARS)``;
* ``blk{b}.WORK`` / ``WORK(0:NX+1, 0:NY+1, 0:NZ+1)``;
* ``SEND_BUFFER_*`` / ``RECV_BUFFER_*`` per neighbour face / the same, allocated per existing
  neighbour. Ours are sized to the packed data (EAST/WEST NVARS x NZ x NY, NORTH/SOUTH
  NVARS x NZ x (NX+2); 2 x 2 x 1 blocks have no FRONT/BACK neighbours), upstream's to the
  ghost-inclusive bound (EAST/WEST NVARS (NY+2)(NZ+2), NORTH/SOUTH NVARS (NX+2)(NZ+2),
  BACK/FRONT NVARS (NX+2)(NY+2));
* ``SPIKES`` (NVARS, NSPIKES) and ``SPIKE_LOC`` (4, NSPIKES) / ``SPIKES(NVARS, NSPIKES)`` and
  ``SPIKE_LOC(0:3, NSPIKES)``;
* not kept: ``FLUX_OUT``, ``SOURCE_TOTAL``, ``GRIDS_TO_SUM`` (NVARS each), ``NEIGHBORS`` and the
  MPI tags and requests.

Where ours differs, and why: one array per variable instead of one 4-D ``GRID`` (the same bytes,
split so each variable is its own allocation); buffers sized to what is packed in them (upstream
allocates the ghost-inclusive bound, part of it unused); the per-variable scalars and the MPI
bookkeeping (a few words per variable) are not kept.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, AccessProfile, Kernel, Workload
from buddylib.workloads.hpc._schedule import Scheduled

NUM_VARS = 5
#: miniGhost's defaults: spikes, and time steps run after each spike is inserted
NUM_SPIKES = 1
TIME_STEPS = 100
#: gfortran's first ``RANDOM_NUMBER`` after ``MG_RANDOM_SEED`` (every seed word 8): what every cell draws
FIRST_DRAW = 0.47106687604729458
#: the start: miniGhost 1.0's (every cell the same draw) or the per-cell draw it means (notebook 09)
INITIAL = {"minighost": "miniGhost 1.0 as released (every cell 48)", "random": "a fresh integer 1..100 per cell"}
BLOCKS = (2, 2, 1)  # blocks along x, y, z
ERROR_TOL = 1e-8  # miniGhost's default check tolerance for float64
PARALLEL_CELLS = 40**3
#: face names per axis (low side, high side), as miniGhost names its neighbours
FACES = (("WEST", "EAST"), ("SOUTH", "NORTH"), ("BACK", "FRONT"))


@nb.njit(cache=True)
def _stencil_rows(grid, work, points, k0, k1):
    """WORK = average over the 27-point (or 7-point) neighbourhood, planes k0 <= k < k1."""
    ny, nx = grid.shape[1] - 2, grid.shape[2] - 2
    for k in range(k0, k1):
        for j in range(1, ny + 1):
            for i in range(1, nx + 1):
                if points == 27:
                    s = 0.0
                    for dk in range(-1, 2):
                        for dj in range(-1, 2):
                            for di in range(-1, 2):
                                s += grid[k + dk, j + dj, i + di]
                    work[k, j, i] = s / 27.0
                else:
                    work[k, j, i] = (grid[k - 1, j, i] + grid[k, j - 1, i] + grid[k, j, i - 1] + grid[k, j, i]
                                     + grid[k, j, i + 1] + grid[k, j + 1, i] + grid[k + 1, j, i]) / 7.0


@nb.njit(parallel=True, cache=True)
def _stencil_par(grid, work, points):
    nz = grid.shape[0] - 2
    for k in nb.prange(1, nz + 1):
        _stencil_rows(grid, work, points, k, k + 1)


def stencil(grid: np.ndarray, work: np.ndarray, points: int) -> None:
    """miniGhost's stencil into ``work`` (interior), ghosts of ``grid`` as they are."""
    nz = grid.shape[0] - 2
    if grid[1:-1, 1:-1, 1:-1].size >= PARALLEL_CELLS:
        _stencil_par(grid, work, points)
    else:
        _stencil_rows(grid, work, points, 1, nz + 1)


@nb.njit(cache=True)
def _interior_sum(grid):
    s = 0.0
    for k in range(1, grid.shape[0] - 1):
        for j in range(1, grid.shape[1] - 1):
            for i in range(1, grid.shape[2] - 1):
                s += grid[k, j, i]
    return s


@nb.njit(cache=True)
def _flux_out(grid, ax, ay, az, points):
    """What the stencil moves from boundary cells into the zero ghosts of the domain boundary.

    ``ax[i]`` (etc.) counts the stencil offsets along that axis that stay inside the domain (3,
    or 2 at a physical boundary); a 27-point cell loses (27 - ax ay az)/27 of its value, a
    7-point cell (3 - ax) + (3 - ay) + (3 - az) sevenths.
    """
    nz, ny, nx = az.size, ay.size, ax.size
    s = 0.0
    for k in range(nz):
        for j in range(ny):
            edge = az[k] < 3 or ay[j] < 3
            step = 1 if edge else max(1, nx - 1)
            for i in range(0, nx, step):
                if points == 27:
                    w = (27 - ax[i] * ay[j] * az[k]) / 27.0
                else:
                    w = ((3 - ax[i]) + (3 - ay[j]) + (3 - az[k])) / 7.0
                if w != 0.0:
                    s += w * grid[k + 1, j + 1, i + 1]
    return s


def block_bytes(n: tuple[int, int, int], num_vars: int, blocks: tuple[int, int, int]) -> int:
    """Bytes of all allocations for blocks of n = (nx, ny, nz) interior cells."""
    nx, ny, nz = n
    grids = (num_vars + 1) * (nx + 2) * (ny + 2) * (nz + 2)
    faces = (ny * nz, (nx + 2) * nz, (nx + 2) * (ny + 2))
    nblk = blocks[0] * blocks[1] * blocks[2]
    buffers = sum(2 * num_vars * faces[a] * (blocks[a] - 1) * 2 * nblk // blocks[a] for a in range(3))
    return 8 * (nblk * grids + buffers) + 8 * num_vars * NUM_SPIKES + 4 * 4 * NUM_SPIKES


@register
class MiniGhost(Scheduled, Workload):
    name = "minighost"
    proxies = "SPEC ACCEL 359.miniGhost"
    initial = "minighost"  # a key of INITIAL

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        m = max(m for m in range(4, 512) if block_bytes((m, m, m), NUM_VARS, BLOCKS) <= footprint)
        self.init((m, m, m), rng)

    def init(self, n: tuple[int, int, int], rng: np.random.Generator, num_vars: int = NUM_VARS,
             blocks: tuple[int, int, int] = BLOCKS, points: int = 27, num_spikes: int = NUM_SPIKES,
             tsteps: int = TIME_STEPS) -> None:
        """Blocks of ``n`` = (nx, ny, nz) interior cells, grids as :attr:`initial` says, ``num_spikes`` spikes
        each followed by ``tsteps`` time steps, zero ghosts and buffers."""
        if self.initial not in INITIAL:
            raise ValueError(f"minighost: initial {self.initial!r}: one of {', '.join(INITIAL)}")
        self.n, self.num_vars, self.blocks, self.points = n, num_vars, blocks, points
        self.num_spikes, self.tsteps = num_spikes, tsteps
        nx, ny, nz = n
        bx, by, bz = blocks
        self.global_shape = (bz * nz, by * ny, bx * nx)  # [k, j, i]
        self.coords = [(ib, jb, kb) for kb in range(bz) for jb in range(by) for ib in range(bx)]
        cells = nx * ny * nz  # MG_GRID_INIT's NX*NY*NZ: one rank's (block's) cells
        self.grids = []
        for _ in self.coords:
            g = []
            for _ in range(num_vars):
                a = np.zeros((nz + 2, ny + 2, nx + 2))
                draw = (np.full((nz, ny, nx), int(FIRST_DRAW * 100)) if self.initial == "minighost"
                        else rng.integers(0, 100, (nz, ny, nx)))  # INT(100 r)
                a[1:-1, 1:-1, 1:-1] = draw % cells + 1
                g.append(a)
            self.grids.append(g)
        self.work = [np.zeros((nz + 2, ny + 2, nx + 2)) for _ in self.coords]
        face_shape = ((nz, ny), (nz, nx + 2), (ny + 2, nx + 2))
        self.send: list[dict[tuple[int, int], np.ndarray]] = []
        self.recv: list[dict[tuple[int, int], np.ndarray]] = []
        for c in self.coords:
            s, r = {}, {}
            for axis in range(3):
                for side in (0, 1):
                    if self._neighbour(c, axis, side) is not None:
                        s[axis, side] = np.zeros((num_vars, *face_shape[axis]))
                        r[axis, side] = np.zeros((num_vars, *face_shape[axis]))
            self.send.append(s)
            self.recv.append(r)
        # inside-stencil counts per axis: 2 at a cell on the domain boundary, else 3
        self.inside = []
        for c in self.coords:
            counts = []
            for axis, size in enumerate(n):
                a = np.full(size, 3, np.int64)
                if c[axis] == 0:
                    a[0] -= 1
                if c[axis] == blocks[axis] - 1:
                    a[-1] -= 1
                counts.append(a)
            self.inside.append(counts)
        total = int(np.prod(self.global_shape))
        # MG_SPIKE_INIT: (r + 1) x global cells x ranks; the first spike's first variable is the global cells
        self.spikes = (rng.random((num_vars, num_spikes)) + 1.0) * total * len(self.coords)
        self.spikes[0, 0] = total
        self.spike_loc = np.zeros((4, num_spikes), np.int32)  # block, i, j, k (1-based, local)
        for s in range(num_spikes):  # the first at the global centre, the others at random cells
            gijk = ([(g + 1) // 2 for g in self.global_shape[::-1]] if s == 0
                    else [int(rng.integers(1, g + 1)) for g in self.global_shape[::-1]])
            block = tuple((c - 1) // d for c, d in zip(gijk, n, strict=True))
            self.spike_loc[:, s] = (self.coords.index(block), *((c - 1) % d + 1 for c, d in zip(gijk, n, strict=True)))
        self.source_total = np.array([sum(_interior_sum(g[v]) for g in self.grids) for v in range(num_vars)])
        self.flux_out = np.zeros(num_vars)
        self.check_error = np.zeros(num_vars)
        self.time, self.cycles = 0.0, 0
        self.begin(math.inf, num_spikes * tsteps, 1.0)

    def _neighbour(self, c: tuple[int, int, int], axis: int, side: int) -> int | None:
        d = list(c)
        d[axis] += 1 if side else -1
        if not 0 <= d[axis] < self.blocks[axis]:
            return None
        return self.coords.index(tuple(d))

    def _insert_spike(self, s: int) -> None:
        b, i, j, k = (int(v) for v in self.spike_loc[:, s])
        for v in range(self.num_vars):
            self.grids[b][v][k, j, i] += self.spikes[v, s]
            self.source_total[v] += self.spikes[v, s]

    def _plane(self, axis: int, index: int) -> tuple:
        """The [k, j, i] slice of plane ``index`` along ``axis``, widened over already exchanged axes."""
        full, inner = slice(None), slice(1, -1)
        if axis == 0:
            return inner, inner, index
        if axis == 1:
            return inner, index, full
        return index, full, full

    def exchange(self) -> None:
        """BSPMA: per axis, pack all variables' faces, send (copy to the neighbour's receive buffer), unpack."""
        for axis in range(3):
            size = self.n[axis]
            for b in range(len(self.coords)):
                for side in (0, 1):
                    if (axis, side) in self.send[b]:
                        buf = self.send[b][axis, side]
                        src = self._plane(axis, size if side else 1)
                        for v in range(self.num_vars):
                            buf[v] = self.grids[b][v][src]
            for b, c in enumerate(self.coords):
                for side in (0, 1):
                    nb_ = self._neighbour(c, axis, side)
                    if nb_ is not None:
                        self.recv[nb_][axis, 1 - side][...] = self.send[b][axis, side]
            for b in range(len(self.coords)):
                for side in (0, 1):
                    if (axis, side) in self.recv[b]:
                        buf = self.recv[b][axis, side]
                        dst = self._plane(axis, size + 1 if side else 0)
                        for v in range(self.num_vars):
                            self.grids[b][v][dst] = buf[v]

    def advance(self) -> None:
        """One miniGhost time step (a spike first, where one is due: each before its ``tsteps`` steps)."""
        if self.cycles % self.tsteps == 0 and self.cycles // self.tsteps < self.num_spikes:
            self._insert_spike(self.cycles // self.tsteps)
        self.cycles += 1
        self.exchange()
        for v in range(self.num_vars):
            for b in range(len(self.coords)):
                g, w = self.grids[b][v], self.work[b]
                self.flux_out[v] += _flux_out(g, *self.inside[b], self.points)
                stencil(g, w, self.points)
                np.copyto(g[1:-1, 1:-1, 1:-1], w[1:-1, 1:-1, 1:-1])
            gsum = sum(_interior_sum(self.grids[b][v]) for b in range(len(self.coords)))
            self.check_error[v] = abs(gsum + self.flux_out[v] - self.source_total[v]) / self.source_total[v]
        if self.check_error.max() > ERROR_TOL:
            raise RuntimeError(f"minighost: GRIDSUM check failed at step {self.cycles}: {self.check_error.max():.3e}")

    def grid_sum(self, v: int) -> float:
        """miniGhost's GRIDSUM of variable ``v`` over all blocks."""
        return float(sum(_interior_sum(g[v]) for g in self.grids))

    def global_grid(self, v: int) -> np.ndarray:
        """Variable ``v`` reassembled on the undivided global grid (interior, [k, j, i])."""
        nx, ny, nz = self.n
        out = np.empty(self.global_shape)
        for b, (ib, jb, kb) in enumerate(self.coords):
            inner = self.grids[b][v][1:-1, 1:-1, 1:-1]
            out[kb * nz:(kb + 1) * nz, jb * ny:(jb + 1) * ny, ib * nx:(ib + 1) * nx] = inner
        return out

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        out: dict[str, tuple[np.ndarray, str]] = {}
        for b in range(len(self.coords)):
            for v, g in enumerate(self.grids[b]):
                out[f"blk{b}.GRID{v}"] = (g, "field")
            out[f"blk{b}.WORK"] = (self.work[b], "field")
            for (axis, side), buf in self.send[b].items():
                out[f"blk{b}.SEND_BUFFER_{FACES[axis][side]}"] = (buf, "other")
            for (axis, side), buf in self.recv[b].items():
                out[f"blk{b}.RECV_BUFFER_{FACES[axis][side]}"] = (buf, "other")
        out["SPIKES"] = (self.spikes, "other")
        out["SPIKE_LOC"] = (self.spike_loc, "index")
        return out

    def profile(self) -> AccessProfile:
        nx, ny, nz = self.n
        cells = float(nx * ny * nz)
        total = float((nx + 2) * (ny + 2) * (nz + 2))
        face = (ny * nz / total, (nx + 2) * nz / total, (nx + 2) * (ny + 2) / total)
        strides = ((nx + 2), (nx + 2) * (ny + 2), 1)  # elements between consecutive packed values (x faces worst)
        kernels: list[Kernel] = []
        for axis in range(3):
            for b in range(len(self.coords)):
                for side in (0, 1):
                    if (axis, side) not in self.send[b]:
                        continue
                    name = FACES[axis][side]
                    pat = "strided" if axis < 2 else "stream"
                    grids = [Access(f"blk{b}.GRID{v}", "read", pat, fraction=face[axis], stride=strides[axis]
                                    if pat == "strided" else 1) for v in range(self.num_vars)]
                    kernels.append(Kernel(f"pack {name} blk{b}", [*grids,
                                                                  Access(f"blk{b}.SEND_BUFFER_{name}", "write")], 0.0))
            for b, c in enumerate(self.coords):
                for side in (0, 1):
                    nb_ = self._neighbour(c, axis, side)
                    if nb_ is not None:
                        kernels.append(Kernel(f"send {FACES[axis][side]} blk{b}->blk{nb_}", [
                            Access(f"blk{b}.SEND_BUFFER_{FACES[axis][side]}"),
                            Access(f"blk{nb_}.RECV_BUFFER_{FACES[axis][1 - side]}", "write")], 0.0))
            for b in range(len(self.coords)):
                for side in (0, 1):
                    if (axis, side) not in self.recv[b]:
                        continue
                    name = FACES[axis][side]
                    pat = "strided" if axis < 2 else "stream"
                    grids = [Access(f"blk{b}.GRID{v}", "write", pat, fraction=face[axis], stride=strides[axis]
                                    if pat == "strided" else 1) for v in range(self.num_vars)]
                    kernels.append(Kernel(f"unpack {name} blk{b}", [Access(f"blk{b}.RECV_BUFFER_{name}"), *grids],
                                          0.0))
        surface = min(1.0, 2 * (nx * ny + ny * nz + nx * nz) / total)
        flops = 27.0 if self.points == 27 else 7.0
        for v in range(self.num_vars):
            for b in range(len(self.coords)):
                g, w = f"blk{b}.GRID{v}", f"blk{b}.WORK"
                kernels += [Kernel(f"flux_accumulate {g}", [Access(g, "read", "strided", fraction=surface)],
                                   3.0 * surface * total),
                            Kernel(f"stencil {g}", [Access(g), Access(w, "write")], flops * cells),
                            Kernel(f"copy {g}", [Access(w), Access(g, "write")], 0.0)]
            kernels.append(Kernel(f"gridsum {v}", [Access(f"blk{b}.GRID{v}") for b in range(len(self.coords))],
                                  cells * len(self.coords)))
        return AccessProfile(self.name, kernels)
