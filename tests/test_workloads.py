"""Properties every registered workload keeps, at quick scale."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from buddylib import experiments, fixtures, workloads
from buddylib.compressors import get as get_compressor
from buddylib.provenance import MANIFEST
from buddylib.snapshot import KINDS
from buddylib.workloads.base import QUICK_LIMIT

SUITES = {suite: workloads.names(suite) for suite in fixtures.SUITES}


class _EveryWorkload:
    """The properties every workload keeps; one subclass per suite, so that pytest-xdist (``--dist loadscope``:
    a class is a unit of work) runs the suites' quick runs on different workers at the same time."""

    def test_snapshots_and_profile(self, quick_run: workloads.Run) -> None:
        run = quick_run
        assert len(run.snapshots) >= 8
        assert run.snapshots[0].step == 0 and run.snapshots[-1].step == run.workload.n_steps
        # minilm holds the real pre-trained model (87 MiB of weights) at every scale; the rest stay small
        limit = {"minilm": 128 << 20, "efficientnet_lite0": 256 << 20}.get(run.workload.name, QUICK_LIMIT)
        assert run.footprint <= limit, f"{run.workload.name}: quick footprint {run.footprint / 2**20:.2f} MiB"
        for snap in run.snapshots:
            assert {a.kind for a in snap.allocations} <= set(KINDS)
            for a in snap.allocations:
                assert a.nbytes == np.asarray(a.data).nbytes
                assert a.sectors["bpc32"].size == a.n_entries
        assert run.profile.kernels and all(k.flops >= 0 for k in run.profile.kernels)
        assert run.profile.to_dict() == workloads.AccessProfile.from_dict(run.profile.to_dict()).to_dict()

    def test_bpc_round_trips_every_allocation(self, quick_run: workloads.Run) -> None:
        for width in ("bpc32", "bpc64"):
            bpc = get_compressor(width)
            for snap in quick_run.snapshots[:: max(1, len(quick_run.snapshots) // 3)]:
                for a in snap.allocations:
                    raw = np.asarray(a.data)
                    assert bpc.decode(bpc.encode(raw)) == raw.tobytes(), f"{a.name} step {snap.step}"


@pytest.fixture(scope="class")
def quick_run(request: pytest.FixtureRequest) -> workloads.Run:
    """One workload's quick run, kept for its class's tests (each class parametrizes it by its suite's names)."""
    return workloads.get(request.param).run("quick", seed=0, keep_bytes=True, compressors=["bpc32", "bdi"])


def _each(suite: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("quick_run", SUITES[suite], indirect=True, scope="class")


@_each("hpc")
class TestHPC(_EveryWorkload):
    def test_same_seed_same_bytes(self, quick_run: workloads.Run) -> None:
        """The same seed gives the same bytes: those of the committed fixture, made on another machine
        (bit-identical on CPUs with FMA and AVX2 and the same C library), else those of a second run here."""
        name = quick_run.workload.name
        made = json.loads((fixtures.FOLDER / MANIFEST).read_text())
        if fixtures.fma_avx2() and made["machine"]["libc"] == fixtures.machine()["libc"] and \
                made["machine"]["fma_avx2"]:
            assert quick_run.digest == made["workloads"][name]
        else:
            assert workloads.get(name).run("quick", seed=0, compressors=["bpc32"]).digest == quick_run.digest


class _DL(_EveryWorkload):
    def test_same_seed_same_bytes(self, quick_run: workloads.Run, monkeypatch: pytest.MonkeyPatch) -> None:
        """The same seed gives the same bytes: those of a second run here. That second run is the fixture check's
        (:func:`buddylib.fixtures.check`): remade here, the run (and its mini-batch measurement, for the networks
        of notebook 07) holds the committed fixture's allocations, with ideal ratios (device bytes) within the
        stated tolerance. (PyTorch's kernels differ per instruction set: not the fixture's bytes.)"""
        name = quick_run.workload.name
        saved: list[workloads.Run] = []
        save = workloads.Run.save
        monkeypatch.setattr(workloads.Run, "save", lambda run, folder: saved.append(run) or save(run, folder))
        report = fixtures.check(names=[name])
        assert [(r.workload.name, r.digest) for r in saved] == [(name, quick_run.digest)]
        assert set(report.index) == {name} | ({f"batch:{name}"} if name in experiments.BATCH_NETWORKS else set())
        assert report.ok.all(), report.to_string()
        assert report.structure_equal.all(), report.to_string()
        assert report.max_rel_change.max() <= fixtures.TOLERANCE


@_each("dl")
class TestDL(_DL):
    pass


@_each("dl-extra")
class TestDLExtra(_DL):
    pass


def test_unknown_workload_and_scale() -> None:
    with pytest.raises(ValueError, match="unknown workload 'spec'"):
        workloads.get("spec")
    with pytest.raises(ValueError, match="scale 'huge'"):
        workloads.footprint_bytes("huge")
    assert workloads.footprint_bytes(2) == 2 << 20


def test_without_torch_the_dl_workloads_are_left_out_with_a_warning() -> None:
    code = """
import sys, warnings
sys.modules["torch"] = None  # import torch now fails, as where it is not installed
from buddylib import experiments, fixtures, workloads
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    names = workloads.names()
print(names == workloads.names("hpc"), any("DL workloads" in str(w.message) and "torch is not installed"
                                             in str(w.message) for w in seen))
try:
    workloads.get("alexnet")
except ValueError as e:
    print("need torch" if "the DL workloads need torch" in str(e) else str(e))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "need", "torch"]
