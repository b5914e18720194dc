"""What a workload is: a real computation that records snapshots and an access profile.

Compressibility comes from data structures (CSR index arrays, flag fields, halo-padded
grids, zero-initialised wavefields, random-number buffers) and how they evolve, so a
workload runs the real algorithm and, at several points of its run, records every live
allocation a GPU port would hold (a :class:`~buddylib.snapshot.Snapshot`). It also
describes one representative iteration as an :class:`AccessProfile` — the kernels in
order, what each reads and writes, how (stream, strided, gather, random) and how much
arithmetic — so the timing model can replay it.

A workload subclass implements ``setup`` (allocate and initialise for a footprint),
``step`` (one iteration), ``allocations`` (what is live now) and ``profile``; the base
class runs it, takes the snapshots and compresses them as it goes.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import functools
import hashlib
import json
import os
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numba as nb
import numpy as np
from tqdm import tqdm

from buddylib.compressors import ALL_COMPRESSORS
from buddylib.provenance import workload_code
from buddylib.snapshot import Allocation, Snapshot
from buddylib.threads import numba_threads

MB = 1 << 20
#: Footprint of each named scale, bytes. "quick" is for tests (up to :data:`QUICK_LIMIT`, <= 2 s). "paper" is not a size
#: but the networks as published (widths, 224x224 inputs, the recipes' batches as far as host memory
#: and time allow), for the workloads that have it (:attr:`Workload.paper_scale`); its footprint is the
#: host-memory allowance.
SCALES = {"quick": 3 * MB, "default": 128 * MB, "large": 1024 * MB, "paper": 20 << 30}
#: Footprints up to this many bytes run a workload's quick configuration (NPB class S, fewer steps, the
#: small networks), and the tests hold quick runs' allocations under it. It sits a MiB above what the quick
#: scale asks for (3 MiB) because a quick configuration is a fixed size that lands near the ask, not on it
#: (grids round to whole points, networks to whole layers), and so a footprint given in MiB up to 4 still
#: means a quick run.
QUICK_LIMIT = 4 * MB
#: What a paper-scale run records: its snapshots are gigabytes, so only the compressors the fidelity
#: study compares (no whole-allocation references).
PAPER_COMPRESSORS = ("bpc32", "zvc", "bpc32zvc")
PATTERNS = ("stream", "strided", "gather", "random")
MODES = ("read", "write", "readwrite")


#: Whether the step running now has more than one numba thread (set by :func:`threads_for`), which is where
#: :func:`grid_kernel` runs its parallel compile.
_PARALLEL_STEP: contextvars.ContextVar[bool] = contextvars.ContextVar("parallel_step", default=False)


@contextlib.contextmanager
def threads_for(points: int) -> Iterator[None]:
    """numba threads for a step over ``points`` grid points, while the block runs: all on big problems and an
    idle machine, one on small problems (a parallel launch costs more than the work) or a loaded machine
    (spinning, oversubscribed threads lose badly). Workload kernels reduce nothing across threads, so the bytes
    are the same either way.

    Parameters
    ----------
    points : int
        Grid points the step works on (below 65,536: one thread).
    """
    busy = getattr(os, "getloadavg", lambda: (0.0,))()[0] >= nb.config.NUMBA_NUM_THREADS
    n = 1 if points < 1 << 16 or busy else nb.config.NUMBA_NUM_THREADS
    token = _PARALLEL_STEP.set(n > 1)
    try:
        with numba_threads(n):
            yield
    finally:
        _PARALLEL_STEP.reset(token)


def grid_kernel(f: Callable) -> Callable:
    """Compile a workload kernel whose outer loop is ``prange`` twice from its one body, each on first use:
    serial (``prange`` runs as ``range``) where the step has one numba thread, parallel where it has more
    (inside :func:`threads_for` on big problems on an idle machine); outside a step (a set-up), serial. A
    parallel compile costs two to three times a serial one (CloverLeaf's kernels from a cold cache: 19.5
    against 7.0 s of CPU), and the quick scale that tests run, and ``make reproduce``'s single-threaded
    workers, never need it. The kernels reduce nothing across threads, so both give the same bytes.

    Parameters
    ----------
    f : callable
        The kernel's Python function.

    Returns
    -------
    callable
        Calls the serial or the parallel build; both are its attributes ``serial`` and ``parallel``.
    """
    serial = nb.njit(cache=True)(f)
    twin = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    twin.__qualname__ = f"{f.__qualname__}_parallel"  # its own cache file: numba's cache keys by name, not flags
    twin.__module__ = f.__module__
    parallel = nb.njit(parallel=True, cache=True)(twin)

    @functools.wraps(f)
    def kernel(*args: Any) -> Any:
        return (kernel.parallel if _PARALLEL_STEP.get() else kernel.serial)(*args)  # type: ignore[attr-defined]

    kernel.serial, kernel.parallel = serial, parallel  # type: ignore[attr-defined]
    return kernel


def footprint_bytes(scale: str | float) -> int:
    """Bytes for a named scale, or ``scale`` MiB when it is a number ("whatever the user asks").

    Parameters
    ----------
    scale : str or float
        A key of ``SCALES``, or a positive number of MiB (as a number or a string).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        An unknown name, or a footprint that is not positive.

    Examples
    --------
    >>> footprint_bytes("quick"), footprint_bytes(2), footprint_bytes("0.5")
    (3145728, 2097152, 524288)
    """
    if isinstance(scale, str):
        if scale in SCALES:
            return SCALES[scale]
        try:
            scale = float(scale)
        except ValueError:
            raise ValueError(f"scale {scale!r}: use one of {', '.join(SCALES)} or a footprint in MiB") from None
    if not scale > 0:
        raise ValueError(f"scale {scale!r}: a footprint must be a positive number of MiB")
    return int(float(scale) * MB)


@dataclass(frozen=True)
class Access:
    """How a kernel touches one allocation.

    Parameters
    ----------
    allocation : str
        The allocation's name.
    mode : {"read", "write", "readwrite"}
    pattern : {"stream", "strided", "gather", "random"}
    fraction : float
        Share of the allocation's bytes touched, in (0, 1] (for a gather: share of the index array's entries
        used — the rows touched follow from the index).
    passes : float
        Times those bytes move between memory and the chip (after caching).
    stride : int
        Elements between accesses, for strided.
    index : str, optional
        The index allocation that drives a gather (a gather names one, nothing else does).
    row : int
        Consecutive elements each index selects (3 for an atom's x, y, z in an (N, 3) array).

    Raises
    ------
    ValueError
        An unknown mode or pattern, a fraction outside (0, 1], a row below 1, or an index given to anything but
        a gather (or missing from one).
    """

    allocation: str
    mode: str = "read"
    pattern: str = "stream"
    fraction: float = 1.0
    passes: float = 1.0
    stride: int = 1
    index: str | None = None
    row: int = 1

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"access to {self.allocation!r}: mode {self.mode!r} is not one of {MODES}")
        if self.pattern not in PATTERNS:
            raise ValueError(f"access to {self.allocation!r}: pattern {self.pattern!r} is not one of {PATTERNS}")
        if not 0 < self.fraction <= 1:
            raise ValueError(f"access to {self.allocation!r}: fraction {self.fraction} is outside (0, 1]")
        if self.row < 1:
            raise ValueError(f"access to {self.allocation!r}: row {self.row} must be >= 1 element")
        if (self.pattern == "gather") != (self.index is not None):
            raise ValueError(f"access to {self.allocation!r}: a gather names its index allocation, nothing else does")


@dataclass
class Kernel:
    """One kernel launch of an iteration: its accesses and its arithmetic (FLOPs).

    Parameters
    ----------
    name : str
    accesses : list of Access
    flops : float
    """

    name: str
    accesses: list[Access]
    flops: float


@dataclass
class AccessProfile:
    """The kernels of one representative iteration, in order.

    Parameters
    ----------
    workload : str
        The workload's name.
    kernels : list of Kernel
    """

    workload: str
    kernels: list[Kernel]

    def validate(self, allocations: Sequence[str]) -> AccessProfile:
        """Check that every access names a live allocation (and gathers a live index array).

        Parameters
        ----------
        allocations : sequence of str
            The live allocations' names.

        Returns
        -------
        AccessProfile
            Itself.

        Raises
        ------
        ValueError
            An access to a name not among ``allocations``.
        """
        names = set(allocations)
        for k in self.kernels:
            for a in k.accesses:
                for n in (a.allocation, a.index):
                    if n is not None and n not in names:
                        raise ValueError(f"{self.workload}: kernel {k.name!r} accesses {n!r}, not a live allocation")
        return self

    def to_dict(self) -> dict[str, Any]:
        """The profile as JSON-ready data (a run's ``.profile.json``, a summary's ``profile``)."""
        return {"workload": self.workload, "kernels": [asdict(k) for k in self.kernels]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AccessProfile:
        """The profile :meth:`to_dict` wrote.

        Parameters
        ----------
        d : dict
            ``{"workload": ..., "kernels": [...]}``; other keys (a run's scale, seed...) are ignored.

        Returns
        -------
        AccessProfile
        """
        return cls(d["workload"], [Kernel(k["name"], [Access(**a) for a in k["accesses"]], k["flops"])
                                   for k in d["kernels"]])


@dataclass
class Run:
    """A finished run: its snapshots, access profile, index arrays, digest and timings.

    Parameters
    ----------
    workload : Workload
    snapshots : list of Snapshot
    profile : AccessProfile
    scale : str or float
        As given to :meth:`Workload.run`.
    seed : int
    index_arrays : dict of str to numpy.ndarray
        The arrays gathers index through, by allocation name.
    digest : str
        SHA-256 of every snapshot's allocations (names, dtypes, shapes and bytes).
    seconds : float
        Wall time of the run.
    """

    workload: Workload
    snapshots: list[Snapshot]
    profile: AccessProfile
    scale: str | float
    seed: int
    index_arrays: dict[str, np.ndarray] = field(default_factory=dict)
    digest: str = ""
    seconds: float = 0.0

    @property
    def footprint(self) -> int:
        """Largest snapshot, bytes."""
        return max(s.nbytes for s in self.snapshots)

    def save(self, folder: str | Path) -> Path:
        """Snapshots (netCDF), access profile (JSON) and gather index arrays (npz) in ``folder``.

        Parameters
        ----------
        folder : str or pathlib.Path
            Created if missing.

        Returns
        -------
        pathlib.Path
            The snapshots' file, ``<folder>/<name>-<scale>-s<seed>.nc``; ``.profile.json`` and ``.index.npz``
            beside it.
        """
        from buddylib import snapshot

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        stem = folder / f"{self.workload.name}-{self.scale}-s{self.seed}"
        compressors = sorted(set.intersection(*(set(a.sectors) for s in self.snapshots for a in s.allocations)))
        snapshot.save(self.snapshots, stem.with_suffix(".nc"), compressors=compressors)
        stem.with_suffix(".profile.json").write_text(json.dumps(
            {**self.profile.to_dict(), "scale": self.scale, "seed": self.seed, "digest": self.digest,
             "seconds": self.seconds, "code": self.workload.code(),
             # how far a scheduled proxy ran (workloads.hpc._schedule)
             **({"schedule": self.workload.schedule()} if hasattr(self.workload, "schedule") else {})},
            separators=(",", ":")))
        if self.index_arrays:
            np.savez_compressed(stem.with_suffix(".index.npz"), **self.index_arrays)
        return stem.with_suffix(".nc")


class Workload(abc.ABC):
    """A real computation that a GPU would run; subclasses fill in the four methods."""

    name: ClassVar[str]
    #: What it stands for in the paper's set, e.g. "SPEC ACCEL 303.ostencil".
    proxies: ClassVar[str]
    #: Which suite it belongs to: the paper's "hpc" or "dl" sets, or "dl-extra" (beyond the paper:
    #: mixed precision, pre-trained weights), kept out of the averages compared with the paper, or "llm"
    #: (LLM serving and training memory in bf16: notebook 10's study alone runs them).
    suite: ClassVar[str] = "hpc"
    #: Iterations of a run; ``setup`` may change it with the footprint.
    n_steps: int = 100
    #: numba threads compressing the snapshots in :meth:`buddylib.workloads.base.Workload.run` (None: numba's setting).
    compress_threads: ClassVar[int | None] = None
    #: Whether the workload has a "paper" scale (the published network); others refuse it.
    paper_scale: ClassVar[bool] = False

    @classmethod
    def code(cls) -> str:
        """Digest of the code this workload's runs depend on: its module, the workload modules it imports,
        the base class, the compressors (:func:`~buddylib.provenance.workload_sources`); docstrings and
        comments aside. A saved run records it, and a cached run made by other code is remade."""
        return workload_code(cls.__module__)

    @classmethod
    def missing(cls) -> str | None:
        """Why this workload cannot run here (e.g. a package it reads is not installed), else None."""
        return None

    @abc.abstractmethod
    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        """Allocate and initialise the state for about ``footprint`` bytes of allocations.

        Parameters
        ----------
        footprint : int
            Bytes.
        rng : numpy.random.Generator
            Every random draw of the run comes from it.
        """

    @abc.abstractmethod
    def step(self) -> None:
        """Advance one iteration."""

    @abc.abstractmethod
    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        """Every live allocation a GPU port would hold now: ``{name: (array, kind)}``."""

    @abc.abstractmethod
    def profile(self) -> AccessProfile:
        """The kernels of one representative iteration."""

    def run(self, scale: str | float = "quick", seed: int = 0, n_snapshots: int = 8,
            compressors: Sequence[str] = ALL_COMPRESSORS, keep_bytes: bool = False,
            progress: bool | None = None, references: Sequence[str] = ()) -> Run:
        """Run from the start to ``n_steps``, snapshotting at ``n_snapshots`` evenly spread steps.

        Each snapshot's allocations are compressed as they are taken, so a run's memory stays that of the
        workload.

        Parameters
        ----------
        scale : str or float
            A named scale (``SCALES``) or a footprint in MiB.
        seed : int
            Seeds the run's generator.
        n_snapshots : int
            At least 2: the start and the end.
        compressors : sequence of str
            What each allocation is compressed with.
        keep_bytes : bool
            Also keep copies of the bytes.
        progress : bool, optional
            A progress bar (None: above the quick scale).
        references : sequence of str
            Whole-buffer compressors ("zstd", "lz4") whose compressed size each allocation records.

        Returns
        -------
        Run

        Raises
        ------
        ValueError
            Fewer than 2 snapshots, an unknown scale, or the paper scale for a workload without one.
        """
        if n_snapshots < 2:
            raise ValueError(f"n_snapshots {n_snapshots}: at least the start and the end are recorded")
        if scale == "paper" and not self.paper_scale:
            raise ValueError(f"{self.name}: no paper scale (only the published CNNs have one); use quick, default, "
                             "large or a footprint in MiB")
        with numba_threads(None):  # _run sets the count the workload compresses with
            return self._run(scale, seed, n_snapshots, compressors, keep_bytes, progress, references)

    def _run(self, scale: str | float, seed: int, n_snapshots: int, compressors: Sequence[str], keep_bytes: bool,
             progress: bool | None, references: Sequence[str]) -> Run:
        from buddylib.compressors import reference_bytes, sectors

        t0 = time.perf_counter()
        rng = np.random.default_rng(seed)
        self.setup(footprint_bytes(scale), rng)
        if self.compress_threads is not None:  # after setup, which may choose it for the scale
            nb.set_num_threads(self.compress_threads)
        when = set(np.unique(np.linspace(0, self.n_steps, n_snapshots).round().astype(int)).tolist())
        digest = hashlib.sha256()
        snapshots = []
        show = progress if progress is not None else footprint_bytes(scale) > SCALES["quick"]
        for i in tqdm(range(self.n_steps + 1), desc=self.name, disable=not show, unit="step"):
            if i in when:
                allocations = []
                for name, (arr, kind) in self.allocations().items():
                    a = Allocation.from_array(name, np.copy(arr) if keep_bytes else arr, kind=kind)
                    a.sectors = {c: sectors(arr, c) for c in compressors}
                    a.reference_bytes = {r: reference_bytes(arr, r) for r in references}
                    digest.update(f"{name}:{arr.dtype}:{arr.shape}:".encode())
                    digest.update(np.ascontiguousarray(arr).view(np.uint8).reshape(-1))
                    if not keep_bytes:
                        a.data = None
                    allocations.append(a)
                snapshots.append(Snapshot(self.name, allocations, step=i, time=float(i)))
            if i < self.n_steps:
                self.step()
        live = self.allocations()
        profile = self.profile().validate(live)
        index = {a.index: np.copy(live[a.index][0]) for k in profile.kernels for a in k.accesses if a.index}
        return Run(self, snapshots, profile, scale, seed, index, digest.hexdigest(), time.perf_counter() - t0)
