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

Check (tests/workloads/test_sp.py): on the 12^3 class-S problem (dt = 0.015, 100 steps) the
RMS residual and RMS error against the exact solution equal NPB's published verification
values to 1e-8 (what NPB itself requires); the error to the manufactured solution falls with
iterations; and the pentadiagonal line solver matches numpy.linalg.solve.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from buddylib.workloads import register
from buddylib.workloads.base import QUICK_LIMIT, Access, AccessProfile, Kernel, Workload, threads_for
from buddylib.workloads.hpc import _adi
from buddylib.workloads.hpc._adi import BT, C2, C2IV, CE, DCOEF

#: NPB class S reference after 100 steps at dt = 0.015 on 12^3: RMS residual / dt, RMS error
CLASS_S = {"n": 12, "dt": 0.015, "niter": 100,
           "xcr": (2.7470315451339479e-02, 1.0360746705285417e-02, 1.6235745065095532e-02,
                   1.5840557224455615e-02, 3.4849040609362460e-02),
           "xce": (2.7289258557377227e-05, 1.0364446640837285e-05, 1.6154798287166471e-05,
                   1.5750704994480102e-05, 3.4177666183390531e-05)}

_FIELDS5 = ("u", "rhs", "forcing", "lhs", "lhsp", "lhsm")
_FIELDS1 = ("rho_i", "us", "vs", "ws", "qs", "speed", "square", "rhon")


def nbytes(n: int) -> int:
    """Bytes of all SP allocations on an n^3 grid (padded as NPB)."""
    return 8 * int(np.prod(_adi.grid(n))) * (5 * len(_FIELDS5) + len(_FIELDS1))


@nb.njit(parallel=True, cache=True)
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


@nb.njit(parallel=True, cache=True)
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


@nb.njit(parallel=True, cache=True)
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


@nb.njit(parallel=True, cache=True)
def _solve(d, rhs, lhs, lhsp, lhsm, rhon, vel, rho_i, speed, gp0, gp1, gp2, dt):
    """x_solve (d=0), y_solve (d=1) or z_solve (d=2): every grid line of direction d."""
    n = (gp0, gp1, gp2)[d]
    dtt1 = dt * float(n - 1) ** 2
    dtt2 = dt * (n - 1) / 2.0
    dd = DCOEF[d]
    outer = gp1 if d == 2 else gp2
    inner = gp1 if d == 0 else gp0
    for a in nb.prange(1, outer - 1):
        for b in range(1, inner - 1):
            if d == 0:
                k, j = a, b
                sp = (lhs[:, k, j, :n], lhsp[:, k, j, :n], lhsm[:, k, j, :n], rhon[k, j, :n], rhs[:, k, j, :n],
                      vel[k, j, :n], rho_i[k, j, :n], speed[k, j, :n])
            elif d == 1:
                k, i = a, b
                sp = (lhs[:, k, :n, i], lhsp[:, k, :n, i], lhsm[:, k, :n, i], rhon[k, :n, i], rhs[:, k, :n, i],
                      vel[k, :n, i], rho_i[k, :n, i], speed[k, :n, i])
            else:
                j, i = a, b
                sp = (lhs[:, :, j, i], lhsp[:, :, j, i], lhsm[:, :, j, i], rhon[:, j, i], rhs[:, :, j, i],
                      vel[:, j, i], rho_i[:, j, i], speed[:, j, i])
            _adi.sp_line(sp[0], sp[1], sp[2], sp[3], sp[4], sp[5], sp[6], sp[7], n, dtt1, dtt2, dd, dt)


@register
class SP(Workload):
    name = "sp"
    proxies = "SPEC ACCEL 356.sp / 357.csp (NAS SP)"

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        n = 8
        while nbytes(n + 1) <= footprint:
            n += 1
        # NPB's time steps: class S (12^3) 0.015, classes W/A (36^3, 64^3) 0.0015
        quick = footprint <= QUICK_LIMIT
        self.setup_grid(n, 0.015 if n <= 12 else (0.005 if n <= 24 else 0.0015))
        self.n_steps = 100 if quick else 60

    def setup_grid(self, n: int, dt: float) -> None:
        """An n^3 problem with time step dt, initialised as NPB (no randomness: NPB has none)."""
        self.n, self.dt = n, dt
        shape = _adi.grid(n)
        for name in _FIELDS5:
            setattr(self, name, np.zeros((5, *shape)))
        for name in _FIELDS1:
            setattr(self, name, np.zeros(shape))
        _adi.exact_rhs(self.forcing, n, n, n, CE)
        _adi.initialize(self.u, n, n, n, CE)

    def _compute_rhs(self) -> None:
        n = self.n
        _adi.compute_rhs(self.u, self.rhs, self.forcing, self.rho_i, self.us, self.vs, self.ws, self.qs, self.square,
                         self.speed, n, n, n, self.dt, True)

    def step(self) -> None:
        with threads_for(self.n**3):
            self._step()

    def _step(self) -> None:
        n, dt = self.n, self.dt
        self._compute_rhs()
        _txinvr(self.rhs, self.rho_i, self.us, self.vs, self.ws, self.speed, self.qs, n, n, n)
        for d, vel in enumerate((self.us, self.vs, self.ws)):
            _solve(d, self.rhs, self.lhs, self.lhsp, self.lhsm, self.rhon, vel, self.rho_i, self.speed, n, n, n, dt)
            if d < 2:
                _ninvr_pinvr(self.rhs, n, n, n, d == 1)
        _tzetar(self.rhs, self.u, self.us, self.vs, self.ws, self.speed, self.qs, n, n, n)
        _adi.add(self.u, self.rhs, n, n, n)

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        out = {name: (getattr(self, name), "field") for name in _FIELDS5[:3] + _FIELDS1[:-1]}
        out.update({name: (getattr(self, name), "other") for name in ("lhs", "lhsp", "lhsm", "rhon")})
        return out

    def profile(self) -> AccessProfile:
        n = self.n
        pts = float((n - 2) ** 3)
        aux = ("rho_i", "us", "vs", "ws", "qs", "speed", "square")
        stride = _adi.padded(n)  # a thread per x line walks i while its neighbours sit a row apart

        def solve(d: int, vel: str) -> Kernel:
            pat = {"pattern": "strided", "stride": stride} if d == 0 else {}
            return Kernel(f"{'xyz'[d]}_solve", [
                Access(vel, "read", **pat), Access("rho_i", "read", **pat), Access("speed", "read", **pat),
                Access("rhon", "write", **pat),
                *(Access(a, "readwrite", passes=2.0, **pat) for a in ("lhs", "lhsp", "lhsm")),
                Access("rhs", "readwrite", passes=2.0, **pat)], flops=130.0 * pts)

        inv = [Access("rhs", "readwrite")]
        return AccessProfile(self.name, [
            Kernel("compute_rhs_aux", [Access("u", "read"), *(Access(a, "write") for a in aux)], flops=20.0 * pts),
            Kernel("compute_rhs", [Access("u", "read"), Access("forcing", "read"), Access("rhs", "write"),
                                   *(Access(a, "read") for a in aux if a != "speed")], flops=380.0 * pts),
            Kernel("txinvr", [*(Access(a, "read") for a in ("rho_i", "us", "vs", "ws", "speed", "qs")), *inv],
                   flops=30.0 * pts),
            solve(0, "us"), Kernel("ninvr", inv, flops=10.0 * pts),
            solve(1, "vs"), Kernel("pinvr", inv, flops=10.0 * pts),
            solve(2, "ws"),
            Kernel("tzetar", [*(Access(a, "read") for a in ("u", "us", "vs", "ws", "speed", "qs")), *inv],
                   flops=25.0 * pts),
            Kernel("add", [Access("rhs", "read"), Access("u", "readwrite")], flops=5.0 * pts),
        ])

    def error_norm(self) -> np.ndarray:
        """NPB's RMS error of u against the manufactured solution, per variable."""
        return _adi.error_norm(self.u, self.n, self.n, self.n, CE)

    def residual_norm(self) -> np.ndarray:
        """NPB's verification residual: compute_rhs on the current u, RMS over the interior, / dt."""
        self._compute_rhs()
        return _adi.rhs_norm(self.rhs, self.n, self.n, self.n) / self.dt
