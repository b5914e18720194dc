"""One iteration's accesses in a form the size of a committed summary (:class:`~buddylib.timing.accesses.Accesses`):
what the timing
model needs to replay an iteration at a scale whose per-entry sectors are not kept.

The per-entry replay (:class:`~buddylib.timing.model.Workset`) walks every entry each kernel touches. What of
that walk reaches a slowdown is kept here, at a size that grows with the footprint / 4 KiB and not with the
accesses:

* **the sectors touched**, per access of the profile: the entries it touches (with multiplicity, x its passes)
  counted by their sector count in each aligned 4 KiB region of the last snapshot (``(regions, 5)``), for the
  compressor that drives the layout. A region's device share decides its entries' traffic, so any coarser
  region's traffic is a sum over its 4 KiB parts, and one target per allocation sums them all. An access that
  streams its whole allocation keeps no array (its counts are the snapshot's own region histogram, ``whole``);
  one that streams a prefix keeps its length and the counts of its last, partial region (``prefix``); the
  others (strided, random, gathers) keep their counts (``counts``), shared by accesses that touch the same
  entries (a gather through one index at one fraction, from several kernels).
* **the metadata cache's misses** per kernel at each cache size kept (:data:`METADATA_CACHES`; the
  default associativity and line): a replay reads one metadata line per entry access whatever the entry's
  sectors and target, so its misses follow from the access order alone.
* **Unified Memory**: for each page size kept (:data:`UM_PAGES`), the second iteration's page accesses per
  LRU stack distance (other pages touched since the page's previous access). LRU holding ``C`` pages faults
  on exactly the accesses at distance ``C`` or more, so the faults are exact at any capacity.

:meth:`Accesses.from_workset` measures it from a run; :meth:`Accesses.encode` / :func:`decode` write and read it
(the arrays as one zstd-compressed blob beside the summary, :mod:`buddylib.studies.summaries`). The timing model
(:func:`~buddylib.timing.model.sweep`, :func:`~buddylib.timing.model.um_slowdown`) takes an ``Accesses`` wherever
it takes a ``Workset``; the two give the same slowdown (``tests/test_accesses.py``; the same sums, added in
another order).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
import zstandard

from buddylib import layout, regions
from buddylib.entries import ENTRY_BYTES, SECTOR_BYTES, SECTORS_PER_ENTRY
from buddylib.snapshot import Snapshot
from buddylib.timing import caches
from buddylib.timing.model import Params, Workset

#: The granularity the sectors touched are kept at: the finest region (a coarser one adds them).
REGION_BYTES = regions.MIN_REGION_BYTES
#: Metadata-cache sizes whose misses are kept (notebook 05's sweep; the default, 64 KiB, among them).
METADATA_CACHES = (4 << 10, 16 << 10, 64 << 10, 256 << 10)
#: Unified-Memory page sizes whose stack distances are kept (notebook 05's UM comparison).
UM_PAGES = (4 << 10, 64 << 10, 2 << 20)
#: Marks an encoded block, and its layout.
FORMAT = "buddylib-accesses-1"
_BINS = SECTORS_PER_ENTRY + 1


@dataclass
class Accesses:
    """What the timing model replays of one iteration, per 4 KiB region (the module's docstring says what).

    Parameters
    ----------
    name, compressor : str
        The workload, and the compressor that drives the layout.
    snapshots : list of Snapshot
        The run's snapshots (allocations without data).
    counts : xarray.DataArray
        Their sector histograms, ``(snapshot, allocation, compressor, sectors)``.
    region_counts : dict of str to numpy.ndarray
        ``{name: [snapshot, region, 5]}`` per 4 KiB region; with ``counts``, they choose the targets, as for the
        run itself.
    flops : numpy.ndarray
        Per kernel.
    shapes : list of (str, numpy.ndarray)
        The entries the accesses touch, ``(allocation, [region, 5])``.
    kernel, shape, passes : numpy.ndarray
        The terms: which kernel touches which shape how often.
    n_accesses : int
        Entry accesses in the iteration.
    _misses : dict
        Metadata-cache misses per kernel, by ``(cache bytes, ways, line bytes)``.
    distances : dict of int to numpy.ndarray
        Unified Memory's accesses per LRU stack distance, by page size.
    """

    name: str
    compressor: str
    snapshots: list[Snapshot]
    counts: xr.DataArray
    region_counts: dict[str, np.ndarray]
    flops: np.ndarray
    shapes: list[tuple[str, np.ndarray]]
    kernel: np.ndarray
    shape: np.ndarray
    passes: np.ndarray
    n_accesses: int
    _misses: dict = field(default_factory=dict)
    distances: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def last(self) -> Snapshot:
        """The run's last snapshot (the one the timing model replays)."""
        return self.snapshots[-1]

    # -----------------------------------------------------------------------------------
    # measured from a run
    # -----------------------------------------------------------------------------------

    @classmethod
    def from_workset(cls, ws: Workset, params: Params | None = None) -> Accesses:
        """Measure it from a run's per-entry sectors and access streams.

        Parameters
        ----------
        ws : Workset
            The run (:class:`~buddylib.timing.model.Workset`).
        params : Params, optional
            The metadata cache's associativity and line (its sizes are :data:`METADATA_CACHES`).

        Returns
        -------
        Accesses
        """
        from buddylib.analysis import region_histograms, sector_histograms

        params = params or Params()
        per_region = {n: h[:, :, 0, 0].astype(np.int64) for n, h in
                      region_histograms(ws.snapshots, [ws.compressor], REGION_BYTES, progress=False).items()}
        counts = sector_histograms(ws.snapshots, [ws.compressor], progress=False).sel(weighting="entries",
                                                                                       drop=True)
        walk = _walk(ws, params)
        misses = {(c, params.metadata_ways, params.metadata_line_bytes): (walk["accesses"] - h).astype(float)
                  for c, h in walk["hits"].items()}
        return cls(ws.name, ws.compressor, list(ws.snapshots), counts, per_region,
                   np.array([k.flops for k in ws.profile.kernels], float), walk["shapes"], walk["kernel"],
                   walk["shape"], walk["passes"], int(walk["accesses"].sum()), misses, walk["distances"])

    # -----------------------------------------------------------------------------------
    # what the timing model asks of it (as of a Workset)
    # -----------------------------------------------------------------------------------

    def traffic(self, targets: Mapping[str, Any], region: int | None = None) -> dict[str, np.ndarray]:
        """:func:`buddylib.timing.model.traffic` from the kept counts.

        Parameters
        ----------
        targets : mapping of str to float or array
            Per allocation, its target, or with ``region`` one per region.
        region : int, optional
            Region bytes, a multiple of :data:`REGION_BYTES`.

        Returns
        -------
        dict of str to numpy.ndarray
            ``baseline_bytes``, ``device_bytes``, ``link_bytes`` and ``flops``, per kernel.
        """
        size = (SECTOR_BYTES * layout.SECTOR_VALUES).astype(float)
        n_shapes = len(self.shapes)
        dev, link, base = np.zeros(n_shapes), np.zeros(n_shapes), np.zeros(n_shapes)
        for i, (name, h) in enumerate(self.shapes):
            share = _share(targets.get(name, 1.0), region, h.shape[0])
            dev[i] = (h * np.minimum(size, share[:, None])).sum()
            link[i] = (h * np.maximum(size - share[:, None], 0)).sum()
            base[i] = h.sum() * ENTRY_BYTES
        out = {}
        for key, per_shape in (("baseline_bytes", base), ("device_bytes", dev), ("link_bytes", link)):
            out[key] = np.zeros(self.flops.size)
            np.add.at(out[key], self.kernel, self.passes * per_shape[self.shape])
        return out | {"flops": self.flops}

    def choose(self, thresholds: Sequence[float], policy: str = "profile", region: int | None = None,
               rule: str = "budget", targets: Sequence[float] = layout.TARGETS) -> list[dict[str, Any]]:
        """:func:`buddylib.timing.model.targets_for` from the kept histograms.

        Parameters
        ----------
        thresholds : sequence of float
            Buddy thresholds.
        policy, region, rule, targets
            As for :func:`buddylib.timing.model.targets_for`.

        Returns
        -------
        list of dict
            One ``{allocation: target}`` per threshold.
        """
        from buddylib.analysis import analyze_histograms

        if region is not None:
            hists = {n: regions.coarsen(h, region // REGION_BYTES) for n, h in self.region_counts.items()}
            chosen = regions.choose(hists, thresholds, targets, policy, rule)
            return [{n: c[-1, :, ti] for n, c in chosen.items()} for ti in range(len(thresholds))]
        ds = analyze_histograms(self.counts.sel(compressor=[self.compressor]), self.snapshots, list(thresholds),
                                targets, policy)
        last = ds.chosen_target.isel(snapshot=-1).sel(compressor=self.compressor)
        return [{str(n): float(v) for n, v in zip(last.allocation.values, last.sel(threshold=t).values, strict=True)
                 if v == v} for t in thresholds]

    def metadata_misses(self, params: Params) -> np.ndarray:
        """The misses per kernel kept for ``params``' metadata cache.

        Parameters
        ----------
        params : Params
            Gives the cache's size, associativity and line.

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        ValueError
            A cache whose misses are not kept (the message lists those that are).
        """
        key = (params.metadata_cache_bytes, params.metadata_ways, params.metadata_line_bytes)
        if key not in self._misses:
            kept = ", ".join(f"{c} B ({w} ways, {line}-B lines)" for c, w, line in sorted(self._misses))
            raise ValueError(f"{self.name}: metadata misses are kept for caches of {kept}, not of "
                             f"{key[0]} B ({key[1]} ways, {key[2]}-B lines)")
        return self._misses[key]

    def um_faults(self, capacity_pages: int, page_bytes: int) -> int:
        """Faults of one iteration (the second) of LRU residency holding ``capacity_pages`` pages.

        Parameters
        ----------
        capacity_pages : int
            Pages device memory holds.
        page_bytes : int
            A page size of :data:`UM_PAGES`.

        Returns
        -------
        int

        Raises
        ------
        ValueError
            A page size not kept, or ``capacity_pages`` below 1.
        """
        if page_bytes not in self.distances:
            raise ValueError(f"{self.name}: Unified Memory is kept for pages of "
                             f"{', '.join(str(p) for p in sorted(self.distances))} bytes, not {page_bytes}")
        if capacity_pages < 1:
            raise ValueError(f"device capacity of {capacity_pages} pages: at least one page must fit")
        d = self.distances[page_bytes]
        return int(d[capacity_pages:].sum())

    # -----------------------------------------------------------------------------------
    # kept in a summary
    # -----------------------------------------------------------------------------------

    def encode(self) -> tuple[dict[str, Any], bytes]:
        """What a summary keeps of it; :func:`decode` reads it back.

        Returns
        -------
        block : dict
            JSON-ready: per shape its allocation and kind (``whole``, ``prefix`` with its entries and last
            region's counts, or ``counts``, uint32 ``[region, 5]`` in the blob), the terms, the misses, where the
            distances lie in the blob (uint64), the blob's SHA-256.
        blob : bytes
            The arrays as one zstd-19 blob (the same bytes for the same run).
        """
        names = [a.name for a in self.last.allocations]
        specs, parts, at = [], [], 0
        for name, h in self.shapes:
            spec = _kind(h, self.region_counts[name][-1])
            if spec["kind"] == "counts":
                raw = h.astype("<u4").tobytes()
                spec |= {"offset": at, "regions": int(h.shape[0])}
                parts.append(raw)
                at += len(raw)
            specs.append({"allocation": names.index(name), **spec})
        um = {}
        for page, d in self.distances.items():
            raw = d.astype("<u8").tobytes()
            um[str(page)] = {"offset": at, "length": int(d.size)}
            parts.append(raw)
            at += len(raw)
        blob = zstandard.ZstdCompressor(level=19).compress(b"".join(parts))
        block = {"format": FORMAT, "compressor": self.compressor, "region_bytes": REGION_BYTES,
                 "shapes": specs, "terms": [[int(k), int(s), float(p)] for k, s, p in
                                            zip(self.kernel, self.shape, self.passes, strict=True)],
                 "metadata_misses": [{"cache_bytes": c, "ways": w, "line_bytes": line, "misses": m.tolist()}
                                     for (c, w, line), m in sorted(self._misses.items())],
                 "accesses": self.n_accesses, "um_distances": um,
                 "sha256": hashlib.sha256(blob).hexdigest()}
        return block, blob


def decode(block: Mapping[str, Any], blob: bytes, name: str, snapshots: list[Snapshot], counts: xr.DataArray,
           region_counts: dict[str, np.ndarray], flops: np.ndarray) -> Accesses:
    """:meth:`Accesses.encode`'s block and blob back, beside what a summary keeps anyway.

    Parameters
    ----------
    block, blob : dict, bytes
        What :meth:`Accesses.encode` gave.
    name : str
        The workload, named in errors.
    snapshots, counts, region_counts, flops
        The summary's snapshots, sector histograms and 4 KiB region histograms, and the profile's flops
        (:class:`Accesses`).

    Returns
    -------
    Accesses

    Raises
    ------
    ValueError
        Naming what does not fit: another format or region size, a blob whose SHA-256 differs or that does not
        decode, a shape of unknown kind, a term naming a kernel or shape it does not have, an array outside the
        blob.
    """
    if block.get("format") != FORMAT or int(block.get("region_bytes", 0)) != REGION_BYTES:
        raise ValueError(f"{name}: its accesses block is not {FORMAT} at {REGION_BYTES}-byte regions")
    if hashlib.sha256(blob).hexdigest() != block["sha256"]:
        raise ValueError(f"{name}: its accesses' arrays are not the ones it records (SHA-256 differs)")
    try:
        raw = zstandard.ZstdDecompressor().decompress(blob)
    except zstandard.ZstdError as e:
        raise ValueError(f"{name}: its accesses' arrays do not decode ({e})") from None
    names = [a.name for a in snapshots[-1].allocations]
    shapes = []
    for spec in block["shapes"]:
        alloc = names[int(spec["allocation"])]
        shapes.append((alloc, _unkind(spec, raw, region_counts[alloc][-1], name)))
    terms = np.asarray(block["terms"], float).reshape(-1, 3)
    kernel, shape = terms[:, 0].astype(np.int64), terms[:, 1].astype(np.int64)
    if ((kernel < 0) | (kernel >= flops.size)).any() or ((shape < 0) | (shape >= len(shapes))).any():
        raise ValueError(f"{name}: an access names a kernel or shape it does not have")
    misses = {(int(m["cache_bytes"]), int(m["ways"]), int(m["line_bytes"])): np.asarray(m["misses"], float)
              for m in block["metadata_misses"]}
    distances = {int(p): _slice(raw, u["offset"], int(u["length"]) * 8, name).view("<u8").astype(np.int64)
                 for p, u in block["um_distances"].items()}
    return Accesses(name, block["compressor"], snapshots, counts, region_counts, flops, shapes, kernel, shape,
                    terms[:, 2].copy(), int(block["accesses"]), misses, distances)


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def _walk(ws: Workset, params: Params) -> dict[str, Any]:
    """The iteration walked a kernel at a time, twice (the metadata cache and Unified Memory are replayed warm,
    as :func:`buddylib.timing.model._metadata_misses` and ``um_slowdown`` do; the second walk is counted), never
    holding a gigabyte run's access streams or their order whole: per access of the second walk the 4 KiB
    regions' counts of the entries it touches (shared by accesses touching the same entries) and the terms; per
    kernel, in the order its accesses happen side by side (:class:`~buddylib.timing.caches.MergedStreams`,
    :data:`WALK_CHUNK` at a time), the metadata cache's hits at every size kept and the pages it touches fed to
    Unified Memory's stack distances (:func:`_replay_kernel`)."""
    from buddylib.timing.model import _entries

    allocs = {a.name: a for a in ws.last.allocations}
    sectors = {n: np.asarray(a.sectors[ws.compressor]) for n, a in allocs.items()}
    col = {n: i for i, n in enumerate(allocs)}
    per_line = params.entries_per_metadata_line
    first_line = np.cumsum([0] + [-(-a.n_entries // per_line) for a in allocs.values()], dtype=np.int64)
    first_page = {p: np.cumsum([0] + [-(-a.nbytes // p) for a in allocs.values()], dtype=np.int64) for p in UM_PAGES}
    lrus = {c: caches.LineLRU(c, params.metadata_line_bytes, params.metadata_ways) for c in METADATA_CACHES}
    stacks = {p: caches.StackDistances(int(f[-1])) for p, f in first_page.items()}
    n_kernels = len(ws.profile.kernels)
    out: dict[str, Any] = {"shapes": [], "kernel": [], "shape": [], "passes": [],
                           "hits": {c: np.zeros(n_kernels, np.int64) for c in METADATA_CACHES},
                           "accesses": np.zeros(n_kernels, np.int64)}
    seen: dict[tuple, int] = {}
    with ThreadPoolExecutor(min(len(lrus) + len(stacks), os.cpu_count() or 1)) as pool:
        for count in (False, True):
            rng = np.random.default_rng(0)  # the draws of Workset.streams, in its order
            for ki, k in enumerate(ws.profile.kernels):
                ents = [_entries(acc, allocs[acc.allocation], allocs, ws.index_arrays, rng) for acc in k.accesses]
                if count:
                    _shapes(ki, k, ents, sectors, seen, out)
                streams = caches.MergedStreams(ents, [col[a.allocation] for a in k.accesses])
                del ents
                hits, n = _replay_kernel(streams, first_line, per_line, first_page, lrus, stacks, count, pool)
                for c in METADATA_CACHES:
                    out["hits"][c][ki] += hits[c] if count else 0
                out["accesses"][ki] += n if count else 0
    out["distances"] = {p: st.hist for p, st in stacks.items()}
    for key, dtype in (("kernel", np.int64), ("shape", np.int64), ("passes", float)):
        out[key] = np.array(out[key], dtype=dtype)
    return out


#: Accesses a walk replays at a time (:func:`_replay_kernel`): its memory, about 30 bytes each, not the kernel's.
WALK_CHUNK = 1 << 22


def _replay_kernel(streams: caches.MergedStreams, first_line: np.ndarray, per_line: int,
                   first_page: dict[int, np.ndarray], lrus: dict[int, caches.LineLRU],
                   stacks: dict[int, caches.StackDistances], count: bool, pool: ThreadPoolExecutor
                   ) -> tuple[dict[int, int], int]:
    """One kernel's accesses, in order, :data:`WALK_CHUNK` at a time, through every metadata cache (a run of one
    line is fed once: the cache's last line again is a hit that changes nothing) and every page size's stack
    distances (a run of one page is one access: it migrates once); the replays side by side in ``pool``'s threads
    (their kernels release the GIL; each keeps its own state, so the result does not depend on the threads).
    Runs continue across chunks, not across kernels. Returns the hits per cache size and the accesses."""
    hits, n = dict.fromkeys(lrus, 0), 0
    last_line, last_page = np.int64(-1), dict.fromkeys(stacks, np.int64(-1))
    while streams.left:
        which, entry = streams.next(WALK_CHUNK)
        lines = first_line[which] + entry // per_line
        keep = np.empty(lines.size, bool)
        keep[0] = lines[0] != last_line
        keep[1:] = lines[1:] != lines[:-1]
        kept, repeats, last_line = lines[keep], int(lines.size - keep.sum()), lines[-1]
        del lines, keep
        lru_jobs = {c: pool.submit(lru.run, kept) for c, lru in lrus.items()}
        page_jobs = {p: pool.submit(_pages, st, which, entry, first_page[p], p, last_page[p], count)
                     for p, st in stacks.items()}
        for c, job in lru_jobs.items():
            hits[c] += job.result() + repeats
        last_page = {p: job.result() for p, job in page_jobs.items()}
        n += which.size
    return hits, n


def _pages(stack: caches.StackDistances, which: np.ndarray, entry: np.ndarray, first: np.ndarray, page_bytes: int,
           last: np.int64, count: bool) -> np.int64:
    """Feed ``stack`` the pages of a chunk of accesses, a run of one page (continuing ``last``, the page the chunk
    before ended on) once; the page this chunk ends on."""
    seq = caches.page_sequence(which, entry, np.array([which.size]), first, ENTRY_BYTES, page_bytes)
    seq = seq[1:] if seq.size and seq[0] == last else seq
    stack.run(seq, count)
    return seq[-1] if seq.size else last


def _shapes(ki: int, kernel, ents: list[np.ndarray], sectors: dict[str, np.ndarray], seen: dict[tuple, int],
            out: dict[str, Any]) -> None:
    """Kernel ``ki``'s terms, and the 4 KiB regions' counts of the entries each access touches where no earlier
    access touched the same ones (a gather through the same index at the same fraction)."""
    per = REGION_BYTES // ENTRY_BYTES
    for ai, (acc, ent) in enumerate(zip(kernel.accesses, ents, strict=True)):
        key = (acc.allocation, acc.pattern, acc.fraction, acc.stride, acc.index, acc.row)
        if acc.pattern == "random":  # drawn afresh for each access
            key = (*key, ki, ai)
        if key not in seen:
            s = sectors[acc.allocation]
            n = -(-s.size // per)
            h = np.bincount(ent // per * _BINS + s[ent], minlength=n * _BINS).reshape(n, _BINS)
            seen[key] = len(out["shapes"])
            out["shapes"].append((acc.allocation, h.astype(np.int64)))
        out["kernel"].append(ki)
        out["shape"].append(seen[key])
        out["passes"].append(float(acc.passes))


def _share(target: Any, region: int | None, n: int) -> np.ndarray:
    """Device bytes an entry may keep, per 4 KiB region of an allocation of ``n`` such regions."""
    r = np.asarray(target, float)
    if region is None or r.ndim == 0:
        return np.full(n, ENTRY_BYTES / float(r))
    return np.repeat(ENTRY_BYTES / r, region // REGION_BYTES)[:n]


def _kind(h: np.ndarray, whole: np.ndarray) -> dict[str, Any]:
    """How a shape is kept: ``whole`` (the snapshot's region histogram), ``prefix`` (its first entries: the
    snapshot's histogram up to its last region, that region's counts kept) or ``counts``; the first of them that
    gives back ``h`` exactly."""
    if np.array_equal(h, whole):
        return {"kind": "whole"}
    entries = int(h.sum())
    full = entries // (REGION_BYTES // ENTRY_BYTES)
    if full < h.shape[0]:
        spec = {"kind": "prefix", "entries": entries, "partial": h[full].tolist()}
        if np.array_equal(_unkind(spec, b"", whole, ""), h):
            return spec
    return {"kind": "counts"}


def _unkind(spec: Mapping[str, Any], raw: bytes, whole: np.ndarray, name: str) -> np.ndarray:
    """A shape's ``[region, 5]`` counts from how it is kept (:func:`_kind`)."""
    kind = spec.get("kind")
    if kind == "whole":
        return whole.copy()
    if kind == "prefix":
        per = REGION_BYTES // ENTRY_BYTES
        full = int(spec["entries"]) // per
        out = np.zeros_like(whole)
        out[:full] = whole[:full]
        if full < out.shape[0]:
            out[full] = spec["partial"]
        return out
    if kind == "counts":
        n = int(spec["regions"])
        return _slice(raw, int(spec["offset"]), n * _BINS * 4, name).view("<u4").reshape(n, _BINS).astype(np.int64)
    raise ValueError(f"{name}: a shape of kind {kind!r}; whole, prefix or counts expected")


def _slice(raw: bytes, offset: int, length: int, name: str) -> np.ndarray:
    if offset < 0 or length < 0 or offset + length > len(raw):
        raise ValueError(f"{name}: an array of its accesses lies outside their {len(raw)} bytes")
    return np.frombuffer(raw, np.uint8, length, offset)
