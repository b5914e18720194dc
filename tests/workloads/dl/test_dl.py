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

CNNS = ["alexnet", "vgg16", "resnet50", "squeezenet", "inception", "resnet50_bf16"]
LMS = ["lstm", "transformer", "transformer_bf16"]
MIXED = ["resnet50_bf16", "transformer_bf16"]
ADAM = [*LMS, "resnet50_bf16"]
NAMES = CNNS + LMS
KINDS = {"weights", "gradients", "optimizer", "activations", "input"}


@pytest.fixture(scope="module")
def runs() -> dict[str, workloads.Run]:
    return {n: workloads.get(n).run("quick", seed=0, compressors=["bpc32"]) for n in NAMES}


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def test_registered_as_dl_suite() -> None:
    # the paper's six, whose mean is the DL headline
    assert workloads.names("dl") == ["alexnet", "biglstm", "inception", "resnet50", "squeezenet", "vgg16"]
    assert {*MIXED, "lstm", "transformer"} <= set(workloads.names("dl-extra"))  # beside it, never averaged in
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
    assert KINDS <= set(by_kind) <= KINDS | {"other", "half_weights"}
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


@pytest.mark.parametrize("name", MIXED)
def test_mixed_precision_keeps_fp32_masters_and_saves_bf16_copies(runs: dict[str, workloads.Run], name: str) -> None:
    """fp32 parameters, gradients and Adam moments; a bf16 copy of every convolution/linear weight; bf16 activations."""
    w = runs[name].workload
    allocs = w.allocations()
    params = dict(w.model.named_parameters())
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in params.values())
    assert all(a.dtype == np.float32 for a, kind in allocs.values() if kind in ("weights", "gradients", "optimizer"))
    half = {n: a for n, (a, kind) in allocs.items() if kind == "half_weights"}
    matmul = {n for n, m in w.model.named_modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))}
    expected = {w.param_names[id(m.weight)] for n, m in w.model.named_modules() if n in matmul}
    assert {n.removesuffix(".bf16") for n in half} == expected
    lr = w.optimizer.param_groups[0]["lr"]
    for n, a in half.items():
        p = params[n.removesuffix(".bf16")].detach()
        copy = torch.from_numpy(a).view(torch.bfloat16).float().reshape(p.shape)
        # the copy was made before the last Adam step, which moves each weight by about lr at most
        assert torch.allclose(copy, p, rtol=2**-7, atol=3 * lr), n
    acts = [a for a, kind in allocs.values() if kind == "activations"]
    bf16 = sum(a.nbytes for a in acts if a.dtype == np.int16)
    assert bf16 > 0.5 * sum(a.nbytes for a in acts)


@pytest.mark.parametrize("name", CNNS)
def test_saved_activations_hold_relu_zeros(runs: dict[str, workloads.Run], name: str) -> None:
    acts = {n: a for n, (a, kind) in runs[name].workload.allocations().items() if kind == "activations"}
    relu = [a for n, a in acts.items() if "relu" in n or "activation" in n or n.startswith("act.features")]
    vals = [torch.from_numpy(a).view(torch.bfloat16).float().numpy() if a.dtype == np.int16 else a for a in relu]
    zeros = np.mean(np.concatenate([np.asarray(a).ravel() == 0 for a in vals if a.dtype == np.float32]))
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


def test_memory_vs_batch_scales_per_sample_and_is_cached(tmp_path) -> None:
    from buddylib.experiments import largest_batch, memory_vs_batch

    ds = memory_vs_batch(["squeezenet"], [2, 4, 8], "quick", data=tmp_path, steps=1, progress=False)
    kb = ds.kind_bytes.sel(workload="squeezenet")
    for kind in ("weights", "gradients", "optimizer"):  # the model's state does not grow with the batch
        assert len(set(kb.sel(kind=kind).values.tolist())) == 1 and kb.sel(kind=kind).values[0] > 0
    inp = kb.sel(kind="input").values  # images and labels: exactly per sample
    assert inp.tolist() == [inp[0] * b // 2 for b in (2, 4, 8)]
    acts = kb.sel(kind="activations").values
    assert acts[2] == pytest.approx(4 * acts[0], rel=0.05)  # saved activations grow with the batch
    assert (ds.samples_per_s > 0).all() and (ds.device_footprint > 0).all()
    # the budget that batch 4 needs uncompressed fits exactly batch 4 (memory is linear in the batch)
    lb = largest_batch(ds, ds.footprint.sel(batch=4))
    assert int(lb.uncompressed_batch.item()) == 4
    assert lb.uncompressed_samples_per_s.item() == pytest.approx(ds.samples_per_s.sel(batch=4).item())
    again = memory_vs_batch(["squeezenet"], [2, 4, 8], "quick", data=tmp_path, steps=1, progress=False)
    assert again.samples_per_s.equals(ds.samples_per_s)  # read back from the cache, not re-measured
    # any other parameter is another measurement: the cache is not reused for it
    other = memory_vs_batch(["squeezenet"], [2, 4, 8], "quick", data=tmp_path, steps=1, threshold=0.1,
                            progress=False)
    assert other.attrs["threshold"] == 0.1 and not other.samples_per_s.equals(ds.samples_per_s)
    longer = memory_vs_batch(["squeezenet"], [2, 4, 8], "quick", data=tmp_path, steps=2, threshold=0.1,
                             progress=False)
    assert longer.attrs["steps"] == 2 and not longer.samples_per_s.equals(other.samples_per_s)


def test_largest_batch_by_hand() -> None:
    import xarray as xr

    from buddylib.experiments import largest_batch

    batch = np.array([8, 16, 32, 64])
    fixed, per = 1000.0, 100.0
    ds = xr.Dataset({"footprint": (("workload", "batch"), [fixed + per * batch]),
                     "device_footprint": (("workload", "batch"), [(fixed + per * batch) / 2]),
                     "samples_per_s": (("workload", "batch"), [[10.0, 20.0, 40.0, 50.0]])},
                    coords={"workload": ["net"], "batch": batch})
    lb = largest_batch(ds, fixed + per * 16).sel(workload="net")
    # uncompressed: 16; Buddy at 2x: (2600 - 500) / 50 = 42 samples, throughput between 32 and 64 in log batch
    assert int(lb.uncompressed_batch) == 16 and int(lb.buddy_batch) == 42
    expect = 40 + 10 * np.log(42 / 32) / np.log(2)
    assert float(lb.buddy_samples_per_s) == pytest.approx(expect)
    assert float(lb.speedup) == pytest.approx(expect / 20)
    assert int(largest_batch(ds, 500.0).uncompressed_batch.item()) == 0  # not even the weights fit
    assert int(largest_batch(ds, fixed + per * 100).uncompressed_batch.item()) == 100  # past the last measured point
    assert int(largest_batch(ds, fixed + per * 3).uncompressed_batch.item()) == 3  # before the first
