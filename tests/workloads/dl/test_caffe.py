"""Caffe-style accounting of a training step: persistent data and diff blobs checked against an independent
replay of the same iteration (same parameters, batch and RNG, no hooks, ReLUs out of place), parameter diffs
and SGD history against the live model and optimizer, split diffs, the footprint beside PyTorch's live set,
and determinism."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from buddylib import workloads  # noqa: E402
from buddylib.analysis import analyze  # noqa: E402
from buddylib.snapshot import Allocation, Snapshot  # noqa: E402
from buddylib.workloads.base import footprint_bytes  # noqa: E402
from buddylib.workloads.dl.base import deterministic_torch  # noqa: E402
from buddylib.workloads.dl.caffe import POINTS, CaffeRun, caffe_run, caffe_snapshots  # noqa: E402

NETS = ["alexnet", "resnet50", "inception"]  # dropout; residual splits and in-place adds; four-way splits
STEPS = 3


@pytest.fixture(scope="module")
def runs() -> dict[str, CaffeRun]:
    return {n: caffe_run(n, "quick", seed=0, steps=STEPS, compressors=(), keep_bytes=True) for n in NETS}


def _named(snap: Snapshot) -> dict[str, Allocation]:
    return {a.name: a for a in snap.allocations}


def _t(a: Allocation) -> torch.Tensor:
    return torch.from_numpy(np.asarray(a.data))


class Replay:
    """The recorded iteration recomputed by a fresh copy of the network: parameters from the Caffe snapshot
    before the forward, the batch from the data blobs after it, the run's torch RNG state (dropout), every
    in-place module made out of place so each layer's output is its own tensor."""

    def __init__(self, run: CaffeRun) -> None:
        w = workloads.get(run.workload.name)
        w.setup(footprint_bytes(run.scale), np.random.default_rng(run.seed))
        before, after = _named(run.at("before_forward")), _named(run.at("after_forward"))
        with torch.no_grad():
            for n, p in w.model.named_parameters():
                p.copy_(_t(before[n]))
        for m in w.model.modules():
            if hasattr(m, "inplace"):
                m.inplace = False
        self.outputs: dict[str, torch.Tensor] = {}
        count: dict[str, int] = {}

        def keep(mod: torch.nn.Module, args: tuple, out: torch.Tensor) -> None:
            base = w.module_names[mod]
            k = count.get(base, 0)
            count[base] = k + 1
            self.outputs[base if k == 0 else f"{base}#{k}"] = out

        for m in w.module_names:
            if not any(True for _ in m.children()):
                m.register_forward_hook(keep)
        x = _t(after["blob.input.data"])
        y = _t(after["blob.label.data"]).long()
        with torch.random.fork_rng(devices=[]), deterministic_torch():
            torch.set_rng_state(run.torch_rng)
            loss = w.criterion(w.model(x), y)
            calls = list(self.outputs)
            params = list(w.model.parameters())
            grads = torch.autograd.grad(loss, [self.outputs[c] for c in calls] + params)
        self.grads = dict(zip(calls, grads[:len(calls)], strict=True))
        self.param_grads = dict(zip([n for n, _ in w.model.named_parameters()], grads[len(calls):], strict=True))
        self.loss = loss


@pytest.fixture(scope="module")
def replays(runs: dict[str, CaffeRun]) -> dict[str, Replay]:
    return {n: Replay(r) for n, r in runs.items()}


def _chains(run: CaffeRun) -> dict[str, list[str]]:
    """Blob -> the calls writing it, in order (its producer first, then the in-place layers on it)."""
    out: dict[str, list[str]] = {}
    for call, blob in run.blobs.items():
        out.setdefault(blob, []).append(call)
    return out


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to float32 summation order (gradients reach a blob through several paths)."""
    scale = float(b.abs().max()) or 1.0
    return torch.allclose(a.reshape(b.shape), b, rtol=1e-5, atol=1e-6 * scale)


@pytest.mark.parametrize("name", NETS)
def test_every_point_holds_data_and_diff_of_every_layer_output(runs, replays, name) -> None:
    run, rep = runs[name], replays[name]
    assert set(rep.outputs) == set(run.blobs), "every leaf-layer call of the iteration has a blob"
    assert [s.time for s in run.snapshots] == sorted(s.time for s in run.snapshots)
    for point, snap in zip(run.points, run.snapshots, strict=True):
        named = _named(snap)
        for call, blob in run.blobs.items():
            out = rep.outputs[call]
            for part in ("data", "diff"):
                a = named[f"blob.{blob}.{part}"]
                assert a.dtype == str(out.dtype).removeprefix("torch."), (point, call, part)
                assert np.asarray(a.data).size == out.numel()
                if blob == call:  # the producer: the blob has its output's shape (in-place views reshape it)
                    assert a.shape == tuple(out.shape), (point, call, part)
                assert a.kind == ("activations" if part == "data" else "gradients")
        assert named["blob.input.data"].kind == named["blob.label.data"].kind == "input"
        assert "blob.input.diff" not in named  # Caffe never back-propagates into the data layer
        assert {a.kind for a in snap.allocations} <= {"input", "activations", "gradients", "weights", "optimizer",
                                                       "other"}


@pytest.mark.parametrize("name", NETS)
def test_data_after_forward_are_the_layer_outputs(runs, replays, name) -> None:
    run, rep = runs[name], replays[name]
    named = _named(run.at("after_forward"))
    for blob, calls in _chains(run).items():
        # an in-place chain's blob holds its last layer's output
        expected = rep.outputs[calls[-1]].detach()
        assert torch.equal(_t(named[f"blob.{blob}.data"]).reshape(-1), expected.reshape(-1)), blob
    assert float(_t(named["blob.loss.data"])) == pytest.approx(float(rep.loss.detach()), rel=1e-6)
    assert named["blob.loss.diff"].data == 1.0  # the loss weight


@pytest.mark.parametrize("name", NETS)
def test_diffs_after_backward_are_the_gradients_of_the_outputs(runs, replays, name) -> None:
    run, rep = runs[name], replays[name]
    named = _named(run.at("after_backward"))
    for blob, calls in _chains(run).items():
        # an in-place chain's diff ends as the gradient w.r.t. its producer's output (Caffe's in-place backward)
        assert _close(_t(named[f"blob.{blob}.diff"]), rep.grads[calls[0]]), blob
    assert {b for b, calls in _chains(run).items() if len(calls) > 1}, "some in-place layers share a blob"


@pytest.mark.parametrize("name", NETS)
def test_blobs_persist_across_the_iteration(runs, name) -> None:
    run = runs[name]
    at = {p: _named(run.at(p)) for p in POINTS}
    order = list(run.blobs)  # calls in execution order
    first = set(order[:-(-len(order) // 2)])  # the mid-forward point follows half of the calls (rounded up)
    chains = _chains(run)
    done = [b for b, calls in chains.items() if set(calls) <= first]
    later = [b for b, calls in chains.items() if not set(calls) & first]
    assert done and later

    def arr(p: str, n: str) -> np.ndarray:
        return np.asarray(at[p][n].data)

    for b in chains:
        data, diff = f"blob.{b}.data", f"blob.{b}.diff"
        # during the forward every diff still holds the previous iteration's gradient
        assert np.array_equal(arr("mid_forward", diff), arr("before_forward", diff))
        assert np.array_equal(arr("after_forward", diff), arr("before_forward", diff))
        if b != "loss":  # the loss diff is the loss weight, always 1
            assert not np.array_equal(arr("after_backward", diff), arr("before_forward", diff)), b
        if b in done or b in later:  # this iteration's output, or the previous one's
            assert np.array_equal(arr("mid_forward", data), arr("after_forward" if b in done else "before_forward",
                                                                data)), b
    assert any(not np.array_equal(arr("before_forward", f"blob.{b}.data"), arr("after_forward", f"blob.{b}.data"))
               for b in later)
    # mid-backward: the last layers' diffs are written, the first layers' still the previous iteration's
    fresh = [np.array_equal(arr("mid_backward", f"blob.{b}.diff"), arr("after_backward", f"blob.{b}.diff"))
             for b in chains]
    assert fresh[-2] and not fresh[0]
    assert np.array_equal(arr("mid_forward", "blob.input.data"), arr("after_forward", "blob.input.data"))
    assert not np.array_equal(arr("before_forward", "blob.input.data"), arr("after_forward", "blob.input.data"))


@pytest.mark.parametrize("name", NETS)
def test_parameters_diffs_and_history(runs, replays, name) -> None:
    run, rep = runs[name], replays[name]
    w = run.workload
    opt = w.optimizer
    lr = opt.param_groups[0]["lr"]
    at = {p: _named(run.at(p)) for p in POINTS}
    for n, p in w.model.named_parameters():
        buf = opt.state[p]["momentum_buffer"]
        # after the update: the live parameters; the diff and the history hold the update, lr x momentum buffer
        assert torch.equal(_t(at["after_update"][n]), p.detach())
        assert torch.equal(_t(at["after_update"][f"{n}.history"]), buf * lr)
        assert torch.equal(_t(at["after_update"][f"{n}.diff"]), buf * lr)
        # after the backward: the gradient autograd gave (the live .grad; the replay's, independently)
        assert torch.equal(_t(at["after_backward"][f"{n}.diff"]), p.grad)
        assert _close(_t(at["after_backward"][f"{n}.diff"]), rep.param_grads[n]), n
        # before the update the parameters are those the forward used; ClearParamDiffs zeroed the diffs
        assert torch.equal(_t(at["after_backward"][n]), _t(at["before_forward"][n]))
        assert not torch.equal(_t(at["after_update"][n]), _t(at["before_forward"][n]))
        for point in ("before_forward", "mid_forward", "after_forward"):
            assert not np.asarray(at[point][f"{n}.diff"].data).any(), (point, n)
        # the history changes only in the solver step
        assert torch.equal(_t(at["after_backward"][f"{n}.history"]), _t(at["before_forward"][f"{n}.history"]))
    # mid-backward, some parameter gradients are written and some still zero
    written = [bool(np.asarray(at["mid_backward"][f"{n}.diff"].data).any()) for n, _ in w.model.named_parameters()]
    assert any(written) and not all(written)


def test_split_diffs_sum_to_the_gradient_the_consumers_read(runs, replays) -> None:
    run, rep = runs["resnet50"], replays["resnet50"]
    named = _named(run.at("after_backward"))
    chains = _chains(run)
    assert len(run.splits) == 16  # every bottleneck's input is read by conv1 and by the shortcut
    assert all(len(c) == 4 for c in runs["inception"].splits.values())
    for blob, users in run.splits.items():
        parts = [_t(named[f"blob.{blob}_split_{i}.diff"]) for i in range(len(users))]
        # Split's backward sums its tops' diffs into the blob's diff: the gradient w.r.t. the version the
        # consumers read (the last in-place layer's output); an in-place ReLU's backward then overwrites it
        total = sum(parts[1:], parts[0])
        assert _close(total, rep.grads[chains[blob][-1]]), blob
        if len(chains[blob]) == 1:
            assert _close(total, _t(named[f"blob.{blob}.diff"])), blob
        assert all(p.any() for p in parts)
        for i, user in enumerate(users):
            if user.endswith(".add"):  # an identity shortcut passes back the sum's gradient unchanged
                assert torch.equal(parts[i], _t(named[f"blob.{run.blobs[user]}.diff"])), blob


@pytest.mark.parametrize("name", NETS)
def test_caffe_footprint_exceeds_pytorch_live_set(runs, name) -> None:
    run = runs[name]
    live = run.pytorch[-1]  # what the PyTorch workload snapshots after this iteration
    for snap in run.snapshots:
        assert snap.nbytes > live.nbytes
        kinds = {k: sum(a.nbytes for a in snap.allocations if a.kind == k) for k in ("weights", "optimizer")}
        assert kinds["weights"] == kinds["optimizer"] == sum(a.nbytes for a in live.allocations if a.kind == "weights")
    acts = sum(a.nbytes for a in live.allocations if a.kind == "activations")
    blobs = sum(a.nbytes for a in run.snapshots[-1].allocations if a.name.startswith("blob."))
    assert blobs > acts


def test_first_iteration_diffs_are_zero_until_the_backward() -> None:
    run = caffe_run("resnet50", "quick", seed=0, steps=0, points=["before_forward", "mid_forward", "after_backward"],
                    compressors=(), keep_bytes=True)
    assert not any(a.name.startswith("blob.") for a in run.at("before_forward").allocations)
    mid = _named(run.at("mid_forward"))
    diffs = [a for n, a in mid.items() if n.endswith(".diff") and n.startswith("blob.")]
    assert diffs and not any(np.asarray(a.data).any() for a in diffs)
    assert {n for n in mid if n.startswith("blob.")} < {a.name for a in run.at("after_backward").allocations}
    history = [a for a in run.at("after_backward").allocations if a.name.endswith(".history")]
    assert history and not any(np.asarray(a.data).any() for a in history)  # no solver step yet


def test_deterministic_and_analysable() -> None:
    a, b = (caffe_snapshots("squeezenet", "quick", seed=1, steps=2, compressors=("bpc32",), keep_bytes=True)
            for _ in range(2))
    c = caffe_snapshots("squeezenet", "quick", seed=2, steps=2, compressors=(), keep_bytes=True)
    for sa, sb in zip(a, b, strict=True):
        assert [x.name for x in sa.allocations] == [x.name for x in sb.allocations]
        for x, y in zip(sa.allocations, sb.allocations, strict=True):
            assert np.asarray(x.data).tobytes() == np.asarray(y.data).tobytes(), x.name
            assert np.array_equal(x.sectors["bpc32"], y.sectors["bpc32"])
    assert np.asarray(_named(a[-1])["features.0.weight"].data).tobytes() != \
        np.asarray(_named(c[-1])["features.0.weight"].data).tobytes()
    ds = analyze(a, ["bpc32"], thresholds=[0.3])
    eff = ds.effective_ratio.sel(compressor="bpc32", threshold=0.3).values
    ideal = ds.ideal_ratio_total.sel(compressor="bpc32").values
    assert eff.shape == (len(POINTS),) and np.isfinite(eff).all() and (eff > 0.9).all()
    assert (ideal >= eff * 0.99).all()


def test_refuses_what_it_cannot_model() -> None:
    with pytest.raises(ValueError, match="CNN"):
        caffe_run("lstm", "quick", steps=1, compressors=(), keep_bytes=True)
    with pytest.raises(ValueError, match="points"):
        caffe_run("alexnet", "quick", steps=1, points=["halfway"], keep_bytes=True)
    with pytest.raises(ValueError, match="steps"):
        caffe_run("alexnet", "quick", steps=-1, keep_bytes=True)
