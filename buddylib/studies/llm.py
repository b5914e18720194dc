"""Buddy Compression on today's LLM memory (issue 23, notebook 10): per tensor kind, what the per-entry codes
(BPC-32, BPC-64 and the code of bf16 floats, EBO) give, beside whole-tensor lossless compressors made for
these tensors (zstd; DFloat11's Huffman-coded exponents; ZipNN where it is installed; the exponent's entropy
as their ceiling), and what that buys on an H100 or H200 serving a model.

The tensors are real: the bf16 weights of two published checkpoints (MiniLM's, EfficientNet-Lite0's), the KV
cache MiniLM computes for real text (``minilm_kv``) and a GPT-style bf16 training's masters, copies,
gradients, moments and activations (``gpt_bf16``); see :mod:`buddylib.workloads.dl.llm`. A per-entry code
keeps every 128-byte entry decodable alone and rounds it to 32-byte sectors; a whole-tensor entropy coder
does neither, and the difference is one of the results.

The capacity question (:func:`capacity`) is answered for a published 7B-class configuration (Llama-2-7B's,
labelled as such) with the ratios and the slowdown measured here on the small real model.

The quick-scale study is committed (:data:`COMMITTED`, :func:`write_committed`), so notebook 10 shows the same
numbers on every machine under nbval, and the default-scale one, so make reproduce reads it instead of spending two
minutes of worker time on it; :func:`check_committed` (and the tests) remake it here and compare, bit
for bit where the bytes do not depend on the CPU (the checkpoints) and within :data:`TOLERANCE` where they do
(the KV cache and the training are float computation).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from buddylib import paper
from buddylib.studies import cache, fixtures
from buddylib.studies.llm_measure import (
    ALL_CODES,
    CAPACITY_GPUS,
    COMPRESSORS,
    FP8_GROUPS,
    GROUPS,
    KERNEL_SCALES,
    PEERS,
    THRESHOLDS,
    efficientnet_bf16,
    key,
    measure,
    runs,
)

__all__ = ["ALL_CODES", "CAPACITY_GPUS", "COMMITTED", "COMPRESSORS", "FP8_GROUPS", "GROUPS", "KERNEL_SCALES",
           "LLAMA2_7B", "PEERS", "THRESHOLDS", "TOLERANCE", "capacity", "check_committed", "committed_path",
           "efficientnet_bf16", "key", "measure", "ratio_table", "runs", "study", "write_committed"]

#: A published 7B-class configuration to extrapolate to (Llama-2-7B, Touvron et al. 2023, Table 1 and its
#: config.json): layers, hidden size, KV heads, head dim, parameters.
LLAMA2_7B = {"layers": 32, "hidden": 4096, "kv_heads": 32, "head_dim": 128, "params": 6.74e9}
#: Where the committed study lies, and the largest relative change :func:`check_committed` accepts in a number
#: that float computation made (the fixtures' tolerance: PyTorch's kernels differ between CPUs).
COMMITTED = fixtures.DATA / "summaries" / "llm"
#: The largest relative change :func:`check_committed` accepts (the fixtures').
TOLERANCE = fixtures.TOLERANCE


def committed_path(scale: str | float = "quick", seed: int = 0) -> Path:
    """Where the committed study of ``scale`` and ``seed`` lies.

    Parameters
    ----------
    scale : str or float
        The study's scale.
    seed : int
        Its seed.

    Returns
    -------
    pathlib.Path
        In :data:`COMMITTED`; the file need not exist.

    Examples
    --------
    >>> committed_path("quick").name
    'llm-quick-s0.nc'
    """
    return COMMITTED / f"llm-{scale}-s{seed}.nc"


def study(scale: str | float = "quick", seed: int = 0, data: str | Path | None = None,
          progress: bool = False) -> xr.Dataset:
    """The study's numbers (:func:`measure`): the committed study of this scale and seed where there is one.

    Read as it is: its ``code``, ``date`` and ``machine`` attributes say what made it (quick scale for nbval, default
    for make reproduce). Else computed and cached in ``data`` as ``llm-<scale>-s<seed>.nc``, reused while the code is
    the same.

    Parameters
    ----------
    scale : str or float
        The study's scale.
    seed : int
        Its seed.
    data : str or pathlib.Path, optional
        Where an uncommitted study is cached (None: this checkout's ``data/``).
    progress : bool
        Progress bars, where it is measured.

    Returns
    -------
    xarray.Dataset
        :func:`measure`'s; a committed one with attributes ``source`` ("committed") and ``code_current`` (whether its
        code is this checkout's).
    """
    if committed_path(scale, seed).is_file():
        ds = cache.load_cached(committed_path(scale, seed))
        return ds.assign_attrs(source="committed", code_current=int(ds.attrs.get("code") == key()))
    if data is None:
        data = fixtures.DATA
    path = Path(data) / f"llm-{scale}-s{seed}.nc"
    if path.exists():
        ds = cache.load_cached(path)
        if ds.attrs.get("code") == key():
            return ds
    ds = measure(scale, seed, progress)
    ds.attrs["code"] = key()
    cache.save_cache(ds, path)
    return ds


def write_committed(scale: str | float = "quick", seed: int = 0) -> Path:
    """Measure the study here and commit it (:data:`COMMITTED`), with the code digest, date and machine.

    Parameters
    ----------
    scale : str or float
        The study's scale.
    seed : int
        Its seed.

    Returns
    -------
    pathlib.Path
        The file written (:func:`committed_path`).
    """
    import datetime

    ds = measure(scale, seed)
    ds.attrs.update(code=key(), date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                    machine=json.dumps(fixtures.machine()))
    path = committed_path(scale, seed)
    cache.save_cache(ds, path)
    return path


def check_committed(scale: str | float = "quick", seed: int = 0, fresh: xr.Dataset | None = None) -> pd.DataFrame:
    """Remake the committed study here (or take ``fresh``) and compare, one row per variable.

    Parameters
    ----------
    scale : str or float
        The study's scale.
    seed : int
        Its seed.
    fresh : xarray.Dataset, optional
        A study made already.

    Returns
    -------
    pandas.DataFrame
        Per variable (and per variable with a ``group`` dimension, its checkpoints' rows apart): the largest relative
        change, whether it must be exact (the checkpoints' rows and every size in bytes) and ``ok`` (else within
        :data:`TOLERANCE`).

    Raises
    ------
    FileNotFoundError
        No study committed at ``scale`` and ``seed``.
    """
    if not committed_path(scale, seed).is_file():
        raise FileNotFoundError(f"no committed study at scale {scale}, seed {seed} ({committed_path(scale, seed)}); "
                                f"`buddy llm --write --scale {scale} --seed {seed}` makes one")
    kept = cache.load_cached(committed_path(scale, seed))
    fresh = measure(scale, seed) if fresh is None else fresh
    exact_groups = [g for g, src, *_ in GROUPS if src == "efficientnet" or g == GROUPS[0][0]]
    rows = []
    for v in kept.data_vars:
        a, b = kept[v], fresh[v]
        if a.dims != b.dims or a.shape != b.shape:
            rows.append({"variable": v, "max_rel_change": np.inf, "exact": True, "ok": False})
            continue
        rel = fixtures.relative_change(a, b)
        rows.append({"variable": v, "max_rel_change": float(rel.max(initial=0.0)), "exact": v.endswith("_bytes"),
                     "ok": bool(rel.max(initial=0.0) <= (0.0 if v.endswith("_bytes") else TOLERANCE))})
        if "group" in a.dims:  # the published checkpoints' rows: the same bytes on any CPU, so the same numbers
            same = a.sel(group=exact_groups).equals(b.sel(group=exact_groups))
            rows.append({"variable": f"{v} (checkpoints)", "max_rel_change": 0.0 if same else np.inf,
                         "exact": True, "ok": bool(same)})
    return pd.DataFrame(rows).set_index("variable")


def ratio_table(ds: xr.Dataset, threshold: float = 0.3) -> pd.DataFrame:
    """Per group: bytes, and the ratio under every code (ideal and Buddy's effective at ``threshold``) and peer.

    Parameters
    ----------
    ds : xarray.Dataset
        The study (:func:`study`).
    threshold : float
        A threshold of ``THRESHOLDS``.

    Returns
    -------
    pandas.DataFrame
        One row per group (``GROUPS``, then the ``FP8_GROUPS`` it holds): ``MiB``, ``<code> ideal``,
        ``<code> Buddy`` and a column per peer.
    """
    codes = [c for c in ALL_CODES if c in ds.compressor.values]
    t = {f"{c} ideal": ds.ideal_ratio.sel(compressor=c).to_series() for c in codes}
    t |= {f"{c} Buddy": ds.effective_ratio.sel(compressor=c, threshold=threshold).to_series() for c in codes}
    t |= {p: ds.peer_ratio.sel(peer=p).to_series() for p in PEERS}
    out = pd.DataFrame(t).reindex([g for g, *_ in GROUPS] + [g for g, _ in FP8_GROUPS if g in ds.group.values])
    out.insert(0, "MiB", ds.group_bytes.to_series() / 2**20)
    return out


def capacity(ds: xr.Dataset, budget: float = 0.02, context: int = 4096, config: dict[str, float] = LLAMA2_7B,
             credit: bool = paper.HEADLINE["bandwidth_credit"]) -> pd.DataFrame:
    """Concurrent sequences of ``context`` tokens whose bf16 KV cache fits beside a bf16 7B-class model on each GPU.

    On each GPU of :data:`~buddylib.studies.llm_measure.CAPACITY_GPUS`, uncompressed and under Buddy with each code:
    the most aggressive threshold whose decode-step slowdown (measured here on the small model, at the largest kernel
    scale replayed: the nearest to a 7B model's kernels) stays within ``budget``, and the effective ratios of the
    weights (MiniLM's) and KV cache measured at that threshold. Extrapolated to ``config``: its weights and per-token
    cache from its published shape, not measured.

    Parameters
    ----------
    ds : xarray.Dataset
        The study (:func:`study`).
    budget : float
        The slowdown allowed (0.02: 2%).
    context : int
        Tokens per sequence.
    config : dict of str to float
        The model's ``layers``, ``kv_heads``, ``head_dim`` and ``params`` (default :data:`LLAMA2_7B`).
    credit : bool
        The slowdown with HBM bytes saved (True) or without.

    Returns
    -------
    pandas.DataFrame
        Indexed by (gpu, compressor), ``"none"`` first: the threshold, slowdown, ``weights_ratio``, ``kv_ratio``,
        ``sequences`` and ``gain`` over uncompressed; a code with no threshold within ``budget`` has no row.
    """
    from buddylib.timing import gpu

    weights = 2.0 * config["params"]
    per_seq = 2 * config["layers"] * config["kv_heads"] * config["head_dim"] * 2.0 * context
    rows = []
    for g, _ in CAPACITY_GPUS:
        mem = gpu(g).capacity
        base = math.floor((mem - weights) / per_seq)
        rows.append({"gpu": g, "compressor": "none", "threshold": np.nan, "slowdown": 1.0, "weights_ratio": 1.0,
                     "kv_ratio": 1.0, "sequences": base, "gain": 1.0})
        for c in COMPRESSORS:
            slow = ds.decode_slowdown.sel(gpu=g, compressor=c, kernel_scale=max(ds.kernel_scale.values),
                                          bandwidth_credit=credit)
            ok = [float(t) for t in slow.threshold.values if float(slow.sel(threshold=t)) <= 1 + budget]
            if not ok:
                continue
            t = max(ok)
            rw = float(ds.effective_ratio.sel(group=GROUPS[0][0], compressor=c, threshold=t))
            rk = float(ds.effective_ratio.sel(group=GROUPS[2][0], compressor=c, threshold=t))
            n = math.floor((mem - weights / rw) / (per_seq / rk))
            rows.append({"gpu": g, "compressor": c, "threshold": t, "slowdown": float(slow.sel(threshold=t)),
                         "weights_ratio": rw, "kv_ratio": rk, "sequences": n, "gain": n / base if base else np.nan})
    return pd.DataFrame(rows).set_index(["gpu", "compressor"])
