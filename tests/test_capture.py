"""The public recorder (:mod:`buddylib.userdata.capture`): a user's own model and loop give what the built-in runs
give."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from buddylib import explore, workloads  # noqa: E402
from buddylib.cli import main  # noqa: E402
from buddylib.studies import fixtures  # noqa: E402
from buddylib.timing import model as tm  # noqa: E402
from buddylib.userdata import capture  # noqa: E402
from buddylib.workloads.base import footprint_bytes  # noqa: E402
from buddylib.workloads.dl.base import HalfMatmulsInFloat  # noqa: E402

EXAMPLE = fixtures.EXAMPLE
RECORDED = fixtures.RECORDED


def _record_builtin(name: str, steps: int) -> tuple[workloads.Run, capture.Recorder]:
    """The built-in run of ``name`` (quick, seed 0, ``steps`` steps, a snapshot after each), and the same network,
    optimizer and batches driven by a plain training loop under the public recorder."""
    ref = workloads.get(name)
    ref.train_steps = steps
    run = ref.run("quick", seed=0, n_snapshots=steps + 1, compressors=["bpc32"], keep_bytes=True)
    w = workloads.get(name)
    w.train_steps = steps
    w.setup(footprint_bytes("quick"), np.random.default_rng(0))
    with capture.Recorder(w.model, w.optimizer, loss_fn=w.criterion, compressors=["bpc32"], references=(),
                          keep_bytes=True) as rec:
        for i in range(steps):
            if i:
                w._next_batch()
            with w._torch_env():  # the workload's seeded RNG, deterministic kernels, one thread: as its own step
                w.optimizer.zero_grad(set_to_none=True)
                with HalfMatmulsInFloat() if w.autocast else contextlib.nullcontext():
                    with torch.autocast("cpu", dtype=w.autocast or torch.bfloat16, enabled=w.autocast is not None):
                        loss = w.criterion(w.model(w.x), w.y)
                    loss.backward()
                w.optimizer.step()
    return run, rec


@pytest.mark.parametrize("name", ["alexnet", "resnet50", "resnet50_bf16"])
def test_recording_a_builtin_network_gives_its_own_snapshots_and_profile(name: str) -> None:
    """Same allocations (names, kinds, dtypes, shapes, sizes, in order), same bytes, same steps, same access
    profile."""
    run, rec = _record_builtin(name, 2 if name == "alexnet" else 1)
    assert [s.step for s in rec.snapshots] == [s.step for s in run.snapshots] == list(range(len(run.snapshots)))
    for ours, theirs in zip(rec.snapshots, run.snapshots, strict=True):
        assert [(a.name, a.kind, a.dtype, a.shape, a.nbytes) for a in ours.allocations] == \
            [(a.name, a.kind, a.dtype, a.shape, a.nbytes) for a in theirs.allocations]
        for a, b in zip(ours.allocations, theirs.allocations, strict=True):
            raw = [np.asarray(x.data).reshape(-1).view(np.uint8) for x in (a, b)]
            assert np.array_equal(*raw), a.name
            assert np.array_equal(a.sectors["bpc32"], b.sectors["bpc32"]), a.name
    assert rec.profile().to_dict()["kernels"] == run.profile.to_dict()["kernels"]
    kinds = {a.kind for a in rec.snapshots[-1].allocations}
    assert {"input", "weights", "gradients", "optimizer", "activations"} <= kinds
    assert ("half_weights" in kinds) == name.endswith("bf16")


def test_analyze_reads_a_builtin_bf16_run_and_its_recording_alike(tmp_path: Path, capsys) -> None:
    """``buddy analyze`` of a built-in bf16 run and of the same network recorded by the Recorder: the same table,
    bf16 labelled ``bfloat16`` in both (one conversion of a tensor to host bytes and label)."""
    run, rec = _record_builtin("resnet50_bf16", 1)
    tables = []
    for path in (run.save(tmp_path / "builtin"), rec.save(tmp_path / "resnet50_bf16-recorded.nc")):
        assert main(["analyze", str(path), "--compressor", "bpc32"]) == 0
        out = capsys.readouterr().out
        tables.append(out[: out.index("effective ratio")])  # what follows says how each was recorded
    assert tables[0] == tables[1]
    assert "bfloat16" in tables[0] and "int16" not in tables[0].replace("bfloat16", "")


class Block(nn.Module):
    """A block as a user writes it (torchvision's basic block, with an in-place ReLU and a view in the forward)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + x)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = nn.Sequential(Block(8), Block(8))
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(F.relu(self.stem(x)))
        return self.head(x.flatten(2).mean(2))  # a view, then a reduction: saved once per storage


def _train(dtype: torch.dtype | None, steps: int = 3, evaluate: bool = False, **kw) -> capture.Recorder:
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    with capture.Recorder(model, opt, **kw) as rec:
        for _ in range(steps):
            x, y = torch.randn(4, 3, 8, 8, generator=gen).relu(), torch.randint(0, 4, (4,), generator=gen)
            with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                loss = F.cross_entropy(model(x), y)  # a functional loss: its targets are still the step's input
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if evaluate:  # an evaluation pass between the steps
                model.eval()
                with torch.no_grad():
                    model(x)
                model.train()
    return rec


@pytest.mark.parametrize("dtype", [None, torch.bfloat16, torch.float16])
def test_a_users_own_model_records_and_analyses_end_to_end(dtype, tmp_path: Path, capsys) -> None:
    rec = _train(dtype)
    last = {a.name: a for a in rec.snapshots[-1].allocations}
    assert [s.step for s in rec.snapshots] == [0, 1, 2, 3] and rec.labels[0] == "start"
    assert last["input"].kind == last["targets"].kind == "input" and last["targets"].dtype == "int64"
    model = rec.model
    assert sum(a.nbytes for a in last.values() if a.kind == "weights") == \
        sum(p.numel() * p.element_size() for p in model.parameters())
    assert sum(a.nbytes for a in last.values() if a.kind == "gradients") == \
        sum(p.numel() * p.element_size() for p in model.parameters())
    assert {n.rsplit(".", 1)[1] for n, a in last.items() if a.kind == "optimizer"} == {"exp_avg", "exp_avg_sq"}
    half = {"bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype is None:
        assert not any(a.kind == "half_weights" for a in last.values())
    else:  # autocast's copies of the matrices, bit for bit the parameter cast
        copies = [a for a in last.values() if a.kind == "half_weights"]
        assert copies and all(half[a.dtype] == dtype for a in copies)
        assert any(half.get(a.dtype) == dtype for a in last.values() if a.kind == "activations")
    # the first snapshot holds what exists before a step: weights, buffers, the batch
    assert {a.kind for a in rec.snapshots[0].allocations} == {"input", "weights", "other"}
    # every storage once: the in-place ReLUs' outputs and the flatten view are not counted twice
    acts = [a for a in last.values() if a.kind == "activations"]
    assert len({a.name for a in acts}) == len(acts)

    path = rec.save(tmp_path / "missing" / "mine.nc")  # its folder made, as `buddy workloads run --out` makes one
    assert path.is_file() and not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temporary left
    meta = json.loads(path.with_suffix(".profile.json").read_text())
    assert meta["recorded"]["mode"] == "training" and meta["recorded"]["unseen"] == list(capture.UNSEEN)
    ws = tm.Workset.load(path)
    assert len(ws.snapshots) == 4 and ws.profile.kernels[-1].name == "optimizer.adamw"
    assert 1.0 <= tm.slowdown(ws, bandwidth_credit=False)["slowdown"] < 2.0
    assert main(["analyze", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 1.0 <= out["slowdown"] < 2.0 and any("not recorded" in n for n in out["notes"])
    if dtype is not None:
        assert out["total"][f"ideal ebo-{'bf16' if dtype == torch.bfloat16 else 'fp16'}"] > 1.0
    source = explore.load_source(str(path))  # the explorer (notebook 00) takes it, with its profile
    assert source.workset is not None and len(source.snapshots) == 4


def test_an_empty_parameter_holds_no_memory_and_is_no_allocation() -> None:
    model = nn.Sequential(nn.Linear(4, 4))
    model.register_parameter("nothing", nn.Parameter(torch.empty(0)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with capture.Recorder(model, opt) as rec:
        model(torch.ones(2, 4)).sum().backward()
        opt.step()
    assert "nothing" not in {a.name for a in rec.snapshots[-1].allocations}


def test_the_same_loop_records_the_same_bytes_and_an_evaluation_pass_is_no_step() -> None:
    a, b, c = _train(None, steps=2), _train(None, steps=2), _train(None, steps=2, evaluate=True)
    assert a.run_digest == b.run_digest == c.run_digest
    assert a.profile().to_dict() == c.profile().to_dict()


def test_inference_records_leaf_outputs_and_a_declared_kv_cache() -> None:
    class Attention(nn.Module):
        def __init__(self, d: int = 16) -> None:
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

        def forward(self, x, past=None):
            k, v = self.k(x), self.v(x)
            if past is not None:
                k, v = torch.cat([past[0], k], 1), torch.cat([past[1], v], 1)
            return self.o(torch.softmax(self.q(x) @ k.transpose(1, 2), -1) @ v), (k, v)

    torch.manual_seed(0)
    model, past = Attention().to(torch.bfloat16), None
    with torch.no_grad(), capture.Recorder(model) as rec:
        for _ in range(3):
            rec.kv_cache(past)
            _, past = model(torch.randn(2, 1, 16, dtype=torch.bfloat16), past)
    last = {a.name: a for a in rec.snapshots[-1].allocations}
    assert rec.inference and rec.steps == 3 and not any(a.kind == "gradients" for a in last.values())
    assert [last[n].kind for n in ("kv.0", "kv.1")] == ["kv_cache"] * 2 and last["kv.0"].shape == (2, 2, 16)
    assert {"act.q", "act.k", "act.v", "act.o"} <= set(last) and last["act.o"].dtype == "bfloat16"
    kernels = {k.name: {a.allocation for a in k.accesses} for k in rec.profile().kernels}
    assert kernels["fwd.model.cache"] == {"kv.0", "kv.1"}  # the attention reads its cache
    assert {"q.weight", "input", "act.q"} <= kernels["fwd.q"]


def test_the_committed_recording_is_what_the_example_script_records(tmp_path: Path) -> None:
    """Notebook 08's recorded model: the committed recording of examples/own_model.py is what it records here
    (allocations and profile exactly; ideal ratios within the fixtures' tolerance: torch's float kernels differ
    per CPU)."""
    rec = capture.run_script(EXAMPLE)
    report = fixtures.compare_recordings(RECORDED, rec.save(tmp_path / "own_model.nc"))
    assert report["structure_equal"] and report["profile_equal"], report
    assert report["max_rel_change"] <= fixtures.TOLERANCE


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_what_cannot_be_recorded_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(capture.CaptureError, match=r"not a torch\.nn\.Module"):
        capture.Recorder(lambda x: x)
    with pytest.raises(capture.CaptureError, match="TorchScript module refuses Python hooks"):
        capture.Recorder(torch.jit.script(nn.Linear(2, 2)))
    with pytest.raises(capture.CaptureError, match="meta device"):
        capture.Recorder(nn.Linear(2, 2, device="meta"))
    mixed = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2, device="meta"))
    with pytest.raises(capture.CaptureError, match=r"several devices \(cpu, meta\)"):
        capture.Recorder(mixed)
    with pytest.raises(capture.CaptureError, match=r"not a torch\.optim optimizer"):
        capture.Recorder(nn.Linear(2, 2), optimizer=object())
    with pytest.raises(capture.CaptureError, match="every -1"):
        capture.Recorder(nn.Linear(2, 2), every=-1)
    rec = capture.Recorder(nn.Linear(2, 2))
    with pytest.raises(capture.CaptureError, match="nothing recorded"):
        rec.save(tmp_path / "x.nc")
    with pytest.raises(capture.CaptureError, match=r"\.nc \(netCDF\) or \.zarr"):
        rec.save(tmp_path / "x.txt")

    class Peeks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            self.rec.snapshot()
            return self.lin(x)

    model = Peeks()
    with capture.Recorder(model) as model.rec, pytest.raises(capture.CaptureError, match="inside the model's forward"):
        model(torch.ones(1, 2))
    assert not model._forward_pre_hooks and not model.lin._forward_hooks  # hooks removed on the way out


@pytest.mark.parametrize("text, message", [
    ("x = 1\n", "defines no model and no loop"),
    ("import torch\nmodel = torch.nn.Linear(2, 2)\nloop = 3\n", "loop is a int, not a function"),
    ("import torch\nmodel = torch.nn.Linear(2, 2)\ndef loop():\n    model(torch.ones(3, 3))\n",
     r"script\.py:4: loop\(\) raised RuntimeError"),
    ("raise KeyError('no data')\n", r"script\.py:1: the script raised KeyError"),
])
def test_buddy_capture_says_what_is_wrong_with_a_script(text: str, message: str, tmp_path: Path, capsys) -> None:
    script = tmp_path / "script.py"
    script.write_text(text)
    assert main(["capture", str(script), "--out", str(tmp_path / "r.nc")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and pytest.importorskip("re").search(message, err), err


def test_buddy_capture_saves_a_recording_the_analysis_reads(tmp_path: Path, capsys) -> None:
    script = tmp_path / "tiny.py"
    script.write_text("import torch\ntorch.manual_seed(0)\nmodel = torch.nn.Sequential(torch.nn.Linear(32, 64), "
                      "torch.nn.ReLU(), torch.nn.Linear(64, 4))\noptimizer = torch.optim.SGD(model.parameters(), "
                      "lr=0.1, momentum=0.9)\nloss_fn = torch.nn.CrossEntropyLoss()\n"
                      "def loop():\n    for _ in range(2):\n        loss_fn(model(torch.randn(8, 32)), "
                      "torch.randint(0, 4, (8,))).backward()\n        optimizer.step()\n"
                      "        optimizer.zero_grad()\n")
    out = tmp_path / "tiny.nc"
    assert main(["capture", str(script), "--out", str(out), "--every", "2"]) == 0
    assert "tiny: 2 snapshots over 2 steps" in capsys.readouterr().out
    assert main(["analyze", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "momentum_buffer" in printed and "act.loss.0" in printed and "slowdown" in printed


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: the CUDA path (tensors copied to the "
                    "host, the allocator's bytes recorded) runs where one is")
def test_a_cuda_training_step_records_and_reports_the_allocator(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with capture.Recorder(model, opt) as rec:
        for _ in range(2):
            F.cross_entropy(model(torch.randn(4, 3, 8, 8, device="cuda")), torch.zeros(4, dtype=torch.long,
                                                                                     device="cuda")).backward()
            opt.step()
    assert rec.memory and rec.memory[-1]["reserved"] >= rec.memory[-1]["allocated"] > 0
    meta = json.loads(rec.save(tmp_path / "c.nc").with_suffix(".profile.json").read_text())
    assert meta["recorded"]["device"].startswith("cuda") and meta["recorded"]["cuda_memory"]
