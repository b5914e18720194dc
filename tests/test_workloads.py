"""Properties every registered workload keeps, at quick scale."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from buddylib import fixtures, workloads
from buddylib.compressors import get as get_compressor
from buddylib.provenance import MANIFEST
from buddylib.snapshot import KINDS
from buddylib.workloads.base import QUICK_LIMIT

NAMES = workloads.names()


@pytest.fixture(scope="module", params=NAMES)
def quick_run(request: pytest.FixtureRequest) -> workloads.Run:
    return workloads.get(request.param).run("quick", seed=0, keep_bytes=True, compressors=["bpc32", "bdi"])


def test_snapshots_and_profile(quick_run: workloads.Run) -> None:
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


def test_bpc_round_trips_every_allocation(quick_run: workloads.Run) -> None:
    for width in ("bpc32", "bpc64"):
        bpc = get_compressor(width)
        for snap in quick_run.snapshots[:: max(1, len(quick_run.snapshots) // 3)]:
            for a in snap.allocations:
                raw = np.asarray(a.data)
                assert bpc.decode(bpc.encode(raw)) == raw.tobytes(), f"{a.name} step {snap.step}"


def test_same_seed_same_bytes(quick_run: workloads.Run) -> None:
    """The same seed gives the same bytes: an HPC run those of the committed fixture, made on another machine
    (bit-identical on CPUs with FMA and AVX2 and the same C library); a DL run those of a second run here."""
    name = quick_run.workload.name
    made = json.loads((fixtures.FOLDER / MANIFEST).read_text())
    if quick_run.workload.suite == "hpc" and fixtures.fma_avx2() and made["machine"]["libc"] == \
            fixtures.machine()["libc"] and made["machine"]["fma_avx2"]:
        assert quick_run.digest == made["workloads"][name]
    else:
        assert workloads.get(name).run("quick", seed=0, compressors=["bpc32"]).digest == quick_run.digest


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
from buddylib import fixtures, workloads
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
