"""The paper's headline numbers, quoted (not computed), and the configuration ours are compared at.

Choukse, Sullivan, O'Connor, Erez, Pool, Nellans, Keckler: *Buddy Compression: Enabling
Larger Memory for Deep Learning and HPC Workloads on GPUs*, ISCA 2020 (arXiv 1903.02596).
Plots, notebook readings and the report index take every quoted number, and the headline
configuration, from here, so a label can never disagree with what was computed.
"""

CITATION = "Choukse et al., *Buddy Compression*, ISCA 2020 (arXiv 1903.02596)"

#: average effective capacity over the HPC set: 1.9x in the ISCA version, 2.2x in the arXiv abstract
HPC_RATIO_ISCA = 1.9
HPC_RATIO_ARXIV = 2.2
#: average effective capacity over DL training
DL_RATIO = 1.5
#: slowdown against an ideal GPU with unlimited memory, NVLink2-class link (~150 GB/s per direction)
SLOWDOWN_NVLINK2 = (0.01, 0.02)
#: the same, as the paper states it
SLOWDOWN_TEXT = f"{100 * SLOWDOWN_NVLINK2[0]:g}–{100 * SLOWDOWN_NVLINK2[1]:g}%"

#: What the paper's text says of its slowdown: the arXiv abstract presents Buddy Compression as raising
#: effective capacity and bandwidth; the ISCA abstract puts performance within 2% of a system with no
#: memory limit. Both are a net slowdown against an ideal GPU, so ours is compared without crediting
#: compressed entries with saved HBM bytes (``bandwidth_credit`` False), the credited one beside it.
SLOWDOWN_BASIS = ("net slowdown against an ideal GPU with unlimited memory (arXiv abstract: capacity and bandwidth; "
                  "ISCA abstract: within 2% of a system with no memory limit)")

#: The configuration of our headline numbers, the paper's setting: a V100 (32 GB) whose buddy memory
#: sits behind NVLink2, BPC-32, the profiling policy at a 30% buddy threshold, no bandwidth credit in the
#: timing model (see :data:`SLOWDOWN_BASIS`), and its defaults (``timing.Params``: 64 KiB metadata
#: cache, 5,120 link requests in flight, the preset's link latency). Select it with :func:`headline`.
HEADLINE = {"gpu": "V100-32GB", "link": "NVLink2", "compressor": "bpc32", "threshold": 0.3, "latency_scale": 1.0,
            "metadata_cache_bytes": 64 << 10, "outstanding": 5120, "bandwidth_credit": False}


def headline(ds, *keep: str, **at):
    """``ds`` at the headline configuration (:data:`HEADLINE`), along every dimension it has except those in
    ``keep``.

    Parameters
    ----------
    ds : xarray.Dataset or xarray.DataArray
        Results with any of the configuration's dimensions (``gpu``, ``link``, ``threshold``...).
    *keep : str
        Dimensions left whole.
    **at
        Settings changed (a notebook's own threshold, a variant), so that no caller copies the configuration
        into its own ``sel``.

    Returns
    -------
    xarray.Dataset or xarray.DataArray
        ``ds.sel`` at the configuration.

    Examples
    --------
    >>> import xarray as xr
    >>> da = xr.DataArray([[1.0, 2.0]], dims=("gpu", "threshold"),
    ...                   coords={"gpu": ["V100-32GB"], "threshold": [0.3, 0.5]})
    >>> float(headline(da))
    1.0
    >>> headline(da, "threshold").values.tolist()
    [1.0, 2.0]
    >>> float(headline(da, threshold=0.5))
    2.0
    """
    return ds.sel({k: v for k, v in (HEADLINE | at).items() if k in ds.dims and k not in keep})

