"""md: Lennard-Jones molecular dynamics with cell and neighbour lists (proxy of SPEC ACCEL 350.md).

350.md is a classical molecular-dynamics code: particles interacting through a short-range
pair potential, advanced by velocity Verlet, with forces summed over neighbour lists. This
proxy runs the standard Lennard-Jones liquid of the Mantevo miniMD benchmark (``ref/in.lj.miniMD``)
in reduced units (density 0.8442, initial temperature 1.44, cutoff 2.5, skin 0.3, dt 0.005,
100 steps), at every size for 100 steps as that input does. The start is miniMD's: the FCC sites
in the order ``create_atoms`` makes them (sub-boxes of 8^3 half-lattice sites), each atom's velocity
from its own Park-Miller stream seeded by its lattice id (five draws discarded before each
component), centre-of-mass motion removed and rescaled to T = 1.44, so the state needs no seed;
the lattice melts. Cell and neighbour lists are rebuilt every 10 steps (miniMD's 20 lets pairs
slip through the skin while the lattice melts from T = 1.44; at 10 none do, which the tests
check), and every rebuild after the first sorts the atoms by cell, as miniMD's ``Atom::sort`` does
with each of its rebuilds. The GPU port holds

* ``pos``, ``vel``, ``force`` — float64 (N, 3); ``epot`` — float64 per-atom energy (the
  force kernel writes it for the energy reduction);
* the cell list, rebuilt with the neighbour list: ``atom_cell`` (int32 cell of each atom),
  ``cell_start`` (int32 CSR offsets, one per cell + 1) and ``cell_atoms`` (int32 atom ids
  sorted by cell, a counting sort);
* the full neighbour list in CSR form: ``neigh_offsets`` (int32, N + 1) and ``neigh_list``
  (int32 neighbour ids of every atom within cutoff + skin; its capacity has 20 % headroom
  over the expected count, and the tail past the last offset keeps whatever earlier builds
  left there, as a device buffer does).

Sizes: quick 11^3 unit cells (5,324 atoms), 32 MiB 26^3 (70,304), 128 MiB 41^3 (275,684), 1 GiB
83^3 (2,287,148), 4 GiB 131^3 (8,992,364); miniMD's input is 32^3 (131,072 atoms). A row of the full list holds
the atoms of 27 cells in three planes of cells, so the ids one 128-byte entry holds spread over
about two planes of atoms, a span that grows as N^(2/3): BPC-32 pays a bit plane per doubling of
it, and the neighbour list, most of md's memory, compresses less as the system grows (notebook 09
measures it: ``fidelity.md_neighbours``). miniMD's list is built the same way from the same
ordering, so it does the same.

Which code SPEC's 350.md is: SPEC's description of OMP2012's 350.md (spec.org/omp2012/Docs/350.md.html)
is IU-MD, Indiana University's molecular dynamics of dense nuclear matter: 27,648 fully ionised carbon
and oxygen ions with a screened-Coulomb (Yukawa) pair force, read from ``md.in``. SPEC ACCEL reuses the
name, most likely for the same code. This proxy runs miniMD's Lennard-Jones liquid instead: the same kind
of arrays (positions, velocities, forces, cell and neighbour lists), a different potential and input.

Compressibility: the lattice start makes ``pos`` highly regular, and the melt destroys it;
the index arrays are small integers with local structure (neighbour ids near the atom's own
id, offsets growing by ~78 per atom); velocities and forces are full-mantissa doubles. The
force kernel gathers positions through ``neigh_list``, each pair computed from both sides
(no atomics), as GPU MD codes do, so total momentum stays zero to rounding.

Check (tests): total energy (with the potential shifted to zero at the cutoff) is conserved
to |dE / E| < 1e-3 and its error shrinks with dt^2, momentum stays zero, forces are minus the
gradient of the energy, and the neighbour list equals a brute-force search.

Arrays, ours / upstream. The source of SPEC ACCEL 350.md is not public; the problem and the
arrays are compared with Mantevo miniMD (``ref/atom.h``, ``atom.cpp``, ``neighbor.h``,
``neighbor.cpp``, ``force_lj.cpp``, ``comm.h``, read in Mantevo/miniMD), whose Lennard-Jones
problem this proxy runs:

=======================================  ========================================================
ours                                     miniMD (ref)
=======================================  ========================================================
``pos``, ``vel``, ``force`` (N, 3)       ``x``, ``v``, ``f`` (nmax x PAD, PAD = 3 or 4), local
                                         atoms followed by ghost (periodic image) atoms
(none)                                   ``xold`` (positions at the last rebuild), ``type``
``epot`` (N)                             (none: miniMD sums the energy into a scalar)
``atom_cell``, ``cell_start``,           ``bincount`` (mbins), ``bins`` (mbins x atoms_per_bin,
``cell_atoms``                           fixed capacity 8, grown on overflow), ``stencil``
``neigh_offsets``, ``neigh_list``        ``numneigh`` (nmax), ``neighbors`` (nmax x maxneighs,
                                         fixed-width rows, maxneighs 100 and grown on overflow)
(none)                                   ``comm``'s ``buf_send``, ``buf_recv`` and send lists
=======================================  ========================================================

Where ours differs, and why: it is laid out as a GPU port holds it: no ghost atoms (the force
kernel applies the minimum image itself, so there is no halo exchange and no comm buffers), a
counting-sorted CSR cell list and a CSR neighbour list (one kernel per atom reads a contiguous
row; miniMD's fixed-width rows hold the same ids plus unused slots), a per-atom ``epot`` the
force kernel writes for the energy reduction, and one atom type (no ``type`` array). ``xold``
is not kept: lists are rebuilt on a fixed schedule, not on a displacement check.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, AccessProfile, Kernel, Workload

#: in.lj.miniMD's run: 100 steps at every size
STEPS = 100
#: miniMD's create_atoms: the lattice is generated in sub-boxes of 8^3 half-lattice sites
SUBBOX = 8


def _minimd_sites(nc: int) -> np.ndarray:
    """FCC sites (i, j, k) in half lattice constants, (i + j + k) even, 0 <= i, j, k < 2 nc, in the order
    miniMD's ``create_atoms`` makes them: sub-boxes of 8^3 sites z-, then y-, then x-major, x fastest inside."""
    m = 2 * nc
    k, j, i = np.meshgrid(np.arange(m), np.arange(m), np.arange(m), indexing="ij")
    i, j, k = i.ravel(), j.ravel(), k.ravel()
    keep = (i + j + k) % 2 == 0
    i, j, k = i[keep], j[keep], k[keep]
    order = np.lexsort((i % SUBBOX, j % SUBBOX, k % SUBBOX, i // SUBBOX, j // SUBBOX, k // SUBBOX))
    return np.stack([i[order], j[order], k[order]], axis=1).astype(np.float64)


@nb.njit(cache=True)
def _park_miller(state):
    """miniMD's ``random``: Park-Miller minimal standard (Schrage), state in [1, 2^31 - 2]; (0, 1)."""
    k = state // 127773
    state = 16807 * (state - k * 127773) - 2836 * k
    if state < 0:
        state += 2147483647
    return state, state * (1.0 / 2147483647)


@nb.njit(cache=True)
def _minimd_velocities(sites, nc, vel):
    """Each atom's velocity from the stream seeded by its lattice id k (2n)^2 + j (2n) + i + 1: five draws
    discarded before each of vx, vy, vz (miniMD's create_atoms); uniform in (0, 1)."""
    m = 2 * nc
    for a in range(sites.shape[0]):
        state = int(sites[a, 2]) * m * m + int(sites[a, 1]) * m + int(sites[a, 0]) + 1
        for d in range(3):
            for _ in range(5):
                state, _r = _park_miller(state)
            state, vel[a, d] = _park_miller(state)


@nb.njit(cache=True)
def _bin(pos, box, nside, atom_cell, cell_start, cell_atoms):
    """Wrap atoms into the box and counting-sort them into cells (cell_start: CSR offsets)."""
    n = pos.shape[0]
    ncell = nside * nside * nside
    cell_start[:] = 0
    scale = nside / box
    for i in range(n):
        for d in range(3):
            x = pos[i, d] - box * math.floor(pos[i, d] / box)
            if x >= box:  # rounding of a tiny negative coordinate
                x -= box
            pos[i, d] = x
        cx = min(int(pos[i, 0] * scale), nside - 1)
        cy = min(int(pos[i, 1] * scale), nside - 1)
        cz = min(int(pos[i, 2] * scale), nside - 1)
        c = (cz * nside + cy) * nside + cx
        atom_cell[i] = c
        cell_start[c + 1] += 1
    for c in range(ncell):
        cell_start[c + 1] += cell_start[c]
    for i in range(n):  # fill, using cell_start[c] as the cursor of cell c ...
        c = atom_cell[i]
        cell_atoms[cell_start[c]] = i
        cell_start[c] += 1
    for c in range(ncell, 0, -1):  # ... which leaves it at the next cell's start: shift back
        cell_start[c] = cell_start[c - 1]
    cell_start[0] = 0


#: atoms per parallel block; systems up to SERIAL atoms run on one thread (no thread team to wake)
BLOCK = 2048
SERIAL = 16384


@nb.njit(cache=True)
def _neighbours_rows(pos, box, nside, atom_cell, cell_start, cell_atoms, rlist2, offsets, nlist, fill, i0, i1):
    """Full neighbour list of atoms i0..i1-1 from the 27 surrounding cells: count pass or fill pass.

    Positions were just wrapped into the box, so the periodic image of a neighbouring cell is
    a whole-box shift of its atoms.
    """
    for i in range(i0, i1):
        c = atom_cell[i]
        cx = c % nside
        cy = (c // nside) % nside
        cz = c // (nside * nside)
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        k = offsets[i] if fill else 0
        end = offsets[i + 1] if fill else 0
        for dz in range(-1, 2):
            z = cz + dz
            sz = box if z < 0 else (-box if z >= nside else 0.0)
            z %= nside
            for dy in range(-1, 2):
                y = cy + dy
                sy = box if y < 0 else (-box if y >= nside else 0.0)
                y %= nside
                for dx in range(-1, 2):
                    x = cx + dx
                    sx = box if x < 0 else (-box if x >= nside else 0.0)
                    x %= nside
                    nc = (z * nside + y) * nside + x
                    for jj in range(cell_start[nc], cell_start[nc + 1]):
                        j = cell_atoms[jj]
                        rx = xi + sx - pos[j, 0]
                        ry = yi + sy - pos[j, 1]
                        rz = zi + sz - pos[j, 2]
                        hit = (rx * rx + ry * ry + rz * rz < rlist2) & (j != i)
                        if fill and k < end:  # branch-free: write, keep it if a hit
                            nlist[k] = j
                        k += hit
        if not fill:
            offsets[i + 1] = k


@nb.njit(parallel=True, cache=True)
def _neighbours_par(pos, box, nside, atom_cell, cell_start, cell_atoms, rlist2, offsets, nlist, fill):
    n = pos.shape[0]
    for b in nb.prange((n + BLOCK - 1) // BLOCK):
        _neighbours_rows(pos, box, nside, atom_cell, cell_start, cell_atoms, rlist2, offsets, nlist, fill,
                         b * BLOCK, min(n, (b + 1) * BLOCK))


def _neighbours(pos, box, nside, atom_cell, cell_start, cell_atoms, rlist2, offsets, nlist, fill):
    """Count pass (fill=False: counts into offsets[1:]) or fill pass of the neighbour list."""
    if pos.shape[0] <= SERIAL:
        _neighbours_rows(pos, box, nside, atom_cell, cell_start, cell_atoms, rlist2, offsets, nlist, fill,
                         0, pos.shape[0])
    else:
        _neighbours_par(pos, box, nside, atom_cell, cell_start, cell_atoms, rlist2, offsets, nlist, fill)


@nb.njit(cache=True)
def _scan(offsets):
    """Counts in offsets[1:] -> CSR offsets (exclusive prefix sum), in place."""
    offsets[0] = 0
    for i in range(1, offsets.size):
        offsets[i] += offsets[i - 1]


@nb.njit(cache=True)
def _forces_rows(pos, box, offsets, nlist, rc2, eshift, force, epot, i0, i1):
    """LJ forces and per-atom energy of atoms i0..i1-1 over the full neighbour list (positions gathered)."""
    inv = 1.0 / box
    for i in range(i0, i1):
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        fx = 0.0
        fy = 0.0
        fz = 0.0
        e = 0.0
        for jj in range(offsets[i], offsets[i + 1]):
            j = nlist[jj]
            rx = xi - pos[j, 0]
            ry = yi - pos[j, 1]
            rz = zi - pos[j, 2]
            rx -= box * np.rint(rx * inv)
            ry -= box * np.rint(ry * inv)
            rz -= box * np.rint(rz * inv)
            r2 = rx * rx + ry * ry + rz * rz
            if r2 < rc2:
                sr2 = 1.0 / r2
                sr6 = sr2 * sr2 * sr2
                fpair = 48.0 * sr6 * (sr6 - 0.5) * sr2
                fx += rx * fpair
                fy += ry * fpair
                fz += rz * fpair
                e += 4.0 * sr6 * (sr6 - 1.0) - eshift
        force[i, 0] = fx
        force[i, 1] = fy
        force[i, 2] = fz
        epot[i] = 0.5 * e


@nb.njit(parallel=True, cache=True)
def _forces_par(pos, box, offsets, nlist, rc2, eshift, force, epot):
    n = pos.shape[0]
    for b in nb.prange((n + BLOCK - 1) // BLOCK):
        _forces_rows(pos, box, offsets, nlist, rc2, eshift, force, epot, b * BLOCK, min(n, (b + 1) * BLOCK))


def _forces(pos, box, offsets, nlist, rc2, eshift, force, epot):
    if pos.shape[0] <= SERIAL:
        _forces_rows(pos, box, offsets, nlist, rc2, eshift, force, epot, 0, pos.shape[0])
    else:
        _forces_par(pos, box, offsets, nlist, rc2, eshift, force, epot)


@nb.njit(cache=True)
def _integrate_initial(pos, vel, force, dt):
    """Half kick and drift (unit mass); memory-bound, so one thread here."""
    for i in range(pos.shape[0]):
        for d in range(3):
            vel[i, d] += 0.5 * dt * force[i, d]
            pos[i, d] += dt * vel[i, d]


@nb.njit(cache=True)
def _integrate_final(vel, force, dt):
    """Second half kick."""
    for i in range(vel.shape[0]):
        for d in range(3):
            vel[i, d] += 0.5 * dt * force[i, d]


@register
class MD(Workload):
    name = "md"
    proxies = "SPEC ACCEL 350.md"

    rho = 0.8442
    temperature = 1.44
    dt = 0.005
    rc = 2.5
    skin = 0.3
    every = 10  # steps between neighbour-list rebuilds
    headroom = 1.2  # neighbour-list capacity over the expected count

    def _bytes_per_atom(self) -> float:
        per_atom_neigh = 4 / 3 * np.pi * (self.rc + self.skin) ** 3 * self.rho
        return 3 * 24 + 8 + 3 * 4 + 4 * self.headroom * per_atom_neigh + 4 / 20  # + cells (~20 atoms each)

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        nc = max(6, int((footprint / self._bytes_per_atom() / 4) ** (1 / 3)))
        while nc > 6 and self._estimate(nc) > footprint:
            nc -= 1
        self.n_steps = STEPS
        self.setup_lattice(nc, rng)

    def _estimate(self, nc: int) -> int:
        n = 4 * nc**3
        box = (n / self.rho) ** (1 / 3)
        nside = int(box / (self.rc + self.skin))
        return int(n * (3 * 24 + 8 + 3 * 4) + 4 * (n + 1) + 4 * (nside**3 + 1) + 4 * self._capacity(n))

    def _capacity(self, n: int) -> int:
        return math.ceil(self.headroom * n * 4 / 3 * np.pi * (self.rc + self.skin) ** 3 * self.rho)

    def setup_lattice(self, nc: int, rng: np.random.Generator | None = None) -> None:
        """``nc``^3 FCC unit cells (4 nc^3 atoms) at density ``rho``, velocities at ``temperature``: miniMD's
        ``create_atoms`` and ``create_velocity`` (the atoms in its order, each atom's velocity from its own
        Park-Miller stream), so the state needs no seed (``rng`` is not used)."""
        n = 4 * nc**3
        alat = (4.0 / self.rho) ** (1.0 / 3.0)  # create_box
        self.box = nc * alat
        sites = _minimd_sites(nc)
        self.pos = 0.5 * alat * sites
        vel = np.empty((n, 3))
        _minimd_velocities(sites, nc, vel)
        vel -= vel.sum(axis=0) / n
        vel *= np.sqrt(self.temperature * 3 * (n - 1) / np.sum(vel**2))
        self.vel = vel
        self.force = np.zeros((n, 3))
        self.epot = np.zeros(n)
        self.nside = int(self.box / (self.rc + self.skin))
        if self.nside < 3:
            raise ValueError(f"md: box {self.box:.2f} holds fewer than 3 cells of cutoff + skin; use nc >= 6")
        self.atom_cell = np.zeros(n, np.int32)
        self.cell_start = np.zeros(self.nside**3 + 1, np.int32)
        self.cell_atoms = np.zeros(n, np.int32)
        self.neigh_offsets = np.zeros(n + 1, np.int32)
        self.neigh_list = np.zeros(self._capacity(n), np.int32)
        self.eshift = 4.0 * (self.rc**-12 - self.rc**-6)
        self.it = 0
        self.rebuild(sort=False)  # miniMD's set-up builds the lists on the atoms as created
        self.compute_forces()

    @property
    def n(self) -> int:
        return self.pos.shape[0]

    def rebuild(self, sort: bool = True) -> None:
        """Wrap positions, bin atoms into cells, sort the atoms by cell (miniMD's ``Atom::sort``, which runs
        with every rebuild after the first), build the neighbour list (count, scan, fill)."""
        _bin(self.pos, self.box, self.nside, self.atom_cell, self.cell_start, self.cell_atoms)
        if sort:
            order = self.cell_atoms.copy()
            self.pos[:] = self.pos[order]
            self.vel[:] = self.vel[order]
            _bin(self.pos, self.box, self.nside, self.atom_cell, self.cell_start, self.cell_atoms)
        args = (self.pos, self.box, self.nside, self.atom_cell, self.cell_start, self.cell_atoms,
                (self.rc + self.skin) ** 2, self.neigh_offsets)
        _neighbours(*args, self.neigh_list, False)
        _scan(self.neigh_offsets)
        total = int(self.neigh_offsets[-1])
        if total > self.neigh_list.size:  # the device buffer is reallocated, larger
            self.neigh_list = np.zeros(int(total * 1.1), np.int32)
        _neighbours(*args, self.neigh_list, True)

    def compute_forces(self) -> None:
        _forces(self.pos, self.box, self.neigh_offsets, self.neigh_list, self.rc**2, self.eshift,
                self.force, self.epot)

    def step(self) -> None:
        _integrate_initial(self.pos, self.vel, self.force, self.dt)
        self.it += 1
        if self.it % self.every == 0:
            self.rebuild()
        self.compute_forces()
        _integrate_final(self.vel, self.force, self.dt)

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {
            "pos": (self.pos, "field"), "vel": (self.vel, "field"), "force": (self.force, "field"),
            "epot": (self.epot, "field"),
            "atom_cell": (self.atom_cell, "index"), "cell_start": (self.cell_start, "index"),
            "cell_atoms": (self.cell_atoms, "index"),
            "neigh_offsets": (self.neigh_offsets, "index"), "neigh_list": (self.neigh_list, "index"),
        }

    def profile(self) -> AccessProfile:
        n = self.n
        pairs = int(self.neigh_offsets[-1])
        used = max(pairs / self.neigh_list.size, 1e-9)
        ncell = self.cell_start.size - 1
        candidates = 27 * n * n / ncell  # distance checks of one neighbour-list pass
        amort = 1.0 / self.every  # binning and the list build run once every `every` steps
        return AccessProfile(self.name, [
            Kernel("integrate_initial", [Access("force", "read"), Access("vel", "readwrite"),
                                         Access("pos", "readwrite")], flops=12.0 * n),
            Kernel("bin_atoms", [Access("pos", "readwrite", passes=amort), Access("atom_cell", "write", passes=amort),
                                 Access("cell_start", "readwrite", "random", passes=amort),
                                 Access("cell_atoms", "write", "random", passes=amort)],
                   flops=amort * 12.0 * n),
            Kernel("build_neighbours", [
                Access("atom_cell", "read", passes=2 * amort), Access("cell_start", "read", passes=2 * amort),
                Access("cell_atoms", "read", passes=2 * amort),
                Access("pos", "read", "gather", index="cell_atoms", passes=2 * amort, row=3),
                Access("neigh_offsets", "readwrite", passes=2 * amort),
                Access("neigh_list", "write", fraction=used, passes=amort)], flops=amort * 2 * 14.0 * candidates),
            Kernel("force", [Access("neigh_offsets", "read"), Access("neigh_list", "read", fraction=used),
                             Access("pos", "read", "gather", index="neigh_list", row=3), Access("force", "write"),
                             Access("epot", "write")], flops=35.0 * pairs),
            Kernel("integrate_final", [Access("force", "read"), Access("vel", "readwrite")], flops=6.0 * n),
        ])

    def kinetic_energy(self) -> float:
        return float(0.5 * np.sum(self.vel**2))

    def potential_energy(self) -> float:
        """LJ energy shifted to zero at the cutoff, as of the last force computation."""
        return float(np.sum(self.epot))

    def energy(self) -> float:
        """Total (kinetic + shifted potential) energy."""
        return self.kinetic_energy() + self.potential_energy()

    def momentum(self) -> np.ndarray:
        return self.vel.sum(axis=0)

    def temperature_now(self) -> float:
        return float(np.sum(self.vel**2) / (3 * (self.n - 1)))
