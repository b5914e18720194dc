"""hpgmg: geometric multigrid V-cycles on a 3-D variable-coefficient Poisson problem (proxy of HPGMG-FV).

HPGMG-FV (the DOE FastForward / Top500 multigrid benchmark, github.com/hpgmg/hpgmg,
``finite-volume/``) solves ``a alpha u - b div(beta grad u) = f`` on the unit cube with a
cell-centred finite-volume discretisation and homogeneous Dirichlet boundaries. **The
configuration named here**, whose vectors this proxy keeps and no others: HPGMG-FV's benchmark
vector set (``defines.h`` without ``USE_HELMHOLTZ`` or ``USE_L1JACOBI``, "Default HPGMG benchmark
configuration (saves memory)"), built with the second-order operator ``operators.fv2.c`` and
``-DUSE_GSRB -DUSE_CG``, V-cycles (``MGSolve``: no ``USE_FCYCLES``), Dirichlet boundaries (no
``USE_PERIODIC_BC``); hence the Poisson problem a = 0, b = 1, three red-black Gauss-Seidel
smooths (RBRBRB, in place: fv2 leaves ``GSRB_OOP`` off) before and after each coarse-grid
correction, and a Jacobi-preconditioned CG bottom solver.

Run length, ours / upstream (hpgmg/hpgmg ``finite-volume/source``): the benchmark solves the problem
ten times to warm up and at least ten times timed, each solve one F-cycle (HPGMG's default build); its
V-cycle solver instead runs up to 20 V-cycles until the residual falls by 1e-10. Ours runs 12 V-cycles at
every size, which brings the residual to that tolerance's order (issue 41 reviewed it and kept it).

Arrays, ours / upstream (read in ``defines.h``, ``level.c`` ``create_vectors``, ``mg.c``
``MGBuild``/``MGSolve``/``MGVCycle``, ``solvers.c``, ``solvers/cg.c``, ``operators/rebuild.c``,
``operators/gsrb.c``, ``hpgmg-fv.c``). Every one is float64, cell-centred, with a one-cell
ghost layer, on every level (``MGBuild`` gives each coarser level its finer level's
``numVectors``), in upstream's vector order:

=========================  ==========================  =====================================================
ours                       upstream                    holds
=========================  ==========================  =====================================================
``temp``                   ``VECTOR_TEMP``             the residual of the level (written, then restricted);
                                                       before that, and on the bottom level which no residual
                                                       reaches, the last 0/1 colouring that
                                                       ``rebuild_operator_blackbox`` probed the operator with
``u``                      ``VECTOR_U``                the solution on level 0, the correction below
                                                       (``MGSolve`` passes ``e_id = u_id``)
``f``                      ``VECTOR_F``                the right-hand side on level 0; on levels 1 and 2 its
                                                       cell average, which ``hpgmg-fv.c`` restricts there
                                                       for its 2h and 4h solves; zero below
``e``                      ``VECTOR_E``                the F-cycle's error vector, unused by ``MGSolve``;
                                                       ``rebuild_operator_blackbox`` uses it as its stand-in
                                                       for ``VECTOR_L1INV`` and leaves in it each row's
                                                       inverse L1 norm (Baker et al.'s eq. 6.5 form)
``r``                      ``VECTOR_R``                each level's V-cycle right-hand side: a copy of ``f``
                                                       on level 0, the restricted residual below
``dinv``                   ``VECTOR_DINV``             the inverse diagonal
``beta_i/j/k``             ``VECTOR_BETA_I/J/K``       face coefficients (element i is the low face of cell i)
``cg_r0 cg_r cg_p cg_Ap    ``VECTORS_RESERVED + 0..4`` the bottom solver's vectors, on the bottom level only
cg_z``                     of ``solvers/cg.c``         (``IterativeSolver_NumVectors()`` is 5 with ``USE_CG``)
=========================  ==========================  =====================================================

Not kept, because that build does not allocate them: ``VECTOR_ALPHA`` and ``VECTOR_L1INV``
(created only with ``USE_HELMHOLTZ`` or ``USE_L1JACOBI``) and any mask of valid cells (the
Dirichlet condition lives in the ghost values). Where ours still differs, and why: one box per
level (upstream cuts each level into boxes of ``box_dim``^3 cells, pads rows to
``BOX_ALIGN_JSTRIDE`` doubles and stores each box's vectors together, [box][vector][k][j][i]:
the same values in another order plus zero padding, a layout for its MPI/OpenMP decomposition);
the hierarchy halves while the size is even and at least 4, so the bottom level is 2^3 for
powers of two and odd-sized otherwise (upstream coarsens to 1^3 where its boxes allow); the
ghosts hold the linear Dirichlet extrapolation ghost = -inside on faces, edges and corners (fv2
applies ``apply_BCs_v2``'s quadratic extrapolation, on the faces only for its 7-point star;
the linear one keeps the solver simple and is second order all the same), with D^-1 and the L1
norms folding it in analytically (upstream's black-box probe with eight colourings gives the
same numbers for a linear condition); and one solve on the finest level is run (upstream's
driver also times solves on levels 1 and 2, which leave those levels' ``u``, ``r`` and
``temp`` as their own solves end).

The problem is HPGMG's: coefficient beta = 5.5 + 4.5 tanh(10 (r - 0.25)) (1 near the centre,
10 outside, r = distance from the centre) and manufactured solution u = X(x) X(y) X(z),
X(w) = 2w^6 - 6w^5 + 5w^4 - w^2, whose right-hand side f = -(grad beta . grad u + beta lap u)
is evaluated at cell centres and beta at face centres; coarse betas are face averages
(``RESTRICT_FACE``).

One step is one V-cycle as ``MGVCycle`` runs it: on each level three GSRB smooths (six colour
passes, Dirichlet ghosts applied before each), the residual of ``r`` into ``temp``,
cell-averaging restriction of ``temp`` into the coarser ``r``, the coarser ``u`` zeroed, on the
bottom level CG to a 1e-3 reduction of the max-norm residual (``MG_DEFAULT_BOTTOM_NORM``, at most
200 iterations), volume-averaged quadratic interpolation of the correction
(``interpolation_v2``: weights 1/8, 1, -1/8 per axis) added to ``u``, three post-smooths; then
the fine residual of ``f`` into ``temp`` and its max norm.

For compressibility: at step 0 every ``u`` and ``r`` below level 0 is zero, ``temp`` holds a
0/1 colouring and ``f``, ``dinv``, ``e`` and the betas hold data; ``beta`` is smooth and
two-valued away from a thin shell, ``dinv`` and ``e`` follow it, the ghost layers are
structured (zero or mirrored). The check: the max-norm residual falls by a steady factor
(< 0.2) per V-cycle down to round-off, and the converged solution approaches the manufactured
one at second order (the discretisation error falls four-fold when h halves).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, AccessProfile, Kernel, Workload
from buddylib.workloads.hpc import _libm

A_COEF, B_COEF = 0.0, 1.0  # HPGMG's Poisson problem (hpgmg-fv.c without USE_HELMHOLTZ)
NUM_SMOOTHS = 3  # operators.fv2.c with USE_GSRB: RBRBRB, six colour passes
#: HPGMG-FV's vectors on every level, in defines.h's order (the default build's VECTORS_RESERVED = 9)
VECTORS = ("temp", "u", "f", "e", "r", "dinv", "beta_i", "beta_j", "beta_k")
#: solvers/cg.c's vectors, added to the bottom level only (IterativeSolver_NumVectors() = 5)
BOTTOM_VECTORS = ("cg_r0", "cg_r", "cg_p", "cg_Ap", "cg_z")
BOTTOM_REDUCTION = 1e-3  # MG_DEFAULT_BOTTOM_NORM
BOTTOM_MAXIT = 200  # cg.c's jMax
RHS_LEVELS = 3  # hpgmg-fv.c's DYNAMIC_RANGE: f is restricted onto levels 1 and 2


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
# kernels: arrays are [k, j, i] with a one-cell ghost layer; interior 1..n. Vector operations
# touch the interior only (as HPGMG's blocks do); zeroing includes the ghosts (zero_vector).
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
def _ax(x, bi, bj, bk, bh2, k, j, i):
    """The variable-coefficient Poisson operator (fv2's apply_op_ijk without USE_HELMHOLTZ)."""
    c = x[k, j, i]
    return -bh2 * (
        bi[k, j, i + 1] * (x[k, j, i + 1] - c) - bi[k, j, i] * (c - x[k, j, i - 1])
        + bj[k, j + 1, i] * (x[k, j + 1, i] - c) - bj[k, j, i] * (c - x[k, j - 1, i])
        + bk[k + 1, j, i] * (x[k + 1, j, i] - c) - bk[k, j, i] * (c - x[k - 1, j, i]))


# Each big kernel works on planes k0 <= k < k1; a parallel driver splits the planes over the
# threads on big levels, small levels run it serially (no thread launch per tiny kernel).
PARALLEL_CELLS = 40**3


@nb.njit(cache=True)
def _gsrb_rows(x, rhs, bi, bj, bk, dinv, bh2, color, k0, k1):
    """One in-place colour pass: the cells with i + j + k + color odd (1-based) relax.

    Colour 0 is upstream's first sweep, the cells whose 0-based i + j + k is even. A cell reads
    only cells of the other colour, so the planes may run in any order.
    """
    n = x.shape[0] - 2
    for k in range(k0, k1):
        for j in range(1, n + 1):
            for i in range(1 + ((j + k + color) & 1), n + 1, 2):
                x[k, j, i] = x[k, j, i] + dinv[k, j, i] * (rhs[k, j, i] - _ax(x, bi, bj, bk, bh2, k, j, i))


@nb.njit(parallel=True, cache=True)
def _gsrb_par(x, rhs, bi, bj, bk, dinv, bh2, color):
    n = x.shape[0] - 2
    for k in nb.prange(1, n + 1):
        _gsrb_rows(x, rhs, bi, bj, bk, dinv, bh2, color, k, k + 1)


def _gsrb(x, rhs, bi, bj, bk, dinv, bh2, color):
    n = x.shape[0] - 2
    if n**3 >= PARALLEL_CELLS:
        _gsrb_par(x, rhs, bi, bj, bk, dinv, bh2, color)
    else:
        _gsrb_rows(x, rhs, bi, bj, bk, dinv, bh2, color, 1, n + 1)


@nb.njit(cache=True)
def _residual_rows(res, x, rhs, bi, bj, bk, bh2, k0, k1):
    n = x.shape[0] - 2
    for k in range(k0, k1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                res[k, j, i] = rhs[k, j, i] - _ax(x, bi, bj, bk, bh2, k, j, i)


@nb.njit(parallel=True, cache=True)
def _residual_par(res, x, rhs, bi, bj, bk, bh2):
    n = x.shape[0] - 2
    for k in nb.prange(1, n + 1):
        _residual_rows(res, x, rhs, bi, bj, bk, bh2, k, k + 1)


def _residual(res, x, rhs, bi, bj, bk, bh2):
    """res = rhs - A x on the interior (x's ghosts set first, as HPGMG's residual does)."""
    _apply_bc(x)
    n = x.shape[0] - 2
    if n**3 >= PARALLEL_CELLS:
        _residual_par(res, x, rhs, bi, bj, bk, bh2)
    else:
        _residual_rows(res, x, rhs, bi, bj, bk, bh2, 1, n + 1)


@nb.njit(cache=True)
def _apply_op(out, x, bi, bj, bk, bh2):
    n = x.shape[0] - 2
    for k in range(1, n + 1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                out[k, j, i] = _ax(x, bi, bj, bk, bh2, k, j, i)


@nb.njit(cache=True)
def _restrict_cell(coarse, fine):
    """Coarse cell = mean of its eight fine cells (RESTRICT_CELL)."""
    nc = coarse.shape[0] - 2
    for kc in range(1, nc + 1):
        for jc in range(1, nc + 1):
            for ic in range(1, nc + 1):
                k, j, i = 2 * kc - 1, 2 * jc - 1, 2 * ic - 1
                coarse[kc, jc, ic] = 0.125 * (
                    fine[k, j, i] + fine[k, j, i + 1] + fine[k, j + 1, i] + fine[k, j + 1, i + 1]
                    + fine[k + 1, j, i] + fine[k + 1, j, i + 1] + fine[k + 1, j + 1, i] + fine[k + 1, j + 1, i + 1])


@nb.njit(inline="always")
def _quad_weight(d, s):
    """Weight of the coarse neighbour at offset d (-1, 0, 1) for a child on the side s (1/8 low, -1/8 high)."""
    return 1.0 if d == 0 else (s if d < 0 else -s)


@nb.njit(cache=True)
def _interpolate_rows(fine, coarse, k0, k1):
    """fine += volume-averaged quadratic interpolation of coarse (ghosts set): per axis, a child
    on the low side of its coarse cell takes 1/8 of the low neighbour, 1 of the cell and -1/8 of
    the high neighbour; one on the high side the mirror image."""
    nf = fine.shape[0] - 2
    for k in range(k0, k1):
        kc = (k + 1) // 2
        sk = 0.125 if k & 1 else -0.125
        for j in range(1, nf + 1):
            jc = (j + 1) // 2
            sj = 0.125 if j & 1 else -0.125
            for i in range(1, nf + 1):
                ic = (i + 1) // 2
                si = 0.125 if i & 1 else -0.125
                s = 0.0
                for dk in range(-1, 2):
                    wk = _quad_weight(dk, sk)
                    for dj in range(-1, 2):
                        wj = _quad_weight(dj, sj)
                        for di in range(-1, 2):
                            s += wk * wj * _quad_weight(di, si) * coarse[kc + dk, jc + dj, ic + di]
                fine[k, j, i] += s


@nb.njit(parallel=True, cache=True)
def _interpolate_par(fine, coarse):
    nf = fine.shape[0] - 2
    for k in nb.prange(1, nf + 1):
        _interpolate_rows(fine, coarse, k, k + 1)


def _interpolate_add(fine, coarse):
    _apply_bc(coarse)
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
def _rebuild_operator(bi, bj, bk, dinv, l1inv, temp, bh2):
    """D^-1 and the inverse L1 row norm, as rebuild_operator_blackbox leaves them, and its last probe in temp.

    With the ghost = -inside condition a boundary face counts twice in the diagonal A_ii and not
    at all in the off-diagonal sum S_i = sum_j |A_ij|; the L1 inverse is Baker et al.'s eq. 6.5
    form: 1/A_ii where A_ii >= 1.5 S_i, else 1/(A_ii + S_i/2). The probe is upstream's last of
    eight colourings: 1 where the 0-based i, j and k are all odd (a 1-cell level has one colour).
    """
    n = bi.shape[0] - 2
    for k in range(1, n + 1):
        wk_lo, wk_hi = (2.0, 0.0) if k == 1 else (1.0, 1.0), (2.0, 0.0) if k == n else (1.0, 1.0)
        for j in range(1, n + 1):
            wj_lo, wj_hi = (2.0, 0.0) if j == 1 else (1.0, 1.0), (2.0, 0.0) if j == n else (1.0, 1.0)
            for i in range(1, n + 1):
                wi_lo, wi_hi = (2.0, 0.0) if i == 1 else (1.0, 1.0), (2.0, 0.0) if i == n else (1.0, 1.0)
                diag = bh2 * (bi[k, j, i] * wi_lo[0] + bi[k, j, i + 1] * wi_hi[0]
                              + bj[k, j, i] * wj_lo[0] + bj[k, j + 1, i] * wj_hi[0]
                              + bk[k, j, i] * wk_lo[0] + bk[k + 1, j, i] * wk_hi[0])
                off = bh2 * (bi[k, j, i] * wi_lo[1] + bi[k, j, i + 1] * wi_hi[1]
                             + bj[k, j, i] * wj_lo[1] + bj[k, j + 1, i] * wj_hi[1]
                             + bk[k, j, i] * wk_lo[1] + bk[k + 1, j, i] * wk_hi[1])
                dinv[k, j, i] = 1.0 / diag
                l1inv[k, j, i] = 1.0 / diag if diag >= 1.5 * off else 1.0 / (diag + 0.5 * off)
                if n < 2:
                    temp[k, j, i] = 1.0
                else:
                    temp[k, j, i] = 1.0 if (k & 1) == 0 and (j & 1) == 0 and (i & 1) == 0 else 0.0
    _apply_bc(temp)


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
def _xpby(p, z, b):
    """p = z + b p on the interior."""
    n = p.shape[0] - 2
    for k in range(1, n + 1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                p[k, j, i] = z[k, j, i] + b * p[k, j, i]


@nb.njit(cache=True)
def _mul(out, a, b):
    """out = a * b on the interior."""
    n = out.shape[0] - 2
    for k in range(1, n + 1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                out[k, j, i] = a[k, j, i] * b[k, j, i]


@nb.njit(cache=True)
def _copy(out, a):
    """out = a on the interior."""
    n = out.shape[0] - 2
    for k in range(1, n + 1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                out[k, j, i] = a[k, j, i]


@nb.njit(cache=True)
def _max_abs(x):
    n = x.shape[0] - 2
    m = 0.0
    for k in range(1, n + 1):
        for j in range(1, n + 1):
            for i in range(1, n + 1):
                m = max(m, abs(x[k, j, i]))
    return m


@nb.njit(cache=True)
def _bottom_cg(x, rhs, r0, r, p, ap, z, dinv, bi, bj, bk, bh2, reduction, maxit):
    """Jacobi-preconditioned CG on the bottom level (HPGMG's USE_CG, Saad's algorithm 9.1): stops when
    the max norm of r falls below ``reduction`` times its start, at a breakdown, or after ``maxit``
    iterations; returns the iterations."""
    _apply_bc(x)
    n = x.shape[0] - 2
    _residual_rows(r0, x, rhs, bi, bj, bk, bh2, 1, n + 1)
    _copy(r, r0)
    _mul(z, dinv, r0)
    _copy(p, z)
    norm_r0 = _max_abs(r)
    if norm_r0 == 0.0:
        return 0
    rz = _dot(r, z)
    it = 0
    while it < maxit:
        it += 1
        _apply_bc(p)
        _apply_op(ap, p, bi, bj, bk, bh2)
        pap = _dot(ap, p)
        if pap == 0.0:
            break
        alpha = rz / pap
        if np.isinf(alpha):
            break
        _axpy(x, alpha, p)
        _axpy(r, -alpha, ap)
        norm_r = _max_abs(r)
        if norm_r == 0.0 or norm_r < reduction * norm_r0:
            break
        _mul(z, dinv, r)
        rz_new = _dot(r, z)
        if rz_new == 0.0:
            break
        beta = rz_new / rz
        if np.isinf(beta):
            break
        _xpby(p, z, beta)
        rz = rz_new
    return it


def level_sizes(n: int) -> list[int]:
    """Interior sizes of the hierarchy: halve while even and at least 4."""
    sizes = [n]
    while sizes[-1] % 2 == 0 and sizes[-1] >= 4:
        sizes.append(sizes[-1] // 2)
    return sizes


def hierarchy_bytes(n: int) -> int:
    sizes = level_sizes(n)
    return 8 * (len(VECTORS) * sum((s + 2) ** 3 for s in sizes) + len(BOTTOM_VECTORS) * (sizes[-1] + 2) ** 3)


def allocation_names(sizes: list[int]) -> list[str]:
    """The allocations a run holds, level by level: HPGMG-FV's vectors, and CG's on the bottom level."""
    last = len(sizes) - 1
    return [f"L{lv}.{v}" for lv in range(len(sizes)) for v in VECTORS + (BOTTOM_VECTORS if lv == last else ())]


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
        """Build the hierarchy for an n^3 fine grid as MGBuild leaves it, then start MGSolve: u = 0, r = f."""
        self.sizes = level_sizes(n)
        last = len(self.sizes) - 1
        self.levels: list[dict[str, np.ndarray]] = []
        for lv, s in enumerate(self.sizes):
            names = VECTORS + (BOTTOM_VECTORS if lv == last else ())
            self.levels.append({v: np.zeros((s + 2,) * 3) for v in names})
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
        for lv, lev in enumerate(self.levels):
            _rebuild_operator(lev["beta_i"], lev["beta_j"], lev["beta_k"], lev["dinv"], lev["e"], lev["temp"],
                              self._bh2(lv))
        for lv in range(1, min(RHS_LEVELS, len(self.levels))):  # the driver's f for its 2h and 4h solves
            _restrict_cell(self.levels[lv]["f"], self.levels[lv - 1]["f"])
        self.norm_f = _max_abs(fine["f"])
        _copy(fine["r"], fine["f"])  # MGSolve: e = u = 0, R = F
        self.residual_history: list[float] = [1.0]  # max|f - Au| / max|f|, u = 0 at the start
        self.bottom_iterations = 0

    def _bh2(self, level: int) -> float:
        return B_COEF * self.sizes[level] ** 2

    def _betas(self, level: int) -> tuple:
        lev = self.levels[level]
        return lev["beta_i"], lev["beta_j"], lev["beta_k"]

    def _smooth(self, level: int) -> None:
        lev = self.levels[level]
        for s in range(2 * NUM_SMOOTHS):
            _apply_bc(lev["u"])
            _gsrb(lev["u"], lev["r"], *self._betas(level), lev["dinv"], self._bh2(level), s & 1)

    def _vcycle(self, level: int) -> None:
        lev = self.levels[level]
        if level == len(self.levels) - 1:
            self.bottom_iterations = _bottom_cg(lev["u"], lev["r"], lev["cg_r0"], lev["cg_r"], lev["cg_p"],
                                                lev["cg_Ap"], lev["cg_z"], lev["dinv"], *self._betas(level),
                                                self._bh2(level), BOTTOM_REDUCTION, BOTTOM_MAXIT)
            return
        coarse = self.levels[level + 1]
        self._smooth(level)
        _residual(lev["temp"], lev["u"], lev["r"], *self._betas(level), self._bh2(level))
        _restrict_cell(coarse["r"], lev["temp"])
        coarse["u"][:] = 0.0
        self._vcycle(level + 1)
        _interpolate_add(lev["u"], coarse["u"])
        self._smooth(level)

    def step(self) -> None:
        self._vcycle(0)
        fine = self.levels[0]
        _residual(fine["temp"], fine["u"], fine["f"], *self._betas(0), self._bh2(0))
        self.residual_history.append(_max_abs(fine["temp"]) / self.norm_f)

    def solution(self) -> np.ndarray:
        """The fine-level solution without its ghosts."""
        return self.levels[0]["u"][1:-1, 1:-1, 1:-1]

    def error(self) -> float:
        """Max deviation of the current solution from the manufactured one at cell centres."""
        return float(np.abs(self.solution() - exact_solution(self.sizes[0])).max())

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {f"L{lv}.{v}": (arr, "field") for lv, lev in enumerate(self.levels) for v, arr in lev.items()}

    def profile(self) -> AccessProfile:
        kernels: list[Kernel] = []
        last = len(self.sizes) - 1

        def cells(lv: int) -> float:
            return float(self.sizes[lv] ** 3)

        def ghosts(lv: int) -> float:
            s = self.sizes[lv]
            return ((s + 2) ** 3 - s**3) / (s + 2) ** 3

        def betas(lv: int, passes: int = 1) -> list[Access]:
            return [Access(f"L{lv}.beta_{d}", passes=passes) for d in "ijk"]

        def bc(lv: int, v: str) -> Kernel:
            return Kernel(f"apply_bc L{lv}", [Access(f"L{lv}.{v}", "readwrite", "strided", fraction=ghosts(lv))], 0.0)

        def smooth(lv: int) -> None:
            for _ in range(2 * NUM_SMOOTHS):
                kernels.append(bc(lv, "u"))
                kernels.append(Kernel(f"gsrb L{lv}", [Access(f"L{lv}.u", "readwrite"), Access(f"L{lv}.r"),
                                                      *betas(lv), Access(f"L{lv}.dinv")], 0.5 * 21 * cells(lv)))

        for lv in range(last):
            smooth(lv)
            kernels += [bc(lv, "u"),
                        Kernel(f"residual L{lv}", [Access(f"L{lv}.u"), Access(f"L{lv}.r"), *betas(lv),
                                                   Access(f"L{lv}.temp", "write")], 20 * cells(lv)),
                        Kernel(f"restriction L{lv + 1}", [Access(f"L{lv}.temp"),
                                                          Access(f"L{lv + 1}.r", "write")], cells(lv)),
                        Kernel(f"zero L{lv + 1}", [Access(f"L{lv + 1}.u", "write")], 0.0)]
        it = max(1, self.bottom_iterations)
        b = f"L{last}"
        kernels.append(Kernel(f"bottom_cg {b}", [
            Access(f"{b}.r"), Access(f"{b}.dinv", passes=it), *betas(last, it),
            Access(f"{b}.u", "readwrite", passes=it), Access(f"{b}.cg_r0", "write"),
            Access(f"{b}.cg_r", "readwrite", passes=3 * it), Access(f"{b}.cg_p", "readwrite", passes=3 * it),
            Access(f"{b}.cg_Ap", "readwrite", passes=3 * it), Access(f"{b}.cg_z", "readwrite", passes=3 * it)],
            it * 34 * cells(last)))
        for lv in reversed(range(last)):
            kernels += [bc(lv + 1, "u"),
                        Kernel(f"interpolation L{lv}", [Access(f"L{lv + 1}.u"), Access(f"L{lv}.u", "readwrite")],
                               2 * 27 * cells(lv))]
            smooth(lv)
        kernels += [bc(0, "u"),
                    Kernel("residual L0", [Access("L0.u"), Access("L0.f"), *betas(0), Access("L0.temp", "write")],
                           20 * cells(0)),
                    Kernel("norm L0", [Access("L0.temp")], cells(0))]
        return AccessProfile(self.name, kernels)
