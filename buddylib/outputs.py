"""Where a notebook's figures and tidy data go: PNG + SVG, CSV + netCDF, under ``out_dir``.

With ``out_dir=None`` (interactive use, nbval) nothing is written. The report that links
them is written by :mod:`buddylib.report.reproduce` and :mod:`buddylib.report.index_page`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import xarray as xr
from matplotlib.figure import Figure


def save_figure(fig: Figure, out_dir: str | Path | None, name: str) -> list[Path]:
    """Write ``fig`` as ``name.png`` and ``name.svg`` under ``out_dir``."""
    if out_dir is None:
        return []
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.{ext}" for ext in ("png", "svg")]
    for p in paths:
        fig.savefig(p, dpi=120, bbox_inches="tight")
    return paths


def save_data(data: xr.Dataset | xr.DataArray | pd.DataFrame, out_dir: str | Path | None, name: str) -> list[Path]:
    """Write tidy data: a Dataset as ``name.nc`` and ``name.csv`` (long form); a DataFrame as CSV."""
    if out_dir is None:
        return []
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(data, pd.DataFrame):
        data.to_csv(out / f"{name}.csv")
        return [out / f"{name}.csv"]
    ds = data.to_dataset(name=data.name or name) if isinstance(data, xr.DataArray) else data.copy()
    for v in ds.variables.values():  # encodings read from cached files (e.g. a 2-character string
        v.encoding = {}              # width) would silently truncate longer values written now
    ds.to_netcdf(out / f"{name}.nc")
    ds.to_dataframe().to_csv(out / f"{name}.csv")
    return [out / f"{name}.nc", out / f"{name}.csv"]
