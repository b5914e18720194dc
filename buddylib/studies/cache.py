"""Where results are cached beside the runs they analyse, and how they are written and read back.

Plumbing, not analysis: nothing here decides a number, so no result's code digest covers it (the analyses are in
:mod:`buddylib.studies.analyses`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

#: What names a result cached beside a run (:func:`~buddylib.studies.analyses.slowdowns`,
#: :func:`~buddylib.studies.analyses.workload_ratios`): remade from the run and
#: the code, never part of a committed folder of runs.
CACHED = (".slowdown-", ".ratios-")


def cached_result(path: str | Path) -> bool:
    """Whether ``path`` names a result cached beside a run (or a temporary file of one being written).

    Parameters
    ----------
    path : str or pathlib.Path
        A file's path.

    Returns
    -------
    bool
        True for a name starting with a dot or holding one of :data:`CACHED`.

    Examples
    --------
    >>> cached_result("data/vgg16-quick-s0.ratios-0123456789.nc"), cached_result("data/vgg16-quick-s0.nc")
    (True, False)
    """
    name = Path(path).name
    return name.startswith(".") or any(c in name for c in CACHED)


def save_cache(ds: xr.Dataset, path: Path) -> None:
    """Write a cached result under a temporary name and move it into place.

    Processes that compute the same result at once (parallel notebooks, test workers) never read a half-written file.

    Parameters
    ----------
    ds : xarray.Dataset
        The result.
    path : pathlib.Path
        Where it goes (its folder is made if missing).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".nc")
    os.close(fd)
    try:
        ds.to_netcdf(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def reused(cache: Path, run_path: Path, code: str, keep_code: bool = False) -> xr.Dataset | None:
    """The result cached at ``cache`` if it was made from the run now at ``run_path`` by the code of now.

    Parameters
    ----------
    cache : pathlib.Path
        The cached result's file.
    run_path : pathlib.Path
        The run it was made from: a cache older than the run is not reused.
    code : str
        The digest of the code of now, which the cache's ``code`` attribute must equal.
    keep_code : bool
        Keep the ``code`` attribute (else it is dropped, object variables and numpy attributes restored).

    Returns
    -------
    xarray.Dataset or None
        The cached result, or None where it is missing, older than the run or made by other code.
    """
    if not cache.exists() or cache.stat().st_mtime < run_path.stat().st_mtime:
        return None
    cached = load_cached(cache)
    if cached.attrs.get("code") != code:
        return None
    if keep_code:
        return cached
    del cached.attrs["code"]
    for v in filter(None, cached.attrs.pop("object_variables", "").split(",")):
        cached[v] = cached[v].astype(object)
    cached.attrs = {k: v.item() if isinstance(v, np.generic) else v for k, v in cached.attrs.items()}
    return cached


def load_cached(path: Path) -> xr.Dataset:
    """A cached result, in memory and without its file encodings.

    Kept, an encoding such as a 2-character string width would truncate longer workload names when the result is
    written again.

    Parameters
    ----------
    path : pathlib.Path
        The cached result's file.

    Returns
    -------
    xarray.Dataset
        Loaded, the file closed.
    """
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    for v in ds.variables.values():
        v.encoding = {}
    return ds
