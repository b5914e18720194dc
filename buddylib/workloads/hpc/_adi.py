"""What the NAS SP and BT proxies share (NPB 3.3, as ported to GPUs for SPEC ACCEL).

SP and BT solve the same problem: the 3-D compressible Navier-Stokes equations (five
conserved variables rho, rho u, rho v, rho w, rho E) on the unit cube with a manufactured
solution — ``exact_solution`` is a fixed polynomial in (xi, eta, zeta) with coefficients
``CE``, ``exact_rhs`` is the forcing that makes it a solution of the discrete equations'
continuous counterpart, and Dirichlet boundary values come from it. Both run the same
``compute_rhs`` (central differences of the Euler fluxes, viscous terms, fourth-order
artificial dissipation), then factor the implicit operator by ADI into x-, y- and z-line
solves, then ``add`` the increment; only the line solves differ: SP (``sp.py``) diagonalises
the flux Jacobians and solves three scalar pentadiagonal systems per line, BT (``bt.py``)
solves the 5x5 block-tridiagonal systems per line. ``ADI`` is the workload both derive
from; ``sweep`` and ``line`` give every line of a direction as views, so each proxy's
x/y/z-solve is one loop over them.

Arrays follow the GPU ports: ``u[5][KMAX][JMAXP+1][IMAXP+1]`` (variable-major, i fastest),
with NPB's padding — the j and i extents are ``n // 2 * 2 + 1``, so an even grid carries one
never-written column and row per plane. The constants, the boundary stencils of the
dissipation and the verification norms are NPB's; ``grid(n)`` gives the padded shape.
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar

import numba as nb
import numpy as np

from buddylib.workloads.base import QUICK_LIMIT, Access, AccessProfile, Kernel, Workload, grid_kernel, threads_for
from buddylib.workloads.hpc._schedule import Scheduled, reach

# NPB set_constants
C1, C2, C3, C4, C5 = 1.4, 0.4, 0.1, 1.0, 1.4
BT = math.sqrt(0.5)
C1C2 = C1 * C2
C1C5 = C1 * C5
C3C4 = C3 * C4
C1345 = C1C5 * C3C4
CONZ1 = 1.0 - C1C5
CON43 = 4.0 / 3.0
CON16 = 1.0 / 6.0
C2IV = 2.5
#: second-order dissipation coefficients dx1..dx5 (all equal per direction), dy, dz
DCOEF = (0.75, 0.75, 1.0)
DSSP = 0.25 * max(DCOEF)
CE = np.array([
    [2.0, 0.0, 0.0, 4.0, 5.0, 3.0, 0.5, 0.02, 0.01, 0.03, 0.5, 0.4, 0.3],
    [1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.01, 0.03, 0.02, 0.4, 0.3, 0.5],
    [2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.04, 0.03, 0.05, 0.3, 0.5, 0.4],
    [2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.03, 0.05, 0.04, 0.2, 0.1, 0.3],
    [5.0, 4.0, 3.0, 2.0, 0.1, 0.4, 0.3, 0.05, 0.04, 0.03, 0.1, 0.3, 0.2],
])


def padded(n: int) -> int:
    """NPB's padded extent of an n-point direction: IMAXP + 1 with IMAXP = n / 2 * 2."""
    return n // 2 * 2 + 1


def grid(n: int) -> tuple[int, int, int]:
    """Shape (KMAX, JMAXP+1, IMAXP+1) of a scalar field on an n^3 grid."""
    return n, padded(n), padded(n)


@nb.njit(cache=True, inline="always")
def _exact(xi, eta, zeta, ce, m):
    return (ce[m, 0] + xi * (ce[m, 1] + xi * (ce[m, 4] + xi * (ce[m, 7] + xi * ce[m, 10])))
            + eta * (ce[m, 2] + eta * (ce[m, 5] + eta * (ce[m, 8] + eta * ce[m, 11])))
            + zeta * (ce[m, 3] + zeta * (ce[m, 6] + zeta * (ce[m, 9] + zeta * ce[m, 12]))))


@nb.njit(cache=True)
def exact_solution(xi, eta, zeta, ce):
    """The manufactured solution at one point, five conserved variables."""
    out = np.empty(5)
    for m in range(5):
        out[m] = _exact(xi, eta, zeta, ce, m)
    return out


@nb.njit(cache=True, inline="always")
def _d4(um2, um1, u0, up1, up2, i, n):
    """NPB's fourth-difference dissipation stencil at i of an n-point line (one-sided near ends)."""
    if i == 1:
        return 5.0 * u0 - 4.0 * up1 + up2
    if i == 2:
        return -4.0 * um1 + 6.0 * u0 - 4.0 * up1 + up2
    if i == n - 3:
        return um2 - 4.0 * um1 + 6.0 * u0 - 4.0 * up1
    if i == n - 2:
        return um2 - 4.0 * um1 + 5.0 * u0
    return um2 - 4.0 * um1 + 6.0 * u0 - 4.0 * up1 + up2


@nb.njit(cache=True)
def exact_rhs(forcing, gp0, gp1, gp2, ce):
    """NPB exact_rhs: the forcing that makes ``exact_solution`` solve the discrete equations."""
    forcing[:] = 0.0
    gps = (gp0, gp1, gp2)
    nmax = max(gp0, gp1, gp2)
    ue = np.empty((nmax, 5))
    buf = np.empty((nmax, 5))
    cuf = np.empty(nmax)
    q = np.empty(nmax)
    for d in range(3):
        n = gps[d]
        t1 = float(n - 1) ** 2
        t2 = (n - 1) / 2.0
        t3 = float(n - 1)
        dd = DCOEF[d]
        con1 = C3C4 * t3 * CON43 * t3
        con2 = C3C4 * t3 * t3
        con3 = C3C4 * t3 * CONZ1 * t3
        con4 = C3C4 * t3 * CON16 * t3
        con5 = C3C4 * t3 * C1C5 * t3
        v = d + 1
        # lines along d through interior points of the other two directions
        na, nb_ = (gp1, gp2) if d == 0 else ((gp0, gp2) if d == 1 else (gp0, gp1))
        for b in range(1, nb_ - 1):
            for a in range(1, na - 1):
                for s in range(n):
                    if d == 0:
                        i, j, k = s, a, b
                    elif d == 1:
                        i, j, k = a, s, b
                    else:
                        i, j, k = a, b, s
                    xi, eta, zeta = i / (gp0 - 1.0), j / (gp1 - 1.0), k / (gp2 - 1.0)
                    for m in range(5):
                        ue[s, m] = _exact(xi, eta, zeta, ce, m)
                    dtpp = 1.0 / ue[s, 0]
                    for m in range(1, 5):
                        buf[s, m] = dtpp * ue[s, m]
                    cuf[s] = buf[s, v] * buf[s, v]
                    buf[s, 0] = buf[s, 1] ** 2 + buf[s, 2] ** 2 + buf[s, 3] ** 2
                    q[s] = 0.5 * (buf[s, 1] * ue[s, 1] + buf[s, 2] * ue[s, 2] + buf[s, 3] * ue[s, 3])
                for s in range(1, n - 1):
                    if d == 0:
                        i, j, k = s, a, b
                    elif d == 1:
                        i, j, k = a, s, b
                    else:
                        i, j, k = a, b, s
                    p, mm = s + 1, s - 1
                    f = forcing[:, k, j, i]
                    f[0] += -t2 * (ue[p, v] - ue[mm, v]) + dd * t1 * (ue[p, 0] - 2.0 * ue[s, 0] + ue[mm, 0])
                    for m in range(1, 4):
                        if m == v:
                            f[m] += (-t2 * ((ue[p, m] * buf[p, v] + C2 * (ue[p, 4] - q[p]))
                                            - (ue[mm, m] * buf[mm, v] + C2 * (ue[mm, 4] - q[mm])))
                                     + con1 * (buf[p, m] - 2.0 * buf[s, m] + buf[mm, m]))
                        else:
                            f[m] += (-t2 * (ue[p, m] * buf[p, v] - ue[mm, m] * buf[mm, v])
                                     + con2 * (buf[p, m] - 2.0 * buf[s, m] + buf[mm, m]))
                        f[m] += dd * t1 * (ue[p, m] - 2.0 * ue[s, m] + ue[mm, m])
                    f[4] += (-t2 * (buf[p, v] * (C1 * ue[p, 4] - C2 * q[p])
                                    - buf[mm, v] * (C1 * ue[mm, 4] - C2 * q[mm]))
                             + 0.5 * con3 * (buf[p, 0] - 2.0 * buf[s, 0] + buf[mm, 0])
                             + con4 * (cuf[p] - 2.0 * cuf[s] + cuf[mm])
                             + con5 * (buf[p, 4] - 2.0 * buf[s, 4] + buf[mm, 4])
                             + dd * t1 * (ue[p, 4] - 2.0 * ue[s, 4] + ue[mm, 4]))
                    sm2, sp2 = max(s - 2, 0), min(s + 2, n - 1)
                    for m in range(5):
                        f[m] -= DSSP * _d4(ue[sm2, m], ue[mm, m], ue[s, m], ue[p, m], ue[sp2, m], s, n)
    for k in range(1, gp2 - 1):
        for j in range(1, gp1 - 1):
            for i in range(1, gp0 - 1):
                for m in range(5):
                    forcing[m, k, j, i] = -forcing[m, k, j, i]


@nb.njit(cache=True)
def initialize(u, gp0, gp1, gp2, ce):
    """NPB initialize: trilinear transfinite interpolation of the boundary values, exact on the faces."""
    pface = np.empty((2, 3, 5))
    for k in range(gp2):
        zeta = k / (gp2 - 1.0)
        for j in range(gp1):
            eta = j / (gp1 - 1.0)
            for i in range(gp0):
                xi = i / (gp0 - 1.0)
                for m in range(5):
                    for s in range(2):
                        pface[s, 0, m] = _exact(float(s), eta, zeta, ce, m)
                        pface[s, 1, m] = _exact(xi, float(s), zeta, ce, m)
                        pface[s, 2, m] = _exact(xi, eta, float(s), ce, m)
                    pxi = xi * pface[1, 0, m] + (1.0 - xi) * pface[0, 0, m]
                    peta = eta * pface[1, 1, m] + (1.0 - eta) * pface[0, 1, m]
                    pzeta = zeta * pface[1, 2, m] + (1.0 - zeta) * pface[0, 2, m]
                    u[m, k, j, i] = (pxi + peta + pzeta - pxi * peta - pxi * pzeta - peta * pzeta
                                     + pxi * peta * pzeta)
                if i == 0 or j == 0 or k == 0 or i == gp0 - 1 or j == gp1 - 1 or k == gp2 - 1:
                    for m in range(5):
                        u[m, k, j, i] = _exact(xi, eta, zeta, ce, m)


@grid_kernel
def compute_rhs(u, rhs, forcing, rho_i, us, vs, ws, qs, square, speed, gp0, gp1, gp2, dt, with_speed):
    """NPB compute_rhs: auxiliary fields, then forcing + flux differences + dissipation, times dt."""
    for k in nb.prange(gp2):
        for j in range(gp1):
            for i in range(gp0):
                rho_inv = 1.0 / u[0, k, j, i]
                rho_i[k, j, i] = rho_inv
                us[k, j, i] = u[1, k, j, i] * rho_inv
                vs[k, j, i] = u[2, k, j, i] * rho_inv
                ws[k, j, i] = u[3, k, j, i] * rho_inv
                sq = 0.5 * (u[1, k, j, i] ** 2 + u[2, k, j, i] ** 2 + u[3, k, j, i] ** 2) * rho_inv
                square[k, j, i] = sq
                qs[k, j, i] = sq * rho_inv
                if with_speed:
                    speed[k, j, i] = math.sqrt(C1C2 * rho_inv * (u[4, k, j, i] - sq))
                for m in range(5):
                    rhs[m, k, j, i] = forcing[m, k, j, i]
    gps = (gp0, gp1, gp2)
    for k in nb.prange(1, gp2 - 1):
        acc = np.empty(5)
        for j in range(1, gp1 - 1):
            for i in range(1, gp0 - 1):
                acc[:] = 0.0
                for d in range(3):
                    n = gps[d]
                    t1 = float(n - 1) ** 2
                    t2 = (n - 1) / 2.0
                    t3 = float(n - 1)
                    dd = DCOEF[d]
                    con2 = C3C4 * t3 * t3
                    con3 = C3C4 * t3 * CONZ1 * t3
                    con4 = C3C4 * t3 * CON16 * t3
                    con5 = C3C4 * t3 * C1C5 * t3
                    v = d + 1
                    if d == 0:
                        s, kp, jp, ip, km, jm, im = i, k, j, i + 1, k, j, i - 1
                        kp2, jp2, ip2, km2, jm2, im2 = k, j, min(i + 2, n - 1), k, j, max(i - 2, 0)
                        vel = us
                    elif d == 1:
                        s, kp, jp, ip, km, jm, im = j, k, j + 1, i, k, j - 1, i
                        kp2, jp2, ip2, km2, jm2, im2 = k, min(j + 2, n - 1), i, k, max(j - 2, 0), i
                        vel = vs
                    else:
                        s, kp, jp, ip, km, jm, im = k, k + 1, j, i, k - 1, j, i
                        kp2, jp2, ip2, km2, jm2, im2 = min(k + 2, n - 1), j, i, max(k - 2, 0), j, i
                        vel = ws
                    vp, v0, vm = vel[kp, jp, ip], vel[k, j, i], vel[km, jm, im]
                    acc[0] += (dd * t1 * (u[0, kp, jp, ip] - 2.0 * u[0, k, j, i] + u[0, km, jm, im])
                               - t2 * (u[v, kp, jp, ip] - u[v, km, jm, im]))
                    for m in range(1, 4):
                        if m == 1:
                            velm = us
                        elif m == 2:
                            velm = vs
                        else:
                            velm = ws
                        acc[m] += dd * t1 * (u[m, kp, jp, ip] - 2.0 * u[m, k, j, i] + u[m, km, jm, im])
                        if m == v:
                            acc[m] += (con2 * CON43 * (vp - 2.0 * v0 + vm)
                                       - t2 * (u[m, kp, jp, ip] * vp - u[m, km, jm, im] * vm
                                               + (u[4, kp, jp, ip] - square[kp, jp, ip]
                                                  - u[4, km, jm, im] + square[km, jm, im]) * C2))
                        else:
                            acc[m] += (con2 * (velm[kp, jp, ip] - 2.0 * velm[k, j, i] + velm[km, jm, im])
                                       - t2 * (u[m, kp, jp, ip] * vp - u[m, km, jm, im] * vm))
                    acc[4] += (dd * t1 * (u[4, kp, jp, ip] - 2.0 * u[4, k, j, i] + u[4, km, jm, im])
                               + con3 * (qs[kp, jp, ip] - 2.0 * qs[k, j, i] + qs[km, jm, im])
                               + con4 * (vp * vp - 2.0 * v0 * v0 + vm * vm)
                               + con5 * (u[4, kp, jp, ip] * rho_i[kp, jp, ip] - 2.0 * u[4, k, j, i] * rho_i[k, j, i]
                                         + u[4, km, jm, im] * rho_i[km, jm, im])
                               - t2 * ((C1 * u[4, kp, jp, ip] - C2 * square[kp, jp, ip]) * vp
                                       - (C1 * u[4, km, jm, im] - C2 * square[km, jm, im]) * vm))
                    for m in range(5):
                        acc[m] -= DSSP * _d4(u[m, km2, jm2, im2], u[m, km, jm, im], u[m, k, j, i],
                                             u[m, kp, jp, ip], u[m, kp2, jp2, ip2], s, n)
                for m in range(5):
                    rhs[m, k, j, i] = (rhs[m, k, j, i] + acc[m]) * dt


@grid_kernel
def add(u, rhs, gp0, gp1, gp2):
    """u += rhs on the interior."""
    for k in nb.prange(1, gp2 - 1):
        for j in range(1, gp1 - 1):
            for i in range(1, gp0 - 1):
                for m in range(5):
                    u[m, k, j, i] += rhs[m, k, j, i]


@nb.njit(cache=True)
def error_norm(u, gp0, gp1, gp2, ce):
    """NPB error_norm: RMS deviation of u from the exact solution, per variable."""
    rms = np.zeros(5)
    for k in range(gp2):
        zeta = k / (gp2 - 1.0)
        for j in range(gp1):
            eta = j / (gp1 - 1.0)
            for i in range(gp0):
                xi = i / (gp0 - 1.0)
                for m in range(5):
                    e = u[m, k, j, i] - _exact(xi, eta, zeta, ce, m)
                    rms[m] += e * e
    for m in range(5):
        rms[m] = math.sqrt(rms[m] / ((gp0 - 2.0) * (gp1 - 2.0) * (gp2 - 2.0)))
    return rms


@nb.njit(cache=True)
def rhs_norm(rhs, gp0, gp1, gp2):
    """NPB rhs_norm: RMS of the (dt-scaled) residual on the interior, per variable."""
    rms = np.zeros(5)
    for k in range(1, gp2 - 1):
        for j in range(1, gp1 - 1):
            for i in range(1, gp0 - 1):
                for m in range(5):
                    rms[m] += rhs[m, k, j, i] ** 2
    for m in range(5):
        rms[m] = math.sqrt(rms[m] / ((gp0 - 2.0) * (gp1 - 2.0) * (gp2 - 2.0)))
    return rms


@nb.njit(cache=True, inline="always")
def sweep(d, gp0, gp1, gp2, dt):
    """A d-direction sweep's line length n, NPB's dtt1 and dtt2, and the (outer, inner) extents of its lines."""
    n = (gp0, gp1, gp2)[d]
    return n, dt * float(n - 1) ** 2, dt * (n - 1) / 2.0, gp1 if d == 2 else gp2, gp1 if d == 0 else gp0


@nb.njit(cache=True, inline="always")
def line(x, d, a, b, n):
    """The grid line of direction d through outer point a and inner point b: a view of x, whose last three
    axes are (k, j, i); a is k for x and y lines, j for z lines; b is j for x lines, i for y and z lines."""
    if d == 0:
        return x[..., a, b, :n]
    if d == 1:
        return x[..., a, :n, b]
    return x[..., :n, a, b]


class ADI(Scheduled, Workload):
    """An NPB ADI proxy: what SP and BT share (arrays, size search, initialisation, compute_rhs, add, norms).

    A subclass names its arrays and constants, the factorisation between ``compute_rhs`` and
    ``add`` (``factor``) and that factorisation's kernels (``factor_kernels``).
    """

    #: Every array: name -> (leading extents before the padded grid, kind), in ``allocations`` order. It
    #: holds ``u``, ``rhs``, ``forcing`` (5, grid) and compute_rhs's per-point fields (grid), all of kind
    #: "field", and may hold ``speed``, which then compute_rhs fills.
    arrays: ClassVar[dict[str, tuple[tuple[int, ...], str]]]
    #: Iterations of NPB's class a quick run follows (S) and of the class a larger one follows (NPB 3.3
    #: ``setparams.c``); one ``step`` of the workload is 1/28 of them (:mod:`~buddylib.workloads.hpc._schedule`)
    iterations: ClassVar[tuple[int, int]]
    #: The share of them a run of up to so many bytes goes to, first match: the whole run where it fits the
    #: time one size is given
    REACH: ClassVar[tuple[tuple[float, float], ...]]
    #: FLOPs per interior point of compute_rhs's auxiliary-field pass.
    aux_flops: ClassVar[float]

    @classmethod
    def nbytes(cls, n: int) -> int:
        """Bytes of all allocations on an n^3 grid (padded as NPB)."""
        return 8 * int(np.prod(grid(n))) * sum(int(np.prod(lead)) for lead, _ in cls.arrays.values())

    @staticmethod
    @abc.abstractmethod
    def time_step(n: int) -> float:
        """NPB's time step for an n^3 grid (the class nearest in size)."""

    @abc.abstractmethod
    def factor(self) -> None:
        """The ADI factorisation of one step: turns ``rhs`` into the increment ``add`` applies."""

    @abc.abstractmethod
    def factor_kernels(self, pts: float, stride: int) -> list[Kernel]:
        """``factor``'s kernels for ``pts`` interior points; an x line's neighbours sit ``stride`` apart."""

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        n = 8
        while self.nbytes(n + 1) <= footprint:
            n += 1
        self.setup_grid(n, self.time_step(n))
        self.begin(math.inf, self.iterations[0] if footprint <= QUICK_LIMIT else self.iterations[1],
                   reach(self.REACH, footprint))

    def setup_grid(self, n: int, dt: float) -> None:
        """An n^3 problem with time step dt, initialised as NPB (no randomness: NPB has none)."""
        self.n, self.dt = n, dt
        self.time, self.cycles = 0.0, 0
        shape = grid(n)
        for name, (lead, _) in self.arrays.items():
            setattr(self, name, np.zeros((*lead, *shape)))
        exact_rhs(self.forcing, n, n, n, CE)
        initialize(self.u, n, n, n, CE)

    def _compute_rhs(self) -> None:
        n, with_speed = self.n, "speed" in self.arrays
        compute_rhs(self.u, self.rhs, self.forcing, self.rho_i, self.us, self.vs, self.ws, self.qs, self.square,
                    self.speed if with_speed else self.rho_i, n, n, n, self.dt, with_speed)

    def advance(self) -> None:
        """One ADI iteration: compute_rhs, the factorisation, add."""
        with threads_for(self.n**3):
            self._compute_rhs()
            self.factor()
            add(self.u, self.rhs, self.n, self.n, self.n)
        self.cycles += 1
        self.time += self.dt

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {name: (getattr(self, name), kind) for name, (_, kind) in self.arrays.items()}

    def profile(self) -> AccessProfile:
        pts = float((self.n - 2) ** 3)
        aux = [name for name, (lead, kind) in self.arrays.items() if kind == "field" and not lead]
        return AccessProfile(self.name, [
            Kernel("compute_rhs_aux", [Access("u", "read"), *(Access(a, "write") for a in aux)],
                   flops=self.aux_flops * pts),
            Kernel("compute_rhs", [Access("u", "read"), Access("forcing", "read"), Access("rhs", "write"),
                                   *(Access(a, "read") for a in aux if a != "speed")], flops=380.0 * pts),
            # a thread per x line walks i while its neighbours sit a row apart
            *self.factor_kernels(pts, padded(self.n)),
            Kernel("add", [Access("rhs", "read"), Access("u", "readwrite")], flops=5.0 * pts),
        ])

    def error_norm(self) -> np.ndarray:
        """NPB's RMS error of u against the manufactured solution, per variable."""
        return error_norm(self.u, self.n, self.n, self.n, CE)

    def residual_norm(self) -> np.ndarray:
        """NPB's verification residual: compute_rhs on the current u, RMS over the interior, / dt."""
        self._compute_rhs()
        return rhs_norm(self.rhs, self.n, self.n, self.n) / self.dt
