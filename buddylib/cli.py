"""The ``buddy`` command line: the suite's jobs, each a subcommand with ``--help``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn

from buddylib import __version__

#: What ``buddy --help`` says the tool is for.
DESCRIPTION = ("Buddy Compression (Choukse et al., ISCA 2020) on your data and on built-in HPC and deep-learning "
               "workloads: how much more a GPU holds when its memory is compressed per 128-byte entry, part of each "
               "entry in a buddy memory over NVLink, and at what slowdown.")


def _bench_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="compressor throughput and ratios beside zstd and lz4",
                       description="Time every compressor on sparse, smooth and random data and bf16 "
                                   "weights, beside zstd-1 and lz4, and write CSV, Markdown and a figure.")
    p.add_argument("--mib", type=_positive_int, default=256, help="MiB per data kind (default 256)")
    p.add_argument("--repeat", type=_positive_int, default=5,
                   help="timed calls per figure, median reported with min/max (default and least 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated data (default 0)")
    p.add_argument("--out", default="reports/bench", help="output folder (default reports/bench)")
    p.add_argument("--analyze-gib", type=float, default=1.0, help="file size for timing buddy analyze (GiB)")
    p.add_argument("--dask-gib", type=float, default=2.0, help="file size for the dask 1 vs 2 workers run (GiB)")
    p.add_argument("--compressors-only", action="store_true",
                   help="skip the cold compile, buddy analyze and dask timings")
    p.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    import tempfile

    import pandas as pd

    from buddylib.report import bench

    out = Path(args.out)
    df = bench.run(mib=args.mib, repeat=args.repeat, seed=args.seed)
    paths = bench.write(df, out)
    print(paths["markdown"].read_text())
    if not args.compressors_only:
        from buddylib import warm

        paths |= warm.write_compile_times(out)  # in fresh processes with an empty numba cache
        print(paths["compile_markdown"].read_text())
        with tempfile.TemporaryDirectory(dir=out) as tmp:
            pipeline = pd.concat([bench.run_analyze(Path(tmp), args.analyze_gib),
                                  bench.run_dask(Path(tmp), args.dask_gib)], ignore_index=True)
        pipeline["MB_per_s"] = pipeline["bytes"] / pipeline["seconds"] / 1e6
        paths["pipeline"] = out / "analyze.csv"
        pipeline.to_csv(paths["pipeline"], index=False)
        print("## buddy analyze and its dask path\n\n```\n" + pipeline.round(2).to_string(index=False) + "\n```")
        with tempfile.TemporaryDirectory(dir=out) as tmp:
            paths |= bench.write_scaleout(*bench.run_scaleout(Path(tmp)), out)
        print(paths["scaleout_markdown"].read_text())
        sim = bench.run_cache_sim()
        paths["cache_sim"] = out / "cache_sim.csv"
        sim.to_csv(paths["cache_sim"], index=False)
        print("## timing model\n\n```\n" + sim.round(3).to_string(index=False) + "\n```")
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


#: The code of 16-bit and FP8 floats :func:`_analyze` adds by default, per dtype an allocation may have.
FLOAT_CODES = {"bfloat16": "ebo-bf16", "float16": "ebo-fp16", "float8_e4m3fn": "ebo-e4m3"}
#: The compressors a summary's table shows by default, in this order (those it records).
DEFAULT_ORDER = ("bpc32", "bpc64", "bdi", "fpc", "zvc", "bpc32zvc")


def _analyze_parser(sub: argparse._SubParsersAction) -> None:
    from buddylib.compressors import DEFAULT_COMPRESSORS
    from buddylib.layout import DEFAULT_THRESHOLD, POLICIES, TARGETS
    from buddylib.regions import RULES
    from buddylib.userdata.readers import MAX_BYTES

    p = sub.add_parser("analyze", help="capacity a GPU would gain on your arrays, per allocation",
                       description="Read arrays (.npy, .npz, .safetensors, .pt/.pth, zarr, raw dumps "
                                   "with --dtype), treat each as an allocation, and print its ideal "
                                   "ratio per compressor, chosen target, overflow and device/buddy bytes.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="input files or zarr stores, or one run saved by `buddy workloads run` (.nc)")
    p.add_argument("--compressor", nargs="+", default=None, metavar="NAME",
                   help="compressors; the first drives the layout (default: "
                        f"{' '.join(DEFAULT_COMPRESSORS)}, and where the data holds bfloat16, float16 or float8_e4m3fn "
                        f"arrays the code made for them, {', '.join(FLOAT_CODES.values())})")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                   help="buddy threshold, the largest accepted overflow fraction (default %(default)s)")
    p.add_argument("--targets", type=float, nargs="+", default=list(TARGETS), metavar="R",
                   help="target ratios the policy may choose (default 1 1.333 2 4; 8 and 16 extend)")
    p.add_argument("--policy", choices=POLICIES, default="profile", help="placement policy (default profile)")
    p.add_argument("--region", default="allocation", metavar="SIZE",
                   help="target granularity: one target per allocation (default, the paper's) or per aligned "
                        "region of SIZE, a power of two from 4KiB (e.g. 64KiB, 2MiB); the target column then "
                        "reads bytes / device bytes")
    p.add_argument("--rule", choices=RULES, default="budget",
                   help="with --region, how regions share the threshold: budget (spent where it saves most), "
                        "traffic (held to the overflow one target per allocation causes) or naive (each region "
                        "alone held to it) (default budget)")
    p.add_argument("--no-zero-flag", action="store_true", help="all-zero entries take a sector, not 0")
    p.add_argument("--dtype", help="read every PATH as a raw dump of this numpy dtype (e.g. float32)")
    p.add_argument("--shape", help="with --dtype: the array shape, e.g. 1024,1024 (checked against the size)")
    p.add_argument("--out", help="also write the full result Dataset (.nc netCDF or .zarr)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--plot", metavar="IMAGE",
                   help="also draw the per-allocation picture of notebook 00 (device/buddy/metadata bytes and "
                        "target per allocation, sectors per entry, effective ratio) to a .png, .svg or .pdf")
    p.add_argument("--scheduler", metavar="ADDRESS", help="run on an existing dask scheduler (tcp://host:port)")
    p.add_argument("--max-bytes", type=_size, default=MAX_BYTES, metavar="SIZE",
                   help="refuse an input declaring more (default 16GiB; e.g. 64GiB, 1TiB): every declared byte, "
                        "fill values included, is compressed")
    p.set_defaults(func=_analyze)


def _analyze(args: argparse.Namespace) -> int:
    import json

    from buddylib import analysis, regions

    shape = _parse_shape(args.shape) if args.shape is not None else None
    if shape is not None and args.dtype is None:
        raise ValueError("--shape needs --dtype (it describes a raw dump)")
    if args.compressor is not None:
        analysis.check_compressors(args.compressor)
    region = regions.region_bytes(args.region)
    out = Path(args.out) if args.out else None
    if out is not None:
        _check_out(out, [Path(p) for p in args.paths])
    plot = Path(args.plot) if args.plot else None
    if plot is not None:
        _check_plot(plot, [Path(p) for p in args.paths])
    summary = _summary_file(args.paths) if args.dtype is None else None
    ds, timing = _summary_result(summary, args, region) if summary is not None else _arrays_result(args, shape, region)
    table = analysis.allocation_table(ds, compressor=args.compressor[0], threshold=args.threshold)
    total = analysis.total_row(ds, compressor=args.compressor[0], threshold=args.threshold)
    if args.json:
        print(json.dumps({"compressor": args.compressor[0], "threshold": args.threshold, "policy": args.policy,
                          "region": regions.label(region), **({"rule": args.rule} if region else {}),
                          "allocations": [_json_row(r) for r in table.reset_index().to_dict(orient="records")],
                          "total": _json_row(total.to_dict()), **timing}, indent=1, allow_nan=False))
    else:
        _print_result(table, total, timing, args, region, _tiering(ds, args))
    if out is not None:
        _write_dataset(ds, out)
        print(f"wrote {out}", file=sys.stderr)
    if plot is not None:
        _write_plot(ds, plot, args)
        print(f"wrote {plot}", file=sys.stderr)
    return 0


def _arrays_result(args: argparse.Namespace, shape: tuple[int, ...] | None, region: int | None) -> tuple:
    """The analysis of a user's arrays or of a saved run, and (for a run) the timing model's slowdown."""
    from buddylib import analysis
    from buddylib.compressors import DEFAULT_COMPRESSORS
    from buddylib.compressors import names as compressor_names
    from buddylib.snapshot import Snapshot
    from buddylib.userdata import readers

    run = _saved_run(args.paths) if args.dtype is None else None
    if run is None:
        allocations = []
        for path, label in zip(args.paths, _labels(args.paths), strict=True):
            prefix = f"{label}:" if len(args.paths) > 1 else ""
            allocations.extend(readers.read(path, dtype=args.dtype, shape=shape, prefix=prefix,
                                            max_bytes=args.max_bytes))
        snapshots = [Snapshot("user", allocations)]
        if args.compressor is None:  # the paper's five, and the code made for 16-bit or FP8 floats where they are
            args.compressor = [*DEFAULT_COMPRESSORS, *(FLOAT_CODES[d] for d in sorted(
                {a.dtype for a in allocations} & set(FLOAT_CODES)))]
    else:
        snapshots = run
        recorded = set.intersection(*(set(a.sectors) for s in run for a in s.allocations))
        floats = {a.dtype for s in run for a in s.allocations} & set(FLOAT_CODES)
        args.compressor = args.compressor or [*DEFAULT_COMPRESSORS, *(
            FLOAT_CODES[d] for d in sorted(floats) if FLOAT_CODES[d] in recorded)]
        missing = [c for c in args.compressor if c in compressor_names() and c not in recorded]
        if missing:
            raise ValueError(f"{args.paths[0]}: a saved run without bytes; it records sectors for "
                             f"{', '.join(sorted(recorded))}, not {', '.join(missing)}")
        print(f"{args.paths[0]}: saved run of {run[0].workload}, {len(run)} snapshots; targets chosen over all of "
              f"them, table of the last (step {run[-1].step})", file=sys.stderr)
    client = _client(args.scheduler) if args.scheduler else None
    try:
        ds = analysis.analyze(snapshots, compressors=args.compressor, thresholds=[args.threshold],
                              targets=args.targets, policy=args.policy, zero_flag=not args.no_zero_flag,
                              client=client, progress=None if client is None else True, region=region,
                              rule=args.rule)
    finally:
        if client is not None:
            client.close()
    timing = _run_timing(Path(args.paths[0]), args.compressor[0], args.threshold, args) if run is not None else {}
    return ds, timing


def _tiering(ds, args: argparse.Namespace) -> str:
    """How much of the effective ratio is buddy memory used as a tier (entries keeping most of their code there),
    for the summary line; empty where none is."""
    from buddylib.userdata.readers import human_bytes

    s = ds.isel(snapshot=-1).sel(compressor=args.compressor[0], threshold=args.threshold)
    tiered = float(s.tiered_bytes.sum())
    if tiered <= 0:
        return ""
    return (f"; of it tiering: {human_bytes(tiered)} ({100 * tiered / float(s.allocation_bytes.sum()):.1f}% of the "
            f"data) in entries that keep most of their code in buddy memory, compression alone "
            f"{float(s.effective_ratio_untiered):.3f}x")


def _print_result(table, total, timing: dict, args: argparse.Namespace, region: int | None,
                  tiering: str = "") -> None:
    """The table, the summary line, and the slowdown where the input has an access profile."""
    from buddylib import regions
    from buddylib.userdata.readers import human_bytes

    print(_format_table(table, total))
    print(f"\neffective ratio {total['effective']:.3f}x with {args.compressor[0]} "
          f"(buddy threshold {args.threshold:g}, {args.policy} policy"
          f"{f', a target per {regions.label(region)} region, {args.rule} rule' if region else ''}); ideal ratio "
          f"{_ideal(total['ideal ' + args.compressor[0]])}; device {human_bytes(total['device bytes'])}"
          f" (incl. metadata), buddy {human_bytes(total['buddy bytes'])} for {human_bytes(total['bytes'])} of data"
          f"{tiering}")
    if "slowdown_credit" in timing:
        print(f"slowdown {timing['slowdown']:.4f}x of one iteration on {timing['gpu']} + {timing['link']} without HBM "
              f"credit (the paper's comparison), {timing['slowdown_credit']:.4f}x with it (timing model over the "
              "summary's accesses, its last snapshot)")
    elif "slowdown" in timing:
        print(f"slowdown {timing['slowdown']:.4f}x of one step on {timing['gpu']} + {timing['link']} (timing model "
              "replaying the run's access profile over its last snapshot, no HBM credit)")
    for line in timing.get("notes", []):
        print(line)


def _summary_file(paths: list[str]) -> dict | None:
    """A committed summary of a run (``data/summaries``, :mod:`buddylib.studies.summaries`), loaded; None for
    anything else."""
    import json

    from buddylib.studies import summaries

    p = Path(paths[0])
    if p.suffix != ".json" or not p.is_file():
        return None
    try:
        head = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(head, dict) or head.get("format") != summaries.FORMAT:
        return None
    if len(paths) > 1:
        raise ValueError(f"{p}: a summary is analysed on its own, not with other files")
    return summaries.load(p)


def _summary_result(summary: dict, args: argparse.Namespace, region: int | None) -> tuple:
    """A committed summary's analysis (targets over all its snapshots, its histograms) and slowdown in both
    accountings (its accesses), or a note saying it keeps none."""
    from buddylib import paper
    from buddylib.studies import summaries
    from buddylib.timing import model as tm

    kept = summary.get("regions", {}).get("compressor", summary["compressors"][0])
    if args.compressor is None:
        args.compressor = [kept] if region is not None else [c for c in summary["compressors"]
                                                             if c in DEFAULT_ORDER] or [kept]
    ds = summaries.analyze(summary, args.compressor, [args.threshold], args.policy, args.targets, region, args.rule)
    print(f"{summary['workload']} at {summary['scale']}: committed summary, {len(summary['snapshots'])} snapshots; "
          "targets chosen over all of them, table of the last", file=sys.stderr)
    if args.compressor[0] != kept:
        return ds, {"notes": [f"no slowdown: the summary keeps its accesses for {kept}, not {args.compressor[0]}"]}
    try:
        acc = summaries.replay(summary)
    except ValueError as e:
        return ds, {"notes": [f"no slowdown: {e}"]}
    sweep = tm.sweep(acc, thresholds=[args.threshold], bandwidth_credit=(False, True), region=region,
                     rule=args.rule, targets=args.targets, policy=args.policy)
    s = sweep.slowdown.isel(gpu=0, link=0, threshold=0, latency_scale=0, metadata_cache_bytes=0, outstanding=0)
    return ds, {"gpu": paper.HEADLINE["gpu"], "link": paper.HEADLINE["link"],
                "slowdown": float(s.sel(bandwidth_credit=False)),
                "slowdown_credit": float(s.sel(bandwidth_credit=True))}


_PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def _check_plot(plot: Path, inputs: list[Path]) -> None:
    """``--plot`` is checked before any compressing: a known image type, in a folder that exists and can be
    written, not a folder itself nor an input."""
    if plot.suffix.lower() not in _PLOT_SUFFIXES:
        raise ValueError(f"--plot {plot}: unknown image type {plot.suffix or '(no extension)'!r}; "
                         f"use {', '.join(_PLOT_SUFFIXES)}")
    folder = plot.absolute().parent
    if not folder.is_dir():
        raise ValueError(f"--plot {plot}: folder {plot.parent} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"--plot {plot}: folder {plot.parent} is not writable")
    if plot.is_dir() or (plot.exists() and not plot.is_file()):
        raise ValueError(f"--plot {plot}: exists and is not a regular file")
    if any(plot.resolve() == p.resolve() for p in inputs):
        raise ValueError(f"--plot {plot}: is an input; write the picture elsewhere")


def _write_plot(ds, plot: Path, args: argparse.Namespace) -> None:
    """The explorer's per-allocation picture (notebook 00) of the last snapshot, written to a temporary name
    beside ``plot`` and moved into place."""
    import tempfile

    from buddylib import explore

    names = ", ".join(Path(p).name for p in args.paths)
    title = (f"{names if len(names) <= 60 else names[:57] + '...'}: {args.compressor[0]}, buddy threshold "
             f"{args.threshold:g}, {args.policy} policy")
    fig = explore.draw(explore.layout_view(ds, args.compressor[0], args.threshold, -1, title))
    fd, tmp = tempfile.mkstemp(dir=plot.absolute().parent, prefix=f".{plot.name}.", suffix=plot.suffix)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, plot)
    except OSError as exc:
        raise ValueError(f"--plot {plot}: cannot write: {exc.strerror or exc}") from exc
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _labels(paths: list[str]) -> list[str]:
    """A label per input: its file name, or as many trailing path parts as tell it apart from the others
    (``a/x.npy`` and ``b/x.npy``). The same data twice is an error, however it is spelled (``./a/../a/x``,
    a symbolic or hard link), and so is a store given beside an array inside it: it would be counted twice."""
    full = [Path(p).absolute() for p in paths]
    real = [Path(os.path.realpath(p)) for p in paths]
    for i, (r, p) in enumerate(zip(real, paths, strict=True)):
        for j in range(i):
            same = r == real[j] or (r.exists() and real[j].exists() and os.path.samefile(r, real[j]))
            if same:
                raise ValueError(f"{p}: given twice (the same file as {paths[j]})")
            if r.is_relative_to(real[j]) or real[j].is_relative_to(r):
                inner, outer = (p, paths[j]) if r.is_relative_to(real[j]) else (paths[j], p)
                raise ValueError(f"{inner}: lies inside {outer}, also given: its arrays would be counted twice")
    depth = [1] * len(full)
    while True:
        labels = ["/".join(f.parts[-d:]) for f, d in zip(full, depth, strict=True)]
        clash = {i for i, lab in enumerate(labels) if labels.count(lab) > 1}
        if not clash:
            return labels
        for i in clash:
            depth[i] += 1


def _check_out(out: Path, inputs: list[Path]) -> None:
    """``--out`` never destroys what this tool did not write, nor an input."""
    from buddylib import analysis

    if out.suffix not in (".nc", ".zarr"):
        raise ValueError(f"--out {out}: the result file must end in .nc (netCDF) or .zarr")
    if not out.absolute().parent.is_dir():
        raise ValueError(f"--out {out}: folder {out.parent} does not exist")
    target = out.resolve()
    for p in inputs:
        src = p.resolve()
        if target == src or src.is_relative_to(target) or target.is_relative_to(src):
            raise ValueError(f"--out {out}: is (or holds, or lies inside) the input {p}; write the result elsewhere")
    if not (out.exists() or out.is_symlink()):
        return
    if not (out.is_dir() if out.suffix == ".zarr" else out.is_file()):
        kind = ("a folder" if out.is_dir() else "a file" if out.is_file() else "not a regular file" if out.exists()
                else "a dangling link")
        raise ValueError(f"--out {out}: exists and is {kind}, not a result buddy analyze wrote; remove it or "
                         "choose another name")
    if not analysis.is_result(out):
        raise ValueError(f"--out {out}: exists and is not a result buddy analyze wrote; remove it or choose "
                         "another name")


def _run_timing(path: Path, compressor: str, threshold: float, args: argparse.Namespace) -> dict:
    """For a saved run with an access profile beside it: the timing model's slowdown of one step at the paper's
    headline GPU and link, and, for a recording of a user's model (:mod:`buddylib.userdata.capture`), what it could not
    see and the CUDA allocator's bytes."""
    import json

    from buddylib import paper
    from buddylib.timing import model as tm
    from buddylib.userdata.readers import human_bytes

    profile = path.with_suffix(".profile.json")
    if not profile.exists():
        return {}
    meta = json.loads(profile.read_text())
    out: dict = {}
    if meta.get("kernels"):
        ws = tm.Workset.load(path, compressor)
        out = {"gpu": paper.HEADLINE["gpu"], "link": paper.HEADLINE["link"],
               "slowdown": tm.slowdown(ws, threshold=threshold, bandwidth_credit=False, region=args.region,
                                       rule=args.rule, targets=args.targets, policy=args.policy)["slowdown"]}
    rec = meta.get("recorded")
    if rec:
        notes = [f"recorded from a {rec['mode']} loop on {rec['device']} over {rec['steps']} steps"]
        notes += [f"CUDA allocator at step {m['step']}: {human_bytes(m['allocated'])} allocated, "
                  f"{human_bytes(m['reserved'])} reserved" for m in rec.get("cuda_memory", [])[-1:]]
        out["notes"] = [*notes, "not recorded: " + "; ".join(rec.get("unseen", []))]
    return out


def _saved_run(paths: list[str]) -> list | None:
    """The snapshots of a run saved by the suite (``buddy workloads run``, ``Run.save``): one ``.nc`` file
    or a zarr store marked as a run; None for anything else (a user's arrays)."""
    from buddylib import snapshot

    p = Path(paths[0])
    if not snapshot.is_saved_run(p):
        return None
    if len(paths) > 1:
        raise ValueError(f"{p}: a saved run is analysed on its own, not with other files")
    try:
        return snapshot.load(p)
    except (FileNotFoundError, ValueError):
        raise
    except Exception as exc:  # netCDF/HDF5 errors: not a file snapshot.save wrote
        raise ValueError(f"{p}: not a run saved by buddylib ({type(exc).__name__}: {exc})") from exc


def _json_row(row: dict) -> dict:
    """Full-precision Python numbers (pandas' to_json rounds to 10 digits); inf/NaN -> null."""
    import math

    import numpy as np

    out = {}
    for k, v in row.items():
        v = v.item() if isinstance(v, np.generic) else v
        out[k] = None if isinstance(v, float) and not math.isfinite(v) else v
    return out


#: How long ``--scheduler`` waits for a scheduler to answer (dask retries a refused connection until then).
CONNECT_TIMEOUT = "10s"


def _client(address: str):
    from distributed import Client

    try:
        return Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"--scheduler {address}: cannot connect to a dask scheduler ({exc})") from exc


def _write_dataset(ds, out: Path) -> None:
    """Write to a temporary name beside ``out`` and move it into place: never half a file."""
    import shutil
    import tempfile

    tmpdir = Path(tempfile.mkdtemp(dir=out.parent if str(out.parent) else ".", prefix=f".{out.name}."))
    tmp = tmpdir / out.name
    try:
        if out.suffix == ".zarr":
            import warnings

            from zarr.errors import UnstableSpecificationWarning

            with warnings.catch_warnings():  # the label coords (kind, dtype) are fixed-width strings
                warnings.simplefilter("ignore", UnstableSpecificationWarning)
                ds.to_zarr(tmp, mode="w", consolidated=False)
        else:
            ds.to_netcdf(tmp, engine="netcdf4")
        if out.is_dir():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _ideal(ratio: float) -> str:
    """An ideal ratio as the summary says it: all-zero data takes no sector, so its ratio is no number."""
    return "unbounded (all zero: no sectors, only metadata)" if ratio == float("inf") else f"{ratio:.3f}x"


def _format_table(table, total) -> str:
    """The allocations, a rule, and the totals (below the rule, so an allocation named TOTAL is no clash)."""
    import pandas as pd

    from buddylib.userdata.readers import human_bytes

    t = pd.concat([table, total.to_frame("TOTAL").T.rename_axis(table.index.name)])
    for col in ("bytes", "device bytes", "buddy bytes"):
        t[col] = [human_bytes(v) for v in t[col]]
    for col in t.columns:  # an all-zero allocation takes no sector at all (its entries are flagged in the metadata)
        if col.startswith("ideal") or col in ("target", "effective"):
            t[col] = ["" if v != v else "all zero" if v == float("inf") else f"{v:.3f}" for v in t[col]]
    t["overflow %"] = [f"{float(v):.1f}" for v in t["overflow %"]]
    lines = t.to_string().splitlines()
    return "\n".join([*lines[:-1], "-" * len(lines[0]), lines[-1]])


def _parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(s) for s in text.replace("x", ",").split(",") if s.strip())
    except ValueError as exc:
        raise ValueError(f"--shape {text!r}: expected integers like 64,128") from exc
    if not shape or any(s < 0 for s in shape):
        raise ValueError(f"--shape {text!r}: expected non-negative integers like 64,128")
    return shape


def _workloads_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workloads", help="list or run the built-in workloads (snapshots into data/)",
                       description="List the built-in workloads, or run them and save their snapshots, "
                                   "access profile and index arrays.")
    wsub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    wsub.add_parser("list", help="names and what each stands for").set_defaults(func=_workloads)
    wr = wsub.add_parser("run", help="run workloads and save their snapshots",
                         description="Run workloads and save NAME-SCALE-sSEED.nc (snapshots), "
                                     ".profile.json (access profile) and .index.npz (gather index arrays).")
    wr.add_argument("names", nargs="+", metavar="NAME", help="workload names, or 'all'")
    wr.add_argument("--scale", default="quick", help="quick, default, large, or a footprint in MiB (default quick)")
    wr.add_argument("--seed", type=int, default=0, help="seed (default 0): the same seed gives the same bytes")
    wr.add_argument("--out", default="data", help="output folder (default data)")
    wr.set_defaults(func=_workloads)


def _workloads(args: argparse.Namespace) -> int:
    from buddylib import workloads
    from buddylib.userdata.readers import human_bytes

    if args.action == "list":
        for name in workloads.names():
            w = workloads.get(name)
            print(f"{name:17s} {w.suite:9s} {w.proxies}")
        return 0
    names = workloads.names() if args.names == ["all"] else args.names
    for name in names:
        workloads.get(name)  # fail on an unknown name before running anything
    workloads.footprint_bytes(args.scale)
    for name in names:
        run = workloads.get(name).run(args.scale, seed=args.seed, progress=True)
        path = run.save(args.out)
        print(f"{name}: {len(run.snapshots)} snapshots, footprint {human_bytes(run.footprint)}, "
              f"{run.seconds:.1f} s -> {path}")
    return 0


def _capture_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("capture", help="record your own PyTorch model's training (or inference) steps",
                       description="Run SCRIPT under buddylib.userdata.capture.Recorder and save what a GPU would hold "
                                   "at each step (snapshots) and how the step reads it (access profile), as `buddy "
                                   "workloads run` saves a run: `buddy analyze` and notebooks 00 and 08 read it. "
                                   "SCRIPT defines `model` (an nn.Module), `loop()` (runs the steps, calling model) "
                                   "and optionally `optimizer` (training; without it, inference) and `loss_fn` "
                                   "(the loss module).")
    p.add_argument("script", metavar="SCRIPT", help="a Python file following that convention")
    p.add_argument("--out", help="save the recording here (.nc or .zarr; .profile.json and .index.npz beside)")
    p.add_argument("--every", type=int, default=1, help="a snapshot after every N-th step (default 1), and one "
                   "at the start")
    p.add_argument("--check", metavar="RECORDING", help="compare with a committed recording of the same script: "
                   "allocations and profile equal, ideal ratios within the fixtures' tolerance (exit 1 if not)")
    p.set_defaults(func=_capture)


def _capture(args: argparse.Namespace) -> int:
    import tempfile

    from buddylib.studies import fixtures
    from buddylib.userdata import capture

    if args.out is None and args.check is None:
        raise ValueError("buddy capture: give --out PATH (.nc or .zarr) to save the recording, or --check PATH")
    if args.out is not None and Path(args.out).suffix not in (".nc", ".zarr"):
        raise ValueError(f"--out {args.out}: a recording is saved to a .nc (netCDF) or .zarr path")
    if args.check is not None and not Path(args.check).with_suffix(".profile.json").is_file():
        raise ValueError(f"--check {args.check}: no recording there (its .profile.json is missing)")
    rec = capture.run_script(args.script, every=args.every)
    print(rec.summary())
    if args.out is not None:
        print(f"wrote {rec.save(args.out)}", file=sys.stderr)
    if args.check is None:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = rec.save(Path(tmp) / Path(args.check).name)
        report = fixtures.compare_recordings(args.check, fresh)
    ok = report["structure_equal"] and report["profile_equal"] and report["max_rel_change"] <= fixtures.TOLERANCE
    print(f"{args.check}: allocations {'equal' if report['structure_equal'] else 'DIFFER'}, profile "
          f"{'equal' if report['profile_equal'] else 'DIFFERS'}, largest ideal-ratio change "
          f"{report['max_rel_change']:.2%} (tolerance {fixtures.TOLERANCE:.0%})")
    return 0 if ok else 1


def _fixtures_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fixtures", help="remake (or --check) the committed quick-scale runs the notebooks read",
                       description="Remake the committed quick-scale runs (seed 0) and mini-batch measurements "
                                   "that the notebooks read by default, or with --check remake them in a temporary "
                                   "folder and compare: HPC bit for bit, DL within a stated tolerance.")
    p.add_argument("--check", action="store_true", help="compare a fresh run with the fixtures; write nothing")
    p.add_argument("--record-digests", action="store_true",
                   help="record this machine's digest of each fixture run in data/fixtures/digests.json: where a "
                        "test's run gives a recorded digest, it need not run it again to check the same seed's bytes")
    p.add_argument("--folder", default=None, help="fixture folder (default data/fixtures/quick of this checkout)")
    p.set_defaults(func=_fixtures)


def _fixtures(args: argparse.Namespace) -> int:
    from buddylib.studies import fixtures

    args.folder = args.folder or fixtures.FOLDER
    if args.record_digests:
        print(f"wrote {fixtures.record_digests()}")
        return 0
    if args.check:
        report = fixtures.check(args.folder, progress=True)
        print(report.to_string())
        bad = report.index[~report.ok].tolist()
        print(f"{len(report) - len(bad)} of {len(report)} within tolerance {fixtures.TOLERANCE:g}"
              + (f"; differ: {', '.join(bad)}" if bad else ""))
        return 1 if bad else 0
    print(f"wrote {fixtures.generate(args.folder)}")
    return 0


def _summaries_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("summaries", help="remake (or --check) the committed summaries of the slow studies",
                       description="Run the slow studies that make reproduce reads instead of running: the HPC "
                                   "proxies at gigabyte scale, the paper's six networks at paper scale, the "
                                   "training-maturity study (one after another, each in its own process), and "
                                   "write their committed summaries into data/summaries (per snapshot, allocation "
                                   "and compressor the sector histogram, or the study's result, with the code "
                                   "digest, date and machine that made them); or with --check remake them in a "
                                   "temporary folder and compare: HPC bit for bit, DL ratios within a tolerance. "
                                   "An hour or more per HPC scale, about half an hour for the DL ones, on two cores. "
                                   "A summary this code made already is kept, so a remake stopped part-way goes "
                                   "on where it stopped.")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="workloads (default: every HPC proxy and the paper's six networks)")
    p.add_argument("--scale", nargs="+", default=None, metavar="SCALE",
                   help="scales: large (1 GiB), paper, default and/or a footprint in MiB, e.g. 4096 (default: "
                        "every committed HPC one and large; paper for the networks, default for the studies)")
    p.add_argument("--study", nargs="+", default=None, choices=["run", "maturity", "adam", "caffe"],
                   help="which summaries: the runs and/or the training-maturity, optimizer (adam) and framework "
                        "(caffe) studies (default all)")
    p.add_argument("--check", action="store_true",
                   help="compare a fresh run with the committed summaries; write nothing")
    p.add_argument("--folder", default=None,
                   help="summary folder (default data/summaries/hpc and data/summaries/dl of this checkout)")
    p.set_defaults(func=_summaries)


def _summaries(args: argparse.Namespace) -> int:
    from buddylib.studies import remake, summaries

    folder = Path(args.folder) if args.folder else None
    names = args.names or None
    studies = args.study or tuple(summaries.STUDIES)
    if args.check:
        import pandas as pd

        report = remake.check(names, args.scale, folder=folder, studies=studies)
        with pd.option_context("display.width", 200, "display.max_colwidth", 60):
            print(report.to_string())
        bad = [f"{n}@{s}" + ("" if st == "run" else f" {st}") for n, s, st in report.index[~report.ok]]
        print(f"{len(report) - len(bad)} of {len(report)} identical bit for bit (HPC: byte digests and histograms) "
              f"or within the tolerance (DL: ratios within {summaries.DL_TOLERANCE:g} relative, studies "
              f"{summaries.STUDY_TOLERANCE:g})"
              + (f"; differ: {', '.join(bad)}" if bad else ""))
        return 1 if bad else 0
    for p, made in remake.generate(names, args.scale, folder=folder, studies=studies):
        s = summaries.load(p)
        what = f"{s['workload']} at {s['scale']}{'' if s.get('study', 'run') == 'run' else ' ' + s['study']}"
        print(f"{what}: {s['seconds']:.0f} s, peak {s['peak_rss_bytes'] / 2**30:.1f} GiB -> {p}" if made else
              f"{what}: kept, made by this code on {s.get('date', '?')[:10]} ({p})", flush=True)
    return 0


def _llm_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("llm", help="notebook 10's study of LLM-era memory: ratios by tensor kind, peers, capacity",
                       description="Measure LLM-era memory (bf16 checkpoints, MiniLM's KV cache, a GPT-style bf16 "
                                   "training) under BPC and EBO beside the whole-tensor peers, and print the table "
                                   "and the capacity question; --write commits the study notebook 10 reads at this "
                                   "scale (data/summaries/llm: quick for nbval, default for make reproduce), --check "
                                   "remakes it and compares (checkpoints bit for bit, float computation within a "
                                   "stated tolerance).")
    p.add_argument("--scale", default="quick", help="quick (default), default, large or a footprint in MiB")
    _committed_study_arguments(p)
    p.set_defaults(func=_llm)


def _committed_study_arguments(p: argparse.ArgumentParser) -> None:
    """--seed, and --write or --check: the options of a study committed per scale (notebooks 10 and 11)."""
    p.add_argument("--seed", type=int, default=0)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--write", action="store_true", help="commit the study of this scale and seed")
    how.add_argument("--check", action="store_true", help="compare a fresh study with the committed one")


def _write_or_check(module, args: argparse.Namespace, exact: str = "") -> int | None:
    """A committed study's --check (exit 1 where a number moved beyond its tolerance) or --write; None for
    neither."""
    if args.check:
        report = module.check_committed(args.scale, args.seed)
        print(report.to_string())
        print(f"{int(report.ok.sum())} of {len(report)} within the tolerance ({module.TOLERANCE:g} relative{exact})")
        return 0 if report.ok.all() else 1
    if args.write:
        print(f"wrote {module.write_committed(args.scale, args.seed)}")
        return 0
    return None


def _llm(args: argparse.Namespace) -> int:
    import pandas as pd

    from buddylib.studies import llm

    done = _write_or_check(llm, args, "; exact where marked")
    if done is not None:
        return done
    ds = llm.study(args.scale, args.seed, progress=True)
    with pd.option_context("display.width", 200, "display.precision", 3, "display.max_columns", 20):
        print(llm.ratio_table(ds))
        print(llm.capacity(ds))
    return 0


def _granularity_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("granularity", help="notebook 11's study: targets per region instead of per allocation",
                       description="How much of BPC-32's ideal gain Buddy keeps with one target per allocation, per "
                                   "2 MiB, 64 KiB or 4 KiB region (budget, equal-traffic and naive rules; the paper's "
                                   "targets and 8x/16x besides), and the slowdown; --write commits the study notebook "
                                   "11 reads (data/summaries/granularity: quick for nbval, default for make "
                                   "reproduce), --check remakes it and compares.")
    p.add_argument("--scale", default="quick", choices=("quick", "default"), help="quick (default) or default")
    _committed_study_arguments(p)
    p.set_defaults(func=_granularity)


def _granularity(args: argparse.Namespace) -> int:
    import pandas as pd

    from buddylib.studies import granularity

    done = _write_or_check(granularity, args, "; exact where the rows are the same bytes on both machines, only "
                           "footprint and ideal ratio compared in rows of other kernels' bytes")
    if done is not None:
        return done
    ds = granularity.study(args.scale, args.seed)
    with pd.option_context("display.width", 250, "display.precision", 3, "display.max_columns", 40):
        for size in ds["size"].values:
            for suite in ("hpc", "dl", "llm"):
                t = granularity.table(ds, str(size), suite)
                if len(t):
                    print(f"\n{suite.upper()} at {size}, threshold 0.3 (mean of the workloads)\n{t}")
    return 0


def _reproduce_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="run the main job into reports/ with an index",
                       description="Run every result of the suite at default scale into a "
                                   "reports folder and write its index.")
    p.add_argument("--out", default="reports", help="reports folder (default reports)")
    p.add_argument("--bench-mib", type=_positive_int, default=256,
                   help="MiB per data kind in the compressor benchmark (default 256)")
    p.add_argument("--data", default="data", help="where workload snapshots are cached (default data)")
    p.add_argument("--regenerate", action="store_true", help="rerun workloads even if their snapshots exist")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="dask scheduler for the parallel steps, e.g. tcp://host:8786, its workers started from this "
                        "checkout with NUMBA_NUM_THREADS=1 and --nthreads 1 (the guide: docs/guide/dask.md) "
                        "(default: a local cluster, one worker per core; 'serial': one task after another in this "
                        "process)")
    p.set_defaults(func=_reproduce)


def _reproduce(args: argparse.Namespace) -> int:
    from buddylib.report import reproduce

    if args.scheduler not in (None, "serial"):
        _client(args.scheduler).close()  # now, not after the benchmark's minutes
    index = reproduce.run(Path(args.out), bench_mib=args.bench_mib, data=Path(args.data), regenerate=args.regenerate,
                          scheduler=args.scheduler)
    print(f"wrote {index}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, like every other error of the command (the usage block is
    one ``--help`` away); sub-commands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="buddy", description=DESCRIPTION, epilog="Each command has its own --help. The documentation "
                     "site (make docs) has a guide and the same reference.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_bench_parser, _analyze_parser, _workloads_parser, _capture_parser, _fixtures_parser,
                _summaries_parser, _llm_parser, _granularity_parser, _reproduce_parser):
        add(sub)
    return parser


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KIB": 1 << 10, "MIB": 1 << 20,
          "GIB": 1 << 30, "TIB": 1 << 40, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text: str) -> int:
    """A size such as 64GiB, 1.5TB or 1000000 (bytes)."""
    import re

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 64GiB, 500MB or 1000000")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError) as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"buddy {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
