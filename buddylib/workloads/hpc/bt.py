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

Check (tests/workloads/test_bt.py): on the 12^3 class-S problem (dt = 0.01, 60 steps) the RMS
residual and RMS error against the exact solution equal NPB's published verification values
to 1e-8; the error to the manufactured solution falls with iterations; and the
block-tridiagonal line solver matches numpy.linalg.solve.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from buddylib.workloads import register
from buddylib.workloads.base import QUICK_LIMIT, Access, AccessProfile, Kernel, Workload, threads_for
from buddylib.workloads.hpc import _adi
from buddylib.workloads.hpc._adi import CE

#: NPB class S reference after 60 steps at dt = 0.01 on 12^3: RMS residual / dt, RMS error
CLASS_S = {"n": 12, "dt": 0.01, "niter": 60,
           "xcr": (1.7034283709541311e-01, 1.2975252070034097e-02, 3.2527926989486055e-02,
                   2.6436421275166801e-02, 1.9211784131744430e-01),
           "xce": (4.9976913345811579e-04, 4.5195666782961927e-05, 7.3973765172921357e-05,
                   7.3821238632439731e-05, 8.9269630987491446e-04)}

_FIELDS1 = ("rho_i", "us", "vs", "ws", "qs", "square")


def nbytes(n: int) -> int:
    """Bytes of all BT allocations on an n^3 grid (padded as NPB)."""
    return 8 * int(np.prod(_adi.grid(n))) * (3 * 5 + len(_FIELDS1) + 2 * 25 + 75)


@nb.njit(parallel=True, cache=True)
def _solve(d, rhs, fjac, njac, lhs, u, rho_i, qs, square, gp0, gp1, gp2, dt):
    """x_solve (d=0), y_solve (d=1) or z_solve (d=2): Jacobians, blocks and block Thomas on every line."""
    n = (gp0, gp1, gp2)[d]
    dtt1 = dt * float(n - 1) ** 2
    dtt2 = dt * (n - 1) / 2.0
    outer = gp1 if d == 2 else gp2
    inner = gp1 if d == 0 else gp0
    for a in nb.prange(1, outer - 1):
        for b in range(1, inner - 1):
            if d == 0:
                k, j = a, b
                v = (fjac[:, :, k, j, :n], njac[:, :, k, j, :n], lhs[:, :, :, k, j, :n], rhs[:, k, j, :n],
                     u[:, k, j, :n], rho_i[k, j, :n], qs[k, j, :n], square[k, j, :n])
            elif d == 1:
                k, i = a, b
                v = (fjac[:, :, k, :n, i], njac[:, :, k, :n, i], lhs[:, :, :, k, :n, i], rhs[:, k, :n, i],
                     u[:, k, :n, i], rho_i[k, :n, i], qs[k, :n, i], square[k, :n, i])
            else:
                j, i = a, b
                v = (fjac[:, :, :, j, i], njac[:, :, :, j, i], lhs[:, :, :, :, j, i], rhs[:, :, j, i],
                     u[:, :, j, i], rho_i[:, j, i], qs[:, j, i], square[:, j, i])
            _adi.bt_line(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], n, d, dtt1, dtt2)


@register
class BT(Workload):
    name = "bt"
    proxies = "SPEC ACCEL 370.bt (NAS BT)"

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        n = 8
        while nbytes(n + 1) <= footprint:
            n += 1
        # NPB's time steps: class S (12^3) 0.01, classes W/A (24^3, 64^3) 0.0008
        self.setup_grid(n, 0.01 if n <= 16 else 0.0008)
        self.n_steps = 60 if footprint <= QUICK_LIMIT else 45

    def setup_grid(self, n: int, dt: float) -> None:
        """An n^3 problem with time step dt, initialised as NPB (no randomness: NPB has none)."""
        self.n, self.dt = n, dt
        shape = _adi.grid(n)
        self.u, self.rhs, self.forcing = (np.zeros((5, *shape)) for _ in range(3))
        for name in _FIELDS1:
            setattr(self, name, np.zeros(shape))
        self.fjac = np.zeros((5, 5, *shape))
        self.njac = np.zeros((5, 5, *shape))
        self.lhs = np.zeros((3, 5, 5, *shape))
        _adi.exact_rhs(self.forcing, n, n, n, CE)
        _adi.initialize(self.u, n, n, n, CE)

    def _compute_rhs(self) -> None:
        n = self.n
        _adi.compute_rhs(self.u, self.rhs, self.forcing, self.rho_i, self.us, self.vs, self.ws, self.qs, self.square,
                         self.rho_i, n, n, n, self.dt, False)

    def step(self) -> None:
        with threads_for(self.n**3):
            self._step()

    def _step(self) -> None:
        n = self.n
        self._compute_rhs()
        for d in range(3):
            _solve(d, self.rhs, self.fjac, self.njac, self.lhs, self.u, self.rho_i, self.qs, self.square,
                   n, n, n, self.dt)
        _adi.add(self.u, self.rhs, n, n, n)

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        out = {name: (getattr(self, name), "field") for name in ("u", "rhs", "forcing", *_FIELDS1)}
        out.update({name: (getattr(self, name), "other") for name in ("fjac", "njac", "lhs")})
        return out

    def profile(self) -> AccessProfile:
        n = self.n
        pts = float((n - 2) ** 3)
        aux = _FIELDS1
        stride = _adi.padded(n)  # a thread per x line walks i while its neighbours sit a row apart

        def solve(d: int) -> Kernel:
            pat = {"pattern": "strided", "stride": stride} if d == 0 else {}
            return Kernel(f"{'xyz'[d]}_solve", [
                *(Access(a, "read", **pat) for a in ("u", "rho_i", "qs", "square")),
                Access("fjac", "write", **pat), Access("njac", "write", **pat),
                Access("lhs", "readwrite", passes=2.0, **pat), Access("rhs", "readwrite", passes=2.0, **pat)],
                flops=1025.0 * pts)

        return AccessProfile(self.name, [
            Kernel("compute_rhs_aux", [Access("u", "read"), *(Access(a, "write") for a in aux)], flops=18.0 * pts),
            Kernel("compute_rhs", [Access("u", "read"), Access("forcing", "read"), Access("rhs", "write"),
                                   *(Access(a, "read") for a in aux)], flops=380.0 * pts),
            solve(0), solve(1), solve(2),
            Kernel("add", [Access("rhs", "read"), Access("u", "readwrite")], flops=5.0 * pts),
        ])

    def error_norm(self) -> np.ndarray:
        """NPB's RMS error of u against the manufactured solution, per variable."""
        return _adi.error_norm(self.u, self.n, self.n, self.n, CE)

    def residual_norm(self) -> np.ndarray:
        """NPB's verification residual: compute_rhs on the current u, RMS over the interior, / dt."""
        self._compute_rhs()
        return _adi.rhs_norm(self.rhs, self.n, self.n, self.n) / self.dt
