"""The catalogue of hostile inputs (issue 12): one case per class of misbehaviour found, each now a
one-line error naming the file (and array or chunk), or the right answer; never a lost file, a
silently wrong number, a hang or a traceback."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from test_cli import _analyze, _fails, _json

from buddylib import compressors, snapshot

# ------------------------------------------------------------------ data loss


def _refused(capsys, *args, needles=()) -> None:
    rc, out, err = _analyze(capsys, *args)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1, err
    assert all(str(n) in err for n in needles), err


def test_out_never_replaces_a_folder_or_file_it_did_not_write(capsys, tmp_path):
    np.save(tmp_path / "x.npy", np.arange(1000, dtype=np.int32))
    (tmp_path / "keep.nc").mkdir()
    (tmp_path / "keep.nc" / "precious.txt").write_text("mine")
    _refused(capsys, tmp_path / "x.npy", "--out", tmp_path / "keep.nc", needles=("keep.nc", "folder"))
    assert (tmp_path / "keep.nc" / "precious.txt").read_text() == "mine"
    (tmp_path / "other.nc").write_bytes(b"somebody else's file")
    _refused(capsys, tmp_path / "x.npy", "--out", tmp_path / "other.nc", needles=("other.nc", "not a result"))
    assert (tmp_path / "other.nc").read_bytes() == b"somebody else's file"
    (tmp_path / "mine.zarr").mkdir()
    (tmp_path / "mine.zarr" / "data").write_text("a folder named like a store")
    _refused(capsys, tmp_path / "x.npy", "--out", tmp_path / "mine.zarr", needles=("mine.zarr", "not a result"))
    assert (tmp_path / "mine.zarr" / "data").exists()
    # a result this tool wrote may be replaced, in either format
    for out in (tmp_path / "r.nc", tmp_path / "r.zarr"):
        for _ in range(2):
            rc, _, err = _analyze(capsys, tmp_path / "x.npy", "--out", out)
            assert rc == 0, err


def test_out_is_never_an_input(capsys, tmp_path):
    import zarr

    store = tmp_path / "in.zarr"
    zarr.open_array(str(store), mode="w", shape=(100,), dtype="f4")[:] = 1
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    _refused(capsys, store, "--out", store, needles=("in.zarr", "input"))
    _refused(capsys, store, "--out", store / "inside.zarr", needles=("input",))
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before


# ------------------------------------------------------------------ silent wrong results


def test_big_endian_is_analysed_as_gpu_memory_holds_it(capsys, tmp_path):
    values = np.arange(-500, 1500, dtype=np.int32)
    np.save(tmp_path / "le.npy", values.astype("<i4"))
    np.save(tmp_path / "be.npy", values.astype(">i4"))
    le, be = _json(capsys, tmp_path / "le.npy"), _json(capsys, tmp_path / "be.npy")
    assert le["total"] == be["total"] and be["allocations"][0]["dtype"] == "int32"
    for name in compressors.names():  # the library too: the same sizes for both byte orders
        assert (compressors.sectors(values.astype(">i4"), name) == compressors.sectors(values, name)).all()


def test_fortran_order_means_the_same_in_every_format(capsys, tmp_path):
    arr = np.asfortranarray(np.repeat(np.arange(64, dtype=np.int32)[:, None], 64, axis=1))
    np.save(tmp_path / "f.npy", arr)
    np.savez(tmp_path / "f.npz", f=arr)
    assert _json(capsys, tmp_path / "f.npy")["total"] == _json(capsys, tmp_path / "f.npz")["total"]


def test_an_allocation_named_total_is_not_overwritten(capsys, tmp_path):
    np.savez(tmp_path / "t.npz", TOTAL=np.zeros(4096, np.float32), x=np.arange(1024, dtype=np.float64))
    doc = _json(capsys, tmp_path / "t.npz")
    rows = {a["allocation"]: a for a in doc["allocations"]}
    assert rows["TOTAL"]["bytes"] == 4096 * 4 and doc["total"]["bytes"] == 4096 * 4 + 1024 * 8
    rc, out, _ = _analyze(capsys, tmp_path / "t.npz")
    assert rc == 0
    lines = out.splitlines()
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("---"))
    assert lines[rule - 2].startswith("TOTAL ") and lines[rule + 1].startswith("TOTAL ")  # above and below


def _safetensors(path: Path, header: dict, data: bytes) -> None:
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + data)


@pytest.mark.parametrize(("entry", "needle"), [
    ({"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}, "not a list of non-negative integers"),
    ({"dtype": "F32", "shape": [2.5], "data_offsets": [0, 16]}, "not a list of non-negative integers"),
    ({"dtype": "F32", "shape": [4], "data_offsets": ["0", 16]}, "are not two integers"),
    ({"dtype": "F32", "shape": [4], "data_offsets": [0.0, 16.0]}, "are not two integers"),
])
def test_safetensors_header_fields_are_checked(capsys, tmp_path, entry, needle):
    _safetensors(tmp_path / "h.safetensors", {"w": entry}, bytes(16))
    _fails(capsys, tmp_path, [tmp_path / "h.safetensors"], "h.safetensors", "'w'", needle)


def test_safetensors_overlapping_tensors(capsys, tmp_path):
    _safetensors(tmp_path / "o.safetensors", {"a": {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]},
                                              "b": {"dtype": "F32", "shape": [16], "data_offsets": [32, 96]}},
                 bytes(96))
    _fails(capsys, tmp_path, [tmp_path / "o.safetensors"], "o.safetensors", "'a'", "'b'", "overlap")


def test_npy_with_a_negative_shape(capsys, tmp_path):
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }"
    header += b" " * (-(10 + len(header) + 1) % 64) + b"\n"
    (tmp_path / "n.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + bytes(16))
    _fails(capsys, tmp_path, [tmp_path / "n.npy"], "n.npy", "negative shape (-4,)")


def _run_file(tmp_path: Path) -> Path:
    snaps = [snapshot.Snapshot("toy", [snapshot.Allocation.from_array("x", np.arange(512, dtype=np.int32))])]
    return snapshot.save(snaps, tmp_path / "run.nc", compressors=["bpc32"])


def test_saved_run_that_contradicts_itself(capsys, tmp_path):
    path = _run_file(tmp_path)
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    ds["nbytes"][:] = 4096  # 32 entries' worth, but 16 entries recorded
    ds.to_netcdf(tmp_path / "liar.nc")
    _fails(capsys, tmp_path, [tmp_path / "liar.nc"], "liar.nc", "'x'", "4096 bytes but 16 entries")
    ds = xr.open_dataset(path).load()
    ds["sectors"][:] = 9
    ds.to_netcdf(tmp_path / "nine.nc")
    _fails(capsys, tmp_path, [tmp_path / "nine.nc"], "nine.nc", "9 sectors")


def test_empty_zarr_group(capsys, tmp_path):
    import zarr

    zarr.open_group(str(tmp_path / "e.zarr"), mode="w")
    _fails(capsys, tmp_path, [tmp_path / "e.zarr"], "e.zarr", "holds no arrays")


def test_twice_the_same_compressor(capsys, tmp_path):
    np.save(tmp_path / "x.npy", np.arange(100))
    _fails(capsys, tmp_path, [tmp_path / "x.npy", "--compressor", "bpc32", "bpc32"], "'bpc32' is given twice")


# ------------------------------------------------------------------ hangs


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_not_read(capsys, tmp_path):
    os.mkfifo(tmp_path / "pipe.npy")
    _fails(capsys, tmp_path, [tmp_path / "pipe.npy"], "pipe.npy", "not a regular file")
    os.mkfifo(tmp_path / "dump")
    _fails(capsys, tmp_path, [tmp_path / "dump", "--dtype", "uint8"], "dump", "not a regular file")
    os.mkfifo(tmp_path / "run.nc")  # named like a saved run, and as --out
    _fails(capsys, tmp_path, [tmp_path / "run.nc"], "run.nc", "not a regular file")
    np.save(tmp_path / "x.npy", np.arange(10))
    _refused(capsys, tmp_path / "x.npy", "--out", tmp_path / "run.nc", needles=("run.nc", "not a regular file"))


def test_a_store_declaring_far_more_than_it_holds(capsys, tmp_path):
    import zarr

    big = zarr.open_array(str(tmp_path / "huge.zarr"), mode="w", shape=(1 << 34,), chunks=(1 << 20,), dtype="f4")
    big[:10] = 1.0  # 64 GiB declared, one chunk written
    _fails(capsys, tmp_path, [tmp_path / "huge.zarr"], "huge.zarr", "64.0 GiB", "--max-bytes")
    np.save(tmp_path / "small.npy", np.arange(4096, dtype=np.int64))  # 32 KiB
    _fails(capsys, tmp_path, [tmp_path / "small.npy", "--max-bytes", "16KiB"], "small.npy", "32.0 KiB")
    assert _json(capsys, tmp_path / "small.npy", "--max-bytes", "64KiB")["total"]["bytes"] == 4096 * 8


# ------------------------------------------------------------------ tracebacks


def test_sparse_and_meta_tensors(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    sparse = torch.sparse_coo_tensor(torch.tensor([[0, 5, 9]]), torch.tensor([1.0, 2.0, 3.0]), (10,),
                                     check_invariants=True)
    torch.save({"s": sparse, "w": torch.ones(64)}, tmp_path / "sp.pt")
    names = {a["allocation"]: a for a in _json(capsys, tmp_path / "sp.pt")["allocations"]}
    assert set(names) == {"s.indices", "s.values", "w"} and names["s.values"]["bytes"] == 12
    torch.save({"m": torch.empty(1000, device="meta")}, tmp_path / "meta.pt")
    _fails(capsys, tmp_path, [tmp_path / "meta.pt"], "meta.pt", "'m'", "meta device")


def test_deeply_nested_checkpoint(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    nested = torch.ones(4)
    for _ in range(100):
        nested = [nested]
    torch.save(nested, tmp_path / "deep.pt")
    _fails(capsys, tmp_path, [tmp_path / "deep.pt"], "deep.pt", "nested deeper than")


def test_a_corrupt_zarr_chunk_is_named(capsys, tmp_path):
    import zarr

    store = tmp_path / "c.zarr"
    zarr.open_array(str(store), mode="w", shape=(4096,), chunks=(1024,), dtype="f4", zarr_format=2)[:] = 1.5
    (store / "2").write_bytes(b"garbage, not a compressed chunk")
    _fails(capsys, tmp_path, [store], "c.zarr", "'c'", "chunk [2048:3072]")


def test_a_bpc_chunk_with_a_bad_checksum_is_named(capsys, tmp_path):
    import numcodecs
    import zarr

    store = tmp_path / "b.zarr"
    zarr.open_array(str(store), mode="w", shape=(4096,), chunks=(1024,), dtype="i4", zarr_format=2,
                    compressor=numcodecs.get_codec({"id": "buddylib.bpc", "width": 32}))[:] = np.arange(4096)
    chunk = bytearray((store / "1").read_bytes())
    chunk[-1] ^= 0x01  # one flipped bit in the last entry's code
    (store / "1").write_bytes(bytes(chunk))
    _fails(capsys, tmp_path, [store], "b.zarr", "chunk [1024:2048]")


def test_a_dtype_without_bytes(capsys, tmp_path):
    (tmp_path / "d.bin").write_bytes(bytes(64))
    _fails(capsys, tmp_path, [tmp_path / "d.bin", "--dtype", "V0"], "d.bin", "no bytes")


# ------------------------------------------------------------------ unclear messages and naming


def test_not_a_run(capsys, tmp_path):
    xr.Dataset({"t": ("x", np.arange(5.0))}).to_netcdf(tmp_path / "weather.nc")
    _fails(capsys, tmp_path, [tmp_path / "weather.nc"], "weather.nc", "not a run saved by `buddy workloads run`")


def test_npz_member_that_is_not_an_array(capsys, tmp_path):
    import zipfile

    with zipfile.ZipFile(tmp_path / "m.npz", "w") as z:
        z.writestr("notes.txt", "hello")
    _fails(capsys, tmp_path, [tmp_path / "m.npz"], "m.npz", "'notes.txt' is not a .npy array")


def test_same_file_name_in_two_folders(capsys, tmp_path):
    for folder, value in (("a", 1), ("b", 2)):
        (tmp_path / folder).mkdir()
        np.save(tmp_path / folder / "x.npy", np.full(256, value, np.int32))
    doc = _json(capsys, tmp_path / "a/x.npy", tmp_path / "b/x.npy")
    assert [a["allocation"] for a in doc["allocations"]] == ["a/x.npy:x", "b/x.npy:x"]
    _fails(capsys, tmp_path, [tmp_path / "a/x.npy", tmp_path / "a/x.npy"], "given twice")


def test_empty_arrays_are_skipped_in_every_format(capsys, tmp_path):
    from safetensors.numpy import save_file

    full = np.arange(100, dtype=np.float32)
    np.savez(tmp_path / "e.npz", empty=np.zeros(0, np.float32), full=full)
    save_file({"empty": np.zeros((0, 3), np.float32), "full": full}, str(tmp_path / "e.safetensors"))
    for f in ("e.npz", "e.safetensors"):
        assert [a["allocation"] for a in _json(capsys, tmp_path / f)["allocations"]] == ["full"]
    torch = pytest.importorskip("torch")
    torch.save({"empty": torch.zeros(0), "full": torch.from_numpy(full)}, tmp_path / "e.pt")
    assert [a["allocation"] for a in _json(capsys, tmp_path / "e.pt")["allocations"]] == ["full"]


# ------------------------------------------------------------------ re-tried with other files (second round)


def test_a_mangled_or_unknown_npy_header(capsys, tmp_path):
    header = b"{{{{"
    header += b" " * (-(11 + len(header)) % 64) + b"\n"
    (tmp_path / "brackets.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + bytes(40))
    _fails(capsys, tmp_path, [tmp_path / "brackets.npy"], "brackets.npy", "not a readable .npy array")
    (tmp_path / "v9.npy").write_bytes(b"\x93NUMPY\x09\x00" + bytes(100))
    _fails(capsys, tmp_path, [tmp_path / "v9.npy"], "v9.npy", "format version 9.0")


def test_zarr_stores_with_zero_chunks_or_a_fifo_inside(capsys, tmp_path):
    import zarr

    z = zarr.create_array(str(tmp_path / "zero.zarr"), shape=(10,), chunks=(5,), dtype="f4", zarr_format=2)
    z[:] = 1
    meta = json.loads((tmp_path / "zero.zarr" / ".zarray").read_text())
    (tmp_path / "zero.zarr" / ".zarray").write_text(json.dumps({**meta, "chunks": [0]}))
    _fails(capsys, tmp_path, [tmp_path / "zero.zarr"], "zero.zarr", "chunk side")
    if hasattr(os, "mkfifo"):
        z = zarr.create_array(str(tmp_path / "pipe.zarr"), shape=(10,), chunks=(5,), dtype="f4", zarr_format=3)
        z[:] = 1
        chunk = next(p for p in (tmp_path / "pipe.zarr").rglob("*") if p.is_file() and p.name != "zarr.json")
        chunk.unlink()
        os.mkfifo(chunk)  # reading it would block forever
        _fails(capsys, tmp_path, [tmp_path / "pipe.zarr"], "pipe.zarr", "not a regular file")


def test_the_same_data_given_twice_by_another_name(capsys, tmp_path):
    import zarr

    (tmp_path / "a").mkdir()
    np.save(tmp_path / "a" / "m.npy", np.arange(600, dtype=np.int32))
    os.symlink(tmp_path / "a" / "m.npy", tmp_path / "alias.npy")
    os.link(tmp_path / "a" / "m.npy", tmp_path / "hard.npy")
    for other in (tmp_path / "a" / ".." / "a" / "m.npy", tmp_path / "alias.npy", tmp_path / "hard.npy"):
        _fails(capsys, tmp_path, [tmp_path / "a" / "m.npy", other], "given twice")
    zarr.open_group(str(tmp_path / "g.zarr"), mode="w").create_array("k", shape=(64,), dtype="i4")[:] = 7
    _fails(capsys, tmp_path, [tmp_path / "g.zarr", tmp_path / "g.zarr" / "k"], "lies inside", "g.zarr")


def test_tensors_sharing_one_storage_count_once(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    base = torch.arange(1000, dtype=torch.float32)
    torch.save({"a": base, "b": base[100:200], "c": base.view(10, 100), "e": torch.ones(1, 4).expand(1000, 4),
                "n": torch.nested.nested_tensor([torch.ones(3), torch.ones(5)])}, tmp_path / "views.pt")
    got = {a["allocation"]: a["bytes"] for a in _json(capsys, tmp_path / "views.pt")["allocations"]}
    assert got == {"a": 4000, "e": 16, "n": 32}  # one storage of 1000 floats; 4 floats expanded; 3 + 5 floats


def test_no_target_beyond_the_threshold_when_1_is_not_listed(capsys, tmp_path):
    np.save(tmp_path / "noise.npy", np.random.default_rng(1).random(4096))  # incompressible
    for targets in (["8"], ["16", "8"], ["4", "2"]):
        row = _json(capsys, tmp_path / "noise.npy", "--targets", *targets)["allocations"][0]
        assert row["target"] == 1 and row["overflow %"] == 0, row


def test_a_saved_run_with_bad_sector_values(capsys, tmp_path):
    path = _run_file(tmp_path)
    ds = xr.open_dataset(path).load()
    for name, sectors in (("nan", ds.sectors.astype("f4").where(ds.entry != 3)), ("half", ds.sectors + 0.5),
                          ("neg", (ds.sectors.astype("i2") * 0 - 1))):
        ds.assign(sectors=sectors).to_netcdf(tmp_path / f"{name}.nc")
        rc, _out, err = _analyze(capsys, tmp_path / f"{name}.nc")
        assert rc == 2 and f"{name}.nc" in err.splitlines()[-1] and "sectors" in err.splitlines()[-1], err
    ds.isel(snapshot=slice(0, 0)).to_netcdf(tmp_path / "none.nc")
    _fails(capsys, tmp_path, [tmp_path / "none.nc"], "none.nc", "0 snapshots")


def test_usage_errors_are_one_line(capsys, tmp_path):
    np.save(tmp_path / "x.npy", np.arange(100))
    for bad in (["--threshold", "abc"], ["--policy", "best"], ["--max-bytes", "nan"], ["--compressor"]):
        with pytest.raises(SystemExit) as exit_:
            _analyze(capsys, tmp_path / "x.npy", *bad)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and len(err.splitlines()) == 1 and "buddy analyze: error:" in err, err
    _fails(capsys, tmp_path, [tmp_path / "x.npy", "--threshold", "1.0000001"], "1.0000001 is outside")


def test_a_typed_memoryview_follows_the_array_rule():
    from buddylib import as_entries

    v = np.arange(1000, dtype=">i4").reshape(40, 25)
    assert np.array_equal(as_entries(memoryview(v)), as_entries(v.astype("<i4")))
    f = np.asfortranarray(v.astype("<i4"))
    assert np.array_equal(as_entries(memoryview(f)), as_entries(v.astype("<i4")))
