"""The NAS Parallel Benchmarks' random number generator (NPB ``randlc``), shared by EP and CG.

NPB draws every random number from one linear congruential generator, x_{k+1} = a x_k mod 2^46
with a = 5^13, returning x_{k+1} * 2^-46 as the uniform deviate. NPB computes the product
exactly in double precision by splitting the multiplier and the seed into 23-bit halves; this
is that code, so it is exact for every seed and multiplier below 2^46 — also for the jump-ahead
multipliers a^e that EP squares its way to, which overflow a 64-bit integer product.
"""

from __future__ import annotations

import numba as nb

A = 1220703125.0  # 5^13, NPB's multiplier
R23 = 0.5**23
R46 = R23 * R23
T23 = 2.0**23
T46 = T23 * T23


@nb.njit(cache=True, inline="always")
def randlc(x, a):
    """One step of the NAS generator: returns (a x mod 2^46, that times 2^-46), exact in doubles."""
    t1 = R23 * a
    a1 = float(int(t1))
    a2 = a - T23 * a1
    t1 = R23 * x
    x1 = float(int(t1))
    x2 = x - T23 * x1
    t1 = a1 * x2 + a2 * x1
    t2 = float(int(R23 * t1))
    z = t1 - T23 * t2
    t3 = T23 * z + a2 * x2
    t4 = float(int(R46 * t3))
    x = t3 - T46 * t4
    return x, R46 * x


def power(a: float, e: int) -> float:
    """a^e mod 2^46 with randlc (binary powering): the multiplier that jumps the stream e numbers ahead."""
    r, t = 1.0, a
    while e:
        if e & 1:
            r, _ = randlc(r, t)
        t, _ = randlc(t, t)
        e >>= 1
    return r
