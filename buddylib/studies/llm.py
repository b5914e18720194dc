"""Buddy Compression on today's LLM memory (issue 23, notebook 10): per tensor kind, what the per-entry codes
(BPC-32, BPC-64 and the code of bf16 floats, EBO) give, beside whole-tensor lossless compressors made for
these tensors (zstd; DFloat11's Huffman-coded exponents; ZipNN where it is installed; the exponent's entropy
as their ceiling), and what that buys on an H100 or H200 serving a model.

The tensors are real: the bf16 weights of two published checkpoints (MiniLM's, EfficientNet-Lite0's), the KV
cache MiniLM computes for real text (``minilm_kv``) and a GPT-style bf16 training's masters, copies,
gradients, moments and activations (``gpt_bf16``); see :mod:`buddylib.workloads.dl.llm`. A per-entry code
keeps every 128-byte entry decodable alone and rounds it to 32-byte sectors; a whole-tensor entropy coder
does neither, and the difference is one of the results.

The capacity question (:func:`capacity`) is answered for a published 7B-class configuration (Llama-2-7B's,
labelled as such) with the ratios and the slowdown measured here on the small real model.

The quick-scale study is committed (:data:`COMMITTED`, :func:`write_committed`), so notebook 10 shows the same
numbers on every machine under nbval, and the default-scale one, so make reproduce reads it instead of spending two
minutes of worker time on it; :func:`check_committed` (and the tests) remake it here and compare, bit
for bit where the bytes do not depend on the CPU (the checkpoints) and within :data:`TOLERANCE` where they do
(the KV cache and the training are float computation).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from buddylib import paper, workloads
from buddylib.analysis import analyze
from buddylib.compressors import peers
from buddylib.compressors.reference import reference_bytes
from buddylib.provenance import ANALYSIS_ONLY, code_version
from buddylib.snapshot import Allocation, Snapshot
from buddylib.studies import experiments, fixtures

#: The per-entry codes compared (EBO on the 16-bit tensors only: it codes 16-bit floats).
COMPRESSORS = ("bpc32", "bpc64", "ebo-bf16")
#: Whole-tensor compressors beside them: zstd level 1, DFloat11's scheme, ZipNN, the exponent-entropy bound.
PEERS = ("zstd-1", "dfloat11", "zipnn", "exponent-entropy")
#: Buddy thresholds swept (the share of entries allowed to overflow to buddy memory); the paper's is 0.3.
THRESHOLDS = (0.1, 0.2, 0.3, 0.4)
#: Tensor kinds, in the order the notebook shows them: (label, workload, allocation kind, held in bf16).
GROUPS = (
    ("weights bf16 (MiniLM)", "minilm_kv", "weights", True),
    ("weights bf16 (EfficientNet-Lite0)", "efficientnet", "weights", True),
    ("KV cache bf16 (MiniLM)", "minilm_kv", "kv_cache", True),
    ("master weights fp32 (GPT)", "gpt_bf16", "weights", False),
    ("weight copies bf16 (GPT)", "gpt_bf16", "half_weights", True),
    ("gradients fp32 (GPT)", "gpt_bf16", "gradients", False),
    ("AdamW moments fp32 (GPT)", "gpt_bf16", "optimizer", False),
    ("activations (GPT)", "gpt_bf16", "activations", False),
)
#: A published 7B-class configuration to extrapolate to (Llama-2-7B, Touvron et al. 2023, Table 1 and its
#: config.json): layers, hidden size, KV heads, head dim, parameters.
LLAMA2_7B = {"layers": 32, "hidden": 4096, "kv_heads": 32, "head_dim": 128, "params": 6.74e9}
#: Decode kernels' sizes replayed, in multiples of MiniLM's (:func:`_slowdowns`).
KERNEL_SCALES = (1, 4, 16)
#: GPUs of the capacity question: name in :mod:`buddylib.timing.hardware` and the link to buddy memory.
CAPACITY_GPUS = (("H100-80GB", "NVLink4"), ("H200-141GB", "NVLink-C2C"))


def key() -> str:
    """Digest of the code the study depends on: this module, the workloads', the compressors' and analysis's."""
    return "+".join([code_version("studies/llm.py", "compressors", *ANALYSIS_ONLY), *(workloads.get(n).code()
                                                                          for n in ("minilm_kv", "gpt_bf16"))])


#: Where the committed study lies, and the largest relative change :func:`check_committed` accepts in a number
#: that float computation made (the fixtures' tolerance: PyTorch's kernels differ between CPUs).
COMMITTED = fixtures.DATA / "summaries" / "llm"
TOLERANCE = fixtures.TOLERANCE


def committed_path(scale: str | float = "quick", seed: int = 0) -> Path:
    return COMMITTED / f"llm-{scale}-s{seed}.nc"


def study(scale: str | float = "quick", seed: int = 0, data: str | Path | None = None,
          progress: bool = False) -> xr.Dataset:
    """The study's numbers (:func:`measure`): the committed study of this scale and seed where there is one (read
    as it is: its ``code``, ``date`` and ``machine`` attributes say what made it; quick scale for nbval, default
    for make reproduce), else computed and cached in ``data`` (None: this checkout's ``data/``) as
    ``llm-<scale>-s<seed>.nc``, reused while the code is the same."""
    if committed_path(scale, seed).is_file():
        ds = experiments._load_cached(committed_path(scale, seed))
        return ds.assign_attrs(source="committed", code_current=int(ds.attrs.get("code") == key()))
    if data is None:
        data = fixtures.DATA
    cache = Path(data) / f"llm-{scale}-s{seed}.nc"
    if cache.exists():
        ds = experiments._load_cached(cache)
        if ds.attrs.get("code") == key():
            return ds
    ds = measure(scale, seed, progress)
    ds.attrs["code"] = key()
    experiments.save_cache(ds, cache)
    return ds


def write_committed(scale: str | float = "quick", seed: int = 0) -> Path:
    """Measure the study here and commit it (:data:`COMMITTED`), with the code digest, date and machine."""
    import datetime

    ds = measure(scale, seed)
    ds.attrs.update(code=key(), date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                    machine=json.dumps(fixtures.machine()))
    path = committed_path(scale, seed)
    experiments.save_cache(ds, path)
    return path


def check_committed(scale: str | float = "quick", seed: int = 0, fresh: xr.Dataset | None = None) -> pd.DataFrame:
    """Remake the committed study here (or take ``fresh``) and compare, one row per variable: the largest
    relative change, whether it must be exact (the checkpoints' rows and every size in bytes) and ``ok``."""
    if not committed_path(scale, seed).is_file():
        raise FileNotFoundError(f"no committed study at scale {scale}, seed {seed} ({committed_path(scale, seed)}); "
                                f"`buddy llm --write --scale {scale} --seed {seed}` makes one")
    kept = experiments._load_cached(committed_path(scale, seed))
    fresh = measure(scale, seed) if fresh is None else fresh
    exact_groups = [g for g, src, *_ in GROUPS if src == "efficientnet" or g == GROUPS[0][0]]
    rows = []
    for v in kept.data_vars:
        a, b = kept[v], fresh[v]
        if a.dims != b.dims or a.shape != b.shape:
            rows.append({"variable": v, "max_rel_change": np.inf, "exact": True, "ok": False})
            continue
        x, y = np.asarray(a, float), np.asarray(b, float)
        both_nan = np.isnan(x) & np.isnan(y)
        rel = np.where(both_nan, 0.0, np.abs(y - x) / np.where(x == 0, 1.0, np.abs(x)))
        rel = np.where(np.isnan(rel), np.inf, rel)
        rows.append({"variable": v, "max_rel_change": float(rel.max(initial=0.0)), "exact": v.endswith("_bytes"),
                     "ok": bool(rel.max(initial=0.0) <= (0.0 if v.endswith("_bytes") else TOLERANCE))})
        if "group" in a.dims:  # the published checkpoints' rows: the same bytes on any CPU, so the same numbers
            same = a.sel(group=exact_groups).equals(b.sel(group=exact_groups))
            rows.append({"variable": f"{v} (checkpoints)", "max_rel_change": 0.0 if same else np.inf,
                         "exact": True, "ok": bool(same)})
    return pd.DataFrame(rows).set_index("variable")


def efficientnet_bf16() -> list[Allocation]:
    """EfficientNet-Lite0's published checkpoint cast to bf16 (round to nearest even), as a serving stack loads
    it: one allocation per floating-point tensor, bf16 bits as int16."""
    import torch

    from buddylib.workloads.dl import efficientnet

    out = []
    for n, t in efficientnet.checkpoint().items():
        if t.is_floating_point() and t.numel():
            a = t.detach().to(torch.bfloat16).contiguous().view(torch.int16).numpy()
            out.append(Allocation.from_array(n, a, kind="weights"))
    return out


def runs(scale: str | float = "quick", seed: int = 0, progress: bool = False) -> dict[str, workloads.Run]:
    """The study's two runs, bytes kept: every grid point of the KV cache a snapshot (a run dedupes the steps it is
    asked for), the training's 8 snapshots."""
    return {n: workloads.get(n).run(scale, seed=seed, keep_bytes=True, compressors=COMPRESSORS, progress=progress,
                                    n_snapshots=64 if n == "minilm_kv" else 8) for n in ("minilm_kv", "gpt_bf16")}


def measure(scale: str | float = "quick", seed: int = 0, progress: bool = False,
            made: dict[str, workloads.Run] | None = None) -> xr.Dataset:
    """Run ``minilm_kv`` and ``gpt_bf16`` at ``scale`` and measure every group of :data:`GROUPS`: dims (group,
    compressor, threshold) for the per-entry codes' ideal and effective ratios, (group, peer) for the peers',
    (point, compressor) for the KV cache of every (length, batch) point, and the timing model's slowdown of a
    decode step, (compressor, threshold, gpu). ``made``: the :func:`runs` of this scale and seed, if already made."""
    t0 = time.perf_counter()
    made = made or runs(scale, seed, progress)
    last = {n: r.snapshots[-1].allocations for n, r in made.items()}
    last["efficientnet"] = efficientnet_bf16()
    groups = [(label, [a for a in last[src] if a.kind == kind], bf16) for label, src, kind, bf16 in GROUPS]
    ratios = xr.concat([_group(label, allocs, bf16) for label, allocs, bf16 in groups], "group")
    kv = xr.concat([_kv_point(s) for s in made["minilm_kv"].snapshots[1:]], "point")
    ds = xr.merge([ratios, kv, _slowdowns(made["minilm_kv"])])
    ds["group_bytes"] = ("group", [sum(a.nbytes for a in allocs) for _, allocs, _ in groups], {"units": "bytes"})
    ds.attrs.update(scale=str(scale), seed=seed, seconds=time.perf_counter() - t0,
                    gpt_losses=[float(x) for x in made["gpt_bf16"].workload.losses])
    return ds


def _group(label: str, allocs: list[Allocation], bf16: bool) -> xr.Dataset:
    """One group's ratios: ideal and effective (per threshold) under each per-entry code, and the peers'."""
    comps = [c for c in COMPRESSORS if bf16 or not c.startswith("ebo")]
    snap = Snapshot(label, list(allocs))  # the runs' sectors reused; the EfficientNet checkpoint's computed
    ds = analyze(snap, comps, thresholds=list(THRESHOLDS), progress=False).isel(snapshot=0)
    out = xr.Dataset({"ideal_ratio": ds.ideal_ratio_total, "effective_ratio": ds.effective_ratio})
    out = out.reindex(compressor=list(COMPRESSORS))
    raw = sum(a.nbytes for a in allocs)
    out["peer_ratio"] = ("peer", [raw / b if b else np.nan for b in (_peer_bytes(p, allocs, bf16) for p in PEERS)])
    return out.drop_vars(["snapshot", "step", "workload"], errors="ignore").assign_coords(
        peer=list(PEERS)).expand_dims(group=[label])


def _peer_bytes(peer: str, allocs: list[Allocation], bf16: bool) -> float:
    """Compressed bytes of ``allocs`` under a whole-tensor ``peer`` (each tensor compressed alone); NaN where the
    peer does not apply (DFloat11 and the exponent bound on fp32 tensors) or is not installed (ZipNN)."""
    total = 0.0
    for a in allocs:
        x = np.asarray(a.data)
        if peer == "zstd-1":
            total += reference_bytes(x, "zstd", 1)
            continue
        if not bf16 or x.dtype.itemsize != 2:
            return math.nan
        try:
            total += peers.peer_bytes(x.view(np.uint16), peer, "bf16")
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
        "kv_peer_ratio": ("peer", [raw / _peer_bytes(p, kv, True) for p in PEERS]),
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


def ratio_table(ds: xr.Dataset, threshold: float = 0.3) -> pd.DataFrame:
    """Per group: bytes, and the ratio under every code (ideal and Buddy's effective at ``threshold``) and peer."""
    t = {f"{c} ideal": ds.ideal_ratio.sel(compressor=c).to_series() for c in COMPRESSORS}
    t |= {f"{c} Buddy": ds.effective_ratio.sel(compressor=c, threshold=threshold).to_series() for c in COMPRESSORS}
    t |= {p: ds.peer_ratio.sel(peer=p).to_series() for p in PEERS}
    out = pd.DataFrame(t).reindex([g for g, *_ in GROUPS])
    out.insert(0, "MiB", ds.group_bytes.to_series() / 2**20)
    return out


def capacity(ds: xr.Dataset, budget: float = 0.02, context: int = 4096, config: dict[str, float] = LLAMA2_7B,
             credit: bool = paper.HEADLINE["bandwidth_credit"]) -> pd.DataFrame:
    """Concurrent sequences of ``context`` tokens whose bf16 KV cache fits beside a bf16 7B-class model on each
    GPU of :data:`CAPACITY_GPUS`, uncompressed and under Buddy with each code: the most aggressive threshold
    whose decode-step slowdown (measured here on the small model, at the largest kernel scale replayed: the
    nearest to a 7B model's kernels; ``credit``: with or without HBM bytes saved) stays within ``budget``, and
    the effective ratios of the weights (MiniLM's) and KV cache measured at that threshold. Extrapolated to ``config``
    (Llama-2-7B's by default): its weights and per-token cache from its published shape, not measured."""
    from buddylib.timing import gpu

    weights = 2.0 * config["params"]
    per_seq = 2 * config["layers"] * config["kv_heads"] * config["head_dim"] * 2.0 * context
    rows = []
    for g, _ in CAPACITY_GPUS:
        mem = gpu(g).capacity
        base = math.floor((mem - weights) / per_seq)
        rows.append({"gpu": g, "compressor": "none", "threshold": np.nan, "slowdown": 1.0, "weights_ratio": 1.0,
                     "kv_ratio": 1.0, "sequences": base, "gain": 1.0})
        for c in COMPRESSORS:
            slow = ds.decode_slowdown.sel(gpu=g, compressor=c, kernel_scale=max(ds.kernel_scale.values),
                                          bandwidth_credit=credit)
            ok = [float(t) for t in slow.threshold.values if float(slow.sel(threshold=t)) <= 1 + budget]
            if not ok:
                continue
            t = max(ok)
            rw = float(ds.effective_ratio.sel(group=GROUPS[0][0], compressor=c, threshold=t))
            rk = float(ds.effective_ratio.sel(group=GROUPS[2][0], compressor=c, threshold=t))
            n = math.floor((mem - weights / rw) / (per_seq / rk))
            rows.append({"gpu": g, "compressor": c, "threshold": t, "slowdown": float(slow.sel(threshold=t)),
                         "weights_ratio": rw, "kv_ratio": rk, "sequences": n, "gain": n / base if base else np.nan})
    return pd.DataFrame(rows).set_index(["gpu", "compressor"])
