"""The benchmark's bookkeeping (never its speed): medians with their spread, ratios to the peers taken
from the same run, targets judged from the measured numbers, the files make reproduce reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from buddylib.compressors import abc
from buddylib.report import bench


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    return bench.run(mib=1, repeat=2, progress=False, crossover=False)


def test_rows_and_spread(df: pd.DataFrame) -> None:
    assert (df["repeat"] == bench.MIN_REPEAT).all()  # 2 asked, at least 5 timed
    ours = [f"{c} {o}" for c, o in bench.OURS]
    peers = [f"{p} {o}" for p in bench.PEERS for o in ("compress", "decompress")]
    for kind in bench.ALL_KINDS:
        k = df[df.kind == kind]
        only16 = [f"{c} {o}" for c, o in bench.OURS_16[kind]] + [
            f"{p} {o}" for p in bench.peers16_installed() for o in ("compress", "decompress")] \
            if kind in bench.KINDS_16 else []
        common = ours + peers if kind in bench.KINDS else []
        assert sorted(k.compressor + " " + k.operation) == sorted(common + only16)
    for col in ("MB_per_s_per_core", "MB_per_s"):
        assert (df[f"{col}_min"] <= df[col]).all() and (df[col] <= df[f"{col}_max"]).all()
        assert (df[col] > 0).all()
    assert np.allclose(df["MB_per_s"], df["bytes"] / df["seconds"] / 1e6)
    # what reproduce.py reads: one BPC-32 size row per kind, with its ideal ratio
    bpc = df[(df.compressor == "bpc32") & (df.operation == "size")].set_index("kind")
    assert sorted(bpc.index) == sorted(bench.KINDS) and (bpc["ratio"] >= 1).all()


def test_ratios_to_peers_come_from_the_same_run(df: pd.DataFrame) -> None:
    row = df.set_index(["kind", "compressor", "operation"])
    for kind in bench.KINDS:
        for (c, o), peer_op in ((("bpc64", "decode"), "decompress"), (("bpc32", "size"), "compress"),
                                (("fpc", "size"), "compress")):
            for peer in bench.PEERS:
                ours, theirs = row.loc[(kind, c, o)], row.loc[(kind, peer, peer_op)]
                assert ours[f"vs_{peer}_per_core"] == pytest.approx(ours.MB_per_s_per_core / theirs.MB_per_s_per_core)
                assert ours[f"vs_{peer}_per_machine"] == pytest.approx(ours.MB_per_s / theirs.MB_per_s)
    assert df[df.compressor.isin(bench.PEERS)].filter(like="vs_").isna().all().all()


def test_targets_follow_the_numbers(df: pd.DataFrame) -> None:
    d = df.copy()
    decode = (d.compressor == "bpc64") & (d.operation == "decode") & (d.kind == "sparse")
    d.loc[decode, "MB_per_s_per_core"] = bench.BPC64_TARGET_MB_S - 1
    t = bench.targets(d).set_index(["target", "kind"])
    row = t.loc[(f"BPC-64 decode >= {bench.BPC64_TARGET_MB_S:g} MB/s per core", "sparse")]
    assert not row.met and row.margin == pytest.approx((bench.BPC64_TARGET_MB_S - 1) / bench.BPC64_TARGET_MB_S)
    d.loc[decode, "MB_per_s_per_core"] = bench.BPC64_TARGET_MB_S + 1
    assert bench.targets(d).set_index(["target", "kind"]).loc[row.name].met
    # the BPC-32 target covers exactly the kinds zstd-1 compresses
    speed = f"BPC-32 size >= {bench.SPEEDUP_TARGET:g}x zstd-1 compress, per core"
    zstd = d[(d.compressor == "zstd-1") & (d.operation == "compress")].set_index("kind")["ratio"]
    def rows(d: pd.DataFrame) -> pd.DataFrame:
        t = bench.targets(d)
        return t[t.target == speed].set_index("kind")

    assert rows(d).index.tolist() == [k for k in bench.TARGET_KINDS if zstd[k] > bench.COMPRESSIBLE]
    d.loc[(d.compressor == "zstd-1") & (d.kind == "random"), "ratio"] = 1.5
    measured = rows(d).loc["random", "measured"]
    bpc = d[(d.compressor == "bpc32") & (d.operation == "size") & (d.kind == "random")]
    assert measured == pytest.approx(bpc["vs_zstd-1_per_core"].item())


def test_ebo_targets_follow_the_numbers(df: pd.DataFrame) -> None:
    """Issue 42's targets: EBO's size path in MB/s, its encode and decode over ZipNN's from the same run."""
    t = bench.targets(df).set_index(["target", "kind"])
    for kind in bench.KINDS_16:
        size = t.loc[(f"EBO size >= {bench.EBO_SIZE_TARGET_MB_S:g} MB/s per core", kind)]
        row = df[(df.compressor == f"ebo-{kind}") & (df.operation == "size")].iloc[0]
        assert size.measured == row.MB_per_s_per_core and size.met == (row.MB_per_s_per_core >= 3000.0)
        if not bench.peers16_installed():
            continue
        dec = t.loc[("EBO decode >= ZipNN decompress, per core", kind)]
        ours = df[(df.compressor == f"ebo-{kind}") & (df.operation == "decode")].iloc[0]
        theirs = df[(df.compressor == "zipnn") & (df.operation == "decompress") & (df.kind == kind)].iloc[0]
        assert dec.measured == pytest.approx(ours.MB_per_s_per_core / theirs.MB_per_s_per_core)
        assert dec.met == (dec.measured >= 1.0)


def test_write(df: pd.DataFrame, tmp_path: Path) -> None:
    d = df.copy()
    d.attrs["crossover"] = pd.DataFrame({256: [0.5, 0.9], 2048: [1.2, 1.1]}, index=["zvc", "bdi"]).to_dict()
    paths = bench.write(d, tmp_path)
    for key in ("rows", "summary", "markdown", "png", "svg"):
        assert paths[key].stat().st_size > 0, key
    text = paths["markdown"].read_text()
    assert text.startswith("# Compressor benchmark\n")
    t = bench.targets(d)
    assert f"{int(t.met.sum())} of {len(t)} target checks met" in text
    for r in t.itertuples():
        assert (f"| {r.target} | {r.kind} |" in text) and (("yes, by" if r.met else "**no**") in text)
    assert "here every parallel kernel pays from 2048 entries on" in text
    rows = pd.read_csv(paths["rows"])
    assert {"kind", "compressor", "operation", "ratio"} <= set(rows.columns) and len(rows) == len(d)


def test_parallel_crossover_restores_the_threshold() -> None:
    before = abc.PARALLEL_MIN_ENTRIES
    table = bench.parallel_crossover(sizes=(256, 2048), calls=3)
    assert abc.PARALLEL_MIN_ENTRIES == before
    assert list(table.columns) == [256, 2048] and {"bpc32", "bpc64 decode", "sectors", "zvc"} <= set(table.index)
    assert np.isfinite(table.to_numpy()).all() and (table.to_numpy() > 0).all()
