"""DL workloads at quick scale: real training (the loss falls), every kind of tensor with the right bytes,
a traced access profile, determinism, and global torch state left alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from buddylib import workloads  # noqa: E402
from buddylib.workloads.dl.base import TorchWorkload  # noqa: E402
from buddylib.workloads.dl.data import PHOTOS, VOCAB, corpus, image_crops, text_batch  # noqa: E402

CNNS = ["alexnet", "vgg16", "resnet50", "squeezenet", "inception"]
LMS = ["lstm", "transformer"]
NAMES = CNNS + LMS
KINDS = {"weights", "gradients", "optimizer", "activations", "input"}


@pytest.fixture(scope="module")
def runs() -> dict[str, workloads.Run]:
    return {n: workloads.get(n).run("quick", seed=0, compressors=["bpc32"]) for n in NAMES}


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def test_registered_as_dl_suite() -> None:
    assert workloads.names("dl") == sorted(NAMES)
    assert all(isinstance(workloads.get(n), TorchWorkload) for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_loss_falls(runs: dict[str, workloads.Run], name: str) -> None:
    w = runs[name].workload
    losses = np.array(w.losses)
    assert len(losses) == w.n_steps and np.isfinite(losses).all()
    k = max(2, len(losses) // 8)
    first, last = losses[:k].mean(), losses[-k:].mean()
    assert last < 0.9 * first, f"{name}: loss {first:.3f} -> {last:.3f}"
    start = math.log(len(PHOTOS) if name in CNNS else VOCAB)  # untrained: about ln(classes)
    assert first == pytest.approx(start, rel=0.5)


@pytest.mark.parametrize("name", NAMES)
def test_snapshot_holds_every_kind_with_its_bytes(runs: dict[str, workloads.Run], name: str) -> None:
    run = runs[name]
    w = run.workload
    snap = run.snapshots[-1]
    by_kind: dict[str, int] = {}
    for a in snap.allocations:
        by_kind[a.kind] = by_kind.get(a.kind, 0) + a.nbytes
    assert KINDS <= set(by_kind) <= KINDS | {"other"}
    params = dict(w.model.named_parameters())
    p_bytes = _bytes(params.values())
    assert by_kind["weights"] == p_bytes
    assert by_kind["gradients"] == p_bytes
    per_param = 2 if name in LMS else 1  # Adam: exp_avg, exp_avg_sq; SGD: momentum_buffer
    assert by_kind["optimizer"] == per_param * p_bytes
    assert by_kind["input"] == w.x.nbytes + w.y.nbytes
    assert by_kind["activations"] > 0
    named = {a.name: a for a in snap.allocations}
    state = ("exp_avg", "exp_avg_sq") if name in LMS else ("momentum_buffer",)
    for n, p in params.items():
        assert named[n].kind == "weights" and named[n].nbytes == p.numel() * p.element_size()
        assert named[f"{n}.grad"].kind == "gradients"
        assert all(named[f"{n}.{s}"].kind == "optimizer" for s in state)
    # step 0 comes before any training: weights and the first batch only
    assert {a.kind for a in run.snapshots[0].allocations} <= {"weights", "input", "other"}
    assert run.snapshots[0].allocations and len(run.snapshots) >= 6


@pytest.mark.parametrize("name", CNNS)
def test_saved_activations_hold_relu_zeros(runs: dict[str, workloads.Run], name: str) -> None:
    acts = {n: a for n, (a, kind) in runs[name].workload.allocations().items() if kind == "activations"}
    relu = [a for n, a in acts.items() if "relu" in n or "activation" in n or n.startswith("act.features")]
    zeros = np.mean(np.concatenate([np.asarray(a, np.float32).ravel() == 0 for a in relu if a.dtype == np.float32]))
    assert 0.2 < zeros < 0.95, f"{name}: {zeros:.2f} of saved ReLU outputs are zero"


@pytest.mark.parametrize("name", NAMES)
def test_profile_replays_one_step(runs: dict[str, workloads.Run], name: str) -> None:
    run = runs[name]
    live = {a.name: a for a in run.snapshots[-1].allocations}
    kernels = run.profile.kernels
    phases = [k.name.split(".")[0] for k in kernels]
    assert phases[0] == "fwd" and phases[-1] == "optimizer" and "bwd" in phases
    assert phases.index("bwd") > max(i for i, p in enumerate(phases) if p == "fwd")
    for k in kernels:
        for a in k.accesses:
            assert a.allocation in live, f"{k.name} -> {a.allocation}"
    touched = {a.allocation for k in kernels for a in k.accesses}
    assert {a.kind for a in live.values() if a.name in touched} >= KINDS
    grads_written = {a.allocation for k in kernels if k.name.startswith("bwd") for a in k.accesses if a.mode == "write"}
    assert {n for n, a in live.items() if a.kind == "gradients"} <= grads_written
    fwd, bwd = (sum(k.flops for k in kernels if k.name.startswith(p)) for p in ("fwd", "bwd"))
    assert 1.5 * fwd < bwd < 2.5 * fwd  # backward costs about twice the forward


def test_conv_flops_match_the_layer() -> None:
    w = workloads.get("resnet50")
    w.setup(3 << 20, np.random.default_rng(0))
    w.step()
    conv = w.model.conv1
    b, res = w.x.shape[0], w.x.shape[-1]
    hout = (res + 2 * 3 - 7) // 2 + 1
    fwd = {k.name: k for k in w.profile().kernels}["fwd.conv1"]
    assert fwd.flops == 2 * 3 * 7 * 7 * conv.out_channels * hout * hout * b
    assert [a.allocation for a in fwd.accesses] == ["conv1.weight", "input", "act.conv1.0"]  # the BN saves it


def test_same_seed_same_bytes_and_torch_state_kept(runs: dict[str, workloads.Run]) -> None:
    threads, rng = torch.get_num_threads(), torch.get_rng_state()
    det = torch.are_deterministic_algorithms_enabled()
    again = workloads.get("transformer").run("quick", seed=0, compressors=["bpc32"])
    assert again.digest == runs["transformer"].digest
    assert again.workload.losses == runs["transformer"].workload.losses
    other = workloads.get("transformer").run("quick", seed=3, compressors=["bpc32"])
    assert other.digest != again.digest
    assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), rng)
    assert torch.are_deterministic_algorithms_enabled() == det


def test_real_images_and_text() -> None:
    x, y = image_crops(16, 32, np.random.default_rng(0))
    assert x.shape == (16, 3, 32, 32) and x.dtype == np.float32 and np.bincount(y).tolist() == [2] * len(PHOTOS)
    assert 0.5 < x.std() < 2 and len(np.unique(x)) > 1000  # photographs, normalised; not a constant
    text = corpus()
    assert text.size > 100_000 and b"def " in text.tobytes()
    tok, tgt = text_batch(3, 20, np.random.default_rng(0))
    assert tok.shape == tgt.shape == (3, 20) and (tok[:, 1:] == tgt[:, :-1]).all()
