"""Compile numba's kernels once per machine, and measure what that costs from a cold cache.

Every compiled kernel is ``@njit(cache=True)``: the first process to call it with a signature
compiles it (seconds each) and saves it to numba's cache, and every later process loads it (a
fraction of a second). A test session on every core (pytest-xdist) or ``buddy reproduce`` (dask
workers) starts several processes at once; without a warm-up each would compile the same kernels
from a cold cache, once per worker. :func:`warm` calls each kernel once on a tiny input, with exactly
the argument types the library passes, so that it runs once before the workers start and they only
load (``conftest.py``, :func:`buddylib.report.reproduce.run`).

:func:`compile_times` measures each kernel's cold compile time in a fresh process with an empty
``NUMBA_CACHE_DIR`` (``make bench`` reports it): compile time is what a newcomer pays once per clone.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numba.core import event

if TYPE_CHECKING:
    from buddylib.workloads import Workload

#: The HPC workloads' kernels, warmed up by one set-up and one step at quick scale each, grouped so that
#: workloads sharing a helper module (``_adi``, ``_libm``, ``_nas``, ``_d3q19``) compile it once. Their cold
#: compile (about half of :data:`COST`) is paid once here instead of by each worker that runs a workload.
WORKLOADS = {"hpc:bt+sp": ("bt", "sp"), "hpc:cloverleaf": ("cloverleaf",), "hpc:lulesh": ("lulesh",),
             "hpc:seismic+swim": ("seismic", "swim"), "hpc:hpgmg+mriq+ostencil": ("hpgmg", "mriq", "ostencil"),
             "hpc:cg+ep": ("cg", "ep"), "hpc:md+minighost": ("md", "minighost"), "hpc:olbm+ilbdc": ("olbm", "ilbdc")}
#: Groups of warm-up steps (:func:`steps`), with their cold compile in CPU seconds (the steps of each group in a
#: fresh process with an empty ``NUMBA_CACHE_DIR``, AMD EPYC without AVX-512 under a load of ~3; ``make bench``'s
#: ``compile.md`` measures them again). A group's kernels share compiled helpers, so it runs in one process;
#: :func:`warm` shares the groups among its processes by these costs, so they end at about the same time.
COST = {"bpc32": 16.5, "bpc64": 15.7, "ebo": 14.6, "hpc:bt+sp": 12.9, "others": 12.0, "hpc:hpgmg+mriq+ostencil": 9.2,
        "hpc:cg+ep": 8.9, "hpc:lulesh": 8.7, "hpc:cloverleaf": 7.4, "hpc:seismic+swim": 4.5, "hpc:olbm+ilbdc": 3.4,
        "hpc:md+minighost": 3.2}  # ebo: measured idle
GROUPS = tuple(COST)
#: The environment variable :func:`warm` sets once it has warmed numba's cache for this Python and cache folder.
WARMED = "BUDDY_NUMBA_WARMED"
#: What the package's modules import inside functions, and what runs them (a test session, a notebook's kernel, a
#: dask worker): :func:`bytecode` imports these beside every module of the package, in two processes (the package
#: and the models' stack; the notebooks', tests' and workers').
IMPORTED_LATER = (
    ("torch", "torch._dynamo", "sympy", "safetensors.numpy", "safetensors.torch", "zstandard",
     "lz4.frame", "zipnn", "wordfreq", "skimage", "skimage.io"),
    ("distributed.cli.dask_worker", "distributed.cli.dask_scheduler", "dask.array", "dask.dataframe",
     "zarr", "zarr.storage", "zarr.codecs", "numcodecs", "netCDF4", "matplotlib.pyplot", "pandas.plotting", "seaborn",
     "ipywidgets", "papermill", "nbformat", "nbclient", "nbconvert", "ipykernel.kernelapp",
     "matplotlib_inline.backend_inline", "websocket", "pytest", "xdist", "xdist.remote", "execnet", "nbval.plugin",
     "hypothesis", "hypothesis.extra.numpy"),
)
#: Packages whose modules load one by one as they are needed (numba's as it compiles, debugpy's as a kernel
#: starts, distributed's as a worker serves): :func:`bytecode` compiles all of each.
COMPILED_WHOLE = ("numba", "debugpy", "distributed", "prometheus_client", "IPython", "pygments", "PIL")


@contextlib.contextmanager
def _paths(parallel: bool) -> Iterator[None]:
    """Send every input to the parallel (or the serial) kernels, whatever its size."""
    from buddylib.compressors import abc

    before = abc.PARALLEL_MIN_ENTRIES
    abc.PARALLEL_MIN_ENTRIES = 0 if parallel else 1 << 62
    try:
        yield
    finally:
        abc.PARALLEL_MIN_ENTRIES = before


def steps(group: str | None = None) -> dict[str, Callable[[], object]]:
    """The warm-up calls, by name: each calls the library's public functions on a tiny input, so the
    kernels see the argument types the library gives them (writable and read-only inputs, serial and
    parallel paths). ``group``: one of :data:`GROUPS`, or None for all the compressors' and caches' steps (the
    workloads' only by their group)."""
    from buddylib import compressors
    from buddylib.compressors import BPC
    from buddylib.timing import caches

    rng = np.random.default_rng(0)
    words = rng.integers(0, 1 << 12, 64 * 32, dtype=np.uint32)
    frozen = np.frombuffer(words.tobytes(), dtype=np.uint8)  # read-only, as a bytes or memmap input is
    out: dict[str, Callable[[], object]] = {}

    def add(name: str, parallel: bool, fn: Callable[[], object]) -> None:
        def call() -> object:
            with _paths(parallel):
                return fn()
        out[f"{name} {'parallel' if parallel else 'serial'}"] = call

    for parallel in (False, True):
        for width in (32, 64):
            if group not in (None, f"bpc{width}"):
                continue
            bpc = BPC(width)
            add(f"bpc{width} bits", parallel, lambda bpc=bpc: (bpc.bits(words), bpc.bits(frozen)))
            add(f"bpc{width} encode", parallel, lambda bpc=bpc: (bpc.encode_entries(words), bpc.encode(frozen)))
            add(f"bpc{width} decode", parallel,
                lambda bpc=bpc: (bpc.decode_entries(*bpc.encode_entries(words)), bpc.decode(bpc.encode(words))))
        if group in (None, "others"):
            for name in ("bdi", "fpc", "zvc"):
                add(name, parallel, lambda name=name: (compressors.bits(words, name), compressors.bits(frozen, name)))
            add("sectors", parallel, lambda: (compressors.sectors(words), compressors.sectors(frozen)))
        if group in (None, "ebo"):
            for fmt in ("bf16", "fp16", "e4m3"):  # one compile serves the 16-bit formats (the widths are
                ebo = compressors.EBO(fmt)        # arguments), another FP8's 8-bit words
                add(f"ebo-{fmt}", parallel, lambda ebo=ebo: (ebo.bits(frozen), ebo.decode(ebo.encode(words)),
                                                             ebo.decode_entries(*ebo.encode_entries(frozen))))
    if group in (None, "others"):
        lines = np.arange(100)
        out["metadata cache"] = lambda: caches.set_associative_hits(lines, 1024, 32, 2)
        out["page LRU"] = lambda: caches.page_faults(lines % 7, 4)
        out["metadata cache in parts"] = lambda: caches.LineLRU(1024, 32, 2).run(lines)
        out["stack distances"] = lambda: _stack_distances(lines % 7)
        out["access order"] = lambda: (caches.merge_order(np.array([3, 0, 5])),
                                       caches.MergedStreams([lines[:3], lines[:5]], [0, 1]).next(4))
        out["gather"] = lambda: [caches.gather_entries(lines.astype(t), 1.0, 3, 400, 4, 128)
                                 for t in (np.int32, np.int64)]  # the index arrays' dtypes
        out["page sequence"] = lambda: caches.page_sequence(np.zeros(9, np.int32), np.arange(9), np.array([4, 9]),
                                                            np.zeros(1, np.int64), 128, 4096)
    if group in WORKLOADS:
        from buddylib import workloads

        for name in WORKLOADS[group]:
            out[f"{name} set-up and step"] = lambda name=name: _set_up_and_step(workloads.get(name))
    return out


def _stack_distances(pages: np.ndarray) -> None:
    """Stack distances as a walk runs them: warm accesses first, then counted ones."""
    from buddylib.timing import caches

    st = caches.StackDistances(7)
    st.run(pages, count=False)
    st.run(pages)


def _set_up_and_step(workload: Workload) -> None:
    from buddylib.workloads.base import SCALES

    workload.setup(SCALES["quick"], np.random.default_rng(0))
    workload.step()


def warm(processes: int | None = None) -> float:
    """Compile (or load from numba's cache) every kernel a test session or a report needs: the groups of
    :data:`GROUPS` shared among ``processes`` fresh processes (default: one per core) by their cost, so a cold
    cache costs about the sum over the cores rather than the sum. Returns the wall seconds it took.

    Once per cache in a tree of processes: it marks the environment (:data:`WARMED`), which the processes
    started after it inherit (xdist's workers, dask's, papermill's kernels), so a call in one of them (e.g.
    :func:`buddylib.report.reproduce.run` inside a test) returns at once instead of starting its processes again
    to find every kernel cached."""
    key = _cache_key()
    if os.environ.get(WARMED) == key:
        return 0.0
    t = time.perf_counter()
    shares = share(processes or os.cpu_count() or 1)
    with ThreadPoolExecutor(len(shares)) as pool:
        done = list(pool.map(_run_group, shares))
    for group, proc in zip(shares, done, strict=True):
        if proc.returncode:
            raise RuntimeError(f"warming numba's cache ({group}) failed:\n{proc.stderr[-4000:]}")
    os.environ[WARMED] = key
    return time.perf_counter() - t


def share(processes: int) -> list[list[str]]:
    """:data:`GROUPS` in at most ``processes`` lists of about equal :data:`COST`, the costliest first (each to
    the least loaded list), so each process pays the imports once for several groups."""
    shares: list[list[str]] = [[] for _ in range(max(1, processes))]
    load = [0.0] * len(shares)
    for group in sorted(GROUPS, key=COST.__getitem__, reverse=True):
        i = load.index(min(load))
        shares[i].append(group)
        load[i] += COST[group]
    return [s for s in shares if s]


def _cache_key() -> str:
    """Which cache a warm-up filled: numba's cache folder (its default: beside the sources) for this Python."""
    return f"{sys.executable}|{os.environ.get('NUMBA_CACHE_DIR', '')}"


def _run_group(group: str | list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A fresh process running the steps of ``group`` (or of each group in a list)."""
    groups = [group] if isinstance(group, str) else group
    return subprocess.run([sys.executable, "-m", "buddylib.warm", *groups], capture_output=True, text=True,
                          env=env, check=False)


class _Clock(event.Listener):
    """Seconds (wall and CPU) of every compilation, less the compilations nested in it (a kernel's
    non-inlined callees are compiled, and counted, on their own)."""

    def __init__(self) -> None:
        self.stack: list[list] = []
        self.rows: list[dict] = []

    def on_start(self, ev: event.Event) -> None:
        self.stack.append([time.perf_counter(), time.process_time(), 0.0, 0.0])

    def on_end(self, ev: event.Event) -> None:
        wall0, cpu0, child_wall, child_cpu = self.stack.pop()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if self.stack:
            self.stack[-1][2] += wall
            self.stack[-1][3] += cpu
        f = ev.data["dispatcher"].py_func
        self.rows.append({"kernel": f"{f.__module__.removeprefix('buddylib.')}.{f.__qualname__}",
                          "signature": "(" + ", ".join(str(a) for a in ev.data["args"]) + ")",
                          "seconds": wall - child_wall, "cpu_seconds": cpu - child_cpu})


def _measure(groups: list[str | None]) -> dict:
    """Run the warm-up steps of ``groups`` in this process, timing each and every compilation they trigger."""
    import numba as nb

    nb.njit(lambda x: x + 1)(1)  # numba's own start-up, paid by the first compilation of a process
    clock = _Clock()
    times = {}
    with event.install_listener("numba:compile", clock):
        for name, fn in {k: v for g in groups for k, v in steps(g).items()}.items():
            t = time.perf_counter()
            fn()
            times[name] = time.perf_counter() - t
    return {"steps": times, "compiled": clock.rows}


def compile_times(groups: tuple[str, ...] = GROUPS) -> tuple[list[dict], list[dict]]:
    """Cold compile seconds of every kernel, each group of :data:`GROUPS` in a fresh process with an empty
    ``NUMBA_CACHE_DIR`` (one group at a time, so they do not compete for cores), then the same again
    from the cache that left. Returns ``(compiled, steps)``: one row per compiled kernel and signature
    (``group, kernel, signature, seconds, cpu_seconds``, nested compilations counted apart), and one per
    warm-up step (``group, step, cold_seconds, cached_seconds``: wall seconds of its calls)."""
    compiled, rows = [], []
    with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "BUDDY_WARM_MEASURE": "1"}
        for group in groups:
            cold, again = (_report(_run_group(group, env), group) for _ in range(2))
            compiled += [{"group": group, **r} for r in cold["compiled"]]
            rows += [{"group": group, "step": s, "cold_seconds": t, "cached_seconds": again["steps"][s]}
                     for s, t in cold["steps"].items()]
    return compiled, rows


def _report(proc: subprocess.CompletedProcess, group: str) -> dict:
    if proc.returncode:
        raise RuntimeError(f"measuring compile times ({group}) failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def bytecode(part: int | None = None) -> int:
    """Import every module of the package and :data:`IMPORTED_LATER`, writing the bytecode of each module that
    imports, and compile :data:`COMPILED_WHOLE`: once per install, for the modules a session uses, instead of
    byte-compiling all of the environment (twice the CPU: most of its modules are never imported) or every process
    compiling what it imports (where ``PYTHONDONTWRITEBYTECODE`` is set, nothing is written). ``part``: 0 or 1, one
    of the two halves in this process; None: both, in two fresh processes at once. Returns the modules imported."""
    if part is None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        procs = [subprocess.Popen([sys.executable, "-m", "buddylib.warm", "--bytecode", str(i)], env=env,
                                  stdout=subprocess.PIPE, text=True) for i in (0, 1)]
        counts = [int(p.communicate()[0].split()[-1]) for p in procs]
        if any(p.returncode for p in procs):
            raise RuntimeError("writing bytecode failed")
        return max(counts)
    import compileall
    import importlib
    import importlib.util
    import pkgutil
    import warnings

    import buddylib

    sys.dont_write_bytecode = False
    names = [m.name for m in pkgutil.walk_packages(buddylib.__path__, "buddylib.") if not m.name.endswith("__main__")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in [*names, *IMPORTED_LATER[0]] if part == 0 else IMPORTED_LATER[1]:
            try:
                importlib.import_module(name)
            except ImportError:  # an optional package not installed: nothing of it to compile
                pass
        for name in COMPILED_WHOLE if part == 1 else ():
            spec = importlib.util.find_spec(name)
            for folder in (spec.submodule_search_locations or []) if spec else []:
                compileall.compile_dir(folder, quiet=2)
    return len(sys.modules)


def _main(argv: list[str]) -> int:
    """``python -m buddylib.warm [GROUP ...]``: the steps of these groups (none: the compressors' and caches');
    ``python -m buddylib.warm --bytecode``: :func:`bytecode`."""
    if argv[:1] == ["--bytecode"]:
        print(f"bytecode written for the modules a session imports: {bytecode(*map(int, argv[1:2]))}")
        return 0
    if set(argv) - set(GROUPS):
        raise SystemExit(f"usage: python -m buddylib.warm [{'|'.join(GROUPS)}] ...")
    groups: list[str | None] = list(argv) or [None]
    if os.environ.get("BUDDY_WARM_MEASURE"):
        print(json.dumps(_measure(groups)))
    else:
        for g in groups:
            for fn in steps(g).values():
                fn()
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))


def write_compile_times(out: Path, groups: tuple[str, ...] = GROUPS) -> dict[str, Path]:
    """Measure :func:`compile_times` and write it under ``out``: ``compile.csv`` (one row per kernel and
    signature), ``compile_steps.csv`` (per warm-up step, cold and from the cache) and ``compile.md``."""
    import pandas as pd

    compiled, steps_ = compile_times(groups)
    kernels, per_step = pd.DataFrame(compiled), pd.DataFrame(steps_)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"compile": out / "compile.csv", "compile_steps": out / "compile_steps.csv",
             "compile_markdown": out / "compile.md"}
    kernels.to_csv(paths["compile"], index=False)
    per_step.to_csv(paths["compile_steps"], index=False)
    by_group = kernels.groupby("group", sort=False)[["seconds", "cpu_seconds"]].sum().reindex(list(groups))
    by_group["from cache, seconds"] = per_step.groupby("group", sort=False)["cached_seconds"].sum()
    top = kernels.sort_values("cpu_seconds", ascending=False).head(25)
    lines = [
        "# Compile time of numba's kernels from a cold cache",
        "",
        "Each group in a fresh process with an empty `NUMBA_CACHE_DIR` (one group at a time), timing every "
        "compilation its warm-up steps trigger (`buddylib.warm`), nested ones counted apart; then the same steps "
        "again in a fresh process, loading from that cache. A newcomer pays the compile once per machine; "
        "`conftest.py` and `buddy reproduce` pay it before their workers start, which then only load. "
        "CPU seconds are the robust figure on a busy machine.",
        "",
        "```",
        by_group.round(2).to_string(),
        "```",
        "",
        f"Total: {kernels['seconds'].sum():.1f} s ({kernels['cpu_seconds'].sum():.1f} s of CPU) to compile, "
        f"{per_step['cached_seconds'].sum():.1f} s to load. The longest compilations:",
        "",
        "```",
        top[["group", "kernel", "signature", "seconds", "cpu_seconds"]].round(2).to_string(index=False),
        "```",
        "",
    ]
    paths["compile_markdown"].write_text("\n".join(lines))
    return paths
