"""Targets per region: the target granularity as a layout parameter (beyond the paper, which keeps one
target per allocation).

An allocation is cut into aligned regions of ``region`` bytes (a power of two from 4 KiB; the last one may be
short), each with its own target. The buddy threshold keeps its meaning — at most ``t`` of the allocation's
entries overflow in every profiled snapshot — and a **rule** says how the regions share that budget:

* ``budget``: the allocation's overflow budget goes where it saves the most device bytes. Each region takes
  the target minimising ``device bytes + λ x overflowing entries`` (summed over snapshots), with λ the
  smallest that keeps the budget in every snapshot; the allocation's own target (the paper's choice, feasible
  by definition) is kept instead where it needs fewer device bytes, so this never does worse than one target
  per allocation but for the targets' metadata.
* ``traffic``: the same, held to the overflow the per-allocation target actually caused (its worst
  snapshot), so a region's gain is compression and not buddy memory used as a tier: with the full budget a
  random allocation parks ``t`` of its entries in buddy memory and "gains" ``1 / (1 - t (1 - 1/r))``.
* ``naive``: each region alone held to ``t``, as if it were an allocation; it cannot borrow a neighbour's
  budget and can do worse than one target per allocation.

The ``global`` policy pools every allocation's regions under one budget; ``oracle`` places each snapshot on
its own. A region's target is metadata: ``ceil(log2(targets))`` bits a region (2 for the paper's four
targets, 3 with 8x and 16x), counted in device bytes. Where the hardware keeps it: a region of a GPU page
(64 KiB) or more keeps its bits in spare bits of the page-table entry, so the lookup rides on the address
translation; a smaller region keeps them beside its entries' 4-bit metadata (a 32-B metadata line covers
64 entries, 8 KiB, so two 4 KiB regions' targets), fetched with that line. Either way no extra memory access:
the timing model charges the bits as capacity only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np

from buddylib import layout
from buddylib.entries import ENTRY_BYTES, SECTOR_BYTES, SECTORS_PER_ENTRY

KiB = 1 << 10
#: The smallest region: a CPU page, 32 entries.
MIN_REGION_BYTES = 4 * KiB
#: GPU page sizes: a region this large or larger keeps its target in its page-table entry.
PAGE_BYTES = 64 * KiB
#: The granularities the study compares (``None``: one target per allocation, the paper's).
GRANULARITIES: tuple[int | None, ...] = (None, 2048 * KiB, 64 * KiB, 4 * KiB)
#: How an allocation's regions share its overflow budget (:func:`choose`): the whole budget spent where it saves
#: most, the traffic of one target per allocation kept, or each region alone.
RULES = ("budget", "traffic", "naive")
_UNITS = {"": 1, "b": 1, "k": KiB, "kb": KiB, "kib": KiB, "m": KiB**2, "mb": KiB**2, "mib": KiB**2,
          "g": KiB**3, "gb": KiB**3, "gib": KiB**3}


def region_bytes(region: int | str | None) -> int | None:
    """``region`` in bytes.

    Parameters
    ----------
    region : int, str or None
        ``None`` or ``"allocation"`` (one target per allocation), a number of bytes, or a size such as ``"4KiB"``,
        ``"64 kb"``, ``"2MiB"`` (units B, K, KB, KiB, M..., G..., any case; all powers of 1024).

    Returns
    -------
    int or None
        The region's bytes, a power of two of at least :data:`MIN_REGION_BYTES`; ``None`` for one per allocation.

    Raises
    ------
    ValueError
        Anything else, or a size that is not a power of two of at least 4 KiB (``region`` named).

    Examples
    --------
    >>> region_bytes("64KiB"), region_bytes("allocation"), region_bytes(4096)
    (65536, None, 4096)
    """
    if region is None or (isinstance(region, str) and region.strip().lower() == "allocation"):
        return None
    if isinstance(region, str):
        m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", region)
        if not m or m.group(2).lower() not in _UNITS:
            raise ValueError(f"region {region!r}: give 'allocation' or a size such as 4KiB, 64KiB, 2MiB")
        size = int(m.group(1)) * _UNITS[m.group(2).lower()]
    elif isinstance(region, (int, np.integer)) and not isinstance(region, bool):
        size = int(region)
    else:
        raise ValueError(f"region {region!r}: give 'allocation' or a size in bytes")
    if size < MIN_REGION_BYTES or size & (size - 1):
        raise ValueError(f"region {region!r}: a region is a power of two of at least 4 KiB, not {size} bytes")
    return size


def label(region: int | str | None) -> str:
    """How a granularity reads in tables: ``allocation``, ``4 KiB``, ``2 MiB``, ``1 GiB``.

    Parameters
    ----------
    region : int, str or None
        A granularity, as :func:`region_bytes` takes it.

    Returns
    -------
    str
        ``allocation``, or the size in the largest binary unit it reaches.

    Raises
    ------
    ValueError
        A ``region`` that :func:`region_bytes` refuses.

    Examples
    --------
    >>> label(None), label("64KiB"), label(1 << 30)
    ('allocation', '64 KiB', '1 GiB')
    """
    size = region_bytes(region)
    if size is None:
        return "allocation"
    for unit, name in ((KiB**3, "GiB"), (KiB**2, "MiB"), (KiB, "KiB")):
        if size >= unit:
            return f"{size // unit} {name}"
    return f"{size} B"


def check_rule(rule: str) -> str:
    """``rule`` if it is one of :data:`RULES`.

    Parameters
    ----------
    rule : str
        How an allocation's regions share its overflow budget.

    Returns
    -------
    str
        ``rule`` itself.

    Raises
    ------
    ValueError
        An unknown rule; the message names the available ones.
    """
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; available: {', '.join(RULES)}")
    return rule


def target_bits(targets: Sequence[float]) -> int:
    """Bits that name a region's target among ``targets`` (target 1 always among them).

    Parameters
    ----------
    targets : sequence of float
        Target ratios a region may take (:func:`buddylib.layout.check_targets`).

    Returns
    -------
    int
        ``ceil(log2(n))`` for ``n`` targets with 1 added, at least 1.

    Raises
    ------
    ValueError
        An unsupported target.

    Examples
    --------
    >>> target_bits([1, 4 / 3, 2, 4]), target_bits([2, 4, 8, 16])
    (2, 3)
    """
    return max(1, math.ceil(math.log2(np.union1d(layout.check_targets(targets), [1.0]).size)))


def metadata_bytes(n_entries: np.ndarray | int, region: int | None, targets: Sequence[float]) -> np.ndarray:
    """Device bytes naming the regions' targets: ``regions x bits / 8`` (none for one per allocation).

    Parameters
    ----------
    n_entries : int or numpy.ndarray
        Entries of the allocations.
    region : int or None
        Region bytes (:func:`region_bytes`); ``None``: one target per allocation.
    targets : sequence of float
        The targets a region may take (:func:`target_bits`).

    Returns
    -------
    numpy.ndarray
        Bytes, as floats, shaped like ``n_entries``; the last, short region counts as one.
    """
    n = np.asarray(n_entries, dtype=float)
    if region is None:
        return np.zeros_like(n)
    per = region // ENTRY_BYTES
    return np.ceil(n / per) * target_bits(targets) / 8


def histograms(sectors: np.ndarray, region: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Entries (or access weights) per sector count for each region.

    Parameters
    ----------
    sectors : numpy.ndarray
        Sectors per entry of one allocation (or a chunk of it starting on a region), flattened.
    region : int
        Region bytes.
    weights : numpy.ndarray, optional
        One access weight per entry, summed instead of counting entries.

    Returns
    -------
    numpy.ndarray
        ``(regions, 5)``, the last region possibly short; ``int64`` counts, or ``float`` sums of ``weights``.

    Examples
    --------
    >>> histograms(np.array([0, 1, 4] * 12), 4096)  # 36 entries: regions of 32 and 4
    array([[11, 11,  0,  0, 10],
           [ 1,  1,  0,  0,  2]])
    """
    s = np.asarray(sectors).reshape(-1).astype(np.int64)
    per = region // ENTRY_BYTES
    n = -(-s.size // per)
    idx = np.arange(s.size, dtype=np.int64) // per * (SECTORS_PER_ENTRY + 1) + s
    out = np.bincount(idx, weights=None if weights is None else np.asarray(weights, float).reshape(-1),
                      minlength=n * (SECTORS_PER_ENTRY + 1))
    return out.reshape(n, SECTORS_PER_ENTRY + 1)


# ---------------------------------------------------------------------------------------
# the rules: one group of regions (an allocation's, or all of them) under one budget
# ---------------------------------------------------------------------------------------


def _overflow_table(h: np.ndarray, targets: np.ndarray, weight: np.ndarray | None = None,
                    which=layout.overflows) -> np.ndarray:
    """``h[..., 5]``'s entries (or, with ``weight`` per sector count, their weighted sum) that overflow at each
    target: ``(..., K)``, from running sums over the sector counts (as :func:`buddylib.layout.overflow_entries`
    decides it, without a mask per target); ``which``: those :func:`buddylib.layout.tiered` instead."""
    mask = which(targets)  # (K, 5); an overflowing count's larger ones overflow too
    first = np.where(mask.any(-1), mask.argmax(-1), SECTORS_PER_ENTRY + 1)
    x = h if weight is None else h * weight
    ge = np.cumsum(x[..., ::-1], axis=-1)[..., ::-1]  # entries taking j sectors or more
    ge = np.concatenate([ge, np.zeros((*ge.shape[:-1], 1))], axis=-1)
    return ge[..., first]


def _choose(h: np.ndarray, threshold: float, targets: np.ndarray) -> np.ndarray:
    """:func:`buddylib.layout.choose_target` as an index into ``targets`` (sorted, ``targets[0] == 1``), for
    ``h[..., snapshot, 5]``, without its checks: it runs per allocation and threshold."""
    worst = layout.overflow_fraction(h[..., None, :], targets).max(axis=-2)  # (..., K)
    ok = worst <= threshold + 1e-12
    ok[..., 0] = True
    return ok.shape[-1] - 1 - np.argmax(ok[..., ::-1], axis=-1)


def _feasible(over: np.ndarray, choice: np.ndarray, limit: np.ndarray) -> bool:
    """Whether choosing ``choice`` (per region) keeps every snapshot's overflow within ``limit``."""
    used = np.take_along_axis(over, choice[None, :, None], axis=2)[..., 0].sum(1)
    return bool((used <= limit).all())


def _fill(over: np.ndarray, dev: np.ndarray, safe: np.ndarray, bold: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """``safe`` (feasible) with as many regions as fit switched to ``bold``'s (infeasible as a whole) more
    aggressive choice, those saving the most device bytes first: the Lagrangian moves every region with the
    same breakpoint at once, so without this a budget that fits some of them is left unspent."""
    moved = np.flatnonzero(bold != safe)
    if moved.size == 0:
        return safe
    rows = np.arange(dev.shape[0])
    saving = (dev[rows, safe] - dev[rows, bold])[moved]
    moved = moved[np.argsort(-saving, kind="stable")]
    extra = over[:, moved, bold[moved]] - over[:, moved, safe[moved]]  # (S, moved), >= 0
    used = over[:, rows, safe].sum(1)  # (S,)
    fits = ((used[:, None] + np.cumsum(extra, axis=1)) <= limit[:, None]).all(0)
    n = int(np.argmin(fits)) if not fits.all() else fits.size
    out = safe.copy()
    out[moved[:n]] = bold[moved[:n]]
    return out


def _lagrange(dev: np.ndarray, cost: np.ndarray, lam: float) -> np.ndarray:
    """Per region, the target minimising ``dev + lam x cost``; ties go to the more aggressive target."""
    if np.isinf(lam):
        key, second = cost, dev
        best = key.min(1, keepdims=True)
        tie = key <= best
        second = np.where(tie, second, np.inf)
        ok = tie & (second <= second.min(1, keepdims=True))
    else:
        total = dev + lam * cost
        best = total.min(1, keepdims=True)
        ok = total <= best + 1e-9 * np.maximum(np.abs(best), 1.0)
    k = dev.shape[1]
    return (k - 1 - np.argmax(ok[:, ::-1], axis=1)).astype(np.int64)


def place(hist: np.ndarray, thresholds: np.ndarray, targets: np.ndarray, rule: str = "budget") -> np.ndarray:
    """Target index per region and threshold for one group sharing one budget.

    Parameters
    ----------
    hist : numpy.ndarray
        Entries per sector count, ``hist[snapshot, region, 5]``.
    thresholds : numpy.ndarray
        Buddy thresholds.
    targets : numpy.ndarray
        Target ratios, sorted, with 1 (not checked).
    rule : {"budget", "traffic", "naive"}
        How the regions share the budget (see the module's docstring).

    Returns
    -------
    numpy.ndarray
        ``int64`` indices into ``targets``, ``(region, threshold)``: a region's target is the same in every
        snapshot.

    Raises
    ------
    ValueError
        An unknown rule.
    """
    check_rule(rule)
    h = np.asarray(hist, dtype=float)
    thresholds = np.atleast_1d(np.asarray(thresholds, dtype=float))
    out = np.empty((h.shape[1], thresholds.size), np.int64)
    if rule == "naive":
        for ti, t in enumerate(thresholds):
            out[:, ti] = _choose(np.moveaxis(h, 0, 1), t, targets)
        return out
    whole = h.sum(1)  # (S, 5): the group as one allocation
    entries = whole.sum(-1)  # (S,)
    over = _overflow_table(h, targets)  # (S, R, K)
    size = h.sum(-1).max(0)  # (R,) entries a region holds (its largest snapshot)
    dev = size[:, None] * layout.device_share_bytes(targets)[None, :]  # (R, K)
    cost = over.sum(0)  # (R, K)
    cands = None
    for ti, t in enumerate(thresholds):
        k_all = int(_choose(whole, t, targets))
        out[:, ti] = k_all
        if h.shape[1] <= 1:  # one region: the allocation's own target
            continue
        if rule == "traffic":  # the overflow the per-allocation target caused, its worst snapshot
            t = float(layout.overflow_fraction(whole, targets[k_all]).max(initial=0.0))
        limit = t * entries + 1e-12 * np.maximum(entries, 1)
        greedy = _lagrange(dev, cost, 0.0)
        if _feasible(over, greedy, limit):  # every region at its smallest device share fits the budget
            best = greedy
        else:
            if cands is None:  # the breakpoints where a region's choice changes
                i, j = np.triu_indices(targets.size, 1)
                d_over = cost[:, j] - cost[:, i]
                lams = np.divide(dev[:, i] - dev[:, j], d_over, out=np.full(d_over.shape, np.nan), where=d_over > 0)
                cands = np.concatenate([[0.0], np.unique(lams[np.isfinite(lams) & (lams >= 0)]), [np.inf]])
            best = _smallest_feasible(over, dev, cost, cands, limit)
        if np.take_along_axis(dev, best[:, None], 1).sum() <= dev[:, k_all].sum():
            out[:, ti] = best  # else the per-allocation target, feasible under either rule, needs fewer bytes
    return out


def _smallest_feasible(over: np.ndarray, dev: np.ndarray, cost: np.ndarray, cands: np.ndarray,
                       limit: np.ndarray) -> np.ndarray:
    """The Lagrangian choice at the smallest λ among ``cands`` that keeps the budget, with the regions that
    change at the next smaller λ moved one by one while they fit (:func:`_fill`)."""
    lo, hi = 0, cands.size - 1  # λ = inf (least overflow: none, target 1 being a candidate) is feasible
    best = _lagrange(dev, cost, cands[hi])
    while lo < hi:
        mid = (lo + hi) // 2
        choice = _lagrange(dev, cost, cands[mid])
        if _feasible(over, choice, limit):
            best, hi = choice, mid
        else:
            lo = mid + 1
    if hi > 0:
        best = _fill(over, dev, best, _lagrange(dev, cost, cands[hi - 1]), limit)
    return best


def choose(hists: Mapping[str, np.ndarray], thresholds: Sequence[float], targets: Sequence[float],
           policy: str = "profile", rule: str = "budget") -> dict[str, np.ndarray]:
    """Each allocation's region targets.

    Parameters
    ----------
    hists : mapping of str to numpy.ndarray
        Entries per sector count, ``{name: [snapshot, region, 5]}``.
    thresholds : sequence of float
        Buddy thresholds.
    targets : sequence of float
        Target ratios a region may take; target 1 is always added.
    policy : {"profile", "global", "oracle"}
        ``profile``: one budget per allocation, targets fixed over the snapshots; ``global``: one budget for all
        allocations' regions together; ``oracle``: per allocation and snapshot, each snapshot on its own.
    rule : {"budget", "traffic", "naive"}
        How regions share a budget (:func:`place`).

    Returns
    -------
    dict of str to numpy.ndarray
        Target ratios, ``{name: [snapshot, region, threshold]}``.

    Raises
    ------
    ValueError
        An unknown policy or rule, an unsupported target or a threshold outside [0, 1].
    """
    if policy not in layout.POLICIES:
        raise ValueError(f"unknown policy {policy!r}; available: {', '.join(layout.POLICIES)}")
    targets_arr = np.union1d(layout.check_targets(targets), [1.0])
    thresholds = layout.check_threshold(thresholds)
    out = {n: np.empty((h.shape[0], h.shape[1], thresholds.size)) for n, h in hists.items()}
    if policy == "profile":
        for n, h in hists.items():
            out[n][:] = targets_arr[place(h, thresholds, targets_arr, rule)][None]
    elif policy == "global":
        names = list(hists)
        pooled = np.concatenate([hists[n] for n in names], axis=1) if names else np.zeros((1, 0, 5))
        k = targets_arr[place(pooled, thresholds, targets_arr, rule)]
        bounds = np.cumsum([0] + [hists[n].shape[1] for n in names])
        for n, lo, hi in zip(names, bounds[:-1], bounds[1:], strict=True):
            out[n][:] = k[None, lo:hi]
    else:
        for n, h in hists.items():
            for si in range(h.shape[0]):
                out[n][si] = targets_arr[place(h[si:si + 1], thresholds, targets_arr, rule)]
    return out


def placement(hists: Mapping[str, np.ndarray], weighted: Mapping[str, np.ndarray], names: Sequence[str],
              thresholds: Sequence[float], targets: Sequence[float], policy: str, rule: str
              ) -> dict[str, np.ndarray]:
    """What :func:`buddylib.analysis.summarize` needs per (snapshot, allocation, threshold) from one compressor's
    region histograms: device bytes and what overflows (entries, access weights, bytes).

    Parameters
    ----------
    hists, weighted : mapping of str to numpy.ndarray
        Entry counts and access-weighted counts per sector count, ``{name: [snapshot, region, 5]}``.
    names : sequence of str
        The allocations, in the order of the results' second axis.
    thresholds, targets, policy, rule
        As :func:`choose` takes them.

    Returns
    -------
    dict of str to numpy.ndarray
        ``[snapshot, allocation, threshold]`` arrays of ``device_bytes``, ``overflow_entries``,
        ``overflow_accesses``, ``buddy_bytes_used``, ``tiered_entries`` and ``tiered_buddy_bytes``, each summed
        over the regions at their chosen targets.

    Raises
    ------
    ValueError
        As :func:`choose` raises.
    """
    chosen = choose({n: hists[n] for n in names}, thresholds, targets, policy, rule)
    n_snap = next(iter(hists.values())).shape[0] if hists else 0
    out = {k: np.zeros((n_snap, len(names), len(thresholds)))
           for k in ("device_bytes", "overflow_entries", "overflow_accesses", "buddy_bytes_used", "tiered_entries",
                     "tiered_buddy_bytes")}
    targets_arr = np.union1d(layout.check_targets(targets), [1.0])
    share = layout.device_share_bytes(targets_arr)
    sector_bytes = SECTOR_BYTES * layout.SECTOR_VALUES.astype(float)
    for ai, n in enumerate(names):
        h, w = hists[n].astype(float), weighted[n].astype(float)
        k = np.searchsorted(targets_arr, chosen[n])  # (S, R, T): each region's target, as an index

        over = _overflow_table(h, targets_arr)
        tier = _overflow_table(h, targets_arr, which=layout.tiered)
        tables = {"device_bytes": h.sum(-1)[..., None] * share, "overflow_entries": over,
                  "overflow_accesses": _overflow_table(w, targets_arr),
                  "buddy_bytes_used": _overflow_table(h, targets_arr, sector_bytes) - over * share,
                  "tiered_entries": tier,
                  "tiered_buddy_bytes": _overflow_table(h, targets_arr, sector_bytes, layout.tiered) - tier * share}
        for name, table in tables.items():  # (S, R, K) at each region's target, summed: (S, T)
            out[name][:, ai] = np.take_along_axis(table, k, axis=2).sum(1)
    return out


def coarsen(hist: np.ndarray, factor: int) -> np.ndarray:
    """Histograms of regions ``factor`` times larger (regions add).

    Parameters
    ----------
    hist : numpy.ndarray
        Histograms per region, ``hist[snapshot, region, ...]``.
    factor : int
        How many regions make one larger region; the last may take fewer.

    Returns
    -------
    numpy.ndarray
        ``hist[snapshot, ceil(region / factor), ...]``, same dtype.
    """
    h = np.asarray(hist)
    n = -(-h.shape[1] // factor)
    pad = np.zeros((h.shape[0], n * factor - h.shape[1], *h.shape[2:]), h.dtype)
    return np.concatenate([h, pad], axis=1).reshape(h.shape[0], n, factor, *h.shape[2:]).sum(2)
