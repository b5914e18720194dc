"""``make reproduce``: run every result the suite has into ``reports/`` and index it.

Steps: the compressor study (SPEC §2) on built-in data, the HPC effective ratios (SPEC §3,
§5) from the built-in workloads at default scale and their slowdown from the timing model
(SPEC §4) as tidy data, then every notebook at the same scale (SPEC §6; the figures are the
notebooks'), then the index. Workload snapshots are cached in ``data/`` and reused unless
``regenerate`` is set. The slow studies (paper-scale networks, the 480-step maturity study, the HPC
proxies at gigabyte scale) are not run: their committed summaries are read (:mod:`buddylib.studies.summaries`),
and the index lists them with the code digest and date that made them. Every other number in the index
is computed by this run; the paper's numbers sit beside them, labelled as the paper's.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from buddylib import paper, warm, workloads
from buddylib.report import bench, index_page
from buddylib.report.notebooks import notebook_paths
from buddylib.studies import experiments, remake, summaries


def hpc_ratios(data: Path, scale: str = "default", seed: int = 0, regenerate: bool = False,
               names: list[str] | None = None) -> tuple[xr.Dataset, pd.DataFrame]:
    """Run (or reuse) every HPC workload and analyse it.

    Parameters
    ----------
    data : Path
        The folder of cached runs.
    scale : str
        The runs' scale.
    seed : int
        The runs' seed.
    regenerate : bool
        Remake the runs even where cached.
    names : list of str, optional
        The workloads (None: every HPC workload).

    Returns
    -------
    last : xarray.Dataset
        The analysis of each run's final snapshot (:func:`buddylib.studies.experiments.final`).
    times : pandas.DataFrame
        Run facts per workload: ``run seconds`` (the seconds the run took when it was made, as its profile
        records, not the seconds spent reading it back here), ``footprint_MiB``, ``allocations``, ``snapshots``.
    """
    import json

    ds = experiments.workload_ratios(names or workloads.names("hpc"), scale, seed, data, regenerate=regenerate)
    last = experiments.final(ds)
    made = [json.loads(workloads.cached_run(str(n), scale, seed, data).with_suffix(".profile.json").read_text())
            .get("seconds", float("nan")) for n in ds.workload.values]
    times = pd.DataFrame({"workload": ds.workload.values, "run seconds": made,
                          "footprint_MiB": last.footprint.values / 2**20, "allocations": last.n_allocations.values,
                          "snapshots": ds.step.notnull().sum("snapshot").values})
    return last, times


def run(out: Path, bench_mib: int = 256, data: Path = Path("data"), regenerate: bool = False,
        scale: str = "default", names: list[str] | None = None, notebooks: list[str] | None = None,
        scheduler: str | None = None) -> Path:
    """Run all steps into ``out``, collect what the index shows and write it; return the index path.

    The compressor benchmark runs first, alone (it times code); then every workload run, sweep and
    study the notebooks read, as parallel tasks (:mod:`buddylib.report.pipeline`); then the notebooks, in parallel
    on the same workers; then the analyses in this process and the index (:mod:`buddylib.report.index_page`, from
    the collected :class:`~buddylib.report.index_page.Results`).

    Parameters
    ----------
    out, data : Path
        The reports folder; the folder of cached runs (each made if missing).
    bench_mib : int
        MiB per data kind of the compressor benchmark.
    regenerate : bool
        Remake the workload runs even where cached.
    scale, names, notebooks
        The scale, the workloads and the notebooks by stem (None: all): they exist so tests can run it small.
        A full run (every workload at ``"default"``) also runs what :func:`generate`'s ``full`` adds.
    scheduler : str, optional
        None: a local cluster of one worker per core; a scheduler address; or ``"serial"``: here.

    Returns
    -------
    Path
        The Markdown index, ``out/README.md``.
    """
    from buddylib.report import pipeline

    out.mkdir(parents=True, exist_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    clock = _Clock(last_run_seconds(out))
    with clock("compressor benchmark"):
        warm.warm()  # numba's kernels compiled once (or loaded), before the benchmark and the workers use them
        # the parallel crossover table and the fp16 kind (issue 42's second 16-bit kind): make bench's alone
        df = bench.run(mib=bench_mib, crossover=False, kinds=bench.KINDS)
        bench_paths = bench.write(df, out / "bench")
    all_names = [n for s in ("hpc", "dl", "dl-extra") for n in workloads.names(s) if names is None or n in names]
    full = names is None and scale == "default"
    with contextlib.ExitStack() as cluster:  # one cluster for both parallel steps: its workers start once
        with clock("workload runs, sweeps and studies (parallel)"):
            workers = cluster.enter_context(pipeline.cluster(scheduler))
            task_seconds = generate(data, scale, all_names, workers, regenerate, full=full)
        with clock("notebooks (parallel)"):  # they read only what the tasks cached in data/
            executed = run_notebooks(out, data, scale, names, notebooks, workers, clock.last)
            cluster.close()
    with clock("HPC analysis"):
        hpc, times = hpc_ratios(data, scale=scale, names=[n for n in all_names if workloads.get(n).suite == "hpc"])
        hpc_table = _hpc_table(hpc, times)
        hpc_files = _save(out / "hpc", "hpc_ratios", hpc, hpc_table)
    with clock("slowdown collection"):
        slow = experiments.slowdowns(list(hpc.workload.values), scale=scale, data=data)
        slow_table = (100 * (paper.headline(slow.slowdown, "link") - 1)).to_pandas()  # without bandwidth credit
        slow_table["UM (64 KiB pages), x"] = slow.um_slowdown.sel(um_page_bytes=64 << 10).to_series()
        slow_files = _save(out / "slowdown", "slowdown", slow, slow_table)
    with clock("DL analysis"):
        dl = _dl_numbers(data, scale, names)
    with clock("headline at the committed summaries' scales"):
        scales = _scales(hpc, slow, dl, scale, full)
    with clock("explorer in JupyterLab"):
        skipped = _explorer_screenshot(out, executed)
    task_seconds |= {f"notebook {nb['notebook']}": nb["seconds"] for nb in executed}
    bpc = df[(df.compressor == "bpc32") & (df.operation == "size")].set_index("kind")
    results = index_page.Results(
        bench_mib=bench_mib, hpc_ratio=_per_workload(paper.headline(hpc.effective_ratio)),
        hpc_slowdown=_per_workload(paper.headline(slow.slowdown)),
        hpc_slowdown_credit=_per_workload(paper.headline(slow.slowdown, "bandwidth_credit").sel(bandwidth_credit=True)),
        hpc_table=hpc_table, slowdown_table=slow_table,
        bpc_ratio={k: float(bpc.loc[k, "ratio"]) for k in bench.KINDS},
        bench_markdown=bench_paths["markdown"].read_text(),
        files={"hpc": hpc_files, "slowdown": slow_files,
               "bench": [p.relative_to(out).as_posix() for p in bench_paths.values()]},
        took=clock.took | {"total": sum(clock.took.values())}, tasks=task_seconds, environment=_environment(),
        notebooks=executed, **dl, batch_gain=_batch_gain(out), fidelity=_fidelity_tables(out), **_llm(out),
        granularity=_granularity(out), scales=scales, skipped={"explorer in JupyterLab": skipped} if skipped else {},
        summaries=remake.provenance() if full else pd.DataFrame())
    _save_steps(out, results.took, results.tasks)
    return index_page.write(results, out)


def generate(data: Path, scale: str, names: list[str], scheduler: str | None = None, regenerate: bool = False,
             full: bool = False) -> dict[str, float]:
    """Every workload run, sweep and study the notebooks and the index read, cached in ``data``, as parallel
    tasks (a progress bar counts them).

    The slow studies whose summaries are committed (:mod:`buddylib.studies.summaries`: the paper-scale networks,
    the maturity, optimizer and framework studies at default scale, the HPC proxies at gigabyte scale and at
    32 MiB, the size notebook 09's scale trend adds) are read from them, not run; only those not committed are
    tasks here.

    Parameters
    ----------
    data : Path
        The folder the results are cached in.
    scale : str
        The scale of the runs and studies.
    names : list of str
        The workloads.
    scheduler : str, optional
        As :func:`buddylib.report.pipeline.run_all` takes it: None, an address, or ``"serial"``.
    regenerate : bool
        Drop the workloads' cached runs first (their studies and sweeps follow the runs' code).
    full : bool
        Also the paper-scale runs, the HPC runs at other sizes and notebook 10's study
        (:func:`buddylib.studies.llm.study`), each where its summary is not committed.

    Returns
    -------
    dict of str to float
        Seconds per task, by label.
    """
    from buddylib.report import pipeline
    from buddylib.studies import fidelity, llm

    if regenerate:  # remake the runs: drop their cached files (studies and sweeps follow their runs' code)
        for n in names:
            for f in data.glob(f"{n}-{scale}-s0.*"):
                f.unlink()
    paper = [n for n in fidelity.PAPER_NETWORKS if full and not summaries.path(n, "paper").is_file()]
    study = [n for n in fidelity.STUDY_CNNS if n in names]

    def committed(name: str, kind: str) -> bool:
        return summaries.path(name, scale, study=kind).is_file()

    hpc_scales = ("quick", 32) if full else ()
    tasks = pipeline.generation_tasks(
        scale, names, paper_names=paper, batch_names=[n for n in experiments.BATCH_NETWORKS if n in names],
        study_names=[n for n in study if not committed(n, "caffe")], hpc_scales=hpc_scales,
        hpc_committed=[(n, summaries.scale_name(s)) for s in hpc_scales for n in workloads.names("hpc")
                       if summaries.path(n, s).is_file()],
        optimizer_names=[n for n in fidelity.OPTIMIZER_NETWORKS if n in names and not committed(n, "adam")],
        maturity_names=[n for n in study if not committed(n, "maturity")],
        llm=full and not llm.committed_path(scale, 0).is_file())
    return pipeline.run_all(tasks, data, scheduler, desc="workloads")


#: Seconds each notebook took at default scale in a fresh clone's make reproduce (AMD EPYC, 2 workers,
#: 2026-12-03; notebook 10's, reading the study the generation step cached): the order a first run starts them
#: in (the longest first), before a steps.csv of its own exists.
NOTEBOOK_SECONDS = {"10_llm_memory": 15.0, "11_target_granularity": 15.0, "05_slowdown_sensitivity": 108.0,
                    "09_fidelity": 76.0,
                    "01_compressors": 65.0, "04_over_time": 59.0, "03_dl_ratios": 41.0, "00_explore": 31.0,
                    "02_hpc_ratios": 25.0, "06_unified_memory": 22.0, "07_larger_batch": 21.0, "08_your_data": 14.0}


def run_notebooks(out: Path, data: Path, scale: str, names: list[str] | None, only: list[str] | None,
                  scheduler: str | None, last: dict[str, float] | None = None) -> list[dict[str, object]]:
    """Execute the notebooks in parallel, the longest last time first.

    Parameters
    ----------
    out, data : Path
        The reports folder; the folder of cached runs (the notebooks only read it).
    scale : str
        The notebooks' scale.
    names, only : list of str, optional
        The workloads the notebooks use; the notebooks to run, by stem (None: all).
    scheduler : str, optional
        As :func:`buddylib.report.pipeline.run_all` takes it.
    last : dict of str to float, optional
        Seconds per task of the last run (:func:`last_run_seconds`), to start the longest first; without it (or
        for a notebook it lacks), :data:`NOTEBOOK_SECONDS`.

    Returns
    -------
    list of dict
        Per notebook, in order: ``notebook`` (its stem), ``seconds`` (NaN if not timed) and ``files`` (what it
        wrote into ``out/<notebook>/``).
    """
    from buddylib.report import pipeline

    books = notebook_paths(only)
    tasks = sorted((pipeline.Task("notebook", str(nb), scale,
                                  (last or {}).get(f"notebook {nb.stem}", NOTEBOOK_SECONDS.get(nb.stem, 0.0)))
                    for nb in books), key=lambda t: -t.cost)
    seconds = pipeline.run_all(tasks, data, scheduler, desc="notebooks",  # absolute: a worker's folder is its own
                               notebook_args={"out": str(out.resolve()), "data": str(data.resolve()), "scale": scale,
                                              "names": names})
    return [{"notebook": nb.stem, "seconds": seconds.get(f"notebook:{nb.stem}", np.nan),
             "files": sorted(p.name for p in (out / nb.stem).glob("*")) if (out / nb.stem).exists() else []}
            for nb in books]


def _explorer_screenshot(out: Path, executed: list[dict[str, object]]) -> str | None:
    """Notebook 00's live controls as JupyterLab shows them (headless Chromium), beside its executed copy, so
    the report shows what exploring looks like. Without Chromium, or if the browser fails, the run goes on (the
    picture illustrates, no number depends on it) and this returns why it was skipped and how to enable it, for
    the log and the index."""
    nb = next((nb for nb in executed if nb["notebook"] == "00_explore"), None)
    if nb is None:
        return "notebook 00 did not run"
    from buddylib import explore

    (out / "00_explore").mkdir(parents=True, exist_ok=True)
    try:
        png = explore.screenshot_lab(out / "00_explore" / "jupyterlab.png")
    except Exception as err:  # a browser or server failure must not lose the run's results
        why = f"the browser failed ({type(err).__name__}: {' '.join(str(err).split())[:200]})"
        print(f"explorer screenshot not taken: {why}", flush=True)
        return why
    if png is None:
        return "no Chromium on PATH: `apt-get install chromium` (Debian) enables it"
    nb["files"] = sorted({*nb["files"], png.name})  # type: ignore[misc]
    return None


def _dl_numbers(data: Path, scale: str, names: list[str] | None) -> dict[str, dict[str, float]]:
    """DL training runs (torch installed) at the headline configuration: ratio and slowdown per network, and
    the ratio of the workloads beyond the paper (mixed precision, pre-trained weights)."""
    found: dict[str, dict[str, float]] = {}
    dl_names = [n for n in workloads.names("dl") if names is None or n in names]
    if dl_names:
        dl = experiments.final(experiments.workload_ratios(dl_names, scale, 0, data, progress=False))
        sweep = experiments.slowdowns(dl_names, scale=scale, data=data, progress=False).slowdown
        found["dl_ratio"] = _per_workload(paper.headline(dl.effective_ratio))
        found["dl_ideal"] = _per_workload(paper.headline(dl.ideal_ratio_total))
        found["dl_slowdown"] = _per_workload(paper.headline(sweep))
        found["dl_slowdown_credit"] = _per_workload(
            paper.headline(sweep, "bandwidth_credit").sel(bandwidth_credit=True))
    extra_names = [n for n in workloads.names("dl-extra") if names is None or n in names]
    if extra_names:
        extra = experiments.final(experiments.workload_ratios(extra_names, scale, 0, data, progress=False))
        found["extra_ratio"] = _per_workload(paper.headline(extra.effective_ratio, "workload"))
    return found


def _scales(hpc: xr.Dataset, slow: xr.Dataset, dl: dict[str, dict[str, float]], scale: str,
            full: bool) -> pd.DataFrame:
    """The headline per suite and size: this run's (computed from its runs), then, in a full run, each committed
    summary scale's (computed here from the summaries, :func:`buddylib.studies.fidelity.scale_headline`)."""
    from buddylib.studies import fidelity

    def gmean(d: dict[str, float]) -> float:
        return experiments.geometric_mean(np.array(list(d.values()))) if d else np.nan

    label = {"default": "128 MiB", "quick": "quick"}.get(scale, scale)
    here = "this run (its runs)"
    rows = [{"suite": "hpc", "size": label, "workloads": int(hpc.workload.size), "source": here,
             "ideal": float(paper.headline(hpc.ideal_ratio_total).mean()),
             "effective": float(paper.headline(hpc.effective_ratio).mean()),
             "slowdown": float(experiments.geometric_mean(paper.headline(slow.slowdown))),
             "slowdown_credit": float(experiments.geometric_mean(
                 paper.headline(slow.slowdown, "bandwidth_credit").sel(bandwidth_credit=True)))}]
    if dl.get("dl_ratio"):
        rows.append({"suite": "dl", "size": scale, "workloads": len(dl["dl_ratio"]), "source": here,
                     "ideal": float(np.mean(list(dl["dl_ideal"].values()))),
                     "effective": float(np.mean(list(dl["dl_ratio"].values()))),
                     "slowdown": gmean(dl["dl_slowdown"]), "slowdown_credit": gmean(dl["dl_slowdown_credit"])})
    for suite, sizes in fidelity.SUMMARY_SCALES.items() if full else ():
        for at in sizes:
            row = fidelity.scale_headline(suite, at)
            if row:
                rows.append(row)
    order = {"hpc": 0, "dl": 1}
    return pd.DataFrame(rows).sort_values("suite", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def _per_workload(da: xr.DataArray) -> dict[str, float]:
    return {str(k): float(v) for k, v in da.to_series().items()}


def _save(folder: Path, name: str, ds: xr.Dataset, table: pd.DataFrame) -> list[str]:
    """A step's dataset (netCDF) and table (CSV) under ``folder``; their paths relative to the reports."""
    folder.mkdir(parents=True, exist_ok=True)
    ds.to_netcdf(folder / f"{name}.nc")
    table.to_csv(folder / f"{name}.csv")
    return [f"{folder.name}/{name}.nc", f"{folder.name}/{name}.csv"]


def _batch_gain(out: Path) -> dict[str, float]:
    """Largest mini-batch in a fixed GPU memory, Buddy over uncompressed, per CNN (notebook 07, this run)."""
    path = out / "07_larger_batch" / "larger_batch_memory.csv"
    if not path.exists():
        return {}
    mem = pd.read_csv(path, index_col=0)
    return (mem["largest batch, Buddy"] / mem["largest batch, uncompressed"]).astype(float).to_dict()


def _llm(out: Path) -> dict[str, pd.DataFrame]:
    """Notebook 10's tables of this run: ratio per LLM tensor kind, and the capacity question (empty if it did
    not run)."""
    folder = out / "10_llm_memory"
    if not (folder / "llm_ratios.csv").exists():
        return {}
    return {"llm_ratios": pd.read_csv(folder / "llm_ratios.csv", index_col=0),
            "llm_capacity": pd.read_csv(folder / "llm_capacity.csv")}


def _granularity(out: Path) -> pd.DataFrame:
    """Notebook 11's headline table of this run: effective ratio per target granularity (empty if it did not run)."""
    path = out / "11_target_granularity" / "granularity_headline.csv"
    return pd.read_csv(path, index_col=0) if path.exists() else pd.DataFrame()


def _fidelity_tables(out: Path) -> dict[str, pd.DataFrame]:
    """The attribution tables notebook 09 wrote in this run: each headline number from ours to the paper's."""
    folder = out / "09_fidelity"
    return {name: pd.read_csv(folder / name, index_col=0) for _, name in index_page.FIDELITY_TABLES
            if (folder / name).exists()}


class _Clock:
    """Times the phases of a run; announces each with what it took last time, and the whole run's
    estimate first (from the last run's ``steps.csv``), so a person can tell how far along it is."""

    PHASES = ("compressor benchmark", "workload runs, sweeps and studies (parallel)", "HPC analysis",
              "slowdown collection", "notebooks (parallel)", "DL analysis",
              "headline at the committed summaries' scales", "explorer in JupyterLab")

    def __init__(self, last: dict[str, float]) -> None:
        self.last, self.took = last, {}
        if "total" in last:
            known = ", ".join(f"{p.split(' (')[0]} {_duration(last[p])}" for p in self.PHASES if p in last)
            print(f"make reproduce: about {_duration(last['total'])} if it does what the last run into this folder "
                  f"did ({known}); less where cached runs are reused", flush=True)

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        hint = f", last run {_duration(self.last[phase])}" if phase in self.last else ""
        print(f"[{len(self.took) + 1}/{len(self.PHASES)}] {phase}{hint}", flush=True)
        t0 = time.perf_counter()
        yield
        self.took[phase] = time.perf_counter() - t0


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _save_steps(out: Path, phases: dict[str, float], tasks: dict[str, float]) -> None:
    """``steps.csv``: seconds per phase and per task, for the next run's estimate."""
    pd.concat([pd.DataFrame({"step": list(phases), "seconds": list(phases.values()), "phase": True}),
               pd.DataFrame({"step": list(tasks), "seconds": list(tasks.values()), "phase": False})],
              ignore_index=True).to_csv(out / "steps.csv", index=False)


def last_run_seconds(out: Path) -> dict[str, float]:
    """Seconds per phase and task of the last ``make reproduce`` into ``out``.

    Parameters
    ----------
    out : Path
        The reports folder.

    Returns
    -------
    dict of str to float
        From its ``steps.csv``; empty if there is none or it cannot be read.
    """
    try:
        steps = pd.read_csv(out / "steps.csv")
        return {str(k): float(v) for k, v in zip(steps["step"], steps["seconds"], strict=True)}
    except (OSError, ValueError, KeyError, pd.errors.ParserError):
        return {}


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
    sel = hpc.sel(threshold=paper.HEADLINE["threshold"])
    table = times.set_index("workload")
    for c in hpc.compressor.values:
        table[f"ideal {c}"] = sel.ideal_ratio_total.sel(compressor=c).to_series()
    for c in ("bpc32", "bpc64"):
        table[f"effective {c}"] = sel.effective_ratio.sel(compressor=c).to_series()
    table["buddy access fraction bpc32"] = sel.buddy_access_fraction.sel(compressor="bpc32").to_series()
    return table
