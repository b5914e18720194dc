"""buddylib.userdata.readers: every format reads back exactly the bytes its file holds."""

from __future__ import annotations

import json
import struct
import sys

import numpy as np
import pytest

from buddylib.userdata import readers


def _bytes(alloc) -> bytes:
    data = alloc.data
    if type(data).__module__.startswith("dask"):
        data = data.compute()
    return np.asarray(data).tobytes()


def _check(alloc, name: str, arr: np.ndarray, dtype: str | None = None) -> None:
    assert alloc.name == name
    assert alloc.dtype == (dtype or str(arr.dtype))
    assert alloc.shape == arr.shape
    assert alloc.nbytes == arr.nbytes
    assert _bytes(alloc) == arr.tobytes()


ARRAYS = {
    "f32": np.linspace(-3, 3, 1000, dtype=np.float32).reshape(10, 100),
    "f16": np.arange(300, dtype=np.float16),
    "i64": np.arange(-50, 77, dtype=np.int64),
    "u8": np.arange(255, dtype=np.uint8),
    "b": np.arange(33) % 3 == 0,
}


@pytest.mark.parametrize("key", list(ARRAYS))
def test_npy(tmp_path, key):
    arr = ARRAYS[key]
    path = tmp_path / f"{key}.npy"
    np.save(path, arr)
    [alloc] = readers.read(path)
    _check(alloc, key, arr)
    assert alloc.source is not None and alloc.source[0] == str(path)
    with open(path, "rb") as f:  # the recorded offset is where the data sits in the file
        f.seek(alloc.source[1])
        assert f.read() == arr.tobytes()


def test_one_memory_order_and_byte_order_for_every_format(tmp_path):
    """An array's bytes are its elements in logical C order, little-endian, whatever the file holds."""
    import zarr

    arr = np.arange(12.0).reshape(3, 4)
    np.save(tmp_path / "f.npy", np.asfortranarray(arr))
    np.save(tmp_path / "b.npy", arr.astype(">f8"))
    np.savez(tmp_path / "z.npz", f=np.asfortranarray(arr), b=arr.astype(">f8"))
    arr.astype(">f8").tofile(tmp_path / "raw.bin")
    zarr.open_array(str(tmp_path / "s.zarr"), mode="w", shape=arr.shape, dtype=">f8", zarr_format=2,
                    order="F")[:] = arr
    allocs = [*readers.read(tmp_path / "f.npy"), *readers.read(tmp_path / "b.npy"), *readers.read(tmp_path / "z.npz"),
              *readers.read(tmp_path / "raw.bin", dtype=">f8", shape=(3, 4)), *readers.read(tmp_path / "s.zarr")]
    assert len(allocs) == 6
    for a in allocs:
        assert (a.shape, a.dtype, _bytes(a)) == ((3, 4), "float64", arr.tobytes()), a.name


def test_npy_prefix(tmp_path):
    np.save(tmp_path / "x.npy", ARRAYS["u8"])
    [alloc] = readers.read(tmp_path / "x.npy", prefix="x.npy:")
    assert alloc.name == "x.npy:x"


def test_npz_two_arrays(tmp_path):
    path = tmp_path / "two.npz"
    np.savez(path, weights=ARRAYS["f32"], index=ARRAYS["i64"])
    allocs = {a.name: a for a in readers.read(path)}
    assert set(allocs) == {"weights", "index"}
    _check(allocs["weights"], "weights", ARRAYS["f32"])
    _check(allocs["index"], "index", ARRAYS["i64"])


def test_npz_compressed(tmp_path):
    path = tmp_path / "c.npz"
    np.savez_compressed(path, a=ARRAYS["f16"])
    [alloc] = readers.read(path)
    _check(alloc, "a", ARRAYS["f16"])


def test_safetensors_several_dtypes(tmp_path):
    from safetensors.numpy import save_file

    tensors = {k: ARRAYS[k] for k in ("f32", "f16", "i64", "u8")}
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path))
    allocs = {a.name: a for a in readers.read(path)}
    assert set(allocs) == set(tensors)
    for k, arr in tensors.items():
        _check(allocs[k], k, arr)


def _write_safetensors(path, header: dict, data: bytes) -> None:
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + data)


def test_safetensors_bfloat16_raw_bytes(tmp_path):
    # bfloat16 = the upper half of a float32; numpy has no such dtype, the reader keeps the raw bytes
    f32 = np.array([1.0, -2.5, 3.0e38, 0.0, np.inf, 7.0], dtype=np.float32).reshape(2, 3)
    bf16 = (f32.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    other = np.arange(4, dtype=np.int32)
    path = tmp_path / "bf.safetensors"
    _write_safetensors(path, {"__metadata__": {"format": "pt"},
                              "w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
                              "n": {"dtype": "I32", "shape": [4], "data_offsets": [12, 28]}},
                       bf16 + other.tobytes())
    allocs = {a.name: a for a in readers.read(path)}
    assert set(allocs) == {"w", "n"}
    w = allocs["w"]
    assert (w.dtype, w.shape, w.nbytes) == ("bfloat16", (2, 3), 12)
    assert _bytes(w) == bf16
    _check(allocs["n"], "n", other)


def test_safetensors_bad_offsets(tmp_path):
    path = tmp_path / "bad.safetensors"
    _write_safetensors(path, {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}, bytes(16))
    with pytest.raises(ValueError, match=r"bad\.safetensors.*'w'"):
        readers.read(path)


def test_zarr_v3_group_two_arrays(tmp_path):
    import zarr

    a = np.arange(100, dtype=np.float32) / 7
    b = np.arange(200, dtype=np.int16).reshape(10, 20)
    path = tmp_path / "store.zarr"
    g = zarr.open_group(str(path), mode="w")
    g.create_array("a", shape=a.shape, chunks=(30,), dtype=a.dtype)[:] = a
    g.create_array("b", shape=b.shape, chunks=(5, 5), dtype=b.dtype)[:] = b
    allocs = readers.read(path)
    assert [x.name for x in allocs] == ["a", "b"]  # sorted: the same order on every file system
    _check(allocs[0], "a", a)
    _check(allocs[1], "b", b)


def test_zarr_group_without_suffix(tmp_path):
    import zarr

    a = np.arange(64, dtype=np.uint16)
    g = zarr.open_group(str(tmp_path / "plain"), mode="w")
    g.create_array("x", shape=a.shape, dtype=a.dtype)[:] = a
    [alloc] = readers.read(tmp_path / "plain", prefix="plain:")
    _check(alloc, "plain:x", a)


def test_raw_dump_with_dtype_and_shape(tmp_path):
    arr = np.arange(24, dtype=np.float32).reshape(4, 6)
    path = tmp_path / "dump.bin"
    arr.tofile(path)
    [alloc] = readers.read(path, dtype="float32", shape=(4, 6))
    _check(alloc, "dump", arr)
    [flat] = readers.read(path, dtype="int16")
    _check(flat, "dump", arr.view(np.int16).reshape(-1))


def test_raw_dump_shape_mismatch(tmp_path):
    path = tmp_path / "dump.bin"
    np.zeros(10, np.float32).tofile(path)
    with pytest.raises(ValueError, match=r"dump\.bin: shape \(3, 4\)"):
        readers.read(path, dtype="float32", shape=(3, 4))


@pytest.mark.parametrize("dtype", ["float33", "object", "U4"])
def test_raw_dump_bad_dtype(tmp_path, dtype):
    path = tmp_path / "dump.bin"
    path.write_bytes(bytes(64))
    with pytest.raises(ValueError, match=r"dump\.bin: "):
        readers.read(path, dtype=dtype)


@pytest.mark.parametrize("suffix", [".pt", ".pth"])
def test_checkpoint_without_torch(tmp_path, suffix, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError, as without it
    path = tmp_path / f"model{suffix}"
    path.write_bytes(b"PK\x03\x04 not really a checkpoint")
    with pytest.raises(ValueError, match="torch") as info:
        readers.read(path)
    assert str(info.value).startswith(str(path))


def test_errors_start_with_the_path(tmp_path):
    np.save(tmp_path / "e.npy", np.zeros(0, np.float32))  # empty arrays are skipped: nothing is left
    (tmp_path / "junk.npy").write_bytes(b"hello world" * 10)
    (tmp_path / "x.txt").write_bytes(b"abc")
    (tmp_path / "d.npy").mkdir()
    for name in ("e.npy", "junk.npy", "x.txt", "d.npy"):
        with pytest.raises(ValueError) as info:
            readers.read(tmp_path / name)
        assert str(info.value).startswith(str(tmp_path / name) + ": ")
    with pytest.raises(FileNotFoundError, match="no such file"):
        readers.read(tmp_path / "missing.npy")


def test_pytorch_state_dict_bytes(tmp_path):
    torch = pytest.importorskip("torch")
    sd = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4), "opt": {"m": [torch.ones(5, dtype=torch.bfloat16)]}}
    torch.save(sd, tmp_path / "m.pt")
    got = {a.name: a for a in readers.read(tmp_path / "m.pt")}
    assert set(got) == {"w", "opt.m.0"}
    assert got["w"].dtype == "float32" and got["w"].shape == (3, 4)
    assert np.asarray(got["w"].data).tobytes() == sd["w"].numpy().tobytes()
    assert got["opt.m.0"].dtype == "bfloat16" and got["opt.m.0"].nbytes == 10


def _npy_v3(path, arr: np.ndarray) -> None:
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=(3, 0))


def test_npy_format_3_utf8_field_name(tmp_path):
    """A format 3.0 header is UTF-8: a non-ASCII field name reads as numpy reads it, in a .npy and a .npz."""
    arr = np.arange(6, dtype=np.float32).view([("ü数", "<f4")])
    _npy_v3(tmp_path / "u.npy", arr)
    assert (tmp_path / "u.npy").read_bytes()[6:8] == b"\x03\x00"
    label = str(np.load(tmp_path / "u.npy").dtype)
    assert label == "[('ü数', '<f4')]"
    [alloc] = readers.read(tmp_path / "u.npy")
    _check(alloc, "u", arr, dtype=label)
    with pytest.warns(UserWarning, match="format 3.0"):  # numpy picks 3.0 for a name latin-1 cannot spell
        np.savez(tmp_path / "u.npz", u=arr)
    [member] = readers.read(tmp_path / "u.npz")
    _check(member, "u", arr, dtype=str(np.load(tmp_path / "u.npz")["u"].dtype))


def test_npy_format_1_and_2_headers_stay_latin1(tmp_path):
    arr = np.arange(4, dtype=np.int16).view([("ü", "<i2")])  # latin-1 can spell it: numpy writes 1.0
    for version in ((1, 0), (2, 0)):
        path = tmp_path / f"v{version[0]}.npy"
        with open(path, "wb") as f:
            np.lib.format.write_array(f, arr, version=version)
        [alloc] = readers.read(path)
        _check(alloc, f"v{version[0]}", arr, dtype=str(np.load(path).dtype))


def _bad_utf8_v3(path) -> None:
    _npy_v3(path, np.arange(3, dtype=np.float32).view([("ab", "<f4")]))
    data = path.read_bytes()
    at = data.index(b"'ab'") + 1
    path.write_bytes(data[:at] + b"\xff\xfe" + data[at + 2:])  # same length, not UTF-8


def test_npy_format_3_header_not_utf8(tmp_path):
    path = tmp_path / "bad.npy"
    _bad_utf8_v3(path)
    with pytest.raises(ValueError) as info:
        readers.read(path)
    message = str(info.value)
    assert message.startswith(f"{path}: not a readable .npy array") and "not UTF-8" in message
    assert "\n" not in message


def test_npz_member_format_3_header_not_utf8(tmp_path):
    import zipfile

    _bad_utf8_v3(tmp_path / "m.npy")
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as z:
        z.write(tmp_path / "m.npy", "m.npy")
    with pytest.raises(ValueError) as info:
        readers.read(tmp_path / "bad.npz")
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'bad.npz'}: array 'm' is not a readable .npy member")
    assert "\n" not in message


BAD_V3_HEADERS = [
    b"[1, 2]",  # not a dict
    b"{'descr': '<f4', 'shape': (2,)}",  # a key missing
    b"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",  # fortran_order not a bool
    b"{'descr': 'xyz', 'fortran_order': False, 'shape': (2,)}",  # no such dtype
    b"{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,)}",  # shape not integers
    b"{'descr': '<f4' 'fortran_order'",  # not Python
]


@pytest.mark.parametrize("header", BAD_V3_HEADERS)
def test_npy_format_3_bad_header_refused(tmp_path, header):
    """numpy's header checks hold for 3.0 as for 1.0 and 2.0: numpy refuses it, so does the reader."""
    path = tmp_path / "h.npy"
    path.write_bytes(b"\x93NUMPY\x03\x00" + struct.pack("<I", len(header)) + header + bytes(8))
    with pytest.raises((ValueError, SyntaxError)):
        np.load(path)
    with pytest.raises(ValueError) as info:
        readers.read(path)
    assert str(info.value).startswith(f"{path}: not a readable .npy array (")


@pytest.mark.parametrize("tail", [b"\x10\x00", struct.pack("<I", 1 << 31) + b"{}", struct.pack("<I", 64) + b"{}"])
def test_npy_format_3_truncated_or_huge_header(tmp_path, tail):
    path = tmp_path / "t.npy"
    path.write_bytes(b"\x93NUMPY\x03\x00" + tail)
    with pytest.raises(ValueError) as info:
        readers.read(path)
    assert str(info.value).startswith(f"{path}: not a readable .npy array (")


def test_float8_e4m3_label_is_torchs(tmp_path):
    """safetensors' F8_E4M3 is torch's and ml_dtypes' float8_e4m3fn: every reader gives that one label."""
    data = bytes(range(6))
    _write_safetensors(tmp_path / "f8.safetensors", {"a": {"dtype": "F8_E4M3", "shape": [2, 3],
                                                           "data_offsets": [0, 6]}}, data)
    [alloc] = readers.read(tmp_path / "f8.safetensors")
    assert (alloc.dtype, alloc.shape, _bytes(alloc)) == ("float8_e4m3fn", (2, 3), data)
    torch = pytest.importorskip("torch")
    assert str(torch.float8_e4m3fn) == "torch.float8_e4m3fn"
    t = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(torch.float8_e4m3fn).reshape(2, 3)
    torch.save({"a": t}, tmp_path / "f8.pt")
    [from_torch] = readers.read(tmp_path / "f8.pt")
    assert (from_torch.dtype, from_torch.shape, _bytes(from_torch)) == ("float8_e4m3fn", (2, 3), data)
    from safetensors.torch import save_file

    save_file({"a": t}, str(tmp_path / "st.safetensors"))  # safetensors' own code for torch's type
    [from_st] = readers.read(tmp_path / "st.safetensors")
    assert (from_st.dtype, _bytes(from_st)) == ("float8_e4m3fn", data)
