"""sp: NAS SP, scalar-pentadiagonal ADI for 3-D Navier-Stokes (proxy of SPEC ACCEL 356.sp / 357.csp).

The original (NPB SP, ported to OpenACC for SPEC ACCEL) advances the compressible
Navier-Stokes equations on an n^3 grid by Beam-Warming approximate factorisation. Each
iteration: ``compute_rhs`` (Euler fluxes, viscous terms and fourth-order dissipation by
central differences, plus the manufactured forcing), ``txinvr`` (multiply by the inverse of
the x eigenvector matrix), ``x_solve`` — along every x line three scalar pentadiagonal
systems, one for the three u-eigenvalue characteristic variables (``lhs``), one for u+c
(``lhsp``), one for u-c (``lhsm``) — ``ninvr``, ``y_solve``, ``pinvr``, ``z_solve``,
``tzetar`` (back to conserved variables) and ``add`` (u += rhs). This proxy is that
algorithm, ported line for line from NPB 3.3 (see ``_adi``): same equations, constants,
manufactured solution, boundary stencils and verification norms — not a simplified PDE.

Data structures (float64, NPB's GPU layout ``[5][KMAX][JMAXP+1][IMAXP+1]`` with NPB's
padding, so an even grid carries a never-written plane edge): the state ``u``, the residual
``rhs`` (zero before the first iteration, then dt-scaled increments that shrink as the
solution converges — small-exponent doubles), the fixed ``forcing`` (zero on the boundary),
the derived per-point fields ``rho_i, us, vs, ws, qs, speed, square`` (zero until the first
``compute_rhs``), the three pentadiagonal coefficient arrays ``lhs, lhsp, lhsm`` (five bands
each; band 0/4 are zero except the dissipation constants, the tails hold the factored
values of the last sweep) and the ``rhon`` line scratch. ``u``'s five variables are smooth
polynomials, so neighbouring entries share exponents and high mantissa bits.

The steps shared with BT (arrays, initialisation, ``compute_rhs``, ``add``, norms) are
``_adi.ADI``'s; this module holds the characteristic transforms, the pentadiagonal solver and
SP's constants.

Check (tests/workloads/test_adi.py, test_sp.py): on the 12^3 class-S problem (dt = 0.015,
100 steps) the RMS residual and RMS error against the exact solution equal NPB's published
verification values to 1e-8 (what NPB itself requires); the error to the manufactured
solution falls with iterations; and the pentadiagonal line solver matches numpy.linalg.solve.

Run length, ours / upstream (NPB 3.3 ``sys/setparams.c``): NAS SP runs 100 iterations in class S (12^3)
and 400 in classes W (36^3), A (64^3), B (102^3) and C (162^3). Ours runs the count of the class nearest in
size (:attr:`SP.iterations`): quick (21^3) class S's 100, every larger size 400 (32 MiB 47^3, 128 MiB 75^3,
1 GiB 151^3, 4 GiB 241^3); where the whole run does not fit the time one size is given, a stated share of it
(:attr:`SP.REACH`, snapshots on the same fractions at every size,
:mod:`~buddylib.workloads.hpc._schedule`): the whole run at quick, 32 MiB and 1 GiB; 1/7 (57 iterations) at
128 MiB, which ``make reproduce`` runs, and at 4 GiB.

Arrays, ours / upstream (read: NPB 3.4 OpenMP ``SP/sp_data.f90`` in
studyztp/NPB3.4-OMP-custom-makefile, the NPB 2.3 OpenACC C port ``SP/header.h`` in
grypp/NPB2.3-OpenACC-C, GMAP/NPB-GPU's CUDA ``SP/sp.cu``; SPEC ACCEL 356.sp's own source is not
public):

* ``u``, ``rhs``, ``forcing`` (5 x grid) and ``us``, ``vs``, ``ws``, ``qs``, ``rho_i``,
  ``speed``, ``square`` (grid): NPB's global fields, the same in every version read;
* ``lhs``, ``lhsp``, ``lhsm`` (5 bands x grid each): in NPB 3.4's OpenMP code per-line
  arrays of module ``work_lhs`` (``lhs(5, 0:IMAXP)`` ...); the OpenACC port holds them over the whole grid
  (``lhs[15][...]``, the three five-band systems in one array) so that every line is solved in
  parallel, as ours does (GMAP's CUDA port keeps one 9 x grid ``lhs``);
* ``rhon`` (grid): NPB's per-line scratch (``rhon`` in NPB 2.3 and 3.3, ``rhov`` in 3.4's
  ``work_lhs``), grid-sized in ours for the same reason.

Where ours differs, and why: the OpenACC port also keeps ``ainv`` (grid; NPB 2.3's inverse sound
speed, which NPB 3 computes inline) and its 1-D work arrays ``cv``, ``rhos``, ``rhoq``, ``cuf``,
``q``, ``ue``, ``buf`` (a few lines' worth: ``cv`` is a per-line temporary in ours); GMAP's CUDA
port adds ``rhs_buffer`` (5 x grid) and ``rms_buffer``; none of these are held.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numba as nb

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, Kernel, grid_kernel
from buddylib.workloads.hpc._adi import ADI, BT, C1C5, C2, C2IV, C3C4, CON43, DCOEF, DSSP, line, sweep

#: NPB class S reference after 100 steps at dt = 0.015 on 12^3: RMS residual / dt, RMS error
CLASS_S = {"n": 12, "dt": 0.015, "niter": 100,
           "xcr": (2.7470315451339479e-02, 1.0360746705285417e-02, 1.6235745065095532e-02,
                   1.5840557224455615e-02, 3.4849040609362460e-02),
           "xce": (2.7289258557377227e-05, 1.0364446640837285e-05, 1.6154798287166471e-05,
                   1.5750704994480102e-05, 3.4177666183390531e-05)}


@nb.njit(cache=True)
def penta_line(a, r, m0, m1, n):
    """Solve the pentadiagonal system ``a`` (5, n) for right-hand sides ``r[m0:m1]`` in place (NPB SP).

    Row i reads ``a[0,i] x[i-2] + a[1,i] x[i-1] + a[2,i] x[i] + a[3,i] x[i+1] + a[4,i] x[i+2]``;
    Thomas-style elimination without pivoting, as NPB, then back substitution. ``a`` is overwritten.
    """
    for i in range(n - 2):
        i1, i2 = i + 1, i + 2
        fac1 = 1.0 / a[2, i]
        a[3, i] *= fac1
        a[4, i] *= fac1
        for m in range(m0, m1):
            r[m, i] *= fac1
        a[2, i1] -= a[1, i1] * a[3, i]
        a[3, i1] -= a[1, i1] * a[4, i]
        for m in range(m0, m1):
            r[m, i1] -= a[1, i1] * r[m, i]
        a[1, i2] -= a[0, i2] * a[3, i]
        a[2, i2] -= a[0, i2] * a[4, i]
        for m in range(m0, m1):
            r[m, i2] -= a[0, i2] * r[m, i]
    i, i1 = n - 2, n - 1
    fac1 = 1.0 / a[2, i]
    a[3, i] *= fac1
    a[4, i] *= fac1
    for m in range(m0, m1):
        r[m, i] *= fac1
    a[2, i1] -= a[1, i1] * a[3, i]
    a[3, i1] -= a[1, i1] * a[4, i]
    fac2 = 1.0 / a[2, i1]
    for m in range(m0, m1):
        r[m, i1] -= a[1, i1] * r[m, i]
        r[m, i1] *= fac2
        r[m, i] -= a[3, i] * r[m, i1]
    for i in range(n - 3, -1, -1):
        for m in range(m0, m1):
            r[m, i] = r[m, i] - a[3, i] * r[m, i + 1] - a[4, i] * r[m, i + 2]


@nb.njit(cache=True)
def sp_line(lhs, lhsp, lhsm, rhon, r, cv, rho_i, speed, n, dtt1, dtt2, dd, dt):
    """Build the three SP factors (u, u+c, u-c eigenvalues) of one grid line and solve them."""
    comz1 = dt * DSSP
    comz4, comz5, comz6 = 4.0 * comz1, 5.0 * comz1, 6.0 * comz1
    for s in range(n):
        ru1 = C3C4 * rho_i[s]
        rhon[s] = max(max(dd + CON43 * ru1, dd + C1C5 * ru1), max(dd + ru1, dd))
    for m in range(5):
        lhs[m, 0] = lhs[m, n - 1] = 0.0
    lhs[2, 0] = lhs[2, n - 1] = 1.0
    for s in range(1, n - 1):
        lhs[0, s] = 0.0
        lhs[1, s] = -dtt2 * cv[s - 1] - dtt1 * rhon[s - 1]
        lhs[2, s] = 1.0 + 2.0 * dtt1 * rhon[s]
        lhs[3, s] = dtt2 * cv[s + 1] - dtt1 * rhon[s + 1]
        lhs[4, s] = 0.0
    # fourth-order dissipation
    lhs[2, 1] += comz5
    lhs[3, 1] -= comz4
    lhs[4, 1] += comz1
    lhs[1, 2] -= comz4
    lhs[2, 2] += comz6
    lhs[3, 2] -= comz4
    lhs[4, 2] += comz1
    for s in range(3, n - 3):
        lhs[0, s] += comz1
        lhs[1, s] -= comz4
        lhs[2, s] += comz6
        lhs[3, s] -= comz4
        lhs[4, s] += comz1
    s = n - 3
    lhs[0, s] += comz1
    lhs[1, s] -= comz4
    lhs[2, s] += comz6
    lhs[3, s] -= comz4
    lhs[0, s + 1] += comz1
    lhs[1, s + 1] -= comz4
    lhs[2, s + 1] += comz5
    for m in range(5):
        for s in range(n):
            lhsp[m, s] = lhs[m, s]
            lhsm[m, s] = lhs[m, s]
    for s in range(1, n - 1):
        lhsp[1, s] -= dtt2 * speed[s - 1]
        lhsp[3, s] += dtt2 * speed[s + 1]
        lhsm[1, s] += dtt2 * speed[s - 1]
        lhsm[3, s] -= dtt2 * speed[s + 1]
    penta_line(lhs, r, 0, 3, n)
    penta_line(lhsp, r, 3, 4, n)
    penta_line(lhsm, r, 4, 5, n)


@grid_kernel
def _txinvr(rhs, rho_i, us, vs, ws, speed, qs, gp0, gp1, gp2):
    for k in nb.prange(1, gp2 - 1):
        for j in range(1, gp1 - 1):
            for i in range(1, gp0 - 1):
                ru1, uu, vv, ww, ac = rho_i[k, j, i], us[k, j, i], vs[k, j, i], ws[k, j, i], speed[k, j, i]
                r1, r2, r3, r4, r5 = rhs[0, k, j, i], rhs[1, k, j, i], rhs[2, k, j, i], rhs[3, k, j, i], rhs[4, k, j, i]
                t1 = C2 / (ac * ac) * (qs[k, j, i] * r1 - uu * r2 - vv * r3 - ww * r4 + r5)
                t2 = BT * ru1 * (uu * r1 - r2)
                t3 = (BT * ru1 * ac) * t1
                rhs[0, k, j, i] = r1 - t1
                rhs[1, k, j, i] = -ru1 * (ww * r1 - r4)
                rhs[2, k, j, i] = ru1 * (vv * r1 - r3)
                rhs[3, k, j, i] = -t2 + t3
                rhs[4, k, j, i] = t2 + t3


@grid_kernel
def _ninvr_pinvr(rhs, gp0, gp1, gp2, pinvr):
    for k in nb.prange(1, gp2 - 1):
        for j in range(1, gp1 - 1):
            for i in range(1, gp0 - 1):
                r1, r2, r3, r4, r5 = rhs[0, k, j, i], rhs[1, k, j, i], rhs[2, k, j, i], rhs[3, k, j, i], rhs[4, k, j, i]
                t2 = 0.5 * (r4 + r5)
                if pinvr:
                    t1 = BT * r1
                    rhs[0, k, j, i] = BT * (r4 - r5)
                    rhs[1, k, j, i] = -r3
                    rhs[2, k, j, i] = r2
                else:
                    t1 = BT * r3
                    rhs[0, k, j, i] = -r2
                    rhs[1, k, j, i] = r1
                    rhs[2, k, j, i] = BT * (r4 - r5)
                rhs[3, k, j, i] = -t1 + t2
                rhs[4, k, j, i] = t1 + t2


@grid_kernel
def _tzetar(rhs, u, us, vs, ws, speed, qs, gp0, gp1, gp2):
    for k in nb.prange(1, gp2 - 1):
        for j in range(1, gp1 - 1):
            for i in range(1, gp0 - 1):
                xvel, yvel, zvel, ac = us[k, j, i], vs[k, j, i], ws[k, j, i], speed[k, j, i]
                r1, r2, r3, r4, r5 = rhs[0, k, j, i], rhs[1, k, j, i], rhs[2, k, j, i], rhs[3, k, j, i], rhs[4, k, j, i]
                uzik1 = u[0, k, j, i]
                btuz = BT * uzik1
                t1 = btuz / ac * (r4 + r5)
                t2 = r3 + t1
                t3 = btuz * (r4 - r5)
                rhs[0, k, j, i] = t2
                rhs[1, k, j, i] = -uzik1 * r2 + xvel * t2
                rhs[2, k, j, i] = uzik1 * r1 + yvel * t2
                rhs[3, k, j, i] = zvel * t2 + t3
                rhs[4, k, j, i] = uzik1 * (-xvel * r2 + yvel * r1) + qs[k, j, i] * t2 + C2IV * ac * ac * t1 + zvel * t3


@grid_kernel
def _solve(d, rhs, lhs, lhsp, lhsm, rhon, vel, rho_i, speed, gp0, gp1, gp2, dt):
    """x_solve (d=0), y_solve (d=1) or z_solve (d=2): every grid line of direction d."""
    n, dtt1, dtt2, outer, inner = sweep(d, gp0, gp1, gp2, dt)
    dd = DCOEF[d]
    for a in nb.prange(1, outer - 1):
        for b in range(1, inner - 1):
            sp_line(line(lhs, d, a, b, n), line(lhsp, d, a, b, n), line(lhsm, d, a, b, n), line(rhon, d, a, b, n),
                    line(rhs, d, a, b, n), line(vel, d, a, b, n), line(rho_i, d, a, b, n), line(speed, d, a, b, n),
                    n, dtt1, dtt2, dd, dt)


@register
class SP(ADI):
    name = "sp"
    proxies = "SPEC ACCEL 356.sp / 357.csp (NAS SP)"

    arrays: ClassVar[dict[str, tuple[tuple[int, ...], str]]] = {
        **{name: ((5,), "field") for name in ("u", "rhs", "forcing")},
        **{name: ((), "field") for name in ("rho_i", "us", "vs", "ws", "qs", "speed", "square")},
        **{name: ((5,), "other") for name in ("lhs", "lhsp", "lhsm")}, "rhon": ((), "other")}
    iterations = (100, 400)
    REACH = ((64 << 20, 1.0), (256 << 20, 1 / 7), (2 << 30, 1.0), (math.inf, 1 / 7))
    aux_flops = 20.0

    @staticmethod
    def time_step(n: int) -> float:
        # NPB's time steps: class S (12^3) 0.015, classes W/A (36^3, 64^3) 0.0015, B (102^3) 0.001,
        # C (162^3) 0.00067, D (408^3) 0.0003: past class A's grid, the class nearest in size (as bt)
        return 0.015 if n <= 12 else 0.005 if n <= 24 else 0.0015 if n <= 64 else 0.001 if n <= 102 else \
            0.00067 if n <= 162 else 0.0003

    def factor(self) -> None:
        n, dt = self.n, self.dt
        _txinvr(self.rhs, self.rho_i, self.us, self.vs, self.ws, self.speed, self.qs, n, n, n)
        for d, vel in enumerate((self.us, self.vs, self.ws)):
            _solve(d, self.rhs, self.lhs, self.lhsp, self.lhsm, self.rhon, vel, self.rho_i, self.speed, n, n, n, dt)
            if d < 2:
                _ninvr_pinvr(self.rhs, n, n, n, d == 1)
        _tzetar(self.rhs, self.u, self.us, self.vs, self.ws, self.speed, self.qs, n, n, n)

    def factor_kernels(self, pts: float, stride: int) -> list[Kernel]:
        def solve(d: int, vel: str) -> Kernel:
            pat = {"pattern": "strided", "stride": stride} if d == 0 else {}
            return Kernel(f"{'xyz'[d]}_solve", [
                Access(vel, "read", **pat), Access("rho_i", "read", **pat), Access("speed", "read", **pat),
                Access("rhon", "write", **pat),
                *(Access(a, "readwrite", passes=2.0, **pat) for a in ("lhs", "lhsp", "lhsm")),
                Access("rhs", "readwrite", passes=2.0, **pat)], flops=130.0 * pts)

        inv = [Access("rhs", "readwrite")]
        return [
            Kernel("txinvr", [*(Access(a, "read") for a in ("rho_i", "us", "vs", "ws", "speed", "qs")), *inv],
                   flops=30.0 * pts),
            solve(0, "us"), Kernel("ninvr", inv, flops=10.0 * pts),
            solve(1, "vs"), Kernel("pinvr", inv, flops=10.0 * pts),
            solve(2, "ws"),
            Kernel("tzetar", [*(Access(a, "read") for a in ("u", "us", "vs", "ws", "speed", "qs")), *inv],
                   flops=25.0 * pts),
        ]
