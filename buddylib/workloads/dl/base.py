"""TorchWorkload: a real PyTorch training loop whose snapshots hold every tensor a GPU would hold.

In training, compressibility comes from the ReLU zeros of saved activations, from gradients
and optimizer state and from how weights evolve, so nothing is synthesised: each step is a
real forward, backward and optimizer step, and :meth:`TorchWorkload.allocations` returns

* ``<param>`` (kind ``weights``): every parameter, under its ``named_parameters`` name;
* ``<buffer>`` (kind ``other``): module buffers (batch-norm running statistics, masks), so
  that the ``weights`` kind is exactly the parameters;
* ``<param>.grad`` (``gradients``): the gradients of the last step; a sparse gradient (an embedding
  looked up with ``sparse=True``) is what it stores, ``<param>.grad.indices`` and ``<param>.grad.values``;
* ``<param>.momentum_buffer`` (SGD), ``<param>.exp_avg``, ``<param>.exp_avg_sq`` (Adam) or ``<param>.sum``
  (Adagrad) (``optimizer``); the step counters are host scalars, not GPU memory, so they are left out;
* ``act.<module>.<k>`` (``activations``): every tensor autograd saved for backward in the
  last step, captured with ``torch.autograd.graph.saved_tensors_hooks``, one allocation per
  storage (views and in-place results share one), named after the module that produced it
  (or, for a tensor made inside a module, the module that saved it); tensors that are
  parameters, buffers or the input batch are those allocations, not activations;
* ``input`` and ``targets`` (``input``): the batch of the last step (of the first, before it), and any
  other per-step input a workload gives (:meth:`TorchWorkload.inputs`);
* ``<param>.bf16`` (``half_weights``), in mixed-precision runs (:attr:`TorchWorkload.autocast`):
  the half-precision copy of each parameter that autocast made and autograd saved for
  backward (recognised by its bytes: the parameter cast to the half dtype, bit for bit).

Before the first step (snapshot 0) only weights, buffers and the batch exist — truthfully.

The access profile of a step is traced from the last step: one kernel per leaf-module call
of the forward (reads its parameters and input, writes its output and the tensors it saves),
one per call of the backward in reverse order (reads what it saved and its parameters, writes
its parameters' gradients) and an optimizer kernel; FLOPs by layer type.
The hooks, the call tracer and the forward kernels live in :class:`TracedWorkload`, which
inference workloads (``minilm``) share.

Runs are deterministic for a seed: the torch RNG is seeded from the workload's numpy
generator and kept per workload (the global torch RNG is restored around each step),
deterministic algorithms are on and the thread count is fixed (restored after each step).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import ml_dtypes
import numpy as np
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from buddylib.threads import torch_threads
from buddylib.workloads.base import QUICK_LIMIT as QUICK_LIMIT  # re-exported: the dl workloads' quick switch
from buddylib.workloads.base import SCALES, Access, AccessProfile, Kernel, Workload

#: Intra-op threads of torch during a step: fixed, so float reductions (and bytes) repeat; one,
#: because on shared cores a second OpenMP thread made each small kernel wait ~5 ms (30x slower).
THREADS = 1


@contextlib.contextmanager
def deterministic_torch(threads: int = THREADS) -> Iterator[None]:
    """Deterministic algorithms and a fixed intra-op thread count while the block runs, so float reductions (and
    the bytes of a snapshot) repeat; the global settings are restored after.

    Parameters
    ----------
    threads : int
        torch's intra-op threads (:data:`THREADS`).
    """
    det, warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    with torch_threads(threads):
        torch.use_deterministic_algorithms(True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(det, warn_only=warn)


class HalfMatmulsInFloat(TorchDispatchMode):
    """Half-precision matrix products and convolutions (those autocast makes: bf16 or fp16 operands) computed
    as what a GPU's tensor cores compute: exact products summed in fp32, the result rounded to the half dtype.
    The operands are upcast exactly (every half value is a float32 value) and the float32 kernels run, since
    PyTorch's own half kernels on a CPU without AVX-512 BF16 are slow reference loops (measured, AMD EPYC
    without AVX-512: a ResNet-50 step at default scale 2.4 s in ``_slow_conv2d``, against 0.2 s in fp32; a
    Transformer step 3.8 s in ``mm``, against 0.2 s). It acts below autograd, so what a step saves for the
    backward pass, and so every snapshot's tensors, dtypes and shapes, stay autocast's; the values can differ
    from PyTorch's half kernels by the order of the fp32 sums, as they differ between CPUs anyway."""

    OPS = frozenset({torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
                     torch.ops.aten.baddbmm.default, torch.ops.aten.convolution.default,
                     torch.ops.aten.convolution_backward.default})

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func not in self.OPS:  # first: every op of the step comes here
            return func(*args, **kwargs)
        half = {a.dtype for a in args if isinstance(a, torch.Tensor)} & {torch.bfloat16, torch.float16}
        if len(half) != 1:
            return func(*args, **kwargs)
        (dtype,) = half

        def up(a: Any) -> Any:
            return a.float() if isinstance(a, torch.Tensor) and a.dtype == dtype else a

        out = func(*(up(a) for a in args), **kwargs)
        return tuple(o if o is None else o.to(dtype) for o in out) if isinstance(out, tuple) else out.to(dtype)


def width_factor(footprint: int) -> float:
    """Width multiplier relative to the default configuration for a footprint (params ~ w^2, acts ~ w).

    Parameters
    ----------
    footprint : int
        Bytes.

    Returns
    -------
    float
        sqrt(footprint / the default scale's).
    """
    return math.sqrt(footprint / SCALES["default"])


def scaled(n: float, w: float, minimum: int = 1) -> int:
    """Channels ``n`` times width multiplier ``w``, rounded, at least ``minimum``.

    Parameters
    ----------
    n, w : float
        Channels at the default scale, and the multiplier (:func:`width_factor`).
    minimum : int

    Returns
    -------
    int
    """
    return max(minimum, round(n * w))


#: torch dtypes numpy lacks, read through integers of their width as ml_dtypes' numpy types of the same name, so an
#: allocation's dtype label is the tensor's (``bfloat16``, ``float8_e4m3fn``) wherever it is recorded or read.
_RAW = {torch.bfloat16: (torch.int16, ml_dtypes.bfloat16), torch.float8_e4m3fn: (torch.uint8, ml_dtypes.float8_e4m3fn),
        torch.float8_e5m2: (torch.uint8, ml_dtypes.float8_e5m2)}


def host_array(t: torch.Tensor) -> np.ndarray:
    """The tensor's memory as a numpy array of its own dtype: the one conversion of every run, built-in or
    recorded. A CPU tensor's is shared, not copied; a CUDA tensor's is copied to the host.

    Parameters
    ----------
    t : torch.Tensor
        A strided tensor; bf16 and float8 come out as ml_dtypes' numpy types of the same name.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> import torch
    >>> host_array(torch.ones(2, dtype=torch.bfloat16)).dtype
    dtype(bfloat16)
    """
    t = t.detach()
    raw = _RAW.get(t.dtype)
    if raw is not None:
        t = t.view(raw[0])
    if t.device.type != "cpu":
        t = t.cpu()
    a = t.numpy()
    return a.view(raw[1]) if raw is not None else a


def _tensors(obj: Any) -> Iterator[torch.Tensor]:
    """Tensors in a (nested) module argument or output."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def _ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _whole_storage(t: torch.Tensor) -> torch.Tensor:
    """A tensor over the whole storage of ``t`` (its own shape when it covers it all), detached."""
    t = t.detach()
    s = t.untyped_storage()
    if t.is_contiguous() and t.storage_offset() == 0 and t.numel() * t.element_size() == s.nbytes():
        return t
    return torch.empty(0, dtype=t.dtype).set_(s, 0, (s.nbytes() // t.element_size(),))


def layer_flops(mod: nn.Module, args: tuple[Any, ...], out: Any) -> tuple[float, float]:
    """Forward and backward FLOPs of one module call, by layer type; convolutions and matmuls cost twice in
    backward. A module with a ``flops(args, out)`` method gives its own forward count.

    Parameters
    ----------
    mod : torch.nn.Module
    args : tuple
        The call's arguments.
    out
        Its output.

    Returns
    -------
    forward, backward : float

    Examples
    --------
    >>> import torch
    >>> layer_flops(torch.nn.Linear(4, 3), (torch.ones(2, 4),), torch.ones(2, 3))
    (48.0, 96.0)
    """
    xs, ys = list(_tensors(args)), list(_tensors(out))
    n_in = float(xs[0].numel()) if xs else 0.0
    n_out = float(ys[0].numel()) if ys else 0.0
    if hasattr(mod, "flops"):
        f = float(mod.flops(args, out))
        return f, 2 * f
    if isinstance(mod, nn.Conv2d):
        f = 2.0 * mod.in_channels // mod.groups * math.prod(mod.kernel_size) * n_out
        return f, 2 * f
    if isinstance(mod, nn.Linear):
        f = 2.0 * mod.in_features * n_out
        return f, 2 * f
    if isinstance(mod, nn.LSTM):
        bt = n_in / mod.input_size
        h, p = mod.hidden_size, mod.proj_size or mod.hidden_size
        f = 0.0
        for layer in range(mod.num_layers):
            inp = mod.input_size if layer == 0 else p
            f += bt * (2 * 4 * h * (inp + p) + 10 * 4 * h + (2 * h * p if mod.proj_size else 0))
        return f, 2 * f
    if isinstance(mod, (nn.BatchNorm2d, nn.LayerNorm)):
        return 8 * n_out, 10 * n_out
    if isinstance(mod, (nn.MaxPool2d, nn.AvgPool2d)):
        k = mod.kernel_size
        return (k * k if isinstance(k, int) else math.prod(k)) * n_out, n_in
    if isinstance(mod, nn.AdaptiveAvgPool2d):
        return n_in, n_in
    if isinstance(mod, nn.Embedding):
        return 0.0, n_out
    if isinstance(mod, nn.CrossEntropyLoss):
        return 6 * n_in, 2 * n_in
    if isinstance(mod, nn.GELU):
        return 8 * n_out, 10 * n_out
    if isinstance(mod, (nn.Flatten, nn.Identity)):
        return 0.0, 0.0
    return n_out, n_out


def _grad_tensors(name: str, p: torch.Tensor) -> dict[str, torch.Tensor]:
    """The gradient of parameter ``name`` as allocations: ``<name>.grad``, or for a sparse gradient the
    indices and values it stores (uncoalesced, as accumulated: one row per lookup); none before backward."""
    g = p.grad
    if g is None:
        return {}
    if g.is_sparse:
        return {f"{name}.grad.indices": g._indices(), f"{name}.grad.values": g._values()}
    return {f"{name}.grad": g}


def clip_grad_norm(params: Iterator[torch.Tensor], max_norm: float) -> float:
    """Scale every gradient so their global L2 norm is at most ``max_norm`` (``torch.nn.utils.clip_grad_norm_``,
    which also takes sparse gradients: a sparse gradient's norm is that of its coalesced rows).

    Parameters
    ----------
    params : iterable of torch.Tensor
        Parameters; those without a gradient are skipped.
    max_norm : float

    Returns
    -------
    float
        The global norm before clipping.
    """
    grads = [p.grad for p in params if p.grad is not None]
    norms = [(g.coalesce()._values() if g.is_sparse else g).detach().float().norm() for g in grads]
    total = float(torch.stack(norms).norm()) if norms else 0.0
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / (total + 1e-6))
    return total


class Adam:
    """Adam (learning rate 1e-3, PyTorch's defaults) for any network: ``torch.optim.Adam`` for the dense
    gradients and, for tables whose gradients are sparse, ``torch.optim.SparseAdam`` (lazy Adam: only the
    rows a step touches are updated, as TensorFlow's LazyAdam), which plain Adam refuses. Steps, zeroes and
    holds state as one optimizer.

    Parameters
    ----------
    model : torch.nn.Module
        Its parameters of modules that are ``sparse`` or say they gather rows (``gathers_rows``) go to SparseAdam.
    lr : float
        The learning rate.
    """

    def __init__(self, model: nn.Module, lr: float = 1e-3) -> None:
        sparse = {id(p) for m in model.modules() for p in m.parameters(recurse=False)
                  if getattr(m, "sparse", False) or getattr(m, "gathers_rows", False)}
        params = list(model.parameters())
        self.parts = [opt(group, lr=lr) for opt, group in
                      ((torch.optim.Adam, [p for p in params if id(p) not in sparse]),
                       (torch.optim.SparseAdam, [p for p in params if id(p) in sparse])) if group]

    @property
    def state(self) -> dict[torch.Tensor, dict[str, Any]]:
        """Both optimizers' state per parameter, as one optimizer's ``state``."""
        return {p: st for o in self.parts for p, st in o.state.items()}

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """Both optimizers' parameter groups."""
        return [g for o in self.parts for g in o.param_groups]

    def step(self) -> None:
        """One step of both optimizers."""
        for o in self.parts:
            o.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear both optimizers' gradients.

        Parameters
        ----------
        set_to_none : bool
            As ``torch.optim.Optimizer.zero_grad``.
        """
        for o in self.parts:
            o.zero_grad(set_to_none=set_to_none)


class Add(nn.Module):
    """``a + b`` (in place into ``a`` if ``inplace``): residual sums as modules, so each is a traced kernel.

    Parameters
    ----------
    inplace : bool
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The sum.

        Parameters
        ----------
        a, b : torch.Tensor
        """
        return a.add_(b) if self.inplace else a + b


class Concat(nn.Module):
    """``torch.cat`` along ``dim`` as a module (Inception and Fire outputs), so it is a traced kernel.

    Parameters
    ----------
    dim : int
    """

    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return torch.cat(xs, self.dim)

    def flops(self, args: tuple[Any, ...], out: torch.Tensor) -> float:
        """None: concatenating copies bytes.

        Parameters
        ----------
        args, out
            The call's arguments and output (:func:`layer_flops`).

        Returns
        -------
        float
            0.
        """
        return 0.0  # a copy: bytes, no arithmetic


@dataclass
class _Call:
    """One module call of a traced forward."""

    name: str
    module: nn.Module
    leaf: bool
    inputs: list[int] = field(default_factory=list)
    #: storage -> the largest fraction of it one argument spans (below 1 for a view of part of it)
    covered: dict[int, float] = field(default_factory=dict)
    outputs: list[int] = field(default_factory=list)
    saved: list[int] = field(default_factory=list)
    flops: tuple[float, float] = (0.0, 0.0)


class _Tracer:
    """Keeps every tensor autograd saves in a forward, and which module call made and saved it."""

    def __init__(self, names: dict[nn.Module, str], known: dict[int, str], param_names: dict[int, str]) -> None:
        self.names = names
        self.known = known  # storage -> allocation name, for parameters, buffers and the batch
        self.param_names = param_names  # id(parameter) -> name, to recognise half-precision copies
        self.half: dict[int, str] = {}  # storage -> "<param>.<dtype>" for autocast's copies of parameters
        self.calls: list[_Call] = []
        self.stack: list[int] = []
        self.count: dict[str, int] = {}
        self.saved: dict[int, torch.Tensor] = {}  # storage -> whole-storage tensor, in first-save order
        self.first_saver: dict[int, int] = {}
        self.producer: dict[int, int] = {}  # storage -> last leaf call that output it (else outermost container)
        self.done: list[int] = []  # calls in order of completion (leaves: execution order)
        self.keep: list[Any] = []  # module inputs held so their storages stay unique this step
        self.returned: dict[int, Any] = {}  # call -> its output, held likewise (inference keeps the leaves')

    def pre(self, mod: nn.Module, args: tuple[Any, ...]) -> None:
        base = self.names[mod]
        k = self.count.get(base, 0)
        self.count[base] = k + 1
        call = _Call(base if k == 0 else f"{base}#{k}", mod, not any(True for _ in mod.children()))
        for t in _tensors(args):
            if t.layout == torch.strided:
                p, size = _ptr(t), t.untyped_storage().nbytes()
                span = min(1.0, t.numel() * t.element_size() / size) if size and t.numel() else 1.0  # Access needs > 0
                call.inputs.append(p)
                call.covered[p] = max(call.covered.get(p, 0.0), span)
        self.keep.append(args)
        self.stack.append(len(self.calls))
        self.calls.append(call)

    def post(self, mod: nn.Module, args: tuple[Any, ...], out: Any) -> None:
        i = self.stack.pop()
        call = self.calls[i]
        call.outputs = [_ptr(t) for t in _tensors(out) if t.layout == torch.strided]
        for p in call.outputs:
            if call.leaf:
                self.producer[p] = i
            else:
                self.producer.setdefault(p, i)
        self.done.append(i)
        call.flops = layer_flops(mod, args, out)
        self.returned[i] = out

    def release(self) -> None:
        """Drop the module inputs and outputs held while tracing (their names are resolved by then)."""
        self.keep.clear()
        self.returned.clear()

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.is_mkldnn or t.numel() == 0:
            return t
        p = _ptr(t)
        if not self.stack:
            return t
        call = self.calls[self.stack[-1]]
        if p not in call.saved:
            call.saved.append(p)
        if p not in self.known and p not in self.saved:
            self.saved[p] = _whole_storage(t)
            self.first_saver[p] = self.stack[-1]
            if t.dtype in (torch.bfloat16, torch.float16):
                self._recognise_half(p, call.module)
        return t

    def _recognise_half(self, p: int, module: nn.Module) -> None:
        """Mark storage ``p`` as autocast's copy of one of ``module``'s parameters if it holds exactly its cast."""
        whole = self.saved[p].reshape(-1)
        for param in module.parameters(recurse=False):
            if param.numel() == whole.numel() and torch.equal(whole, param.detach().to(whole.dtype).reshape(-1)):
                dtype = str(whole.dtype).removeprefix("torch.").replace("bfloat16", "bf16").replace("float16", "fp16")
                self.half[p] = f"{self.param_names[id(param)]}.{dtype}"
                return

    @staticmethod
    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    def activations(self) -> dict[int, str]:
        """Storage -> ``act.<module>.<k>``: named after the last call that output it, else its first saver."""
        names: dict[int, str] = {}
        seen: dict[str, int] = {}
        for p in self.saved:
            if p in self.half:
                names[p] = self.half[p]
                continue
            base = self.calls[self.producer.get(p, self.first_saver[p])].name
            k = seen.get(base, 0)
            seen[base] = k + 1
            names[p] = f"act.{base}.{k}"
        return names


class TracedWorkload(Workload):
    """A workload that runs ``self.model`` with every module hooked: a forward run under :meth:`_traced`
    records its module calls in a :class:`_Tracer`, and :meth:`_forward_kernel` turns a call into the
    kernel the profile holds. Training (:class:`TorchWorkload`) and inference (``minilm``) share it, so
    both name and trace calls alike."""

    suite: ClassVar[str] = "dl"
    #: Intra-op threads of torch during a step.
    threads: ClassVar[int] = THREADS
    #: With torch's OpenMP pool spinning on the same cores, every parallel numba launch waits
    #: milliseconds for its threads, and a network has hundreds of small allocations per
    #: snapshot; one thread compresses them orders of magnitude faster here.
    compress_threads: ClassVar[int | None] = 1

    def _hook_modules(self, extra: dict[nn.Module, str] | None = None) -> None:
        """Name every parameter, buffer and module of ``self.model`` (the root module is ``model``; ``extra``
        names modules outside it, such as the loss) and hook each module's calls."""
        self.param_names = {id(p): n for n, p in self.model.named_parameters()}
        self.buffer_names = {id(b): n for n, b in self.model.named_buffers()}
        self.module_names = {m: (n or "model") for n, m in self.model.named_modules()}
        self.module_names.update(extra or {})
        for m in self.module_names:
            m.register_forward_pre_hook(self._pre)
            m.register_forward_hook(self._post)
        self._tracer: _Tracer | None = None

    @contextlib.contextmanager
    def _traced(self, tracer: _Tracer) -> Iterator[None]:
        """Record module calls into ``tracer`` while the block runs; a forward outside one records nothing."""
        self._tracer = tracer
        try:
            yield
        finally:
            self._tracer = None

    def _pre(self, mod: nn.Module, args: tuple[Any, ...]) -> None:
        if self._tracer is not None:
            self._tracer.pre(mod, args)

    def _post(self, mod: nn.Module, args: tuple[Any, ...], out: Any) -> None:
        if self._tracer is not None:
            self._tracer.post(mod, args, out)

    def _forward_kernel(self, call: _Call, saved: list[int], alloc: dict[int, str]) -> Kernel:
        """A call's forward: reads its parameters, buffers and inputs (the fraction of each storage its
        arguments span), writes its output (a leaf's) and the tensors it saves (``saved``)."""
        own = list(call.module.parameters(recurse=False))
        params = [self.param_names[id(p)] for p in own]
        buffers = [self.buffer_names[id(b)] for b in call.module.buffers(recurse=False) if b.numel()]
        inputs = {alloc[p]: f for p, f in call.covered.items() if p in alloc}
        reads = dict.fromkeys([*params, *(alloc[p] for p in call.inputs if p in alloc)])
        writes = dict.fromkeys(alloc[p] for p in [*(call.outputs if call.leaf else []), *saved] if p in alloc)
        accesses = [self._param_read(call, n, p, alloc) for n, p in zip(params, own, strict=True)]
        accesses += [Access(n, "readwrite" if n in writes else "read", fraction=inputs[n])
                     for n in reads if n not in params]
        stats = "readwrite" if isinstance(call.module, nn.modules.batchnorm._BatchNorm) else "read"
        accesses += [Access(n, stats) for n in buffers]
        accesses += [Access(n, "write") for n in writes if n not in reads]
        return Kernel(f"fwd.{call.name}", accesses, call.flops[0])

    def _param_read(self, call: _Call, name: str, param: torch.Tensor, alloc: dict[int, str]) -> Access:
        """Embedding tables (and modules that say they gather rows: ``gathers_rows``) are gathered through
        their first argument, an index tensor (a live allocation), every index used; the rows it touches come
        from the index itself. Other parameters are streamed."""
        idx = next((alloc[p] for p in call.inputs if p in alloc), None)
        gathers = getattr(call.module, "gathers_rows", isinstance(call.module, nn.Embedding))
        if gathers and idx is not None and param.dim() > 1:
            return Access(name, "read", "gather", index=idx, row=param[0].numel())
        return Access(name, "read")


class TorchWorkload(TracedWorkload):
    """A training run of one network; subclasses build the model, optimizer and batches.

    Subclasses implement :meth:`build` (model for ``self.footprint``), :meth:`make_optimizer`
    and :meth:`batch` (numpy input and targets of the next step); ``n_steps`` is set in
    :meth:`configure`.
    """

    #: Mixed precision: the forward runs under ``torch.autocast`` to this dtype (parameters, their
    #: gradients and the optimizer state stay fp32 — the master copy); ``None`` trains in fp32.
    autocast: ClassVar[torch.dtype | None] = None
    #: Mini-batch size overriding the configuration's (the larger-batch study); ``None`` keeps it.
    batch_size: int | None = None
    #: Training steps overriding the configuration's (the training-maturity study); ``None`` keeps it.
    train_steps: int | None = None
    #: Clip the global norm of the gradients to this before each update (``None``: no clipping).
    clip_norm: ClassVar[float | None] = None
    #: Train with Adam instead of the recipe's optimizer (the optimizer study): :class:`Adam`.
    adam: bool = False

    # -- what subclasses provide ------------------------------------------------------------
    def configure(self, footprint: int) -> None:
        """Choose the architecture's scale (width, resolution, batch) and ``n_steps`` for ``footprint``.

        Parameters
        ----------
        footprint : int
            Bytes.
        """

    def build(self) -> nn.Module:
        """The network, initialised (the torch RNG is seeded)."""
        raise NotImplementedError

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        """The optimizer over ``model``'s parameters.

        Parameters
        ----------
        model : torch.nn.Module

        Returns
        -------
        torch.optim.Optimizer
        """
        raise NotImplementedError

    def batch(self) -> tuple[np.ndarray, np.ndarray]:
        """Input and targets of the next step, drawn with ``self.rng``."""
        raise NotImplementedError

    def inputs(self) -> dict[str, torch.Tensor]:
        """The step's input tensors by allocation name (kind ``input``): the batch, and whatever else a
        workload feeds its model each step."""
        return {"input": self.x, "targets": self.y}

    def loss(self) -> torch.Tensor:
        """The forward pass and its loss (run traced, under autocast if set)."""
        return self.criterion(self.model(self.x), self.y)

    # -- the Workload contract --------------------------------------------------------------
    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        """Configure, build the network and its optimizer and draw the first batch, with this workload's torch RNG
        seeded from ``rng``.

        Parameters
        ----------
        footprint : int
            Bytes (:meth:`configure`).
        rng : numpy.random.Generator
            Every random draw of the run comes from it.

        Raises
        ------
        ValueError
            A ``batch_size`` or ``train_steps`` below 1.
        """
        self.footprint = footprint
        self.rng = rng
        self._torch_rng = torch.Generator().manual_seed(int(rng.integers(2**62))).get_state()
        with self._torch_env():
            self.configure(footprint)
            if self.batch_size is not None:
                if self.batch_size < 1:
                    raise ValueError(f"{self.name}: batch_size {self.batch_size} must be >= 1")
                self.cfg["batch"] = int(self.batch_size)
            if self.train_steps is not None:
                if self.train_steps < 1:
                    raise ValueError(f"{self.name}: train_steps {self.train_steps} must be >= 1")
                self.n_steps = int(self.train_steps)
            self.model = self.build()
            self.optimizer = Adam(self.model) if self.adam else self.make_optimizer(self.model)
        self.criterion = nn.CrossEntropyLoss()
        self._hook_modules({self.criterion: "loss"})
        self._acts: dict[str, torch.Tensor] = {}
        self._half: set[str] = set()
        self._last: tuple[_Tracer, dict[int, str]] | None = None
        self.losses: list[float] = []
        self._next_batch()
        self._fresh = True

    def step(self) -> None:
        if not self._fresh:
            self._next_batch()
        self._fresh = False
        self._acts = {}  # the previous step's saved tensors are freed, as autograd frees them
        known = {_ptr(t): n for n, t in [*self.model.named_parameters(), *self.model.named_buffers()]}
        known.update({_ptr(t): n for n, t in self.inputs().items()})
        tracer = _Tracer(self.module_names, known, self.param_names)
        with self._torch_env():
            self.optimizer.zero_grad(set_to_none=True)
            # the products are in the forward and backward passes: the optimizer's many small ops stay out of it
            with HalfMatmulsInFloat() if self.autocast is not None else contextlib.nullcontext():
                with (self._traced(tracer), torch.autograd.graph.saved_tensors_hooks(tracer.pack, tracer.unpack),
                      torch.autocast("cpu", dtype=self.autocast or torch.bfloat16,
                                     enabled=self.autocast is not None)):
                    loss = self.loss()
                loss.backward()
            if self.clip_norm is not None:
                clip_grad_norm(self.model.parameters(), self.clip_norm)
            self.optimizer.step()
        self.losses.append(float(loss.detach()))
        names = tracer.activations()
        self._acts = {names[p]: t for p, t in tracer.saved.items()}
        self._half = set(tracer.half.values())
        tracer.release()  # storages recorded this step were unique while it ran; names resolve them now
        self._last = (tracer, {**known, **names})

    def live(self) -> dict[str, tuple[torch.Tensor, str]]:
        """Every live allocation as a tensor and its kind, ``{name: (tensor, kind)}``, in the one order every run
        records (built-in or :class:`~buddylib.userdata.capture.Recorder`): inputs, parameters, buffers (``kv_cache``
        where the name says cache), gradients, optimizer state, saved tensors (or leaf outputs), declared caches
        (:meth:`caches`). An empty tensor holds no memory and is left out."""
        out: dict[str, tuple[torch.Tensor, str]] = {n: (t, "input") for n, t in self.inputs().items()}
        params = list(self.model.named_parameters())
        out.update({n: (p, "weights") for n, p in params})
        out.update({n: (b, "kv_cache" if "cache" in n.lower() else "other") for n, b in self.model.named_buffers()})
        for n, p in params:
            out.update({g: (t, "gradients") for g, t in _grad_tensors(n, p).items()})
        state = self.optimizer.state if self.optimizer is not None else {}
        for n, p in params:
            for key, v in state.get(p, {}).items():
                if isinstance(v, torch.Tensor) and v.dim() > 0:  # Adam's 0-dim step count stays on the host
                    out[f"{n}.{key}"] = (v, "optimizer")
        out.update({n: (t, "half_weights" if n in self._half else "activations") for n, t in self._acts.items()})
        out.update({n: (t, "kv_cache") for n, t in self.caches().items()})
        for n, (t, _) in out.items():
            if t.device.type == "meta":
                raise ValueError(f"allocation {n}: a meta tensor holds no bytes")
        return {n: (t, k) for n, (t, k) in out.items() if t.numel()}

    def caches(self) -> dict[str, torch.Tensor]:
        """Caches the model keeps outside its modules (a served model's keys and values), by allocation name."""
        return {}

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {n: (host_array(t), k) for n, (t, k) in self.live().items()}

    def profile(self) -> AccessProfile:
        """The kernels of the last step (none before the first)."""
        return AccessProfile(self.name, self._trace_kernels(*self._last) if self._last else [])

    # -- machinery ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _torch_env(self) -> Iterator[None]:
        """This workload's torch RNG, deterministic algorithms and thread count; global state restored after."""
        with torch.random.fork_rng(devices=[]), deterministic_torch(self.threads):
            torch.set_rng_state(self._torch_rng)
            try:
                yield
            finally:
                self._torch_rng = torch.get_rng_state()

    def _next_batch(self) -> None:
        x, y = self.batch()
        self.x, self.y = torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(np.ascontiguousarray(y))

    def _trace_kernels(self, tracer: _Tracer, alloc: dict[int, str]) -> list[Kernel]:
        """Forward kernels in call order, backward kernels in reverse, then the optimizer."""
        fwd, bwd = [], []
        for i in tracer.done:
            call = tracer.calls[i]
            own = [p for p in tracer.saved if tracer.first_saver[p] == i]
            if not (call.leaf or own):  # a container's work is its children's, unless it saves tensors itself
                continue
            fwd.append(self._forward_kernel(call, own, alloc))
            if (b := self._backward_kernel(call, alloc)) is not None:
                bwd.append(b)
        return [*fwd, *reversed(bwd), self._optimizer_kernel()]

    def _backward_kernel(self, call: _Call, alloc: dict[int, str]) -> Kernel | None:
        """A call's backward: reads what it saved and its parameters (autocast's half copy where saved),
        writes its parameters' gradients; ``None`` for a call with no backward work."""
        own = list(call.module.parameters(recurse=False))
        params = [self.param_names[id(p)] for p in own]
        saved = dict.fromkeys(alloc[p] for p in call.saved if p in alloc)
        grads = [g for n, p in zip(params, own, strict=True) for g in _grad_tensors(n, p)]
        halved = {s.rsplit(".", 1)[0] for s in saved if s in self._half}  # backward reads the half copy
        # a gathered table's backward needs its indices and the output's gradient, never the table
        gathered = getattr(call.module, "gathers_rows", isinstance(call.module, nn.Embedding))
        b = [Access(n, "read") for n in [*(n for n in params if n not in halved and not gathered),
                                         *(s for s in saved if s not in params)]]
        b += [Access(n, "write") for n in grads]
        return Kernel(f"bwd.{call.name}", b, call.flops[1]) if b or call.flops[1] else None

    def _optimizer_kernel(self) -> Kernel:
        """Reads each gradient and updates its parameter and optimizer state: all of them, or, for a sparse
        gradient, the rows it holds (gathered through its indices)."""
        accesses, n = [], 0
        for name, p in self.model.named_parameters():
            if p.grad is None:
                continue
            state = [k for k, v in self.optimizer.state.get(p, {}).items() if isinstance(v, torch.Tensor) and v.dim()]
            grads = list(_grad_tensors(name, p))
            accesses += [Access(g, "read") for g in grads]
            if p.grad.is_sparse:
                n += p.grad._values().numel()
                how = {"pattern": "gather", "index": f"{name}.grad.indices", "row": p[0].numel()}
            else:
                n += p.numel()
                how = {}
            accesses += [Access(x, "readwrite", **how) for x in [name, *(f"{name}.{k}" for k in state)]]
        kind = type(self.optimizer).__name__.lower()
        return Kernel(f"optimizer.{kind}", accesses, (18.0 if "adam" in kind else 6.0) * n)
