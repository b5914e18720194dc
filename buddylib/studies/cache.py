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
    """Whether ``path`` names a result cached beside a run (or a temporary file of one being written)."""
    name = Path(path).name
    return name.startswith(".") or any(c in name for c in CACHED)


def save_cache(ds: xr.Dataset, path: Path) -> None:
    """Write a cached result under a temporary name and move it into place: processes that compute the same
    result at once (parallel notebooks, test workers) never read a half-written file."""
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
    """The result cached at ``cache`` if it was made from the run now at ``run_path`` (not older than it) by the
    code of now, ``code`` (its ``code`` attribute, dropped unless ``keep_code``); else None."""
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
    """A cached result, in memory and without its file encodings: kept, an encoding such as a
    2-character string width would truncate longer workload names when the result is written again."""
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    for v in ds.variables.values():
        v.encoding = {}
    return ds
