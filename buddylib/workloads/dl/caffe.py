"""Caffe-style memory accounting of one training step: what a GPU holds under a blob-based framework.

The paper's DL snapshots are whole-GPU memory dumps of the framework it trained with; our DL
workloads snapshot PyTorch's minimal live set (parameters, gradients, optimizer state, tensors
autograd saved, the batch). A Caffe-style framework keeps far more: every layer's output is a
persistent *blob* with ``data`` (the forward output) and ``diff`` (the gradient w.r.t. it),
allocated once and kept for the whole iteration and across iterations. This module replays the
same network, seed and step as the PyTorch workload and records, at several points within one
iteration, every allocation such a framework holds, so the two accountings can be compared.

How the training step maps onto Caffe (BVLC Caffe's ``Solver::Step``, ``SGDSolver``, ``SplitLayer``,
``SyncedMemory``):

* **one top blob per leaf-module call** (``blob.<call>.data``, kind ``activations``;
  ``blob.<call>.diff``, kind ``gradients``), named after the module call that first produced it;
* **in-place layers share their bottom blob**, data and diff: a call whose output lies in the
  storage of its input, whole (``ReLU(inplace=True)``, the residual ``Add(inplace=True)``, and
  views such as ``Flatten``, which Caffe's Flatten/Reshape layers implement with
  ``ShareData``/``ShareDiff``), writes the blob of that input. So ``blob.features.0`` of AlexNet
  holds the ReLU's output after the forward and, after the backward, the gradient w.r.t. the
  convolution's output (Caffe's in-place ReLU backward overwrites the shared diff with the
  gradient of its bottom). Other modules are not in place here, even where Caffe's reference
  prototxts make them so (Dropout, BatchNorm/Scale), because our networks are written that way;
* **split blobs**: a blob read by more than one layer (a ResNet block's input, an Inception
  module's input, a Fire module's squeeze output) gets Caffe's automatic Split layer, whose tops
  share the blob's data but each keep their own diff: ``blob.<call>_split_<i>.diff`` holds the
  gradient that consumer ``i`` (in call order) sent back; the blob's diff is their sum;
* **the data layer's tops** ``blob.input.data`` and ``blob.label.data`` (kind ``input``; the
  label as float32, Caffe's blob type), written at the start of the forward (before it they
  hold the previous batch), with no diff: Caffe never back-propagates into the data layer and
  ``SyncedMemory`` allocates memory only when first touched;
* **the loss blob** ``blob.loss`` (one float; its diff is the loss weight, 1);
* **parameters** ``<param>`` (``weights``) and their diffs ``<param>.diff`` (``gradients``):
  zero from the start of the iteration (``ClearParamDiffs``) until the backward writes them, the
  raw gradient after the backward, and the update value after the solver step (Caffe's SGD
  copies its history into the diff and subtracts it from the data);
* **SGD history** ``<param>.history`` (``optimizer``): Caffe keeps ``lr * (grad + wd * w) +
  momentum * history``, which for a constant learning rate is ``lr`` times PyTorch's
  ``momentum_buffer`` (computed so: one float32 rounding); its ``update_`` and ``temp_`` blobs
  are never touched by SGD with L2 decay, so never allocated;
* module buffers (batch-norm running statistics) as ``<buffer>`` (``other``), as the PyTorch
  accounting has them.

Points (:data:`POINTS`): before the forward (after ``ClearParamDiffs``), mid-forward (after half
of the layer calls: later blobs still hold the previous iteration's data, every diff the previous
iteration's), after the forward (the loss computed), mid-backward (half of the blob diffs
written), after the backward (before the solver step) and after the update. In the very first
iteration (``steps=0``) a blob appears when its layer first runs, its diffs zero until written.

Left out, because they depend on the engine and version or are negligible: layer-internal
buffers (convolution workspaces or im2col buffers, max-pool indices of the CAFFE engine, dropout
masks, BatchNorm's ``mean_/variance_/temp_/x_norm_`` and Scale's ``temp_``, SoftmaxWithLoss's
``prob_``, bias multipliers), the data layer's prefetch buffers, and the diff and history of the
batch-norm statistics (Caffe parameters with learning rate 0: zeros).

Everything is captured from the workload's own training step (forward hooks copy each output
into its blob, tensor hooks each output's gradient, node hooks each consumer's share of it), so
the bytes are those of the PyTorch run with the same seed and scale, and deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from buddylib import workloads
from buddylib.compressors import ALL_COMPRESSORS
from buddylib.snapshot import Allocation, Snapshot
from buddylib.threads import numba_threads
from buddylib.workloads.base import footprint_bytes
from buddylib.workloads.dl.base import TorchWorkload, _ptr, _tensors
from buddylib.workloads.dl.cnn import ImageClassifier

#: Points within one iteration at which the Caffe accounting is recorded, in order.
POINTS = ("before_forward", "mid_forward", "after_forward", "mid_backward", "after_backward", "after_update")
#: Blobs of the data layer.
INPUT_BLOBS = ("input", "label")


@dataclass
class CaffeRun:
    """The Caffe accounting of one iteration beside the PyTorch live set of the same iteration.

    Parameters
    ----------
    workload : TorchWorkload
        The workload, after the iteration.
    scale : str or float
    seed : int
    step : int
        The iteration's index (0-based).
    points : tuple of str
        Points of :data:`POINTS`, in order.
    snapshots : list of Snapshot
        One per point of ``points``.
    pytorch : list of Snapshot
        :meth:`buddylib.workloads.dl.base.TorchWorkload.allocations` before and after the same iteration.
    blobs : dict of str to str
        Every leaf-module call of the iteration and the blob its output lies in.
    splits : dict of str to list of str
        Blobs read by several layers and those layers, in the order of their split diffs.
    torch_rng : torch.Tensor, optional
        The torch RNG state the iteration started from (dropout masks), so it can be replayed.
    """

    workload: TorchWorkload
    scale: str | float
    seed: int
    step: int
    points: tuple[str, ...]
    snapshots: list[Snapshot]
    pytorch: list[Snapshot]
    blobs: dict[str, str] = field(default_factory=dict)
    splits: dict[str, list[str]] = field(default_factory=dict)
    torch_rng: torch.Tensor | None = None

    def at(self, point: str) -> Snapshot:
        """The Caffe snapshot at ``point``.

        Parameters
        ----------
        point : str
            One of ``points``.

        Returns
        -------
        Snapshot

        Raises
        ------
        ValueError
            A point not recorded.
        """
        return self.snapshots[self.points.index(point)]


def caffe_snapshots(name: str, scale: str | float = "quick", seed: int = 0, steps: int | None = None,
                    points: Sequence[str] = POINTS, compressors: Sequence[str] = ALL_COMPRESSORS,
                    keep_bytes: bool = False) -> list[Snapshot]:
    """Caffe-style snapshots of iteration ``steps`` of workload ``name`` at ``points``.

    Parameters
    ----------
    name, scale, seed, steps, points, compressors, keep_bytes
        As for :func:`caffe_run`.

    Returns
    -------
    list of Snapshot
        The :class:`CaffeRun`'s ``snapshots``, one per point.
    """
    return caffe_run(name, scale, seed, steps, points, compressors, keep_bytes).snapshots


def caffe_run(name: str, scale: str | float = "quick", seed: int = 0, steps: int | None = None,
              points: Sequence[str] = POINTS, compressors: Sequence[str] = ALL_COMPRESSORS,
              keep_bytes: bool = False) -> CaffeRun:
    """Train CNN workload ``name`` for ``steps`` iterations (default: all but the last of its run, so the
    recorded iteration is the one whose end the workload's own run snapshots last), then record one more
    iteration under Caffe's memory model at ``points``, and the PyTorch live set before and after it.

    Parameters
    ----------
    name : str
        An fp32 CNN workload (an ``ImageClassifier`` trained with momentum SGD).
    scale : str or float
        A named scale or a footprint in MiB.
    seed : int
    steps : int, optional
        Iterations trained before the recorded one.
    points : sequence of str
        Points of :data:`POINTS`.
    compressors : sequence of str
        What each allocation is compressed with, as it is taken.
    keep_bytes : bool
        Also keep copies of the bytes.

    Returns
    -------
    CaffeRun

    Raises
    ------
    ValueError
        An unknown point, nothing to record (no compressors and no bytes kept), a workload that is not an fp32
        CNN or not trained with momentum SGD, or negative ``steps``.
    RuntimeError
        A point the iteration did not reach.
    """
    points = tuple(points)
    unknown = [p for p in points if p not in POINTS]
    if unknown or not points:
        raise ValueError(f"points {list(points)}: choose one or more of {', '.join(POINTS)}")
    if not compressors and not keep_bytes:
        raise ValueError("nothing would be recorded: give compressors or keep_bytes=True")
    w = workloads.get(name)
    if not isinstance(w, ImageClassifier) or w.autocast is not None:
        raise ValueError(f"{name}: the Caffe accounting covers the fp32 CNN workloads (whose every operation is a "
                         f"layer module), not {type(w).__name__}")
    w.setup(footprint_bytes(scale), np.random.default_rng(seed))
    _check_sgd(name, w.optimizer)
    steps = w.n_steps - 1 if steps is None else int(steps)
    if steps < 0:
        raise ValueError(f"steps {steps}: must be >= 0")
    net = _CaffeNet(w, points, tuple(compressors), keep_bytes, step=steps)
    with numba_threads(w.compress_threads):
        try:
            for i in range(steps):
                net.capture = i == steps - 1  # the previous iteration fills the blobs the recorded one starts from
                w.step()
            pytorch = [_snapshot(w.name, _pytorch_allocations(w), compressors, keep_bytes, step=steps)]
            rng = w._torch_rng.clone()
            net.capture = net.record = True
            net.param_diffs = "cleared"  # Solver::Step: ClearParamDiffs, then ForwardBackward
            net.point("before_forward")
            net.param_diffs = "grad"
            w.step()
            net.param_diffs = "history"  # SGDSolver::ComputeUpdateValue copies the history into the diff
            net.point("after_update")
            pytorch.append(_snapshot(w.name, _pytorch_allocations(w), compressors, keep_bytes, step=steps + 1))
        finally:
            net.remove()
    missing = [p for p in points if p not in net.taken]
    if missing:
        raise RuntimeError(f"{name}: points {missing} were not reached in the iteration")
    return CaffeRun(w, scale, seed, steps, points, [net.taken[p] for p in points], pytorch,
                    dict(net.blob_of), {b: list(c) for b, c in net.consumers.items() if len(c) > 1}, rng)


def _check_sgd(name: str, opt: torch.optim.Optimizer) -> None:
    """Caffe's SGD history is ``lr`` times PyTorch's momentum buffer only for plain momentum SGD."""
    ok = isinstance(opt, torch.optim.SGD) and all(
        g["momentum"] > 0 and g["dampening"] == 0 and not g["nesterov"] and not g.get("maximize", False)
        for g in opt.param_groups)
    if not ok:
        raise ValueError(f"{name}: the Caffe accounting models SGD with momentum, not {type(opt).__name__}")


def _pytorch_allocations(w: TorchWorkload) -> list[tuple[str, np.ndarray, str]]:
    return [(n, arr, kind) for n, (arr, kind) in w.allocations().items()]


def _snapshot(workload: str, allocations: list[tuple[str, np.ndarray, str]], compressors: Sequence[str],
              keep_bytes: bool, step: int, time: float | None = None) -> Snapshot:
    """Compress (and optionally copy) every allocation now: the buffers change as the iteration goes on."""
    from buddylib.compressors import sectors

    out = []
    for name, arr, kind in allocations:
        a = Allocation.from_array(name, np.copy(arr) if keep_bytes else arr, kind=kind)
        a.sectors = {c: sectors(arr, c) for c in compressors}
        if not keep_bytes:
            a.data = None
        out.append(a)
    return Snapshot(workload, out, step=step, time=float(step) if time is None else time)


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


class _CaffeNet:
    """Persistent blobs filled from the workload's own step by hooks, and snapshots of them at points."""

    def __init__(self, w: TorchWorkload, points: tuple[str, ...], compressors: tuple[str, ...],
                 keep_bytes: bool, step: int) -> None:
        self.w = w
        self.points, self.compressors, self.keep_bytes, self.step = points, compressors, keep_bytes, step
        self.capture = False  # hooks copy outputs and gradients into the blobs
        self.in_forward = False
        self.record = False  # points are snapshotted
        self.param_diffs = "grad"  # what parameter diffs hold: "cleared", "grad" (or zero) or "history"
        self.taken: dict[str, Snapshot] = {}
        # persistent state, in Caffe's net order (the order blobs were first produced)
        self.data: dict[str, torch.Tensor] = {}
        self.diff: dict[str, torch.Tensor] = {}
        self.split: dict[str, list[torch.Tensor]] = {}
        self.leaves = [m for m in w.module_names if not any(True for _ in m.children())]
        self.n_calls_expected = len(self.leaves)
        self.handles: list[Any] = []
        for m in self.leaves:
            self.handles.append(m.register_forward_pre_hook(self._pre))
            self.handles.append(m.register_forward_hook(self._post))
        self.handles.append(w.optimizer.register_step_pre_hook(lambda *_: self.point("after_backward")))
        self._new_iteration()

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def _new_iteration(self) -> None:
        """Per-iteration bookkeeping; storages are unique within one iteration because ``keep`` holds them."""
        self.storage: dict[int, str] = {}  # storage -> blob
        self.blob_of: dict[str, str] = {}  # leaf call -> blob of its output
        self.consumers: dict[str, list[str]] = {}  # blob -> calls reading it (not in place)
        self.count: dict[str, int] = {}
        self.calls = 0
        self.hooks = 0
        self.fired = 0
        self.split_written: set[tuple[str, int]] = set()
        self.pending: tuple[str, list[tuple[torch.Tensor, Any]]] | None = None
        self.keep: list[Any] = []

    # -- forward ------------------------------------------------------------------------------
    def _pre(self, mod: nn.Module, args: tuple[Any, ...]) -> None:
        if not self.capture:
            return
        if not self.in_forward:  # a new iteration; the data layer runs first: its tops now hold the batch
            if self.blob_of:
                self.n_calls_expected = len(self.blob_of)
                self._new_iteration()
            self.in_forward = True
            for blob, t in zip(INPUT_BLOBS, (self.w.x, self.w.y), strict=True):
                self.storage[_ptr(t)] = blob
                self._write(blob, t.detach().to(torch.float32), diff=False)  # Caffe blobs are float
        base = self.w.module_names[mod]
        k = self.count.get(base, 0)
        self.count[base] = k + 1
        call = base if k == 0 else f"{base}#{k}"
        inputs = [(t, t.grad_fn) for t in _tensors(args) if t.layout == torch.strided]
        self.pending = (call, inputs)
        self.keep.append(args)

    def _post(self, mod: nn.Module, args: tuple[Any, ...], out: Any) -> None:
        if not self.capture or self.pending is None:
            return
        call, inputs = self.pending
        self.pending = None
        outs = [t for t in _tensors(out) if t.layout == torch.strided]
        if len(outs) != 1:
            raise ValueError(f"{self.w.name}: layer {call} has {len(outs)} outputs; Caffe accounting needs one")
        o = outs[0]
        p = _ptr(o)
        shared = self.storage.get(p)
        in_place = shared is not None and any(_ptr(t) == p for t, _ in inputs)
        if shared is not None and not (in_place and o.numel() == self.data[shared].numel()):
            raise ValueError(f"{self.w.name}: layer {call} writes part of blob {shared}; not a Caffe layer")
        blob = shared if in_place else call
        self.storage[p] = blob
        self.blob_of[call] = blob
        for t, fn in inputs:
            src = self.storage.get(_ptr(t))
            if src is None:
                raise ValueError(f"{self.w.name}: layer {call} reads a tensor that no layer produced")
            if in_place and src == blob:
                continue
            users = self.consumers.setdefault(src, [])
            users.append(call)
            if t.requires_grad and o.grad_fn is not None:
                self._watch_consumer(o.grad_fn, src, len(users) - 1, fn, t.output_nr, [f for _, f in inputs])
        self._write(blob, o.detach(), diff=o.requires_grad, init=1.0 if mod is self.w.criterion else 0.0)
        if o.requires_grad:
            o.register_hook(self._diff_hook(blob))
            self.hooks += 1
        self.keep.append(out)
        self.calls += 1
        if self.calls == math.ceil(self.n_calls_expected / 2):
            self.point("mid_forward")
        if mod is self.w.criterion:
            self.in_forward = False
            for b, users in self.consumers.items():  # Caffe's Split tops, one diff each
                if len(users) > 1 and b not in self.split:
                    self.split[b] = [torch.zeros_like(self.data[b]) for _ in users]
            self.point("after_forward")

    def _write(self, blob: str, value: torch.Tensor, diff: bool, init: float = 0.0) -> None:
        """Copy a forward output into its blob's data, creating the blob (zeroed, as SyncedMemory is) if new."""
        if blob not in self.data:
            self.data[blob] = torch.zeros_like(value, memory_format=torch.contiguous_format)
            if diff:
                self.diff[blob] = torch.full_like(self.data[blob], init)
        with torch.no_grad():
            self.data[blob].view(-1).copy_(value.reshape(-1))

    # -- backward -----------------------------------------------------------------------------
    def _diff_hook(self, blob: str) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            with torch.no_grad():
                self.diff[blob].view(-1).copy_(grad.reshape(-1))
            self.fired += 1
            if self.fired == math.ceil(self.hooks / 2):
                self.point("mid_backward")
        return hook

    def _watch_consumer(self, start: Any, blob: str, i: int, fn: Any, nr: int, stop: list[Any]) -> None:
        """Hook every autograd node of one layer call that sends a gradient to its input ``(fn, nr)``: their
        sum is the gradient this consumer sends back, its Split top's diff. The search stays inside the
        call: it stops at the nodes of the call's inputs (as they were before it ran) and at leaves."""
        stop_ids = {id(f) for f in stop if f is not None}
        seen: set[int] = set()
        todo = [start]
        while todo:
            node = todo.pop()
            if node is None or id(node) in seen or id(node) in stop_ids:
                continue
            seen.add(id(node))
            if len(seen) > 10_000:
                raise RuntimeError(f"{self.w.name}: the backward graph of one layer call has no end")
            for j, (nxt, k) in enumerate(node.next_functions):
                if nxt is fn and k == nr and fn is not None:
                    node.register_hook(self._split_hook(blob, i, j))
                todo.append(nxt)

    def _split_hook(self, blob: str, i: int, j: int) -> Callable[[tuple[Any, ...], tuple[Any, ...]], None]:
        def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
            g = grad_inputs[j]
            if g is None or blob not in self.split:
                return
            buf = self.split[blob][i].view(-1)
            with torch.no_grad():
                if (blob, i) in self.split_written:
                    buf.add_(g.reshape(-1))
                else:
                    buf.copy_(g.reshape(-1))
                    self.split_written.add((blob, i))
        return hook

    # -- snapshots ----------------------------------------------------------------------------
    def point(self, name: str) -> None:
        if self.record and name in self.points and name not in self.taken:
            self.taken[name] = self.snapshot(name)

    def snapshot(self, name: str) -> Snapshot:
        allocs: list[tuple[str, np.ndarray, str]] = []
        for blob, data in self.data.items():
            allocs.append((f"blob.{blob}.data", _numpy(data), "input" if blob in INPUT_BLOBS else "activations"))
            if blob in self.diff:
                allocs.append((f"blob.{blob}.diff", _numpy(self.diff[blob]), "gradients"))
            for i, d in enumerate(self.split.get(blob, [])):
                allocs.append((f"blob.{blob}_split_{i}.diff", _numpy(d), "gradients"))
        opt = self.w.optimizer
        lr = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
        for n, p in self.w.model.named_parameters():
            buf = opt.state.get(p, {}).get("momentum_buffer")
            history = torch.zeros_like(p) if buf is None else buf.detach() * lr[id(p)]
            if self.param_diffs == "history":
                diff = history
            elif self.param_diffs == "grad" and p.grad is not None:
                diff = p.grad
            else:
                diff = torch.zeros_like(p)
            allocs += [(n, _numpy(p), "weights"), (f"{n}.diff", _numpy(diff), "gradients"),
                       (f"{n}.history", _numpy(history), "optimizer")]
        allocs += [(n, _numpy(b), "other") for n, b in self.w.model.named_buffers() if b.numel()]
        time = self.step + POINTS.index(name) / len(POINTS)
        return _snapshot(f"{self.w.name}-caffe", allocs, self.compressors, self.keep_bytes, self.step, time)
