"""bt: NAS BT, block-tridiagonal ADI for 3-D Navier-Stokes (proxy of SPEC ACCEL 370.bt).

The original (NPB BT, ported to OpenACC for SPEC ACCEL) solves the same manufactured
compressible Navier-Stokes problem as SP (see ``_adi``) but without diagonalising the flux
Jacobians: after ``compute_rhs``, ``x_solve`` builds along every x line the flux Jacobian
``fjac`` and the viscous Jacobian ``njac`` (5x5 per point), forms the block-tridiagonal
system ``lhs`` = [A, B, C] (three 5x5 blocks per point) and solves it by block Thomas
elimination (``binvcrhs``/``matmul_sub``/``matvec_sub``, Gauss-Jordan on 5x5 blocks);
``y_solve`` and ``z_solve`` do the same along y and z lines; ``add`` applies the increment.
This proxy ports that algorithm line for line from NPB 3.3: same equations, constants,
Jacobians, boundary handling and verification norms — not a simplified PDE.

Data structures (float64; NPB's padded ``[5][KMAX][JMAXP+1][IMAXP+1]`` layout for the
5-vectors): ``u``, ``rhs``, ``forcing``, the derived fields ``rho_i, us, vs, ws, qs,
square``, and the GPU port's 3-D work arrays ``fjac``, ``njac`` (5, 5, grid) and ``lhs``
(3, 5, 5, grid), which dominate memory (125 of the 146 doubles per grid point). They hold
the last sweep's (z) Jacobians and factored blocks: structural zeros of the Jacobians
(row 0 has one 1, many entries are 0), constants on the diagonals, untouched boundary
lines and padding — and zeros everywhere before the first iteration.

The steps shared with SP (arrays, initialisation, ``compute_rhs``, ``add``, norms) are
``_adi.ADI``'s; this module holds the Jacobians, the block-tridiagonal solver and BT's constants.

Check (tests/workloads/test_adi.py, test_bt.py): on the 12^3 class-S problem (dt = 0.01,
60 steps) the RMS residual and RMS error against the exact solution equal NPB's published
verification values to 1e-8; the error to the manufactured solution falls with iterations;
the block-tridiagonal line solver matches numpy.linalg.solve; and fjac is the flux Jacobian.

Run length, ours / upstream (NPB 3.3 ``sys/setparams.c``): NAS BT runs 60 iterations in class S (12^3)
and 200 in classes W (24^3), A (64^3), B (102^3) and C (162^3). Ours runs the count of the class nearest in
size (:attr:`BT.iterations`): quick (13^3) class S's 60, every larger size 200 (32 MiB 29^3, 128 MiB 47^3,
1 GiB 97^3, 4 GiB 153^3); where the whole run does not fit the time one size is given, a stated share of it
(:attr:`BT.REACH`, snapshots on the same fractions at every size,
:mod:`~buddylib.workloads.hpc._schedule`): the whole run at quick, 32 MiB and 1 GiB; 1/4 (50 iterations) at
128 MiB, which ``make reproduce`` runs, and at 4 GiB.

Arrays, ours / upstream (read: NPB 3.4 OpenMP ``BT/bt_data.f90``, ``work_lhs.f90`` in
studyztp/NPB3.4-OMP-custom-makefile, the NPB 2.3 OpenACC C port ``BT/header.h`` in
grypp/NPB2.3-OpenACC-C, GMAP/NPB-GPU's CUDA ``BT/bt.cu``; SPEC ACCEL 370.bt's own source is not
public):

* ``u``, ``rhs``, ``forcing`` (5 x grid), ``us``, ``vs``, ``ws``, ``qs``, ``rho_i``, ``square``
  (grid): NPB's global fields in every version read (the OpenACC C port pads ``forcing`` to 6
  components);
* ``fjac``, ``njac`` (5 x 5 x grid) and ``lhs`` (3 x 5 x 5 x grid): per-line work arrays in NPB's
  OpenMP code, held over the whole grid in the OpenACC C port (``fjac[..][5][5]``,
  ``njac[..][5][5]``, ``lhs[..][3][5][5]``), as in ours: the GPU port's extra arrays, so that all
  lines are solved in parallel. GMAP's CUDA port instead keeps the three blocks as ``lhsA``,
  ``lhsB``, ``lhsC`` over the grid and forms the Jacobians on the fly.

Where ours differs, and why: the OpenACC C port's 1-D work arrays (``cuf``, ``q``, ``ue``,
``buf``, per line) are not held, and ``forcing`` has 5 components, not 6 (the sixth is padding).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numba as nb

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, Kernel, grid_kernel
from buddylib.workloads.hpc._adi import ADI, C1, C2, C3C4, C1345, CON43, DCOEF, line, sweep

#: NPB class S reference after 60 steps at dt = 0.01 on 12^3: RMS residual / dt, RMS error
CLASS_S = {"n": 12, "dt": 0.01, "niter": 60,
           "xcr": (1.7034283709541311e-01, 1.2975252070034097e-02, 3.2527926989486055e-02,
                   2.6436421275166801e-02, 1.9211784131744430e-01),
           "xce": (4.9976913345811579e-04, 4.5195666782961927e-05, 7.3973765172921357e-05,
                   7.3821238632439731e-05, 8.9269630987491446e-04)}


@nb.njit(cache=True)
def _binvcrhs(lhs, s, r, with_c):
    """Gauss-Jordan on block B = lhs[1,:,:,s]: C <- B^-1 C (if with_c), r <- B^-1 r (NPB binvcrhs/binvrhs)."""
    for p in range(5):
        pivot = 1.0 / lhs[1, p, p, s]
        for c in range(p + 1, 5):
            lhs[1, p, c, s] *= pivot
        if with_c:
            for c in range(5):
                lhs[2, p, c, s] *= pivot
        r[p, s] *= pivot
        for q in range(5):
            if q != p:
                coeff = lhs[1, q, p, s]
                for c in range(p + 1, 5):
                    lhs[1, q, c, s] -= coeff * lhs[1, p, c, s]
                if with_c:
                    for c in range(5):
                        lhs[2, q, c, s] -= coeff * lhs[2, p, c, s]
                r[q, s] -= coeff * r[p, s]


@nb.njit(cache=True)
def block_tridiag_line(lhs, r, n):
    """Solve the block-tridiagonal system lhs (3, 5, 5, n) = [A, B, C] blocks, rhs r (5, n), in place.

    Row s: ``A_s x_{s-1} + B_s x_s + C_s x_{s+1} = r_s``; block Thomas as NPB BT (x_solve_cell).
    """
    _binvcrhs(lhs, 0, r, True)
    for s in range(1, n):
        for p in range(5):  # r_s -= A_s r_{s-1}
            acc = 0.0
            for c in range(5):
                acc += lhs[0, p, c, s] * r[c, s - 1]
            r[p, s] -= acc
        for p in range(5):  # B_s -= A_s C_{s-1}
            for c in range(5):
                acc = 0.0
                for q in range(5):
                    acc += lhs[0, p, q, s] * lhs[2, q, c, s - 1]
                lhs[1, p, c, s] -= acc
        _binvcrhs(lhs, s, r, s < n - 1)
    for s in range(n - 2, -1, -1):
        for p in range(5):
            acc = 0.0
            for c in range(5):
                acc += lhs[2, p, c, s] * r[c, s + 1]
            r[p, s] -= acc


@nb.njit(cache=True)
def bt_line(fjac, njac, lhs, r, u, rho_i, qs, square, n, d, dtt1, dtt2):
    """Flux (fjac) and viscous (njac) Jacobians along one line in direction d, the blocks, the solve."""
    v = d + 1
    for s in range(n):
        tmp1 = rho_i[s]
        tmp2 = tmp1 * tmp1
        tmp3 = tmp1 * tmp2
        uv = u[v, s]
        for a in range(5):
            for b in range(5):
                fjac[a, b, s] = 0.0
                njac[a, b, s] = 0.0
        fjac[0, v, s] = 1.0
        for a in range(1, 4):
            if a == v:
                fjac[a, 0, s] = -(uv * tmp2 * uv) + C2 * qs[s]
                fjac[a, a, s] = (2.0 - C2) * uv * tmp1
                for b in range(1, 4):
                    if b != v:
                        fjac[a, b, s] = -C2 * u[b, s] * tmp1
                fjac[a, 4, s] = C2
            else:
                fjac[a, 0, s] = -(u[a, s] * uv) * tmp2
                fjac[a, v, s] = u[a, s] * tmp1
                fjac[a, a, s] = uv * tmp1
        fjac[4, 0, s] = (C2 * 2.0 * square[s] - C1 * u[4, s]) * (uv * tmp2)
        fjac[4, v, s] = C1 * u[4, s] * tmp1 - C2 * (uv * uv * tmp2 + qs[s])
        for b in range(1, 4):
            if b != v:
                fjac[4, b, s] = -C2 * (u[b, s] * uv) * tmp2
        fjac[4, 4, s] = C1 * (uv * tmp1)
        n40 = -C1345 * tmp2 * u[4, s]
        for a in range(1, 4):
            coef = CON43 * C3C4 if a == v else C3C4
            njac[a, 0, s] = -coef * tmp2 * u[a, s]
            njac[a, a, s] = coef * tmp1
            n40 -= (coef - C1345) * tmp3 * (u[a, s] * u[a, s])
            njac[4, a, s] = (coef - C1345) * tmp2 * u[a, s]
        njac[4, 0, s] = n40
        njac[4, 4, s] = C1345 * tmp1
    dd = DCOEF[d]
    for s in (0, n - 1):  # lhsinit
        for a in range(3):
            for p in range(5):
                for c in range(5):
                    lhs[a, p, c, s] = 0.0
        for p in range(5):
            lhs[1, p, p, s] = 1.0
    for s in range(1, n - 1):
        for p in range(5):
            for c in range(5):
                lhs[0, p, c, s] = -dtt2 * fjac[p, c, s - 1] - dtt1 * njac[p, c, s - 1]
                lhs[1, p, c, s] = dtt1 * 2.0 * njac[p, c, s]
                lhs[2, p, c, s] = dtt2 * fjac[p, c, s + 1] - dtt1 * njac[p, c, s + 1]
            lhs[0, p, p, s] -= dtt1 * dd
            lhs[1, p, p, s] += 1.0 + dtt1 * 2.0 * dd
            lhs[2, p, p, s] -= dtt1 * dd
    block_tridiag_line(lhs, r, n)


@grid_kernel
def _solve(d, rhs, fjac, njac, lhs, u, rho_i, qs, square, gp0, gp1, gp2, dt):
    """x_solve (d=0), y_solve (d=1) or z_solve (d=2): Jacobians, blocks and block Thomas on every line."""
    n, dtt1, dtt2, outer, inner = sweep(d, gp0, gp1, gp2, dt)
    for a in nb.prange(1, outer - 1):
        for b in range(1, inner - 1):
            bt_line(line(fjac, d, a, b, n), line(njac, d, a, b, n), line(lhs, d, a, b, n), line(rhs, d, a, b, n),
                    line(u, d, a, b, n), line(rho_i, d, a, b, n), line(qs, d, a, b, n), line(square, d, a, b, n),
                    n, d, dtt1, dtt2)


@register
class BT(ADI):
    name = "bt"
    proxies = "SPEC ACCEL 370.bt (NAS BT)"

    arrays: ClassVar[dict[str, tuple[tuple[int, ...], str]]] = {
        **{name: ((5,), "field") for name in ("u", "rhs", "forcing")},
        **{name: ((), "field") for name in ("rho_i", "us", "vs", "ws", "qs", "square")},
        "fjac": ((5, 5), "other"), "njac": ((5, 5), "other"), "lhs": ((3, 5, 5), "other")}
    iterations = (60, 200)
    REACH = ((64 << 20, 1.0), (256 << 20, 1 / 4), (2 << 30, 1.0), (math.inf, 1 / 4))
    aux_flops = 18.0

    @staticmethod
    def time_step(n: int) -> float:
        # NPB's time steps: class S (12^3) 0.01, classes W/A (24^3, 64^3) 0.0008, B (102^3) 0.0003,
        # C (162^3) 0.0001, D (408^3) 0.00002: a grid past class A's with A's step diverges (1 GiB, 97^3)
        return 0.01 if n <= 16 else 0.0008 if n <= 64 else 0.0003 if n <= 102 else 0.0001 if n <= 162 else 0.00002

    def factor(self) -> None:
        n = self.n
        for d in range(3):
            _solve(d, self.rhs, self.fjac, self.njac, self.lhs, self.u, self.rho_i, self.qs, self.square,
                   n, n, n, self.dt)

    def factor_kernels(self, pts: float, stride: int) -> list[Kernel]:
        def solve(d: int) -> Kernel:
            pat = {"pattern": "strided", "stride": stride} if d == 0 else {}
            return Kernel(f"{'xyz'[d]}_solve", [
                *(Access(a, "read", **pat) for a in ("u", "rho_i", "qs", "square")),
                Access("fjac", "write", **pat), Access("njac", "write", **pat),
                Access("lhs", "readwrite", passes=2.0, **pat), Access("rhs", "readwrite", passes=2.0, **pat)],
                flops=1025.0 * pts)

        return [solve(0), solve(1), solve(2)]
