"""cg: NAS CG, the inverse power method with an inner conjugate gradient (proxy of SPEC ACCEL 354.cg).

The original (NPB CG, which SPEC ACCEL 354.cg ports to OpenACC) estimates the largest
eigenvalue of a random sparse symmetric matrix. ``makea`` builds it exactly as NPB does:
``n`` sparse random vectors ``v_i`` (``nonzer`` entries at random columns from NAS's
``randlc`` generator, plus 0.5 at position ``i``) are summed as outer products with the
geometric weights ``rcond^(i/n)``, ``rcond`` is added to the diagonal and the whole matrix
is shifted by ``-shift``: ``A = sum_i w_i v_i v_i^T + (rcond - shift) I``. NPB's ``sparse``
assembles it in CSR with sorted columns and summed duplicates: ``rowstr`` and ``colidx`` as
int32, ``a`` as float64. Each outer iteration runs ``conj_grad`` (25 CG iterations on
``A z = x``, then the explicit residual ``||x - A z||``), estimates ``zeta = shift + 1/(x.z)``
and normalises ``x = z / ||z||``; the vectors ``x, z, p, q, r`` are the working set.

For compressibility the matrix dominates: ``colidx`` is an int32 index array of sorted,
random columns (high bits shared within a row), ``rowstr`` a monotone int32 array, ``a``
float64 values that are products of uniform randoms (incompressible mantissas) with a
distinct diagonal. The access pattern that matters is the SpMV gathering ``p`` (and ``z``)
through ``colidx``. At step 0 ``x = 1`` and ``z, p, q, r`` are zero, as NPB starts.

The seed picks NAS's ``tran`` (an odd 46-bit seed of ``randlc``); with NAS's own seed
314159265 and class S parameters the run reproduces NPB's verification value of zeta
(8.5971775078648) to its 1e-10 tolerance. The check: the matrix is symmetric, ``A + shift I``
is positive definite with smallest eigenvalue >= rcond (NPB's stated bound), ``shift`` lies
above its spectrum so ``-A`` is positive definite (the CG inner solve is well posed), the CG
residual falls by orders of magnitude within the 25 inner iterations, and zeta converges to
``shift + 1/lambda`` of the eigenvalue of ``A`` nearest zero (``numpy.linalg`` on a small case).

Run length, ours / upstream (NPB 3.3 ``sys/setparams.c``; spec.org/accel/Docs/354.cg.html): NAS CG runs
15 outer iterations in classes S, W and A (na 1,400 / 7,000 / 14,000), 75 in B (75,000) and C (150,000), 100
in D (1.5 million); SPEC ACCEL's ref input runs 100 on its own size. Ours solves class S's problem at quick
(nonzer 7, shift 10; na 4,256) and class B's above it (nonzer 13, shift 60; na 14,754 at 32 MiB, 59,019 at
128 MiB, 472,158 at 1 GiB), and runs that class's count: 15 at quick, 75 above (one ``step`` of the workload
is 1/28 of them, :mod:`~buddylib.workloads.hpc._schedule`). Where the whole run does not fit the time one
size is given it runs a stated share (:data:`REACH`, snapshots on the same fractions at every size): the
whole run at quick, 32 MiB and 1 GiB; 1/7 (11 iterations) at 128 MiB, which ``make reproduce`` runs; 1/4
(19) at 4 GiB.

Arrays, ours / upstream (read: NPB 3.4 OpenMP ``CG/cg_data.f90`` in
studyztp/NPB3.4-OMP-custom-makefile, the NPB 2.3 OpenACC C port ``CG/cg.c`` in
grypp/NPB2.3-OpenACC-C, GMAP/NPB-GPU's CUDA ``CG/cg.cu``; SPEC describes 354.cg as the University
of Houston's OpenACC port of SNU's C translation of NPB 3.3, whose source is not public):

=========================================  ===================================================
ours                                       NPB
=========================================  ===================================================
``a`` float64, ``colidx`` int32 (nnz)      ``a(nz)``, ``colidx(nz)``, nz = na (nonzer + 1)^2
``rowstr`` int32 (n + 1)                   ``rowstr(na+1)``
``x``, ``z``, ``p``, ``q``, ``r`` (n)      ``x``, ``z``, ``p``, ``q``, ``r`` (na + 2)
(none)                                     ``makea``'s work arrays ``iv``, ``arow``, ``acol``,
                                           ``v``, ``aelt``; GMAP's CUDA port also keeps the
                                           scalars ``rho``, ``d``, ``alpha``, ``beta``, ``sum``,
                                           norms and per-block reduction buffers on the device
=========================================  ===================================================

Where ours differs, and why: ``a`` and ``colidx`` are sized to the matrix's nonzeros, where NPB
allocates the bound nz = na (nonzer + 1)^2 and fills the first ``rowstr(na+1) - 1`` entries (the
rest, 13 %, 10 % and 8 % of the bound for classes S, W and A, is never read); the vectors have
n entries, not na + 2 (two never-used spares); the matrix-generation work arrays are not kept
(NPB uses them only in ``makea``, and the GPU ports build the matrix on the host), nor the
reduction scalars (a few doubles).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import QUICK_LIMIT, Access, AccessProfile, Kernel, Workload
from buddylib.workloads.hpc._nas import A, randlc
from buddylib.workloads.hpc._schedule import Scheduled, reach

NAS_TRAN = 314159265  # NPB's seed
CGITMAX = 25  # inner CG iterations per outer iteration, as in NPB
RCOND = 0.1
#: NPB classes: (na, nonzer, niter, shift, zeta verification value)
CLASSES = {
    "S": (1400, 7, 15, 10.0, 8.5971775078648),
    "W": (7000, 8, 15, 12.0, 10.362595087124),
    "A": (14000, 11, 15, 20.0, 17.130235054029),
    "B": (75000, 13, 75, 60.0, 22.712745482631),
}


@nb.njit(cache=True)
def _make_vectors(n, nonzer, tran):
    """NPB makea's first half: sprnvc + vecset per outer product; returns arow, acol, aelt, tran."""
    nn1 = 1
    while True:
        nn1 *= 2
        if nn1 >= n:
            break
    arow = np.zeros(n, np.int32)
    acol = np.zeros((n, nonzer + 1), np.int32)
    aelt = np.zeros((n, nonzer + 1), np.float64)
    for iouter in range(n):
        nzv = 0
        while nzv < nonzer:  # sprnvc
            tran, vecelt = randlc(tran, A)
            tran, vecloc = randlc(tran, A)
            i = int(nn1 * vecloc) + 1
            if i > n:
                continue
            seen = False
            for ii in range(nzv):
                if acol[iouter, ii] == i - 1:
                    seen = True
                    break
            if seen:
                continue
            aelt[iouter, nzv] = vecelt
            acol[iouter, nzv] = i - 1
            nzv += 1
        found = False  # vecset(iouter, 0.5)
        for k in range(nzv):
            if acol[iouter, k] == iouter:
                aelt[iouter, k] = 0.5
                found = True
        if not found:
            aelt[iouter, nzv] = 0.5
            acol[iouter, nzv] = iouter
            nzv += 1
        arow[iouter] = nzv
    return arow, acol, aelt, tran


@nb.njit(cache=True)
def _triples(n, arow, acol, aelt, ratio, rcond, shift):
    """The (row, col, value) triples of NPB sparse() in its generation order, bucketed by row."""
    start = np.zeros(n + 1, np.int64)
    for i in range(n):
        for nza in range(arow[i]):
            start[acol[i, nza] + 1] += arow[i]
    for j in range(n):
        start[j + 1] += start[j]
    fill = start[:-1].copy()
    tcol = np.empty(start[n], np.int32)
    tval = np.empty(start[n], np.float64)
    size = 1.0
    for i in range(n):
        for nza in range(arow[i]):
            j = acol[i, nza]
            scale = size * aelt[i, nza]
            for nzrow in range(arow[i]):
                jcol = acol[i, nzrow]
                va = aelt[i, nzrow] * scale
                if jcol == j and j == i:
                    va = va + rcond - shift
                tcol[fill[j]] = jcol
                tval[fill[j]] = va
                fill[j] += 1
        size = size * ratio
    return start, tcol, tval


@nb.njit(parallel=True, cache=True)
def _assemble(n, start, tcol, tval):
    """Per row: sort columns (stable) and sum duplicates in generation order, as NPB's insertion does."""
    count = np.zeros(n + 1, np.int64)
    for j in nb.prange(n):
        seg = tcol[start[j]:start[j + 1]]
        order = np.argsort(seg, kind="mergesort")
        u = 0
        for m in range(order.size):
            if m == 0 or seg[order[m]] != seg[order[m - 1]]:
                u += 1
        count[j + 1] = u
    rowstr = np.zeros(n + 1, np.int32)
    for j in range(n):
        count[j + 1] += count[j]
        rowstr[j + 1] = count[j + 1]
    a = np.empty(count[n], np.float64)
    colidx = np.empty(count[n], np.int32)
    for j in nb.prange(n):
        seg = tcol[start[j]:start[j + 1]]
        vals = tval[start[j]:start[j + 1]]
        order = np.argsort(seg, kind="mergesort")
        k = count[j] - 1
        for m in range(order.size):
            c = seg[order[m]]
            if m == 0 or c != seg[order[m - 1]]:
                k += 1
                colidx[k] = c
                a[k] = 0.0
            a[k] = a[k] + vals[order[m]]
    return rowstr, colidx, a


def makea(n: int, nonzer: int, rcond: float, shift: float, tran: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NPB's CG matrix: ``rowstr`` (int32, n+1), ``colidx`` (int32), ``a`` (float64) in CSR.

    ``tran`` is randlc's seed before NPB main's first ``zeta = randlc(tran, amult)`` call.
    """
    tran, _ = randlc(float(tran), A)
    arow, acol, aelt, _ = _make_vectors(n, nonzer, tran)
    ratio = rcond ** (1.0 / n)
    start, tcol, tval = _triples(n, arow, acol, aelt, ratio, rcond, shift)
    return _assemble(n, start, tcol, tval)


@nb.njit(parallel=True, cache=True)
def _spmv(rowstr, colidx, a, v, out):
    """out = A v; the gather of v through colidx."""
    for j in nb.prange(rowstr.size - 1):
        s = 0.0
        for k in range(rowstr[j], rowstr[j + 1]):
            s += a[k] * v[colidx[k]]
        out[j] = s


@nb.njit(cache=True)
def _dot(u, v):
    s = 0.0
    for i in range(u.size):
        s += u[i] * v[i]
    return s


@nb.njit(cache=True)
def _diff2(u, v):
    s = 0.0
    for i in range(u.size):
        d = u[i] - v[i]
        s += d * d
    return s


@nb.njit(cache=True)
def _init_cg(x, z, p, q, r):
    for j in range(x.size):
        q[j] = 0.0
        z[j] = 0.0
        r[j] = x[j]
        p[j] = x[j]


@nb.njit(cache=True)
def _update_zr(alpha, p, q, z, r):
    for j in range(z.size):
        z[j] = z[j] + alpha * p[j]
        r[j] = r[j] - alpha * q[j]


@nb.njit(cache=True)
def _update_p(beta, r, p):
    for j in range(p.size):
        p[j] = r[j] + beta * p[j]


@nb.njit(cache=True)
def _scale(s, z, x):
    for j in range(x.size):
        x[j] = s * z[j]


@nb.njit(cache=True)
def conj_grad(rowstr, colidx, a, x, z, p, q, r, history):
    """NPB conj_grad: 25 CG iterations on A z = x; ``history`` gets sqrt(rho) before each; returns ||x - A z||."""
    _init_cg(x, z, p, q, r)
    rho = _dot(r, r)
    history[0] = np.sqrt(rho)
    for cgit in range(CGITMAX):
        _spmv(rowstr, colidx, a, p, q)
        d = _dot(p, q)
        alpha = rho / d
        rho0 = rho
        _update_zr(alpha, p, q, z, r)
        rho = _dot(r, r)
        history[cgit + 1] = np.sqrt(rho)
        beta = rho / rho0
        _update_p(beta, r, p)
    _spmv(rowstr, colidx, a, z, r)  # explicit residual ||x - A z||
    return np.sqrt(_diff2(x, r))


def nnz_per_row(nonzer: int) -> int:
    """About how many nonzeros a row holds: (nonzer+1)^2 triples less the nonzer repeats of the diagonal."""
    return (nonzer + 1) ** 2 - nonzer


#: Outer iterations of NPB's classes S (quick's problem) and B (every larger one's)
ITERATIONS_S, ITERATIONS_B = 15, 75
#: The share of its class's iterations a run of up to so many bytes goes to: the whole run where it fits the
#: time one size is given
REACH = ((64 << 20, 1.0), (256 << 20, 1 / 7), (2 << 30, 1.0), (math.inf, 1 / 4))



@register
class CG(Scheduled, Workload):
    name = "cg"
    proxies = "SPEC ACCEL 354.cg (NAS CG)"

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        quick = footprint <= QUICK_LIMIT
        nonzer, shift = (7, 10.0) if quick else (13, 60.0)  # NPB class S / class B sparsity and shift
        per_row = 12 * nnz_per_row(nonzer) + 5 * 8 + 4  # a + colidx, five vectors, rowstr
        n = int(footprint * 0.985 / per_row)
        tran = 2 * int(rng.integers(0, 1 << 45)) + 1  # an odd 46-bit randlc seed
        self.init(n, nonzer, shift, tran)
        total = sum(arr.nbytes for arr, _ in self.allocations().values())
        if total > footprint:  # more duplicates than expected: never over the footprint
            self.init(int(n * footprint / total * 0.995), nonzer, shift, tran)
        self.begin(math.inf, ITERATIONS_S if quick else ITERATIONS_B, reach(REACH, footprint))

    def init(self, n: int, nonzer: int, shift: float, tran: int = NAS_TRAN, rcond: float = RCOND) -> None:
        """Build the NPB matrix and start vectors (x = 1, the rest zero) for ``n`` rows."""
        self.n, self.nonzer, self.shift, self.rcond = n, nonzer, shift, rcond
        self.rowstr, self.colidx, self.a = makea(n, nonzer, rcond, shift, tran)
        self.x = np.ones(n)
        self.z, self.p, self.q, self.r = (np.zeros(n) for _ in range(4))
        self.zeta = 0.0
        self.rnorm = np.nan
        self.history = np.zeros(CGITMAX + 1)
        self.time, self.cycles = 0.0, 0  # no simulated time: progress is iterations

    def advance(self) -> None:
        """One outer iteration."""
        self.cycles += 1
        self.rnorm = conj_grad(self.rowstr, self.colidx, self.a, self.x, self.z, self.p, self.q, self.r,
                               self.history)
        norm_temp1 = _dot(self.x, self.z)
        norm_temp2 = 1.0 / np.sqrt(_dot(self.z, self.z))
        self.zeta = self.shift + 1.0 / norm_temp1
        _scale(norm_temp2, self.z, self.x)

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {"a": (self.a, "field"), "colidx": (self.colidx, "index"), "rowstr": (self.rowstr, "index"),
                "x": (self.x, "field"), "z": (self.z, "field"), "p": (self.p, "field"), "q": (self.q, "field"),
                "r": (self.r, "field")}

    def profile(self) -> AccessProfile:
        nnz, n = float(self.a.size), float(self.n)

        def spmv(name: str, src: str, dst: str) -> Kernel:
            return Kernel(name, [Access("rowstr"), Access("colidx"), Access("a"),
                                 Access(src, pattern="gather", index="colidx"), Access(dst, "write")], 2 * nnz)

        kernels = [Kernel("init_cg", [Access("x"), Access("q", "write"), Access("z", "write"),
                                      Access("r", "write"), Access("p", "write")], 0.0),
                   Kernel("rho", [Access("r")], 2 * n)]
        for _ in range(CGITMAX):
            kernels += [spmv("spmv_q_Ap", "p", "q"),
                        Kernel("dot_pq", [Access("p"), Access("q")], 2 * n),
                        Kernel("update_zr", [Access("p"), Access("q"), Access("z", "readwrite"),
                                             Access("r", "readwrite")], 4 * n),
                        Kernel("rho", [Access("r")], 2 * n),
                        Kernel("update_p", [Access("r"), Access("p", "readwrite")], 2 * n)]
        kernels += [spmv("spmv_r_Az", "z", "r"),
                    Kernel("rnorm", [Access("x"), Access("r")], 3 * n),
                    Kernel("norms_xz_zz", [Access("x"), Access("z")], 4 * n),
                    Kernel("normalize_x", [Access("z"), Access("x", "write")], n)]
        return AccessProfile(self.name, kernels)
