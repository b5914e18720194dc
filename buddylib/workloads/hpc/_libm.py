"""Elementary functions for workload data: the same bits whatever SIMD kernels this CPU has.

numpy evaluates exp, log, tanh, sin, cos, sinh, arccosh, cbrt and power with kernels chosen
for the running CPU (AVX-512, AVX2 or baseline builds; see ``numpy.lib.introspect.opt_func_info``),
and those kernels differ in the last bit. A field initialised with ``np.tanh`` therefore holds
different bytes on different machines, and so do its compressed sizes (issue 11: hpgmg's
ideal ratio moved from 1.332831 to 1.332731). These call the C library's scalar function on
each element, as Python's :mod:`math` does; glibc gives one answer on every x86-64 CPU with
FMA (x86-64-v3: Intel since 2013, every AMD Zen), the CPUs this suite is checked on. Arithmetic
(``+ - * /`` and ``sqrt``) is exact in IEEE 754 and needs no help; inside numba kernels, :func:`fma`
gives fused multiply-adds that are the same everywhere too (``fastmath`` would let LLVM fuse and
reorder as the CPU allows).

>>> float(tanh(0.5)) == math.tanh(0.5)
True
>>> sinc(np.array([0.0, 0.5])).tolist() == [1.0, math.sin(math.pi / 2) / (math.pi / 2)]
True
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numba.extending import intrinsic
from numpy.typing import ArrayLike


def _elementwise(f: Callable[..., float], nargs: int = 1) -> Callable[..., np.ndarray]:
    ufunc = np.frompyfunc(f, nargs, 1)

    def apply(*x: ArrayLike) -> np.ndarray:
        return np.asarray(ufunc(*(np.asarray(v, dtype=np.float64) for v in x)), dtype=np.float64)

    apply.__name__ = f.__name__
    apply.__doc__ = f"math.{f.__name__} of every element (float64), as the C library computes it."
    return apply


exp = _elementwise(math.exp)
log = _elementwise(math.log)
sin = _elementwise(math.sin)
cos = _elementwise(math.cos)
tanh = _elementwise(math.tanh)
sinh = _elementwise(math.sinh)
arccosh = _elementwise(math.acosh)
power = _elementwise(math.pow, 2)


def sinc(x: ArrayLike) -> np.ndarray:
    """sin(pi x) / (pi x), 1 at 0 (numpy's normalised sinc)."""
    y = np.pi * np.asarray(x, dtype=np.float64)
    safe = np.where(y == 0, 1.0, y)
    return np.where(y == 0, 1.0, sin(safe) / safe)


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` rounded once (IEEE 754 fused multiply-add), for numba kernels: one instruction on a CPU
    with FMA, the C library's exact ``fma`` elsewhere (slow, but the same bits)."""
    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return a(a, b, c), codegen
