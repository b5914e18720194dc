"""The whole-tensor peers of 16-bit floats (buddylib.compressors.peers): DFloat11's sizes worked by hand from
its package's scheme, its code and the length limit, the entropy bound, bounds on every size, ZipNN's round trip
where zipnn is installed, and the errors on what no 16-bit code takes."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest

from buddylib.compressors import peers

ONE = 0x3F80  # bf16 1.0: exponent field 127


def _bf16(exponents: list[int], mantissa: int = 0) -> np.ndarray:
    return ((np.asarray(exponents, np.int64) << 7) | mantissa).astype(np.uint16)


def _kraft(code: dict[int, tuple[int, int]]) -> float:
    return sum(2.0 ** -n for n, _ in code.values())


def _prefix_free(code: dict[int, tuple[int, int]]) -> bool:
    words = sorted(format(v, f"0{n}b") for n, v in code.values())
    return all(not b.startswith(a) for a, b in itertools.pairwise(words))


def test_one_exponent_codes_in_one_bit() -> None:
    # {127: 100, end of file: 1}: one merge; the end of file (popped first) takes 0, exponent 127 takes 1
    x = _bf16([127] * 100, mantissa=0x55)
    assert peers.dfloat11_code(peers.exponent_counts(x)) == {127: (1, 1), -1: (1, 0)}
    # 100 bits -> 13 bytes; a byte a value; LUTs: the first-byte table and the lengths row (no code > 8 bits);
    # positions: block 0's first value and the count; gaps: 512 threads x 5 bits of the one block launched
    assert peers.dfloat11_size(x) == (13, 100, 2 * 256, 2 * 4, 320)
    assert peers.dfloat11_bytes(x) == 13 + 100 + 512 + 8 + 320


def test_a_skewed_distribution_by_hand() -> None:
    # counts 127: 8, 126: 4, 125: 2, 124: 1 and the end of file 1. Merges (ties: the end of file, then the smaller
    # exponent, first): {EOF, 124} = 2; {EOF, 124} + {125} = 4; + {126} = 8; + {127} = 16. Codes: 127 '1',
    # 126 '01', 125 '001', 124 '0001', end of file '0000'.
    x = _bf16([124] + [125] * 2 + [126] * 4 + [127] * 8)
    assert peers.dfloat11_code(peers.exponent_counts(x)) == {127: (1, 1), 126: (2, 1), 125: (3, 1), 124: (4, 1),
                                                             -1: (4, 0)}
    bits = 8 * 1 + 4 * 2 + 2 * 3 + 1 * 4  # 26 -> 4 bytes
    assert peers.dfloat11_size(x) == (4, 15, 512, 8, 320)
    assert bits == 26
    h = -sum(c / 15 * np.log2(c / 15) for c in (8, 4, 2, 1))
    assert peers.exponent_entropy_bytes(x) == pytest.approx(15 * (h + 8) / 8)


def test_codes_longer_than_a_byte_add_a_lookup_table() -> None:
    # counts 2**11 .. 2**1 for exponents 100 .. 110 and one value of exponent 90: a chain, codes '1', '01', ...,
    # exponent 100 + i of length i + 1, exponent 90 and the end of file of length 12. The codes of 9 to 12 bits
    # (108, 109, 110, 90) all start with the byte 00000000: one more table, 3 rows in all.
    exps = [e for i in range(11) for e in [100 + i] * 2 ** (11 - i)] + [90]
    x = _bf16(exps)
    code = peers.dfloat11_code(peers.exponent_counts(x))
    assert {s: n for s, (n, _) in code.items()} == {**{100 + i: i + 1 for i in range(11)}, 90: 12, -1: 12}
    bits = sum(2 ** (11 - i) * (i + 1) for i in range(11)) + 12
    n = len(exps)
    # the last value (exponent 90, 12 bits) starts at bit bits - 12, in block 0
    assert peers.dfloat11_size(x) == (-(-bits // 8), n, 3 * 256, 8, 320)


def test_thread_blocks_of_the_stream() -> None:
    # 1-bit codes: the stream is n bits; a block holds 512 threads x 8 bytes = 32768 bits
    for n, blocks, positions in ((32768, 1, 2), (32769, 2, 3), (65536 + 8, 3, 4)):
        size = peers.dfloat11_size(np.full(n, ONE, np.uint16))
        assert (size.encoded_exponent, size.gaps, size.output_positions) == (-(-n // 8), 320 * blocks, 4 * positions)


def test_the_code_length_limit_of_32_bits() -> None:
    # Fibonacci counts give a Huffman code as deep as the symbols are many: 34 exponents, 34 bits unlimited;
    # the package's limit (the rarest exponents given count 1, more each round) brings it to 32
    fib = [1, 1]
    while len(fib) < 34:
        fib.append(fib[-1] + fib[-2])
    counts = np.zeros(256, np.int64)
    counts[100:134] = fib
    code = peers.dfloat11_code(counts)
    assert max(n for n, _ in code.values()) == peers.DF11_MAX_CODE_BITS
    assert _kraft(code) == 1.0 and _prefix_free(code)
    counts[100:134] = 1  # nothing to limit: a balanced code of 35 symbols, 5 and 6 bits
    assert {n for n, _ in peers.dfloat11_code(counts).values()} == {5, 6}


@pytest.mark.parametrize("kind", ["normal", "layers", "uniform-words", "few", "specials"])
def test_sizes_are_bounded(kind: str) -> None:
    rng = np.random.default_rng(len(kind))
    n = 20000
    if kind == "normal":
        x = (rng.normal(0, 0.05, n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    elif kind == "layers":
        x = (rng.normal(0, 1, n) * np.repeat(10.0 ** rng.uniform(-3, 0, 20), n // 20)).astype(np.float32)
        x = (x.view(np.uint32) >> 16).astype(np.uint16)
    elif kind == "uniform-words":
        x = rng.integers(0, 1 << 16, n, dtype=np.uint16)
    elif kind == "few":
        x = _bf16(rng.choice([120, 121, 130], n, p=[0.9, 0.09, 0.01]), mantissa=3)
    else:
        x = rng.choice(np.array([0, 0x8000, 0x7F80, 0xFF80, 0x7FC0, ONE], np.uint16), n)
    size = peers.dfloat11_size(x)
    distinct = int((peers.exponent_counts(x) > 0).sum())
    # Huffman is optimal, so no longer than a fixed code of ceil(log2(distinct + 1)) bits (with the end of file)
    assert 8 * size.encoded_exponent <= (n + 1) * max(1, int(np.ceil(np.log2(distinct + 1)))) + 7
    assert size.sign_mantissa == n
    # ... and no prefix code beats the entropy: the bound is below DFloat11's two streams, and below raw
    assert peers.exponent_entropy_bytes(x) <= size.encoded_exponent + size.sign_mantissa
    assert peers.exponent_entropy_bytes(x) <= x.nbytes
    assert peers.exponent_entropy_bytes(x.view(np.float16)) <= x.nbytes


def test_the_same_bits_any_way_given() -> None:
    x = (np.random.default_rng(3).normal(0, 0.05, 999).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    expected = peers.dfloat11_bytes(x)
    assert peers.dfloat11_bytes(x.view(np.int16)) == expected
    assert peers.dfloat11_bytes(x.astype(">u2")) == expected
    assert peers.dfloat11_bytes(x.reshape(27, 37)[:, ::-1].copy()[:, ::-1]) == expected
    h = x.view(np.float16)  # fp16 inferred from the dtype: 5-bit exponent, 11 raw bits
    counts = np.bincount((x >> 10) & 0x1F, minlength=32)
    assert peers.exponent_counts(h).tolist() == counts.tolist()
    p = counts[counts > 0] / x.size
    assert peers.exponent_entropy_bytes(h) == pytest.approx(x.size * (-(p * np.log2(p)).sum() + 11) / 8)
    assert peers.exponent_entropy_bytes(x, fmt="fp16") == peers.exponent_entropy_bytes(h)


def test_peer_ratios() -> None:
    x = _bf16([127] * 4000 + [126] * 4000, mantissa=1)
    r = peers.peer_ratios(x, peers=("dfloat11", "exponent-entropy"), zstd_levels=(1,))
    assert list(r) == ["dfloat11", "exponent-entropy", "zstd-1"]
    assert r["dfloat11"] == x.nbytes / peers.dfloat11_bytes(x)
    assert r["exponent-entropy"] == pytest.approx(16 / 9)  # 1 bit of exponent entropy and 8 raw bits
    assert r["zstd-1"] > 1
    assert "dfloat11" not in peers.peer_ratios(x.view(np.float16), peers=None, zstd_levels=())


def test_errors_name_what_is_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"^a: dtype float32 is not a 16-bit or FP8 float"):
        peers.dfloat11_bytes(np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"^a: dtype int32"):
        peers.exponent_entropy_bytes(np.ones(4, np.int32))
    with pytest.raises(ValueError, match=r"^fmt: 'bf16' values are 2 bytes, a holds 1-byte words"):
        peers.exponent_entropy_bytes(np.ones(4, np.uint8), fmt="bf16")
    with pytest.raises(ValueError, match=r"DFloat11 codes bf16 tensors only"):
        peers.peer_bytes(np.ones(4, np.uint8), "dfloat11")
    with pytest.raises(ValueError, match=r"^a: empty tensor"):
        peers.dfloat11_bytes(np.zeros(0, np.uint16))
    with pytest.raises(ValueError, match=r"^a: empty tensor"):
        peers.exponent_entropy_bytes(np.zeros((0, 3), np.float16))
    with pytest.raises(ValueError, match=r"^a: DFloat11 codes bf16 tensors only; got fp16"):
        peers.dfloat11_bytes(np.ones(4, np.float16))
    with pytest.raises(ValueError, match=r"^fmt: DFloat11 codes bf16 tensors only"):
        peers.peer_bytes(np.ones(4, np.uint16), "dfloat11", fmt="fp16")
    with pytest.raises(ValueError, match=r"^fmt: 'bf16' given for a of format 'fp16'"):
        peers.exponent_entropy_bytes(np.ones(4, np.float16), fmt="bf16")
    with pytest.raises(ValueError, match=r"^fmt: unknown float format 'fp8'"):
        peers.exponent_entropy_bytes(np.ones(4, np.uint16), fmt="fp8")
    with pytest.raises(ValueError, match=r"^peer: unknown peer 'gzip'"):
        peers.peer_bytes(np.ones(4, np.uint16), "gzip")
    monkeypatch.setitem(sys.modules, "zipnn", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install zipnn==0\.5\.4"):
        peers.zipnn_bytes(np.ones(4, np.uint16))
    assert not peers.zipnn_available()


def test_fp8_e4m3() -> None:
    """FP8 (e4m3fn) as ml_dtypes holds it or as its bits: the entropy bound counts 16 exponents and keeps 4 raw
    bits a value; an e4m3 tensor with one exponent costs those 4 bits alone."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    ones = np.ones(64, ml_dtypes.float8_e4m3fn)  # 0x38: exponent 7, mantissa 0
    assert ones.view(np.uint8)[0] == 0x38
    assert peers.exponent_entropy_bytes(ones) == 64 * 4 / 8 == peers.exponent_entropy_bytes(ones.view(np.uint8))
    assert peers.exponent_counts(ones)[7] == 64 and peers.exponent_counts(ones).size == 16


class TestZipNN:
    """Run only where zipnn is installed (it imports torch: seconds)."""

    @pytest.fixture(autouse=True)
    def _zipnn(self) -> None:
        pytest.importorskip("zipnn")

    @pytest.mark.parametrize("n", [1, 3, 64, 131073])
    @pytest.mark.parametrize("fmt", ["bf16", "fp16"])
    def test_lossless_round_trip(self, n: int, fmt: str) -> None:
        rng = np.random.default_rng(n)
        x = rng.normal(0, 0.05, n).astype(np.float32)
        x = (x.view(np.uint32) >> 16).astype(np.uint16) if fmt == "bf16" else x.astype(np.float16).view(np.uint16)
        before = x.copy()
        blob = peers.zipnn_compress(x, fmt)
        assert np.array_equal(x, before)  # zipnn reorders bits in place: it is given a copy
        assert np.array_equal(peers.zipnn_decompress(blob, fmt), x)
        assert len(blob) == peers.zipnn_bytes(x, fmt) <= x.nbytes + 64 + 16 * (-(-x.nbytes // (256 << 10)))

    def test_incompressible_words_stay_raw(self) -> None:
        x = np.random.default_rng(0).integers(0, 1 << 16, 50000, dtype=np.uint16)
        assert peers.zipnn_bytes(x) <= x.nbytes + 64
        assert np.array_equal(peers.zipnn_decompress(peers.zipnn_compress(x)), x)

    def test_torch_tensors(self) -> None:
        import torch  # zipnn imported it already

        t = torch.randn(5000) * 0.05
        bits = t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        assert peers.dfloat11_bytes(t.to(torch.bfloat16)) == peers.dfloat11_bytes(bits)
        assert peers.zipnn_bytes(t.to(torch.float16)) == peers.zipnn_bytes(t.to(torch.float16).numpy())
        with pytest.raises(ValueError, match=r"^a: torch dtype torch.float32"):
            peers.dfloat11_bytes(t)
