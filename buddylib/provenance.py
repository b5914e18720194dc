"""Which code made a cached result, so a result made by other code is never reused.

Runs, slowdown sweeps and batch measurements are cached in ``data/`` because they take
minutes; a cache made before a compressor, a workload or the timing model changed would
silently give the old numbers. Each cache records :func:`code_version` of the source it
depends on and is recomputed when that differs.

A saved workload run depends on less: its own module, the workload modules it imports, the
workload base class and the compressors it records (:func:`workload_sources`, :func:`run_compressors`), so
editing one proxy remakes that proxy's runs alone, and adding a compressor no run records (a code of 16-bit
floats, a whole-tensor peer) remakes none. Every digest is of the code, not the text: docstrings and comments are left
out (:func:`normalized_source`), so documenting a module never invalidates a cached or committed result.

The exception is a *frozen* folder, one holding a :data:`MANIFEST` (the committed fixtures,
:mod:`buddylib.studies.fixtures`): its runs are read as they are and never remade in place, because
remaking them on another CPU would give other bytes; a test checks them against a fresh run.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE = Path(__file__).resolve().parent
#: Source the bytes and sectors of a saved workload run depend on.
RUN_SOURCES = ("workloads", "compressors", "entries.py", "snapshot.py")
#: ... and what analysing a run (placement, timing) adds.
ANALYSIS_SOURCES = (*RUN_SOURCES, "analysis.py", "layout.py", "regions.py", "timing", "studies/analyses.py")
#: What analysing a run adds to the code that made it (:data:`ANALYSIS_SOURCES` without the runs' sources).
ANALYSIS_ONLY = tuple(p for p in ANALYSIS_SOURCES if p not in RUN_SOURCES)
#: What every workload's run depends on besides its own modules and the compressors it records
#: (:func:`workload_sources`).
WORKLOAD_BASE = ("workloads/base.py", "entries.py", "snapshot.py")
#: Modules a workload's imports reach that decide nothing of its bytes: the registries (importing one
#: imports every workload of its suite) and the package's own ``__init__``.
_NOT_FOLLOWED = ("__init__.py", "workloads/__init__.py", "workloads/hpc/__init__.py", "workloads/dl/__init__.py",
                 "workloads/_registry.py",
                 "compressors/__init__.py")  # its part in a run is the registrations (:func:`_registrations`)
#: Names that moved to another module without a change to what runs: a module importing one from its new home
#: has the digest it had importing it from the old, so no committed result made before the move is stale for it.
MOVED = {"buddylib.workloads._registry": "buddylib.workloads"}  # ``register``, moved to break an import cycle
#: Digests and import lists computed before, by a hash of what they were computed from (the files' texts, this
#: module's own text, Python's version): parsing the package costs each process 2-3 s (every test worker, notebook
#: kernel and dask worker checks caches against digests); this file makes it once per checkout (the first process
#: that needs a digest writes it). Where it cannot be written (a read-only install) every process computes its own.
DISK_CACHE = PACKAGE / "__pycache__" / f"buddy-digests.{sys.implementation.cache_tag}.json"
_DISK_ENTRIES = 4096  # the oldest dropped beyond this: each edit of the package adds a few


#: The file that marks a folder of runs as frozen, and says how and where they were made.
MANIFEST = "MANIFEST.json"
#: This checkout's data folder; the committed quick-scale fixtures in it (frozen), and their scale and seed.
DATA = PACKAGE.parent / "data"
FIXTURES = DATA / "fixtures" / "quick"
FIXTURE_SCALE, FIXTURE_SEED = "quick", 0


def frozen(folder: str | Path) -> bool:
    """Whether ``folder`` holds committed runs (a :data:`MANIFEST`): read them, never remake them there.

    Parameters
    ----------
    folder : str or pathlib.Path

    Returns
    -------
    bool
    """
    return (Path(folder) / MANIFEST).is_file()


@functools.cache
def code_version(*parts: str) -> str:
    """Short SHA-256 of the Python code under ``parts``, docstrings and comments left out
    (:func:`normalized_source`).

    Parameters
    ----------
    *parts : str
        Files or folders of the package, relative to it (``"entries.py"``, ``"timing"``).

    Returns
    -------
    str
        12 hex digits.

    Raises
    ------
    ValueError
        A part that is not in the package.

    Examples
    --------
    >>> code_version("entries.py") == code_version("entries.py") != code_version("layout.py")
    True
    """
    files = []
    for part in parts:
        root = PACKAGE / part
        if not root.exists():
            raise ValueError(f"code_version: {part!r} is not part of the buddylib package")
        files += [(str(f.relative_to(PACKAGE)), f.read_text()) for f in (sorted(root.rglob("*.py")) if root.is_dir()
                                                                          else [root])]
    key = _disk_key("code", *(f"{rel}\0{text}" for rel, text in files))
    if key not in _disk():
        h = hashlib.sha256()
        for rel, text in files:
            h.update(rel.encode() + b"\0" + normalized_source(text).encode() + b"\0")
        _remember(key, h.hexdigest()[:12])
    return _disk()[key]


@functools.cache
def _disk() -> dict[str, Any]:
    """:data:`DISK_CACHE` as this process first read it, and what it added since."""
    try:
        known = json.loads(DISK_CACHE.read_text())
    except (OSError, ValueError):  # none yet, or damaged: computed again
        return {}
    return known if isinstance(known, dict) else {}


@functools.cache
def _package_files() -> tuple[str, ...]:
    return tuple(sorted(str(f.relative_to(PACKAGE)) for f in PACKAGE.rglob("*.py")))


@functools.cache
def _own_text() -> str:
    return Path(__file__).read_text()


def _disk_key(kind: str, *texts: str) -> str:
    """What a cached value was computed from: ``texts``, this module's code and Python's version, hashed."""
    h = hashlib.sha256(f"{kind}\0{sys.version}\0{_own_text()}".encode())
    for t in texts:
        h.update(b"\0" + t.encode())
    return h.hexdigest()


def _remember(key: str, value: Any) -> None:
    """Add ``key`` to :data:`DISK_CACHE` (written whole, atomically; a process writing at the same time may drop the
    other's new keys, which are then computed again)."""
    known = _disk()
    known[key] = value
    for old in list(known)[: max(0, len(known) - _DISK_ENTRIES)]:
        del known[old]
    tmp = None
    try:
        DISK_CACHE.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=DISK_CACHE.parent, prefix=".buddy-digests.")
        with os.fdopen(fd, "w") as f:
            json.dump(known, f)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from another user of the same checkout
        os.replace(tmp, DISK_CACHE)
    except OSError:
        if tmp is not None and os.path.exists(tmp):  # a full disk: no half-written file left beside the cache
            os.unlink(tmp)


@functools.lru_cache(maxsize=512)
def normalized_source(text: str) -> str:
    r"""What of a module's source is code: its syntax tree without docstrings (comments are not in it),
    without line numbers, names imported from their :data:`MOVED` home spelt as before; the same for any two
    texts that differ only in docstrings, comments, layout or such a move.

    Parameters
    ----------
    text : str
        A module's source.

    Returns
    -------
    str
        The tree's dump.

    Examples
    --------
    >>> normalized_source("def f():  # one\n    'Doc.'\n    return 1") == normalized_source("def f(): return 1")
    True
    """
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in MOVED:
            node.module = MOVED[node.module]
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
                isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def _reached(starts: list[str], within: tuple[str, ...]) -> set[str]:
    """The modules ``starts`` import, transitively, among those whose path starts with one of ``within``."""
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        rel = todo.pop()
        if rel in seen or rel in _NOT_FOLLOWED:
            continue
        seen.add(rel)
        todo += [d for d in _imported(rel) if d.startswith(within)]
    return seen


@functools.cache
def run_compressors() -> tuple[str, ...]:
    """The compressor sources a run's sectors and reference sizes depend on: the modules of the compressors it
    records (``ALL_COMPRESSORS``) and of the whole-buffer references, with the modules they import, and the
    recorded compressors' registrations (class and options, as ``registry.get`` builds them).

    >>> "compressors/bpc_kernels.py" in run_compressors(), "compressors/ebo.py" in run_compressors()
    (True, False)
    """
    from buddylib.compressors import ALL_COMPRESSORS, registry

    starts = ["compressors/reference.py", "compressors/registry.py"]
    for name in ALL_COMPRESSORS:
        cls, _ = registry._REGISTRY[name]
        starts.append(_module_file(cls.__module__) or "")
    return tuple(sorted(_reached(starts, ("compressors/", "entries.py"))))


@functools.cache
def _registrations() -> str:
    """The recorded compressors' registrations (name, class, options): what ``compressors/__init__`` decides of
    a run, without the rest of that module (other compressors' registrations and imports)."""
    from buddylib.compressors import ALL_COMPRESSORS, registry

    return repr([(n, registry._REGISTRY[n][0].__qualname__, sorted(registry._REGISTRY[n][1].items()))
                 for n in ALL_COMPRESSORS])


def workload_sources(module: str) -> tuple[str, ...]:
    """The sources a workload run defined in ``module`` depends on: the module, every workload module it imports
    (transitively; the registries excepted, which import every workload), :data:`WORKLOAD_BASE` and
    :func:`run_compressors`.

    Parameters
    ----------
    module : str
        Its dotted name, or its path relative to the package.

    Returns
    -------
    tuple of str
        Paths relative to the package: the workload's modules, sorted, then the base.

    Raises
    ------
    ValueError
        ``module`` is not a module of the package.

    Examples
    --------
    >>> workload_sources("buddylib.workloads.hpc.bt")[:3]
    ('workloads/hpc/_adi.py', 'workloads/hpc/_schedule.py', 'workloads/hpc/bt.py')
    """
    start = _module_file(module) if module.startswith("buddylib.") else module
    if start is None or not (PACKAGE / start).is_file():
        raise ValueError(f"workload_sources: {module!r} is not a module of the buddylib package")
    base = tuple(dict.fromkeys((*WORKLOAD_BASE, *run_compressors())))
    seen = _reached([start], ("workloads/",))
    return (*sorted(seen - set(base)), *base)


def workload_code(module: str) -> str:
    """Short digest of the code a workload run defined in ``module`` depends on (:func:`workload_sources`);
    for a workload defined outside the package, its module's code and :data:`WORKLOAD_BASE`.

    Parameters
    ----------
    module : str
        A dotted module name, or a path relative to the package (``.py``).

    Returns
    -------
    str
        12 hex digits, the recorded compressors' registrations included.
    """
    if module.startswith("buddylib.") or module.endswith(".py"):
        return _with_registrations(code_version(*workload_sources(module)))
    import importlib.util

    spec = importlib.util.find_spec(module)
    text = Path(spec.origin).read_text() if spec is not None and spec.origin and spec.origin.endswith(".py") else ""
    base = code_version(*dict.fromkeys((*WORKLOAD_BASE, *run_compressors())))
    return _with_registrations(hashlib.sha256(f"{module}\0{normalized_source(text)}\0{base}".encode()).hexdigest()[:12])


def _with_registrations(digest: str) -> str:
    """``digest`` combined with the recorded compressors' registrations (:func:`_registrations`)."""
    return hashlib.sha256(f"{digest}\0{_registrations()}".encode()).hexdigest()[:12]


@functools.cache
def _imported(rel: str) -> tuple[str, ...]:
    """The package's modules (paths relative to it) that the module ``rel`` imports, at any depth of its code."""
    text = (PACKAGE / rel).read_text()
    key = _disk_key("imports", rel, text, *_package_files())  # which files a dotted name resolves to: the package's
    if key not in _disk():
        _remember(key, _imports_of(rel, text))
    return tuple(_disk()[key])


def _imports_of(rel: str, text: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [_module_file(a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's own package
                base = Path(rel).parent.parts[: len(Path(rel).parent.parts) - node.level + 1]
                prefix = ".".join(("buddylib", *base, *([node.module] if node.module else [])))
            else:
                prefix = node.module or ""
            out.append(_module_file(prefix))
            out += [_module_file(f"{prefix}.{a.name}") for a in node.names]  # `from package import module`
    return [f for f in out if f is not None]


def _module_file(dotted: str) -> str | None:
    """The file of the package's module ``dotted`` (``buddylib.x.y``), relative to the package; None if not one."""
    parts = dotted.split(".")
    if parts[0] != "buddylib":
        return None
    path = PACKAGE.joinpath(*parts[1:])
    if path.with_suffix(".py").is_file():
        return str(path.with_suffix(".py").relative_to(PACKAGE))
    if (path / "__init__.py").is_file():
        return str((path / "__init__.py").relative_to(PACKAGE))
    return None


def machine() -> dict[str, Any]:
    """What decides a workload's bytes on this machine: CPU, C library, and the kernels numpy, torch
    and numba pick for it."""
    import llvmlite.binding as llvm
    import numba

    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy < 2
        from numpy.core import _multiarray_umath as umath
    out: dict[str, Any] = {
        "cpu": _cpuinfo("model name"), "arch": platform.machine(), "libc": " ".join(platform.libc_ver()),
        "fma_avx2": fma_avx2(),
        "numpy_simd": [f for f in umath.__cpu_dispatch__ if umath.__cpu_features__.get(f)],
        "numba_cpu": numba.config.CPU_NAME or llvm.get_host_cpu_name(),
        "numpy": np.__version__, "numba": numba.__version__, "python": platform.python_version(),
    }
    try:
        import torch

        out |= {"torch": torch.__version__, "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}
    except ImportError:
        out["torch"] = None
    return out


def fma_avx2() -> bool:
    """Whether this CPU has FMA and AVX2, the condition under which glibc picks its FMA builds of
    exp, log, sin, cos, tanh... (other builds round some results differently)."""
    flags = set(_cpuinfo("flags").split())
    return {"fma", "avx2"} <= flags


def _cpuinfo(key: str) -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.split(":", 1)[0].strip() == key), "")
