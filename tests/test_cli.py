"""The ``buddy`` command: ``buddy analyze`` on good and bad input, in-process and as the installed script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from buddylib import cli
from buddylib.cli import main

COMPRESSOR = "bpc32"
THRESHOLD = 0.3


@pytest.fixture
def files(tmp_path):
    """A small .npy (smooth floats), .npz (two arrays) and .safetensors."""
    from safetensors.numpy import save_file

    np.save(tmp_path / "act.npy", np.linspace(0, 1, 3000, dtype=np.float32))
    np.savez(tmp_path / "opt.npz", m=np.zeros(500, np.float32), idx=np.arange(700, dtype=np.int64))
    save_file({"w": np.random.default_rng(0).standard_normal(900).astype(np.float16)},
              str(tmp_path / "model.safetensors"))
    return tmp_path


def _analyze(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["analyze", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def _json(capsys, *args: str) -> dict:
    rc, out, err = _analyze(capsys, *args, "--json")
    assert rc == 0, err
    return json.loads(out)


def _fails(capsys, tmp_path: Path, args: list, *needles: str) -> str:
    """exit 2, one stderr line naming the problem, nothing on stdout, no --out file nor temp dir left."""
    out_file = tmp_path / "r.nc"
    before = set(tmp_path.iterdir())
    rc, out, err = _analyze(capsys, *args, "--out", out_file)
    assert rc == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("buddy analyze: error: ")
    for needle in needles:
        assert str(needle) in lines[0]
    assert not out_file.exists()
    assert set(tmp_path.iterdir()) == before  # no temporary files or folders left behind
    return lines[0]


# ------------------------------------------------------------------ bad input


def test_missing_file(capsys, tmp_path):
    _fails(capsys, tmp_path, [tmp_path / "missing.npy"], tmp_path / "missing.npy", "no such file")


def test_unreadable_directory_named_like_a_file(capsys, tmp_path):
    (tmp_path / "x.npy").mkdir()
    _fails(capsys, tmp_path, [tmp_path / "x.npy"], tmp_path / "x.npy", "directory")


def test_truncated_npy(capsys, tmp_path):
    path = tmp_path / "t.npy"
    np.save(path, np.arange(1000, dtype=np.float32))
    path.write_bytes(path.read_bytes()[:-10])
    _fails(capsys, tmp_path, [path], path, "truncated")


def test_truncated_npy_header(capsys, tmp_path):
    path = tmp_path / "h.npy"
    np.save(path, np.arange(1000, dtype=np.float32))
    path.write_bytes(path.read_bytes()[:40])
    _fails(capsys, tmp_path, [path], path, "not a readable .npy")


def test_not_an_npy_file(capsys, tmp_path):
    path = tmp_path / "junk.npy"
    path.write_bytes(b"hello world" * 20)
    _fails(capsys, tmp_path, [path], path, "not a readable .npy")


def test_truncated_safetensors(capsys, tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "m.safetensors"
    save_file({"w": np.ones((10, 10), np.float16)}, str(path))
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    _fails(capsys, tmp_path, [path], path, "truncated")
    path.write_bytes(data[:20])  # cut inside the header
    _fails(capsys, tmp_path, [path], path, "truncated")


def test_truncated_npz(capsys, tmp_path):
    path = tmp_path / "z.npz"
    np.savez(path, a=np.ones(100))
    path.write_bytes(path.read_bytes()[:-30])
    _fails(capsys, tmp_path, [path], path, "not a readable .npz")


def test_unknown_extension_without_dtype(capsys, tmp_path):
    path = tmp_path / "dump.bin"
    path.write_bytes(bytes(256))
    _fails(capsys, tmp_path, [path], path, "unknown file type", "--dtype")


def test_raw_size_not_a_multiple_of_the_dtype(capsys, tmp_path):
    path = tmp_path / "dump.bin"
    path.write_bytes(bytes(7))
    _fails(capsys, tmp_path, [path, "--dtype", "float32"], path, "not a multiple", "float32")


def test_raw_shape_does_not_match(capsys, tmp_path):
    path = tmp_path / "dump.bin"
    path.write_bytes(bytes(64))
    _fails(capsys, tmp_path, [path, "--dtype", "float32", "--shape", "3,4"], path, "shape")


def test_shape_without_dtype(capsys, tmp_path, files):
    _fails(capsys, tmp_path, [files / "act.npy", "--shape", "10,300"], "--shape", "--dtype")


def test_an_empty_shape_is_a_usage_error_not_no_shape(capsys, tmp_path):
    path = tmp_path / "dump.bin"
    path.write_bytes(bytes(64))
    _fails(capsys, tmp_path, [path, "--dtype", "float32", "--shape", ""], "--shape ''", "64,128")


def test_all_zero_data_reads_as_all_zero_not_inf(capsys, tmp_path):
    np.savez(tmp_path / "z.npz", zeros=np.zeros(1024, np.float32), ones=np.ones(1024, np.float32))
    rc, out, _ = _analyze(capsys, tmp_path / "z.npz")
    assert rc == 0 and "inf" not in out
    zeros = next(line for line in out.splitlines() if line.startswith("zeros"))
    assert zeros.count("all zero") == 5  # every compressor's ideal column
    np.save(tmp_path / "only.npy", np.zeros(4096, np.float32))
    rc, out, _ = _analyze(capsys, tmp_path / "only.npy")
    assert rc == 0 and "inf" not in out and "ideal ratio unbounded (all zero" in out
    assert _json(capsys, tmp_path / "only.npy")["total"]["ideal bpc32"] is None  # JSON has no infinity


def test_structured_dtypes_keep_non_ascii_field_names(capsys, tmp_path):
    dt = np.dtype([("tempé", "<f4"), ("ß", "<i4"), ("x", "<f4")])
    np.save(tmp_path / "s.npy", np.arange(192, dtype=np.float32).view(dt))
    label = str(dt.descr)
    rc, out, _ = _analyze(capsys, tmp_path / "s.npy", "--out", tmp_path / "s.nc")
    assert rc == 0 and label in out
    assert _json(capsys, tmp_path / "s.npy")["allocations"][0]["dtype"] == label
    import xarray as xr

    with xr.open_dataset(tmp_path / "s.nc") as ds:
        assert str(ds.dtype.values[0]) == label


def test_empty_array(capsys, tmp_path):
    path = tmp_path / "empty.npy"
    np.save(path, np.zeros((0,), np.float32))
    _fails(capsys, tmp_path, [path], path, "empty")


def test_object_array(capsys, tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([1, "a", None], dtype=object), allow_pickle=True)
    _fails(capsys, tmp_path, [path], path, "Python objects")


def test_str_array(capsys, tmp_path):
    path = tmp_path / "str.npy"
    np.save(path, np.array(["ab", "cd"]))
    _fails(capsys, tmp_path, [path], path, "text")


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan"])
def test_threshold_outside_0_1(capsys, tmp_path, files, value):
    _fails(capsys, tmp_path, [files / "act.npy", "--threshold", value], "threshold", value)


def test_unknown_compressor(capsys, tmp_path, files):
    _fails(capsys, tmp_path, [files / "act.npy", "--compressor", "lzma"], "compressor", "lzma")


def test_unknown_target(capsys, tmp_path, files):
    _fails(capsys, tmp_path, [files / "act.npy", "--targets", "3"], "target", "3")


def test_out_folder_missing(capsys, tmp_path, files):
    rc, out, err = _analyze(capsys, files / "act.npy", "--out", tmp_path / "nodir" / "r.nc")
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("buddy analyze: error: --out ") and "does not exist" in err


def test_checkpoint_without_torch(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError, as without it
    path = tmp_path / "model.pt"
    path.write_bytes(b"PK\x03\x04 a checkpoint")
    _fails(capsys, tmp_path, [path], path, "torch")


def test_nan_and_inf_are_just_data(capsys, tmp_path):
    f32 = np.linspace(-1, 1, 2000, dtype=np.float32)
    f32[::7] = np.nan
    f32[1::11] = np.inf
    f32[2::13] = -np.inf
    np.save(tmp_path / "f32.npy", f32)
    np.save(tmp_path / "f16.npy", f32.astype(np.float16))
    rc, out, err = _analyze(capsys, tmp_path / "f32.npy", tmp_path / "f16.npy")
    assert rc == 0, err
    assert "f32.npy:f32" in out and "f16.npy:f16" in out
    assert "\nTOTAL " in out and "effective ratio" in out
    doc = _json(capsys, tmp_path / "f32.npy")
    # NaN and inf are compressed as the bytes they are: the ideal ratio is the compressor's own, by hand
    from buddylib import compressors

    stored = 32 * int(compressors.sectors(f32, COMPRESSOR).sum())
    assert doc["total"][f"ideal {COMPRESSOR}"] == f32.nbytes / stored
    total = doc["total"]
    assert total["effective"] == total["bytes"] / total["device bytes"]  # device bytes include the metadata


# ------------------------------------------------------------------ good input


def test_table(capsys, files):
    paths = (files / "act.npy", files / "opt.npz", files / "model.safetensors")
    rc, out, err = _analyze(capsys, *paths)
    assert rc == 0, err
    doc = _json(capsys, *paths)
    lines = out.splitlines()
    for c in ("bpc32", "bpc64", "bdi", "fpc", "zvc"):
        assert f"ideal {c}" in lines[0]
    rows = {ln.split()[0]: ln.split() for ln in lines[2:] if ln.strip() and not ln.startswith(("effective", "---"))}
    assert set(rows) == {a["allocation"] for a in doc["allocations"]} | {"TOTAL"}
    # every allocation's printed ideal ratios and effective ratio are the JSON's numbers, rounded
    for a in doc["allocations"]:
        row = rows[a["allocation"]]
        for c in ("bpc32", "bpc64", "bdi", "fpc", "zvc"):
            ideal = a[f"ideal {c}"]  # all zeros: no sector at all, "all zero" in the table, null in JSON
            assert ("all" if ideal is None else f"{ideal:.3f}") in row, (a["allocation"], c)
        assert row[-1] == f"{a['effective']:.3f}"
    assert rows["TOTAL"][-1] == f"{doc['total']['effective']:.3f}"
    assert lines[-1].startswith(f"effective ratio {doc['total']['effective']:.3f}x with {COMPRESSOR}")


def test_single_path_names_are_not_prefixed(capsys, files):
    doc = _json(capsys, files / "opt.npz")
    assert sorted(a["allocation"] for a in doc["allocations"]) == ["idx", "m"]


def test_json_and_out_agree(capsys, tmp_path, files):
    import xarray as xr

    out_file = tmp_path / "r.nc"
    rc, out, err = _analyze(capsys, files / "act.npy", files / "opt.npz", "--json", "--out", out_file)
    assert rc == 0, err
    doc = json.loads(out)
    assert (doc["compressor"], doc["threshold"], doc["policy"]) == (COMPRESSOR, THRESHOLD, "profile")
    names = [a["allocation"] for a in doc["allocations"]]
    assert sorted(names) == ["act.npy:act", "opt.npz:idx", "opt.npz:m"]
    total = doc["total"]
    assert total["bytes"] == 3000 * 4 + 500 * 4 + 700 * 8 == sum(a["bytes"] for a in doc["allocations"])
    assert total["device bytes"] < total["bytes"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["act.npy", "model.safetensors", "opt.npz", "r.nc"]
    with xr.open_dataset(out_file) as ds:
        eff = float(ds.effective_ratio.sel(compressor=COMPRESSOR, threshold=THRESHOLD).isel(snapshot=-1))
        assert [str(a) for a in ds.allocation.values] == names
        ideal = ds.ideal_ratio.sel(compressor=COMPRESSOR).isel(snapshot=-1)
        by_name = {a["allocation"]: a for a in doc["allocations"]}
        for name in names:
            value = float(ideal.sel(allocation=name))
            assert by_name[name][f"ideal {COMPRESSOR}"] == (value if np.isfinite(value) else None)
    assert eff == total["effective"]
    assert eff > 1


def test_out_zarr(capsys, tmp_path, files):
    import xarray as xr

    rc, _, err = _analyze(capsys, files / "act.npy", "--out", tmp_path / "r.zarr", "--compressor", "bdi", "zvc")
    assert rc == 0, err
    assert err.splitlines() == [f"wrote {tmp_path / 'r.zarr'}"]  # no warnings
    with xr.open_dataset(tmp_path / "r.zarr", engine="zarr", consolidated=False) as ds:
        assert list(ds.compressor.values) == ["bdi", "zvc"]
        assert list(ds.allocation.values) == ["act"]


def test_raw_dump(capsys, tmp_path):
    arr = np.arange(4096, dtype=np.int32).reshape(64, 64)
    arr.tofile(tmp_path / "mem.raw")
    doc = _json(capsys, tmp_path / "mem.raw", "--dtype", "int32", "--shape", "64x64")
    [a] = doc["allocations"]
    assert (a["allocation"], a["dtype"], a["bytes"]) == ("mem", "int32", arr.nbytes)


def test_zarr_input(capsys, tmp_path):
    import zarr

    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    g.create_array("u", shape=(1000,), chunks=(300,), dtype="float32")[:] = np.linspace(0, 1, 1000)
    g.create_array("v", shape=(50,), dtype="int8")[:] = 0
    doc = _json(capsys, tmp_path / "s.zarr", "--compressor", "bpc32", "bdi", "--threshold", "0.1")
    assert [a["allocation"] for a in doc["allocations"]] == ["u", "v"]
    assert doc["threshold"] == 0.1
    assert doc["total"]["bytes"] == 4000 + 50


def test_options_change_the_result(capsys, files):
    """Each option is honoured: an ignored one would leave the numbers as they are."""
    def targets(doc):
        return {a["allocation"]: a["target"] for a in doc["allocations"]}

    base = _json(capsys, files / "opt.npz")  # m: all zeros (0 sectors per entry); idx: 0..699 as int64
    assert targets(base) == {"m": 4.0, "idx": 4.0}
    extended = _json(capsys, files / "opt.npz", "--targets", "1", "2", "4", "8", "16")
    assert targets(extended)["m"] == 16.0 and extended["total"]["effective"] > base["total"]["effective"]
    act = _json(capsys, files / "act.npy")
    strict = _json(capsys, files / "act.npy", "--threshold", "0")
    assert strict["threshold"] == 0 and strict["total"]["effective"] < act["total"]["effective"]
    mixed = [files / "model.safetensors", files / "opt.npz"]  # random fp16 beside zeros: one target cannot suit both
    one = _json(capsys, *mixed, "--policy", "global")
    assert one["policy"] == "global" and len(set(targets(one).values())) == 1
    assert len(set(targets(_json(capsys, *mixed)).values())) > 1
    no_flag = _json(capsys, files / "opt.npz", "--no-zero-flag")
    assert no_flag["total"][f"ideal {COMPRESSOR}"] < base["total"][f"ideal {COMPRESSOR}"]  # zeros take a sector


# ------------------------------------------------------------------ dask scheduler


def test_scheduler_gives_the_same_numbers(capsys, tmp_path, files):
    import zarr
    from distributed import LocalCluster

    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    g.create_array("u", shape=(5000,), chunks=(1000,), dtype="float32")[:] = np.linspace(0, 1, 5000)
    paths = [files / "act.npy", files / "opt.npz", files / "model.safetensors", tmp_path / "s.zarr"]
    local = _json(capsys, *paths)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        remote = _json(capsys, *paths, "--scheduler", cluster.scheduler_address)
    assert remote == local
    assert len(local["allocations"]) == 5


def test_scheduler_unreachable(capsys, tmp_path, files, monkeypatch):
    monkeypatch.setattr(cli, "CONNECT_TIMEOUT", "1s")  # the message, not dask's retries, is what is checked
    _fails(capsys, tmp_path, [files / "act.npy", "--scheduler", "tcp://127.0.0.1:1"],
           "--scheduler tcp://127.0.0.1:1", "cannot connect")


# ------------------------------------------------------------------ help and the installed script


@pytest.mark.parametrize("command", [[], ["bench"], ["analyze"], ["reproduce"], ["capture"]])
def test_help_on_every_command(capsys, command):
    with pytest.raises(SystemExit) as info:
        main([*command, "--help"])
    assert info.value.code == 0
    assert "usage: buddy" in capsys.readouterr().out


def test_installed_entry_point():
    script = Path(sys.executable).with_name("buddy")
    buddy = str(script) if script.exists() else shutil.which("buddy")
    assert buddy, "the buddy script is not installed (pip install -e .)"
    top = subprocess.run([buddy, "--help"], capture_output=True, text=True, timeout=60)
    assert top.returncode == 0, top.stderr
    assert "analyze" in top.stdout and "bench" in top.stdout and "reproduce" in top.stdout
    sub = subprocess.run([buddy, "analyze", "--help"], capture_output=True, text=True, timeout=60)
    assert sub.returncode == 0, sub.stderr
    for option in ("--dtype", "--shape", "--out", "--json", "--scheduler", "--threshold", "--compressor"):
        assert option in sub.stdout
    bad = subprocess.run([buddy, "analyze", "missing.npy"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "buddy analyze: error: missing.npy: no such file or directory"


def test_analyze_a_saved_workload_run(tmp_path: Path, capsys) -> None:
    """`buddy analyze` reads a run saved by `buddy workloads run`: the same numbers as analysing it in Python."""
    from buddylib import analysis, snapshot, workloads

    path = workloads.get("ostencil").run("quick", seed=0, compressors=["bpc32", "bdi"]).save(tmp_path)
    rc, out, err = _analyze(capsys, path, "--compressor", "bdi", "--json")
    assert rc == 0 and "saved run of ostencil, 8 snapshots" in err
    ds = analysis.analyze(snapshot.load(path), ["bdi"], thresholds=[0.3])
    assert json.loads(out)["total"]["effective"] == pytest.approx(float(ds.effective_ratio.isel(snapshot=-1).item()))
    rc, out, err = _analyze(capsys, path, "--compressor", "zvc")  # sectors not recorded, bytes not kept
    assert rc == 2 and "records sectors for bdi, bpc32, not zvc" in err
    bad = tmp_path / "bad.nc"
    bad.write_text("not netCDF")
    rc, out, err = _analyze(capsys, bad)
    assert rc == 2 and err.startswith(f"buddy analyze: error: {bad}: not a run saved by buddylib")


def test_analyze_plot_draws_the_explorers_picture(files: Path, capsys) -> None:
    """``--plot``: the per-allocation picture of notebook 00, with the numbers the table prints."""
    from matplotlib.figure import Figure

    from buddylib import analysis, explore

    out = files / "picture.png"
    drawn: list[Figure] = []
    real = explore.draw
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(explore, "draw", lambda *a, **k: drawn.append(real(*a, **k)) or drawn[-1])
        rc, _, err = _analyze(capsys, files / "opt.npz", "--plot", out, "--compressor", COMPRESSOR)
    assert rc == 0, err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {out}" in err
    assert not [p for p in files.iterdir() if p.name.startswith(".picture")]  # no temporary left
    ds = analysis.analyze({"m": np.zeros(500, np.float32), "idx": np.arange(700, dtype=np.int64)}, [COMPRESSOR],
                          thresholds=[THRESHOLD], progress=False)
    table = analysis.allocation_table(ds, COMPRESSOR, THRESHOLD)
    ax = drawn[0].axes[0]
    device = {t.get_text(): p.get_width() for t, p in
              zip(ax.get_yticklabels(), [p for p in ax.patches if p.get_gid() == "device"], strict=True)}
    unit = {"MiB": 1 << 20, "KiB": 1 << 10, "B": 1}[ax.get_xlabel().split("(")[1].rstrip(")")]
    assert device == pytest.approx({k: v / unit for k, v in table["device bytes"].items()})
    assert f"{float(ds.effective_ratio.squeeze()):.2f}x" in drawn[0].axes[2].get_title()


@pytest.mark.parametrize(("name", "message"), [
    ("picture.jpg", "unknown image type '.jpg'"),
    ("picture", "unknown image type '(no extension)'"),
    ("no-such-folder/picture.png", "does not exist"),
    ("act.npy/picture.png", "does not exist"),  # under a file, not a folder
    ("folder.png", "exists and is not a regular file"),
])
def test_analyze_plot_bad_paths_are_clear_errors(files: Path, capsys, name: str, message: str) -> None:
    (files / "folder.png").mkdir()
    rc, out, err = _analyze(capsys, files / "act.npy", "--plot", files / name)
    assert rc == 2 and message in err and err.startswith("buddy analyze: error: --plot") and not out


def test_analyze_plot_refuses_to_overwrite_an_input(files: Path, capsys) -> None:
    src = files / "act.png"
    src.write_bytes(b"not an image")
    rc, _, err = _analyze(capsys, src, "--dtype", "uint8", "--plot", src)
    assert rc == 2 and "is an input" in err and src.read_bytes() == b"not an image"


def test_16_bit_floats_get_their_code_by_default(capsys, tmp_path):
    """A checkpoint in bf16 or fp16 is analysed with the code made for 16-bit floats beside the paper's five;
    float32 data, or an explicit --compressor, without it."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    w = torch.randn(64 * 300, generator=torch.Generator().manual_seed(0)) * 0.02
    save_file({"w": w.to(torch.bfloat16), "h": w.half(), "f": w}, str(tmp_path / "m.safetensors"))
    rc, out, _ = _analyze(capsys, tmp_path / "m.safetensors")
    assert rc == 0 and "ideal ebo-bf16" in out and "ideal ebo-fp16" in out and "ideal bpc32" in out
    rows = {r["allocation"]: r for r in _json(capsys, tmp_path / "m.safetensors")["allocations"]}
    assert rows["w"]["ideal ebo-bf16"] > 1.3 > rows["w"]["ideal bpc32"]
    rc, out, _ = _analyze(capsys, tmp_path / "m.safetensors", "--compressor", "bpc32")
    assert rc == 0 and "ebo" not in out
    np.save(tmp_path / "f.npy", w.numpy())
    rc, out, _ = _analyze(capsys, tmp_path / "f.npy")
    assert rc == 0 and "ebo" not in out and "ideal zvc" in out
