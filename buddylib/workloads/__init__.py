"""Workloads: real computations that record GPU-memory snapshots and access profiles (SPEC §5).

>>> from buddylib import workloads
>>> run = workloads.get("ostencil").run("quick", seed=0)
>>> len(run.snapshots) >= 8
True
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from buddylib.workloads._registry import _REGISTRY, register
from buddylib.workloads.base import SCALES, Access, AccessProfile, Kernel, Run, Workload, footprint_bytes


def get(name: str) -> Workload:
    """A new instance of the workload registered as ``name``.

    Parameters
    ----------
    name : str
        A registered name (:func:`names`), e.g. ``"ostencil"``.

    Returns
    -------
    Workload

    Raises
    ------
    ValueError
        An unknown name (the message lists the known ones, and says so when torch is missing).
    """
    _load(with_dl=False)
    if name not in _REGISTRY:
        _load()
    if name not in _REGISTRY:
        why = f" (the DL workloads need torch: {_NO_TORCH})" if _NO_TORCH else ""
        raise ValueError(f"unknown workload {name!r}{why}; available: {', '.join(names())}")
    return _REGISTRY[name]()


def names(suite: str | None = None) -> list[str]:
    """Names of the registered workloads, sorted.

    A workload that cannot run here (:meth:`Workload.missing`, e.g. its model package is not
    installed) is left out with a warning saying why; :func:`get` still returns it. Without torch
    the DL workloads cannot even be registered: a warning says so too.

    Parameters
    ----------
    suite : {"hpc", "dl", "dl-extra", "llm"}, optional
        Only this suite's (default: all).

    Returns
    -------
    list of str
    """
    _load(with_dl=suite != "hpc")
    if _NO_TORCH and suite in (None, "dl", "dl-extra", "llm"):
        warnings.warn(f"DL workloads (suites dl, dl-extra, llm) left out: {_NO_TORCH}", stacklevel=2)
    out = []
    for n, cls in sorted(_REGISTRY.items()):
        if suite is not None and cls.suite != suite:
            continue
        why = cls.missing()
        if why is None:
            out.append(n)
        else:
            warnings.warn(f"workload {n!r} left out: {why}", stacklevel=2)
    return out


def cached_run(name: str, scale: str | float = "quick", seed: int = 0, data: str | Path = "data",
               regenerate: bool = False) -> Path:
    """Path of ``name``'s saved run, running it only if missing or made by other code (its profile records
    :meth:`Workload.code`: the digest of the workload's own module, the workload modules it imports, the base
    class and the compressors, so editing one workload remakes its runs alone).

    Runs record every compressor and the zstd/lz4 references, so any analysis can use them (paper-scale
    runs, gigabytes per snapshot, only ``PAPER_COMPRESSORS``). In a frozen folder (the committed
    fixtures) the run is read as it is, never remade.

    Parameters
    ----------
    name : str
        A registered workload.
    scale : str or float
        A named scale (``SCALES``) or a footprint in MiB.
    seed : int
        The run's seed.
    data : str or pathlib.Path
        The folder runs are saved in.
    regenerate : bool
        Run it even when a current run is saved.

    Returns
    -------
    pathlib.Path
        ``<data>/<name>-<scale>-s<seed>.nc``, the snapshots; the profile (``.profile.json``) and index arrays lie
        beside it.

    Raises
    ------
    ValueError
        An unknown workload or scale, or ``regenerate`` in a frozen folder.
    FileNotFoundError
        A run not among a frozen folder's.
    """
    import json

    from buddylib.compressors import ALL_COMPRESSORS
    from buddylib.provenance import frozen
    from buddylib.workloads.base import PAPER_COMPRESSORS

    path = Path(data) / f"{name}-{scale}-s{seed}.nc"
    if frozen(data):
        if regenerate:
            raise ValueError(f"{data} holds committed fixtures, which are remade only by `make fixtures`")
        if not path.exists():
            raise FileNotFoundError(f"{path}: not among the committed fixtures in {data} (scale {scale}, seed "
                                    f"{seed}); use another data folder, or add it with `make fixtures`")
        return path
    profile = path.with_suffix(".profile.json")
    current = path.exists() and profile.exists() and \
        json.loads(profile.read_text()).get("code") == get(name).code()
    if regenerate or not current:
        paper = scale == "paper"
        quiet = _in_notebook()  # a step bar in a notebook's saved output is a text line per refresh
        run = get(name).run(scale, seed=seed, compressors=PAPER_COMPRESSORS if paper else ALL_COMPRESSORS,
                            references=() if paper else ("zstd", "lz4"), progress=False if quiet else None)
        run.save(data)
        if quiet:  # one line per finished run instead
            print(f"ran {name} at scale {scale}, seed {seed}: {len(run.snapshots)} snapshots in {run.seconds:.1f} s",
                  file=sys.stderr)
    return path


def _in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (a notebook, or one papermill runs)."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return type(shell).__name__ == "ZMQInteractiveShell"


#: Why the DL workloads are not registered (torch missing), once :func:`_load` has looked.
_NO_TORCH: str | None = None


def _load(with_dl: bool = True) -> None:
    """Register the HPC proxies and, with ``with_dl``, the DL training runs: a process that runs HPC proxies only (a
    dask worker of make reproduce) is spared importing torch, two CPU-seconds per process."""
    global _NO_TORCH
    import buddylib.workloads.hpc  # noqa: F401 - registers the HPC proxies
    if not with_dl:
        return
    try:
        from buddylib.workloads import dl  # noqa: F401 - registers the DL training runs
    except ImportError as e:  # no torch: the DL workloads are absent, and names() says so
        if e.name != "torch":
            raise
        _NO_TORCH = "torch is not installed (pip install -e '.[dl]'; make installs it)"


__all__ = ["SCALES", "Access", "AccessProfile", "Kernel", "Run", "Workload", "cached_run", "footprint_bytes", "get",
           "names", "register"]
