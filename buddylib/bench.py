"""Compressor throughput and ratio beside zstd and lz4, on the same bytes in the same run.

Speed is a feature of this suite, so it is measured here (``make bench``), never asserted
in a timed test. Three data kinds stand for what GPU memory holds: post-ReLU activations
(sparse float32), a smooth float64 simulation field, and random 32-bit words (the
incompressible worst case). Every number is the best of ``repeat`` timed calls after a
warm-up that triggers (cached) numba compilation.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np
import pandas as pd
from tqdm import tqdm

from buddylib import compressors, report
from buddylib.compressors.reference import reference_compress
from buddylib.entries import SECTOR_BYTES, as_entries

MiB = 1 << 20
KINDS = ("sparse", "smooth", "random")


def make_data(kind: str, nbytes: int, seed: int = 0) -> np.ndarray:
    """``nbytes`` of deterministic data of one kind (see module docstring)."""
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
    raise ValueError(f"unknown data kind {kind!r}; available: {', '.join(KINDS)}")


def relu_feature_maps(n: int, rng: np.random.Generator, side: int = 32, coarse: int = 4) -> np.ndarray:
    """``n`` float32 values shaped like post-ReLU conv activations: 32 x 32 maps.

    A conv layer's pre-activation is spatially smooth (neighbouring pixels see overlapping
    receptive fields), so each map is a coarse random field bilinearly upsampled plus a
    little pixel noise; ReLU then zeroes about half of it in contiguous regions.
    """
    n_maps = -(-n // (side * side))
    up = np.clip(1 - np.abs(np.linspace(0, coarse - 1, side)[:, None] - np.arange(coarse)[None, :]), 0, None)
    grid = rng.standard_normal((n_maps, coarse, coarse), dtype=np.float32)
    maps = up.astype(np.float32) @ grid @ up.T.astype(np.float32)
    maps += 0.25 * rng.standard_normal(maps.shape, dtype=np.float32)
    return np.maximum(maps, 0, out=maps).reshape(-1)[:n]


def _best(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def run(mib: int = 256, repeat: int = 3, seed: int = 0, threads: int | None = None,
        progress: bool = True) -> pd.DataFrame:
    """Time every compressor on every data kind; one row per (kind, compressor, operation).

    Columns: ``kind, compressor, operation, threads, seconds, MB_per_s, MB_per_s_per_core,
    ratio`` (per-entry compressors: ideal ratio = bytes / (32 B x sectors); references:
    bytes / compressed bytes), plus ``bits_ratio`` (bytes x 8 / sum of code bits).
    """
    threads = threads or numba.config.NUMBA_NUM_THREADS
    nbytes = mib * MiB
    rows: list[dict] = []
    steps = [(k, s) for k in KINDS for s in _steps()]
    bar = tqdm(steps, desc="bench", disable=not progress, unit="step")
    data: dict[str, np.ndarray] = {}
    for kind, (compressor, operation) in bar:
        bar.set_postfix_str(f"{kind} {compressor} {operation}")
        if kind not in data:
            data.clear()
            data[kind] = make_data(kind, nbytes, seed)
        x = data[kind]
        rows.extend(_measure(x, kind, compressor, operation, threads, repeat))
    numba.set_num_threads(threads)
    df = pd.DataFrame(rows)
    df["MB_per_s"] = nbytes / df["seconds"] / 1e6
    df["MB_per_s_per_core"] = df["MB_per_s"] / df["threads"]
    return df


def _steps() -> list[tuple[str, str]]:
    steps = [("bpc32", "size"), ("bpc32", "size_1thread"), ("bpc32", "encode"), ("bpc32", "decode"),
             ("bpc64", "size"), ("bpc64", "encode"), ("bpc64", "decode")]
    steps += [(name, "size") for name in ("bdi", "fpc", "zvc")]
    steps += [("zstd-1", "compress"), ("zstd-1", "decompress"), ("lz4", "compress"), ("lz4", "decompress")]
    return steps


def _measure(x: np.ndarray, kind: str, compressor: str, operation: str, threads: int,
             repeat: int) -> list[dict]:
    entries = as_entries(x)
    row = {"kind": kind, "compressor": compressor, "operation": operation, "bytes": x.nbytes}
    if compressor.startswith(("zstd", "lz4")):
        import lz4.frame
        import zstandard

        method = "zstd" if compressor.startswith("zstd") else "lz4"
        comp = reference_compress(x, method, 1)
        if operation == "compress":
            sec, _ = _best(lambda: reference_compress(x, method, 1), repeat)
        else:
            dec = zstandard.ZstdDecompressor().decompress if method == "zstd" else lz4.frame.decompress
            sec, out = _best(lambda: dec(comp), repeat)
            if bytes(out) != x.tobytes():
                raise AssertionError(f"{method} round trip failed on {kind}")
        ratio = x.nbytes / len(comp)
        return [{**row, "threads": 1, "seconds": sec, "ratio": ratio, "bits_ratio": ratio}]

    comp = compressors.get(compressor)
    n_threads = 1 if operation == "size_1thread" else threads
    numba.set_num_threads(n_threads)
    comp.bits(entries[:1024])  # warm-up: load or compile the kernels
    if operation.startswith("size"):
        sec, bits = _best(lambda: comp.bits(entries), repeat)
    elif operation == "encode":
        sec, (bits, _) = _best(lambda: comp.encode_entries(entries), repeat)
    else:
        bits, payload = comp.encode_entries(entries)
        comp.decode_entries(bits[:1], payload[: (int(bits[0]) + 7) // 8])
        sec, out = _best(lambda: comp.decode_entries(bits, payload), repeat)
        if not np.array_equal(out, entries):
            raise AssertionError(f"{compressor} round trip failed on {kind}")
    sectors = compressors.sectors_from_bits(bits, entries)
    ratio = entries.size / (SECTOR_BYTES * max(1, int(sectors.sum(dtype=np.int64))))
    bits_ratio = entries.size * 8 / max(1, int(bits.sum(dtype=np.int64)))
    return [{**row, "threads": n_threads, "seconds": sec, "ratio": ratio, "bits_ratio": bits_ratio}]


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Wide table: MB/s per core for each (compressor, operation) and data kind, plus ratios."""
    speed = df.pivot_table(index=["compressor", "operation"], columns="kind",
                           values="MB_per_s_per_core", sort=False)[list(KINDS)]
    ratio = df.pivot_table(index=["compressor", "operation"], columns="kind", values="ratio",
                           sort=False)[list(KINDS)]
    return pd.concat({"MB/s per core": speed.round(0), "ratio": ratio.round(2)}, axis=1)


def scaling(df: pd.DataFrame) -> pd.Series:
    """Speed-up of the BPC-32 size path with all threads over one thread, per data kind."""
    s = df[df.compressor == "bpc32"].pivot_table(index="kind", columns="operation", values="MB_per_s")
    return (s["size"] / s["size_1thread"]).rename("bpc32 size speed-up")


def environment() -> dict[str, str]:
    """What the numbers were measured on."""
    return {
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": str(os.cpu_count()),
        "numba_threads": str(numba.config.NUMBA_NUM_THREADS),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
    }


def write(df: pd.DataFrame, out: Path) -> dict[str, Path]:
    """Save the raw rows (CSV), the summary (CSV and Markdown) and a figure under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"rows": out / "bench.csv", "summary": out / "summary.csv", "markdown": out / "bench.md"}
    df.to_csv(paths["rows"], index=False)
    table = summary(df)
    table.to_csv(paths["summary"])
    env = environment()
    lines = [
        "# Compressor benchmark",
        "",
        f"{df['bytes'].iloc[0] // MiB} MiB per data kind, best of repeated calls; "
        "per-entry compressors (128-byte entries) beside whole-buffer zstd level 1 and lz4.",
        "Throughput is input MB/s divided by the threads used (zstd and lz4 run on one thread).",
        "Ratio: per-entry compressors give the ideal ratio bytes / (32 B x sectors); "
        "zstd and lz4 give bytes / compressed bytes.",
        "",
        "```",
        table.to_string(),
        "```",
        "",
        "BPC-32 size path, all threads over one thread:",
        "",
        "```",
        scaling(df).round(2).to_string(),
        "```",
        "",
        "Measured on: " + ", ".join(f"{k} {v}" for k, v in env.items()),
        "",
    ]
    paths["markdown"].write_text("\n".join(lines))
    paths.update(plot(df, out))
    return paths


def plot(df: pd.DataFrame, out: Path) -> dict[str, Path]:
    """Bar charts of throughput per core and of ratio, per compressor and data kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    d = df[df.operation != "size_1thread"].copy()
    d["what"] = d["compressor"] + " " + d["operation"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), constrained_layout=True)
    sns.barplot(d, y="what", x="MB_per_s_per_core", hue="kind", hue_order=list(KINDS), ax=axes[0])
    axes[0].set(xscale="log", xlabel="throughput per core (MB/s, log scale)", ylabel="",
                title="Speed (input bytes per second)")
    r = d[d.operation.isin(["size", "compress"])]
    sns.barplot(r, y="compressor", x="ratio", hue="kind", hue_order=list(KINDS), ax=axes[1])
    axes[1].axvline(1.0, color="grey", lw=1, ls=":")
    axes[1].set(xlabel="compression ratio (per-entry: ideal, 32-B sectors; zstd/lz4: whole buffer)",
                ylabel="", title="Ratio")
    paths = dict(zip(("png", "svg"), report.save_figure(fig, out, "bench"), strict=True))
    plt.close(fig)
    return paths


def write_mixed(path: Path, nbytes: int, seed: int = 0) -> Path:
    """A file of ``nbytes`` holding one tensor per data kind (.safetensors or .npy)."""
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


def run_analyze(workdir: Path, gib: float = 1.0, progress: bool = True) -> pd.DataFrame:
    """Wall time of ``buddy analyze`` (a fresh process, all five compressors) on a file."""
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
    """analyze() on a file through dask LocalClusters of 1 and 2 single-threaded workers."""
    from distributed import Client, LocalCluster

    from buddylib import readers
    from buddylib.analysis import analyze

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
    """Throughput of the metadata-cache simulator (random and streaming accesses, 64 KiB 8-way)."""
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
