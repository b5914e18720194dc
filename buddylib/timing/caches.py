"""Compiled replacement-policy simulators: the metadata cache and Unified-Memory residency.

Both replay a sequence of block ids (metadata lines, pages) through an LRU structure in
numba, one pass, O(1) (page LRU) or O(ways) (set-associative) per access, so 10^8
accesses take seconds.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from buddylib.compressors.abc import readonly


@nb.njit(cache=True)
def _set_assoc_lru(lines, bounds, n_sets, ways):
    """Hits per segment (segment i ends before bounds[i]) of one continuous LRU replay."""
    tags = np.full((n_sets, ways), -1, dtype=np.int64)
    stamp = np.zeros((n_sets, ways), dtype=np.int64)
    hits = np.zeros(bounds.shape[0], dtype=np.int64)
    seg = 0
    for t in range(lines.shape[0]):
        while seg < bounds.shape[0] - 1 and t >= bounds[seg]:
            seg += 1
        line = lines[t]
        s = line % n_sets
        victim = 0
        oldest = stamp[s, 0]
        hit = False
        for w in range(ways):
            if tags[s, w] == line:
                stamp[s, w] = t + 1
                hits[seg] += 1
                hit = True
                break
            if stamp[s, w] < oldest:
                oldest = stamp[s, w]
                victim = w
        if not hit:
            tags[s, victim] = line
            stamp[s, victim] = t + 1
    return hits


def set_associative_hits_per_segment(lines: np.ndarray, bounds: np.ndarray, size_bytes: int, line_bytes: int,
                                     ways: int) -> np.ndarray:
    """Hits of an LRU set-associative cache replaying ``lines``, per segment ending at ``bounds``."""
    n_lines = size_bytes // line_bytes
    if n_lines < 1 or ways < 1 or n_lines % ways:
        raise ValueError(f"cache of {size_bytes} B with {line_bytes}-B lines cannot be {ways}-way associative")
    bounds = np.ascontiguousarray(bounds if len(bounds) else [0], dtype=np.int64)
    return _set_assoc_lru(readonly(np.ascontiguousarray(lines, dtype=np.int64)), readonly(bounds), n_lines // ways,
                          ways)


def set_associative_hits(lines: np.ndarray, size_bytes: int, line_bytes: int, ways: int) -> int:
    """Hits of an LRU set-associative cache of ``size_bytes`` replaying ``lines`` (block ids)."""
    lines = np.asarray(lines)
    return int(set_associative_hits_per_segment(lines, [lines.size], size_bytes, line_bytes, ways).sum())


@nb.njit(cache=True)
def _page_lru_faults(pages, n_pages, capacity, warm_start):
    """Faults of a fully associative LRU of ``capacity`` pages; counts only from ``warm_start``."""
    prev = np.full(n_pages, -1, dtype=np.int64)
    nxt = np.full(n_pages, -1, dtype=np.int64)
    resident = np.zeros(n_pages, dtype=np.bool_)
    head = -1  # most recently used
    tail = -1  # least recently used
    count = 0
    faults = 0
    for t in range(pages.shape[0]):
        p = pages[t]
        if resident[p]:
            if p != head:  # unlink and move to the front
                a, b = prev[p], nxt[p]
                if a != -1:
                    nxt[a] = b
                if b != -1:
                    prev[b] = a
                if p == tail:
                    tail = a
                prev[p] = -1
                nxt[p] = head
                prev[head] = p
                head = p
            continue
        if t >= warm_start:
            faults += 1
        if count == capacity:  # evict the least recently used page
            v = tail
            tail = prev[v]
            if tail != -1:
                nxt[tail] = -1
            else:
                head = -1
            resident[v] = False
            prev[v] = -1
            nxt[v] = -1
            count -= 1
        resident[p] = True
        prev[p] = -1
        nxt[p] = head
        if head != -1:
            prev[head] = p
        head = p
        if tail == -1:
            tail = p
        count += 1
    return faults


def page_faults(pages: np.ndarray, capacity_pages: int, warm_start: int = 0) -> int:
    """Page faults of LRU residency with ``capacity_pages``, counting accesses from ``warm_start``."""
    pages = np.ascontiguousarray(pages, dtype=np.int64)
    if capacity_pages < 1:
        raise ValueError(f"device capacity of {capacity_pages} pages: at least one page must fit")
    n = int(pages.max()) + 1 if pages.size else 1
    return int(_page_lru_faults(readonly(pages), n, int(capacity_pages), int(warm_start)))
