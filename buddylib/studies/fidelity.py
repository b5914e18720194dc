"""Why our headline numbers differ from the paper's, measured one factor at a time (issue 13).

Each function changes one thing between this suite's default runs and the paper's setting —
the networks' size (published widths, 224x224 inputs, the recipes' batches), how long they
have trained, the framework's memory accounting, the compressor, the HPC problem size — and
returns labelled results computed from runs it makes (cached in ``data/`` like every run).
Notebook 09 and the report index put them side by side, from our default number to the
paper's; the factors are measured one at a time from the same baseline, not compounded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from tqdm import tqdm

from buddylib import paper, workloads
from buddylib.provenance import code_version, frozen
from buddylib.studies import cache, experiments, granularity_measure
from buddylib.studies.training import COMPRESSORS, adam_run, caffe_run, maturity_run
from buddylib.workloads.hpc import _schedule

#: The networks compared at the paper's scale: the paper's DL set (each has a "paper" scale here).
PAPER_NETWORKS = ("alexnet", "vgg16", "resnet50", "squeezenet", "inception", "biglstm")
#: The CNNs of the training-maturity and framework-accounting studies.
STUDY_CNNS = ("alexnet", "vgg16", "resnet50")
#: The networks of the optimizer study: the study CNNs (SGD with momentum) and BigLSTM (Adagrad).
OPTIMIZER_NETWORKS = (*STUDY_CNNS, "biglstm")


def maturity_steps(scale: str | float) -> int:
    """Training steps of the maturity runs: three times the default CNN runs' 160, 200 at quick scale.

    Parameters
    ----------
    scale : str or float
        The runs' scale.

    Returns
    -------
    int

    Examples
    --------
    >>> maturity_steps("quick"), maturity_steps("default")
    (200, 480)
    """
    return 200 if str(scale) == "quick" else 480


def maturity(names: Sequence[str], scale: str | float = "default", steps: int | None = None, snapshots: int = 9,
             seed: int = 0, data: str | Path = "data", progress: bool = True,
             summary_folder: str | Path | bool | None = None) -> xr.Dataset:
    """Compressibility against training step, over a run ``steps`` long: dims (workload, snapshot).

    Per snapshot: ``step``; the activations' bytes, share of zero elements and ideal ratio per
    compressor; the whole snapshot's ideal and effective ratio (BPC-32, threshold 30%, each snapshot
    placed as if it were the only one: the oracle policy).

    A network whose study is committed at this scale, steps and snapshots (:mod:`buddylib.studies.summaries`: the
    study CNNs at default scale, 480 steps, minutes each) is read from it, never run. The others are cached as
    ``<name>-<scale>-s<seed>.maturity-<steps>.nc``, reused while parameters and code are the same.

    Parameters
    ----------
    names : sequence of str
        DL networks.
    scale, seed : str or float, int
        The runs' scale and seed.
    steps : int, optional
        Training steps; default :func:`maturity_steps`.
    snapshots : int
        Snapshots over the run.
    data : str or pathlib.Path
        Where the runs' results are cached.
    progress : bool
        A progress bar over the networks.
    summary_folder : str, pathlib.Path or bool, optional
        Where committed studies are read (default the committed ``data/summaries/dl``; ``False`` never reads one).

    Returns
    -------
    xarray.Dataset
        Per workload besides, ``source`` says which ("summary" or "run"), ``code`` the digest of the code that made it,
        ``code_current`` whether it is this checkout's, and ``date``.

    Raises
    ------
    ValueError
        An unknown workload, or a result a frozen data folder does not hold.
    """
    steps = maturity_steps(scale) if steps is None else int(steps)
    def key(name: str) -> dict:
        return maturity_key(name, steps, snapshots)

    return _committed_or_run("maturity", names, scale, seed, Path(data), key, f".maturity-{steps}.nc",
                             lambda name: maturity_run(name, scale, seed, key(name)), "training maturity", progress,
                             summary_folder)


def _committed_or_run(kind: str, names: Sequence[str], scale: str | float, seed: int, data: Path,
                      key: Callable[[str], dict],
                      suffix: str, make, desc: str, progress: bool,
                      folder: str | Path | bool | None) -> xr.Dataset:
    """A study's results over ``names``: each network's committed summary of study ``kind`` where one matches
    ``key(name)`` (``_summary``), else its run cached in ``data`` (``_study``), with ``source``, ``code``,
    ``code_current`` and ``date`` per workload saying which."""
    kept = {n: r for n in names if (r := _summary(kind, n, scale, seed, key(n), folder)) is not None}
    rest = [n for n in names if n not in kept]
    if rest:
        ran = _study(rest, data, f"-{scale}-s{seed}{suffix}", key, make, desc, progress)
        current = [str(c) == key(n)["code"] for n, c in zip(rest, ran.code.values, strict=True)]
        ran = ran.assign(source=("workload", ["run"] * len(rest)), code_current=("workload", current),
                         date=("workload", [""] * len(rest)))
        kept |= {n: ran.sel(workload=[n]) for n in rest}
    parts = [kept[n] for n in names]
    return parts[0] if len(parts) == 1 else xr.concat(parts, "workload", join="outer",
                                                      combine_attrs="drop_conflicts")


def _summary(kind: str, name: str, scale: str | float, seed: int, key: dict,
             folder: str | Path | bool | None) -> xr.Dataset | None:
    """``name``'s committed study ``kind`` where one matches ``key``'s parameters (a maturity study's steps and
    snapshots), else None. ``folder``: where (None: the committed one; ``False``: never read one)."""
    from buddylib.studies import summaries

    if folder is False or seed != summaries.SEED:
        return None
    ds = summaries.study(name, scale, seed, None if folder is True else folder, kind, current=key["code"])
    if ds is None or any(int(ds.attrs[k]) != key[k] for k in ("steps", "snapshots") if k in key):
        return None
    return ds


#: Study code beyond the workload's and the analysis's: what measures the study (:mod:`buddylib.studies.training`),
#: and the Caffe-style accounting's own module.
STUDY_SOURCES = {"maturity": ("studies/training.py",), "adam": ("studies/training.py",),
                 "caffe": ("studies/training.py", "workloads/dl/caffe.py")}


def study_key(name: str, study: str) -> dict:
    """What network ``name``'s result of ``study`` depends on.

    The code of its run and of the analysis (:func:`~buddylib.studies.experiments.analysis_code`), and the study's
    own module; editing another workload changes none of it.

    Parameters
    ----------
    name : str
        A DL network.
    study : {"maturity", "adam", "caffe"}
        The study.

    Returns
    -------
    dict
        ``{"code": digest}``.

    Raises
    ------
    ValueError
        An unknown study or workload.
    """
    if study not in STUDY_SOURCES:
        raise ValueError(f"study {study!r}: one of {', '.join(STUDY_SOURCES)}")
    own = f"+{code_version(*STUDY_SOURCES[study])}" if STUDY_SOURCES[study] else ""
    return {"code": experiments.analysis_code(name) + own}


def maturity_key(name: str, steps: int, snapshots: int = 9) -> dict:
    """What ``name``'s maturity result depends on: its steps and snapshots, and :func:`study_key`.

    Parameters
    ----------
    name : str
        A DL network.
    steps, snapshots : int
        The run's training steps and snapshots.

    Returns
    -------
    dict
        ``steps``, ``snapshots`` and ``code``.
    """
    return {"steps": int(steps), "snapshots": int(snapshots), **study_key(name, "maturity")}


def _study(names: Sequence[str], data: Path, suffix: str, key: Callable[[str], dict], make, desc: str,
           progress: bool) -> xr.Dataset:
    """A study's results over ``names``, each network's cached as ``<name><suffix>`` in ``data``: read back while
    its attributes hold ``key`` (in a frozen folder, the committed fixtures, as it is), else made by
    ``make(name)`` and saved; a frozen folder without it is an error, never remade. Dims (workload, ...)."""
    out = []
    for name in tqdm(list(names), desc=desc, unit="workload", disable=not progress):
        path = data / f"{name}{suffix}"
        if path.exists():
            cached = cache.load_cached(path)
            if frozen(data) or all(cached.attrs.get(k) == v for k, v in key(name).items()):
                out.append(cached.assign(code=("workload", [str(cached.attrs.get("code", ""))])))
                continue
        if frozen(data):
            raise ValueError(f"{path}: not among the committed fixtures in {data}; pass another data folder")
        res = make(name)
        res.attrs.update(key(name))
        cache.save_cache(res, path)
        out.append(res.assign(code=("workload", [res.attrs["code"]])))
    return xr.concat(out, "workload", join="outer", combine_attrs="drop_conflicts")


def paper_scale(names: Sequence[str] = PAPER_NETWORKS, seed: int = 0, data: str | Path = "data",
                scale: str = "paper", progress: bool = True,
                summary_folder: str | Path | bool | None = None) -> xr.Dataset:
    """The CNNs as published (``scale="paper"``: widths, 224x224, the recipes' batches).

    A network whose run at ``scale`` is committed as sector histograms (:mod:`buddylib.studies.summaries`: the six
    at paper scale, minutes and gigabytes each) is read from them, never run; the others are runs in ``data``.

    Parameters
    ----------
    names : sequence of str
        DL networks.
    seed, data, scale
        The runs' seed, their folder and scale.
    progress : bool
        A progress bar over the networks run.
    summary_folder : str, pathlib.Path or bool, optional
        Where the summaries are read (default the committed ``data/summaries/dl``; ``False`` never reads them).

    Returns
    -------
    xarray.Dataset
        Final snapshot's ratios per compressor and per tensor kind, the activations' share of the footprint
        (``activation_share``) and, at paper scale, ``batch`` (NaN where older code made the run) and
        ``recipe_batch``. Per workload, ``source`` says which ("summary" or "run"), ``code`` the digest of the
        workload code that made it and ``code_current`` whether it is this checkout's.
    """
    from buddylib.studies import summaries

    folder = None if summary_folder is True else summary_folder
    kept = [n for n in names if folder is not False and seed == summaries.SEED
            and summaries.path(n, scale, seed, folder).is_file()]
    parts = []
    if kept:
        parts.append(summaries.workload_ratios(kept, scale, seed, folder, thresholds=experiments.THRESHOLDS,
                                               compressors=COMPRESSORS))
    runs = [n for n in names if n not in kept]
    if runs:
        ds = experiments.workload_ratios(runs, scale, seed, data, compressors=COMPRESSORS, progress=progress)
        made = [_run_code(n, scale, seed, data) for n in runs]
        parts.append(ds.assign(code=("workload", made), date=("workload", [""] * len(runs)),
                               source=("workload", ["run"] * len(runs)),
                               code_current=("workload", [c == workloads.get(n).code() for n, c in zip(runs, made,
                                                                                                      strict=True)])))
    ds = parts[0] if len(parts) == 1 else xr.concat(parts, "workload", join="outer", coords="different",
                                                    compat="equals", combine_attrs="drop_conflicts")
    ds = experiments.final(ds.sel(workload=list(names)))
    share = ds.kind_bytes.sel(kind="activations") / ds.footprint
    ds["activation_share"] = share.assign_attrs(units="1", description="activations' share of the footprint")
    ds["source"].attrs.update(description="run: a run in the data folder; summary: the committed sector histograms "
                                          "(data/summaries/dl, buddy summaries --check)")
    if scale == "paper":
        cfg = {n: workloads.get(n).PAPER for n in ds.workload.values}
        # this checkout's batch is the run's only where this checkout's code made it (NaN: older code, unknown)
        now = {n: bool(ds.code_current.sel(workload=n)) for n in ds.workload.values}
        ds["batch"] = ("workload", [cfg[n]["batch"] if now[n] else np.nan for n in ds.workload.values],
                       {"units": "samples"})
        ds["recipe_batch"] = ("workload", [cfg[n]["recipe"] or 0 for n in ds.workload.values],
                              {"units": "samples", "description": "the batch one GPU holds in the original recipe "
                                                                 "(0: none stated)"})
    return ds


def _run_code(name: str, scale: str | float, seed: int, data: str | Path) -> str:
    """The code digest a cached run's profile records (that of the workload code that made it)."""
    import json

    profile = workloads.cached_run(name, scale, seed, data).with_suffix(".profile.json")
    return str(json.loads(profile.read_text()).get("code", ""))


def optimizer(names: Sequence[str] = OPTIMIZER_NETWORKS, scale: str | float = "default", seed: int = 0,
              data: str | Path = "data", progress: bool = True,
              summary_folder: str | Path | bool | None = None) -> xr.Dataset:
    """The same training with Adam instead of the recipe's optimizer (SGD with momentum, Adagrad).

    Uses :class:`~buddylib.workloads.dl.base.Adam`. Cached as ``<name>-<scale>-s<seed>.adam.nc``, reused while
    the code is the same; a network whose study is committed (:mod:`buddylib.studies.summaries`: at default scale,
    minutes each) is read from it, as :func:`maturity` reads its own.

    Parameters
    ----------
    names : sequence of str
        DL networks.
    scale, seed, data, progress, summary_folder
        As for :func:`maturity`.

    Returns
    -------
    xarray.Dataset
        Dims (workload, compressor): the final snapshot's effective ratio per compressor (threshold 30%, targets
        over the run, as the headline) and the optimizer state's share of the footprint; ``source``, ``code``,
        ``code_current`` as in :func:`maturity`.
    """
    return _committed_or_run("adam", names, scale, seed, Path(data), lambda n: study_key(n, "adam"), ".adam.nc",
                             lambda name: adam_run(name, scale, seed), "optimizer study", progress, summary_folder)


def framework_accounting(names: Sequence[str], scale: str | float = "default", seed: int = 0,
                         data: str | Path = "data", progress: bool = True,
                         summary_folder: str | Path | bool | None = None) -> xr.Dataset:
    """A blob-based framework's memory beside PyTorch's live set, for the same training step.

    Caffe: every layer's data and diff blob for the whole iteration (:mod:`buddylib.workloads.dl.caffe`). Cached
    as ``<name>-<scale>-s<seed>.caffe.nc``, reused while the code is the same; a network whose study is committed
    is read from it, as in :func:`optimizer`.

    Parameters
    ----------
    names : sequence of str
        DL networks.
    scale, seed, data, progress, summary_folder
        As for :func:`maturity`.

    Returns
    -------
    xarray.Dataset
        Dims (workload, accounting, point): footprint, ideal and effective ratio (BPC-32, threshold 30%, targets over
        the points).
    """
    return _committed_or_run("caffe", names, scale, seed, Path(data), lambda n: study_key(n, "caffe"), ".caffe.nc",
                             lambda name: caffe_run(name, scale, seed), "framework accounting", progress,
                             summary_folder)


#: The snapshot every run on the _schedule grid has, whatever its reach: 1/7 of its upstream end
COMMON_MARK = _schedule.INTERVALS // 7


def hpc_scales(names: Sequence[str] | None = None, scales: Sequence[str | float] = ("quick", 32, "default"),
               seed: int = 0, data_dir: str | Path | None = None, progress: bool = True,
               summary_folder: str | Path | None = None) -> xr.Dataset:
    """HPC effective ratio per workload and scale: from the final snapshot, and averaged over the run's snapshots.

    The headline configuration (BPC-32, profile policy, threshold 30%: :data:`buddylib.paper.HEADLINE`). A scale
    whose runs are committed as sector histograms (:mod:`buddylib.studies.summaries`: 1 GiB, ``"large"``, and
    4 GiB, ``4096``, too slow to run for a notebook) is read from them as they are, never run: a workload without a
    summary at that scale has NaN there. The other scales come from runs in
    :func:`buddylib.studies.experiments.data_folder` of each scale (the committed quick fixtures at quick scale).

    Parameters
    ----------
    names : sequence of str, optional
        HPC proxies (default every one).
    scales : sequence of str or float
        The scales.
    seed, data_dir
        The runs' seed and folder (:func:`~buddylib.studies.experiments.data_folder`).
    progress : bool
        A progress bar over the workloads run.
    summary_folder : str, pathlib.Path or bool, optional
        Where the summaries lie (default the committed ``data/summaries/hpc``; ``False`` never reads them).

    Returns
    -------
    xarray.Dataset
        Dims (scale, workload): ``final``, ``run_mean``, ``footprint``; ``source`` says which each scale came from
        ("summary" or "run"), ``code_current`` whether a summary was made by this checkout's code of its workload (runs
        always are); ``steps`` and ``reach`` how far each run went (:func:`run_schedule`); ``ideal_at_mark`` a
        scheduled proxy's ideal ratio at :data:`COMMON_MARK`.
    """
    from buddylib.studies import summaries

    names = list(names or workloads.names("hpc"))
    folder = summaries.FOLDER if summary_folder is None else summary_folder
    parts = []
    for s in scales:
        kept = [n for n in names if folder is not False and seed == summaries.SEED
                and summaries.path(n, s, seed, folder).is_file()]
        if kept:
            ds, source = summaries.workload_ratios(kept, s, seed, folder, thresholds=[paper.HEADLINE["threshold"]],
                                                   compressors=[paper.HEADLINE["compressor"]]), "summary"
            current = ds.code_current
        else:
            ds, source = experiments.workload_ratios(names, s, seed, experiments.data_folder(s, seed, data_dir),
                                                     progress=progress), "run"
            current = xr.ones_like(ds.workload, dtype=bool)
        eff = paper.headline(ds.effective_ratio)
        last = experiments.final(ds)
        steps = last.step.broadcast_like(last.footprint)  # one step coordinate where every run has the same
        done = [run_schedule(str(n), s, seed, folder if source == "summary" else None, data_dir, int(step))
                for n, step in zip(last.workload.values, steps.values, strict=True)]
        scheduled = xr.DataArray(["end_time" in d for d in done], dims="workload", coords={"workload": last.workload})
        at_mark = paper.headline(ds.ideal_ratio_total).where(ds.step == COMMON_MARK).max("snapshot").where(scheduled)
        parts.append(xr.Dataset({"final": paper.headline(last.effective_ratio), "run_mean": eff.mean("snapshot"),
                                 "footprint": last.footprint, "source": ((), source),
                                 "code_current": current.drop_vars(current.coords),
                                 "steps": ("workload", [d["cycles"] for d in done]),
                                 "reach": ("workload", [d["reach"] for d in done]),
                                 "ideal_at_mark": at_mark.drop_vars(at_mark.coords.keys() - {"workload"})})
                     .reset_coords(drop=True).expand_dims(scale=[str(s)]))
    out = xr.concat(parts, "scale", join="outer", coords="minimal", compat="override")
    out["code_current"] = out.code_current.fillna(False).astype(bool)
    out["final"].attrs.update(units="1", description="effective ratio of the final snapshot")
    out["run_mean"].attrs.update(units="1", description="effective ratio averaged over the run's snapshots")
    out["source"].attrs.update(description="run: a run of this scale; summary: the committed sector histograms "
                                           "(data/summaries/hpc, buddy summaries --check)")
    out["code_current"].attrs.update(description="whether this checkout's code of the workload made it")
    out["steps"].attrs.update(units="1", description="iterations (or time-step cycles) the run went through")
    out["reach"].attrs.update(units="1", description="share of its upstream input's end the run went to "
                                                     "(buddylib.workloads.hpc._schedule; 1: the whole run)")
    out["ideal_at_mark"].attrs.update(units="1", description="a scheduled proxy's ideal ratio at 1/7 of its "
                                                             "upstream end (its end time or iteration count, "
                                                             "buddylib.workloads.hpc._schedule), a snapshot every "
                                                             "size has (else NaN)")
    return out


def run_schedule(name: str, scale: str | float, seed: int, summary_folder: str | Path | None,
                 data_dir: str | Path | None, last_step: int) -> dict:
    """How far ``name``'s run at ``scale`` went.

    Parameters
    ----------
    name : str
        An HPC proxy.
    scale, seed
        The run's scale and seed.
    summary_folder : str or pathlib.Path, optional
        Read the schedule from the summary in this folder, else from the saved run's profile in ``data_dir``
        (:func:`~buddylib.studies.experiments.data_folder`).
    data_dir : str or pathlib.Path, optional
        The runs' folder.
    last_step : int
        The run's last step, for a proxy without a schedule.

    Returns
    -------
    dict
        A scheduled proxy's recorded schedule (its ``_schedule.Scheduled.schedule``), else
        ``{"cycles": last_step, "reach": 1.0}``: the whole run.
    """
    import json

    from buddylib.studies import summaries

    if summary_folder is not None:  # the caller has read and checked it whole: its JSON alone here
        done = json.loads(summaries.path(name, scale, seed, summary_folder).read_text()).get("schedule")
    else:
        profile = experiments.data_folder(scale, seed, data_dir) / f"{name}-{scale}-s{seed}.profile.json"
        done = json.loads(profile.read_text()).get("schedule") if profile.is_file() else None
    return done or {"cycles": last_step, "reach": 1.0}


def attribution(ours: float, factors: dict[str, float], target: float, label: str = "this suite") -> pd.DataFrame:
    """One headline number from ours to the paper's, a row per measured factor.

    Each factor is measured from the same baseline, not compounded.

    Parameters
    ----------
    ours : float
        This suite's number (the first row).
    factors : dict of str to float
        Each factor's value.
    target : float
        The paper's number (the last row, ``"paper"``).
    label : str
        The first row's name: say the scale.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``factor``: ``value``, ``change`` and the ``share of the gap`` to ``target`` it closes (the
        baseline row's is 0, the paper row's 1; no gap: NaN).

    Raises
    ------
    ValueError
        A factor named ``label`` or ``"paper"``.
    """
    if label in factors or "paper" in factors:
        raise ValueError(f"attribution: a factor named {label!r} or 'paper' would hide the baseline or the target")
    rows = [(label, ours), *factors.items(), ("paper", target)]
    df = pd.DataFrame(rows, columns=["factor", "value"]).set_index("factor")
    gap = target - ours
    df["change"] = df["value"] - ours
    df["share of the gap"] = df["change"] / gap if gap else np.nan
    return df


def on_subset(per_network: pd.Series, subset: Sequence[str], value: float) -> float:
    """A factor measured on some of the networks, as the mean over all of them.

    Its change on ``subset`` applied to the mean of ``per_network``. A mean over the subset set beside the mean
    over all would count the networks left out as an effect of the factor.

    Parameters
    ----------
    per_network : pandas.Series
        The baseline per network.
    subset : sequence of str
        The networks the factor was measured on.
    value : float
        Their mean under it.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        An empty ``subset``, or a network of it not in ``per_network``.

    Examples
    --------
    >>> import pandas as pd
    >>> on_subset(pd.Series({"a": 1.0, "b": 3.0}), ["a"], 2.0)
    3.0
    """
    missing = [n for n in subset if n not in per_network.index]
    if missing or not len(subset):
        raise ValueError(f"on_subset: {missing or 'no networks'} not among {list(per_network.index)}")
    return float(per_network.mean()) + float(value) - float(per_network.loc[list(subset)].mean())


def substituted(per_network: pd.Series, values: dict[str, float]) -> float:
    """The mean over ``per_network`` with some networks' values replaced by measured ones (the others as they are).

    A factor measured network by network on some of them.

    Parameters
    ----------
    per_network : pandas.Series
        The baseline per network.
    values : dict of str to float
        The measured values.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        A network of ``values`` not in ``per_network``.

    Examples
    --------
    >>> import pandas as pd
    >>> substituted(pd.Series({"a": 1.0, "b": 3.0}), {"a": 2.0})
    2.5
    """
    missing = [n for n in values if n not in per_network.index]
    if missing:
        raise ValueError(f"substituted: {missing} not among {list(per_network.index)}")
    mine = per_network.astype(float).copy()
    mine.loc[list(values)] = list(values.values())
    return float(mine.mean())


def dtype_shares(names: Sequence[str], scale: str | float = "default", seed: int = 0,
                 data_dir: str | Path | None = None) -> pd.DataFrame:
    """Share of each workload's final-snapshot bytes per dtype and kind ("float64 field"...).

    What kind of state a workload holds, to tell which pull a mean ratio down (dense floating-point state compresses
    least).

    Parameters
    ----------
    names : sequence of str
        Built-in workloads.
    scale, seed, data_dir
        The runs' scale, seed and folder (:func:`~buddylib.studies.experiments.data_folder`).

    Returns
    -------
    pandas.DataFrame
        One row per workload, a column per "dtype kind".
    """
    from buddylib import snapshot

    rows = {}
    data = experiments.data_folder(scale, seed, data_dir)
    for name in names:
        last = snapshot.load(workloads.cached_run(name, scale, seed, data))[-1]
        total = sum(a.nbytes for a in last.allocations)
        shares: dict[str, float] = {}
        for a in last.allocations:
            key = f"{a.dtype} {a.kind}"
            shares[key] = shares.get(key, 0.0) + a.nbytes / total
        rows[name] = shares
    return pd.DataFrame(rows).T.fillna(0.0).rename_axis("workload")


#: The inputs notebook 09 compares, per proxy whose upstream input SPEC does not publish: {proxy: {initial:
#: label}}, the suite's first (the workload's default)
INPUTS = {"ostencil": {"parboil": "random field (Parboil's input, the suite's)", "heated_face": "heated face"},
          "minighost": {"minighost": "every cell 48 (miniGhost 1.0's start, the suite's)",
                        "random": "a fresh integer 1..100 per cell (the fill miniGhost means)"}}


def input_sensitivity(name: str, scale: str | float = "quick", seed: int = 0,
                      data_dir: str | Path | None = None) -> pd.DataFrame:
    """``name``'s ratio under each of its inputs (:data:`INPUTS`) at ``scale``.

    How much the proxy's number rests on an input SPEC does not publish. The suite's own input is the suite's run,
    read where the runs are cached (:func:`~buddylib.studies.experiments.data_folder` of ``data_dir``: a report has
    made it already); the others are run here.

    Parameters
    ----------
    name : str
        A proxy of :data:`INPUTS`.
    scale, seed, data_dir
        The runs' scale, seed and folder.

    Returns
    -------
    pandas.DataFrame
        One row per input: the effective (headline configuration) and ideal ratio of the final snapshot, the mean
        effective ratio over the run, and the footprint.

    Raises
    ------
    ValueError
        ``name`` has no alternative inputs.
    """
    from buddylib import analysis, snapshot

    if name not in INPUTS:
        raise ValueError(f"input_sensitivity: {name!r} has no alternative inputs; one of {', '.join(INPUTS)}")
    rows = {}
    for i, (initial, label) in enumerate(INPUTS[name].items()):
        if i == 0:
            snaps = snapshot.load(workloads.cached_run(name, scale, seed, experiments.data_folder(scale, seed,
                                                                                                  data_dir)))
        else:
            w = workloads.get(name)
            w.initial = initial
            snaps = w.run(scale, seed=seed, compressors=[paper.HEADLINE["compressor"]], progress=False).snapshots
        ds = analysis.analyze(snaps, compressors=[paper.HEADLINE["compressor"]],
                              thresholds=[paper.HEADLINE["threshold"]], progress=False)
        eff = paper.headline(ds.effective_ratio)
        rows[label] = {
            "effective, final": float(eff.isel(snapshot=-1)), "ideal, final": float(
                paper.headline(ds.ideal_ratio_total).isel(snapshot=-1)), "effective, run mean": float(eff.mean()),
            "footprint (MiB)": sum(a.nbytes for a in snaps[-1].allocations) / 2**20}
    return pd.DataFrame(rows).T.rename_axis(f"{name} input")


def md_neighbours(cells: Sequence[int] = (6, 8, 11, 15, 24)) -> pd.DataFrame:
    """Why md's neighbour list compresses less as the system grows.

    A row of a full list holds the atoms of 27 cells in three planes of cells, so its ids spread over about two
    planes of atoms, a number that grows as N^(2/3): each doubling of it costs a bit plane in every entry.

    Parameters
    ----------
    cells : sequence of int
        FCC lattices of ``cells**3`` unit cells (md's start).

    Returns
    -------
    pandas.DataFrame
        Per lattice, the neighbour list as first built (atoms in miniMD's creation order) and after the first
        rebuild (atoms sorted by cell, miniMD's ``Atom::sort``): its ideal BPC-32 ratio, and the spread of the ids
        one 128-byte entry holds (median over entries of log2 of the largest minus the smallest id).
    """
    from buddylib.compressors import sectors
    from buddylib.workloads.hpc.md import MD

    rows = []
    for nc in cells:
        w = MD()
        w.setup_lattice(int(nc))
        per_side = w.nside
        for order in ("as created", "sorted by cell"):
            if order == "sorted by cell":
                w.rebuild(sort=True)
            used = w.neigh_list[: int(w.neigh_offsets[-1])]
            entries = used[: used.size // 32 * 32].reshape(-1, 32).astype(np.int64)
            spread = np.log2(entries.max(axis=1) - entries.min(axis=1) + 1)
            s = sectors(used, paper.HEADLINE["compressor"])
            rows.append({"unit cells": f"{nc}^3", "atoms": w.n, "cells per side": per_side, "ids": order,
                         "neighbour list, ideal ratio": 4 * s.size / max(int(s.sum()), 1),
                         "id spread per entry, log2 (median)": float(np.median(spread)),
                         "two planes of atoms, log2": float(np.log2(2 * w.n / per_side))})
    return pd.DataFrame(rows).set_index(["unit cells", "ids"])


def allocation_targets(name: str, scales: Sequence[str | float], seed: int = 0, data_dir: str | Path | None = None,
                       summary_folder: str | Path | None = None) -> pd.DataFrame:
    """Which of ``name``'s allocations move its ratio with size.

    A scale with a committed summary (:mod:`buddylib.studies.summaries`) is read from it, the others from runs (as
    :func:`hpc_scales` does).

    Parameters
    ----------
    name : str
        An HPC proxy.
    scales : sequence of str or float
        The scales compared.
    seed, data_dir
        The runs' seed and folder.
    summary_folder : str or pathlib.Path, optional
        Where the summaries lie (default the committed ``data/summaries/hpc``).

    Returns
    -------
    pandas.DataFrame
        Per allocation and scale: the target the headline configuration chose (BPC-32, profile policy, threshold 30%:
        over every snapshot of the run), the share of entries the next more aggressive target would overflow in the
        snapshot worst for it (above the threshold, or the chosen target would be that one), the allocation's ideal
        ratio in its first and final snapshot, and its share of the footprint.
    """
    from buddylib import analysis, snapshot
    from buddylib.studies import summaries

    h = paper.HEADLINE
    folder = summaries.FOLDER if summary_folder is None else Path(summary_folder)
    rows = []
    for s in scales:
        path = summaries.path(name, s, seed, folder)
        if path.is_file():
            ds = summaries.analyze(summaries.load(path), compressors=[h["compressor"]], thresholds=[h["threshold"]])
        else:
            run = workloads.cached_run(name, s, seed, experiments.data_folder(s, seed, data_dir))
            ds = analysis.analyze(snapshot.load(run), compressors=[h["compressor"]], thresholds=[h["threshold"]],
                                  progress=False)
        ds = ds.sel(compressor=h["compressor"])
        target = ds.chosen_target.sel(threshold=h["threshold"]).isel(snapshot=-1)
        share = ds.allocation_bytes.isel(snapshot=-1) / ds.allocation_bytes.isel(snapshot=-1).sum()
        for a in ds.allocation.values:
            chosen = float(target.sel(allocation=a))
            higher = [t for t in ds.target.values if t > chosen]
            nxt = ds.overflow_fraction.sel(allocation=a, target=min(higher)) if higher else None
            worst = int(nxt.argmax("snapshot")) if higher else -1
            rows.append({"scale": str(s), "allocation": str(a), "target": chosen,
                         "next target overflows (worst snapshot)": float(nxt.max("snapshot")) if higher else np.nan,
                         "worst snapshot": int(ds.step[worst]) if higher else -1,
                         "ideal, first": float(ds.ideal_ratio.sel(allocation=a).isel(snapshot=0)),
                         "ideal, final": float(ds.ideal_ratio.sel(allocation=a).isel(snapshot=-1)),
                         "share of footprint": float(share.sel(allocation=a))})
    table = pd.DataFrame(rows).set_index(["allocation", "scale"]).unstack("scale")
    return table.reindex(columns=[str(s) for s in scales], level="scale")


#: The committed summaries' scales of each suite, the headline restated at each (:func:`scale_headline`): notebook
#: 11's (one home for both).
SUMMARY_SCALES = granularity_measure.SUMMARY_SCALES


def scale_headline(suite: str, scale: str | float, names: Sequence[str] | None = None, seed: int = 0,
                   threshold: float = 0.3, progress: bool = False) -> dict[str, object]:
    """The headline at a committed summary's scale, computed here from the summaries.

    The capacity from their histograms, the slowdown from their accesses
    (:func:`buddylib.studies.summaries.sensitivity`).

    Parameters
    ----------
    suite : {"hpc", "dl"}
        The suite.
    scale : str or float
        A committed summaries' scale (:data:`SUMMARY_SCALES`).
    names : sequence of str, optional
        The workloads (default every HPC proxy, or :data:`PAPER_NETWORKS`); those without a summary are left out.
    seed, threshold
        The summaries' seed, the buddy threshold.
    progress : bool
        A progress bar over the timing model.

    Returns
    -------
    dict
        The suite's mean ideal and effective ratios (and geometric mean), and the geometric-mean slowdown at the
        paper's GPU and link without and with bandwidth credit (NaN where no summary keeps its accesses); ``timed``
        says how many did; ``size`` as a reader says it (:func:`buddylib.studies.summaries.size_label`). Empty where
        no summary is committed.
    """
    from buddylib import paper
    from buddylib.studies import summaries

    names = list(names) if names is not None else (workloads.names("hpc") if suite == "hpc" else
                                                   list(PAPER_NETWORKS))
    names = [n for n in names if summaries.path(n, scale, seed).is_file()]
    if not names:
        return {}
    ratios = experiments.final(summaries.workload_ratios(names, scale, seed, thresholds=[threshold],
                                                         compressors=[paper.HEADLINE["compressor"]]))
    eff = paper.headline(ratios.effective_ratio, threshold=threshold)
    slow = summaries.sensitivity(names, scale, seed, threshold=threshold, progress=progress)
    row: dict[str, object] = {"suite": suite, "size": summaries.size_label(scale), "workloads": len(names),
                              "ideal": float(paper.headline(ratios.ideal_ratio_total).mean()),
                              "effective": float(eff.mean()), "effective_geomean": float(
                                  experiments.geometric_mean(eff)), "timed": 0,
                              "slowdown": np.nan, "slowdown_credit": np.nan,
                              "source": "committed summaries (data/summaries), computed here",
                              "current": bool(ratios.code_current.all())}
    if slow is not None:
        s = paper.headline(slow.slowdown, "bandwidth_credit", threshold=threshold)
        row |= {"timed": int(slow.workload.size),
                "slowdown": float(experiments.geometric_mean(s.sel(bandwidth_credit=False))),
                "slowdown_credit": float(experiments.geometric_mean(s.sel(bandwidth_credit=True)))}
    return row
