"""mriq: the Q matrix of non-Cartesian MRI reconstruction (proxy of SPEC ACCEL 314.omriq / Parboil mri-q).

Parboil's mri-q computes, for every voxel x of the reconstruction grid,
Q(x) = sum_k |phi(k)|^2 exp(i 2 pi k . x) over the scanner's k-space samples: first
``phiMag = phiR^2 + phiI^2`` (ComputePhiMag), then Q in chunks of 1024 samples
(KERNEL_Q_K_ELEMS_PER_GRID), each chunk's ``kVals`` (Kx, Ky, Kz, PhiMag) read by every voxel
thread and added into ``Qr``, ``Qi``, which start as zeros (cudaMemset). One step here is one
chunk, so the outputs fill in over the run.

The data: voxel centres of an n^3 grid in field-of-view units (``x``, ``y``, ``z``: float32,
x fastest, regular values), a centre-out 3-D radial trajectory (as in UTE imaging: spokes from
k = 0 along Fibonacci-sphere directions under a random rotation; k in cycles per field of view
up to the grid's Nyquist limit), and ``phiR``/``phiI``, the Fourier transform of the voxel basis
function (a one-voxel box, sinc in each axis) shifted by a random sub-voxel offset. The
device holds x, y, z, phiR, phiI, phiMag, the array-of-structs ``kVals`` (numK x 4 float32,
as Parboil packs kx, ky, kz and phiMag) and Qr, Qi (all float32); voxels hold most of the
bytes, as in Parboil's datasets.

sin and cos are evaluated the way fast-math GPU intrinsics do: the phase is reduced to
whole cycles (k . x - rint(k . x)) and a short polynomial gives sin and cos of the remaining
half turn, accurate to float32 rounding.

Check (tests): Q equals a direct complex128 numpy sum on a small case to float32 tolerance,
after every chunk; Q at the origin voxel is sum |phi|^2.

Run length, ours / upstream (Parboil datasets: small numK 3,072 / numX 32,768, large numK 2,048 / numX
262,144): mri-q computes Q once over every k-space sample, so ours always runs to the end; its steps are the
chunks of 1,024 samples it takes them in (8,192 samples at every size, numX the grid: quick 52^3, 32 MiB
118^3, 128 MiB 188^3, 1 GiB 377^3).

Arrays, ours / upstream. SPEC ACCEL's 314.omriq source is not public; it is the OpenACC port of
Parboil's ``mri-q``, whose CUDA version (``benchmarks/mri-q/src/cuda/main.cu``, ``computeQ.cu``,
read in jovan-djukic/parboil) allocates on the device ``phiR_d``, ``phiI_d``, ``phiMag_d`` (numK
floats each, phase 1, freed once phiMag is copied back) and then ``x_d``, ``y_d``, ``z_d``,
``Qr_d``, ``Qi_d`` (numX floats each, phase 2), and copies each chunk of the host's ``kVals``
array (struct kValues {Kx, Ky, Kz, PhiMag}, numK of them) into a 1024-entry ``__constant__``
array ``ck``:

* ``x``, ``y``, ``z`` / ``x_d``, ``y_d``, ``z_d``;
* ``Qr``, ``Qi`` / ``Qr_d``, ``Qi_d`` (cudaMemset to 0);
* ``phiR``, ``phiI``, ``phiMag`` / ``phiR_d``, ``phiI_d``, ``phiMag_d``, phase 1 only;
* ``kVals`` (numK x 4) / the host's ``kVals``; on the device one 1024 x 4 constant-memory chunk.

Where ours differs, and why: ``kVals`` is held whole in device memory (a directive port has no
explicit ``__constant__`` staging and copies the whole trajectory in: assumed, as 314.omriq's
source cannot be read), and the phase-1 arrays stay resident beside the phase-2 ones (numK
floats each: a few per cent of the bytes). All float32, as in Parboil.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, AccessProfile, Kernel, Workload
from buddylib.workloads.hpc import _libm
from buddylib.workloads.hpc._libm import fma

CHUNK = 1024  # Parboil's KERNEL_Q_K_ELEMS_PER_GRID
TILE = 128  # voxels per inner loop: the fastest of 32-256 with AVX-512 and AVX2 code (any gives the same bytes)


@nb.njit(cache=True, inline="always")
def _cos_sin(t):
    """cos and sin of 2 pi t (t in cycles): the phase is reduced to whole cycles (t - rint(t)) and a
    short polynomial (Horner, in fused multiply-adds) gives sin and cos of the remaining half turn,
    accurate to float32 rounding."""
    f = np.float32
    u = f(np.pi) * (t - np.rint(t))  # half the phase, in [-pi/2, pi/2]
    u2 = u * u
    s = u * fma(u2, fma(u2, fma(u2, fma(u2, fma(u2, f(-1 / 39916800), f(1 / 362880)), f(-1 / 5040)), f(1 / 120)),
                        f(-1 / 6)), f(1.0))
    c = fma(u2, fma(u2, fma(u2, fma(u2, fma(u2, fma(u2, f(1 / 479001600), f(-1 / 3628800)), f(1 / 40320)),
                                        f(-1 / 720)), f(1 / 24)), f(-1 / 2)), f(1.0))
    return fma(c, c, -s * s), f(2.0) * s * c


@nb.njit(parallel=True, cache=True)
def _compute_q(x, y, z, kvals, k0, k1, qr, qi):
    """Qr/Qi[i] += sum_{k0 <= k < k1} phiMag[k] (cos, sin)(2 pi k . x_i), each voxel summing in sample order.

    The chunk of kVals is first staged (on the GPU: into constant memory; here: into four
    contiguous arrays). Voxels go ``TILE`` at a time, so the inner loop runs across independent
    voxels (SIMD lanes) and never reorders a sum, and multiply-adds are fused explicitly
    (:func:`~buddylib.workloads.hpc._libm.fma`) rather than by fastmath: the same bytes whatever the
    CPU's vector width. The last partial tile is done voxel by voxel, in the same order.
    """
    m = k1 - k0
    kx = np.empty(m, np.float32)
    ky = np.empty(m, np.float32)
    kz = np.empty(m, np.float32)
    pm = np.empty(m, np.float32)
    for k in range(m):
        kx[k] = kvals[k0 + k, 0]
        ky[k] = kvals[k0 + k, 1]
        kz[k] = kvals[k0 + k, 2]
        pm[k] = kvals[k0 + k, 3]
    full = x.size // TILE
    for tile in nb.prange(full):
        lo = tile * TILE
        xs, ys, zs = x[lo:lo + TILE], y[lo:lo + TILE], z[lo:lo + TILE]
        ar = np.zeros(TILE, np.float32)
        ai = np.zeros(TILE, np.float32)
        for k in range(m):
            a, b, c, p = kx[k], ky[k], kz[k], pm[k]
            for v in range(TILE):
                cos, sin = _cos_sin(fma(a, xs[v], fma(b, ys[v], c * zs[v])))
                ar[v] = fma(p, cos, ar[v])
                ai[v] = fma(p, sin, ai[v])
        for v in range(TILE):
            qr[lo + v] += ar[v]
            qi[lo + v] += ai[v]
    for i in range(full * TILE, x.size):
        ar1, ai1 = np.float32(0.0), np.float32(0.0)
        for k in range(m):
            cos, sin = _cos_sin(fma(kx[k], x[i], fma(ky[k], y[i], kz[k] * z[i])))
            ar1 = fma(pm[k], cos, ar1)
            ai1 = fma(pm[k], sin, ai1)
        qr[i] += ar1
        qi[i] += ai1


def _fibonacci_directions(n: int) -> np.ndarray:
    """n nearly uniform unit vectors on the sphere."""
    i = np.arange(n) + 0.5
    cz = 1 - 2 * i / n  # z in (-1, 1)
    phi = np.pi * (1 + 5**0.5) * i
    r = np.sqrt(1 - cz**2)
    return np.stack([r * _libm.cos(phi), r * _libm.sin(phi), cz], axis=1)


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    """A uniformly random rotation matrix, from a random unit quaternion (arithmetic only: no LAPACK,
    whose kernels differ between CPUs)."""
    q = rng.standard_normal(4)
    w, x, y, z = q / np.sqrt(np.sum(q * q))
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` as products summed in index order (a BLAS call's summation order depends on the CPU)."""
    cols = b.reshape(b.shape[0], -1)
    out = a[:, :1] * cols[0]
    for i in range(1, a.shape[1]):
        out = out + a[:, i:i + 1] * cols[i]
    return out.reshape(a.shape[0], *b.shape[1:])


@register
class MRIQ(Workload):
    name = "mriq"
    proxies = "SPEC ACCEL 314.omriq (Parboil mri-q)"

    chunks = 8  # k-space chunks of CHUNK samples: one per step

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        num_k = self.chunks * CHUNK
        side = int(((footprint - 28 * num_k) / 20) ** (1 / 3))
        self.setup_problem(side, num_k, rng)

    def setup_problem(self, side: int, num_k: int, rng: np.random.Generator, chunk: int = CHUNK) -> None:
        """An ``side``^3 voxel grid, ``num_k`` k-space samples, processed ``chunk`` at a time."""
        self.side, self.chunk = side, chunk
        c = (np.arange(side, dtype=np.float64) - side // 2) / side  # voxel centres, FOV units; 0 included
        zz, yy, xx = np.meshgrid(c, c, c, indexing="ij")
        self.x = xx.reshape(-1).astype(np.float32)
        self.y = yy.reshape(-1).astype(np.float32)
        self.z = zz.reshape(-1).astype(np.float32)
        # centre-out 3-D radial trajectory: spokes of `n_read` samples, |k| up to side / 2
        n_read = 32
        n_spokes = -(-num_k // n_read)
        dirs = _matmul(_fibonacci_directions(n_spokes), _random_rotation(rng).T)
        radius = (np.arange(n_read) + 0.5) / n_read * (side / 2)
        k = (dirs[:, None, :] * radius[None, :, None]).reshape(-1, 3)[:num_k]
        self.num_k = num_k
        # phi: FT of a one-voxel box basis function, shifted by a random sub-voxel offset
        shift = rng.uniform(-0.5, 0.5, 3) / side
        phase = -2 * np.pi * _matmul(k, shift)
        phi = np.prod(_libm.sinc(k / side), axis=1) * (_libm.cos(phase) + 1j * _libm.sin(phase))
        self.phiR = phi.real.astype(np.float32)
        self.phiI = phi.imag.astype(np.float32)
        self.phiMag = self.phiR * self.phiR + self.phiI * self.phiI  # ComputePhiMag (float32)
        self.kVals = np.empty((num_k, 4), np.float32)  # struct kValues {Kx, Ky, Kz, PhiMag}
        self.kVals[:, :3] = k
        self.kVals[:, 3] = self.phiMag
        self.Qr = np.zeros(self.x.size, np.float32)
        self.Qi = np.zeros(self.x.size, np.float32)
        self.n_steps = -(-num_k // chunk)
        self.done = 0  # k-space samples accumulated so far

    @property
    def kx(self) -> np.ndarray:
        return self.kVals[:, 0]

    @property
    def ky(self) -> np.ndarray:
        return self.kVals[:, 1]

    @property
    def kz(self) -> np.ndarray:
        return self.kVals[:, 2]

    def step(self) -> None:
        k1 = min(self.done + self.chunk, self.num_k)
        _compute_q(self.x, self.y, self.z, self.kVals, self.done, k1, self.Qr, self.Qi)
        self.done = k1

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {
            "x": (self.x, "input"), "y": (self.y, "input"), "z": (self.z, "input"),
            "phiR": (self.phiR, "input"), "phiI": (self.phiI, "input"), "phiMag": (self.phiMag, "field"),
            "kVals": (self.kVals, "input"), "Qr": (self.Qr, "field"), "Qi": (self.Qi, "field"),
        }

    def profile(self) -> AccessProfile:
        chunk = min(self.chunk, self.num_k)
        # per voxel and sample: k . x (5), 2 pi scaling (1), sin and cos (counted 1 each, as
        # special-function ops), two multiply-adds into Qr, Qi (4)
        return AccessProfile(self.name, [
            Kernel("ComputeQ", [Access("x", "read"), Access("y", "read"), Access("z", "read"),
                                Access("kVals", "read", fraction=chunk / self.num_k),
                                Access("Qr", "readwrite"), Access("Qi", "readwrite")],
                   flops=12.0 * self.x.size * chunk),
        ])

    def reference(self, voxels: np.ndarray | slice = slice(None), upto: int | None = None) -> np.ndarray:
        """Q at ``voxels`` over the first ``upto`` samples, directly in complex128 (for tests)."""
        upto = self.done if upto is None else upto
        pos = np.stack([self.x[voxels], self.y[voxels], self.z[voxels]], axis=1).astype(np.float64)
        k = self.kVals[:upto, :3].astype(np.float64)
        return np.exp(2j * np.pi * (pos @ k.T)) @ self.phiMag[:upto].astype(np.float64)
