"""The exponent-base-offset code of 16-bit floats (buddylib.compressors.ebo): the worked examples of its
specification by hand, exact round trips of any 16-bit words, serial = parallel, damaged input named, real
trained weights in bf16."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from buddylib import compressors
from buddylib.compressors import EBO, abc

ONE, MINUS_ONE_HALF = 0x3F80, 0xBFC0  # bf16 1.0 (e = 127, m = 0) and -1.5 (e = 127, m = 0x40)


def _bf16(sign: int, exp: int, mant: int) -> int:
    return (sign << 15) | (exp << 7) | mant


def _bits_of(payload: np.ndarray, length: int) -> str:
    return "".join(f"{b:08b}" for b in payload.tolist())[:length]


def test_the_worked_examples_of_the_specification() -> None:
    ebo = EBO("bf16")
    assert ebo.bits(np.zeros(64, np.uint16)).tolist() == [65]
    assert ebo.bits(np.full(64, ONE, np.uint16)).tolist() == [524]
    half = np.zeros(64, np.uint16)
    half[0::2] = np.where(np.arange(32) % 2 == 0, ONE, MINUS_ONE_HALF)
    assert ebo.bits(half).tolist() == [1 + 64 + 8 + 3 + 32 * 8]  # 332
    spread = np.array([_bf16(i % 2, 127 - i % 4, (5 * i) % 128 or 1) for i in range(62)] +
                      [_bf16(0, 100, 3), _bf16(1, 100, 0)], np.uint16)
    # k = 2 escapes offset 3 (15 values) and the two far ones: 12 + 64 * 10 + 17 * 8 = 788; k = 3 only the two
    assert ebo.bits(spread).tolist() == [1 + 8 + 3 + 64 * 11 + 2 * 8]  # 732
    assert ebo.sectors(np.stack([np.zeros(64, np.uint16), np.full(64, ONE, np.uint16), half, spread])).tolist() == \
        [0, 3, 2, 3]


def test_the_code_bit_by_bit() -> None:
    ebo = EBO("bf16")
    lengths, payload = ebo.encode_entries(np.full(64, ONE, np.uint16))
    # z = 0, b = 127, k = 0, then 64 times a sign bit and a 7-bit mantissa, all zero
    assert _bits_of(payload, 524) == "0" + "01111111" + "000" + "0" * 512 and payload.size == 66
    half = np.zeros(64, np.uint16)
    half[0] = MINUS_ONE_HALF
    lengths, payload = ebo.encode_entries(half)
    # z = 1, the mask 1 then 63 zeros, b = 127, k = 0, the one value: sign 1, mantissa 1000000
    assert lengths.tolist() == [1 + 64 + 8 + 3 + 8]
    assert _bits_of(payload, 84) == "1" + "1" + "0" * 63 + "01111111" + "000" + "1" + "1000000"
    far = np.full(64, ONE, np.uint16)
    far[5] = _bf16(0, 3, 9)  # offset 124: escaped where k is small, k = 7 would cost 7 bits a value
    lengths, payload = ebo.encode_entries(far)
    assert lengths.tolist() == [1 + 8 + 3 + 64 * 9 + 8]  # k = 1: offset 0 in one bit, the far one escaped
    code = _bits_of(payload, int(lengths[0]))
    assert code[:12] == "0" + "01111111" + "001"
    assert code[12 + 5 * 9: 12 + 5 * 9 + 17] == "0" + "1" + "00000011" + "0001001"  # sign, escape, e = 3, m = 9


def test_fp16_has_its_own_widths() -> None:
    fp16 = compressors.get("ebo-fp16")
    x = np.full(64, np.float16(1.0))  # e = 15 of 5 bits, m = 0 of 10
    assert fp16.bits(x).tolist() == [1 + 5 + 3 + 64 * 11]
    assert fp16.decode(fp16.encode(x)) == x.tobytes()
    with pytest.raises(ValueError, match="EBO format must be one of bf16, fp16, e4m3"):
        EBO("fp8")
    assert compressors.get(fp16.get_config()).name == "ebo-fp16"


def test_e4m3_generalisation() -> None:
    """FP8 e4m3: 128 values an entry, 4-bit exponents and 3-bit mantissas (the module docstring's lengths)."""
    e4m3 = compressors.get("ebo-e4m3")
    ones = np.full(128, 0x38, np.uint8)  # 1.0: e = 7, m = 0
    assert e4m3.bits(ones).tolist() == [1 + 4 + 3 + 128 * 4]  # z = 0, k = 0: sign and mantissa only
    half = ones.copy()
    half[::2] = 0  # 64 zeros: z = 1 codes the other 64, k = 0
    assert e4m3.bits(half).tolist() == [1 + 128 + 4 + 3 + 64 * 4]
    assert e4m3.bits(np.zeros(128, np.uint8)).tolist() == [1 + 128] and e4m3.min_bits == 129
    spread = ones.copy()
    spread[:64] = 0x30  # e = 6: offset 1, which k = 2 codes (k bits code the offsets below 2^k - 1)
    assert e4m3.bits(spread).tolist() == [1 + 4 + 3 + 128 * 6]
    for x in (ones, half, spread, np.arange(256, dtype=np.uint8).repeat(3)):
        assert e4m3.decode(e4m3.encode(x)) == x.tobytes()
    assert e4m3.stream_id == 18 and e4m3.max_bits == 1 + 128 + 4 + 3 + 128 * 15


def _reference_bits(words: np.ndarray, e_bits: int, m_bits: int) -> np.ndarray:
    """The shortest ``L(z, k)`` of each row, straight from the module docstring's formula, in numpy."""
    nv = words.shape[1]
    w = words.astype(np.int64)
    ex = (w >> m_bits) & ((1 << e_bits) - 1)  # a zero word's is 0
    nz = w != 0
    b = ex.max(axis=1, keepdims=True)
    zeros = (~nz).sum(axis=1)
    best = np.full(len(w), 1 << 30)
    for z in (0, 1):
        n = nv - zeros * z
        coded = nz | (z == 0)
        for k in range(8):
            escaped = ((b - ex >= max((1 << k) - 1, 1)) & coded).sum(axis=1)
            length = 1 + nv * z + e_bits + 3 + n * (1 + m_bits + k) + e_bits * escaped
            length = np.where(n == 0, 1 + nv * z, np.where((k > 0) | (escaped == 0), length, 1 << 30))
            best = np.minimum(best, length)
    return best


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "e4m3"])
@pytest.mark.parametrize("entry", [128, 256, 512])
def test_the_size_path_is_the_specified_length(fmt: str, entry: int) -> None:
    """The vector size path (simd) against the formula on rows of every shape it meets: random words, zeros,
    exponents within a few binades and far ones, at the stream's 128-byte entries and notebook 10's bigger."""
    from buddylib.compressors import ebo

    e_bits, m_bits = ebo.FORMATS[fmt]
    word = np.uint16 if fmt != "e4m3" else np.uint8
    values = entry // np.dtype(word).itemsize
    rng = np.random.default_rng(entry)
    rows = 600
    noise = rng.integers(0, 1 << (8 * np.dtype(word).itemsize), (rows, values))
    top = rng.integers(1 << e_bits - 1, 1 << e_bits, (rows, 1))
    near = top - np.minimum(rng.geometric(rng.uniform(0.2, 0.9, (rows, 1)), (rows, values)) - 1, top)
    floats = (rng.integers(0, 2, (rows, values)) << (e_bits + m_bits)) | (near << m_bits) | \
        rng.integers(0, 1 << m_bits, (rows, values))
    x = np.where(rng.random((rows, 1)) < 0.2, noise, floats)
    x = np.where(rng.random((rows, values)) < rng.choice([0, 0.1, 0.6, 1], (rows, 1)), 0, x).astype(word)
    got = ebo._bits(abc.readonly(x), e_bits, m_bits)
    assert np.array_equal(got, _reference_bits(x, e_bits, m_bits))
    if entry == 128:
        assert np.array_equal(got, EBO(fmt).bits(x))


bytes8 = st.lists(st.integers(0, 0xFF), min_size=0, max_size=600).map(lambda v: np.array(v, np.uint8))


@settings(max_examples=100, deadline=None)
@given(x=bytes8)
def test_any_fp8_words_round_trip_exactly(x: np.ndarray) -> None:
    """Any 8-bit patterns (e4m3's NaNs and both zeros included), any length."""
    ebo = EBO("e4m3")
    data = x.tobytes()
    assert ebo.decode(ebo.encode(data)) == data
    lengths, _ = ebo.encode_entries(data)
    assert (lengths == ebo.bits(data)).all() and lengths.max(initial=129) <= ebo.max_bits


words = st.lists(st.integers(0, 0xFFFF), min_size=0, max_size=300).map(lambda v: np.array(v, np.uint16))
floats = st.lists(st.sampled_from([0, 0, 0, ONE, MINUS_ONE_HALF, 0x8000, 0x0001, 0x7F80, 0x7FC0, 0x3C00, 0x3C01,
                                   0x3B80, 0x3A00, 0x2000, 0x0080]), min_size=1, max_size=200).map(
    lambda v: np.array(v, np.uint16))


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
@settings(max_examples=150, deadline=None)
@given(x=st.one_of(words, floats), odd=st.integers(0, 1))
def test_any_words_round_trip_exactly(fmt: str, x: np.ndarray, odd: int) -> None:
    """Any 16-bit patterns (NaNs, infinities, subnormals, negative zeros), any length, even an odd byte count."""
    ebo = EBO(fmt)
    data = x.tobytes()[: max(0, x.nbytes - odd)]
    assert ebo.decode(ebo.encode(data)) == data
    lengths, payload = ebo.encode_entries(data)
    assert (lengths == ebo.bits(data)).all() and lengths.max(initial=65) <= ebo.max_bits
    assert ebo.decode_entries(lengths, payload).tobytes()[: len(data)] == data


def test_serial_and_parallel_write_the_same_code(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    x = np.float32(rng.standard_normal(4096 * 64) * 0.05)
    x[rng.random(x.size) < 0.4] = 0
    bf = (x.view(np.uint32) >> 16).astype(np.uint16)
    out = {}
    for threshold in (1 << 62, 0):
        monkeypatch.setattr(abc, "PARALLEL_MIN_ENTRIES", threshold)
        ebo = EBO("bf16")
        lengths, payload = ebo.encode_entries(bf)
        out[threshold] = (ebo.bits(bf), lengths, payload, ebo.decode_entries(lengths, payload))
    for a, b in zip(out[1 << 62], out[0], strict=True):
        assert np.array_equal(a, b)
    assert out[0][3].tobytes() == bf.tobytes()
    assert (EBO("bf16", parallel=False).bits(bf) == out[0][0]).all()


def test_damaged_codes_are_named_never_read_out_of_bounds() -> None:
    ebo = EBO("bf16")
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(64 * 50).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    lengths, payload = ebo.encode_entries(x)
    with pytest.raises(ValueError, match="entry 49: payload ends at byte"):
        ebo.decode_entries(lengths, payload[:-1])
    short = lengths.copy()
    short[3] -= 8  # shorter by a byte: the code ends early, and the rest shifts
    with pytest.raises(ValueError, match="entry 3: "):
        ebo.decode_entries(short, payload[: payload.size - 1])
    stream = bytearray(ebo.encode(x))
    for i in rng.choice(len(stream), 200, replace=False):  # any flipped bit: named, or the data unchanged
        bad = bytearray(stream)
        bad[i] ^= 1 << int(rng.integers(8))
        try:
            assert ebo.decode(bytes(bad)) == x.tobytes()
        except ValueError:
            pass
    with pytest.raises(ValueError, match="not an EBO stream"):
        ebo.decode(compressors.get("bpc32").encode(x))
    with pytest.raises(ValueError, match="written by format 17, not ebo-bf16"):
        ebo.decode(EBO("fp16").encode(x))


def test_a_strided_payload_is_read_as_its_values() -> None:
    """The decoder reads a code at its address: a payload that is a strided view decodes as its copy does."""
    ebo = EBO("bf16")
    x = (np.random.default_rng(5).standard_normal(64 * 40).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    lengths, payload = ebo.encode_entries(x)
    spread = np.zeros(2 * payload.size, np.uint8)
    spread[::2] = payload
    assert ebo.decode_entries(lengths, spread[::2]).tobytes() == x.tobytes()


def test_a_non_canonical_code_is_refused() -> None:
    """The decoder takes exactly what the encoder writes: the same values coded another way are an error."""
    ebo = EBO("bf16")
    x = np.full(64, ONE, np.uint16)
    bits = _bits_of(ebo.encode_entries(x)[1], 524)
    other = bits[:9] + "001" + "".join("0" + "0" + "0000000" for _ in range(64))  # k = 1: offsets 0 in one bit
    assert len(other) == 588
    code = np.frombuffer(int(other + "0" * 4, 2).to_bytes(74, "big"), np.uint8)
    with pytest.raises(ValueError, match="entry 0: not the code the encoder writes"):
        ebo.decode_entries(np.array([588], np.uint16), code)


def test_a_code_with_bits_after_it_is_refused() -> None:
    """A code ends on a byte with zero bits after it: 64 values of 1.0 take 524 bits, so the last of its 66 bytes
    holds 4 padding bits, and one set is a named error, not the same values read back."""
    ebo = EBO("bf16")
    lengths, payload = ebo.encode_entries(np.full(64, ONE, np.uint16))
    assert lengths.tolist() == [524] and payload.size == 66
    bad = payload.copy()
    bad[-1] |= 1
    with pytest.raises(ValueError, match="entry 0: nonzero padding bits after the code"):
        ebo.decode_entries(lengths, bad)


def test_real_weights_in_bf16_take_three_sectors() -> None:
    """MiniLM's trained weights cast to bf16 (round to nearest even, as a serving stack loads them): nearly every
    entry in 3 sectors, where BPC-32 finds nothing; and every byte comes back."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    from buddylib.workloads.dl import minilm

    if why := minilm.MiniLMInference.missing():
        pytest.skip(why)
    weights = load_file(str(minilm.checked_weights()))
    big = [t for t in weights.values() if t.dtype == torch.float32 and t.numel() >= 1 << 16]
    bf16 = np.concatenate([t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().ravel() for t in big])
    ebo = EBO("bf16")
    sectors = ebo.sectors(bf16)
    share = np.bincount(sectors, minlength=5) / sectors.size
    assert share[3] > 0.99 and share[4] < 0.01
    assert 4 / sectors.mean() > 1.3 > 4 / compressors.get("bpc32").sectors(bf16).mean()
    assert ebo.decode(ebo.encode(bf16)) == bf16.tobytes()
