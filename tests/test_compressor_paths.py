"""The serial and the parallel kernels of every compressor: the same results bit for bit, and the
serial ones for small inputs, with no lock; and every result equal to what the code gave before its
kernels were rewritten for speed (a digest recorded from that code, commit a527eb0)."""

from __future__ import annotations

import hashlib
import threading

import numpy as np
import pytest

from buddylib import compressors
from buddylib.compressors import abc, bdi, bpc_kernels, ebo, fpc, zvc
from buddylib.compressors.bdi import BDI
from buddylib.compressors.bpc import BPC

#: SHA-256 of :func:`_digest` over :func:`_inputs`, computed with the kernels of commit a527eb0.
DIGEST_BEFORE_SPEEDUP = "af6d1ff31277003bc6de24f22e64305d55097ed7509d5286ca68c66d7abb08dc"
SERIAL, PARALLEL = 1 << 62, 0  # PARALLEL_MIN_ENTRIES that send every input one way


def _planes_entries(rng: np.random.Generator, n: int, width: int) -> np.ndarray:
    """Entries whose DBX planes are drawn from every class: zero, all ones, one bit, two adjacent bits, raw,
    DBP zero (the plane repeats the one above); base words of every base class."""
    nw, mask = 1024 // width, (1 << width) - 1
    npb = nw - 1
    out = np.empty((n, nw), dtype=np.uint64 if width == 64 else np.uint32)
    bases = [0, 1, -1, 7, -8, 100, -129, 30000, -40000, 1 << 40, -(1 << 62)]
    for e in range(n):
        planes, prev = [], 0
        for _ in range(width):
            c = int(rng.integers(0, 6))
            x = (0, (1 << npb) - 1, 1 << int(rng.integers(0, npb)), 3 << int(rng.integers(0, npb - 1)),
                 int(rng.integers(0, 1 << npb)), prev)[c]
            planes.append(x)
            prev = x
        words = [bases[int(rng.integers(0, len(bases)))] & mask]
        for i in range(npb):
            words.append((words[-1] + sum(((planes[b] >> i) & 1) << b for b in range(width))) & mask)
        out[e] = words
    return out.view(np.uint8).reshape(n, 128)


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20240611)
    t = np.arange(3000 * 16, dtype=np.float64) / 4096  # smooth float64 from exact arithmetic only
    d = {"smooth": (300.0 + t * (t - 3.0) / 7.0).view(np.uint8).reshape(-1, 128)}
    coarse = np.repeat(rng.integers(-(1 << 20), 1 << 20, 3000 * 4), 8).astype(np.float32) / (1 << 18)
    sparse = np.maximum(coarse + rng.integers(-64, 64, coarse.size) / np.float32(256), 0)
    d["sparse"] = sparse.view(np.uint8).reshape(-1, 128)
    d["bytes"] = rng.integers(0, 256, (3000, 128), dtype=np.uint8)
    d["small"] = rng.integers(-300, 300, (3000, 32)).astype(np.int32).view(np.uint8).reshape(-1, 128)
    d["walk64"] = np.cumsum(rng.integers(-(1 << 40), 1 << 40, 3000 * 16)).view(np.uint8).reshape(-1, 128)
    edge = np.array([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x7FFF, 0x8000, 0xFFFF0000, 0x01010101], np.uint32)
    d["edge"] = rng.choice(edge, 3000 * 32).view(np.uint8).reshape(-1, 128)
    relu = rng.integers(-(1 << 24), 1 << 24, 3000 * 32).astype(np.float32) / np.float32(1 << 20)
    relu[relu < 0] = 0
    d["relu"] = relu.view(np.uint8).reshape(-1, 128)
    d["planes32"] = _planes_entries(rng, 400, 32)
    d["planes64"] = _planes_entries(rng, 400, 64)
    d["zeros"] = np.zeros((5, 128), np.uint8)
    return d


def _digest(d: dict[str, np.ndarray]) -> str:
    """Every result the compressors give: bits, sectors (zero flag on and off), BDI encodings, BPC streams."""
    h = hashlib.sha256()
    for x in d.values():
        for name in compressors.ALL_COMPRESSORS:  # those of that day (tests/test_ebo.py checks the later ones)
            comp = compressors.get(name)
            h.update(comp.bits(x).tobytes())
            h.update(comp.sectors(x).tobytes())
            h.update(comp.sectors(x, zero_flag=False).tobytes())
        h.update(BDI().encodings(x).tobytes())
        for w in (32, 64):
            h.update(BPC(w).encode(x))
    return h.hexdigest()


@pytest.fixture(scope="module")
def inputs() -> dict[str, np.ndarray]:
    return _inputs()


@pytest.mark.parametrize("threshold", [SERIAL, PARALLEL], ids=["serial", "parallel"])
def test_results_unchanged_by_the_speedup(inputs: dict[str, np.ndarray], threshold: int,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(abc, "PARALLEL_MIN_ENTRIES", threshold)
    assert _digest(inputs) == DIGEST_BEFORE_SPEEDUP


@pytest.mark.parametrize("n", [1, 255, 256, 257, 1000, 3000])
def test_serial_and_parallel_agree(inputs: dict[str, np.ndarray], n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Around the kernels' chunk size (256 entries), damaged streams included."""
    x = np.concatenate([v[: max(1, n // 4)] for v in inputs.values()])[:n]
    damaged = {}
    out = {}
    for threshold in (SERIAL, PARALLEL):
        monkeypatch.setattr(abc, "PARALLEL_MIN_ENTRIES", threshold)
        res = [compressors.get(name).bits(x) for name in compressors.names()]
        res += [compressors.get(name).sectors(x, zero_flag=False) for name in compressors.names()]
        res.append(BDI().encodings(x))
        for w in (32, 64):
            lengths, payload = BPC(w).encode_entries(x)
            res += [lengths, payload, BPC(w).decode_entries(lengths, payload)]
            bad = payload.copy()
            bad[::7] ^= 0x5A
            try:
                BPC(w).decode_entries(lengths, bad)
                damaged[threshold, w] = "decoded"
            except ValueError as e:
                damaged[threshold, w] = str(e)
        out[threshold] = res
    for a, b in zip(out[SERIAL], out[PARALLEL], strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    for w in (32, 64):
        assert damaged[SERIAL, w] == damaged[PARALLEL, w]
    assert np.array_equal(out[SERIAL][-1], x)  # the last round trip


def _refuse(*args: object) -> None:
    raise AssertionError("a parallel kernel ran")


def test_small_inputs_never_launch_parallel_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below PARALLEL_MIN_ENTRIES no compressor touches a parallel kernel; at it, each does."""
    for module, name in ((bdi, "_bdi_kernel"), (fpc, "_fpc_kernel"), (zvc, "_zvc_kernel"), (abc, "_sectors")):
        monkeypatch.setattr(module, name, _refuse)
    for width in (32, 64):
        monkeypatch.setitem(bpc_kernels.KERNELS, (True, width), (_refuse, _refuse, _refuse))
    monkeypatch.setitem(ebo.KERNELS, True, (_refuse, _refuse, _refuse))
    small = np.arange((abc.PARALLEL_MIN_ENTRIES - 1) * 32, dtype=np.uint32)
    for name in compressors.names():
        compressors.get(name).sectors(small)
    for w in (32, 64):
        BPC(w).decode(BPC(w).encode(small))
    large = np.arange(abc.PARALLEL_MIN_ENTRIES * 32, dtype=np.uint32)
    for name in compressors.names():
        with pytest.raises(AssertionError, match="a parallel kernel ran"):
            compressors.get(name).bits(large)
    with pytest.raises(AssertionError, match="a parallel kernel ran"):
        compressors.sectors_from_bits(np.zeros(abc.PARALLEL_MIN_ENTRIES, np.uint16), large)
    assert BPC(32, parallel=False).bits(large).shape == (abc.PARALLEL_MIN_ENTRIES,)  # never parallel


def test_small_inputs_take_no_turn() -> None:
    """While one thread holds the parallel-launch lock, others still compress small buffers."""
    small = np.arange(4096, dtype=np.uint32)
    done: list[str] = []

    def work() -> None:
        for name in compressors.names():
            compressors.get(name).sectors(small)
        BPC(64).decode(BPC(64).encode(small))
        done.append("ok")

    with abc.PARALLEL_LAUNCH:
        t = threading.Thread(target=work)
        t.start()
        t.join(timeout=120)
    assert done == ["ok"]


@pytest.mark.parametrize("name", ["bpc32", "ebo-bf16"])
def test_encode_takes_an_ml_dtypes_array(name: str) -> None:
    """What the sizes already take (they read bytes through as_entries) the streams take too."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = (np.arange(256) / 7).astype(ml_dtypes.bfloat16)
    assert np.array_equal(compressors.sectors(a, name), compressors.sectors(a.view(np.uint16), name))
    code = compressors.get(name)
    assert code.decode(code.encode(a)) == a.tobytes()
