"""DL workloads at quick scale: what is not a property of one network's quick run (those, the loss falling, every
kind of tensor with its bytes, the traced profile, determinism: TestDL and TestDLExtra in test_workloads.py, which
run each network once for all of them)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from buddylib import workloads  # noqa: E402
from buddylib.workloads.dl.base import TorchWorkload  # noqa: E402
from buddylib.workloads.dl.data import PHOTOS, corpus, image_crops, text_batch  # noqa: E402

MIXED = ["resnet50_bf16", "transformer_bf16"]
NAMES = ["alexnet", "vgg16", "resnet50", "squeezenet", "inception", "resnet50_bf16", "lstm", "transformer",
         "transformer_bf16"]


def test_registered_as_dl_suite() -> None:
    # the paper's six, whose mean is the DL headline
    assert workloads.names("dl") == ["alexnet", "biglstm", "inception", "resnet50", "squeezenet", "vgg16"]
    assert {*MIXED, "lstm", "transformer"} <= set(workloads.names("dl-extra"))  # beside it, never averaged in
    assert all(isinstance(workloads.get(n), TorchWorkload) for n in NAMES)


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


def test_other_seed_other_bytes() -> None:
    """(The same seed's same bytes, and torch's global state left alone: TestDL, TestDLExtra in test_workloads.)"""
    runs = [workloads.get("transformer").run("quick", seed=s, compressors=["bpc32"]) for s in (0, 3)]
    assert runs[0].digest != runs[1].digest and runs[0].workload.losses != runs[1].workload.losses


def test_real_images_and_text() -> None:
    x, y = image_crops(16, 32, np.random.default_rng(0))
    assert x.shape == (16, 3, 32, 32) and x.dtype == np.float32 and np.bincount(y).tolist() == [2] * len(PHOTOS)
    assert 0.5 < x.std() < 2 and len(np.unique(x)) > 1000  # photographs, normalised; not a constant
    text = corpus()
    assert text.size > 100_000 and b"def " in text.tobytes()
    tok, tgt = text_batch(3, 20, np.random.default_rng(0))
    assert tok.shape == tgt.shape == (3, 20) and (tok[:, 1:] == tgt[:, :-1]).all()


def test_memory_vs_batch_scales_per_sample_and_is_cached(tmp_path) -> None:
    from buddylib.studies.experiments import largest_batch, memory_vs_batch

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

    from buddylib.studies.experiments import largest_batch

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


def test_half_matmuls_in_float_are_fp32_sums_rounded_once() -> None:
    """Under HalfMatmulsInFloat, a bf16 (or fp16) product is the fp32 product of the same values rounded to the
    half dtype; autograd saves the half tensors, and the gradients come back in the half dtype."""
    from buddylib.workloads.dl.base import HalfMatmulsInFloat

    g = torch.Generator().manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16):
        a, b = (torch.randn(33, 70, generator=g).to(dtype) for _ in range(2))
        a.requires_grad_()
        saved: list[torch.Tensor] = []
        with HalfMatmulsInFloat(), torch.autograd.graph.saved_tensors_hooks(_keep(saved),
                                                                               lambda t: t):
            y = a @ b.T
            y.sum().backward()
        assert y.dtype == dtype and torch.equal(y, (a.detach().float() @ b.float().T).to(dtype))
        assert a.grad.dtype == dtype and {t.dtype for t in saved} == {dtype}
        x, w = torch.randn(2, 3, 9, 9, generator=g).to(dtype), torch.randn(4, 3, 3, 3, generator=g).to(dtype)
        x.requires_grad_(), w.requires_grad_()
        with HalfMatmulsInFloat():
            out = torch.nn.functional.conv2d(x, w, padding=1)
            out.float().square().sum().backward()
        ref = torch.nn.functional.conv2d(x.detach().float(), w.detach().float(), padding=1).to(dtype)
        assert torch.equal(out, ref) and x.grad.dtype == w.grad.dtype == dtype


def _keep(saved: list):
    def pack(t):
        saved.append(t)
        return t
    return pack
