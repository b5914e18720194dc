"""hpgmg: geometric multigrid V-cycles on a 3-D variable-coefficient Poisson problem (proxy of HPGMG-FV).

HPGMG-FV (the DOE FastForward / Top500 multigrid benchmark) solves ``a alpha u - b div(beta grad u)
= f`` on the unit cube with a cell-centred, second-order finite-volume discretisation and
homogeneous Dirichlet boundaries. Its level hierarchy holds, per level, the same set of
float64 cell vectors with a one-cell ghost layer: ``u`` (VECTOR_U), ``f`` (VECTOR_F),
``f_minus_av`` (the residual), ``temp`` (the smoother's out-of-place buffer and the residual
for the norm), ``alpha``, ``beta_i/j/k`` (face coefficients, element ``i`` is the low face of
cell ``i``), ``dinv`` (inverse diagonal), ``l1inv`` (inverse L1 row norm) and ``valid`` (1
inside the domain, 0 in the ghost cells on the domain boundary); the bottom level adds the
CG bottom solver's ``r``, ``p``, ``Ap``. This proxy solves HPGMG's Poisson case (a = 0,
b = 1) with HPGMG's coefficient beta = 5.5 + 4.5 tanh(10 (r - 0.25)) (1 near the centre, 10
outside, r = distance from the centre) and HPGMG's manufactured solution
u = X(x) X(y) X(z), X(w) = 2w^6 - 6w^5 + 5w^4 - w^2, whose right-hand side
f = -(grad beta . grad u + beta lap u) is evaluated at cell centres and beta at face centres.

One step is one V-cycle as HPGMG's MGSolve runs it: on each level two red-black
Gauss-Seidel smooths (four colour passes, out-of-place between ``u`` and ``temp`` as GSRB_OOP
does, Dirichlet ghosts u_ghost = -u_inside applied before each pass), the residual into
``f_minus_av``, cell-averaging restriction into the coarser ``f``, a CG solve on the
coarsest level, cell-centred trilinear interpolation of the coarse correction, two
post-smooths; then the fine residual into ``temp`` and its max norm.

For compressibility: at step 0 every ``u``, residual and temporary is zero and only ``f`` and
the coefficients hold data; ``beta`` is smooth and two-valued away from a thin shell, ``alpha``
a constant, ``valid`` a 0/1 mask stored as doubles, the ghost layers are structured
(zero or mirrored). The check: the max-norm residual falls by a steady factor (< 0.2) per
V-cycle down to round-off, and the converged solution approaches the manufactured one at
second order (the discretisation error falls four-fold when h halves).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from buddylib.workloads import register
from buddylib.workloads.base import Access, AccessProfile, Kernel, Workload
from buddylib.workloads.hpc import _libm

A_COEF, B_COEF = 0.0, 1.0  # HPGMG's Poisson problem
NUM_SMOOTHS = 2  # GSRB: red-black twice = four colour passes
VECTORS = ("u", "f", "f_minus_av", "temp", "alpha", "beta_i", "beta_j", "beta_k", "dinv", "l1inv", "valid")
BOTTOM_VECTORS = ("cg_r", "cg_p", "cg_Ap")
BOTTOM_RTOL = 1e-10
BOTTOM_MAXIT = 500


def evaluate_beta(x, y, z):
    """HPGMG's beta and its gradient: 5.5 + 4.5 tanh(10 (r - 0.25)), r the distance from the centre."""
    dx, dy, dz = x - 0.5, y - 0.5, z - 0.5
    r = np.sqrt(dx * dx + dy * dy + dz * dz)
    t = _libm.tanh(10.0 * (r - 0.25))
    b = 5.5 + 4.5 * t
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.where(r > 0, 4.5 * 10.0 * (1 - t * t) / r, 0.0)
    return b, g * dx, g * dy, g * dz


def _p6(w):
    """HPGMG's p6 polynomial 2w^6 - 6w^5 + 5w^4 - w^2 and its first two derivatives (zero at w = 0 and 1).

    Factored into products (no ``w**6``: numpy's power kernel depends on the CPU's instruction set).
    """
    w2 = w * w
    return (w2 * (w2 * ((2 * w - 6) * w + 5) - 1), 2 * w * (w2 * ((6 * w - 15) * w + 10) - 1),
            60 * w2 * (w - 1) * (w - 1) - 2)


def exact_solution(n: int) -> np.ndarray:
    """The manufactured solution at the cell centres of an n^3 grid (interior only)."""
    c = (np.arange(n) + 0.5) / n
    x = _p6(c)[0]
    return x[:, None, None] * x[None, :, None] * x[None, None, :]


def _rhs(n: int) -> np.ndarray:
    c = (np.arange(n) + 0.5) / n
    z, y, x = np.meshgrid(c, c, c, indexing="ij")
    (ux, ux1, ux2), (uy, uy1, uy2), (uz, uz1, uz2) = _p6(x), _p6(y), _p6(z)
    b, bx, by, bz = evaluate_beta(x, y, z)
    grad = bx * ux1 * uy * uz + by * ux * uy1 * uz + bz * ux * uy * uz1
    lap = ux2 * uy * uz + ux * uy2 * uz + ux * uy * uz2
    return A_COEF * ux * uy * uz - B_COEF * (grad + b * lap)


# ------------------------------------------------------------------------------------------
# kernels: arrays are [k, j, i] with a one-cell ghost layer; interior 1..n
# ------------------------------------------------------------------------------------------


@nb.njit(cache=True)
def _apply_bc(u):
    """Homogeneous Dirichlet on the faces: ghost = -inside (x, then y, then z: edges and corners too)."""
    m = u.shape[0]
    for k in range(m):
        for j in range(m):
            u[k, j, 0] = -u[k, j, 1]
            u[k, j, m - 1] = -u[k, j, m - 2]
    for k in range(m):
        for i in range(m):
            u[k, 0, i] = -u[k, 1, i]
            u[k, m - 1, i] = -u[k, m - 2, i]
    for j in range(m):
        for i in range(m):
            u[0, j, i] = -u[1, j, i]
            u[m - 1, j, i] = -u[m - 2, j, i]


@nb.njit(inline="always")
def _ax(x, alpha, bi, bj, bk, a, bh2, k, j, i):
    c = x[k, j, i]
    return a * alpha[k, j, i] * c - bh2 * (
        bi[k, j, i + 1] * (x[k, j, i + 1] - c) - bi[k, j, i] * (c - x[k, j, i - 1])
        + bj[k, j + 1, i] * (x[k, j + 1, i] - c) - bj[k, j, i] * (c - x[k, j - 1, i])
        + bk[k + 1, j, i] * (x[k + 1, j, i] - c) - bk[k, j, i] * (c - x[k - 1, j, i]))


# Each big kernel works on planes k0 <= k < k1; a parallel driver splits the planes over the
# threads on big levels, small levels run it serially (no thread launch per tiny kernel).
PARALLEL_CELLS = 40**3


@nb.njit(cache=True)
def _gsrb_rows(x_n, x_np1, f, alpha, bi, bj, bk, dinv, a, bh2, color, k0, k1):
    """One out-of-place colour pass: cells of ``color`` relax, the others are copied."""
    n = x_n.shape[0] - 2
    for k in range(k0, k1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                if (i + j + k + color) & 1 == 0:
                    x_np1[k, j, i] = x_n[k, j, i] + dinv[k, j, i] * (
                        f[k, j, i] - _ax(x_n, alpha, bi, bj, bk, a, bh2, k, j, i))
                else:
                    x_np1[k, j, i] = x_n[k, j, i]


@nb.njit(parallel=True, cache=True)
def _gsrb_par(x_n, x_np1, f, alpha, bi, bj, bk, dinv, a, bh2, color):
    n = x_n.shape[0] - 2
    for k in nb.prange(1, n + 1):
        _gsrb_rows(x_n, x_np1, f, alpha, bi, bj, bk, dinv, a, bh2, color, k, k + 1)


def _gsrb(x_n, x_np1, f, alpha, bi, bj, bk, dinv, a, bh2, color):
    n = x_n.shape[0] - 2
    if n**3 >= PARALLEL_CELLS:
        _gsrb_par(x_n, x_np1, f, alpha, bi, bj, bk, dinv, a, bh2, color)
    else:
        _gsrb_rows(x_n, x_np1, f, alpha, bi, bj, bk, dinv, a, bh2, color, 1, n + 1)


@nb.njit(cache=True)
def _residual_rows(res, x, f, alpha, bi, bj, bk, a, bh2, k0, k1):
    n = x.shape[0] - 2
    for k in range(k0, k1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                res[k, j, i] = f[k, j, i] - _ax(x, alpha, bi, bj, bk, a, bh2, k, j, i)


@nb.njit(parallel=True, cache=True)
def _residual_par(res, x, f, alpha, bi, bj, bk, a, bh2):
    n = x.shape[0] - 2
    for k in nb.prange(1, n + 1):
        _residual_rows(res, x, f, alpha, bi, bj, bk, a, bh2, k, k + 1)


def _residual(res, x, f, alpha, bi, bj, bk, a, bh2):
    n = x.shape[0] - 2
    if n**3 >= PARALLEL_CELLS:
        _residual_par(res, x, f, alpha, bi, bj, bk, a, bh2)
    else:
        _residual_rows(res, x, f, alpha, bi, bj, bk, a, bh2, 1, n + 1)


@nb.njit(cache=True)
def _apply_op(out, x, alpha, bi, bj, bk, a, bh2):
    n = x.shape[0] - 2
    for k in range(1, n + 1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                out[k, j, i] = _ax(x, alpha, bi, bj, bk, a, bh2, k, j, i)


@nb.njit(cache=True)
def _restrict_cell(coarse, fine):
    """Coarse cell = mean of its eight fine cells."""
    nc = coarse.shape[0] - 2
    for kc in range(1, nc + 1):
        for jc in range(1, nc + 1):
            for ic in range(1, nc + 1):
                k, j, i = 2 * kc - 1, 2 * jc - 1, 2 * ic - 1
                coarse[kc, jc, ic] = 0.125 * (
                    fine[k, j, i] + fine[k, j, i + 1] + fine[k, j + 1, i] + fine[k, j + 1, i + 1]
                    + fine[k + 1, j, i] + fine[k + 1, j, i + 1] + fine[k + 1, j + 1, i] + fine[k + 1, j + 1, i + 1])


@nb.njit(cache=True)
def _interpolate_rows(fine, coarse, k0, k1):
    """fine += trilinear (cell-centred: weights 3/4 and 1/4 per axis) interpolation of coarse (ghosts set)."""
    nf = fine.shape[0] - 2
    for k in range(k0, k1):
        kc = (k + 1) // 2
        ko = -1 if k & 1 else 1
        for j in range(1, nf + 1):
            jc = (j + 1) // 2
            jo = -1 if j & 1 else 1
            for i in range(1, nf + 1):
                ic = (i + 1) // 2
                io = -1 if i & 1 else 1
                s = 0.0
                for dk in range(2):
                    wk = 0.75 if dk == 0 else 0.25
                    for dj in range(2):
                        wj = 0.75 if dj == 0 else 0.25
                        for di in range(2):
                            wi = 0.75 if di == 0 else 0.25
                            s += wk * wj * wi * coarse[kc + dk * ko, jc + dj * jo, ic + di * io]
                fine[k, j, i] += s


@nb.njit(parallel=True, cache=True)
def _interpolate_par(fine, coarse):
    nf = fine.shape[0] - 2
    for k in nb.prange(1, nf + 1):
        _interpolate_rows(fine, coarse, k, k + 1)


def _interpolate_add(fine, coarse):
    n = fine.shape[0] - 2
    if n**3 >= PARALLEL_CELLS:
        _interpolate_par(fine, coarse)
    else:
        _interpolate_rows(fine, coarse, 1, n + 1)


@nb.njit(cache=True)
def _restrict_faces(bi_c, bj_c, bk_c, bi_f, bj_f, bk_f):
    """Coarse face coefficient = mean of the four fine faces it covers (HPGMG RESTRICT_FACE)."""
    nc = bi_c.shape[0] - 2
    for kc in range(1, nc + 2):
        for jc in range(1, nc + 2):
            for ic in range(1, nc + 2):
                k, j, i = 2 * kc - 1, 2 * jc - 1, 2 * ic - 1
                if jc <= nc and kc <= nc:
                    bi_c[kc, jc, ic] = 0.25 * (bi_f[k, j, i] + bi_f[k, j + 1, i] + bi_f[k + 1, j, i]
                                               + bi_f[k + 1, j + 1, i])
                if ic <= nc and kc <= nc:
                    bj_c[kc, jc, ic] = 0.25 * (bj_f[k, j, i] + bj_f[k, j, i + 1] + bj_f[k + 1, j, i]
                                               + bj_f[k + 1, j, i + 1])
                if ic <= nc and jc <= nc:
                    bk_c[kc, jc, ic] = 0.25 * (bk_f[k, j, i] + bk_f[k, j, i + 1] + bk_f[k, j + 1, i]
                                               + bk_f[k, j + 1, i + 1])


@nb.njit(cache=True)
def _rebuild_operator(alpha, bi, bj, bk, valid, dinv, l1inv, a, bh2):
    """D^-1 and L1^-1 with the Dirichlet ghost (-inside) folded in: boundary faces count twice."""
    n = alpha.shape[0] - 2
    for k in range(1, n + 1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                diag = a * alpha[k, j, i] + bh2 * (
                    bi[k, j, i] * (2.0 - valid[k, j, i - 1]) + bi[k, j, i + 1] * (2.0 - valid[k, j, i + 1])
                    + bj[k, j, i] * (2.0 - valid[k, j - 1, i]) + bj[k, j + 1, i] * (2.0 - valid[k, j + 1, i])
                    + bk[k, j, i] * (2.0 - valid[k - 1, j, i]) + bk[k + 1, j, i] * (2.0 - valid[k + 1, j, i]))
                off = bh2 * (bi[k, j, i] * valid[k, j, i - 1] + bi[k, j, i + 1] * valid[k, j, i + 1]
                             + bj[k, j, i] * valid[k, j - 1, i] + bj[k, j + 1, i] * valid[k, j + 1, i]
                             + bk[k, j, i] * valid[k - 1, j, i] + bk[k + 1, j, i] * valid[k + 1, j, i])
                dinv[k, j, i] = 1.0 / diag
                l1inv[k, j, i] = 1.0 / (abs(diag) + off)


@nb.njit(cache=True)
def _dot(u, v):
    n = u.shape[0] - 2
    s = 0.0
    for k in range(1, n + 1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                s += u[k, j, i] * v[k, j, i]
    return s


@nb.njit(cache=True)
def _axpy(y, a, x):
    """y += a x on the interior."""
    n = y.shape[0] - 2
    for k in range(1, n + 1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                y[k, j, i] += a * x[k, j, i]


@nb.njit(cache=True)
def _xpby(p, r, b):
    """p = r + b p on the interior."""
    n = p.shape[0] - 2
    for k in range(1, n + 1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                p[k, j, i] = r[k, j, i] + b * p[k, j, i]


@nb.njit(cache=True)
def _bottom_cg(u, f, r, p, ap, alpha, bi, bj, bk, a, bh2, rtol, maxit):
    """CG on the coarsest level from u = 0 (HPGMG's USE_CG bottom solver); returns the iterations."""
    u[:] = 0.0
    r[:] = f
    p[:] = f
    rr = _dot(r, r)
    stop = rtol * rtol * rr
    it = 0
    while it < maxit and rr > stop:
        _apply_bc(p)
        _apply_op(ap, p, alpha, bi, bj, bk, a, bh2)
        alpha_cg = rr / _dot(p, ap)
        _axpy(u, alpha_cg, p)
        _axpy(r, -alpha_cg, ap)
        rr_new = _dot(r, r)
        _xpby(p, r, rr_new / rr)
        rr = rr_new
        it += 1
    return it


@nb.njit(cache=True)
def _max_abs(x):
    n = x.shape[0] - 2
    m = 0.0
    for k in range(1, n + 1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                m = max(m, abs(x[k, j, i]))
    return m


def level_sizes(n: int) -> list[int]:
    """Interior sizes of the hierarchy: halve while even and at least 4."""
    sizes = [n]
    while sizes[-1] % 2 == 0 and sizes[-1] >= 4:
        sizes.append(sizes[-1] // 2)
    return sizes


def hierarchy_bytes(n: int) -> int:
    sizes = level_sizes(n)
    return 8 * (len(VECTORS) * sum((s + 2) ** 3 for s in sizes) + len(BOTTOM_VECTORS) * (sizes[-1] + 2) ** 3)


@register
class HPGMG(Workload):
    name = "hpgmg"
    proxies = "HPGMG-FV (DOE FastForward)"

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        # the problem is deterministic (HPGMG has no random input); the seed is not used
        n = max(s for s in range(8, 1025, 4) if hierarchy_bytes(s) <= footprint)
        self.n_steps = 12
        self.init(n)

    def init(self, n: int) -> None:
        """Build the hierarchy for an n^3 fine grid: coefficients, D^-1, f; u = 0."""
        self.sizes = level_sizes(n)
        self.levels: list[dict[str, np.ndarray]] = []
        for s in self.sizes:
            lev = {v: np.zeros((s + 2,) * 3) for v in VECTORS}
            lev["alpha"][1:-1, 1:-1, 1:-1] = 1.0
            lev["valid"][1:-1, 1:-1, 1:-1] = 1.0
            self.levels.append(lev)
        for v in BOTTOM_VECTORS:
            self.levels[-1][v] = np.zeros((self.sizes[-1] + 2,) * 3)
        fine = self.levels[0]
        face = np.arange(n + 1) / n  # face positions, low face of cell 1 .. high face of cell n
        cent = (np.arange(n) + 0.5) / n
        fine["beta_i"][1:-1, 1:-1, 1:] = evaluate_beta(face[None, None, :], cent[None, :, None],
                                                       cent[:, None, None])[0]
        fine["beta_j"][1:-1, 1:, 1:-1] = evaluate_beta(cent[None, None, :], face[None, :, None],
                                                       cent[:, None, None])[0]
        fine["beta_k"][1:, 1:-1, 1:-1] = evaluate_beta(cent[None, None, :], cent[None, :, None],
                                                       face[:, None, None])[0]
        fine["f"][1:-1, 1:-1, 1:-1] = _rhs(n)
        for fl, cl in zip(self.levels[:-1], self.levels[1:], strict=True):
            _restrict_faces(cl["beta_i"], cl["beta_j"], cl["beta_k"], fl["beta_i"], fl["beta_j"], fl["beta_k"])
        for lev, s in zip(self.levels, self.sizes, strict=True):
            _rebuild_operator(lev["alpha"], lev["beta_i"], lev["beta_j"], lev["beta_k"], lev["valid"], lev["dinv"],
                              lev["l1inv"], A_COEF, B_COEF * s * s)
        self.norm_f = _max_abs(fine["f"])
        self.residual_history: list[float] = [1.0]  # max|f - Au| / max|f|, u = 0 at the start
        self.bottom_iterations = 0

    def _bh2(self, level: int) -> float:
        return B_COEF * self.sizes[level] ** 2

    def _op(self, level: int) -> tuple:
        lev = self.levels[level]
        return lev["alpha"], lev["beta_i"], lev["beta_j"], lev["beta_k"]

    def _smooth(self, level: int) -> None:
        lev = self.levels[level]
        bufs = (lev["u"], lev["temp"])
        for s in range(2 * NUM_SMOOTHS):
            x_n, x_np1 = bufs[s & 1], bufs[(s + 1) & 1]
            _apply_bc(x_n)
            _gsrb(x_n, x_np1, lev["f"], *self._op(level), lev["dinv"], A_COEF, self._bh2(level), s & 1)

    def _vcycle(self, level: int) -> None:
        lev = self.levels[level]
        if level == len(self.levels) - 1:
            self.bottom_iterations = _bottom_cg(lev["u"], lev["f"], lev["cg_r"], lev["cg_p"], lev["cg_Ap"],
                                                *self._op(level), A_COEF, self._bh2(level), BOTTOM_RTOL,
                                                BOTTOM_MAXIT)
            return
        coarse = self.levels[level + 1]
        self._smooth(level)
        _apply_bc(lev["u"])
        _residual(lev["f_minus_av"], lev["u"], lev["f"], *self._op(level), A_COEF, self._bh2(level))
        _restrict_cell(coarse["f"], lev["f_minus_av"])
        coarse["u"][:] = 0.0
        self._vcycle(level + 1)
        _apply_bc(coarse["u"])
        _interpolate_add(lev["u"], coarse["u"])
        self._smooth(level)

    def step(self) -> None:
        self._vcycle(0)
        fine = self.levels[0]
        _apply_bc(fine["u"])
        _residual(fine["temp"], fine["u"], fine["f"], *self._op(0), A_COEF, self._bh2(0))
        self.residual_history.append(_max_abs(fine["temp"]) / self.norm_f)

    def solution(self) -> np.ndarray:
        """The fine-level solution without its ghosts."""
        return self.levels[0]["u"][1:-1, 1:-1, 1:-1]

    def error(self) -> float:
        """Max deviation of the current solution from the manufactured one at cell centres."""
        return float(np.abs(self.solution() - exact_solution(self.sizes[0])).max())

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        out = {}
        for lv, lev in enumerate(self.levels):
            for v, arr in lev.items():
                out[f"L{lv}.{v}"] = (arr, "other" if v == "valid" else "field")
        return out

    def profile(self) -> AccessProfile:
        kernels: list[Kernel] = []
        last = len(self.sizes) - 1

        def cells(lv: int) -> float:
            return float(self.sizes[lv] ** 3)

        def ghosts(lv: int) -> float:
            s = self.sizes[lv]
            return ((s + 2) ** 3 - s**3) / (s + 2) ** 3

        def coefs(lv: int) -> list[Access]:
            return [Access(f"L{lv}.beta_{d}") for d in "ijk"]

        def bc(lv: int, v: str) -> Kernel:
            return Kernel(f"apply_bc L{lv}", [Access(f"L{lv}.{v}", "readwrite", "strided", fraction=ghosts(lv))], 0.0)

        def smooth(lv: int) -> None:
            for s in range(2 * NUM_SMOOTHS):
                src, dst = ("u", "temp") if s % 2 == 0 else ("temp", "u")
                kernels.append(bc(lv, src))
                kernels.append(Kernel(f"gsrb L{lv}", [Access(f"L{lv}.{src}"), Access(f"L{lv}.f"), *coefs(lv),
                                                      Access(f"L{lv}.dinv"), Access(f"L{lv}.{dst}", "write")],
                                      0.5 * 22 * cells(lv)))

        for lv in range(last):
            smooth(lv)
            kernels += [bc(lv, "u"),
                        Kernel(f"residual L{lv}", [Access(f"L{lv}.u"), Access(f"L{lv}.f"), *coefs(lv),
                                                   Access(f"L{lv}.f_minus_av", "write")], 20 * cells(lv)),
                        Kernel(f"restriction L{lv + 1}", [Access(f"L{lv}.f_minus_av"),
                                                          Access(f"L{lv + 1}.f", "write")], cells(lv)),
                        Kernel(f"zero L{lv + 1}", [Access(f"L{lv + 1}.u", "write")], 0.0)]
        it = max(1, self.bottom_iterations)
        b = f"L{last}"
        kernels.append(Kernel(f"bottom_cg {b}", [
            Access(f"{b}.f"), *[Access(a.allocation, passes=it) for a in coefs(last)],
            Access(f"{b}.u", "readwrite", passes=it), Access(f"{b}.cg_r", "readwrite", passes=2 * it),
            Access(f"{b}.cg_p", "readwrite", passes=2 * it), Access(f"{b}.cg_Ap", "readwrite", passes=2 * it)],
            it * 30 * cells(last)))
        for lv in reversed(range(last)):
            kernels += [bc(lv + 1, "u"),
                        Kernel(f"interpolation L{lv}", [Access(f"L{lv + 1}.u"), Access(f"L{lv}.u", "readwrite")],
                               16 * cells(lv))]
            smooth(lv)
        kernels += [bc(0, "u"),
                    Kernel("residual L0", [Access("L0.u"), Access("L0.f"), *coefs(0), Access("L0.temp", "write")],
                           20 * cells(0)),
                    Kernel("norm L0", [Access("L0.temp")], cells(0))]
        return AccessProfile(self.name, kernels)
