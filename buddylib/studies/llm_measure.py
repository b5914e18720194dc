"""Notebook 10's study measured (:func:`~buddylib.studies.llm_measure.measure`): per tensor kind of today's LLM memory,
the ratios of the per-entry
codes and of the whole-tensor peers on the same bytes, the KV cache at every grid point, a decode step's slowdown.

This module is the study's code digest (:func:`key`), so it holds what computes the numbers and nothing else: how
they are committed, read back and tabled for the notebook is :mod:`buddylib.studies.llm`.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from buddylib import workloads
from buddylib.analysis import analyze
from buddylib.compressors import ebo, peers
from buddylib.compressors.reference import reference_bytes
from buddylib.entries import ENTRY_BYTES
from buddylib.provenance import ANALYSIS_ONLY, code_version
from buddylib.snapshot import Allocation, Snapshot

if TYPE_CHECKING:
    from buddylib.timing import Params, Workset

#: The per-entry codes compared (EBO on the 16-bit tensors only: it codes 16-bit floats).
COMPRESSORS = ("bpc32", "bpc64", "ebo-bf16")
#: Whole-tensor compressors beside them: zstd level 1, DFloat11's scheme, ZipNN, the exponent-entropy bound.
PEERS = ("zstd-1", "dfloat11", "zipnn", "exponent-entropy")
#: Buddy thresholds swept (the share of entries allowed to overflow to buddy memory); the paper's is 0.3.
THRESHOLDS = (0.1, 0.2, 0.3, 0.4)
#: Tensor kinds, in the order the notebook shows them: (label, workload, allocation kind). Which hold bf16, the
#: allocations' dtype says (the study's ``group_dtype``).
GROUPS = (
    ("weights bf16 (MiniLM)", "minilm_kv", "weights"),
    ("weights bf16 (EfficientNet-Lite0)", "efficientnet", "weights"),
    ("KV cache bf16 (MiniLM)", "minilm_kv", "kv_cache"),
    ("master weights fp32 (GPT)", "gpt_bf16", "weights"),
    ("weight copies bf16 (GPT)", "gpt_bf16", "half_weights"),
    ("gradients fp32 (GPT)", "gpt_bf16", "gradients"),
    ("AdamW moments fp32 (GPT)", "gpt_bf16", "optimizer"),
    ("activations (GPT)", "gpt_bf16", "activations"),
)
#: FP8 serving's copies of three 16-bit groups (issue 42): (label, the bf16 group cast), each tensor scaled to
#: e4m3's range (its largest magnitude to :data:`~buddylib.studies.llm_measure.E4M3_MAX`) and cast to nearest even, as
#: a per-tensor FP8
#: checkpoint or KV cache stores it; their per-entry codes (:data:`~buddylib.studies.llm_measure.FP8_COMPRESSORS`).
FP8_GROUPS = (
    ("weights e4m3 (MiniLM)", "weights bf16 (MiniLM)"),
    ("weights e4m3 (EfficientNet-Lite0)", "weights bf16 (EfficientNet-Lite0)"),
    ("KV cache e4m3 (MiniLM)", "KV cache bf16 (MiniLM)"),
)
#: The codes of the FP8 (e4m3) copies.
FP8_COMPRESSORS = ("bpc32", "bpc64", "ebo-e4m3")
#: The largest finite e4m3 value: a tensor is scaled to it before its FP8 copy is rounded.
E4M3_MAX = 448.0
#: Every code a group's row may have.
ALL_CODES = (*COMPRESSORS, "ebo-e4m3")
#: Entry and sector sizes of the entry x sector study (issue 42; the paper's are 128 and 32), on the groups of
#: 16-bit and FP8 floats under EBO generalised to the entry (:func:`~buddylib.compressors.ebo.entry_sectors`).
ENTRY_SIZES = (128, 256, 512)
SECTOR_SIZES = (32, 16)
#: Decode kernels' sizes replayed, in multiples of MiniLM's (:func:`_slowdowns`).
KERNEL_SCALES = (1, 4, 16)
#: GPUs of the capacity question: name in :mod:`buddylib.timing.hardware` and the link to buddy memory.
CAPACITY_GPUS = (("H100-80GB", "NVLink4"), ("H200-141GB", "NVLink-C2C"))


#: The code the study depends on besides its workloads': this module, the compressors and the analysis.
SOURCES = ("studies/llm_measure.py", "compressors", *ANALYSIS_ONLY)


def key() -> str:
    """Digest of the code the study depends on: :data:`~buddylib.studies.llm_measure.SOURCES` and the two workloads'
    code."""
    return "+".join([code_version(*SOURCES), *(workloads.get(n).code() for n in ("minilm_kv", "gpt_bf16"))])


def efficientnet_bf16() -> list[Allocation]:
    """EfficientNet-Lite0's published checkpoint cast to bf16 (round to nearest even), as a serving stack loads
    it: one allocation per floating-point tensor."""
    import torch

    from buddylib.workloads.dl import efficientnet
    from buddylib.workloads.dl.base import host_array

    out = []
    for n, t in efficientnet.checkpoint().items():
        if t.is_floating_point() and t.numel():
            out.append(Allocation.from_array(n, host_array(t.detach().to(torch.bfloat16).contiguous()), kind="weights"))
    return out


def runs(scale: str | float = "quick", seed: int = 0, progress: bool = False) -> dict[str, workloads.Run]:
    """The study's two runs, bytes kept.

    Every grid point of the KV cache a snapshot (a run dedupes the steps it is asked for), the training's 8 snapshots.

    Parameters
    ----------
    scale, seed : str or float, int
        The runs' scale and seed.
    progress : bool
        Progress bars.

    Returns
    -------
    dict of str to Run
        ``minilm_kv``'s and ``gpt_bf16``'s.
    """
    return {n: workloads.get(n).run(scale, seed=seed, keep_bytes=True, compressors=COMPRESSORS, progress=progress,
                                    n_snapshots=64 if n == "minilm_kv" else 8) for n in ("minilm_kv", "gpt_bf16")}


def measure(scale: str | float = "quick", seed: int = 0, progress: bool = False,
            made: dict[str, workloads.Run] | None = None) -> xr.Dataset:
    """Run ``minilm_kv`` and ``gpt_bf16`` at ``scale`` and measure every group of ``GROUPS``.

    Parameters
    ----------
    scale, seed : str or float, int
        The runs' scale and seed.
    progress : bool
        Progress bars.
    made : dict of str to Run, optional
        The :func:`runs` of this scale and seed, if already made.

    Returns
    -------
    xarray.Dataset
        Dims (group, compressor, threshold) for the per-entry codes' ideal and effective ratios, (group, peer) for
        the peers', (point, compressor) for the KV cache of every (length, batch) point, the timing model's slowdown of
        a decode step, (compressor, threshold, gpu), and EBO per (entry, sector) size: each 16-bit and FP8 group's
        ratios (``_entry_study``), the served model's capacity and decode-step slowdown (``_entry_slowdowns``).
    """
    t0 = time.perf_counter()
    made = made or runs(scale, seed, progress)
    last = {n: r.snapshots[-1].allocations for n, r in made.items()}
    last["efficientnet"] = efficientnet_bf16()
    groups = [(label, [a for a in last[src] if a.kind == kind]) for label, src, kind in GROUPS]
    by_label = dict(groups)
    groups += [(label, [e4m3_copy(a) for a in by_label[src]]) for label, src in FP8_GROUPS]
    ratios = xr.concat([_group(label, allocs) for label, allocs in groups], "group")
    kv = xr.concat([_kv_point(s) for s in made["minilm_kv"].snapshots[1:]], "point")
    ds = xr.merge([ratios, kv, _slowdowns(made["minilm_kv"])], join="outer")  # FP8 rows: a code of their own
    ds["group_bytes"] = ("group", [sum(a.nbytes for a in allocs) for _, allocs in groups], {"units": "bytes"})
    ds = xr.merge([ds, xr.concat([_entry_study(label, allocs) for label, allocs in groups
                                  if _format(allocs) is not None], "group"), _entry_slowdowns(made["minilm_kv"])],
                  join="outer")
    ds.attrs.update(scale=str(scale), seed=seed, seconds=time.perf_counter() - t0,
                    gpt_losses=[float(x) for x in made["gpt_bf16"].workload.losses])
    return ds


def e4m3_copy(a: Allocation) -> Allocation:
    """``a`` (a bf16 tensor) as per-tensor FP8 stores it.

    Scaled so its largest magnitude is :data:`E4M3_MAX`, then cast to float8_e4m3fn, round to nearest even.

    Parameters
    ----------
    a : Allocation
        A bf16 tensor, its bytes kept.

    Returns
    -------
    Allocation
        Of the same name and kind, dtype ``float8_e4m3fn``.
    """
    import ml_dtypes

    x = np.asarray(a.data).astype(np.float32)
    amax = float(np.abs(x).max()) if x.size else 0.0
    q = (x / np.float32(amax / E4M3_MAX if amax > 0 else 1.0)).astype(ml_dtypes.float8_e4m3fn)
    return Allocation(a.name, kind=a.kind, dtype="float8_e4m3fn", shape=q.shape, nbytes=q.nbytes, data=q)


def _format(allocs: list[Allocation]) -> str | None:
    """``bf16`` or ``e4m3`` where every tensor of a group holds that format, else None."""
    return {frozenset({"bfloat16"}): "bf16", frozenset({"float8_e4m3fn"}): "e4m3"}.get(
        frozenset(a.dtype for a in allocs))


def _entry_study(label: str, allocs: list[Allocation], threshold: float = 0.3) -> xr.Dataset:
    """One group's ideal and Buddy-effective ratio (at ``threshold``) under EBO per (entry, sector) size: each
    allocation at the most aggressive whole number of sectors per entry that overflows at most ``threshold`` of
    its entries, its metadata ``ceil(log2(n + 1)) + 1`` bits an entry for ``n`` sectors an entry (the paper's 4 at
    128 and 32 bytes)."""
    fmt = _format(allocs)
    raw = sum(a.nbytes for a in allocs)
    ideal = np.empty((len(ENTRY_SIZES), len(SECTOR_SIZES)))
    effective = np.empty_like(ideal)
    for i, entry in enumerate(ENTRY_SIZES):
        for j, sector in enumerate(SECTOR_SIZES):
            n = entry // sector
            stored = device = 0.0
            for a in allocs:
                s = ebo.entry_sectors(np.asarray(a.data), fmt, entry, sector)
                stored += float(s.sum()) * sector
                device += s.size * (held_sectors(s, n, threshold) * sector + metadata_bits(n) / 8)
            ideal[i, j], effective[i, j] = raw / stored if stored else math.inf, raw / device
    dims = ("group", "entry_bytes", "sector_bytes")
    return xr.Dataset({"entry_ideal_ratio": (dims, ideal[None]), "entry_effective_ratio": (dims, effective[None])},
                      coords={"group": [label], "entry_bytes": list(ENTRY_SIZES), "sector_bytes": list(SECTOR_SIZES)})


def metadata_bits(n: int) -> int:
    """Metadata bits an entry of ``n`` sectors needs: its sector count, 0 to ``n``, and the zero flag.

    Parameters
    ----------
    n : int
        Sectors an entry.

    Returns
    -------
    int
        ``ceil(log2(n + 1)) + 1``: the paper's 4 at ``n`` = 4.

    Examples
    --------
    >>> metadata_bits(4), metadata_bits(16)
    (4, 6)
    """
    return math.ceil(math.log2(n + 1)) + 1


def held_sectors(s: np.ndarray, n: int, threshold: float) -> int:
    """The fewest whole sectors device memory may hold of each entry such that at most ``threshold`` overflow.

    Overflowing entries go to buddy memory.

    Parameters
    ----------
    s : numpy.ndarray
        The sectors each entry of an allocation takes (0 to ``n``).
    n : int
        Sectors an entry.
    threshold : float
        The largest share of entries allowed to overflow.

    Returns
    -------
    int
        1 to ``n``.

    Examples
    --------
    >>> import numpy as np
    >>> held_sectors(np.array([0, 1, 2, 4, 4]), 4, 0.4)
    2
    """
    over = s.size - np.cumsum(np.bincount(s, minlength=n + 1))  # over[t]: entries above t sectors
    return int(np.flatnonzero(over[1:n + 1] <= threshold * s.size + 1e-9)[0]) + 1


def _group(label: str, allocs: list[Allocation]) -> xr.Dataset:
    """One group's ratios: ideal and effective (per threshold) under each per-entry code, and the peers' (EBO and
    the 16-bit and FP8 peers where every tensor of the group is bf16, or every one e4m3); ``group_dtype``: its
    tensors' dtype, or ``mixed``."""
    dtypes = {a.dtype for a in allocs}
    fmt = _format(allocs)
    bf16 = fmt == "bf16"
    comps = list(FP8_COMPRESSORS) if fmt == "e4m3" else [c for c in COMPRESSORS if bf16 or not c.startswith("ebo")]
    snap = Snapshot(label, list(allocs))  # the runs' sectors reused; the EfficientNet checkpoint's computed
    ds = analyze(snap, comps, thresholds=list(THRESHOLDS), progress=False).isel(snapshot=0)
    out = xr.Dataset({"ideal_ratio": ds.ideal_ratio_total, "effective_ratio": ds.effective_ratio})
    out = out.reindex(compressor=list(ALL_CODES))
    raw = sum(a.nbytes for a in allocs)
    out["peer_ratio"] = ("peer", [raw / b if b else np.nan for b in (_peer_bytes(p, allocs, fmt) for p in PEERS)])
    return out.drop_vars(["snapshot", "step", "workload"], errors="ignore").assign_coords(
        peer=list(PEERS)).expand_dims(group=[label]).assign_coords(
        group_dtype=("group", [dtypes.pop() if len(dtypes) == 1 else "mixed"]))


def _peer_bytes(peer: str, allocs: list[Allocation], fmt: str | None) -> float:
    """Compressed bytes of ``allocs`` under a whole-tensor ``peer`` (each tensor compressed alone), ``fmt`` the
    float format of every tensor (``bf16``, ``e4m3``) or None; NaN where the peer does not apply (DFloat11 and
    the exponent bound on fp32 tensors, DFloat11 on FP8) or is not installed (ZipNN)."""
    total = 0.0
    for a in allocs:
        x = np.asarray(a.data)
        if peer == "zstd-1":
            total += reference_bytes(x, "zstd", 1)
            continue
        if fmt is None or (peer == "dfloat11" and fmt != "bf16"):
            return math.nan
        try:
            total += peers.peer_bytes(x.view(np.uint16 if fmt == "bf16" else np.uint8), peer, fmt)
        except ImportError:  # zipnn not installed (it needs a C compiler to build)
            return math.nan
    return total


def _kv_point(snap: Snapshot) -> xr.Dataset:
    """The KV cache of one (length, batch) grid point: ideal and effective (threshold 0.3) ratio per code."""
    kv = [a for a in snap.allocations if a.kind == "kv_cache"]
    b, _, t, _ = kv[0].shape
    ds = analyze(Snapshot("kv", kv), list(COMPRESSORS), thresholds=[0.3], progress=False).isel(snapshot=0, threshold=0)
    raw = sum(a.nbytes for a in kv)
    return xr.Dataset({
        "kv_ideal_ratio": ds.ideal_ratio_total, "kv_effective_ratio": ds.effective_ratio,
        "kv_peer_ratio": ("peer", [raw / _peer_bytes(p, kv, "bf16") for p in PEERS]),
        "kv_length": ((), t), "kv_batch": ((), b), "kv_bytes": ((), raw),
    }).drop_vars(["snapshot", "step", "workload", "threshold"], errors="ignore").assign_coords(
        peer=list(PEERS)).expand_dims(point=[f"{t} tokens x {b}"])


def _slowdowns(run: workloads.Run) -> xr.Dataset:
    """The timing model on a decode step of the served model (last snapshot: its weights and largest cache),
    per code, threshold, GPU (with its link), kernel scale and ``bandwidth_credit`` (whether a compressed entry
    also moves fewer HBM bytes; the headline's is False): slowdown against the same GPU holding everything
    uncompressed. MiniLM's layers are small (3.5 MB of weights a kernel, ~1 us of HBM time), so a kernel's fixed
    costs weigh more than in a large model's; at kernel scale ``k`` every decode kernel streams ``k`` copies of
    what it streams at 1 (the same bytes repeated: a layer ``k`` times wider), which measures that effect
    (a Llama-2-7B layer streams ~115 times MiniLM's bytes)."""
    from buddylib.timing import Workset, sweep

    snap = run.snapshots[-1]
    out = []
    for k in KERNEL_SCALES:
        allocs, profile = _repeated(snap, run.profile, k)
        for comp in COMPRESSORS:
            ws = Workset(run.workload.name, [Snapshot(snap.workload, allocs, step=snap.step)], profile, {}, comp)
            for g, lk in CAPACITY_GPUS:
                s = sweep(ws, gpus=[g], links=[lk], thresholds=list(THRESHOLDS),
                          bandwidth_credit=[False, True]).slowdown  # the model's defaults: the headline's
                s = s.squeeze([d for d in s.dims if s.sizes[d] == 1 and d != "bandwidth_credit"], drop=True)
                out.append(s.rename("decode_slowdown").expand_dims(kernel_scale=[k], compressor=[comp], gpu=[g]))
    ds = xr.combine_by_coords(out)
    ds["decode_slowdown"].attrs["units"] = "1"
    return ds


def _repeated(snap: Snapshot, profile: workloads.AccessProfile,
              k: int) -> tuple[list[Allocation], workloads.AccessProfile]:
    """``snap``'s allocations ``k`` times (``name#i``; the same bytes and sectors) and ``profile`` with each kernel
    touching every copy of what it touched, with ``k`` times its FLOPs."""
    if k == 1:
        return snap.allocations, profile
    allocs = []
    for i in range(k):
        for a in snap.allocations:
            c = Allocation(f"{a.name}#{i}", kind=a.kind, dtype=a.dtype, shape=a.shape, nbytes=a.nbytes, data=a.data)
            c.sectors = a.sectors
            allocs.append(c)
    kernels = [workloads.Kernel(kn.name, [replace(x, allocation=f"{x.allocation}#{i}") for i in range(k)
                                          for x in kn.accesses], kn.flops * k) for kn in profile.kernels]
    return allocs, workloads.AccessProfile(profile.workload, kernels)


def decode_workset(snap: Snapshot, profile: workloads.AccessProfile, k: int = 1) -> Workset:
    """A decode step of the served model at the granularity of its accesses, ``k`` times wider (``_repeated``).

    The bytes a bigger entry over-fetches depend on that granularity. ``profile`` (``minilm_kv``'s) streams the
    embedding tables whole and appends to a prefix of each cache; here, as a serving step does, each sequence gathers
    one row of the word, position and token-type embeddings (its last text token stands in for the token decoded, its
    length for the position), and appends one row of ``head_dim`` values to each head's keys and values at the cache's
    last position. Weights and caches are read whole, as in ``profile``, whose FLOPs each kernel keeps.

    Parameters
    ----------
    snap : Snapshot
        A ``minilm_kv`` snapshot, its bytes kept.
    profile : AccessProfile
        ``minilm_kv``'s access profile.
    k : int
        Copies of every allocation (a layer ``k`` times wider).

    Returns
    -------
    Workset
        For compressor ``ebo-bf16``.
    """
    from buddylib.timing import Workset

    kv = [a for a in snap.allocations if a.kind == "kv_cache"]
    b, heads, t, hd = kv[0].shape
    words, positions, types = ("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                               "embeddings.token_type_embeddings.weight")
    allocs = {a.name: a for a in snap.allocations}
    hidden = allocs[words].shape[1]
    ids = np.asarray(allocs["input_ids"].data).reshape(b, -1)
    index = {"next_tokens": ids[:, -2].astype(np.int64),  # [CLS] text [SEP]: the last text token
             "next_positions": np.full(b, min(t, allocs[positions].shape[0] - 1), np.int64),
             "next_types": np.zeros(b, np.int64),
             "kv_append": np.arange(b * heads, dtype=np.int64) * t + t - 1}
    kernels = []
    for kn in profile.kernels:
        acc = []
        for x in kn.accesses:
            if x.allocation in (words, positions, types):
                ix = {words: "next_tokens", positions: "next_positions", types: "next_types"}[x.allocation]
                acc.append(workloads.Access(x.allocation, "read", "gather", index=ix, row=hidden))
            elif allocs[x.allocation].kind == "kv_cache" and x.mode == "write":
                acc.append(workloads.Access(x.allocation, "write", "gather", index="kv_append", row=hd))
            else:
                acc.append(x)
        kernels.append(workloads.Kernel(kn.name, acc, kn.flops))
    allocs_k, profile_k = _repeated(snap, workloads.AccessProfile(profile.workload, kernels), k)
    return Workset(profile.workload, [Snapshot(snap.workload, allocs_k, step=snap.step)], profile_k, index, "ebo-bf16")


def entry_traffic(ws: Workset, sectors: dict[str, np.ndarray], held: dict[str, int], entry: int,
                  sector: int) -> dict[str, np.ndarray]:
    """Per kernel, the bytes :func:`~buddylib.timing.model.traffic` counts, with entries of ``entry`` bytes.

    Any touch of an entry moves the whole compressed entry (a 128-byte block of it is not decodable alone): device
    bytes ``min(s, held)`` sectors, link bytes the rest. ``device_bytes_uncredited``: with no HBM credit an entry costs
    at least the 128-byte blocks the access needed of it (at 128 bytes, the model's 128 B an entry). The baseline moves
    the 128-byte blocks touched, as the model's; at 128 and 32 bytes this is the model's traffic.

    Parameters
    ----------
    ws : Workset
        The step (:func:`decode_workset`).
    sectors : dict of str to numpy.ndarray
        ``sectors[name]``: the sectors each entry of allocation ``name`` takes.
    held : dict of str to int
        ``held[name]``: the most device memory holds of each entry (the rest is in buddy memory).
    entry, sector : int
        The entry's and the sector's bytes.

    Returns
    -------
    dict of str to numpy.ndarray
        Per kernel: ``baseline_bytes``, ``device_bytes``, ``device_bytes_uncredited``, ``link_bytes`` and ``flops``.
    """
    m = entry // ENTRY_BYTES
    out = {k: np.zeros(len(ws.profile.kernels)) for k in
           ("baseline_bytes", "device_bytes", "device_bytes_uncredited", "link_bytes")}
    for ki, accesses in enumerate(ws.streams()):
        for name, ent, passes in accesses:
            e = ent // m
            first = np.flatnonzero(np.r_[True, e[1:] != e[:-1]]) if e.size else e
            blocks = np.diff(np.r_[first, e.size])  # the 128-byte blocks the access needs of each entry it touches
            s = sectors[name][e[first]].astype(np.int64)
            device = np.minimum(s, held[name]) * sector
            out["baseline_bytes"][ki] += passes * ent.size * ENTRY_BYTES
            out["device_bytes"][ki] += passes * device.sum()
            out["device_bytes_uncredited"][ki] += passes * np.maximum(device, blocks * ENTRY_BYTES).sum()
            out["link_bytes"][ki] += passes * (np.maximum(s - held[name], 0) * sector).sum()
    out["flops"] = np.array([kn.flops for kn in ws.profile.kernels], dtype=float)
    return out


def entry_metadata_misses(ws: Workset, entry: int, sector: int, params: Params) -> np.ndarray:
    """Metadata-cache misses per kernel (as the timing model's ``_metadata_misses``) with ``entry``-byte entries.

    Each takes :func:`metadata_bits` bits: a line holds ``params.metadata_line_bytes * 8 // bits`` entries.

    Parameters
    ----------
    ws : Workset
        The step (:func:`decode_workset`).
    entry, sector : int
        The entry's and the sector's bytes.
    params : Params
        The timing model's metadata cache.

    Returns
    -------
    numpy.ndarray
        Misses per kernel.
    """
    from buddylib.timing import caches

    per_line = entry // ENTRY_BYTES * (params.metadata_line_bytes * 8 // metadata_bits(entry // sector))
    which, ent, bounds = ws.merged()
    first = np.cumsum([0] + [-(-a.n_entries // per_line) for a in ws.last.allocations], dtype=np.int64)
    hits = caches.metadata_hits(which, ent, first, per_line, bounds, params.metadata_cache_bytes,
                                params.metadata_line_bytes, params.metadata_ways)
    return np.diff(bounds, prepend=0).astype(float) - hits


def _entry_slowdowns(run: workloads.Run, threshold: float = 0.3) -> xr.Dataset:
    """Capacity against decode-step cost per (entry, sector) size: on the served model's last snapshot (weights
    and largest cache, :func:`decode_workset`), every bf16 allocation under EBO at that size with
    :func:`held_sectors` at ``threshold`` (others uncompressed), the device memory's effective ratio
    (``entry_decode_ratio``, metadata counted) and the timing model's slowdown of the step per kernel scale, GPU
    and HBM credit (``entry_decode_slowdown``), the over-fetch of :func:`entry_traffic` included."""
    from buddylib.timing import Params, gpu, link
    from buddylib.timing.model import _peak, kernel_times

    snap = run.snapshots[-1]
    params = Params()
    raw = sum(a.nbytes for a in snap.allocations)
    dims = ("entry_bytes", "sector_bytes")
    ratio = np.empty((len(ENTRY_SIZES), len(SECTOR_SIZES)))
    slow = np.empty((*ratio.shape, len(KERNEL_SCALES), len(CAPACITY_GPUS), 2))
    over = np.empty_like(ratio)
    worksets = [decode_workset(snap, run.profile, k) for k in KERNEL_SCALES]
    for i, entry in enumerate(ENTRY_SIZES):
        for j, sector in enumerate(SECTOR_SIZES):
            n = entry // sector
            sectors, held, device = {}, {}, 0.0
            for a in snap.allocations:
                if a.dtype == "bfloat16":
                    sectors[a.name] = ebo.entry_sectors(np.asarray(a.data), "bf16", entry, sector)
                    held[a.name] = held_sectors(sectors[a.name], n, threshold)
                else:
                    sectors[a.name], held[a.name] = np.full(-(-a.nbytes // entry), n), n
                device += sectors[a.name].size * (held[a.name] * sector + metadata_bits(n) / 8)
            ratio[i, j] = raw / device
            for ki, ws in enumerate(worksets):
                base = {a.name: a.name.split("#")[0] for a in ws.last.allocations}
                tr = entry_traffic(ws, {c: sectors[b] for c, b in base.items()},
                                   {c: held[b] for c, b in base.items()}, entry, sector)
                misses = entry_metadata_misses(ws, entry, sector, params)
                if ki == len(KERNEL_SCALES) - 1:
                    over[i, j] = tr["device_bytes_uncredited"].sum() / tr["baseline_bytes"].sum()
                for gi, (g, lk) in enumerate(CAPACITY_GPUS):
                    for ci, key in enumerate(("device_bytes_uncredited", "device_bytes")):
                        b, t = kernel_times({**tr, "device_bytes": tr[key]}, misses, gpu(g), link(lk), params,
                                            _peak(ws, gpu(g)))
                        slow[i, j, ki, gi, ci] = t.sum() / b.sum()
    return xr.Dataset({
        "entry_decode_ratio": (dims, ratio, {"units": "1"}),
        "entry_decode_slowdown": ((*dims, "kernel_scale", "gpu", "bandwidth_credit"), slow, {"units": "1"}),
        "entry_decode_overfetch": (dims, over, {"units": "1", "description": "device bytes without HBM credit "
                                                "over the uncompressed step's, at the largest kernel scale"}),
    }, coords={"entry_bytes": list(ENTRY_SIZES), "sector_bytes": list(SECTOR_SIZES),
               "kernel_scale": list(KERNEL_SCALES), "gpu": [g for g, _ in CAPACITY_GPUS],
               "bandwidth_credit": [False, True]})
