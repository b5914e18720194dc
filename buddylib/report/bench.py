"""Compressor throughput and ratio beside zstd and lz4, on the same bytes in the same run.

Speed is a feature of this suite, so it is measured here (``make bench``), never asserted
in a timed test. Four data kinds stand for what GPU memory holds: post-ReLU activations
(sparse float32), a smooth float64 simulation field, random 32-bit words (the incompressible
worst case), and bf16 weights (an LLM's); fp16 weights are a fifth kind for the 16-bit codes alone. The
16-bit floats' code ``ebo`` runs on those two only, beside ZipNN, the whole-tensor coder made for them.

Every operation is timed twice, after a warm-up call that loads (or compiles) numba's kernels:
on one thread (**per core**: MB/s divided by the one thread used) and on every thread
(**per machine**). Each figure is the median of ``repeat`` (at least 5) timed calls, reported
with the fastest and slowest. zstd level 1 and lz4 run on the same bytes in the same run: per
core, one call on the whole buffer; per machine, one slice per thread on a thread pool (both
release the GIL). Our speeds are given as ratios to theirs, per core and per machine, and the
targets of issues 14 and 42 are checked against those measured numbers.
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np
import pandas as pd
from tqdm import tqdm

from buddylib import compressors, outputs
from buddylib.compressors import abc
from buddylib.compressors.reference import reference_compress
from buddylib.entries import SECTOR_BYTES, as_entries
from buddylib.threads import numba_threads

MiB = 1 << 20
KINDS = ("sparse", "smooth", "random", "bf16")
#: The kinds the 16-bit codes run on (their format: the EBO variant and ZipNN's input format), and every kind.
KINDS_16 = ("bf16", "fp16")
ALL_KINDS = (*KINDS, "fp16")
#: The kinds issue 14's targets are stated for.
TARGET_KINDS = ("sparse", "smooth", "random")
PEERS = ("zstd-1", "lz4")
#: ... and on the 16-bit floats only, the whole-tensor compressor made for them (where it is installed; notebook
#: 10 compares the ratios of more).
PEERS_16 = ("zipnn",)
MIN_REPEAT = 5  # a median of fewer calls says little
#: Our operations, and the peers' operation each is compared with.
OURS = (("bpc32", "size"), ("bpc32", "encode"), ("bpc32", "decode"), ("bpc64", "size"), ("bpc64", "encode"),
        ("bpc64", "decode"), ("bdi", "size"), ("fpc", "size"), ("zvc", "size"))
#: ... and on the 16-bit floats only, the code made for them.
OURS_16 = {k: ((f"ebo-{k}", "size"), (f"ebo-{k}", "encode"), (f"ebo-{k}", "decode")) for k in KINDS_16}
PEER_OPERATION = {"size": "compress", "encode": "compress", "decode": "decompress"}
#: Issue 14's targets: BPC-32's size path at least 3x zstd-1's compression per core on every
#: compressible kind (one that zstd-1 shrinks by more than 1%), and BPC-64 encode and decode at
#: least 300 MB/s per core on every kind.
SPEEDUP_TARGET = 3.0
BPC64_TARGET_MB_S = 300.0
#: Issue 42's: EBO encode and decode at least ZipNN's compress and decompress per core, and EBO's size path at
#: least 3 GB/s per core, on the 16-bit kinds.
EBO_SIZE_TARGET_MB_S = 3000.0
COMPRESSIBLE = 1.01


def make_data(kind: str, nbytes: int, seed: int = 0) -> np.ndarray:
    """``nbytes`` of deterministic data of one kind (see module docstring).

    Parameters
    ----------
    kind : str
        One of ``ALL_KINDS``: ``"sparse"`` (post-ReLU activations, :func:`relu_feature_maps`), ``"smooth"``
        (a smooth 3-D float64 field, as an HPC stencil code holds), ``"random"`` (32-bit words), ``"bf16"`` or
        ``"fp16"`` (weights' bits, :func:`bf16_weights`, :func:`fp16_weights`).
    nbytes : int
        Bytes wanted (rounded down to whole values).
    seed : int
        The random generator's seed.

    Returns
    -------
    numpy.ndarray
        One dimension.

    Raises
    ------
    ValueError
        An unknown ``kind``.

    Examples
    --------
    >>> {kind: str(make_data(kind, 1024).dtype) for kind in ALL_KINDS}
    {'sparse': 'float32', 'smooth': 'float64', 'random': 'uint32', 'bf16': 'uint16', 'fp16': 'uint16'}
    """
    rng = np.random.default_rng(seed)
    if kind == "sparse":
        return relu_feature_maps(nbytes // 4, rng)
    if kind == "smooth":  # a smooth 3-D float64 field, as an HPC stencil code holds
        n = nbytes // 8
        nz = max(1, -(-n // (256 * 256)))
        z = np.linspace(0, 1, nz)[:, None, None]
        y = np.linspace(0, 1, 256)[None, :, None]
        x = np.linspace(0, 1, 256)[None, None, :]
        field = 300.0 + 20.0 * np.sin(2 * np.pi * x) * np.cos(np.pi * y) * np.exp(-z)
        return np.ascontiguousarray(field, dtype=np.float64).reshape(-1)[:n]
    if kind == "random":
        return rng.integers(0, 2**32, nbytes // 4, dtype=np.uint32)
    if kind == "bf16":
        return bf16_weights(nbytes // 2, rng)
    if kind == "fp16":
        return fp16_weights(nbytes // 2, rng)
    raise ValueError(f"unknown data kind {kind!r}; available: {', '.join(ALL_KINDS)}")


def bf16_weights(n: int, rng: np.random.Generator, block: int = 1 << 16) -> np.ndarray:
    """``n`` bf16 values (their bits, uint16) shaped like a network's weights: normal, each ``block`` of values a
    layer with its own scale (log-uniform, 0.005 to 0.1), rounded to bf16 to nearest even as a serving stack
    casts fp32 checkpoints.

    Parameters
    ----------
    n : int
        Values.
    rng : numpy.random.Generator
        The random source.
    block : int
        Values per layer.

    Returns
    -------
    numpy.ndarray
        uint16, ``n`` values.
    """
    scale = np.exp(rng.uniform(np.log(0.005), np.log(0.1), -(-n // block))).astype(np.float32)
    x = rng.standard_normal(n, dtype=np.float32) * np.repeat(scale, block)[:n]
    bits = x.view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # no NaN here: plain RNE


def fp16_weights(n: int, rng: np.random.Generator, block: int = 1 << 16) -> np.ndarray:
    """``n`` fp16 values (their bits, uint16) shaped as :func:`bf16_weights`'s, cast to fp16 (numpy rounds to
    nearest even; the layer scales keep them normal).

    Parameters
    ----------
    n, rng, block
        As :func:`bf16_weights` takes them.

    Returns
    -------
    numpy.ndarray
        uint16, ``n`` values.
    """
    scale = np.exp(rng.uniform(np.log(0.005), np.log(0.1), -(-n // block))).astype(np.float32)
    x = rng.standard_normal(n, dtype=np.float32) * np.repeat(scale, block)[:n]
    return x.astype(np.float16).view(np.uint16)


def relu_feature_maps(n: int, rng: np.random.Generator, side: int = 32, coarse: int = 4) -> np.ndarray:
    """``n`` float32 values shaped like post-ReLU conv activations: 32 x 32 maps.

    A conv layer's pre-activation is spatially smooth (neighbouring pixels see overlapping
    receptive fields), so each map is a coarse random field bilinearly upsampled plus a
    little pixel noise; ReLU then zeroes about half of it in contiguous regions.

    Parameters
    ----------
    n : int
        Values (the last map is cut short).
    rng : numpy.random.Generator
        The random source.
    side : int
        A map's side, in pixels.
    coarse : int
        The side of the coarse random field each map is upsampled from.

    Returns
    -------
    numpy.ndarray
        float32, ``n`` values, map after map.
    """
    n_maps = -(-n // (side * side))
    up = np.clip(1 - np.abs(np.linspace(0, coarse - 1, side)[:, None] - np.arange(coarse)[None, :]), 0, None)
    grid = rng.standard_normal((n_maps, coarse, coarse), dtype=np.float32)
    maps = up.astype(np.float32) @ grid @ up.T.astype(np.float32)
    maps += 0.25 * rng.standard_normal(maps.shape, dtype=np.float32)
    return np.maximum(maps, 0, out=maps).reshape(-1)[:n]


def _times(fn: Callable[[], object], repeat: int) -> tuple[np.ndarray, object]:
    """Seconds of ``repeat`` calls of ``fn`` (warmed up by the caller) and the last result."""
    out, t = None, np.empty(repeat)
    for i in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        t[i] = time.perf_counter() - t0
    return t, out


def run(mib: int = 256, repeat: int = MIN_REPEAT, seed: int = 0, threads: int | None = None,
        progress: bool = True, crossover: bool = True, kinds: tuple[str, ...] = ALL_KINDS) -> pd.DataFrame:
    """Time every compressor and the peers on every data kind; one row per (kind, compressor, operation).

    Every decode and decompress is checked against the input (an ``AssertionError`` if a round trip fails).

    Parameters
    ----------
    mib : int
        MiB of data per kind.
    repeat : int
        Timed calls per figure, raised to at least ``MIN_REPEAT`` (5).
    seed : int
        The data's seed (:func:`make_data`).
    threads : int, optional
        Threads per machine (default: numba's, ``NUMBA_NUM_THREADS``).
    progress : bool
        Show a progress bar.
    crossover : bool
        Also measure :func:`parallel_crossover`: ``df.attrs["crossover"]`` holds its table (as
        ``DataFrame.to_dict()``), which :func:`write` reports.
    kinds : tuple of str
        The data kinds to run (default every one, ``ALL_KINDS``).

    Returns
    -------
    pandas.DataFrame
        Columns ``kind, compressor, operation, bytes, threads, repeat``; per core (one thread)
        ``MB_per_s_per_core`` (median) with ``_min``/``_max``; per machine (``threads`` threads)
        ``MB_per_s`` with ``_min``/``_max`` and ``seconds`` (median); ``ratio`` (per-entry
        compressors: ideal ratio = bytes / (32 B x sectors); peers: bytes / compressed bytes) and
        ``bits_ratio`` (bytes x 8 / sum of code bits); and our speed over each peer's, per core and
        per machine: ``vs_zstd-1_per_core``, ``vs_lz4_per_core``, ``vs_zstd-1_per_machine``,
        ``vs_lz4_per_machine``, and ZipNN's ``vs_zipnn_*`` (size and encode against compress, decode against
        decompress; NaN where a peer did not run). ``df.attrs["load_average_at_start"]``: the 1-minute load
        average when it started.

    Raises
    ------
    ValueError
        An unknown data kind in ``kinds``.
    """
    threads = threads or numba.config.NUMBA_NUM_THREADS
    repeat = max(int(repeat), MIN_REPEAT)
    nbytes = mib * MiB
    load = getattr(os, "getloadavg", lambda: (float("nan"),))()[0]  # other work on the machine skews timings
    peers = tuple((p, o) for p in PEERS for o in ("compress", "decompress"))
    peers_16 = tuple((p, o) for p in peers16_installed() for o in ("compress", "decompress"))
    unknown = sorted(set(kinds) - set(ALL_KINDS))
    if unknown:
        raise ValueError(f"kinds: unknown data kinds {unknown}; available: {', '.join(ALL_KINDS)}")
    steps = [(k, c, o) for k in kinds for c, o in (*(OURS if k in KINDS else ()), *OURS_16.get(k, ()),
                                                       *(peers if k in KINDS else ()),
                                                       *(peers_16 if k in KINDS_16 else ()))]
    rows: list[dict] = []
    bar = tqdm(steps, desc="bench", disable=not progress, unit="step")
    data: dict[str, np.ndarray] = {}
    for kind, compressor, operation in bar:
        bar.set_postfix_str(f"{kind} {compressor} {operation}")
        if kind not in data:
            data.clear()
            data[kind] = make_data(kind, nbytes, seed)
        measure = _measure_peer if compressor in PEERS else _measure_peer16 if compressor in PEERS_16 else \
            _measure_ours
        rows.append(measure(data[kind], kind, compressor, operation, threads, repeat))
    df = _with_ratios(pd.DataFrame(rows))
    df.attrs["load_average_at_start"] = load
    if crossover:
        df.attrs["crossover"] = parallel_crossover(threads=threads).to_dict()  # plain data: pandas compares attrs
    return df


def _row(x: np.ndarray, kind: str, compressor: str, operation: str, threads: int, t_core: np.ndarray,
         t_machine: np.ndarray, ratio: float, bits_ratio: float) -> dict:
    mb = x.nbytes / 1e6
    return {"kind": kind, "compressor": compressor, "operation": operation, "bytes": x.nbytes, "threads": threads,
            "repeat": t_core.size,
            "MB_per_s_per_core": mb / np.median(t_core), "MB_per_s_per_core_min": mb / t_core.max(),
            "MB_per_s_per_core_max": mb / t_core.min(),
            "MB_per_s": mb / np.median(t_machine), "MB_per_s_min": mb / t_machine.max(),
            "MB_per_s_max": mb / t_machine.min(), "seconds": float(np.median(t_machine)),
            "ratio": ratio, "bits_ratio": bits_ratio}


def _measure_ours(x: np.ndarray, kind: str, compressor: str, operation: str, threads: int, repeat: int) -> dict:
    entries = as_entries(x)
    comp = compressors.get(compressor)
    if operation == "size":
        fn: Callable[[], object] = lambda: comp.bits(entries)  # noqa: E731
    elif operation == "encode":
        fn = lambda: comp.encode_entries(entries)  # noqa: E731
    else:
        lengths, payload = comp.encode_entries(entries)
        fn = lambda: comp.decode_entries(lengths, payload)  # noqa: E731
    t = {}
    for n in (1, threads):
        with numba_threads(n):
            out = fn()  # warm-up: loads (or compiles) the kernels
            if n not in t:
                t[n], out = _times(fn, repeat)
    if operation == "size":
        bits = out
    elif operation == "encode":
        bits = out[0]
    else:
        bits = lengths
        if not np.array_equal(out, entries):
            raise AssertionError(f"{compressor} round trip failed on {kind}")
    sectors = compressors.sectors_from_bits(bits, entries)
    ratio = entries.size / (SECTOR_BYTES * max(1, int(sectors.sum(dtype=np.int64))))
    bits_ratio = entries.size * 8 / max(1, int(bits.sum(dtype=np.int64)))
    return _row(x, kind, compressor, operation, threads, t[1], t[threads], ratio, bits_ratio)


def _measure_peer(x: np.ndarray, kind: str, compressor: str, operation: str, threads: int, repeat: int) -> dict:
    import lz4.frame
    import zstandard

    method = "zstd" if compressor.startswith("zstd") else "lz4"
    comp = reference_compress(x, method, 1)
    ratio = x.nbytes / len(comp)
    slices = np.array_split(x.view(np.uint8), threads)
    if operation == "compress":
        whole: Callable[[], object] = lambda: reference_compress(x, method, 1)  # noqa: E731
        part: Callable[[np.ndarray], object] = lambda s: reference_compress(s, method, 1)  # noqa: E731
        items: list = slices
    else:
        def dec(b: bytes) -> bytes:  # a (de)compressor object per call: they are not thread-safe
            return zstandard.ZstdDecompressor().decompress(b) if method == "zstd" else lz4.frame.decompress(b)

        whole, part = (lambda: dec(comp)), dec
        items = [reference_compress(s, method, 1) for s in slices]
    whole()
    t_core, out = _times(whole, repeat)
    if operation == "decompress" and bytes(out) != x.tobytes():  # type: ignore[arg-type]
        raise AssertionError(f"{method} round trip failed on {kind}")
    t_machine = t_core
    if threads > 1:
        with ThreadPoolExecutor(threads) as pool:
            sliced = lambda: list(pool.map(part, items))  # noqa: E731
            sliced()
            t_machine, _ = _times(sliced, repeat)
    return _row(x, kind, compressor, operation, threads, t_core, t_machine, ratio, ratio)


def peers16_installed() -> tuple[str, ...]:
    """The peers of :data:`PEERS_16` installed here (ZipNN is a C extension built at install)."""
    from buddylib.compressors import peers

    return PEERS_16 if peers.zipnn_available() else ()


def _measure_peer16(x: np.ndarray, kind: str, compressor: str, operation: str, threads: int, repeat: int) -> dict:
    """ZipNN on the 16-bit floats' bits (``kind`` is their format): per core with one thread, per machine with
    its own ``threads`` threads."""
    from buddylib.compressors import peers

    blob = peers.zipnn_compress(x, kind)
    ratio = x.nbytes / len(blob)
    t = {}
    for n in dict.fromkeys((1, threads)):
        if operation == "compress":
            fn: Callable[[], object] = lambda n=n: peers.zipnn_compress(x, kind, n)  # noqa: E731
        else:
            fn = lambda n=n: peers.zipnn_decompress(blob, kind, n)  # noqa: E731
        fn()
        t[n], out = _times(fn, repeat)
        if operation == "decompress" and np.asarray(out).tobytes() != x.tobytes():
            raise AssertionError(f"zipnn round trip failed on {kind}")
    return _row(x, kind, compressor, operation, threads, t[1], t[threads], ratio, ratio)


def _with_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """Add our speed over each peer's (per core, per machine), from rows of the same run: zstd-1's and lz4's,
    and on the 16-bit kinds ZipNN's (NaN where a peer did not run)."""
    df = df.copy()
    all_peers = (*PEERS, *PEERS_16)
    peers = df[df.compressor.isin(all_peers)].set_index(["kind", "compressor", "operation"])
    for peer in all_peers:
        for scope, col in (("per_core", "MB_per_s_per_core"), ("per_machine", "MB_per_s")):
            theirs = [peers[col].get((k, peer, PEER_OPERATION.get(o, "")), np.nan) if c not in all_peers else np.nan
                      for k, c, o in zip(df.kind, df.compressor, df.operation, strict=True)]
            df[f"vs_{peer}_{scope}"] = df[col] / np.array(theirs, dtype=float)
    return df


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Wide table per (compressor, operation) and kind: MB/s per core and per machine (medians),
    our speed over zstd-1's and lz4's (and ZipNN's) per core, and the compression ratio.

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`run`'s rows.

    Returns
    -------
    pandas.DataFrame
        Rows (compressor, operation); columns (quantity, kind), rounded.
    """
    def wide(col: str, digits: int) -> pd.DataFrame:
        return df.pivot_table(index=["compressor", "operation"], columns="kind", values=col,
                              sort=False).reindex(columns=list(ALL_KINDS)).round(digits)

    parts = {"MB/s per core": wide("MB_per_s_per_core", 0), "MB/s per machine": wide("MB_per_s", 0),
             "x zstd-1 per core": wide("vs_zstd-1_per_core", 2), "x lz4 per core": wide("vs_lz4_per_core", 2),
             "x ZipNN per core": wide("vs_zipnn_per_core", 2),
             "ratio": wide("ratio", 2)}
    return pd.concat(parts, axis=1)


def spread(df: pd.DataFrame) -> pd.DataFrame:
    """MB/s per core and per machine as 'median [min-max]' text, per (compressor, operation) and kind.

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`run`'s rows.

    Returns
    -------
    pandas.DataFrame
        Rows (compressor, operation); columns (``"per core"`` or ``"per machine"``, kind).
    """
    d = df.copy()
    for col, label in (("MB_per_s_per_core", "per core"), ("MB_per_s", "per machine")):
        d[label] = [f"{m:.0f} [{lo:.0f}-{hi:.0f}]" for m, lo, hi in
                    zip(d[col], d[f"{col}_min"], d[f"{col}_max"], strict=True)]
    wide = d.pivot_table(index=["compressor", "operation"], columns="kind", values=["per core", "per machine"],
                         aggfunc="first", sort=False)
    return wide.reindex(columns=pd.MultiIndex.from_product([["per core", "per machine"], list(ALL_KINDS)]))


def scaling(df: pd.DataFrame) -> pd.Series:
    """Speed-up of the BPC-32 size path with all threads over one thread, per data kind.

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`run`'s rows.

    Returns
    -------
    pandas.Series
        Per kind of ``KINDS`` (NaN where it did not run).
    """
    s = df[(df.compressor == "bpc32") & (df.operation == "size")].set_index("kind")
    return (s["MB_per_s"] / s["MB_per_s_per_core"]).rename("bpc32 size speed-up").reindex(list(KINDS))


def targets(df: pd.DataFrame) -> pd.DataFrame:
    """Issue 14's targets (on :data:`TARGET_KINDS`) and issue 42's (on :data:`KINDS_16`; against ZipNN only
    where it is installed) checked against the measured medians: one row per
    (target, kind) with the measured value, the target, whether it is met and the margin (measured / target).

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`run`'s rows; a target is checked only where its rows are there (BPC-32's speed-up only on a kind
        zstd-1 shrinks by more than 1%).

    Returns
    -------
    pandas.DataFrame
        Columns ``target``, ``kind``, ``measured``, ``target_value``, ``unit``, ``met``, ``margin``.
    """
    rows = []
    zstd = df[(df.compressor == "zstd-1") & (df.operation == "compress")].set_index("kind")
    bpc32 = df[(df.compressor == "bpc32") & (df.operation == "size")].set_index("kind")
    for kind in TARGET_KINDS:
        if kind in zstd.index and zstd.loc[kind, "ratio"] > COMPRESSIBLE and kind in bpc32.index:
            rows.append({"target": f"BPC-32 size >= {SPEEDUP_TARGET:g}x zstd-1 compress, per core", "kind": kind,
                         "measured": bpc32.loc[kind, "vs_zstd-1_per_core"], "target_value": SPEEDUP_TARGET,
                         "unit": "x zstd-1"})
    for op in ("encode", "decode"):
        sel = df[(df.compressor == "bpc64") & (df.operation == op)].set_index("kind")
        for kind in TARGET_KINDS:
            if kind in sel.index:
                rows.append({"target": f"BPC-64 {op} >= {BPC64_TARGET_MB_S:g} MB/s per core", "kind": kind,
                             "measured": sel.loc[kind, "MB_per_s_per_core"], "target_value": BPC64_TARGET_MB_S,
                             "unit": "MB/s"})
    for kind in KINDS_16:
        ebo = df[(df.compressor == f"ebo-{kind}") & (df.kind == kind)].set_index("operation")
        if "size" in ebo.index:
            rows.append({"target": f"EBO size >= {EBO_SIZE_TARGET_MB_S:g} MB/s per core", "kind": kind,
                         "measured": ebo.loc["size", "MB_per_s_per_core"], "target_value": EBO_SIZE_TARGET_MB_S,
                         "unit": "MB/s"})
        for op, peer_op in (("encode", "compress"), ("decode", "decompress")):
            if op in ebo.index and np.isfinite(ebo.loc[op].get("vs_zipnn_per_core", np.nan)):
                rows.append({"target": f"EBO {op} >= ZipNN {peer_op}, per core", "kind": kind,
                             "measured": ebo.loc[op, "vs_zipnn_per_core"], "target_value": 1.0, "unit": "x ZipNN"})
    t = pd.DataFrame(rows, columns=["target", "kind", "measured", "target_value", "unit"])
    t["met"] = t["measured"] >= t["target_value"]
    t["margin"] = t["measured"] / t["target_value"]
    return t


@contextlib.contextmanager
def _parallel_from(n_entries: int) -> Iterator[None]:
    before = abc.PARALLEL_MIN_ENTRIES
    abc.PARALLEL_MIN_ENTRIES = n_entries
    try:
        yield
    finally:
        abc.PARALLEL_MIN_ENTRIES = before


def parallel_crossover(sizes: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192), threads: int | None = None,
                       calls: int = 41, seed: int = 0) -> pd.DataFrame:
    """How much faster each compressor's parallel path runs than its serial one, by input size.

    Median over ``calls`` of the ratio serial time / parallel time, the two timed back to back
    (so a burst of load hits both), on smooth data: above 1 the parallel launch pays. This is how
    ``abc.PARALLEL_MIN_ENTRIES`` was chosen.

    Parameters
    ----------
    sizes : tuple of int
        Input sizes, in entries.
    threads : int, optional
        Threads of the parallel path (default: numba's, ``NUMBA_NUM_THREADS``).
    calls : int
        Timed pairs per size (the first, a warm-up, is dropped).
    seed : int
        The data's seed (:func:`make_data`).

    Returns
    -------
    pandas.DataFrame
        Rows: operations (each compressor's size path, BPC's encode and decode, sectors from bits); columns:
        entries (``sizes``).
    """
    threads = threads or numba.config.NUMBA_NUM_THREADS
    x = as_entries(make_data("smooth", max(sizes) * 128, seed))
    ops: dict[str, Callable[[np.ndarray], object]] = {
        name: compressors.get(name).bits for name in ("bpc32", "bpc64", "bdi", "fpc", "zvc")}
    for w in (32, 64):
        bpc = compressors.get(f"bpc{w}")
        ops[f"bpc{w} encode"] = bpc.encode_entries
        streams = {n: bpc.encode_entries(x[:n]) for n in sizes}
        ops[f"bpc{w} decode"] = lambda e, bpc=bpc, streams=streams: bpc.decode_entries(*streams[e.shape[0]])
    bits = compressors.get("bpc32").bits(x)
    ops["sectors"] = lambda e: compressors.sectors_from_bits(bits[: e.shape[0]], e)
    table = pd.DataFrame(index=list(ops), columns=list(sizes), dtype=float)
    with numba_threads(threads):
        for name, fn in ops.items():
            for n in sizes:
                e = x[:n]
                r = np.empty(calls)
                for i in range(calls):
                    with _parallel_from(1 << 62):
                        t0 = time.perf_counter()
                        fn(e)
                        t1 = time.perf_counter()
                    with _parallel_from(0):
                        fn(e)
                        t2 = time.perf_counter()
                    r[i] = (t1 - t0) / (t2 - t1)
                table.loc[name, n] = np.median(r[1:])  # the first call warms up
    table.columns.name = "entries"
    return table


def environment() -> dict[str, str]:
    """What the numbers were measured on."""
    load = getattr(os, "getloadavg", lambda: (float("nan"),) * 3)()
    return {
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": str(os.cpu_count()),
        "numba_threads": str(numba.config.NUMBA_NUM_THREADS),
        "load average (1 min) when written": f"{load[0]:.2f}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
    }


def _target_lines(t: pd.DataFrame) -> list[str]:
    lines = ["| target | kind | measured | met |", "|---|---|---|---|"]
    for r in t.itertuples(index=False):
        value = f"{r.measured:.2f}x" if r.unit.startswith("x") else f"{r.measured:.0f} MB/s"
        verdict = f"yes, by {r.margin:.2f}x" if r.met else f"**no**, {r.margin:.2f}x of the target"
        lines.append(f"| {r.target} | {r.kind} | {value} | {verdict} |")
    met = int(t["met"].sum())
    lines += ["", f"{met} of {len(t)} target checks met (computed from the medians above)."]
    return lines


def write(df: pd.DataFrame, out: Path) -> dict[str, Path]:
    """Save :func:`run`'s rows ``df`` (CSV), the summary (CSV and Markdown, with the targets, the spread and the
    crossover table) and a figure (:func:`plot`) under ``out``; return their paths by name (``rows``,
    ``summary``, ``markdown``, ``png``, ``svg``)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"rows": out / "bench.csv", "summary": out / "summary.csv", "markdown": out / "bench.md"}
    df.to_csv(paths["rows"], index=False)
    table = summary(df)
    table.to_csv(paths["summary"])
    t = targets(df)
    env = environment()
    threads = int(df["threads"].iloc[0])
    lines = [
        "# Compressor benchmark",
        "",
        f"{df['bytes'].iloc[0] // MiB} MiB per data kind; per-entry compressors (128-byte entries) beside "
        "whole-buffer zstd level 1 and lz4 on the same bytes in the same run. Every figure is the median of "
        f"{int(df['repeat'].min())} timed calls after a warm-up. Per core: one thread (input MB/s divided by the "
        f"one thread used; zstd and lz4: one call on the whole buffer). Per machine: {threads} threads (zstd and "
        f"lz4: {threads} slices on a thread pool). 'x zstd-1' and 'x lz4': our MB/s over theirs (size and encode "
        "against compress, decode against decompress). Ratio: per-entry compressors give the ideal ratio "
        "bytes / (32 B x sectors); zstd and lz4 bytes / compressed bytes.",
        "",
        "**Targets (issues 14 and 42)**",
        "",
        *_target_lines(t),
        "",
        "**Summary (medians)**",
        "",
        "```",
        table.to_string(),
        "```",
        "",
        "**MB/s, median [slowest-fastest call]**",
        "",
        "```",
        spread(df).to_string(),
        "```",
        "",
        "**Our speed over the peers' per machine (all threads each)**",
        "",
        "```",
        df[~df.compressor.isin((*PEERS, *PEERS_16))].pivot_table(
            index=["compressor", "operation"], columns="kind", values=[
                c for c in ("vs_zstd-1_per_machine", "vs_lz4_per_machine", "vs_zipnn_per_machine") if c in df],
            sort=False).round(2).to_string(),
        "```",
        "",
        "BPC-32 size path, all threads over one thread:",
        "",
        "```",
        scaling(df).round(2).to_string(),
        "```",
        "",
    ]
    if "crossover" in df.attrs:
        cross = pd.DataFrame(df.attrs["crossover"])
        cross.columns.name = "entries"
        gains = cross.columns[(cross >= 1).all(axis=0).to_numpy()]
        first = next((n for n in cross.columns if all(m in gains for m in cross.columns if m >= n)), None)
        lines += [
            f"**Serial or parallel kernels** (speed-up of the parallel path over the serial one, {threads} threads, "
            "median of back-to-back pairs, by input size in entries; above 1 the parallel launch pays):",
            "",
            "```",
            cross.round(2).to_string(),
            "```",
            "",
            f"Inputs below `abc.PARALLEL_MIN_ENTRIES` = {abc.PARALLEL_MIN_ENTRIES} entries run the serial kernels; "
            + (f"here every parallel kernel pays from {first} entries on." if first is not None else
               "here no size measured made every parallel kernel pay."),
            "",
        ]
    if "load_average_at_start" in df.attrs:
        env = {"load average (1 min) at start": f"{df.attrs['load_average_at_start']:.2f}", **env}
    lines += ["Measured on: " + ", ".join(f"{k} {v}" for k, v in env.items()), ""]
    paths["markdown"].write_text("\n".join(lines))
    paths.update(plot(df, out))
    return paths


def plot(df: pd.DataFrame, out: Path) -> dict[str, Path]:
    """Throughput per kind, ours beside zstd-1 and lz4: per core (bars, slowest-fastest call as error
    bars) and per machine (diamonds), on a log scale, with the issue's targets drawn in.

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`run`'s rows.
    out : Path
        The folder to save the figure in, as ``bench.png`` and ``bench.svg``.

    Returns
    -------
    dict of str to Path
        The figure's files, by ``"png"`` and ``"svg"``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = df.copy()
    d["what"] = d["compressor"] + " " + d["operation"]
    order = list(dict.fromkeys(d["what"]))
    threads = int(d["threads"].iloc[0])
    kinds = [k for k in ALL_KINDS if k in set(d.kind)]
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.2 * len(kinds), 0.42 * len(order) + 2.2), sharey=True,
                             constrained_layout=True)
    for ax, kind in zip(np.atleast_1d(axes), kinds, strict=True):
        k = d[d.kind == kind].set_index("what").reindex(order)
        y = np.arange(len(order))
        peer = k["compressor"].isin((*PEERS, *PEERS_16)).to_numpy()
        med, lo, hi = (k[c].to_numpy() for c in ("MB_per_s_per_core", "MB_per_s_per_core_min",
                                                   "MB_per_s_per_core_max"))
        ax.barh(y, med, color=np.where(peer, "#c44e52", "#4c72b0"), height=0.7,
                xerr=np.vstack([med - lo, hi - med]), error_kw={"elinewidth": 1, "capsize": 2})
        ax.plot(k["MB_per_s"], y, "D", color="black", ms=4, label=f"per machine ({threads} threads)")
        zstd = k.loc["zstd-1 compress", "MB_per_s_per_core"] if "zstd-1 compress" in k.index else np.nan
        ratio = k.loc["zstd-1 compress", "ratio"] if "zstd-1 compress" in k.index else np.nan
        if np.isfinite(zstd) and ratio > COMPRESSIBLE and kind in TARGET_KINDS:
            ax.axvline(SPEEDUP_TARGET * zstd, color="#4c72b0", ls="--", lw=1,
                       label=f"target: BPC-32 size, {SPEEDUP_TARGET:g}x zstd-1 per core")
        if kind in TARGET_KINDS:
            ax.axvline(BPC64_TARGET_MB_S, color="grey", ls=":", lw=1,
                       label=f"target: BPC-64 encode/decode, {BPC64_TARGET_MB_S:g} MB/s per core")
        if kind in KINDS_16:
            ax.axvline(EBO_SIZE_TARGET_MB_S, color="#55a868", ls="--", lw=1,
                       label=f"target: EBO size, {EBO_SIZE_TARGET_MB_S:g} MB/s per core")
        ax.set_xlim(left=min(100.0, 0.5 * float(np.nanmin(lo))))
        ax.set(xscale="log", title=f"{kind} data" + (f" (zstd-1 ratio {ratio:.2f})" if np.isfinite(ratio) else ""),
               xlabel="throughput (MB/s of input, log scale)")
        ax.grid(axis="x", which="both", alpha=0.3)
    first = np.atleast_1d(axes)[0]
    from matplotlib.patches import Patch

    handles = [Patch(color="#4c72b0", label="ours, per core"),
               Patch(color="#c44e52", label="zstd-1 / lz4 / ZipNN, per core")]
    for ax in np.atleast_1d(axes):  # each target's line once
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in [x.get_label() for x in handles]:
                handles.append(h)
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    first.set_yticks(np.arange(len(order)), order)
    first.invert_yaxis()
    fig.suptitle(f"Compressor throughput per core (bars: median of {int(d['repeat'].min())} calls on one thread, "
                 "whiskers slowest-fastest; blue ours, red the peers) and per machine (diamonds)", fontsize=10)
    paths = dict(zip(("png", "svg"), outputs.save_figure(fig, out, "bench"), strict=True))
    plt.close(fig)
    return paths


def write_mixed(path: Path, nbytes: int, seed: int = 0) -> Path:
    """A file of ``nbytes`` holding one tensor per data kind (.safetensors or .npy).

    Parameters
    ----------
    path : Path
        The file: a ``.safetensors`` suffix writes one tensor per kind of ``KINDS``, named after it; any
        other writes one ``.npy`` array of bytes, the kinds one after another.
    nbytes : int
        Data bytes in all, shared evenly by the kinds (each share rounded down to a multiple of 128).
    seed : int
        The data's seed (:func:`make_data`).

    Returns
    -------
    Path
        ``path``.
    """
    per = nbytes // len(KINDS) // 128 * 128
    if path.suffix == ".safetensors":
        from safetensors.numpy import save_file

        save_file({kind: make_data(kind, per, seed) for kind in KINDS}, str(path))
        return path
    from numpy.lib.format import open_memmap

    out = open_memmap(path, mode="w+", dtype=np.uint8, shape=(per * len(KINDS),))
    for i, kind in enumerate(KINDS):
        out[i * per:(i + 1) * per] = make_data(kind, per, seed).view(np.uint8)
    out.flush()
    del out
    return path


def run_analyze(workdir: Path, gib: float = 1.0) -> pd.DataFrame:
    """Wall time of ``buddy analyze`` (a fresh process, all five compressors) on a file.

    A ``.safetensors`` and a ``.npy`` file (:func:`write_mixed`), each timed after an untimed call that warms the
    page cache and numba's cache, then deleted.

    Parameters
    ----------
    workdir : Path
        Where the files are written.
    gib : float
        GiB per file.

    Returns
    -------
    pandas.DataFrame
        One row per file: ``what``, ``bytes``, ``workers``, ``seconds``.
    """
    import subprocess
    import sys

    rows = []
    for suffix in (".safetensors", ".npy"):
        path = write_mixed(workdir / f"analyze{suffix}", int(gib * (1 << 30)))
        cmd = [sys.executable, "-m", "buddylib.cli", "analyze", str(path), "--json"]
        subprocess.run(cmd, check=True, capture_output=True)  # warm the page cache and numba's cache
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        rows.append({"what": f"buddy analyze {suffix} (5 compressors)", "bytes": path.stat().st_size,
                     "workers": 1, "seconds": time.perf_counter() - t})
        path.unlink()
    return pd.DataFrame(rows)


def run_dask(workdir: Path, gib: float = 2.0, workers: tuple[int, ...] = (1, 2)) -> pd.DataFrame:
    """analyze() on a file through dask LocalClusters of 1 and 2 single-threaded workers.

    :func:`~buddylib.analysis.analyze` of a ``.npy`` file (:func:`write_mixed`, deleted after), timed after each
    worker loaded numba's cache; the results must be the same on every cluster (an ``AssertionError`` if not).

    Parameters
    ----------
    workdir : Path
        Where the file is written.
    gib : float
        The file's GiB.
    workers : tuple of int
        The cluster sizes, in order.

    Returns
    -------
    pandas.DataFrame
        One row per cluster size: ``what``, ``bytes``, ``workers``, ``seconds``, and ``speedup`` over the first.
    """
    from distributed import Client, LocalCluster

    from buddylib.analysis import analyze
    from buddylib.userdata import readers

    path = write_mixed(workdir / "dask.npy", int(gib * (1 << 30)))
    allocations = readers.read(path)
    rows, results = [], []
    for n in workers:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            analyze({"warm-up": np.arange(1 << 16)}, client=client)  # load numba's cache in each worker
            t = time.perf_counter()
            results.append(analyze(allocations, client=client, progress=False))
            rows.append({"what": "analyze on dask (5 compressors)", "bytes": path.stat().st_size, "workers": n,
                         "seconds": time.perf_counter() - t})
    path.unlink()
    for r in results[1:]:
        if not r.identical(results[0]):
            raise AssertionError("dask results differ between cluster sizes")
    df = pd.DataFrame(rows)
    df["speedup"] = df["seconds"].iloc[0] / df["seconds"]
    return df


def run_cache_sim(n: int = 10**8) -> pd.DataFrame:
    """Throughput of the metadata-cache simulator (random and streaming accesses, 64 KiB 8-way).

    Parameters
    ----------
    n : int
        Accesses per pattern.

    Returns
    -------
    pandas.DataFrame
        One row per pattern: ``what``, ``accesses``, ``seconds``, ``hit_rate``.
    """
    from buddylib.timing.caches import set_associative_hits

    rng = np.random.default_rng(0)
    rows = []
    for pattern, lines in (("random", rng.integers(0, 1 << 22, n)), ("stream", np.arange(n) // 64)):
        set_associative_hits(lines[:1000], 64 << 10, 32, 8)
        t = time.perf_counter()
        hits = set_associative_hits(lines, 64 << 10, 32, 8)
        sec = time.perf_counter() - t
        rows.append({"what": f"metadata cache simulation, {pattern}", "accesses": n, "seconds": sec,
                     "hit_rate": hits / n})
    return pd.DataFrame(rows)


#: Issue 22's scale-out goal: make reproduce's generation phase at least this much faster on two
#: single-threaded workers than on one.
SCALEOUT_GOAL = 1.8


def run_scaleout(workdir: Path, scale: str | float = "quick", workers: tuple[int, ...] = (1, 2),
                 repeat: int = 2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """make reproduce's generation phase on local clusters of 1 and 2 single-threaded workers.

    The phase's tasks for every HPC workload (its run and its timing-model sweep: 15 tasks of a few
    seconds each at quick scale) through :func:`buddylib.report.pipeline.run_all` to the cluster's address, each time
    into a fresh data folder, after an untimed pass on the largest cluster that fills numba's cache
    on disk; cluster sizes alternate ``repeat`` times, so a burst of other load hits both. The
    runs' digests must be the same on every cluster (an ``AssertionError`` if not). Task seconds, and so ``busy``
    and ``idle`` below, come from the scheduler's task stream.

    Parameters
    ----------
    workdir : Path
        Where the data folders are made.
    scale : str or float
        The runs' scale.
    workers : tuple of int
        The cluster sizes.
    repeat : int
        Timed runs per cluster size (at least one).

    Returns
    -------
    runs : pandas.DataFrame
        One row per run: ``seconds``, the wall seconds from submitting to the last result; ``busy``, the seconds
        the workers computed; ``cpu``, the CPU seconds their processes used meanwhile (below ``busy`` when other
        work on the machine took the cores); ``idle``, workers x wall - busy, of which ``idle_at_end`` after a
        worker's last task; ``longest_task``; ``load_1min``; ``speedup`` over the smallest cluster (medians) and
        the ``goal`` (:data:`SCALEOUT_GOAL`, on two workers).
    tasks : pandas.DataFrame
        One row per task and run: its ``task``, ``worker``, ``start`` after submitting, ``seconds``.
    """
    import json

    from distributed import Client

    from buddylib import workloads
    from buddylib.report import pipeline

    tasks = pipeline.generation_tasks(scale, workloads.names("hpc"))
    with pipeline.local_cluster(max(workers)) as cluster:
        pipeline.run_all(tasks, workdir / "warm-up", cluster.scheduler_address, desc="scale-out warm-up")
    runs, per_task, digests = [], [], {}
    for i in range(max(1, repeat)):
        for n in workers:
            data = workdir / f"scaleout-{n}-{i}"
            load = getattr(os, "getloadavg", lambda: (float("nan"),))()[0]  # other work skews both sizes
            with pipeline.local_cluster(n) as cluster, Client(cluster) as client:
                client.get_task_stream()  # starts the scheduler's record of task start and stop times
                cpu0 = client.run(_cpu_seconds)
                t0 = time.time()
                pipeline.run_all(tasks, data, cluster.scheduler_address, desc=f"scale-out, {n} worker(s)")
                wall = time.time() - t0
                stream = client.get_task_stream(start=t0)
                cpu = sum(client.run(_cpu_seconds)[w] - c for w, c in cpu0.items())
            digests[(n, i)] = {p.name: json.loads(p.read_text())["digest"] for p in data.glob("*.profile.json")}
            done = [{"workers": n, "repeat": i, "task": str(r["key"]).rsplit("-", 1)[0],
                     "worker": r["worker"], "start": s["start"] - t0, "seconds": s["stop"] - s["start"]}
                    for r in stream for s in r["startstops"] if s["action"] == "compute"]
            per_task += done
            ends = pd.DataFrame(done).assign(stop=lambda d: d.start + d.seconds).groupby("worker").stop.max()
            busy = sum(d["seconds"] for d in done)
            runs.append({"workers": n, "repeat": i, "tasks": len(tasks), "scale": str(scale), "load_1min": load,
                         "seconds": wall,
                         "busy": busy, "cpu": cpu, "idle": n * wall - busy, "idle_at_end": float((wall - ends).sum()),
                         "longest_task": max(d["seconds"] for d in done)})
    if any(d != digests[(workers[0], 0)] for d in digests.values()):
        raise AssertionError("generation results differ between cluster sizes")
    df = pd.DataFrame(runs)
    one = df.loc[df.workers == min(workers), "seconds"].median()
    df["speedup"] = one / df.groupby("workers")["seconds"].transform("median")
    df["goal"] = np.where(df.workers == 2, SCALEOUT_GOAL, np.nan)
    return df, pd.DataFrame(per_task)


def _cpu_seconds() -> float:
    """CPU seconds (user and system) this process has used: asked of each worker."""
    t = os.times()
    return t.user + t.system


def write_scaleout(runs: pd.DataFrame, tasks: pd.DataFrame, out: Path) -> dict[str, Path]:
    """:func:`run_scaleout`'s runs and tasks as tidy CSV, and a Markdown page: the speed-up beside the goal,
    and where the rest of an ideal 2x went (the workers computing longer than one worker did, workers idle).

    Parameters
    ----------
    runs, tasks : pandas.DataFrame
        :func:`run_scaleout`'s two tables.
    out : Path
        The folder to write into.

    Returns
    -------
    dict of str to Path
        ``scaleout`` and ``scaleout_tasks`` (CSV), ``scaleout_markdown`` (``scaleout.md``).
    """
    out.mkdir(parents=True, exist_ok=True)
    paths = {"scaleout": out / "scaleout.csv", "scaleout_tasks": out / "scaleout_tasks.csv",
             "scaleout_markdown": out / "scaleout.md"}
    runs.to_csv(paths["scaleout"], index=False)
    tasks.to_csv(paths["scaleout_tasks"], index=False)
    med = runs.groupby("workers")[["seconds", "busy", "cpu", "idle", "idle_at_end", "longest_task"]].median()
    lines = ["# make reproduce's generation phase on 1 and 2 dask workers", "",
             f"{int(runs['tasks'].iloc[0])} tasks (a run and its timing-model sweep per HPC proxy, "
             f"{runs['scale'].iloc[0]} scale) through `pipeline.run_all` on a local dask cluster of single-threaded "
             "worker processes (numba and BLAS on one thread each), each time into a fresh data folder, numba's "
             f"cache on disk warm; cluster sizes alternate, {runs['repeat'].nunique()} run(s) each, medians shown; "
             "the same run digests on every cluster. Task seconds and idle time from the scheduler's task stream.", "",
             "| workers | wall s (each run) | task seconds (CPU seconds) | idle worker s (after a worker's last task) "
             "| longest task s | speed-up | goal |", "|---|---|---|---|---|---|---|"]
    for n, r in med.iterrows():
        each = ", ".join(f"{x:.1f}" for x in runs.loc[runs.workers == n, "seconds"])
        speedup = med.loc[min(med.index), "seconds"] / r.seconds
        goal = (f">= {SCALEOUT_GOAL:g}x: " + ("met" if speedup >= SCALEOUT_GOAL else "**not met**")) if n == 2 else ""
        lines.append(f"| {n} | {r.seconds:.1f} ({each}) | {r.busy:.1f} ({r.cpu:.1f}) | {r.idle:.1f} "
                     f"({r.idle_at_end:.1f}) | {r.longest_task:.1f} | {speedup:.2f}x | {goal} |")
    if {1, 2} <= set(med.index):
        one, two = med.loc[1], med.loc[2]
        use = [r.busy / (n * r.seconds) for n, r in ((1, one), (2, two))]
        lines += ["", f"Speed-up from 1 to 2 workers: **{one.seconds / two.seconds:.2f}x** (goal >= {SCALEOUT_GOAL:g}x)"
                  f" = 2 x {one.busy / two.busy:.3f} (the task seconds of one worker over those of two: each worker "
                  "process imports the suite and loads numba's cache itself, and two share the memory bandwidth) x "
                  f"{use[1] / use[0]:.3f} (the workers' busy share of the wall time, {use[1]:.0%} on two, {use[0]:.0%} "
                  "on one: scheduling, and a worker idle after its last task while the other finishes). The workers "
                  f"were on a CPU for {one.cpu / one.busy:.0%} of their task seconds on one, {two.cpu / two.busy:.0%} "
                  "on two (the rest, waiting for a core: other work on the machine)."]
    lines += ["", f"Load average (1 min) at the runs' start: {', '.join(f'{x:.2f}' for x in runs['load_1min'])} "
              f"on {os.cpu_count()} CPUs (other work on the machine slows both sizes).", ""]
    paths["scaleout_markdown"].write_text("\n".join(lines))
    return paths
