"""``make reproduce``: run every result the suite has into ``reports/`` and index it.

Steps: the compressor study (SPEC §2) on built-in data, the HPC effective ratios (SPEC §3,
§5) from the built-in workloads at default scale and their slowdown from the timing model
(SPEC §4) as tidy data, then every notebook at the same scale (SPEC §6; the figures are the
notebooks'), then the index. Workload snapshots are cached in ``data/`` and reused unless
``regenerate`` is set. Every number in the index is computed by this run; the paper's numbers
sit beside them, labelled as the paper's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from buddylib import bench, experiments, paper, workloads

THRESHOLD = paper.HEADLINE["threshold"]
COMPRESSOR = paper.HEADLINE["compressor"]


def hpc_ratios(data: Path, scale: str = "default", seed: int = 0, regenerate: bool = False,
               names: list[str] | None = None) -> tuple[xr.Dataset, pd.DataFrame]:
    """Run (or reuse) every HPC workload and analyse it: final snapshots, and run facts."""
    ds = experiments.workload_ratios(names or workloads.names("hpc"), scale, seed, data, regenerate=regenerate)
    last = experiments.final(ds)
    times = pd.DataFrame({"workload": ds.workload.values, "seconds": ds.seconds.values,
                          "footprint_MiB": last.footprint.values / 2**20, "allocations": last.n_allocations.values,
                          "snapshots": ds.step.notnull().sum("snapshot").values})
    return last, times


NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def notebook_paths(only: list[str] | None = None) -> list[Path]:
    """The numbered notebooks (or ``only`` these, by stem), in order."""
    return [nb for nb in sorted(NOTEBOOKS.glob("[0-9]*.ipynb")) if only is None or nb.stem in only]


def execute_notebook(nb: Path, out: str, data: str, scale: str = "default", names: list[str] | None = None) -> None:
    """Execute one notebook with papermill at ``scale`` into ``out``: ipynb, HTML, and the figures and tidy
    data it writes into ``out/<notebook>/``."""
    import nbconvert
    import papermill

    out_path = Path(out)
    (out_path / "notebooks").mkdir(parents=True, exist_ok=True)
    params: dict[str, object] = {"out_dir": str((out_path / nb.stem).resolve())}
    declared = _parameters(nb)
    paper_scale = "paper" if scale == "default" else scale  # notebook 09: the CNNs as published
    for key, value in (("scale", scale), ("data_dir", str(Path(data).resolve())), ("names", names),
                       ("paper_scale", paper_scale)):
        if key in declared and value is not None:
            params[key] = value
    executed = out_path / "notebooks" / nb.name
    papermill.execute_notebook(str(nb), str(executed), parameters=params, cwd=str(NOTEBOOKS),
                               progress_bar=False, kernel_name="python3")
    html, _ = nbconvert.HTMLExporter().from_filename(str(executed))
    executed.with_suffix(".html").write_text(html)


def _parameters(nb: Path) -> set[str]:
    """Names assigned in the notebook's cell tagged ``parameters``."""
    import ast

    import nbformat

    for cell in nbformat.read(nb, as_version=4).cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return {t.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)}
    return set()


def run(out: Path, bench_mib: int = 256, data: Path = Path("data"), regenerate: bool = False,
        scale: str = "default", names: list[str] | None = None, notebooks: list[str] | None = None,
        scheduler: str | None = None) -> Path:
    """Run all steps into ``out`` and write ``out/README.md``; return the index path.

    The compressor benchmark runs first, alone (it times code); then every workload run, sweep and
    study the notebooks read, as parallel tasks (:mod:`buddylib.pipeline`; ``scheduler``: None for a
    local cluster of one worker per core, an address, or "serial"); then the notebooks, in parallel;
    then the index. ``scale``, ``names`` (workloads) and ``notebooks`` exist so tests can run it small.
    """
    from buddylib import fidelity, pipeline

    out.mkdir(parents=True, exist_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    estimate = _last_run_seconds(out)
    if estimate:
        print(f"make reproduce: the last run here took {estimate / 60:.0f} min", flush=True)
    t0 = time.perf_counter()
    df = bench.run(mib=bench_mib)
    bench_paths = bench.write(df, out / "bench")
    bench_took = time.perf_counter() - t0

    all_names = [n for s in ("hpc", "dl", "dl-extra") for n in workloads.names(s) if names is None or n in names]
    full = names is None and scale == "default"
    if regenerate:  # remake the runs: drop their cached files (studies and sweeps follow their runs' code)
        for n in all_names:
            for f in data.glob(f"{n}-{scale}-s0.*"):
                f.unlink()
    t0 = time.perf_counter()
    tasks = pipeline.generation_tasks(
        scale, all_names, paper_names=fidelity.PAPER_CNNS if full else (),
        batch_names=[n for n in experiments.BATCH_NETWORKS if n in all_names],
        study_names=[n for n in fidelity.STUDY_CNNS if n in all_names], hpc_scales=("quick", 32) if full else ())
    step_seconds = pipeline.run_all(tasks, data, scheduler, desc="generate")
    generate_took = time.perf_counter() - t0

    t0 = time.perf_counter()
    hpc, times = hpc_ratios(data, scale=scale, names=[n for n in all_names if workloads.get(n).suite == "hpc"])
    hpc_dir = out / "hpc"
    hpc_dir.mkdir(exist_ok=True)
    hpc.to_netcdf(hpc_dir / "hpc_ratios.nc")
    table = _hpc_table(hpc, times)
    table.to_csv(hpc_dir / "hpc_ratios.csv")
    hpc_paths = {"nc": hpc_dir / "hpc_ratios.nc", "csv": hpc_dir / "hpc_ratios.csv"}
    hpc_took = time.perf_counter() - t0

    t0 = time.perf_counter()
    slow = experiments.slowdowns(list(hpc.workload.values), scale=scale, data=data)
    slow_dir = out / "slowdown"
    slow_dir.mkdir(exist_ok=True)
    slow.to_netcdf(slow_dir / "slowdown.nc")
    slow_table = (100 * (paper.headline(slow.slowdown, "link") - 1)).to_pandas()  # without bandwidth credit
    slow_table["UM (64 KiB pages), x"] = slow.um_slowdown.sel(um_page_bytes=64 << 10).to_series()
    slow_table.to_csv(slow_dir / "slowdown.csv")
    slow_paths = {"nc": slow_dir / "slowdown.nc", "csv": slow_dir / "slowdown.csv"}
    slow_took = time.perf_counter() - t0
    nv = paper.headline(slow.slowdown).values
    nv_credit = paper.headline(slow.slowdown, "bandwidth_credit").sel(bandwidth_credit=True).values

    t0 = time.perf_counter()
    books = notebook_paths(notebooks)
    nb_tasks = [pipeline.Task("notebook", str(nb), scale, 0.0) for nb in books]
    nb_seconds = pipeline.run_all(nb_tasks, data, scheduler, desc="notebooks",
                                  notebook_args={"out": str(out), "data": str(data), "scale": scale, "names": names})
    notebooks_took = time.perf_counter() - t0
    executed = pd.DataFrame([{"notebook": nb.stem, "seconds": nb_seconds.get(f"notebook:{nb}", np.nan),
                              "files": sorted(p.name for p in (out / nb.stem).glob("*")) if (out / nb.stem).exists()
                              else []} for nb in books])
    step_seconds |= {f"notebook {nb.stem}": nb_seconds.get(f"notebook:{nb}", np.nan) for nb in books}

    eff = paper.headline(hpc.effective_ratio).values
    config = f"{COMPRESSOR.upper().replace('BPC', 'BPC-')}, threshold {THRESHOLD:.0%}"
    machine = f"{paper.HEADLINE['gpu']} + {paper.HEADLINE['link']}"
    dl_names = [n for n in workloads.names("dl") if names is None or n in names]
    if dl_names:  # DL training runs (torch installed): ratio and slowdown, same definitions
        dl = experiments.final(experiments.workload_ratios(dl_names, scale, 0, data, progress=False))
        dl_eff = paper.headline(dl.effective_ratio).values
        dl_sweep = experiments.slowdowns(dl_names, scale=scale, data=data).slowdown
        dl_slow = paper.headline(dl_sweep).values
        dl_credit = paper.headline(dl_sweep, "bandwidth_credit").sel(bandwidth_credit=True).values
        dl_row = (f"| effective capacity, DL training ({config}, mean of {dl_eff.size}) | "
                  f"{dl_eff.mean():.2f}x (geometric mean {np.exp(np.log(dl_eff).mean()):.2f}x) | {paper.DL_RATIO}x |")
        dl_slow_row = _slowdown_rows(f"{machine}, DL", dl_slow, dl_credit)
    else:
        dl_row = f"| effective capacity, DL training | not computed in this run | {paper.DL_RATIO}x |"
        dl_slow_row = f"| slowdown vs ideal GPU, {machine}, DL | not computed in this run | {paper.SLOWDOWN_TEXT} |"
    extra_names = [n for n in workloads.names("dl-extra") if names is None or n in names]
    extra_row = []
    if extra_names:  # beyond the paper: mixed precision, pre-trained weights
        extra = experiments.final(experiments.workload_ratios(extra_names, scale, 0, data, progress=False))
        extra_eff = paper.headline(extra.effective_ratio, "workload").to_series()
        extra_row = [f"| effective capacity beyond the paper ({config}) | "
                     + ", ".join(f"{n} {v:.2f}x" for n, v in extra_eff.items()) + " | not in the paper |"]
    batch_csv = out / "07_larger_batch" / "larger_batch_memory.csv"
    if batch_csv.exists():  # written by notebook 07 in this run
        mem = pd.read_csv(batch_csv, index_col=0)
        gain = mem["largest batch, Buddy"] / mem["largest batch, uncompressed"]
        extra_row.append(f"| largest mini-batch in a fixed GPU memory, Buddy / uncompressed ({len(gain)} CNNs, "
                         f"notebook 07) | {gain.min():.2f}x to {gain.max():.2f}x (mean {gain.mean():.2f}x) | "
                         "larger batches (case study) |")
    bpc = df[(df.compressor == "bpc32") & (df.operation == "size")].set_index("kind")
    lines = [
        "# buddylib reports",
        "",
        "Generated by `make reproduce`; every number in the 'this suite' column is computed by this run "
        f"from data it generated. The paper's column is quoted from {paper.CITATION}.",
        "",
        "## Headline numbers",
        "",
        "| quantity | this suite | paper |",
        "|---|---|---|",
        f"| effective capacity, HPC workloads ({config}, mean of {eff.size}) | "
        f"{eff.mean():.2f}x (geometric mean {np.exp(np.log(eff).mean()):.2f}x) | "
        f"{paper.HPC_RATIO_ISCA}x (ISCA), {paper.HPC_RATIO_ARXIV}x (arXiv) |",
        dl_row,
        _slowdown_rows(f"{machine}, HPC", nv, nv_credit),
        dl_slow_row,
        *extra_row,
        "",
        "Our HPC workloads are proxies that run the same algorithms on the same kinds of data structures as "
        "the paper's SPEC ACCEL and DOE applications, at a smaller scale; they are not those binaries. "
        "The slowdown beside the paper's is a net slowdown against an ideal GPU without bandwidth credit: "
        "every accessed entry costs its uncompressed HBM bytes, so Buddy Compression only adds time (the "
        f"paper's basis: {paper.SLOWDOWN_BASIS}). The row below it credits compressed entries with the HBM "
        "sectors they save (SPEC §4); there a negative slowdown is a speed-up.",
        "",
        "## Results",
        "",
        "| result | files | took |",
        "|---|---|---|",
        "| HPC effective and ideal ratios per workload | "
        + ", ".join(f"[{p.name}](hpc/{p.name})" for p in hpc_paths.values()) + f" | {hpc_took:.0f} s |",
        "| slowdown (timing model) per workload, link/latency/threshold/metadata-cache sweeps, UM | "
        + ", ".join(f"[{p.name}](slowdown/{p.name})" for p in slow_paths.values()) + f" | {slow_took:.0f} s |",
        "| compressor study: speed and ratio beside zstd/lz4 | "
        + ", ".join(f"[{p.name}](bench/{p.name})" for p in bench_paths.values()) + f" | {bench_took:.0f} s |",
    ]
    for row in executed.itertuples():
        lines.append(f"| notebook {row.notebook}: [executed](notebooks/{row.notebook}.ipynb), "
                     f"[HTML](notebooks/{row.notebook}.html) | "
                     + ", ".join(f"[{f}]({row.notebook}/{f})" for f in row.files) + f" | {row.seconds:.0f} s |")
    lines += _fidelity_section(out)
    lines += [
        "",
        "## HPC workloads",
        "",
        *_figure(out, "02_hpc_ratios/hpc_ratios.png", "HPC effective and ideal ratios (notebook 02)"),
        "```",
        table.round(3).to_string(),
        "```",
        "",
        "## Slowdown (timing model)",
        "",
        "Without bandwidth credit (the paper's comparison). Columns: link presets "
        f"(percent slowdown on a {paper.HEADLINE['gpu']} at threshold {THRESHOLD:.0%}), then Unified-Memory "
        "oversubscription by the same "
        "capacity factor (times slower).",
        "",
        *_figure(out, "05_slowdown_sensitivity/slowdown_sensitivity.png", "slowdown and its sensitivity (notebook 05)"),
        "```",
        slow_table.round(2).to_string(),
        "```",
        "",
        "## Compressors on built-in data",
        "",
    ]
    for kind in bench.KINDS:
        lines.append(f"- BPC-32 ideal ratio on {kind} data ({bench_mib} MiB): {bpc.loc[kind, 'ratio']:.2f}x")
    lines += [
        "",
        "![compressor benchmark](bench/bench.png)",
        "",
        bench_paths["markdown"].read_text().replace("# Compressor benchmark", "### Compressor benchmark"),
    ]
    phases = {"compressor benchmark": bench_took, "workload runs, sweeps and studies (parallel)": generate_took,
              "HPC analysis": hpc_took, "slowdown collection": slow_took, "notebooks (parallel)": notebooks_took}
    phases["total"] = sum(phases.values())
    steps = pd.concat([pd.DataFrame({"step": list(phases), "seconds": list(phases.values()), "phase": True}),
                       pd.DataFrame({"step": list(step_seconds), "seconds": list(step_seconds.values()),
                                     "phase": False})], ignore_index=True)
    steps.to_csv(out / "steps.csv", index=False)
    slowest = steps[~steps.phase].sort_values("seconds", ascending=False).head(12)
    lines += ["", "## Step times", "", f"On {os.cpu_count()} cores; tasks run in parallel within a phase.", "",
              "| phase | took |", "|---|---|", *(f"| {k} | {v:.0f} s |" for k, v in phases.items()), "",
              "| slowest tasks | took |", "|---|---|",
              *(f"| {r.step} | {r.seconds:.0f} s |" for r in slowest.itertuples())]
    lines += ["", "## Environment", "", *(f"- {k}: {v}" for k, v in _environment().items()), ""]
    index = out / "README.md"
    index.write_text("\n".join(lines))
    from nbconvert.filters import markdown2html

    html = markdown2html("\n".join(lines)).replace(".md)", ".html)")
    (out / "index.html").write_text(f"<!doctype html><meta charset='utf-8'><title>buddylib reports</title>"
                                    f"<body style='font-family:sans-serif;max-width:1100px;margin:auto'>{html}")
    return index


def _fidelity_section(out: Path) -> list[str]:
    """The attribution tables notebook 09 wrote in this run: each headline number from ours to the paper's."""
    folder = out / "09_fidelity"
    tables = [("DL effective ratio (mean of the five CNNs)", "dl_attribution.csv"),
              ("HPC effective ratio (mean of the HPC proxies)", "hpc_attribution.csv"),
              ("HPC slowdown, %", "slowdown_hpc_attribution.csv"), ("DL slowdown, %", "slowdown_dl_attribution.csv")]
    if not (folder / tables[0][1]).exists():
        return []
    lines = ["", "## Fidelity: where our numbers and the paper's part",
             "", "Each row is one factor measured from the same baseline (rows do not add up); the last row is "
             "the paper's number. From notebook 09.", ""]
    lines += _figure(out, "09_fidelity/attribution.png", "attribution (notebook 09)")
    for title, name in tables:
        df = pd.read_csv(folder / name, index_col=0)
        lines += [f"**{title}**", "", "| factor | value | change | share of the gap |", "|---|---|---|---|"]
        lines += [f"| {f} | {r['value']:.3g} | {r['change']:+.3g} | {_percent(r['share of the gap'])} |"
                  for f, r in df.iterrows()]
        lines.append("")
    return lines


def _slowdown_rows(what: str, plain: np.ndarray, credited: np.ndarray) -> str:
    """Two index rows: the slowdown without bandwidth credit beside the paper's, and with it."""
    def stats(x: np.ndarray) -> str:
        return (f"{100 * (np.exp(np.log(x).mean()) - 1):+.1f}% (range {100 * (x.min() - 1):+.1f}% to "
                f"{100 * (x.max() - 1):+.1f}%)")

    return (f"| slowdown vs ideal GPU, {what} (geometric mean of {plain.size}) | {stats(plain)} | "
            f"{paper.SLOWDOWN_TEXT} |\n"
            f"| the same, compressed entries credited with the HBM bytes they save | {stats(credited)} | "
            "not the paper's comparison |")


def _last_run_seconds(out: Path) -> float | None:
    """How long the last ``make reproduce`` into ``out`` took (its ``steps.csv``), for an estimate."""
    try:
        steps = pd.read_csv(out / "steps.csv")
        return float(steps.loc[steps.step == "total", "seconds"].iloc[0])
    except (OSError, ValueError, IndexError, KeyError):
        return None


def _figure(out: Path, path: str, title: str) -> list[str]:
    """Markdown lines showing a notebook's figure, if that notebook ran (the figures are the notebooks')."""
    return [f"![{title}]({path})", ""] if (out / path).exists() else []


def _environment() -> dict[str, str]:
    import platform
    import sys

    env = bench.environment()
    env["python"] = sys.version.split()[0]
    env["platform"] = platform.platform()
    try:
        import torch

        env["torch"] = torch.__version__
    except ImportError:
        env["torch"] = "not installed"
    return env


def _hpc_table(hpc: xr.Dataset, times: pd.DataFrame) -> pd.DataFrame:
    sel = hpc.sel(threshold=THRESHOLD)
    table = times.set_index("workload")
    for c in hpc.compressor.values:
        table[f"ideal {c}"] = sel.ideal_ratio_total.sel(compressor=c).to_series()
    for c in ("bpc32", "bpc64"):
        table[f"effective {c}"] = sel.effective_ratio.sel(compressor=c).to_series()
    table["buddy access fraction bpc32"] = sel.buddy_access_fraction.sel(compressor="bpc32").to_series()
    return table


def _percent(x: float) -> str:
    return "" if x != x else f"{x:.0%}"
