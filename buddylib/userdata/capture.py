"""Record a PyTorch training (or inference) step of any model: what a GPU would hold and how the step reads it.

The built-in networks record themselves (:mod:`buddylib.workloads.dl.base`); :class:`Recorder` gives the same
recording to a user's own model and loop, in the way PyTorch users already profile::

    from buddylib import capture
    with capture.Recorder(model, optimizer, loss_fn=criterion) as rec:
        for x, y in batches:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()          # a snapshot after every optimizer step (``every``), and one at the start
            optimizer.zero_grad()
    rec.save("mine.nc")               # a run, as `buddy workloads run` writes it: buddy analyze, notebooks 00 and 08

A *step* begins at each call of ``model`` (not nested in another call) and, in training, ends at the optimizer's
step; in training, a forward run without grad (an evaluation pass) is not a step and is not traced. A snapshot holds
what the built-in training runs hold, under the same names: the step's inputs (``input``, and ``targets``, what
``loss_fn`` or a functional loss was given besides the model's output), the parameters (``weights``), buffers,
gradients, optimizer state, every tensor autograd saved for the backward pass (``act.<module>.<k>``, one per storage:
views and in-place results are counted once; autocast's half copies of parameters as ``half_weights``), and in
inference the leaf modules' outputs. Tensors saved by code outside any module (a functional loss) are
``act.outside.<k>``.

What it cannot see is listed in :data:`UNSEEN` and saved with the run (``buddy analyze`` prints it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from buddylib.compressors import ALL_COMPRESSORS, FLOAT16_COMPRESSORS, reference_bytes, sectors
from buddylib.snapshot import Allocation, Snapshot
from buddylib.snapshot import save as save_snapshots
from buddylib.threads import numba_threads
from buddylib.workloads.base import Access, AccessProfile, Kernel
from buddylib.workloads.dl.base import TorchWorkload, _Call, _ptr, _tensors, _Tracer, _whole_storage, host_array

#: GPU memory a recording does not hold: said wherever a recorded run is read (the profile's ``recorded`` field).
UNSEEN = (
    "the caching allocator's reserved-but-unallocated memory (with CUDA, torch.cuda.memory_reserved is recorded "
    "beside)",
    "cuDNN and cuBLAS workspaces, NCCL communication buffers",
    "tensors made outside the recorded steps and not given to the model (a data loader's prefetched batches, "
    "tensors kept in Python lists)",
    "temporaries a kernel frees before the step ends that autograd did not save (they do not outlive the step)",
)

#: What a recording compresses every allocation with: what the built-in runs record, and the codes made for 16-bit
#: floats (autocast's copies and activations are bf16 or fp16; which, a recorder learns only as the step runs).
COMPRESSORS = (*ALL_COMPRESSORS, *FLOAT16_COMPRESSORS)


class CaptureError(ValueError):
    """A model, optimizer or call the recorder cannot record, said in one line."""


def _devices(model: nn.Module) -> set[torch.device]:
    return {t.device for t in [*model.parameters(), *model.buffers()]}


def _check_model(model: Any, optimizer: Any) -> None:
    """A clear line for what cannot be recorded."""
    if not isinstance(model, nn.Module):
        raise CaptureError(f"model: a {type(model).__name__}, not a torch.nn.Module")
    if isinstance(model, torch.jit.ScriptModule):
        raise CaptureError(f"model {type(model).__name__}: a TorchScript module refuses Python hooks; record the "
                           "eager model it was scripted from")
    devices = _devices(model)
    if len(devices) > 1:
        raise CaptureError(f"model {type(model).__name__}: tensors on several devices "
                           f"({', '.join(sorted(map(str, devices)))}); record a model that lives on one")
    if any(d.type == "meta" for d in devices):
        raise CaptureError(f"model {type(model).__name__}: has parameters on the meta device, which hold no bytes; "
                           "materialise it (to_empty and load its weights) first")
    if optimizer is not None and not (hasattr(optimizer, "state") and hasattr(optimizer, "param_groups")
                                      and callable(getattr(optimizer, "step", None))):
        raise CaptureError(f"optimizer: a {type(optimizer).__name__}, not a torch.optim optimizer")


class Recorder(TorchWorkload):
    """Records snapshots and the access profile of a user's own training (``optimizer`` given) or inference loop.

    Used as a context manager around the loop, as ``torch.profiler`` is: what a GPU holds (weights, gradients,
    optimizer state, the tensors autograd saves, autocast's copies, the batch) becomes the allocations of a
    snapshot taken at the start and after steps; :meth:`save` writes a run that ``buddy analyze`` reads.

    Parameters
    ----------
    model : torch.nn.Module
        The model, on the CPU or CUDA, in fp32, bf16 or fp16 (with autocast).
    optimizer : torch.optim.Optimizer, optional
        Its optimizer: given, a step is a training step; without it, a forward pass (inference).
    loss_fn : torch.nn.Module, optional
        The loss module (e.g. ``nn.CrossEntropyLoss()``), hooked like the model, so the tensors it saves are named
        after it and its other arguments are the step's ``targets``.
    name : str, optional
        The run's name (default: the model's class, lower case).
    every : int
        A snapshot at the start and after every ``every``-th step (0: only those :meth:`snapshot` takes).
    inference : bool, optional
        A step is a forward pass and activations are the leaf modules' outputs (default: when no optimizer is given).
    compressors, references : sequence of str
        What each allocation is compressed with (default: :data:`COMPRESSORS`, and zstd and lz4 as the built-in
        runs).
    keep_bytes : bool
        Whether the snapshots also keep a copy of the bytes.

    Raises
    ------
    CaptureError
        A model it cannot record (a TorchScript module, meta tensors, tensors on several devices) or a bad argument,
        in one line saying so.
    """

    suite = "user"

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer | None = None, *,
                 loss_fn: nn.Module | None = None, name: str | None = None, every: int = 1,
                 inference: bool | None = None, compressors: Sequence[str] = COMPRESSORS,
                 references: Sequence[str] = ("zstd", "lz4"), keep_bytes: bool = False) -> None:
        _check_model(model, optimizer)
        if not isinstance(every, int) or every < 0:
            raise CaptureError(f"every {every!r}: a snapshot after every N-th step needs a whole N >= 0")
        if loss_fn is not None and not isinstance(loss_fn, nn.Module):
            raise CaptureError(f"loss_fn: a {type(loss_fn).__name__}, not a torch.nn.Module (a functional loss "
                               "needs no loss_fn: what it saves is recorded as act.outside.<k>)")
        self.name = name or type(model).__name__.lower()
        self.model, self.optimizer, self.criterion = model, optimizer, loss_fn
        self.inference = optimizer is None if inference is None else bool(inference)
        self.every, self.keep_bytes = every, keep_bytes
        self.compressors, self.references = tuple(compressors), tuple(references)
        self.autocast = None
        self.param_names = {id(p): n for n, p in model.named_parameters()}
        self.buffer_names = {id(b): n for n, b in model.named_buffers()}
        self.module_names = {m: (n or "model") for n, m in model.named_modules()}
        if loss_fn is not None:
            self.module_names[loss_fn] = "loss"
        self.snapshots: list[Snapshot] = []
        self.labels: list[str] = []
        self.steps = 0
        self.memory: list[dict[str, int]] = []  # CUDA allocator bytes at each snapshot
        self._inputs: dict[str, torch.Tensor] = {}
        self._kv: dict[str, torch.Tensor] = {}
        self._acts: dict[str, torch.Tensor] = {}
        self._half: set[str] = set()
        self._last: tuple[_Tracer, dict[int, str]] | None = None
        self._tracer: _Tracer | None = None
        self._outside: int | None = None  # the synthetic call of tensors saved outside any module, this step
        self._pending = False  # a training step's forward ran; its names are not resolved yet
        self._profile: AccessProfile | None = None
        self._index: dict[str, np.ndarray] = {}
        self._handles: list[Any] = []
        self._stack = contextlib.ExitStack()
        self._parts: list[list[bytes]] = []  # per snapshot, per allocation: its name, dtype, shape and bytes' digest
        self._t0 = time.perf_counter()
        self.seconds = 0.0

    # -- the context manager ---------------------------------------------------------------
    def __enter__(self) -> Recorder:
        try:
            for m in self.module_names:
                self._handles += [m.register_forward_pre_hook(self._pre_hook, with_kwargs=True),
                                  m.register_forward_hook(self._post_hook, with_kwargs=True)]
            if self.optimizer is not None and not self.inference:
                if not hasattr(self.optimizer, "register_step_post_hook"):
                    raise CaptureError(f"optimizer {type(self.optimizer).__name__}: takes no step hook "
                                       "(register_step_post_hook); call rec.step_done() after each step instead")
                self._handles.append(self.optimizer.register_step_post_hook(lambda *_: self.step_done()))
        except (RuntimeError, AttributeError) as exc:
            self._remove()
            raise CaptureError(f"model {type(self.model).__name__}: refuses hooks ({exc})") from None
        if not self.inference:
            self._stack.enter_context(torch.autograd.graph.saved_tensors_hooks(self._pack, _Tracer.unpack))
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        self._remove()
        self.seconds += time.perf_counter() - self._t0

    def _remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    # -- what the user calls ------------------------------------------------------------------
    def snapshot(self, label: str | None = None) -> Snapshot:
        """Record every live allocation now (compressed as it is taken) and return the snapshot.

        Parameters
        ----------
        label : str, optional
            What the snapshot is called in the saved run (default: ``"step N"``).

        Returns
        -------
        Snapshot

        Raises
        ------
        CaptureError
            Called inside the model's forward, or nothing is live to record.
        """
        if self._tracer is not None and self._tracer.stack:
            raise CaptureError("snapshot(): called inside the model's forward; call it between the steps' phases")
        self._resolve()
        with numba_threads(self.compress_threads):  # one host copy at a time (a CUDA model's may be large)
            pairs = [self._compressed(n, t, kind) for n, (t, kind) in self.live().items()]
        allocations, parts = [a for a, _ in pairs], [part for _, part in pairs]
        if not allocations:
            raise CaptureError("snapshot(): nothing is live to record")
        snap = Snapshot(self.name, allocations, step=self.steps, time=float(self.steps))
        self.snapshots.append(snap)
        self._parts.append(parts)
        self.labels.append(label or f"step {self.steps}")
        device = next((t.device for t in self.model.parameters()), torch.device("cpu"))
        if device.type == "cuda":
            self.memory.append({"step": self.steps, "allocated": torch.cuda.memory_allocated(device),
                                "reserved": torch.cuda.memory_reserved(device)})
        return snap

    def kv_cache(self, tensors: Any, prefix: str = "kv") -> None:
        """Declare a cache the model keeps outside its modules as ``kv_cache`` allocations, held until declared
        again; the model's buffers whose name holds "cache" are ``kv_cache`` without this.

        Parameters
        ----------
        tensors : tensor, or nested tuples, lists or dicts of tensors
            The cache (``past_key_values``); a storage given twice is one allocation.
        prefix : str
            The allocations are named ``<prefix>.<i>.<j>`` (dict keys for dicts).
        """
        self._kv = {}
        for path, t in _named(tensors, prefix):
            if _ptr(t) not in {_ptr(v) for v in self._kv.values()}:
                self._kv[path] = t

    def step_done(self) -> None:
        """The training step ended (the optimizer's step hook calls it): resolve its names and its access profile,
        then take the snapshot that ``every`` asks for."""
        self._resolve()
        if self._last is not None:
            self._tracer.release()
        self.steps += 1
        self._record_profile()
        if self.every and self.steps % self.every == 0:
            self.snapshot()

    @property
    def run_digest(self) -> str:
        """Digest of every recorded allocation's name, dtype, shape and bytes, in order: the same model, data and
        seed give the same digest."""
        h = hashlib.sha256()
        for parts in self._parts:
            for p in parts:
                h.update(p)
        return h.hexdigest()

    def profile(self) -> AccessProfile:
        """The kernels of the last complete step (of the last forward pass in inference).

        Raises
        ------
        CaptureError
            No step completed yet.
        """
        if self._profile is None:
            raise CaptureError(f"{self.name}: no complete step recorded yet, so no access profile")
        return self._profile

    def save(self, path: str | os.PathLike) -> Path:
        """Write the run as ``buddy workloads run`` does; ``buddy analyze``, the timing model and notebooks 00 and
        08 read it.

        Parameters
        ----------
        path : str or os.PathLike
            The snapshots' file, ``.nc`` or ``.zarr``, its folder made if missing; the access profile
            (``.profile.json``, with what the recording could not see) and gather index arrays (``.index.npz``) are
            written beside it.

        Returns
        -------
        pathlib.Path
            ``path``.

        Raises
        ------
        CaptureError
            Another suffix, or nothing recorded yet.
        """
        path = Path(path)
        if path.suffix not in (".nc", ".zarr"):
            raise CaptureError(f"save({str(path)!r}): a run is saved to a .nc (netCDF) or .zarr path")
        if not self.snapshots:
            raise CaptureError(f"save({str(path)!r}): nothing recorded (no snapshot: did a step run inside the "
                               "`with` block?)")
        profile = self._profile or AccessProfile(self.name, [])
        path.parent.mkdir(parents=True, exist_ok=True)  # as `buddy workloads run --out` makes its folder
        save_snapshots(self.snapshots, path, compressors=self.compressors)
        meta = {**profile.to_dict(), "scale": "recorded", "seed": None, "digest": self.run_digest,
                "seconds": round(self.seconds, 3), "code": self.code(),
                "recorded": {"labels": self.labels, "mode": "inference" if self.inference else "training",
                             "steps": self.steps, "device": str(next((p.device for p in self.model.parameters()),
                                                                     "cpu")),
                             "cuda_memory": self.memory, "unseen": list(UNSEEN)}}
        path.with_suffix(".profile.json").write_text(json.dumps(meta, separators=(",", ":")))
        index = path.with_suffix(".index.npz")
        if self._index:
            np.savez_compressed(index, **self._index)
        elif index.exists():
            index.unlink()
        return path

    def summary(self) -> str:
        """Bytes by kind in the last snapshot, and what the recording does not hold."""
        if not self.snapshots:
            return f"{self.name}: nothing recorded yet"
        by: dict[str, int] = {}
        for a in self.snapshots[-1].allocations:
            by[a.kind] = by.get(a.kind, 0) + a.nbytes
        kinds = ", ".join(f"{k} {v / 2**20:.2f} MiB" for k, v in sorted(by.items(), key=lambda kv: -kv[1]))
        lines = [f"{self.name}: {len(self.snapshots)} snapshots over {self.steps} steps; last: {kinds}"]
        lines += [f"CUDA allocator at step {m['step']}: {m['allocated'] / 2**20:.1f} MiB allocated, "
                  f"{m['reserved'] / 2**20:.1f} MiB reserved" for m in self.memory[-1:]]
        return "\n".join([*lines, "not recorded: " + "; ".join(UNSEEN)])

    # -- the Workload contract: driven by the user's loop, not by Workload.run ------------------
    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        """Refused: a Recorder is driven by the user's loop, not by :meth:`~buddylib.workloads.base.Workload.run`.

        Parameters
        ----------
        footprint, rng
            Ignored.

        Raises
        ------
        CaptureError
            Always.
        """
        raise CaptureError("a Recorder is driven by your own loop inside `with`, not by Workload.run")

    def step(self) -> None:
        """Refused, as :meth:`setup`: raises ``CaptureError``."""
        raise CaptureError("a Recorder is driven by your own loop inside `with`, not by Workload.run")

    def inputs(self) -> dict[str, torch.Tensor]:
        return dict(self._inputs)

    # -- hooks ----------------------------------------------------------------------------------
    def _pre_hook(self, mod: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        top = self._tracer is None or not self._tracer.stack
        if top and not self.inference and not torch.is_grad_enabled():
            return  # an evaluation pass inside a training loop: not a training step, not traced
        if mod is self.model and top:
            self._begin(args, kwargs)
        elif mod is self.criterion and top and self._tracer is not None:
            self._targets(args, kwargs)
        if self._tracer is not None and (self._tracer.stack or mod is self.model or mod is self.criterion):
            self._tracer.pre(mod, (*args, kwargs) if kwargs else args)

    def _post_hook(self, mod: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        if self._tracer is None or not self._tracer.stack:
            return
        self._tracer.post(mod, args, out)
        if mod is self.model and not self._tracer.stack and self.inference:
            self._end_forward()

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        tracer = self._tracer
        if tracer is None or not isinstance(t, torch.Tensor):
            return t
        if tracer.stack:
            return tracer.pack(t)
        p = _ptr(t) if t.layout == torch.strided else None
        if (p is not None and t.dim() and t.grad_fn is None and not t.requires_grad and p not in tracer.producer
                and p not in tracer.known and p not in tracer.saved):  # a functional loss's targets: an input
            self._targets((t,), {})
        if self._outside is None:  # a functional loss, or any op outside the model's modules
            self._outside = len(tracer.calls)
            tracer.calls.append(_Call("outside", nn.Module(), True))
        tracer.stack.append(self._outside)
        try:
            return tracer.pack(t)
        finally:
            tracer.stack.pop()

    # -- a step ----------------------------------------------------------------------------------
    def _begin(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A new step: the previous one's saved tensors are freed (as autograd frees them); this one's inputs
        are the model's arguments."""
        if self._pending:  # a forward whose step never ended (no optimizer): resolve it before it is replaced
            self._resolve()
            self._tracer.release()
            self._record_profile()
        self._acts, self._half, self._outside = {}, set(), None
        self._inputs = {}
        cached = {_ptr(t) for t in self._kv.values()}
        named = [(path, t) for path, t in [*_named(args, "input"), *_named(kwargs, "input")] if _ptr(t) not in cached]
        for path, t in named:  # one tensor is "input", as in the built-in runs; several are named by position
            if _ptr(t) not in {_ptr(v) for v in self._inputs.values()}:
                self._add_input("input" if len(named) == 1 else path, t)
        if len(_devices(self.model)) > 1:
            raise CaptureError(f"model {type(self.model).__name__}: tensors on several devices now; record a "
                               "model that lives on one")
        if not self.snapshots and self.every:
            self.snapshot("start")
        known = {_ptr(t): n for n, t in [*self.model.named_parameters(), *self.model.named_buffers(),
                                         *self._inputs.items(), *self._kv.items()]}
        self._tracer = _Tracer(self.module_names, known, self.param_names)
        self._pending = not self.inference

    def _add_input(self, name: str, t: torch.Tensor) -> None:
        if t.device.type == "meta":
            raise CaptureError(f"input {name}: a meta tensor holds no bytes")
        if t.layout == torch.strided and t.numel():
            self._inputs[name] = t

    def _targets(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The loss's arguments that no recorded call made and that are not known: the step's targets (also
        added to the start snapshot, which the first step's batch belongs to)."""
        tracer = self._tracer
        made = set(tracer.producer) | set(tracer.known) | set(tracer.saved)
        new = [t for _, t in [*_named(args, "t"), *_named(kwargs, "t")] if _ptr(t) not in made]
        have = sum(1 for n in self._inputs if n == "targets" or n.startswith("targets."))
        for k, t in enumerate(new, start=have):
            name = "targets" if k == 0 else f"targets.{k}"
            self._add_input(name, t)
            if name in self._inputs:
                tracer.known[_ptr(t)] = name
        added = [n for n in self._inputs if (n == "targets" or n.startswith("targets.")) and
                 _ptr(self._inputs[n]) in {_ptr(t) for t in new}]
        if self.steps == 0 and len(self.snapshots) == 1 and self.labels[0] == "start" and added:
            self._extend_start(added)

    def _extend_start(self, names: list[str]) -> None:
        """Add the first step's targets to the start snapshot, after its inputs (the batch is in memory before the
        step begins)."""
        snap, parts = self.snapshots[0], self._parts[0]
        at = sum(1 for a in snap.allocations if a.kind == "input")
        with numba_threads(self.compress_threads):
            for k, n in enumerate(names):
                a, part = self._compressed(n, self._inputs[n], "input")
                snap.allocations.insert(at + k, a)
                parts.insert(at + k, part)

    def _compressed(self, name: str, t: torch.Tensor, kind: str) -> tuple[Allocation, bytes]:
        """One allocation as a snapshot holds it (sectors per compressor, reference sizes, the bytes if kept),
        and its part of :attr:`run_digest` (name, dtype, shape and the bytes' digest)."""
        arr = host_array(t)
        a = Allocation.from_array(name, np.copy(arr) if self.keep_bytes else arr, kind=kind)
        a.sectors = {c: sectors(arr, c) for c in self.compressors}
        a.reference_bytes = {r: reference_bytes(arr, r) for r in self.references}
        if not self.keep_bytes:
            a.data = None
        digest = hashlib.sha256(np.ascontiguousarray(arr).view(np.uint8).reshape(-1)).digest()
        return a, f"{name}:{a.dtype}:{a.shape}:".encode() + digest

    def _resolve(self) -> None:
        """Name what the pending training step's forward saved (its storages are still unique)."""
        if not self._pending:
            return
        tracer = self._tracer
        if self._outside is not None and self._outside not in tracer.done:
            tracer.done.append(self._outside)
        names = tracer.activations()
        self._acts = {names[p]: t for p, t in tracer.saved.items()}
        self._half = set(tracer.half.values())
        self._last = (tracer, {**tracer.known, **names})
        self._pending = False

    def _end_forward(self) -> None:
        """Inference: the forward pass is the step; its activations are the leaf modules' outputs, one per storage."""
        tracer = self._tracer
        known = dict(tracer.known)
        acts: dict[str, torch.Tensor] = {}
        seen = set(known)
        for i in tracer.done:
            call = tracer.calls[i]
            if not call.leaf:
                continue
            outs = [t for t in _tensors(tracer.returned.get(i)) if t.layout == torch.strided and t.numel()]
            for k, t in enumerate(outs):
                if _ptr(t) not in seen:
                    seen.add(_ptr(t))
                    acts[f"act.{call.name}" + (f".{k}" if len(outs) > 1 else "")] = _whole_storage(t)
        self._acts = acts
        alloc = {**known, **{_ptr(t): n for n, t in acts.items()}}
        kernels = [self._forward_kernel(tracer.calls[i], [], alloc) for i in tracer.done if tracer.calls[i].leaf]
        kernels += _cache_reads(tracer, {_ptr(t): n for n, t in self._kv.items()})
        tracer.release()
        self.steps += 1
        self._profile = AccessProfile(self.name, kernels).validate(list(self.live()))
        self._index = {}
        if self.every and self.steps % self.every == 0:
            self.snapshot()

    def _record_profile(self) -> None:
        """The access profile of the step just resolved, checked against what is live now, and its index arrays."""
        if self._last is None:
            return
        kernels = self._trace_kernels(*self._last)
        if self.optimizer is None:
            kernels = kernels[:-1]  # the optimizer's kernel: none ran
        live = self.live()
        self._profile = AccessProfile(self.name, kernels).validate(list(live))
        self._index = {a.index: np.copy(host_array(live[a.index][0])) for k in kernels for a in k.accesses
                       if a.index}

    def _optimizer_kernel(self) -> Kernel:
        if self.optimizer is None:
            return Kernel("optimizer", [], 0.0)  # dropped by _record_profile
        return super()._optimizer_kernel()

    def caches(self) -> dict[str, torch.Tensor]:
        return dict(self._kv)


#: What a script given to ``buddy capture`` defines (:func:`run_script`): ``model`` and ``loop`` are required.
SCRIPT_NAMES = ("model", "optimizer", "loss_fn", "loop")


def run_script(path: str | os.PathLike, every: int = 1) -> Recorder:
    """Run a script that follows ``buddy capture``'s convention under a :class:`Recorder` and return it.

    The script defines ``model`` (an ``nn.Module``), ``loop()`` (runs the steps to record, calling ``model``), and
    optionally ``optimizer`` (training; without it, inference) and ``loss_fn`` (the loss module). It is imported
    as a module named after its file, so it may import what it likes; nothing runs at import but what it runs
    itself.

    Parameters
    ----------
    path : str or os.PathLike
        The script (a ``.py`` file); the run is named after it.
    every : int
        A snapshot at the start and after every ``every``-th step (:class:`Recorder`).

    Returns
    -------
    Recorder
        After ``loop()`` returned, ready to :meth:`~Recorder.save`.

    Raises
    ------
    CaptureError
        Not a ``.py`` file, ``model`` or ``loop`` missing, or an error in the script (reported with its file and
        line, in one line).
    """
    import importlib.util
    import traceback

    path = Path(path)
    if path.suffix != ".py" or not path.is_file():
        raise CaptureError(f"{path}: not a Python script (.py file)")
    spec = importlib.util.spec_from_file_location(f"buddy_capture_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)

    def where(exc: BaseException) -> str:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path.resolve()
                  or Path(f.filename) == path]
        return f"{path}:{frames[-1].lineno}" if frames else str(path)

    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise CaptureError(f"{where(exc)}: the script raised {type(exc).__name__}: {exc}") from None
    missing = [n for n in ("model", "loop") if not hasattr(module, n)]
    if missing:
        raise CaptureError(f"{path}: defines no {' and no '.join(missing)} (a script for buddy capture defines "
                           "model, loop() and optionally optimizer and loss_fn)")
    if not callable(module.loop):
        raise CaptureError(f"{path}: loop is a {type(module.loop).__name__}, not a function")
    rec = Recorder(module.model, getattr(module, "optimizer", None), loss_fn=getattr(module, "loss_fn", None),
                   name=path.stem, every=every)
    try:
        with rec:
            module.loop()
    except CaptureError:
        raise
    except Exception as exc:
        raise CaptureError(f"{where(exc)}: loop() raised {type(exc).__name__}: {exc}") from None
    return rec


def _named(obj: Any, prefix: str) -> Iterator[tuple[str, torch.Tensor]]:
    """``(path, tensor)`` for the tensors in a nested argument: ``prefix.0``, ``prefix.key.1``..."""
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, (tuple, list)):
        for i, o in enumerate(obj):
            yield from _named(o, f"{prefix}.{i}")
    elif isinstance(obj, dict):
        for k, o in obj.items():
            yield from _named(o, f"{prefix}.{k}")


def _cache_reads(tracer: _Tracer, cache: dict[int, str]) -> list[Kernel]:
    """Inference: a declared cache is read by the innermost module calls it is given to (an attention layer, not
    the blocks that pass it down); a leaf's kernel already reads it, a container's gets a kernel of those reads."""
    end = {i: k for k, i in enumerate(tracer.done)}
    given = {i: [p for p in tracer.calls[i].inputs if p in cache] for i in tracer.done}
    out = []
    for i, ps in given.items():
        if not ps or tracer.calls[i].leaf:
            continue
        inner = {p for j, qs in given.items() if j > i and end[j] < end[i] for p in qs}  # i's subtree got them too
        reads = [Access(cache[p], "read") for p in dict.fromkeys(ps) if p not in inner]
        if reads:
            out.append(Kernel(f"fwd.{tracer.calls[i].name}.cache", reads, 0.0))
    return out
