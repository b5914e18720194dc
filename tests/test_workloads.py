"""Properties every registered workload keeps, at quick scale."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from buddylib import workloads
from buddylib.compressors import DEFAULT_COMPRESSORS
from buddylib.compressors import get as get_compressor
from buddylib.provenance import MANIFEST
from buddylib.snapshot import KINDS
from buddylib.studies import experiments, fixtures
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
        """BPC on every allocation; the code of 16-bit floats on every 16-bit float one. Bytes already
        round-tripped with their dtype are not again (minilm's frozen weights: 152 of its 413 MiB are distinct; the
        codes are deterministic)."""
        half = {"bfloat16": get_compressor("ebo-bf16"), "float16": get_compressor("ebo-fp16")}
        bpcs = [get_compressor(width) for width in ("bpc32", "bpc64")]
        seen: set[tuple[str, bytes]] = set()
        for snap in quick_run.snapshots[:: max(1, len(quick_run.snapshots) // 3)]:
            for a in snap.allocations:
                raw = np.asarray(a.data)
                if raw.dtype.kind == "V":  # ml_dtypes' bfloat16: its bits, as encode takes them (test_compressor_paths)
                    raw = raw.view(f"u{raw.dtype.itemsize}")
                data = raw.tobytes()
                key = (a.dtype, hashlib.blake2b(data, digest_size=16).digest())
                if key in seen:
                    continue
                seen.add(key)
                for code in bpcs + ([half[a.dtype]] if a.dtype in half else []):
                    assert code.decode(code.encode(raw)) == data, f"{a.name} step {snap.step}: {code.name}"


@pytest.fixture(scope="class")
def quick_run(request: pytest.FixtureRequest) -> workloads.Run:
    """One workload's quick run, kept for its class's tests (each class parametrizes it by its suite's names); a
    network's with the compressors the fixture check compares (it checks that run). ``torch_kept``: whether the run
    left torch's global state (threads, random state, deterministic algorithms) as it found it."""
    before = _torch_state()
    workload = workloads.get(request.param)
    compressors = ["bpc32", "bdi"] if workload.suite == "hpc" else DEFAULT_COMPRESSORS
    run = workload.run("quick", seed=0, keep_bytes=True, compressors=compressors)
    run.torch_kept = _torch_state() == before
    return run


def _torch_state() -> tuple | None:
    if "torch" not in sys.modules:
        return None
    import torch

    return torch.get_num_threads(), torch.get_rng_state().tolist(), torch.are_deterministic_algorithms_enabled()


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


#: The networks whose training step the _DL tests check (biglstm, minilm, efficientnet_lite0: in their own files).
CNNS = ["alexnet", "vgg16", "resnet50", "squeezenet", "inception", "resnet50_bf16"]
LMS = ["lstm", "transformer", "transformer_bf16"]
MIXED = ["resnet50_bf16", "transformer_bf16"]
ADAM = [*LMS, "resnet50_bf16"]
NAMES = CNNS + LMS
STEP_KINDS = {"weights", "gradients", "optimizer", "activations", "input"}


def _trains(run: workloads.Run, names: list[str], why: str = "tested in its own file") -> str:
    """The run's network, if a test of ``names`` checks it; else the test is skipped (``why``)."""
    name = run.workload.name
    if name not in names:
        pytest.skip(why)
    return name


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class _DL(_EveryWorkload):
    def test_same_seed_same_bytes(self, quick_run: workloads.Run) -> None:
        """The same seed gives the same bytes: those of a run of the same seed recorded before (on this machine or
        one with the same kernels: :func:`buddylib.studies.fixtures.known_digests`), else those of a second run here.
        And the fixture check (:func:`buddylib.studies.fixtures.check`) on this run (and a mini-batch measurement, for
        the networks of notebook 07): it holds the committed fixture's allocations, with ideal ratios (device bytes)
        within the stated tolerance. (PyTorch's kernels differ per instruction set: not the fixture's bytes.)"""
        import torch

        name = quick_run.workload.name
        threads, rng, det = torch.get_num_threads(), torch.get_rng_state(), torch.are_deterministic_algorithms_enabled()
        report = fixtures.check(names=[name], runs={name: quick_run})
        assert set(report.index) == {name} | ({f"batch:{name}"} if name in experiments.BATCH_NETWORKS else set())
        assert report.ok.all(), report.to_string()
        assert report.structure_equal.all(), report.to_string()
        assert report.max_rel_change.max() <= fixtures.TOLERANCE
        if quick_run.digest not in fixtures.known_digests(name):
            again = workloads.get(name).run("quick", seed=0, compressors=["bpc32"])
            assert again.digest == quick_run.digest
            assert getattr(again.workload, "losses", None) == getattr(quick_run.workload, "losses", None)
        assert quick_run.torch_kept
        assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), rng)
        assert torch.are_deterministic_algorithms_enabled() == det

    # a training step's tensors and profile, checked on the same quick run (each network runs once for them all)

    def test_loss_falls(self, quick_run: workloads.Run) -> None:
        from buddylib.workloads.dl.data import PHOTOS, VOCAB

        run, name = quick_run, _trains(quick_run, NAMES)
        w = run.workload
        losses = np.array(w.losses)
        assert len(losses) == w.n_steps and np.isfinite(losses).all()
        k = max(2, len(losses) // 8)
        first, last = losses[:k].mean(), losses[-k:].mean()
        assert last < 0.9 * first, f"{name}: loss {first:.3f} -> {last:.3f}"
        start = math.log(len(PHOTOS) if name in CNNS else VOCAB)  # untrained: about ln(classes)
        assert first == pytest.approx(start, rel=0.5)

    def test_snapshot_holds_every_kind_with_its_bytes(self, quick_run: workloads.Run) -> None:
        run, name = quick_run, _trains(quick_run, NAMES)
        w = run.workload
        snap = run.snapshots[-1]
        by_kind: dict[str, int] = {}
        for a in snap.allocations:
            by_kind[a.kind] = by_kind.get(a.kind, 0) + a.nbytes
        assert STEP_KINDS <= set(by_kind) <= STEP_KINDS | {"other", "half_weights"}
        params = dict(w.model.named_parameters())
        p_bytes = _bytes(params.values())
        assert by_kind["weights"] == p_bytes
        assert by_kind["gradients"] == p_bytes
        per_param = 2 if name in ADAM else 1  # Adam: exp_avg, exp_avg_sq; SGD: momentum_buffer
        assert by_kind["optimizer"] == per_param * p_bytes
        assert by_kind["input"] == w.x.nbytes + w.y.nbytes
        assert by_kind["activations"] > 0
        named = {a.name: a for a in snap.allocations}
        state = ("exp_avg", "exp_avg_sq") if name in ADAM else ("momentum_buffer",)
        for n, p in params.items():
            assert named[n].kind == "weights" and named[n].nbytes == p.numel() * p.element_size()
            assert named[f"{n}.grad"].kind == "gradients"
            assert all(named[f"{n}.{s}"].kind == "optimizer" for s in state)
        # step 0 comes before any training: weights and the first batch only
        assert {a.kind for a in run.snapshots[0].allocations} <= {"weights", "input", "other"}
        assert run.snapshots[0].allocations and len(run.snapshots) >= 6

    def test_mixed_precision_keeps_fp32_masters_and_saves_bf16_copies(self, quick_run: workloads.Run) -> None:
        """fp32 parameters, gradients and Adam moments; a bf16 copy of every convolution/linear weight; bf16
        activations."""
        import torch

        run = quick_run
        _trains(run, MIXED, "bf16 mixed precision only")
        w = run.workload
        allocs = w.allocations()
        params = dict(w.model.named_parameters())
        assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in params.values())
        assert all(a.dtype == np.float32 for a, kind in allocs.values()
                   if kind in ("weights", "gradients", "optimizer"))
        half = {n: a for n, (a, kind) in allocs.items() if kind == "half_weights"}
        matmul = {n for n, m in w.model.named_modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))}
        expected = {w.param_names[id(m.weight)] for n, m in w.model.named_modules() if n in matmul}
        assert {n.removesuffix(".bf16") for n in half} == expected
        lr = w.optimizer.param_groups[0]["lr"]
        for n, a in half.items():
            p = params[n.removesuffix(".bf16")].detach()
            assert a.dtype.name == "bfloat16", n
            copy = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).float().reshape(p.shape)
            # the copy was made before the last Adam step, which moves each weight by about lr at most
            assert torch.allclose(copy, p, rtol=2**-7, atol=3 * lr), n
        acts = [a for a, kind in allocs.values() if kind == "activations"]
        bf16 = sum(a.nbytes for a in acts if a.dtype.name == "bfloat16")
        assert bf16 > 0.5 * sum(a.nbytes for a in acts)

    def test_saved_activations_hold_relu_zeros(self, quick_run: workloads.Run) -> None:

        run, name = quick_run, _trains(quick_run, CNNS, "CNNs only")
        acts = {n: a for n, (a, kind) in run.workload.allocations().items() if kind == "activations"}
        relu = [a for n, a in acts.items() if "relu" in n or "activation" in n or n.startswith("act.features")]
        vals = [a.astype(np.float32) if a.dtype.name == "bfloat16" else a for a in relu]
        zeros = np.mean(np.concatenate([np.asarray(a).ravel() == 0 for a in vals if a.dtype == np.float32]))
        assert 0.2 < zeros < 0.95, f"{name}: {zeros:.2f} of saved ReLU outputs are zero"

    def test_profile_replays_one_step(self, quick_run: workloads.Run) -> None:
        run = quick_run
        _trains(run, NAMES)
        live = {a.name: a for a in run.snapshots[-1].allocations}
        kernels = run.profile.kernels
        phases = [k.name.split(".")[0] for k in kernels]
        assert phases[0] == "fwd" and phases[-1] == "optimizer" and "bwd" in phases
        assert phases.index("bwd") > max(i for i, p in enumerate(phases) if p == "fwd")
        for k in kernels:
            for a in k.accesses:
                assert a.allocation in live, f"{k.name} -> {a.allocation}"
        touched = {a.allocation for k in kernels for a in k.accesses}
        assert {a.kind for a in live.values() if a.name in touched} >= STEP_KINDS
        grads_written = {a.allocation for k in kernels if k.name.startswith("bwd")
                         for a in k.accesses if a.mode == "write"}
        assert {n for n, a in live.items() if a.kind == "gradients"} <= grads_written
        fwd, bwd = (sum(k.flops for k in kernels if k.name.startswith(p)) for p in ("fwd", "bwd"))
        assert 1.5 * fwd < bwd < 2.5 * fwd  # backward costs about twice the forward


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
from buddylib import workloads
from buddylib.studies import experiments, fixtures
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
