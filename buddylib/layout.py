"""The Buddy layout and placement policy (SPEC §3), on per-allocation sector histograms.

An allocation compressed to target ratio ``r`` keeps a device share of ``128 / r`` bytes
of every 128-byte entry; the rest of the entry has a fixed, pre-reserved slot in buddy
memory. An entry whose compressed sectors exceed the device share overflows to buddy
memory. Everything here depends on an allocation's entries only through how many of
them take 0, 1, 2, 3 or 4 sectors, so the layout works on that 5-bin **sector
histogram**: it is small, exact, and additive over chunks, snapshots and dask workers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from buddylib import paper
from buddylib.entries import ENTRY_BYTES, SECTOR_BYTES, SECTORS_PER_ENTRY

#: The paper's target compression ratios (device share 4, 3, 2, 1 sectors).
TARGETS: tuple[float, ...] = (1.0, 4 / 3, 2.0, 4.0)
#: Beyond the paper: 16-byte and 8-byte device shares.
EXTENDED_TARGETS: tuple[float, ...] = (*TARGETS, 8.0, 16.0)
#: Per-entry metadata: 4 bits (the sector count and flags), kept in device memory.
METADATA_BITS_PER_ENTRY = 4
#: Default buddy threshold, the largest overflow fraction the profiling policy accepts: the paper's 30%.
DEFAULT_THRESHOLD: float = paper.HEADLINE["threshold"]
POLICIES = ("profile", "global", "oracle")
SECTOR_VALUES = np.arange(SECTORS_PER_ENTRY + 1)


def check_targets(targets: Sequence[float] | float) -> np.ndarray:
    """Targets as a sorted float array.

    Parameters
    ----------
    targets : float or sequence of float
        Target compression ratios, each one of :data:`EXTENDED_TARGETS` (to within ``numpy.isclose``).

    Returns
    -------
    numpy.ndarray
        The targets, snapped to the supported values, without repeats, in increasing order.

    Raises
    ------
    ValueError
        No target, or an unsupported one (named).

    Examples
    --------
    >>> check_targets([4, 1.3333333, 4.0])
    array([1.33333333, 4.        ])
    """
    arr = np.atleast_1d(np.asarray(targets, dtype=float))
    if arr.size == 0:
        raise ValueError("targets: at least one target ratio is needed")
    for t in arr:
        if not np.any(np.isclose(t, EXTENDED_TARGETS)):
            raise ValueError(f"target {t:g} is not supported; choose from "
                             + ", ".join(f"{x:.4g}" for x in EXTENDED_TARGETS))
    return np.array(sorted({float(np.asarray(EXTENDED_TARGETS)[np.isclose(t, EXTENDED_TARGETS)][0])
                            for t in arr}))


def check_threshold(threshold: Sequence[float] | float) -> np.ndarray:
    """Buddy thresholds as a float array.

    Parameters
    ----------
    threshold : float or sequence of float
        Largest shares of an allocation's entries allowed to overflow.

    Returns
    -------
    numpy.ndarray
        The thresholds, at least one dimension, in the order given.

    Raises
    ------
    ValueError
        A threshold outside [0, 1] (NaN included).
    """
    arr = np.atleast_1d(np.asarray(threshold, dtype=float))
    bad = arr[~((arr >= 0) & (arr <= 1))]
    if bad.size:
        raise ValueError(f"buddy threshold {float(bad[0])!r} is outside [0, 1] (a fraction of entries)")
    return arr


def device_share_bytes(target: float | np.ndarray) -> np.ndarray:
    """Bytes of each entry kept in device memory at target ``r``: 128 / r.

    Parameters
    ----------
    target : float or numpy.ndarray
        Target compression ratios.

    Returns
    -------
    numpy.ndarray
        Device share in bytes, shaped like ``target``.
    """
    return ENTRY_BYTES / np.asarray(target, dtype=float)


def sector_histogram(sectors: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Entries (or access weights) per sector count 0..4.

    Parameters
    ----------
    sectors : numpy.ndarray
        Sectors per entry, any shape.
    weights : numpy.ndarray, optional
        One access weight per entry, to sum instead of counting entries.

    Returns
    -------
    numpy.ndarray
        5 values: int64 entry counts, or float sums of ``weights``.

    Raises
    ------
    ValueError
        A sector count outside 0..4.

    Examples
    --------
    >>> sector_histogram(np.array([0, 4, 4, 1]))
    array([1, 1, 0, 0, 2])
    """
    s = np.asarray(sectors)
    if s.size and int(s.max()) > SECTORS_PER_ENTRY:
        raise ValueError(f"sector counts must be 0..{SECTORS_PER_ENTRY}, found {int(s.max())}")
    h = np.bincount(s.reshape(-1), weights=None if weights is None else np.asarray(weights).reshape(-1),
                    minlength=SECTORS_PER_ENTRY + 1)
    return h if weights is not None else h.astype(np.int64)


def overflows(target: float | np.ndarray) -> np.ndarray:
    """Boolean mask over sector counts 0..4 (last axis) of those that overflow at ``target``.

    Parameters
    ----------
    target : float or numpy.ndarray
        Target compression ratios.

    Returns
    -------
    numpy.ndarray
        ``bool``, shape ``(*target.shape, 5)``.

    Examples
    --------
    >>> overflows(2.0)
    array([False, False, False,  True,  True])
    """
    share = device_share_bytes(target)
    return SECTOR_BYTES * SECTOR_VALUES > np.expand_dims(share, -1) + 1e-9


def overflow_fraction(hist: np.ndarray, target: float | np.ndarray) -> np.ndarray:
    """Share of entries that overflow at each target.

    Parameters
    ----------
    hist : numpy.ndarray
        Sector histograms, ``hist[..., 5]``: the 5 sector bins last.
    target : float or numpy.ndarray
        Target compression ratios; broadcasts against ``hist[..., 0]`` (add axes to sweep both).

    Returns
    -------
    numpy.ndarray
        Overflowing entries over all entries, 0 where a histogram is empty.

    Examples
    --------
    >>> overflow_fraction(np.array([2, 0, 1, 0, 1]), np.array([1.0, 2.0, 4.0]))
    array([0.  , 0.25, 0.5 ])
    """
    hist = np.asarray(hist, dtype=float)
    total = hist.sum(-1)
    over = overflow_entries(hist, target)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, over / np.where(total > 0, total, 1), 0.0)


def overflow_entries(hist: np.ndarray, target: float | np.ndarray) -> np.ndarray:
    """Entries (or access weights, for a weighted histogram) that overflow at each target.

    Parameters
    ----------
    hist : numpy.ndarray
        Sector histograms, ``hist[..., 5]``.
    target : float or numpy.ndarray
        Target compression ratios; broadcasts like :func:`overflow_fraction`.

    Returns
    -------
    numpy.ndarray
        Float sums over the overflowing bins.
    """
    return (np.asarray(hist, dtype=float) * overflows(target)).sum(-1)


def overflow_bytes(hist: np.ndarray, target: float | np.ndarray) -> np.ndarray:
    """Bytes that live in buddy memory: each overflowing entry's sectors beyond the share.

    Parameters
    ----------
    hist : numpy.ndarray
        Sector histograms, ``hist[..., 5]``.
    target : float or numpy.ndarray
        Target compression ratios; broadcasts like :func:`overflow_fraction`.

    Returns
    -------
    numpy.ndarray
        Bytes actually stored in buddy memory (not the slots reserved there: :func:`buddy_bytes`).
    """
    share = device_share_bytes(target)
    excess = np.maximum(SECTOR_BYTES * SECTOR_VALUES - np.expand_dims(share, -1), 0)
    return (np.asarray(hist, dtype=float) * excess).sum(-1)


def tiered(target: float | np.ndarray) -> np.ndarray:
    """Boolean mask over sector counts 0..4 (last axis) of the entries that keep more of their code in buddy
    memory than in device memory at ``target``.

    That is buddy memory used as a tier, not compression: the 16x target keeps 8 bytes of an entry on the
    device; one that does not compress keeps 120 in buddy memory.

    Parameters
    ----------
    target : float or numpy.ndarray
        Target compression ratios.

    Returns
    -------
    numpy.ndarray
        ``bool``, shape ``(*target.shape, 5)``.
    """
    share = device_share_bytes(target)
    return SECTOR_BYTES * SECTOR_VALUES > 2 * np.expand_dims(share, -1) + 1e-9


def tiered_entries(hist: np.ndarray, target: float | np.ndarray) -> np.ndarray:
    """Entries :func:`tiered` at each target.

    Parameters
    ----------
    hist : numpy.ndarray
        Sector histograms, ``hist[..., 5]``.
    target : float or numpy.ndarray
        Target compression ratios; broadcasts like :func:`overflow_fraction`.

    Returns
    -------
    numpy.ndarray
        Float entry counts (access weights, for a weighted histogram).
    """
    return (np.asarray(hist, dtype=float) * tiered(target)).sum(-1)


def tiered_buddy_bytes(hist: np.ndarray, target: float | np.ndarray) -> np.ndarray:
    """Bytes the :func:`tiered` entries keep in buddy memory.

    Parameters
    ----------
    hist : numpy.ndarray
        Sector histograms, ``hist[..., 5]``.
    target : float or numpy.ndarray
        Target compression ratios; broadcasts like :func:`overflow_fraction`.

    Returns
    -------
    numpy.ndarray
        Their sectors' bytes beyond the device share, summed.
    """
    share = device_share_bytes(target)
    excess = np.maximum(SECTOR_BYTES * SECTOR_VALUES - np.expand_dims(share, -1), 0) * tiered(target)
    return (np.asarray(hist, dtype=float) * excess).sum(-1)


def choose_target(hist: np.ndarray, threshold: float, targets: Sequence[float] = TARGETS) -> np.ndarray:
    """The most aggressive target whose overflow fraction stays <= ``threshold``.

    Target 1 (no compression) always qualifies and is always a candidate, listed in ``targets`` or not, so an
    allocation that meets no other target stays uncompressed rather than overflowing beyond the threshold.

    Parameters
    ----------
    hist : numpy.ndarray
        Sector histograms, ``hist[..., n_profiles, 5]``: the condition must hold in every profiled histogram
        (snapshots), as the profiling policy demands.
    threshold : float
        Buddy threshold, in [0, 1].
    targets : sequence of float
        Candidate target ratios (:func:`check_targets`).

    Returns
    -------
    numpy.ndarray
        The chosen target, shape ``hist.shape[:-2]``.

    Raises
    ------
    ValueError
        An unsupported target or a threshold outside [0, 1].

    Examples
    --------
    >>> float(choose_target(np.array([[8, 0, 2, 0, 0]]), 0.3))  # 2 of 10 entries overflow at 4x
    4.0
    >>> float(choose_target(np.array([[8, 0, 2, 0, 0], [6, 0, 3, 0, 1]]), 0.3))  # 4 of 10 in the second
    2.0
    """
    targets = np.union1d(check_targets(targets), [1.0])
    threshold = float(check_threshold(threshold)[0])
    h = np.asarray(hist)
    frac = overflow_fraction(h[..., None, :], targets)  # (..., n_profiles, targets)
    worst = frac.max(axis=-2)  # (..., targets)
    ok = worst <= threshold + 1e-12
    ok[..., np.isclose(targets, 1.0)] = True
    idx = np.where(ok, np.arange(targets.size), -1).max(axis=-1)
    return targets[idx]


def policy_targets(hist: np.ndarray, thresholds: np.ndarray, targets: Sequence[float], policy: str) -> np.ndarray:
    """The target ``policy`` chooses for each (snapshot, allocation, compressor, threshold).

    Parameters
    ----------
    hist : numpy.ndarray
        Sector histograms, ``hist[snapshot, allocation, compressor, 5]``.
    thresholds : numpy.ndarray
        Buddy thresholds.
    targets : sequence of float
        Candidate target ratios (target 1 always among them: :func:`choose_target`).
    policy : {"profile", "global", "oracle"}
        ``profile``: per allocation, one target that holds in every snapshot; ``global``: one target for all
        allocations, on their summed histogram; ``oracle``: per allocation and snapshot, knowing that snapshot
        (an upper bound).

    Returns
    -------
    numpy.ndarray
        Chosen targets, ``[snapshot, allocation, compressor, threshold]``.

    Raises
    ------
    ValueError
        An unknown policy, an unsupported target or a threshold outside [0, 1].
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; available: {', '.join(POLICIES)}")
    h = np.asarray(hist)
    chosen = np.empty((*h.shape[:3], len(thresholds)))
    for ti, t in enumerate(thresholds):
        if policy == "profile":  # per allocation, over all snapshots
            chosen[..., ti] = np.broadcast_to(choose_target(np.moveaxis(h, 0, 2), t, targets)[None], h.shape[:3])
        elif policy == "global":  # one target for all allocations, on their total
            g = choose_target(np.moveaxis(h.sum(1), 0, 1), t, targets)  # (C,)
            chosen[..., ti] = np.broadcast_to(g[None, None, :], h.shape[:3])
        else:  # oracle: each snapshot on its own
            chosen[..., ti] = choose_target(h[..., None, :], t, targets)
    return chosen


def device_bytes(n_entries: np.ndarray | int, target: np.ndarray | float) -> np.ndarray:
    """Device bytes reserved for ``n_entries`` at ``target``: E x 128 / r.

    Parameters
    ----------
    n_entries : int or numpy.ndarray
        Entries of the allocations.
    target : float or numpy.ndarray
        Their target ratios; broadcasts against ``n_entries``.

    Returns
    -------
    numpy.ndarray
        Bytes, as floats.
    """
    return np.asarray(n_entries, dtype=float) * device_share_bytes(target)


def buddy_bytes(n_entries: np.ndarray | int, target: np.ndarray | float) -> np.ndarray:
    """Buddy-memory bytes reserved for ``n_entries`` at ``target``: E x (128 - 128 / r).

    Parameters
    ----------
    n_entries : int or numpy.ndarray
        Entries of the allocations.
    target : float or numpy.ndarray
        Their target ratios; broadcasts against ``n_entries``.

    Returns
    -------
    numpy.ndarray
        Bytes, as floats.
    """
    return np.asarray(n_entries, dtype=float) * (ENTRY_BYTES - device_share_bytes(target))


def metadata_bytes(n_entries: np.ndarray | int) -> np.ndarray:
    """Device bytes of per-entry metadata: 4 bits per entry (0.39% of capacity).

    Parameters
    ----------
    n_entries : int or numpy.ndarray
        Entries of the allocations.

    Returns
    -------
    numpy.ndarray
        Bytes, as floats.
    """
    return np.asarray(n_entries, dtype=float) * METADATA_BITS_PER_ENTRY / 8
