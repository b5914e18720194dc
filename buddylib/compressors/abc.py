"""The contract every per-entry compressor keeps.

A compressor maps each 128-byte memory entry, on its own, to the length in **bits** of
its compressed code. That length is all the Buddy layout needs: it becomes the number of
32-byte **sectors** the entry occupies, ``ceil(bits / 256)`` clamped to 4 (a code longer
than 1024 bits is stored raw), and an all-zero entry may be flagged in the per-entry
metadata and take 0 sectors. So a compressor implements one thing, ``_bits(entries)``,
over a whole ``(E, 128)`` uint8 array in compiled code; ``bits`` and ``sectors`` are
derived here and are the same for every compressor.

Compressors that can also produce their code (BPC) add ``encode``/``decode``; those
must be exact inverses and their code lengths must equal ``bits``. Compressors are
stateless apart from their constructor options, are named by a string in the registry
(:mod:`buddylib.compressors.registry`) and rebuilt from ``get_config()``, as numcodecs
codecs are.
"""

from __future__ import annotations

import abc
import contextlib
import threading
import types
from collections.abc import Callable
from typing import Any, ClassVar

import numba as nb
import numpy as np
from numba.core.cpu import CPUTargetOptions
from numba.core.options import TargetOptions

from buddylib.entries import SECTORS_PER_ENTRY, as_entries

SECTOR_BITS = 256
#: Held around every launch of a parallel (``prange``) kernel: numba's ``workqueue`` threading layer,
#: what it falls back to without OpenMP or TBB, aborts the interpreter when two threads enter
#: parallel code at once (dask's threads analysing several allocations did). Each launch already
#: uses every core, so taking turns costs little.
PARALLEL_LAUNCH = threading.RLock()
#: Inputs of fewer entries run a compressor's serial kernel instead of its parallel one: starting
#: numba's threads costs more than it saves on a small buffer, and far more on a busy machine.
#: 2048 entries (256 KiB) is the smallest size at which every parallel kernel beat its serial copy
#: on two idle cores (the cheapest, ``_sectors`` and ZVC, by 1.2x and 1.5x; at 1024 entries
#: ``_sectors`` lost); ``bench.crossover`` measures it again on any machine. Read at each call, so
#: a test may change it.
PARALLEL_MIN_ENTRIES = 2048


def serial(kernel: Any) -> Any:
    """The same kernel compiled without ``parallel`` (prange runs as range) and without the GIL.

    It is compiled from a renamed copy (``<name>_serial``) of the Python function because numba's
    on-disk cache keys an entry by the function's name and bytecode, not by its compile flags: a
    plain ``njit(cache=True)(kernel.py_func)`` would share (and load) the parallel kernel's entry.

    Parameters
    ----------
    kernel : numba dispatcher
        A kernel compiled with ``nb.njit(parallel=True, ...)``; its ``py_func`` is recompiled.

    Returns
    -------
    numba dispatcher
        The serial copy, ``njit(cache=True, nogil=True)``, named ``<name>_serial``.
    """
    f = kernel.py_func
    name = f"{f.__name__}_serial"
    g = types.FunctionType(f.__code__, f.__globals__, name, f.__defaults__, f.__closure__)
    g.__qualname__ = name
    g.__module__ = f.__module__
    g.__doc__ = f"Serial, GIL-free copy of :func:`{f.__name__}`."
    return nb.njit(cache=True, nogil=True)(g)


# numba compiles a prange loop's body as a function whose array arguments are ``noalias`` (no two
# overlap); njit takes no such option, so it is mapped here onto the compiler flag that does it.
CPUTargetOptions.noalias = TargetOptions.Mapping("noalias")


def chunk_body(fn: Callable) -> Any:
    """Compile ``fn``, the body a parallel kernel runs on one chunk of entries, as numba compiles a prange
    loop's body.

    Arguments are ``noalias``, the error model is numpy's, and there is no reference counting (``_nrt``:
    the body may not allocate, so the caller passes its scratch arrays), since inlined helpers taking arrays
    would otherwise pay an atomic increment and decrement per entry. Then a parallel kernel (prange over
    chunks) and its :func:`serial` copy both call one compiled body, so each is compiled once, not twice,
    and runs as fast as the body inlined in a prange (BPC's cold compile: ~110 -> ~20 s per width).

    Parameters
    ----------
    fn : callable
        The Python function of the chunk body; used as a decorator.

    Returns
    -------
    numba dispatcher
        ``fn`` compiled with ``njit(cache=True, noalias=True, error_model="numpy", _nrt=False)``.
    """
    return nb.njit(cache=True, noalias=True, error_model="numpy", _nrt=False)(fn)


def readonly(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only view (no copy).

    Kernels take their inputs read-only: numba compiles a kernel once per argument type, and a writable
    and a read-only array are two types, so passing inputs as they come (``bytes`` and memory maps are
    read-only) would compile every kernel twice.

    Parameters
    ----------
    a : numpy.ndarray
        Any array.

    Returns
    -------
    numpy.ndarray
        ``a`` itself if it is already read-only, else a read-only view of it.

    Examples
    --------
    >>> import numpy as np
    >>> readonly(np.zeros(3)).flags.writeable
    False
    """
    if not a.flags.writeable:
        return a
    view = a.view()
    view.flags.writeable = False
    return view


def parallel_for(n_entries: int) -> bool:
    """Whether an input of ``n_entries`` entries is worth a parallel launch.

    Parameters
    ----------
    n_entries : int
        Entries of the input.

    Returns
    -------
    bool
        Whether ``n_entries`` is at least :data:`PARALLEL_MIN_ENTRIES` (read at each call).
    """
    return n_entries >= PARALLEL_MIN_ENTRIES


def launch(parallel_kernel: Callable, serial_kernel: Callable, n_entries: int, *args: Any) -> Any:
    """Run ``parallel_kernel(*args)``, one launch at a time, on a large input; ``serial_kernel(*args)``
    on a small one, with no lock and without the GIL, so threads may run it at once.

    Parameters
    ----------
    parallel_kernel, serial_kernel : callable
        A parallel kernel and its :func:`serial` copy.
    n_entries : int
        Entries of the input, which picks the kernel (:func:`parallel_for`).
    *args
        The kernel's arguments, inputs only: arrays are passed :func:`readonly`.

    Returns
    -------
    object
        What the kernel returns.
    """
    args = tuple(readonly(a) if isinstance(a, np.ndarray) else a for a in args)
    if parallel_for(n_entries):
        with PARALLEL_LAUNCH:
            return parallel_kernel(*args)
    return serial_kernel(*args)


def _turn(n_entries: int) -> contextlib.AbstractContextManager:
    """The launch lock where a parallel kernel may run, so that a subclass whose ``_bits`` launches
    one directly still takes turns; small inputs need none."""
    return PARALLEL_LAUNCH if parallel_for(n_entries) else contextlib.nullcontext()


class Compressor(abc.ABC):
    """Base class: subclasses set ``name`` and ``max_bits`` and implement ``_bits``."""

    name: ClassVar[str]
    #: Longest code (bits) the compressor can emit; ``bits`` fits in uint16.
    max_bits: ClassVar[int]

    @abc.abstractmethod
    def _bits(self, entries: np.ndarray) -> np.ndarray:
        """Code length in bits of every row of a C-contiguous ``(E, 128)`` uint8 array.

        Run compiled kernels through :func:`launch`, which picks the serial or parallel copy.
        """

    def bits(self, data: object) -> np.ndarray:
        """Compressed size in bits of each 128-byte entry of ``data``.

        Parameters
        ----------
        data : array, bytes or buffer
            Any buffer: its bytes, in logical C order, are cut into 128-byte entries (the last one zero-padded).

        Returns
        -------
        numpy.ndarray
            ``uint16[E]``: each entry's code length in bits.

        Raises
        ------
        TypeError
            ``data`` cannot be read as raw memory (e.g. an array of Python objects or of text).
        """
        entries = as_entries(data)
        with _turn(entries.shape[0]):
            return self._bits(entries)

    def sectors(self, data: object, zero_flag: bool = True) -> np.ndarray:
        """32-byte sectors each 128-byte entry of ``data`` occupies: ``ceil(bits / 256)``, at most 4.

        Parameters
        ----------
        data : array, bytes or buffer
            Any buffer, as for :meth:`bits`.
        zero_flag : bool
            Whether an all-zero entry is marked in metadata and stores 0 sectors (instead of 1).

        Returns
        -------
        numpy.ndarray
            ``uint8[E]``: 0 to 4 sectors per entry.

        Raises
        ------
        TypeError
            ``data`` cannot be read as raw memory.
        """
        entries = as_entries(data)
        with _turn(entries.shape[0]):
            return sectors_from_bits(self._bits(entries), entries, zero_flag)

    def get_config(self) -> dict[str, Any]:
        """JSON-able description from which :func:`buddylib.compressors.registry.get` rebuilds this compressor."""
        return {"id": self.name}

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def sectors_from_bits(bits: np.ndarray, entries: np.ndarray, zero_flag: bool = True) -> np.ndarray:
    """Sectors per entry from code lengths: ``ceil(bits/256)`` clamped to 4, zeros to 0.

    Parameters
    ----------
    bits : numpy.ndarray
        ``[E]``: each entry's code length in bits.
    entries : array, bytes or buffer
        The entries those lengths are of (any buffer, cut into 128-byte entries), read to find the all-zero ones.
    zero_flag : bool
        Whether an all-zero entry takes 0 sectors (flagged in its metadata) instead of its code's.

    Returns
    -------
    numpy.ndarray
        ``uint8[E]``: 0 to 4 sectors per entry.

    Raises
    ------
    ValueError
        ``bits`` is not one length per entry.
    """
    entries = as_entries(entries)
    if bits.shape != (entries.shape[0],):
        raise ValueError(f"bits has shape {bits.shape}, expected ({entries.shape[0]},) to match entries")
    return launch(_sectors, _sectors_serial, bits.shape[0], bits, entries.view(np.uint64), bool(zero_flag))


@nb.njit(parallel=True, cache=True)
def _sectors(bits, words, zero_flag):
    n = bits.shape[0]
    out = np.empty(n, dtype=np.uint8)
    for e in nb.prange(n):
        s = (np.int64(bits[e]) + SECTOR_BITS - 1) // SECTOR_BITS
        if s > SECTORS_PER_ENTRY:
            s = SECTORS_PER_ENTRY
        if zero_flag:
            nz = np.uint64(0)
            for i in range(words.shape[1]):
                nz |= words[e, i]
            if nz == 0:
                s = 0
        out[e] = s
    return out


_sectors_serial = serial(_sectors)
