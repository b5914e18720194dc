"""swim: the SWIM shallow-water model (proxy of SPEC ACCEL 363.swim).

SWIM (Sadourny 1975, as coded at NCAR by Paul Swarztrauber and used in SPEC CPU and SPEC
ACCEL) integrates the nonlinear shallow-water equations on a doubly periodic staggered
C-grid: geopotential ``P`` at cell centres, ``U`` on the x faces, ``V`` on the y faces, the
vorticity ``Z`` at the corners. Each step is the original's three loops:

* ``calc1``: mass fluxes ``CU``, ``CV``, potential vorticity ``Z`` and the Bernoulli
  function ``H`` from ``U``, ``V``, ``P`` (Sadourny's energy-conserving scheme);
* ``calc2``: leapfrog step ``UNEW``, ``VNEW``, ``PNEW`` from ``UOLD``, ``VOLD``, ``POLD``
  over ``TDT = 2 DT`` (a forward step over ``DT`` the first time);
* ``calc3``: the Robert-Asselin time filter ``UOLD = U + ALPHA (UNEW - 2 U + UOLD)`` and the
  rotation of the time levels;

each followed by the periodic continuation of the extra row and column, as in the Fortran.
The state starts from SWIM's stream function ``PSI = A sin((i - 1/2) di) sin((j - 1/2) dj)``
(velocities are its curl) and ``P = PCF (cos 2 i di + cos 2 j dj) + 50000``, with SWIM's
constants (``DT = 20``, ``DX = DY = 2.5e4``, ``A = 1e6``, ``ALPHA = 0.001``).

Allocations are the original's fourteen ``(M+1) x (N+1)`` float64 arrays (REAL*8 as in SPEC
ACCEL), named as in the Fortran (lower case), stored with the x index fastest as Fortran
does. They matter for compressibility because ``P`` is a 50000 offset carrying a tiny
smooth perturbation (its high-order bytes are all equal), the velocities are smooth
trigonometric fields, ``CU``/``CV``/``Z``/``H``/``*NEW`` start at zero and fill in with the
first step, and ``PSI`` is written once and kept.

Checks: the total mass (sum of ``P``) is conserved to round-off, because the flux-form
continuity equation telescopes on a periodic grid and the filter is linear; the energy
(kinetic plus available potential) drifts only by the small filter/leapfrog error and the
run stays bounded.

Run length, ours / upstream: SPEC CPU2000's 171.swim and OMP2012's 363.swim run 512 time steps on a
1335 x 1335 grid (SPEC ACCEL's ref is not public; SPECaccel 2023's 463.swim runs 1,500 on 12000^2).
Ours runs their 512 at every size (:data:`TIME_STEPS`; quick 166^2, 32 MiB 546^2, 128 MiB 1092^2, 1 GiB
3094^2), the whole run at each; one ``step`` of the workload is 1/28 of it
(:mod:`~buddylib.workloads.hpc._schedule`), so its snapshots fall on the same fractions as the other proxies'.

Arrays, ours / upstream. SPEC's SWIM source is not public; the public form of Swarztrauber's
NCAR program read here is ``shallow`` in stfc/PSycloneBench (``shallow/SEQ/shallow_base.f90``,
a modernised copy with 8-byte reals), whose fields are ``u, v, p, unew, vnew, pnew, uold, vold,
pold, cu, cv, z, h, psi``: the same fourteen (M+1) x (N+1) float64 arrays as ours, one for one,
and no others. No differences in the arrays (whether SPEC's version declares them larger than the
grid, as fixed-size Fortran arrays, cannot be checked without its source).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, AccessProfile, Kernel, Workload, grid_kernel, threads_for
from buddylib.workloads.hpc import _libm
from buddylib.workloads.hpc._schedule import Scheduled

DT, DX, DY, A, ALPHA = 20.0, 0.25e5, 0.25e5, 1.0e6, 0.001
NAMES = ("u", "v", "p", "unew", "vnew", "pnew", "uold", "vold", "pold", "cu", "cv", "z", "h", "psi")


@grid_kernel
def _calc1(u, v, p, cu, cv, z, h, fsdx, fsdy):
    n, m = p.shape[0] - 1, p.shape[1] - 1
    for j in nb.prange(n):
        for i in range(m):
            cu[j, i + 1] = 0.5 * (p[j, i + 1] + p[j, i]) * u[j, i + 1]
            cv[j + 1, i] = 0.5 * (p[j + 1, i] + p[j, i]) * v[j + 1, i]
            z[j + 1, i + 1] = (fsdx * (v[j + 1, i + 1] - v[j + 1, i]) - fsdy * (u[j + 1, i + 1] - u[j, i + 1])) \
                / (p[j, i] + p[j, i + 1] + p[j + 1, i + 1] + p[j + 1, i])
            h[j, i] = p[j, i] + 0.25 * (u[j, i + 1] * u[j, i + 1] + u[j, i] * u[j, i]
                                        + v[j + 1, i] * v[j + 1, i] + v[j, i] * v[j, i])
    # periodic continuation
    for j in range(n):
        cu[j, 0] = cu[j, m]
        cv[j + 1, m] = cv[j + 1, 0]
        z[j + 1, 0] = z[j + 1, m]
        h[j, m] = h[j, 0]
    for i in range(m):
        cu[n, i + 1] = cu[0, i + 1]
        cv[0, i] = cv[n, i]
        z[0, i + 1] = z[n, i + 1]
        h[n, i] = h[0, i]
    cu[n, 0] = cu[0, m]
    cv[0, m] = cv[n, 0]
    z[0, 0] = z[n, m]
    h[n, m] = h[0, 0]


@grid_kernel
def _calc2(uold, vold, pold, cu, cv, z, h, unew, vnew, pnew, tdts8, tdtsdx, tdtsdy):
    n, m = pnew.shape[0] - 1, pnew.shape[1] - 1
    for j in nb.prange(n):
        for i in range(m):
            unew[j, i + 1] = uold[j, i + 1] + tdts8 * (z[j + 1, i + 1] + z[j, i + 1]) \
                * (cv[j + 1, i + 1] + cv[j + 1, i] + cv[j, i] + cv[j, i + 1]) - tdtsdx * (h[j, i + 1] - h[j, i])
            vnew[j + 1, i] = vold[j + 1, i] - tdts8 * (z[j + 1, i + 1] + z[j + 1, i]) \
                * (cu[j + 1, i + 1] + cu[j + 1, i] + cu[j, i] + cu[j, i + 1]) - tdtsdy * (h[j + 1, i] - h[j, i])
            pnew[j, i] = pold[j, i] - tdtsdx * (cu[j, i + 1] - cu[j, i]) - tdtsdy * (cv[j + 1, i] - cv[j, i])
    for j in range(n):
        unew[j, 0] = unew[j, m]
        vnew[j + 1, m] = vnew[j + 1, 0]
        pnew[j, m] = pnew[j, 0]
    for i in range(m):
        unew[n, i + 1] = unew[0, i + 1]
        vnew[0, i] = vnew[n, i]
        pnew[n, i] = pnew[0, i]
    unew[n, 0] = unew[0, m]
    vnew[0, m] = vnew[n, 0]
    pnew[n, m] = pnew[0, 0]


@nb.njit(cache=True)
def _wrap(a):
    """Periodic continuation of a cell-indexed array: column M+1 = column 1, row N+1 = row 1."""
    n, m = a.shape[0] - 1, a.shape[1] - 1
    for j in range(n):
        a[j, m] = a[j, 0]
    for i in range(m):
        a[n, i] = a[0, i]
    a[n, m] = a[0, 0]


@grid_kernel
def _calc3(u, v, p, unew, vnew, pnew, uold, vold, pold, alpha):
    """Robert-Asselin filter on the old level, then rotate the time levels."""
    n, m = p.shape[0] - 1, p.shape[1] - 1
    for j in nb.prange(n):
        for i in range(m):
            uold[j, i] = u[j, i] + alpha * (unew[j, i] - 2.0 * u[j, i] + uold[j, i])
            vold[j, i] = v[j, i] + alpha * (vnew[j, i] - 2.0 * v[j, i] + vold[j, i])
            pold[j, i] = p[j, i] + alpha * (pnew[j, i] - 2.0 * p[j, i] + pold[j, i])
            u[j, i] = unew[j, i]
            v[j, i] = vnew[j, i]
            p[j, i] = pnew[j, i]
    for a in (uold, vold, pold, u, v, p):
        _wrap(a)


@grid_kernel
def _calc3z(u, v, p, unew, vnew, pnew, uold, vold, pold):
    """The first step's update: old <- current, current <- new (no filter)."""
    for j in nb.prange(p.shape[0]):
        for i in range(p.shape[1]):
            uold[j, i] = u[j, i]
            vold[j, i] = v[j, i]
            pold[j, i] = p[j, i]
            u[j, i] = unew[j, i]
            v[j, i] = vnew[j, i]
            p[j, i] = pnew[j, i]


#: Time steps of SWIM's reference input (171.swim, 363.swim): the whole run at every size
TIME_STEPS = 512


@register
class Swim(Scheduled, Workload):
    name = "swim"
    proxies = "SPEC ACCEL 363.swim"

    def setup(self, footprint: int, rng: np.random.Generator, m: int | None = None) -> None:
        # SWIM's initial state is analytic; rng is not needed
        if m is None:
            m = max(16, int(np.sqrt(footprint / (8 * len(NAMES)))) - 1)
            m -= m % 2
        self.m = self.n = m
        mp1 = m + 1
        self.f = {name: np.zeros((mp1, mp1)) for name in NAMES}  # [j, i]: x index fastest, as in Fortran
        f = self.f
        el = self.n * DX
        di, dj = 2 * np.pi / m, 2 * np.pi / self.n
        pcf = np.pi * np.pi * A * A / (el * el)
        i = np.arange(mp1)[None, :]
        j = np.arange(mp1)[:, None]
        f["psi"][:] = A * _libm.sin((i + 0.5) * di) * _libm.sin((j + 0.5) * dj)
        f["p"][:] = pcf * (_libm.cos(2.0 * i * di) + _libm.cos(2.0 * j * dj)) + 50000.0
        psi, u, v = f["psi"], f["u"], f["v"]
        u[:-1, 1:] = -(psi[1:, 1:] - psi[:-1, 1:]) / DY
        v[1:, :-1] = (psi[1:, 1:] - psi[1:, :-1]) / DX
        u[:-1, 0] = u[:-1, m]
        v[1:, m] = v[1:, 0]
        u[m, 1:] = u[0, 1:]
        v[0, :-1] = v[m, :-1]
        u[m, 0] = u[0, m]
        v[0, m] = v[m, 0]
        f["uold"][:], f["vold"][:], f["pold"][:] = u, v, f["p"]
        self.tdt = DT
        self.time, self.cycles = 0.0, 0
        self.begin(math.inf, TIME_STEPS, 1.0)

    def advance(self) -> None:
        """One time step (CALC1, CALC2, CALC3 or, first, CALC3Z)."""
        f = self.f
        self.cycles += 1
        self.time += DT
        with threads_for(self.m * self.n):
            _calc1(f["u"], f["v"], f["p"], f["cu"], f["cv"], f["z"], f["h"], 4.0 / DX, 4.0 / DY)
            _calc2(f["uold"], f["vold"], f["pold"], f["cu"], f["cv"], f["z"], f["h"], f["unew"], f["vnew"],
                   f["pnew"], self.tdt / 8.0, self.tdt / DX, self.tdt / DY)
            if self.cycles <= 1:
                self.tdt = self.tdt + self.tdt
                _calc3z(f["u"], f["v"], f["p"], f["unew"], f["vnew"], f["pnew"], f["uold"], f["vold"], f["pold"])
            else:
                _calc3(f["u"], f["v"], f["p"], f["unew"], f["vnew"], f["pnew"], f["uold"], f["vold"], f["pold"],
                       ALPHA)

    # ------------------------------------------------------------ checks
    def mass(self, which: str = "p") -> float:
        """Sum of the geopotential over the M x N periodic cells."""
        return float(self.f[which][:-1, :-1].sum())

    def energy(self) -> float:
        """Kinetic plus available potential energy: sum P |u|^2 / 2 + (P - mean P)^2 / 2 over the cells."""
        u, v, p = self.f["u"], self.f["v"], self.f["p"][:-1, :-1]
        ke = 0.25 * (u[:-1, :-1] ** 2 + u[:-1, 1:] ** 2 + v[:-1, :-1] ** 2 + v[1:, :-1] ** 2)
        return float((p * ke).sum() + 0.5 * ((p - p.mean()) ** 2).sum())

    # ------------------------------------------------------------ Workload contract
    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {name: (a, "field") for name, a in self.f.items()}

    def profile(self) -> AccessProfile:
        mn = float(self.m * self.n)

        def rd(*names: str) -> list[Access]:
            return [Access(x) for x in names]

        def wr(*names: str) -> list[Access]:
            return [Access(x, "write") for x in names]

        return AccessProfile(self.name, [
            Kernel("calc1", rd("u", "v", "p") + wr("cu", "cv", "z", "h"), 24 * mn),
            Kernel("calc2", rd("uold", "vold", "pold", "cu", "cv", "z", "h") + wr("unew", "vnew", "pnew"), 26 * mn),
            Kernel("calc3", rd("unew", "vnew", "pnew") + [Access(x, "readwrite") for x in
                                                          ("u", "v", "p", "uold", "vold", "pold")], 15 * mn),
        ])
