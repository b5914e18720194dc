"""Committed sector histograms of the HPC proxies at gigabyte scale, regenerated and checked bit for bit.

A 1 GiB run of every HPC proxy takes over an hour on two cores, too slow for every ``make reproduce``;
its per-entry sectors are hundreds of MB. What the capacity results need of it is much smaller: per
snapshot, per allocation and per compressor the **sector histogram** (entries taking 0..4 sectors),
with each allocation's name, kind, dtype, shape and bytes (:func:`buddylib.analysis.analyze_histograms`
derives every capacity result from them). So those are committed, one JSON file per proxy and scale in
``data/summaries/hpc`` (a few tens of kB each), with what made them: the run's byte digest (SHA-256 of
every snapshot's bytes, :attr:`~buddylib.workloads.base.Run.digest`), the code digest of the workload
(:meth:`~buddylib.workloads.base.Workload.code`), the date, the machine, the run's wall time and peak
memory, and its access profile.

The HPC proxies write the same bytes on every x86-64 CPU with FMA and AVX2 (``workloads/hpc/_libm.py``),
so :func:`check` (``buddy summaries --check``, ``make check-paper``) remakes them in a temporary folder
and compares bit for bit: byte digests and histograms. :func:`generate` (``buddy summaries``,
``make reproduce-paper``) remakes and replaces them. The notebooks read them as they are
(:func:`workload_ratios`, :func:`buddylib.fidelity.hpc_scales`).
"""

from __future__ import annotations

import datetime
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from buddylib import layout, workloads
from buddylib.analysis import analyze_histograms
from buddylib.compressors import ALL_COMPRESSORS, DEFAULT_COMPRESSORS
from buddylib.snapshot import Allocation, Snapshot

#: This checkout's committed summaries.
FOLDER = Path(__file__).resolve().parents[1] / "data" / "summaries" / "hpc"
#: Marks a summary file, and its layout.
FORMAT = "buddylib-summary-1"
#: The scales committed: 1 GiB ("large") for every proxy; 4 GiB (4096 MiB) where it was made.
SCALES: tuple[str | float, ...] = ("large", 4096)
SEED = 0
#: What a summary records per allocation: every compressor runs record, no whole-allocation references
#: (zstd's and lz4's output may change with their library's version; these files are checked bit for bit).
COMPRESSORS = ALL_COMPRESSORS


def scale_name(scale: str | float) -> str:
    """The scale as file names spell it: a named scale, or a footprint in MiB without a trailing ``.0``."""
    workloads.footprint_bytes(scale)  # a valid scale
    if isinstance(scale, str) and scale in workloads.SCALES:
        return scale
    return f"{float(scale):g}"


def path(name: str, scale: str | float, seed: int = SEED, folder: str | Path = FOLDER) -> Path:
    """Where the summary of ``name``'s run at ``scale`` lies."""
    return Path(folder) / f"{name}-{scale_name(scale)}-s{seed}.json"


# ---------------------------------------------------------------------------------------
# making one
# ---------------------------------------------------------------------------------------


def summarize_run(run: workloads.Run) -> dict[str, Any]:
    """A finished run's summary (without the machine and memory: :func:`make` adds them)."""
    compressors = [c for c in COMPRESSORS if all(c in a.sectors for s in run.snapshots for a in s.allocations)]
    return {
        "format": FORMAT, "workload": run.workload.name, "scale": scale_name(run.scale), "seed": run.seed,
        "footprint_bytes": workloads.footprint_bytes(run.scale), "digest": run.digest, "code": run.workload.code(),
        "compressors": compressors,
        "snapshots": [{"step": int(s.step), "time": float(s.time), "allocations": [
            {"name": a.name, "kind": a.kind, "dtype": a.dtype, "shape": list(a.shape), "nbytes": a.nbytes,
             "sectors": {c: layout.sector_histogram(a.sectors[c]).tolist() for c in compressors}}
            for a in s.allocations]} for s in run.snapshots],
        "profile": run.profile.to_dict(),
        "seconds": round(run.seconds, 1),
    }


def make(name: str, scale: str | float, seed: int = SEED) -> dict[str, Any]:
    """Run ``name`` at ``scale`` here and return its summary, with the date, the machine and this process's
    peak memory (run it in a fresh process, as :func:`generate` does, for that to be the run's own)."""
    from buddylib import fixtures

    w = workloads.get(name)
    code = w.code()  # of the code that runs, should a file change meanwhile
    run = w.run(scale, seed=seed, compressors=COMPRESSORS, progress=True)
    out = summarize_run(run) | {"code": code}
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out["date"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    out["machine"] = fixtures.machine()
    return out


def write(summary: dict[str, Any], folder: str | Path = FOLDER) -> Path:
    """Save ``summary`` as JSON in ``folder`` (one line per allocation, so a diff shows what changed)."""
    target = path(summary["workload"], summary["scale"], summary["seed"], folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = ["{"]
    items = list(summary.items())
    for i, (k, v) in enumerate(items):
        end = "," if i < len(items) - 1 else ""
        if k == "snapshots":
            snaps = []
            for s in v:
                head = json.dumps({kk: vv for kk, vv in s.items() if kk != "allocations"}, separators=(",", ":"))
                allocs = ",\n".join("   " + json.dumps(a, separators=(",", ":")) for a in s["allocations"])
                snaps.append(f"  {head[:-1]},\"allocations\":[\n{allocs}\n  ]}}")
            lines.append(' "snapshots":[\n' + ",\n".join(snaps) + f"\n ]{end}")
        else:
            lines.append(f" {json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}{end}")
    lines.append("}")
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, target)
    return target




def planned(names: Sequence[str] | None = None, scales: Sequence[str | float] | None = None, seed: int = SEED,
            folder: str | Path = FOLDER) -> list[tuple[str, str]]:
    """The (workload, scale) pairs :func:`generate` makes: ``names`` (default every HPC proxy) at ``scales``;
    without ``scales``, every summary committed in ``folder`` of those names, and each of them at 1 GiB."""
    names = list(names) if names is not None else workloads.names("hpc")
    for n in names:
        workloads.get(n)  # fail on an unknown name before running anything
    if scales is not None:
        return [(n, scale_name(s)) for s in scales for n in names]
    made = {(n, s) for f in Path(folder).glob(f"*-s{seed}.json")
            for n, s in [f.name[: -len(f"-s{seed}.json")].rsplit("-", 1)] if n in names}
    return sorted(made | {(n, "large") for n in names}, key=lambda p: (workloads.footprint_bytes(p[1]), p[0]))


def generate(names: Sequence[str] | None = None, scales: Sequence[str | float] | None = None, seed: int = SEED,
             folder: str | Path = FOLDER) -> list[Path]:
    """Run the :func:`planned` workloads and scales (default: remake every committed summary, and every HPC
    proxy at 1 GiB), one after another, each in a fresh process (its peak memory is its own, and it is
    returned to the system after), and write their summaries into ``folder``."""
    out = []
    for n, scale in planned(names, scales, seed, folder):
        subprocess.run([sys.executable, "-m", __name__, n, scale, str(seed), str(folder)], check=True)
        out.append(path(n, scale, seed, folder))
    return out


# ---------------------------------------------------------------------------------------
# reading them
# ---------------------------------------------------------------------------------------


def load(file: str | Path) -> dict[str, Any]:
    """A summary :func:`write` wrote; ``ValueError`` naming the file where it is not one or contradicts itself."""
    file = Path(file)
    try:
        s = json.loads(file.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{file}: not JSON ({e})") from None
    if not isinstance(s, dict) or s.get("format") != FORMAT:
        raise ValueError(f"{file}: not a summary in format {FORMAT!r}")
    for snap in s["snapshots"]:
        for a in snap["allocations"]:
            for c in s["compressors"]:
                h = a["sectors"][c]
                if len(h) != 5 or min(h) < 0 or sum(h) != -(-a["nbytes"] // 128):
                    raise ValueError(f"{file}: step {snap['step']}, allocation {a['name']!r}: {c} histogram {h} "
                                     f"does not count the {-(-a['nbytes'] // 128)} entries of {a['nbytes']} bytes")
    return s


def available(scale: str | float, names: Sequence[str] | None = None, seed: int = SEED,
              folder: str | Path = FOLDER) -> bool:
    """Whether ``folder`` holds a summary of every one of ``names`` (every HPC proxy) at ``scale``."""
    names = list(names) if names is not None else workloads.names("hpc")
    return bool(names) and all(path(n, scale, seed, folder).is_file() for n in names)


def histograms(summary: dict[str, Any]) -> tuple[xr.DataArray, list[Snapshot]]:
    """A summary's sector histograms ``(snapshot, allocation, compressor, sectors)`` and its snapshots
    (allocations with name, kind, dtype, shape and bytes, no data): what :func:`analyze` reads."""
    comps = list(summary["compressors"])
    names = list(dict.fromkeys(a["name"] for s in summary["snapshots"] for a in s["allocations"]))
    col = {n: i for i, n in enumerate(names)}
    counts = np.zeros((len(summary["snapshots"]), len(names), len(comps), 5), np.int64)
    snaps = []
    for si, s in enumerate(summary["snapshots"]):
        allocs = []
        for a in s["allocations"]:
            counts[si, col[a["name"]]] = [a["sectors"][c] for c in comps]
            allocs.append(Allocation(a["name"], kind=a["kind"], dtype=a["dtype"], shape=tuple(a["shape"]),
                                     nbytes=a["nbytes"]))
        snaps.append(Snapshot(summary["workload"], allocs, step=s["step"], time=s["time"]))
    da = xr.DataArray(counts, dims=("snapshot", "allocation", "compressor", "sectors"),
                      coords={"snapshot": np.arange(len(snaps)), "allocation": names, "compressor": comps,
                              "sectors": layout.SECTOR_VALUES}, name="sector_count")
    return da, snaps


def analyze(summary: dict[str, Any], compressors: Sequence[str] = DEFAULT_COMPRESSORS,
            thresholds: Sequence[float] | float = layout.DEFAULT_THRESHOLD, policy: str = "profile") -> xr.Dataset:
    """:func:`buddylib.analysis.analyze` of the run a summary describes (the same numbers to the bit)."""
    counts, snaps = histograms(summary)
    missing = [c for c in compressors if c not in counts.compressor.values]
    if missing:
        raise ValueError(f"{summary['workload']} at {summary['scale']}: no {', '.join(missing)} histograms")
    return analyze_histograms(counts.sel(compressor=list(compressors)), snaps, thresholds, policy=policy)


def workload_ratios(names: Sequence[str] | None = None, scale: str | float = "large", seed: int = SEED,
                    folder: str | Path = FOLDER, thresholds: Sequence[float] | None = None,
                    compressors: Sequence[str] = DEFAULT_COMPRESSORS, policy: str = "profile") -> xr.Dataset:
    """:func:`buddylib.experiments.workload_ratios` from the committed summaries (same variables and dims);
    ``seconds`` is the run's own wall time, and ``code`` (per workload) the code digest that made it,
    ``code_current`` whether this checkout's code of the workload is still that."""
    from buddylib import experiments

    names = list(names) if names is not None else workloads.names("hpc")
    thresholds = experiments.THRESHOLDS if thresholds is None else thresholds
    parts = []
    for n in names:
        s = load(path(n, scale, seed, folder))
        ds = experiments._per_workload(analyze(s, compressors, thresholds, policy), n, float(s["seconds"]))
        parts.append(ds.assign(code=("workload", [s["code"]]),
                               code_current=("workload", [s["code"] == workloads.get(n).code()]),
                               date=("workload", [s.get("date", "")])))
    return xr.concat(parts, "workload", join="outer", coords="different", compat="equals",
                     combine_attrs="drop_conflicts")


# ---------------------------------------------------------------------------------------
# checking them
# ---------------------------------------------------------------------------------------


def compare(kept: dict[str, Any], fresh: dict[str, Any]) -> dict[str, Any]:
    """One row of :func:`check`: whether two summaries of one run agree bit for bit (byte digest,
    allocations, histograms of every compressor both hold), and where they first differ."""
    same_layout = [[(a["name"], a["kind"], a["dtype"], a["shape"], a["nbytes"]) for a in s["allocations"]]
                   + [s["step"]] for s in kept["snapshots"]] == \
                  [[(a["name"], a["kind"], a["dtype"], a["shape"], a["nbytes"]) for a in s["allocations"]]
                   + [s["step"]] for s in fresh["snapshots"]]
    first = ""
    comps = [c for c in kept["compressors"] if c in fresh["compressors"]]
    if same_layout:
        for s, t in zip(kept["snapshots"], fresh["snapshots"], strict=True):
            for a, b in zip(s["allocations"], t["allocations"], strict=True):
                for c in comps:
                    if a["sectors"][c] != b["sectors"][c] and not first:
                        first = f"step {s['step']}, {a['name']}, {c}: {a['sectors'][c]} -> {b['sectors'][c]}"
    else:
        first = "allocations or steps differ"
    histograms_equal = same_layout and not first and comps == list(kept["compressors"])
    return {"workload": kept["workload"], "scale": kept["scale"], "digest_equal": kept["digest"] == fresh["digest"],
            "histograms_equal": histograms_equal, "code_equal": kept["code"] == fresh["code"],
            "seconds": fresh.get("seconds", np.nan), "peak_rss_gib": fresh.get("peak_rss_bytes", 0) / 2**30,
            "first_difference": first,
            "ok": kept["digest"] == fresh["digest"] and histograms_equal}


def check(names: Sequence[str] | None = None, scales: Sequence[str | float] | None = None, seed: int = SEED,
          folder: str | Path = FOLDER) -> pd.DataFrame:
    """Remake the committed summaries (all, or those of ``names`` / ``scales``) in a temporary folder and
    compare them with the committed ones bit for bit (:func:`compare`); one row per summary, with
    ``exact_expected``: whether this machine must reproduce the bytes (FMA and AVX2, the same C library as
    the machine that made them). Writes nothing in ``folder``."""
    from buddylib import fixtures

    kept = []
    for f in sorted(Path(folder).glob(f"*-s{seed}.json")):
        s = load(f)
        if (names is None or s["workload"] in names) and \
                (scales is None or s["scale"] in {scale_name(x) for x in scales}):
            kept.append(s)
    if not kept:
        raise FileNotFoundError(f"{folder}: no summaries of {', '.join(names or ['any workload'])} at "
                                f"{', '.join(map(str, scales or ['any scale']))}; `buddy summaries` makes them")
    here = fixtures.machine()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in kept:
            t0 = time.perf_counter()
            fresh = load(generate([s["workload"]], [s["scale"]], seed, tmp)[0])
            row = compare(s, fresh)
            row["exact_expected"] = bool(here["fma_avx2"] and s["machine"]["fma_avx2"]
                                         and s["machine"]["libc"] == here["libc"])
            row["check_seconds"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
    return pd.DataFrame(rows).set_index(["workload", "scale"])


if __name__ == "__main__":  # one run of generate(): python -m buddylib.summaries NAME SCALE SEED FOLDER
    write(make(sys.argv[1], sys.argv[2], int(sys.argv[3])), sys.argv[4])
