"""Compiled replacement-policy simulators: the metadata cache and Unified-Memory residency.

Both replay a sequence of block ids (metadata lines, pages) through an LRU structure in
numba, one pass, O(1) (page LRU) or O(ways) (set-associative) per access, so 10^8
accesses take seconds. :func:`merge_order` puts a kernel's accesses in the order they replay.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba as nb
import numpy as np

from buddylib.compressors.abc import readonly


@nb.njit(cache=True, nogil=True)
def _scaled(x, mul, div, shift):
    """``x * mul // div`` for ``x >= 0``, by a shift where ``div`` is a power of two."""
    return (x * mul) >> shift if shift >= 0 else (x * mul) // div


@nb.njit(cache=True, nogil=True)
def _lru_span(which, entry, first, per_line, shift, lo, hi, tags, stamp, mru, clock):
    """Reads ``lo..hi`` of the lines ``first[which[t]] + entry[t] // per_line`` from an LRU set-associative cache
    (``tags``/``stamp`` per set and way, each set's most recently used line ``mru``, the time ``clock[0]``),
    continuing from its state: the hits."""
    n_sets, ways = tags.shape
    mask = n_sets - 1 if n_sets & (n_sets - 1) == 0 else -1
    hits = 0
    for t in range(lo, hi):
        clock[0] += 1
        line = first[which[t]] + _scaled(entry[t], 1, per_line, shift)
        s = line & mask if mask >= 0 else line % n_sets
        if mru[s] == line:  # its set's last line again: a hit that leaves the set's LRU order as it is
            hits += 1
            continue
        mru[s] = line
        victim = 0
        oldest = stamp[s, 0]
        hit = False
        for w in range(ways):
            if tags[s, w] == line:
                stamp[s, w] = clock[0]
                hits += 1
                hit = True
                break
            if stamp[s, w] < oldest:
                oldest = stamp[s, w]
                victim = w
        if not hit:
            tags[s, victim] = line
            stamp[s, victim] = clock[0]
    return hits


@nb.njit(cache=True)
def _set_assoc_lru(which, entry, first, per_line, shift, bounds, n_sets, ways, replays):
    """Hits per segment (segment i ends before bounds[i]) of the last of ``replays`` continuous LRU replays of
    the lines ``first[which[t]] + entry[t] // per_line``."""
    tags = np.full((n_sets, ways), -1, dtype=np.int64)
    stamp = np.zeros((n_sets, ways), dtype=np.int64)
    mru = np.full(n_sets, -1, dtype=np.int64)
    clock = np.zeros(1, dtype=np.int64)
    hits = np.zeros(bounds.shape[0], dtype=np.int64)
    n = entry.shape[0]
    for r in range(replays):
        lo = 0
        for seg in range(bounds.shape[0]):
            hi = n if seg == bounds.shape[0] - 1 else max(lo, min(n, bounds[seg]))
            got = _lru_span(which, entry, first, per_line, shift, lo, hi, tags, stamp, mru, clock)
            if r == replays - 1:
                hits[seg] += got
            lo = hi
    return hits


def _shift(div: int) -> int:
    """log2(div) where div is a power of two, else -1."""
    return div.bit_length() - 1 if div > 0 and div & (div - 1) == 0 else -1


def _geometry(size_bytes: int, line_bytes: int, ways: int) -> int:
    n_lines = size_bytes // line_bytes
    if n_lines < 1 or ways < 1 or n_lines % ways:
        raise ValueError(f"cache of {size_bytes} B with {line_bytes}-B lines cannot be {ways}-way associative")
    return n_lines // ways


def metadata_hits(which: np.ndarray, entry: np.ndarray, first: np.ndarray, per_line: int, bounds: np.ndarray,
                  size_bytes: int, line_bytes: int, ways: int, replays: int = 2) -> np.ndarray:
    """Hits per segment of an LRU set-associative cache replaying the lines ``first[which] + entry // per_line``
    ``replays`` times, counted in the last replay; the lines are computed as the replay goes, never stored (10^8
    accesses or more).

    Parameters
    ----------
    which, entry : numpy.ndarray
        Per access, its allocation's position and its entry id.
    first : numpy.ndarray
        Each allocation's first line.
    per_line : int
        Entries per line.
    bounds : numpy.ndarray
        Where each segment (a kernel's accesses) ends.
    size_bytes, line_bytes, ways : int
        The cache's geometry.
    replays : int
        Continuous replays; the earlier ones warm the cache.

    Returns
    -------
    numpy.ndarray
        Hits per segment (int64).

    Raises
    ------
    ValueError
        A geometry that does not divide into sets of ``ways`` lines, or ``per_line`` or ``replays`` below 1.
    """
    n_sets = _geometry(size_bytes, line_bytes, ways)
    if per_line < 1 or replays < 1:
        raise ValueError(f"{per_line} entries per metadata line, {replays} replays: each must be at least 1")
    bounds = np.ascontiguousarray(bounds if len(bounds) else [0], dtype=np.int64)
    return _set_assoc_lru(readonly(np.ascontiguousarray(which, dtype=np.int32)),
                          readonly(np.ascontiguousarray(entry, dtype=np.int64)),
                          readonly(np.ascontiguousarray(first, dtype=np.int64)), int(per_line), _shift(int(per_line)),
                          readonly(bounds), n_sets, ways, int(replays))


def set_associative_hits_per_segment(lines: np.ndarray, bounds: np.ndarray, size_bytes: int, line_bytes: int,
                                     ways: int) -> np.ndarray:
    """Hits of an LRU set-associative cache replaying ``lines``, per segment ending at ``bounds``.

    Parameters
    ----------
    lines : numpy.ndarray
        Block ids, in access order.
    bounds : numpy.ndarray
        Where each segment ends.
    size_bytes, line_bytes, ways : int
        The cache's geometry.

    Returns
    -------
    numpy.ndarray
        Hits per segment (int64).
    """
    lines = np.asarray(lines)
    return metadata_hits(np.zeros(lines.size, np.int32), lines, np.zeros(1, np.int64), 1, bounds, size_bytes,
                         line_bytes, ways, replays=1)


def set_associative_hits(lines: np.ndarray, size_bytes: int, line_bytes: int, ways: int) -> int:
    """Hits of an LRU set-associative cache of ``size_bytes`` replaying ``lines`` (block ids).

    Parameters
    ----------
    lines : numpy.ndarray
        Block ids, in access order.
    size_bytes, line_bytes, ways : int
        The cache's geometry.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        A geometry that does not divide into sets of ``ways`` lines.

    Examples
    --------
    >>> set_associative_hits([0, 1, 0, 2, 0], size_bytes=64, line_bytes=32, ways=2)
    2
    """
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
    """Page faults of LRU residency with ``capacity_pages``, counting accesses from ``warm_start``.

    Parameters
    ----------
    pages : numpy.ndarray
        Page ids, in access order.
    capacity_pages : int
        Pages device memory holds.
    warm_start : int
        Index of the first access counted (the earlier ones warm the residency).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        ``capacity_pages`` below 1.

    Examples
    --------
    >>> page_faults([0, 1, 2, 0, 1, 2], capacity_pages=2)
    6
    >>> page_faults([0, 1, 2, 0, 1, 2], capacity_pages=3, warm_start=3)
    0
    """
    pages = np.ascontiguousarray(pages, dtype=np.int64)
    if capacity_pages < 1:
        raise ValueError(f"device capacity of {capacity_pages} pages: at least one page must fit")
    n = int(pages.max()) + 1 if pages.size else 1
    return int(_page_lru_faults(readonly(pages), n, int(capacity_pages), int(warm_start)))


@nb.njit(cache=True, nogil=True)
def _merge_part(entries, sizes, cols, start, pos, key, which, entry):
    """The next ``which.size`` accesses of the merge, continuing from its state: each stream's start in
    ``entries``, accesses taken ``pos`` and the time of its next one ``key``."""
    k = sizes.shape[0]
    for t in range(which.shape[0]):
        best = 0
        for s in range(1, k):
            if key[s] < key[best]:  # strict: a tie goes to the earlier stream
                best = s
        which[t] = cols[best]
        entry[t] = entries[start[best] + pos[best]]
        pos[best] += 1
        key[best] = (pos[best] + 0.5) / sizes[best] if pos[best] < sizes[best] else np.inf


def _merge_state(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A merge's state before its first access: each stream's start, accesses taken, the time of its next."""
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    key = np.full(sizes.size, np.inf)
    key[sizes > 0] = 0.5 / sizes[sizes > 0]
    return start, np.zeros(sizes.size, np.int64), key


def merge(entries: np.ndarray, sizes: np.ndarray, cols: np.ndarray, which: np.ndarray, entry: np.ndarray) -> None:
    """Streams running side by side, in the order their accesses happen: the i-th access of a stream of n at time
    (i + 1/2) / n, ties in stream order (a stable sort by that time, by a k-way merge: O(accesses x streams)).

    Parameters
    ----------
    entries : numpy.ndarray
        The streams concatenated.
    sizes : numpy.ndarray
        Accesses per stream.
    cols : numpy.ndarray
        Each stream's allocation.
    which, entry : numpy.ndarray
        Outputs, one per access, written in place: its allocation (int32) and its entry (int64).

    Raises
    ------
    ValueError
        Sizes that are negative or do not add up to the accesses, outputs of another length or dtype.
    """
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    if (sizes < 0).any() or sizes.sum() != entries.size or which.size != entries.size or entry.size != entries.size:
        raise ValueError(f"{entries.size} accesses, streams of {sizes.tolist()}, outputs of {which.size} and "
                         f"{entry.size}: they must agree")
    if which.dtype != np.int32 or entry.dtype != np.int64:
        raise ValueError(f"outputs of {which.dtype} and {entry.dtype}: int32 and int64 expected")
    _merge_part(readonly(np.ascontiguousarray(entries, dtype=np.int64)), readonly(sizes),
                readonly(np.ascontiguousarray(cols, dtype=np.int32)), *_merge_state(sizes), which, entry)


class MergedStreams:
    """:func:`merge` a part at a time: a kernel's streams, concatenated once (each stream's array is released as it
    is copied), give their accesses in order ``n`` at a time, so a walk holds no kernel's order whole.

    Parameters
    ----------
    streams : list of numpy.ndarray
        Each stream's entries; emptied as they are copied.
    cols : sequence of int
        Each stream's allocation.
    """

    def __init__(self, streams: list[np.ndarray], cols: Sequence[int]) -> None:
        self.sizes = np.array([s.size for s in streams], dtype=np.int64)
        self.entries = np.empty(int(self.sizes.sum()), np.int64)
        at = 0
        for i, s in enumerate(streams):
            self.entries[at:at + s.size] = s
            at += s.size
            streams[i] = np.empty(0, np.int64)
        self.entries = readonly(self.entries)
        self.cols = readonly(np.asarray(cols, dtype=np.int32))
        self.state = _merge_state(self.sizes)
        self.left = int(self.sizes.sum())

    def next(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The next (up to) ``n`` accesses: their allocations' positions (int32) and entries (int64)."""
        n = min(int(n), self.left)
        which, entry = np.empty(n, np.int32), np.empty(n, np.int64)
        _merge_part(self.entries, readonly(self.sizes), self.cols, *self.state, which, entry)
        self.left -= n
        return which, entry


def merge_order(sizes: np.ndarray) -> np.ndarray:
    """The order in which streams of ``sizes`` accesses happen side by side (:func:`merge`).

    Parameters
    ----------
    sizes : numpy.ndarray
        Accesses per stream.

    Returns
    -------
    numpy.ndarray
        Indices into the streams' concatenation (int64).

    Examples
    --------
    >>> merge_order([2, 1]).tolist()
    [0, 2, 1]
    """
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    total = int(sizes.sum())
    order = np.empty(total, np.int64)
    merge(np.arange(total, dtype=np.int64), sizes, np.zeros(sizes.size, np.int32), np.empty(total, np.int32), order)
    return order


@nb.njit(cache=True, nogil=True)
def _gather(rows, n, row, n_items, row_bytes, entry_bytes):
    """Rows out of range (their count and the first), else the entries rows ``0..n`` span, in order, a run of one
    entry once; two passes, counting then writing, so no temporary is the size of the rows."""
    bad, first_bad = 0, np.int64(0)
    for i in range(rows.shape[0]):
        r = np.int64(rows[i])
        if r < 0 or r * row >= n_items:
            if bad == 0:
                first_bad = r
            bad += 1
    total = 0
    out = np.empty(0, np.int64)
    if bad:
        return out, bad, first_bad
    for fill in (False, True):
        out = np.empty(total if fill else 0, np.int64)
        total, last = 0, np.int64(-1)
        for i in range(n):
            r = np.int64(rows[i])
            for e in range(r * row_bytes // entry_bytes, ((r + 1) * row_bytes - 1) // entry_bytes + 1):
                if e != last:
                    if fill:
                        out[total] = e
                    total += 1
                    last = e
    return out, bad, first_bad


def gather_entries(rows: np.ndarray, fraction: float, row: int, n_items: int, itemsize: int,
                   entry_bytes: int) -> np.ndarray:
    """The entries a gather through the index ``rows`` touches: its first ``fraction`` of rows, each ``row``
    elements of ``itemsize`` bytes (one entry or more, or straddling two), in order, a run of one entry once.

    Parameters
    ----------
    rows : numpy.ndarray
        The index array (any integer dtype, any shape: read flat).
    fraction : float
        The share of the rows gathered (at least one).
    row, n_items, itemsize, entry_bytes : int
        Elements per row, elements in the allocation, bytes per element and per entry.

    Returns
    -------
    numpy.ndarray
        Entry ids (int64).

    Raises
    ------
    ValueError
        Rows outside the allocation (their count, and the first).

    Examples
    --------
    Rows of 48 bytes: row 2 straddles entries 0 and 1; a repeat of the entry just touched is not a new access.

    >>> gather_entries(np.array([0, 2, 2, 5]), 1.0, 12, 64, 4, 128).tolist()
    [0, 1, 0, 1, 2]
    """
    flat = np.ascontiguousarray(np.asarray(rows).reshape(-1))
    n = min(flat.size, max(1, round(fraction * flat.size)))
    out, bad, first_bad = _gather(readonly(flat), n, int(row), int(n_items), int(row) * int(itemsize),
                                  int(entry_bytes))
    if bad:
        raise ValueError(f"{bad} of {flat.size} indices (e.g. {first_bad}) outside the {n_items // row} rows of "
                         f"{row} element(s)")
    return out


@nb.njit(cache=True, nogil=True)
def _page_sequence(which, entry, first, mul, div, shift, bounds):
    """Two passes, counting then writing: the result is far shorter than the accesses (10^8 or more)."""
    n = 0
    for fill in (False, True):
        out = np.empty(n if fill else 0, np.int64)
        n = 0
        last = -1
        start = 0
        for k in range(bounds.shape[0]):
            for t in range(start, bounds[k]):
                page = first[which[t]] + _scaled(entry[t], mul, div, shift)
                if t == start or page != last:
                    if fill:
                        out[n] = page
                    n += 1
                    last = page
            start = bounds[k]
    return out


def page_sequence(which: np.ndarray, entry: np.ndarray, bounds: np.ndarray, first: np.ndarray, entry_bytes: int,
                  page_bytes: int) -> np.ndarray:
    """The pages ``first[which] + entry * entry_bytes // page_bytes`` each kernel touches, in order, a run of
    accesses to one page counted once (it migrates once).

    Parameters
    ----------
    which, entry : numpy.ndarray
        Per access, its allocation's position and its entry id.
    bounds : numpy.ndarray
        Where each kernel's accesses end (a run does not continue across kernels).
    first : numpy.ndarray
        Each allocation's first page.
    entry_bytes, page_bytes : int
        Sizes of an entry and of a page.

    Returns
    -------
    numpy.ndarray
        Page ids (int64).

    Raises
    ------
    ValueError
        ``entry_bytes`` or ``page_bytes`` below 1.
    """
    if entry_bytes < 1 or page_bytes < 1:
        raise ValueError(f"{entry_bytes}-B entries, {page_bytes}-B pages: each must be at least one byte")
    return _page_sequence(readonly(np.ascontiguousarray(which, dtype=np.int32)),
                          readonly(np.ascontiguousarray(entry, dtype=np.int64)),
                          readonly(np.ascontiguousarray(first, dtype=np.int64)), int(entry_bytes), int(page_bytes),
                          _shift(int(page_bytes)), readonly(np.ascontiguousarray(bounds, dtype=np.int64)))


# ---------------------------------------------------------------------------------------
# the same replays in parts, their state kept between them: an iteration walked a kernel at a time, never held whole
# ---------------------------------------------------------------------------------------


class LineLRU:
    """An LRU set-associative cache (:func:`metadata_hits`' geometry and policy) fed its lines in parts.

    Parameters
    ----------
    size_bytes, line_bytes, ways : int
        The cache's geometry.

    Raises
    ------
    ValueError
        A geometry that does not divide into sets of ``ways`` lines.
    """

    def __init__(self, size_bytes: int, line_bytes: int, ways: int) -> None:
        n_sets = _geometry(size_bytes, line_bytes, ways)
        self.tags = np.full((n_sets, ways), -1, dtype=np.int64)
        self.stamp = np.zeros((n_sets, ways), dtype=np.int64)
        self.mru = np.full(n_sets, -1, dtype=np.int64)
        self.clock = np.zeros(1, dtype=np.int64)

    def run(self, lines: np.ndarray) -> int:
        """Hits among ``lines``, read after every line fed before.

        Parameters
        ----------
        lines : numpy.ndarray
            Block ids, in access order.

        Returns
        -------
        int
        """
        lines = readonly(np.ascontiguousarray(lines, dtype=np.int64))
        return int(_lru_span(readonly(np.zeros(lines.size, np.int32)), lines, readonly(np.zeros(1, np.int64)), 1, 0, 0,
                             lines.size, self.tags, self.stamp, self.mru, self.clock))


@nb.njit(cache=True, nogil=True)
def _fenwick_add(tree, i, v):
    while i < tree.shape[0]:
        tree[i] += v
        i += i & -i


@nb.njit(cache=True, nogil=True)
def _fenwick_sum(tree, i):
    total = 0
    while i > 0:
        total += tree[i]
        i -= i & -i
    return total


@nb.njit(cache=True, nogil=True)
def _renumber(latest, tree, now):
    """Number the pages' latest times 0.. in time order (at most one per page) and mark them in a fresh tree:
    the distances depend only on that order."""
    live = np.flatnonzero(latest >= 0)
    order = live[np.argsort(latest[live])]
    tree[:] = 0
    for i in range(order.shape[0]):
        latest[order[i]] = i
        _fenwick_add(tree, i + 1, 1)
    now[0] = order.shape[0]


@nb.njit(cache=True, nogil=True)
def _stack_part(pages, latest, tree, now, hist):
    """LRU stack distances of ``pages`` (other pages touched since the page's last access; ``hist``'s last bin for
    a first touch), counted into ``hist``; the state: each page's latest time (-1: never) and a Fenwick tree over a
    window of times marking the latest ones, renumbered when the window fills."""
    width = tree.shape[0] - 1
    for t in range(pages.shape[0]):
        if now[0] == width:
            _renumber(latest, tree, now)
        p = pages[t]
        prev = latest[p]
        if prev >= 0:
            hist[_fenwick_sum(tree, now[0]) - _fenwick_sum(tree, prev + 1)] += 1
            _fenwick_add(tree, prev + 1, -1)
        else:
            hist[hist.shape[0] - 1] += 1
        _fenwick_add(tree, now[0] + 1, 1)
        latest[p] = now[0]
        now[0] += 1


@nb.njit(cache=True, nogil=True)
def _stack_warm(pages, latest, now):
    """Accesses that only warm the stack: each page's latest time is all a later distance needs (the tree is
    rebuilt from them, :func:`_renumber`, before the next counted access)."""
    for t in range(pages.shape[0]):
        latest[pages[t]] = now[0]
        now[0] += 1


class StackDistances:
    """LRU stack distances of a page sequence fed in parts: accesses per distance (``hist``), the last bin for
    first touches; an LRU holding ``C`` pages faults on exactly those at distance ``C`` or more.

    Parameters
    ----------
    n_pages : int
        Page ids run from 0 to ``n_pages - 1``.
    """

    def __init__(self, n_pages: int) -> None:
        self.latest = np.full(max(1, n_pages), -1, dtype=np.int64)
        self.tree = np.zeros(2 * max(1, n_pages) + 2, dtype=np.int64)
        self.now = np.zeros(1, dtype=np.int64)
        self.hist = np.zeros(max(1, n_pages) + 1, dtype=np.int64)
        self._tree_current = True  # False after warm-only accesses: the tree is rebuilt before the next counted

    def run(self, pages: np.ndarray, count: bool = True) -> None:
        """Feed the next accesses.

        Parameters
        ----------
        pages : numpy.ndarray
            Page ids, in access order.
        count : bool
            Whether their distances are counted into ``hist`` (False: they only warm the stack).
        """
        pages = readonly(np.ascontiguousarray(pages, dtype=np.int64))
        if not count:
            _stack_warm(pages, self.latest, self.now)
            self._tree_current = False
            return
        if not self._tree_current:
            _renumber(self.latest, self.tree, self.now)
            self._tree_current = True
        _stack_part(pages, self.latest, self.tree, self.now, self.hist)
