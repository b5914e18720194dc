"""The committed quick-scale runs the notebooks read, so nbval compares the same numbers on every machine.

Not every workload writes the same bytes on every CPU. The HPC proxies do, bit for bit, on every
x86-64 CPU with FMA and AVX2 (their elementary functions come from the C library, never from numpy's
per-instruction-set SIMD kernels: ``workloads/hpc/_libm.py``). PyTorch training does not: its CPU
kernels are chosen per instruction set (AVX-512, AVX2, default), and a convolution rounded otherwise
moves which activations ReLU zeroes. So the notebooks' quick-scale defaults read runs made once and
committed in ``data/fixtures/quick`` (per-entry sectors, access profiles, index arrays, notebook 07's
mini-batch measurements and notebook 09's training-maturity, framework-accounting and optimizer studies;
a few MB), and the analysis and timing model on them give the same
numbers everywhere. ``make fixtures`` remakes them and the notebooks' committed outputs; :func:`check`
remakes the runs in a temporary folder and compares: HPC bit for bit, DL within :data:`TOLERANCE`.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from tqdm import tqdm

from buddylib import provenance, snapshot, workloads
from buddylib.compressors import DEFAULT_COMPRESSORS
from buddylib.provenance import MANIFEST, RUN_SOURCES, code_version, fma_avx2, frozen, machine
from buddylib.studies import cache, experiments, fidelity

#: This checkout's data folder, and the committed fixtures in it (defined with what marks a folder as frozen).
DATA, FOLDER, SCALE, SEED = provenance.DATA, provenance.FIXTURES, provenance.FIXTURE_SCALE, provenance.FIXTURE_SEED
#: Notebook 08's recorded model: examples/own_model.py recorded by ``buddy capture`` (``make fixtures`` remakes it;
#: tests/test_capture.py records it again and compares).
EXAMPLE = DATA.parent / "examples" / "own_model.py"
RECORDED = DATA / "fixtures" / "recorded" / "own_model.nc"
SUITES = ("hpc", "dl", "dl-extra")
#: Largest relative change of a remade DL run's ideal ratio (any snapshot, any compressor) or of a
#: mini-batch measurement's device bytes that :func:`check` accepts: about three times the largest
#: change measured between AVX-512 and the basic instruction set at quick scale (3.1%, inception's
#: ideal ratio; 5.2% at default scale, vgg16), so another CPU does not fail it; see the README.
TOLERANCE = 0.10
#: Each workload's fixture-run digest (quick scale, seed 0: the bytes of every snapshot) as recorded on other machines
#: beside the fixtures' own (``buddy fixtures --record-digests`` adds or replaces this machine's): a run here that
#: gives one of them repeated a recorded run of the same seed byte for byte, so a test need not run it a second time.
DIGESTS = DATA / "fixtures" / "digests.json"


def generate(folder: str | Path = FOLDER, names: Sequence[str] | None = None, progress: bool = True) -> Path:
    """Remake the fixtures in ``folder``.

    Every workload's quick run (seed 0), notebook 07's mini-batch measurements, notebook 09's studies, and the
    :data:`~buddylib.provenance.MANIFEST` saying where and how they were made. Written into a temporary folder and
    moved into place, so a failure leaves the old fixtures.

    Parameters
    ----------
    folder : str or pathlib.Path
        Where the fixtures go.
    names : sequence of str, optional
        The workloads (default every one of ``SUITES``).
    progress : bool
        Progress bars.

    Returns
    -------
    pathlib.Path
        ``folder``.
    """
    folder = Path(folder)
    names = list(names) if names is not None else [n for s in SUITES for n in workloads.names(s)]
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        for name in tqdm(names, desc="fixtures", unit="workload", disable=not progress):
            workloads.cached_run(name, SCALE, SEED, tmp, regenerate=True)
        batch = [n for n in experiments.BATCH_NETWORKS if n in names]
        if batch:
            experiments.memory_vs_batch(batch, experiments.BATCHES[SCALE], SCALE, SEED, tmp, progress=progress)
        study = [n for n in fidelity.STUDY_CNNS if n in names]
        if study:  # notebook 09's training-maturity and framework-accounting studies
            fidelity.maturity(study, SCALE, seed=SEED, data=tmp, progress=progress)
            fidelity.framework_accounting(study, SCALE, SEED, tmp, progress=progress)
        optimizer = [n for n in fidelity.OPTIMIZER_NETWORKS if n in names]
        if optimizer:  # and its optimizer study
            fidelity.optimizer(optimizer, SCALE, SEED, tmp, progress=progress)
        manifest = {
            "made_by": "buddylib.studies.fixtures.generate (make fixtures)",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "scale": SCALE, "seed": SEED, "code": code_version(*RUN_SOURCES), "machine": machine(),
            "workloads": {n: _profile(tmp, n)["digest"] for n in names},
            "files": {p.name: _sha256(p) for p in sorted(tmp.iterdir()) if not cache.cached_result(p)},
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def check(folder: str | Path = FOLDER, names: Sequence[str] | None = None, progress: bool = False,
          runs: Mapping[str, workloads.Run] | None = None) -> pd.DataFrame:
    """Remake the fixtures' runs here, in a temporary folder, and compare them with the committed ones.

    Parameters
    ----------
    folder : str or pathlib.Path
        The committed fixtures.
    names : sequence of str, optional
        The workloads (default every one the fixtures hold).
    progress : bool
        Progress bars.
    runs : mapping of str to Run, optional
        Runs of some of ``names`` already made here at the fixtures' scale and seed, holding every compressor the
        analysis compares (a test's own run), compared instead of being made again.

    Returns
    -------
    pandas.DataFrame
        One row per workload (and per network of the mini-batch study, ``batch:NAME``): whether its bytes are
        identical (run digests), whether they must be (HPC, on a CPU with FMA and AVX2 and the same C library as the
        fixtures'), whether allocations, sizes and steps match, the largest relative change of an ideal ratio (or of
        a batch's device bytes), and ``ok`` (within :data:`TOLERANCE`).

    Raises
    ------
    FileNotFoundError
        ``folder`` holds no fixtures.
    ValueError
        A run of ``runs`` of another workload, scale or seed, or without the compressors compared.
    """
    folder = Path(folder)
    if not frozen(folder):
        raise FileNotFoundError(f"{folder}: no {MANIFEST}; `make fixtures` makes the fixtures")
    made = json.loads((folder / MANIFEST).read_text())
    names = list(names) if names is not None else list(made["workloads"])
    same_libm = fma_avx2() and made["machine"]["fma_avx2"] and made["machine"]["libc"] == machine()["libc"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, run in (runs or {}).items():
            held = set.intersection(*(set(a.sectors) for s in run.snapshots for a in s.allocations))
            if (run.workload.name, run.scale, run.seed) != (name, SCALE, SEED) or not set(DEFAULT_COMPRESSORS) <= held:
                raise ValueError(f"runs[{name!r}]: a run of {run.workload.name} at scale {run.scale}, seed {run.seed} "
                                 f"with {sorted(held)}; the check needs {name} at scale {SCALE}, seed {SEED} with "
                                 f"{list(DEFAULT_COMPRESSORS)}")
            run.save(tmp)  # cached_run reuses it: made by this code
        fresh = experiments.workload_ratios(names, SCALE, SEED, tmp, progress=progress)
        kept = experiments.workload_ratios(names, SCALE, SEED, folder, progress=False)
        for n in names:
            a, b = kept.sel(workload=n), fresh.sel(workload=n)
            identical = _profile(Path(tmp), n)["digest"] == made["workloads"][n]
            rows.append({"workload": n, "suite": workloads.get(n).suite, "identical": identical,
                         "exact_expected": workloads.get(n).suite == "hpc" and same_libm,
                         "structure_equal": _layout(folder, n) == _layout(Path(tmp), n),
                         "max_rel_change": _max_rel(a.ideal_ratio_total, b.ideal_ratio_total)})
        batch = [n for n in experiments.BATCH_NETWORKS if n in names]
        if batch:
            args = (batch, experiments.BATCHES[SCALE], SCALE, SEED)
            kept_b = experiments.memory_vs_batch(*args, folder, progress=False)
            fresh_b = experiments.memory_vs_batch(*args, tmp, progress=progress)
            for n in batch:
                a, b = kept_b.sel(workload=n), fresh_b.sel(workload=n)
                rows.append({"workload": f"batch:{n}", "suite": "dl", "identical": False, "exact_expected": False,
                             "structure_equal": a.kind_bytes.equals(b.kind_bytes),
                             "max_rel_change": _max_rel(a.device_footprint, b.device_footprint)})
    out = pd.DataFrame(rows).set_index("workload")
    out["ok"] = out.identical | (~out.exact_expected & out.structure_equal & (out.max_rel_change <= TOLERANCE))
    return out


def known_digests(name: str, path: str | Path = DIGESTS) -> dict[str, list[str]]:
    """The recorded digests of ``name``'s fixture run.

    Parameters
    ----------
    name : str
        A workload.
    path : str or pathlib.Path
        The digests recorded on other machines (:data:`DIGESTS`).

    Returns
    -------
    dict of str to list of str
        ``{digest: [where it was recorded, ...]}``: the fixtures' machine, and each machine of ``path``.
    """
    made = json.loads((FOLDER / MANIFEST).read_text())
    entries = [{"machine": made["machine"], "date": made["date"], "workloads": made["workloads"]}]
    entries += json.loads(Path(path).read_text())["machines"] if Path(path).exists() else []
    known: dict[str, list[str]] = {}
    for e in entries:
        if name in e["workloads"]:
            known.setdefault(e["workloads"][name], []).append(f"{e['machine']['cpu']} ({e['date']})")
    return known


def record_digests(names: Sequence[str] | None = None, path: str | Path = DIGESTS, progress: bool = True) -> Path:
    """Run each workload's fixture run here and record its digest in ``path`` under this machine.

    Replaces an entry made on a machine that :func:`~buddylib.provenance.machine` describes the same; its other
    workloads' digests are kept.

    Parameters
    ----------
    names : sequence of str, optional
        The workloads (default every one of ``SUITES``).
    path : str or pathlib.Path
        The digests' file (:data:`DIGESTS`).
    progress : bool
        A progress bar.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    path = Path(path)
    names = list(names) if names is not None else [n for s in SUITES for n in workloads.names(s)]
    here = machine()
    digests = {n: workloads.get(n).run(SCALE, seed=SEED, compressors=["bpc32"]).digest
               for n in tqdm(names, desc="digests", unit="workload", disable=not progress)}
    book = json.loads(path.read_text()) if path.exists() else {
        "about": "Digests of each workload's fixture run (quick scale, seed 0) recorded on these machines by "
                 "`buddy fixtures --record-digests` (buddylib.studies.fixtures.record_digests)", "machines": []}
    before = next((e["workloads"] for e in book["machines"] if e["machine"] == here), {})
    book["machines"] = [e for e in book["machines"] if e["machine"] != here] + [{
        "machine": here, "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "scale": SCALE, "seed": SEED, "code": code_version(*RUN_SOURCES), "workloads": before | digests}]
    path.write_text(json.dumps(book, indent=1) + "\n")
    return path


def relative_change(kept: object, fresh: object) -> np.ndarray:
    """Each number's change from a committed study to the same study made again, as its checks compare them.

    Parameters
    ----------
    kept, fresh : array_like
        The committed numbers and the new ones, of one shape.

    Returns
    -------
    numpy.ndarray
        ``|fresh - kept| / |kept|`` (``|fresh - kept|`` where ``kept`` is 0); 0 where the two are equal or both NaN,
        infinite where only one is NaN.

    Examples
    --------
    >>> relative_change([2.0, 0.0, np.nan, np.nan], [3.0, 0.5, np.nan, 1.0]).tolist()
    [0.5, 0.5, 0.0, inf]
    """
    x, y = np.asarray(kept, float), np.asarray(fresh, float)
    same = (np.isnan(x) & np.isnan(y)) | (x == y)
    with np.errstate(invalid="ignore"):
        rel = np.where(same, 0.0, np.abs(y - x) / np.where(x == 0, 1.0, np.abs(x)))
    return np.nan_to_num(rel, nan=np.inf, posinf=np.inf)


def _max_rel(a: xr.DataArray, b: xr.DataArray) -> float:
    rel = np.abs(b / a - 1).where(np.isfinite(a) & (a > 0))
    return float(rel.max(skipna=True).fillna(0))


def compare_recordings(kept: str | os.PathLike, fresh: str | os.PathLike) -> dict[str, Any]:
    """Two recordings of the same script (:mod:`buddylib.userdata.capture`, notebook 08's) compared.

    Parameters
    ----------
    kept, fresh : str or os.PathLike
        The recordings' snapshot files (each with its ``.profile.json`` beside it).

    Returns
    -------
    dict
        ``structure_equal``: whether their snapshots hold the same allocations and steps; ``profile_equal``: their
        profiles the same kernels; ``max_rel_change``: the largest relative change of an ideal ratio (any snapshot,
        any compressor), which a CPU with other float kernels may move (inf where the structures differ).
    """
    from buddylib.analysis import analyze

    runs = [snapshot.load(p) for p in (kept, fresh)]
    profiles = [json.loads(Path(p).with_suffix(".profile.json").read_text())["kernels"] for p in (kept, fresh)]
    out = {"structure_equal": _layout_of(runs[0]) == _layout_of(runs[1]), "profile_equal": profiles[0] == profiles[1],
           "max_rel_change": float("inf")}
    if out["structure_equal"]:
        comps = sorted(set.intersection(*(set(a.sectors) for r in runs for s in r for a in s.allocations)))
        a, b = (analyze(r, comps, progress=False).ideal_ratio_total for r in runs)
        out["max_rel_change"] = _max_rel(a, b)
    return out


def _layout(folder: Path, name: str) -> list[tuple]:
    """Each snapshot's step and allocations (name, kind, dtype, shape, bytes): what must not change."""
    return _layout_of(snapshot.load(folder / f"{name}-{SCALE}-s{SEED}.nc"))


def _layout_of(snaps: Sequence[snapshot.Snapshot]) -> list[tuple]:
    return [(s.step, [(a.name, a.kind, a.dtype, a.shape, a.nbytes) for a in s.allocations]) for s in snaps]


def _profile(folder: Path, name: str) -> dict[str, Any]:
    return json.loads((folder / f"{name}-{SCALE}-s{SEED}.profile.json").read_text())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
