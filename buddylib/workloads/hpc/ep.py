"""ep: NAS EP, Gaussian pairs from the NAS linear congruential generator (proxy of SPEC ACCEL 352.ep).

NAS EP ("embarrassingly parallel") draws 2^(M+1) uniform randoms from the NAS generator
x_{k+1} = 5^13 x_k mod 2^46 (seed 271828183; ``_nas.randlc``, exact in double precision),
turns pairs into Gaussian deviates by the Marsaglia polar method (accept x1^2 + x2^2 <= 1),
sums them (sx, sy) and counts the pairs whose max(|X|, |Y|) falls in each square annulus
l <= max < l + 1 (q[0..9]). The work is cut into batches of NK = 2^16 pairs; batch k starts
from the seed jumped ahead by 2 NK k numbers.

This proxy follows the OpenACC NPB EP that 352.ep derives from: batches are processed in
blocks of ``blksize``; each block fills the device buffer ``xx`` (float64, 2 NK x blksize,
batch index fastest so GPU lanes write and read coalesced), tallies per-batch counts in
``qq`` (float64, NQ x blksize, zeroed per block) and reduces them into ``q``; ``sums`` holds
the running sx, sy. ``blksize`` is set by the footprint (xx is blksize MiB), and M is the
smallest NAS class with at least 16 blocks: class S (M = 24) at quick scale, class A (M = 28)
at default. ``xx`` starts filled with -1.0e99, as NAS EP initialises its x array (the OpenACC
port leaves the device buffer uninitialised); the last, partial block strides by its own size,
so the buffer's tail keeps the previous block's numbers, as on the device.

Compressibility: ``xx`` is uniform random doubles in (0, 1) with 46 significant bits, so it
barely compresses; ``qq`` and ``q`` are small integer counts stored as doubles.

Check (tests): the first randlc values equal 5^13k x 271828183 mod 2^46 computed with Python
integers (and each batch starts at the jumped-ahead seed); the annulus counts follow the
distribution of max(|X|, |Y|) for independent standard normals (chi-square); sx, sy match the
NAS verification values for class S to 1e-8.

Run length, ours / upstream (NPB 3.3 ``sys/setparams.c``: M = 24, 25, 28, 30, 32 for classes S, W, A, B,
C): EP's whole run is its 2^(M+1) random numbers, so ours always runs to the end; its steps are the batches
the numbers are drawn in, and M follows the size (quick 24, 32 MiB 25, 128 MiB 28, 1 GiB 30).

Arrays, ours / upstream (read: NPB 3.4 OpenMP ``EP/ep_data.f90`` in
studyztp/NPB3.4-OMP-custom-makefile, the NPB 2.3 OpenACC C port ``EP/ep.c`` in
grypp/NPB2.3-OpenACC-C, GMAP/NPB-GPU's CUDA ``EP/ep.cu``; 352.ep's own source is not public):

* ``xx`` (2 NK x blksize): the OpenACC port's device array ``xx[NN][2*NK]`` of every batch's
  numbers (NN batches at once), here for ``blksize`` batches at a time;
* ``qq`` (NQ x blksize): its ``qq[NN][NQ]`` per-batch counts, here per block;
* ``q`` (NQ): NPB's ``q(0:nq-1)``;
* ``sums`` (2): NPB's scalars sx, sy (GMAP's CUDA port keeps ``sx``/``sy`` per block, like ``q``).

Where ours differs, and why: the blocking (``blksize`` batches per device buffer, sized by the
footprint; the OpenACC port sizes its buffers for all batches, the serial code for one), and no
separate ``x`` of 2 NK doubles (NPB's one-batch buffer, which the OpenACC port also creates on
the device: it would be 1/blksize of ``xx``).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, AccessProfile, Kernel, Workload
from buddylib.workloads.hpc._nas import A, power, randlc

MK = 16
NK = 1 << MK
NQ = 10
S = 271828183.0  # NAS EP's seed
#: NAS verification sums (sx, sy) per M (class S 24, W 25, A 28, B 30, C 32)
VERIFY = {24: (-3.247834652034740e3, -6.958407078382297e3), 25: (-2.863319731645753e3, -6.320053679109499e3),
          28: (-4.295875165629892e3, -1.580732573678431e4), 30: (4.033815542441498e4, -2.660669192809235e4),
          32: (4.764367927995374e4, -8.084072988043731e4)}


@nb.njit(cache=True)
def batch_seed(kk, an):
    """Seed of batch kk: S * an^kk mod 2^46, by binary powering as NAS does."""
    t1 = S
    t2 = an
    for _ in range(100):
        ik = kk // 2
        if 2 * ik != kk:
            t1, _r = randlc(t1, t2)
        if ik == 0:
            break
        t2, _r = randlc(t2, t2)
        kk = ik
    return t1


@nb.njit(cache=True)
def _embar_group(xx, qq, koff, nb_, an, ap, k0, nk, split, sxk, syk):
    """Batches k0 .. k0 + nk - 1 of a block of nb_: vranlc into xx[i * nb_ + k], pairs into qq[l * nb_ + k].

    The group's batches advance together, as GPU lanes do, and each batch's stream is cut into
    ``split`` pieces started from seeds jumped ahead by ``ap`` = A^(2 NK / split): the same
    numbers, as independent chains a CPU core overlaps. Writes each batch's sums to sxk, syk.
    """
    piece = 2 * NK // split
    seeds = np.empty(split * nk)
    for kk in range(nk):
        t = batch_seed(koff + k0 + kk, an)
        for j in range(split):
            seeds[j * nk + kk] = t
            t, _r = randlc(t, ap)
        for a in range(NQ):
            qq[a * nb_ + k0 + kk] = 0.0
    for i in range(piece):
        for j in range(split):
            base = (j * piece + i) * nb_ + k0
            for kk in range(nk):
                t, r = randlc(seeds[j * nk + kk], A)
                seeds[j * nk + kk] = t
                xx[base + kk] = r
    for k in range(k0, k0 + nk):
        tsx = 0.0
        tsy = 0.0
        for i in range(NK):
            x1 = 2.0 * xx[2 * i * nb_ + k] - 1.0
            x2 = 2.0 * xx[(2 * i + 1) * nb_ + k] - 1.0
            t1 = x1 * x1 + x2 * x2
            if t1 <= 1.0:
                t2 = math.sqrt(-2.0 * math.log(t1) / t1)
                t3 = x1 * t2
                t4 = x2 * t2
                ann = int(max(abs(t3), abs(t4)))  # the annulus, NAS's l
                qq[ann * nb_ + k] += 1.0
                tsx += t3
                tsy += t4
        sxk[k] = tsx
        syk[k] = tsy


@nb.njit(parallel=True, cache=True)
def _embar(xx, qq, koff, nb_, an, ap, lanes, split, sxk, syk):
    """One block of nb_ batches, groups of ``lanes`` batches in parallel."""
    for g in nb.prange((nb_ + lanes - 1) // lanes):
        k0 = g * lanes
        _embar_group(xx, qq, koff, nb_, an, ap, k0, min(lanes, nb_ - k0), split, sxk, syk)


def nas_m(blksize: int, min_blocks: int = 16) -> int:
    """The smallest NAS class (M) with at least ``min_blocks`` blocks of ``blksize`` batches."""
    for m in sorted(VERIFY):
        if (1 << (m - MK)) >= min_blocks * blksize:
            return m
    return max(VERIFY)


@register
class EP(Workload):
    name = "ep"
    proxies = "SPEC ACCEL 352.ep (NAS EP)"

    lanes = 8  # batches advanced together by one CPU thread (a GPU advances blksize at once)
    split = 8  # independent pieces of each batch's stream on the CPU (same numbers)

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        # NAS EP has no seed but its own: the run is the same for every rng
        self.blksize = max(1, (footprint - 8 * (NQ + 2)) // (2 * NK * 8 + NQ * 8))
        self.setup_class(nas_m(self.blksize), self.blksize)

    def setup_class(self, m: int, blksize: int) -> None:
        """Problem size 2^m pairs (NAS class M), ``blksize`` batches per block."""
        self.m = m
        self.nn = 1 << (m - MK)  # batches
        self.blksize = min(blksize, self.nn)
        self.n_steps = -(-self.nn // self.blksize)
        self.xx = np.full(self.blksize * 2 * NK, -1.0e99)  # NAS EP's initial x ("reduce paging effects")
        self.qq = np.zeros(self.blksize * NQ)
        self.q = np.zeros(NQ)
        self.sums = np.zeros(2)  # sx, sy
        t1 = A
        for _ in range(MK + 1):
            t1, _r = randlc(t1, t1)
        self.an = t1  # A^(2 NK) mod 2^46
        self.blk = 0

    def step(self) -> None:
        koff = self.blk * self.blksize
        nb_ = min(self.blksize, self.nn - koff)
        sxk, syk = np.zeros(nb_), np.zeros(nb_)
        ap = power(A, 2 * NK // self.split)
        if nb_ <= self.lanes:  # one group: no thread team to wake
            _embar_group(self.xx, self.qq, koff, nb_, self.an, ap, 0, nb_, self.split, sxk, syk)
        else:
            _embar(self.xx, self.qq, koff, nb_, self.an, ap, self.lanes, self.split, sxk, syk)
        self.sums[0] += sxk.sum()
        self.sums[1] += syk.sum()
        self.q += self.qq[: NQ * nb_].reshape(NQ, nb_).sum(axis=1)
        self.last_block = nb_
        self.blk += 1

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {"xx": (self.xx, "other"), "qq": (self.qq, "other"), "q": (self.q, "other"),
                "sums": (self.sums, "other")}

    def profile(self) -> AccessProfile:
        b = self.blksize
        pairs = b * NK
        # per random: ~15 FLOPs of randlc; per pair: 7 to test, and for the ~pi/4 accepted:
        # log, sqrt, divide, 2 products and 2 sums (~14 counting log and sqrt as 4 each)
        flops = pairs * (2 * 15 + 7 + math.pi / 4 * 14)
        return AccessProfile(self.name, [
            Kernel("zero_qq", [Access("qq", "write")], flops=0.0),
            Kernel("embar", [Access("xx", "readwrite"), Access("qq", "readwrite", "random"),
                             Access("sums", "readwrite")], flops=flops),
            Kernel("reduce_q", [Access("qq", "read"), Access("q", "readwrite")], flops=float(NQ * b)),
        ])

    def counts(self) -> np.ndarray:
        return self.q.copy()

    def verified(self) -> bool:
        """NAS's own check: sx, sy within 1e-8 of the reference for this class (after the last block)."""
        if self.m not in VERIFY or self.blk * self.blksize < self.nn:
            return False
        return all(abs((s - v) / v) <= 1e-8 for s, v in zip(self.sums, VERIFY[self.m], strict=True))
