"""Targets per region (:mod:`buddylib.regions`): the hand-checkable case through ``buddy analyze``, the rules'
promises on random histograms, the committed summaries' per-region histograms, the timing model and the study."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from buddylib import layout, regions, snapshot
from buddylib.analysis import analyze, region_histograms
from buddylib.cli import main
from buddylib.studies import cache, fixtures, granularity, summaries
from buddylib.timing import model

MiB = 1 << 20
SIZE = 4 * MiB
ENTRIES = SIZE // 128
META = ENTRIES * 4 / 8  # 4 bits an entry: 16,384 bytes


@pytest.fixture(scope="module")
def half(tmp_path_factory):
    """2 MiB of zeros, then 2 MiB of random bytes."""
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("half") / "half.npy"
    np.save(path, np.concatenate([np.zeros(SIZE // 2, np.uint8), rng.integers(0, 256, SIZE // 2, dtype=np.uint8)]))
    return path


def _cli(capsys, *args) -> dict:
    assert main(["analyze", *map(str, args), "--compressor", "bpc32", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_half_zeros_half_random_by_hand(capsys, half) -> None:
    one = _cli(capsys, half)["total"]
    assert one["effective"] == pytest.approx(SIZE / (SIZE + META), rel=1e-12)  # 1x, less the metadata: 0.996
    # 64 KiB regions, 64 of them, 2 bits each: 16 bytes of targets; the zero half at 4x (32 B an entry), the random
    # half at 1x: 2,621,440 device bytes
    meta = META + 64 * 2 / 8
    for rule in ("traffic", "naive"):
        got = _cli(capsys, half, "--region", "64KiB", "--rule", rule)
        assert got["region"] == "64 KiB" and got["total"]["overflow %"] == 0
        assert got["total"]["effective"] == pytest.approx(SIZE / (ENTRIES // 2 * (32 + 128) + meta), rel=1e-12)
        assert round(got["total"]["effective"], 3) == 1.590
    # the full 30% budget: 19 of the 32 random regions (9,728 entries of the 9,830 allowed) parked at 4x too
    full = _cli(capsys, half, "--region", "64KiB")["total"]
    assert full["effective"] == pytest.approx(SIZE / (512 * (32 * 32 + 19 * 32 + 13 * 128) + meta), rel=1e-12)
    assert full["overflow %"] == pytest.approx(100 * 19 * 512 / ENTRIES)
    # extended targets: 3 bits a region, the zero half at 16x
    ext = analyze({"half": np.load(half)}, ["bpc32"], region="64KiB", rule="traffic", targets=layout.EXTENDED_TARGETS)
    assert float(ext.metadata_bytes.sum()) == META + 64 * 3 / 8
    assert float(ext.effective_ratio.item()) == pytest.approx(SIZE / (ENTRIES // 2 * (8 + 128) + META + 24))


@pytest.mark.parametrize("bad", ["3KiB", "2048", "0", "64 furlongs", "-4KiB", True, 6144, 1.5])
def test_a_bad_region_is_named(bad) -> None:
    with pytest.raises(ValueError, match="region"):
        regions.region_bytes(bad)


def test_bad_region_on_the_command_line(capsys, half) -> None:
    assert main(["analyze", str(half), "--region", "3KiB"]) == 2
    assert "region '3KiB'" in capsys.readouterr().err


@st.composite
def _group(draw):
    """Histograms of a few regions over a few snapshots: (snapshot, region, 5), regions of 32 entries or fewer."""
    n_snap, n_reg = draw(st.integers(1, 3)), draw(st.integers(1, 12))
    rows = draw(st.lists(st.lists(st.integers(0, 32), min_size=5, max_size=5), min_size=n_snap * n_reg,
                         max_size=n_snap * n_reg))
    return np.array(rows, dtype=float).reshape(n_snap, n_reg, 5)


@given(_group(), st.sampled_from([0.0, 0.1, 0.3, 0.5]), st.booleans())
@settings(max_examples=150, deadline=None)
def test_the_rules_keep_their_promises(h, t, extended) -> None:
    targets = np.asarray(layout.EXTENDED_TARGETS if extended else layout.TARGETS)
    entries = h.sum(-1)  # (S, R)
    dev_of = lambda k: (entries.max(0) * layout.device_share_bytes(targets[k])).sum()  # noqa: E731
    over_of = lambda k: layout.overflow_entries(h, targets[k][None, :]).sum(1)  # noqa: E731  (S,)
    k_all = int(np.searchsorted(targets, layout.choose_target(h.sum(1), t, targets)))
    alloc_over = over_of(np.full(h.shape[1], k_all))
    for rule in regions.RULES:
        k = regions.place(h, [t], targets, rule)[:, 0]
        over = over_of(k)
        if rule == "naive":  # every region alone within the threshold, in every snapshot
            frac = layout.overflow_fraction(h, targets[k][None, :])
            assert (frac <= t + 1e-9).all()
            continue
        # the allocation's budget holds in every snapshot
        assert (over <= t * entries.sum(1) + 1e-9).all()
        # never more device bytes than one target for the allocation
        assert dev_of(k) <= dev_of(np.full(h.shape[1], k_all)) + 1e-6
        if rule == "traffic":  # no more overflow than that one target's worst snapshot allowed
            worst = (alloc_over / np.maximum(entries.sum(1), 1)).max()
            assert (over <= worst * entries.sum(1) + 1e-9).all()


def test_summary_regions_round_trip_and_analyse_as_the_run(tmp_path, monkeypatch) -> None:
    """A summary's 4 KiB histograms rebuild every coarser granularity, and analyse as the run itself."""
    snaps = snapshot.load(fixtures.FOLDER / "lulesh-quick-s0.nc")
    summary = {"format": summaries.FORMAT, "workload": "lulesh", "scale": "quick", "seed": 0, "compressors": ["bpc32"],
               "snapshots": [{"step": s.step, "time": s.time, "allocations": [
                   {"name": a.name, "kind": a.kind, "dtype": a.dtype, "shape": list(a.shape), "nbytes": a.nbytes,
                    "sectors": {"bpc32": layout.sector_histogram(a.sectors["bpc32"]).tolist()}}
                   for a in s.allocations]} for s in snaps],
               "regions": summaries.encode_regions([[a.sectors["bpc32"] for a in s.allocations] for s in snaps],
                                                   "bpc32")}
    path = summaries.write(summary, tmp_path)
    side = path.with_name("lulesh-quick-s0.regions.zst")
    assert side.is_file() and "data" not in json.loads(path.read_text())["regions"]
    back = summaries.load(path)
    for region in ("4KiB", "64KiB", "1MiB"):
        direct = region_histograms(snaps, ["bpc32"], regions.region_bytes(region), progress=False)
        kept = summaries.region_counts(back, region)
        assert all(np.array_equal(kept[n][:, :, 0], direct[n][:, :, 0, 0]) for n in direct)
        for rule in regions.RULES:
            a = summaries.analyze(back, ["bpc32"], [0.1, 0.3], region=region, rule=rule)
            b = analyze(snaps, ["bpc32"], [0.1, 0.3], region=region, rule=rule)
            assert a.effective_ratio.equals(b.effective_ratio) and a.overflow.equals(b.overflow)
    # a damaged or missing file of them is refused, naming the summary
    side.write_bytes(side.read_bytes()[:-40])
    with pytest.raises(ValueError, match=r"lulesh-quick-s0\.json.*SHA-256"):
        summaries.load(path)
    side.unlink()
    with pytest.raises(ValueError, match=r"lulesh-quick-s0\.json.*cannot be read"):
        summaries.load(path)
    # a stream longer than a side file may hold is cut into parts, read back joined; one part lost is refused
    monkeypatch.setattr(summaries, "SIDE_PART_BYTES", 1000)
    summaries.write(summary, tmp_path)
    parts = json.loads(path.read_text())["regions"]["parts"]
    assert len(parts) > 2 and parts[0] == side.name and all(path.with_name(p).stat().st_size <= 1000 for p in parts)
    again = summaries.load(path)
    assert all(np.array_equal(summaries.region_counts(again, "4KiB")[n], summaries.region_counts(back, "4KiB")[n])
               for n in direct)
    path.with_name(parts[1]).unlink()
    with pytest.raises(ValueError, match=r"lulesh-quick-s0\.json.*regions\.zst\.1 cannot be read"):
        summaries.load(path)
    monkeypatch.setattr(summaries, "SIDE_PART_BYTES", 10**9)
    summaries.write(summary, tmp_path)  # one part again: the earlier parts go
    assert not list(tmp_path.glob("lulesh-quick-s0.regions.zst.*"))
    summary.pop("regions")
    with pytest.raises(ValueError, match="keeps no histograms per region"):
        summaries.analyze(summary, ["bpc32"], region="64KiB")


@pytest.mark.parametrize("region_bytes", [0, 100, 12288, 2048, "allocation", "4KiB", None, True])
def test_a_summary_whose_region_size_is_not_one_is_refused(tmp_path: Path, region_bytes: object) -> None:
    """A kept region size that is not a power of two of at least 4 KiB bytes (a number) is named with the file,
    never divided by (a ZeroDivisionError) nor read as another size."""
    src = min(summaries.FOLDER.glob("*.json"), key=lambda f: f.stat().st_size)
    s = summaries.load(src)
    s["regions"]["region_bytes"] = region_bytes
    bad = summaries.write(s, tmp_path)
    said = re.escape(f"region_bytes {region_bytes!r}, not a power of two")
    with pytest.raises(ValueError, match=rf"{re.escape(bad.name)}: .*{said}"):
        summaries.load(bad)


@pytest.mark.parametrize("damage", ["more entries than a region holds", "short", "long"])
def test_a_summary_whose_region_histograms_do_not_fit_its_allocations_is_refused(tmp_path: Path,
                                                                                 damage: str) -> None:
    src = min(summaries.FOLDER.glob("*.json"), key=lambda f: f.stat().st_size)
    s = summaries.load(src)
    raw = bytearray(zstandard.ZstdDecompressor().decompress(base64.b64decode(s["regions"]["data"])))
    if damage == "short":
        raw = raw[:-4]
    elif damage == "long":
        raw += bytes(4)
    else:
        raw[0] = 255  # the first region's entries taking no sector, as many as no 4 KiB region holds (32 entries)
    s["regions"]["data"] = base64.b64encode(zstandard.ZstdCompressor().compress(bytes(raw))).decode()
    bad = summaries.write(s, tmp_path)
    match = {"short": "end before step", "long": "4 bytes more than its allocations need",
             "more entries than a region holds": "counts more entries than it holds"}[damage]
    with pytest.raises(ValueError, match=rf"{re.escape(bad.name)}: .*{re.escape(match)}"):
        summaries.load(bad)


def test_timing_with_one_target_per_region_is_the_allocation_timing() -> None:
    ws = model.Workset.load(fixtures.FOLDER / "squeezenet-quick-s0.nc")
    per_alloc = model.targets_for(ws, [0.3])[0]
    size = regions.region_bytes("64KiB")
    same = {n: np.full(-(-a.n_entries // (size // 128)), per_alloc.get(n, 1.0)) for n, a in
            ((a.name, a) for a in ws.last.allocations)}
    a, b = model.traffic(ws, per_alloc), model.traffic(ws, same, size)
    for k in ("device_bytes", "link_bytes"):
        np.testing.assert_allclose(a[k], b[k], rtol=1e-12)
    # the budget rule at 4 KiB spends the budget: more link traffic than one target an allocation
    finer = model.sweep(ws, region="4KiB", rule="budget")
    assert float(finer.link_traffic_fraction.item()) > float(model.sweep(ws).link_traffic_fraction.item())


def test_the_committed_granularity_study_is_what_the_code_measures() -> None:
    fresh = granularity.measure("quick", names=["ostencil", "squeezenet"])
    report = granularity.check_committed("quick", fresh=fresh)
    assert report.ok.all(), report
    assert set(report.compared) == {"exact"}  # the fixtures' runs: the same bytes on every machine
    ds = granularity.study("quick")
    assert ds.attrs["code_current"] == 1
    # one target per allocation is the paper's layout: the rules do not differ there
    alloc = ds.effective_ratio.sel(region="allocation")
    assert (alloc.sel(rule="budget") == alloc.sel(rule="naive")).all()


def test_the_granularity_check_compares_other_kernels_rows_as_the_fixtures_do() -> None:
    """Rows made from the same bytes everywhere compare exactly; rows of runs made with PyTorch (the LLM kinds) on other
    kernels than the study's compare by footprint and ideal ratio only, the rest reported; on the same kernels, all."""
    kept = cache.load_cached(granularity.committed_path("quick"))
    other = json.dumps({**json.loads(kept.attrs["machine"]), "torch_cpu_capability": "another"})
    llm, hpc = kept.suite == "llm", kept.suite == "hpc"

    def check(machine: str, **moves: tuple[xr.DataArray, float]) -> pd.DataFrame:
        moved = kept.copy(deep=True)
        for v, (rows, factor) in moves.items():
            moved[v] = kept[v].where(~rows, kept[v] * factor)
        return granularity.check_committed("quick", fresh=moved.assign_attrs(machine=machine)).droplevel("rows")

    within = {"overflow": (llm, 1.75), "ideal_ratio": (llm, 1.05)}
    report = check(other, **within)
    assert report.ok.all() and report.loc["overflow", "compared"].tolist() == ["exact", "reported only"]
    assert report.loc["overflow", "max_rel_change"].tolist() == [0.0, pytest.approx(0.75)]
    assert report.loc["ideal_ratio", "compared"].tolist() == ["exact", "within 10%"]
    assert not check(kept.attrs["machine"], **within).loc["overflow", "ok"].all()  # the same kernels: exact
    report = check(other, ideal_ratio=(llm, 1.2), footprint=(llm, 1 + 1e-9), effective_ratio=(hpc, 1 + 1e-12))
    assert report.ok.tolist().count(False) == 3
    assert report.loc["ideal_ratio", "ok"].tolist() == report.loc["footprint", "ok"].tolist() == [True, False]
    assert report.loc["effective_ratio", "ok"].tolist() == [False, True]


def test_the_default_study_is_stale_once_a_summary_it_reads_changes(tmp_path, monkeypatch) -> None:
    """Above quick scale the study reads committed summaries: its key names what it read, so a summary given its
    region histograms (or remade with other data) makes the committed study not current; the quick study reads none."""
    monkeypatch.setattr(summaries, "path", lambda n, at, seed=0: tmp_path / f"{n}-{summaries.scale_name(at)}.json")
    assert granularity.summaries_read("quick") == granularity.summaries_read("default") == ""
    assert granularity.key("default") == granularity.key("quick")
    f = tmp_path / "md-4096.json"
    f.write_text(json.dumps({"digest": "d1", "regions": {"sha256": "r1"}}))  # no accesses: still read for capacity
    one = granularity.key("default")
    assert granularity.summaries_read("default") == "md@4096:d1:r1:None" and one != granularity.key("quick")
    f.write_text(json.dumps({"digest": "d1", "regions": {"sha256": "r2"}, "accesses": {"sha256": "a"}}))
    assert granularity.key("default") not in (one, granularity.key("quick"))


def test_a_saved_run_through_buddy_analyze_times_its_region_targets(capsys) -> None:
    run = fixtures.FOLDER / "squeezenet-quick-s0.nc"
    got = _cli(capsys, run, "--region", "64KiB", "--rule", "traffic")
    ws = model.Workset.load(run)
    want = model.slowdown(ws, bandwidth_credit=False, region="64KiB", rule="traffic")["slowdown"]
    assert got["slowdown"] == pytest.approx(want, rel=1e-12) and got["rule"] == "traffic"


def test_targets_per_region_on_dask_and_for_the_layouts_compressor_alone() -> None:
    """Per-region histograms are kept for the layout's compressor (the first) only, chunk by chunk on dask as in
    memory: the same numbers; the other compressors keep their ideal ratios, and no region layout (NaN)."""
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(1)
    x = np.concatenate([np.zeros(1 << 18, np.uint8), rng.integers(0, 256, 1 << 18).astype(np.uint8),
                        np.arange(1 << 16, dtype=np.uint32).view(np.uint8)])
    plain = analyze({"x": x}, ["bpc32", "zvc"], region="4KiB", chunk_bytes=1 << 16)
    lazy = analyze({"x": da.from_array(x, chunks=100_000)}, ["bpc32", "zvc"], region="4KiB", chunk_bytes=1 << 16)
    for v in ("effective_ratio", "ideal_ratio", "chosen_target", "tiered_bytes", "sector_count"):
        assert plain[v].equals(lazy[v]), v
    alone = analyze({"x": x}, ["bpc32"], region="4KiB")
    assert plain.effective_ratio.sel(compressor="bpc32").equals(alone.effective_ratio.sel(compressor="bpc32"))
    assert bool(plain.effective_ratio.sel(compressor="zvc").isnull().all())
    assert bool(plain.ideal_ratio.sel(compressor="zvc").notnull().all())
