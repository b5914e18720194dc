"""Remake and check the committed summaries of the slow studies (``buddy summaries [--check]``, ``make
reproduce-paper`` / ``check-paper``), and list them for the report index.

Reading and writing a summary is :mod:`buddylib.studies.summaries`'s job, below the studies that read them
(:mod:`buddylib.studies.fidelity`); making one runs those studies, so it lives here, above them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from buddylib import workloads
from buddylib.provenance import machine
from buddylib.studies import fidelity
from buddylib.studies.summaries import (
    DL_SCALE,
    DL_TOLERANCE,
    FOLDER,
    MATURITY_SCALE,
    ROOT,
    SEED,
    STUDIES,
    STUDY_FORMAT,
    STUDY_LABELS,
    STUDY_TOLERANCE,
    USED_BY,
    _to_dict,
    committed,
    committed_files,
    compare,
    compare_close,
    compare_study,
    load,
    made_here,
    make,
    path,
    scale_name,
    write,
)


def make_study(name: str, scale: str | float = MATURITY_SCALE, seed: int = SEED,
               study: str = "maturity") -> dict[str, Any]:
    """One network's ``study`` made here, as a summary to commit.

    Parameters
    ----------
    name : str
        A DL network.
    scale : str or float
        Its scale.
    seed : int
        Its seed.
    study : {"maturity", "adam", "caffe"}
        ``"maturity"``: :func:`~buddylib.studies.fidelity.maturity` at its steps for ``scale``;
        ``"adam"``: :func:`~buddylib.studies.fidelity.optimizer`;
        ``"caffe"``: :func:`~buddylib.studies.fidelity.framework_accounting`.

    Returns
    -------
    dict
        Its result, a Dataset of a few dozen numbers, as :meth:`xarray.Dataset.to_dict` under ``result``, with the code
        digest that made it (the study's cache key), the date, the machine, the seconds and this process's peak memory.

    Raises
    ------
    ValueError
        An unknown study or workload.
    """
    t0 = time.perf_counter()
    if study == "maturity":
        key = fidelity.maturity_key(name, fidelity.maturity_steps(scale))
        ds = fidelity.maturity_run(name, scale, seed, key)
    elif study in ("adam", "caffe"):
        key = fidelity.study_key(name, study)
        ds = (fidelity.adam_run if study == "adam" else fidelity.caffe_run)(name, scale, seed)
    else:
        raise ValueError(f"study {study!r}: one of {', '.join(s for s in STUDIES if s != 'run')}")
    return {"format": STUDY_FORMAT, "study": study, "workload": name, "scale": scale_name(scale), "seed": seed,
            **key, "seconds": round(time.perf_counter() - t0, 1), **made_here(), "result": _to_dict(ds)}


#: One summary :func:`generate` makes: (workload, scale, study).
Item = tuple[str, str, str]


def planned(names: Sequence[str] | None = None, scales: Sequence[str | float] | None = None, seed: int = SEED,
            folder: str | Path | None = None, studies: Sequence[str] = tuple(STUDIES)) -> list[Item]:
    """The (workload, scale, study) summaries :func:`generate` makes.

    Parameters
    ----------
    names : sequence of str, optional
        Built-in workloads (default every HPC proxy and the paper's six networks).
    scales : sequence of str or float, optional
        Without: an HPC proxy at every scale committed for it in ``folder`` and at 1 GiB; a DL network at
        :data:`~buddylib.studies.summaries.DL_SCALE`, its studies at :data:`~buddylib.studies.summaries.MATURITY_SCALE`.
    seed : int
        The seed.
    folder : str or pathlib.Path, optional
        Where the HPC summaries committed are looked for (default :data:`~buddylib.studies.summaries.FOLDER`).
    studies : sequence of str
        ``"run"``: the runs; ``"maturity"``, ``"caffe"`` (:data:`buddylib.studies.fidelity.STUDY_CNNS`) and ``"adam"``
        (:data:`~buddylib.studies.fidelity.OPTIMIZER_NETWORKS`): those studies of those of ``names`` that they cover.

    Returns
    -------
    list of tuple of str
        (workload, scale, study), each an ``Item``.

    Raises
    ------
    ValueError
        An unknown study, workload or scale.
    """
    for st in studies:
        if st not in STUDIES:
            raise ValueError(f"study {st!r}: one of {', '.join(STUDIES)}")
    if names is None:
        names = [*workloads.names("hpc"), *[n for n in fidelity.PAPER_NETWORKS if n in workloads.names("dl")]]
    names = list(names)
    for n in names:
        workloads.get(n)  # fail on an unknown name before running anything
    hpc = [n for n in names if workloads.get(n).suite == "hpc"]
    dl = [n for n in names if n not in hpc]
    out: list[Item] = []
    if "run" in studies:
        if scales is not None:
            out += [(n, scale_name(s), "run") for s in scales for n in hpc]
        else:
            kept = Path(folder) if folder is not None else FOLDER
            made = {(n, s) for f in kept.glob(f"*-s{seed}.json")
                    for n, s in [f.name[: -len(f"-s{seed}.json")].rsplit("-", 1)] if n in hpc}
            out += [(n, s, "run") for n, s in sorted(made | {(n, "large") for n in hpc},
                                                     key=lambda p: (workloads.footprint_bytes(p[1]), p[0]))]
        out += [(n, scale_name(s), "run") for s in (scales or [DL_SCALE]) for n in dl]
    covers = {"maturity": fidelity.STUDY_CNNS, "caffe": fidelity.STUDY_CNNS, "adam": fidelity.OPTIMIZER_NETWORKS}
    out += [(n, scale_name(s), st) for st in covers if st in studies for s in (scales or [MATURITY_SCALE]) for n in dl
            if n in covers[st]]
    return out


def generate(names: Sequence[str] | None = None, scales: Sequence[str | float] | None = None, seed: int = SEED,
             folder: str | Path | None = None, studies: Sequence[str] = tuple(STUDIES)) -> Iterator[tuple[Path, bool]]:
    """Make the :func:`planned` summaries that are missing or were made by other code, one after another, each in a
    fresh process, and write them as each is done.

    Each in its own process so that its peak memory is its own, and returned to the system after. A summary this
    checkout's code made (:func:`code_current`) is kept: remaking it gives the same bits (``make check-paper``), so a
    remake of hours that stopped goes on where it stopped.

    Parameters
    ----------
    names, scales, seed, studies
        As for :func:`planned` (default: every committed HPC summary and every HPC proxy at 1 GiB, the paper's six
        networks at paper scale, the maturity study).
    folder : str or pathlib.Path, optional
        Where they are written (default each suite's committed folder).

    Yields
    ------
    tuple of (pathlib.Path, bool)
        Each summary's file and whether it was made now (False: kept, made by this code before).

    Raises
    ------
    ValueError
        What :func:`planned` rejects.
    subprocess.CalledProcessError
        A summary's process failed.
    """
    for n, scale, study in planned(names, scales, seed, folder, studies):
        target = path(n, scale, seed, folder, study)
        if target.is_file() and _current(target):
            yield target, False
            continue
        subprocess.run([sys.executable, "-m", "buddylib.studies.remake", n, scale, str(seed), str(target.parent),
                        study], check=True)
        yield target, True


def _current(target: Path) -> bool:
    """Whether the summary in ``target`` reads and was made by this checkout's code."""
    try:
        return code_current(load(target))
    except (ValueError, KeyError):  # damaged, or of a format this code does not read: made again
        return False


def code_current(summary: dict[str, Any]) -> bool:
    """Whether this checkout's code is the code that made ``summary``.

    Parameters
    ----------
    summary : dict
        A summary (:func:`~buddylib.studies.summaries.load`).

    Returns
    -------
    bool
        For a run, against its workload's :meth:`~buddylib.workloads.base.Workload.code`; for a study, its cache key's.
    """
    if summary.get("study", "run") != "run":
        return summary["code"] == fidelity.study_key(summary["workload"], summary["study"])["code"]
    return summary["code"] == workloads.get(summary["workload"]).code()


def provenance(folder: str | Path | None = None) -> pd.DataFrame:
    """One row per committed summary, for the report index, which must say which numbers it did not compute itself.

    Parameters
    ----------
    folder : str or pathlib.Path, optional
        The summaries' folder (default the committed ones of every suite, with the LLM and granularity studies).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``summary`` (what it is): what reads it, the code digest that made it and whether it is still this
        checkout's code, the date and machine, and the seconds the run took; empty where there is none.
    """
    rows = []
    for f in committed_files(folder):  # their metadata alone: loading each would read and check its histograms
        s = json.loads(f.read_text())
        study = s.get("study", "run")
        suite = workloads.get(s["workload"]).suite
        size = {"large": "1 GiB", "4096": "4 GiB"}.get(s["scale"], f"{s['scale']} scale")
        what = f"{s['workload']}, {'HPC ' if suite == 'hpc' else ''}{size}" + (
            f", maturity ({s['steps']} steps)" if study == "maturity" else
            f", {STUDY_LABELS[study]}" if study in STUDY_LABELS else "")
        rows.append({"summary": what, "used by": USED_BY[study if study != "run" else
                                                         "hpc" if suite == "hpc" else "dl"],
                     "code": s["code"], "code current": code_current(s), "made": s["date"][:10],
                     "machine": s["machine"]["cpu"], "run s": float(s["seconds"])})
    rows += _llm_provenance() if folder is None else []
    return pd.DataFrame(rows).set_index("summary") if rows else pd.DataFrame()


def _llm_provenance() -> list[dict[str, Any]]:
    """The rows of notebooks 10's and 11's committed studies (:mod:`buddylib.studies.llm`,
    :mod:`buddylib.studies.granularity`: one netCDF file per scale)."""
    from buddylib.studies import cache, granularity, llm

    rows = []
    for module, label, used, stem in ((llm, "LLM-era memory study", USED_BY["llm"], "llm"),
                                      (granularity, "target granularity study", USED_BY["granularity"],
                                       "granularity")):
        for f in sorted(module.COMMITTED.glob(f"{stem}-*-s*.nc")):
            a = cache.load_cached(f).attrs
            rows.append({"summary": f"{label}, {a['scale']} scale", "used by": used,
                         "code": a["code"], "made": a["date"][:10],
                         "code current": a["code"] == (module.key(a["scale"], int(a.get("seed", 0)))
                                                       if module is granularity else module.key()),
                         "machine": json.loads(a["machine"])["cpu"], "run s": float(a["seconds"])})
    return rows


def check(names: Sequence[str] | None = None, scales: Sequence[str | float] | None = None, seed: int = SEED,
          folder: str | Path | None = None, studies: Sequence[str] = tuple(STUDIES),
          tolerance: float = DL_TOLERANCE, study_tolerance: float = STUDY_TOLERANCE) -> pd.DataFrame:
    """Remake the committed summaries in a temporary folder and compare them with the committed ones.

    An HPC proxy's bit for bit (:func:`~buddylib.studies.summaries.compare`), a DL run's ratios
    (:func:`~buddylib.studies.summaries.compare_close`) within ``tolerance`` and a study's numbers
    (:func:`~buddylib.studies.summaries.compare_study`) within ``study_tolerance`` (relative), since torch's float
    bytes depend on the CPU. Writes nothing in ``folder``.

    Parameters
    ----------
    names, scales, seed, folder, studies
        Which summaries (all by default), as for :func:`~buddylib.studies.summaries.committed`.
    tolerance, study_tolerance : float
        The relative changes accepted of a DL run's ratios and of a study's numbers.

    Returns
    -------
    pandas.DataFrame
        One row per summary, indexed by (workload, scale, study): the comparison's columns, ``check_seconds`` and
        ``exact_expected``: whether this machine must reproduce the bytes (an HPC proxy on FMA and AVX2, the same C
        library as the machine that made them).

    Raises
    ------
    FileNotFoundError
        No summary matches.
    """
    kept = committed(names, scales, seed, folder, studies)
    if not kept:
        raise FileNotFoundError(f"{folder or ROOT}: no summaries of {', '.join(names or ['any workload'])} at "
                                f"{', '.join(map(str, scales or ['any scale']))}; `buddy summaries` makes them")
    here = machine()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in kept:
            t0 = time.perf_counter()
            study = s.get("study", "run")
            fresh = load(next(generate([s["workload"]], [s["scale"]], seed, tmp, [study]))[0])
            hpc = workloads.get(s["workload"]).suite == "hpc"
            if study != "run":
                row = compare_study(s, fresh, study_tolerance)
            elif hpc:
                row = compare(s, fresh) | {"tolerance": 0.0}
            else:
                row = compare_close(s, fresh, tolerance)
            row["study"] = study
            row["exact_expected"] = bool(hpc and here["fma_avx2"] and s["machine"]["fma_avx2"]
                                         and s["machine"]["libc"] == here["libc"])
            row["check_seconds"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
    return pd.DataFrame(rows).set_index(["workload", "scale", "study"])


if __name__ == "__main__":  # one summary of generate(): python -m buddylib.studies.remake NAME SCALE SEED DIR [STUDY]
    _name, _scale, _seed, _folder, *_study = sys.argv[1:]
    if _study in ([], ["run"]):
        write(make(_name, _scale, int(_seed)), _folder)
    else:
        write(make_study(_name, _scale, int(_seed), *_study), _folder)
