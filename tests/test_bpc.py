"""BPC (SPEC §2.1): worked examples, a pure-Python reference encoder, round trips, fuzzing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buddylib.compressors import get
from buddylib.compressors.bpc import BPC

WIDTHS = (32, 64)


# --- an independent, readable reference: bit strings built straight from the SPEC table ---


def reference_code(entry: bytes, width: int) -> str:
    """The canonical BPC code of one 128-byte entry as a '0'/'1' string (SPEC §2.1)."""
    n = 1024 // width
    mask = (1 << width) - 1
    words = [int.from_bytes(entry[i * width // 8:(i + 1) * width // 8], "little") for i in range(n)]
    signed = [w - (1 << width) if w >> (width - 1) else w for w in words]
    deltas = [(signed[i + 1] - signed[i]) & ((1 << (width + 1)) - 1) for i in range(n - 1)]
    dbp = [sum(((d >> b) & 1) << i for i, d in enumerate(deltas)) for b in range(width + 1)]
    dbx = [dbp[b] ^ (dbp[b + 1] if b < width else 0) for b in range(width + 1)]
    fields = (4, 8, 16) if width == 32 else (8, 16, 32)
    run_bits, pos_bits, plane_bits = (5, 5, 31) if width == 32 else (6, 4, 15)

    def fmt(v: int, nbits: int) -> str:
        return format(v & ((1 << nbits) - 1), f"0{nbits}b")

    base = signed[0]
    if base == 0:
        code = "000"
    else:
        for sel, f in enumerate(fields, start=1):
            if -(1 << (f - 1)) <= base < (1 << (f - 1)):
                code = fmt(sel, 3) + fmt(base, f)
                break
        else:
            code = "1" + fmt(words[0] & mask, width)
    ones = (1 << plane_bits) - 1
    b = width
    while b >= 0:
        if dbx[b] == 0:
            k = 1
            while b - k >= 0 and dbx[b - k] == 0:
                k += 1
            code += "001" if k == 1 else "01" + fmt(k - 2, run_bits)
            b -= k
            continue
        x = dbx[b]
        low = x & -x
        if x == ones:
            code += "00000"
        elif dbp[b] == 0:
            code += "00001"
        elif x == 3 * low:
            code += "00010" + fmt(low.bit_length() - 1, pos_bits)
        elif x == low:
            code += "00011" + fmt(low.bit_length() - 1, pos_bits)
        else:
            code += "1" + fmt(x, plane_bits)
        b -= 1
    return code


def packed(code: str) -> bytes:
    code += "0" * (-len(code) % 8)
    return bytes(int(code[i:i + 8], 2) for i in range(0, len(code), 8))


# --- SPEC §2.1's worked checks and more derived by hand ---


def test_worked_examples_bpc32() -> None:
    bpc = BPC(32)
    # all zero: base '000' (3) + one run of 33 zero planes '01'+5 bits (7) = 10
    assert bpc.bits(np.zeros(32, np.uint32)).tolist() == [10]
    # 32 copies of v >= 2^16: raw base 1+32 = 33; every delta is 0 -> one run of 33 (7) = 40
    assert bpc.bits(np.full(32, 0x12345678, np.uint32)).tolist() == [40]
    # 0..31: base 3; deltas all 1 -> DBP[0] all ones, planes 32..1 one run of 32 (7),
    # DBX[0] = DBP[0] ^ DBP[1] = all ones '00000' (5) = 15
    assert bpc.bits(np.arange(32, dtype=np.uint32)).tolist() == [15]


def test_single_spike_bpc32() -> None:
    # words 0 except w[5] = 1: delta[4] = +1, delta[5] = -1 (all 33 bits set).
    # DBX[32] = DBP[32] = {bit 5}: single one '00011'+5 (10); DBX[31..1] = 0: run of 31 (7);
    # DBP[0] = {4, 5}, DBP[1] = {5}: DBX[0] = {4}: single one (10); base 0 (3) -> 30 bits.
    x = np.zeros(32, np.uint32)
    x[5] = 1
    assert BPC(32).bits(x).tolist() == [30]


def test_worked_examples_bpc64() -> None:
    bpc = BPC(64)
    # all zero: base 3 + one run of 65 planes '01'+6 bits (8) = 11
    assert bpc.bits(np.zeros(16, np.uint64)).tolist() == [11]
    # 16 copies of a value that needs 64 bits: raw base 1+64 = 65, run of 65 (8) = 73
    assert bpc.bits(np.full(16, 0x123456789ABCDEF0, np.uint64)).tolist() == [73]
    # 0..15: base 3, planes 64..1 one run of 64 (8), DBX[0] all ones (5) = 16
    assert bpc.bits(np.arange(16, dtype=np.uint64)).tolist() == [16]
    # base codes: 8-bit signed field '001'+8 for -100 (11), +8 run (8) = 19
    assert bpc.bits(np.full(16, -100, np.int64)).tolist() == [19]


def test_sectors_and_zero_flag() -> None:
    bpc = BPC(32)
    x = np.concatenate([np.zeros(32, np.uint32), np.arange(32, dtype=np.uint32),
                        np.random.default_rng(1).integers(0, 2**32, 32, dtype=np.uint32)])
    # zero -> 0 sectors (flagged) or ceil(10/256) = 1; ramp 15 bits -> 1; random > 1024 -> 4
    assert bpc.sectors(x).tolist() == [0, 1, 4]
    assert bpc.sectors(x, zero_flag=False).tolist() == [1, 1, 4]


# --- property tests ---

entry_bytes = st.binary(min_size=128, max_size=128)


@st.composite
def structured_entries(draw: st.DrawFn) -> bytes:
    """Entries shaped like GPU data: ramps, floats, sparse, repeated words, small ints."""
    kind = draw(st.sampled_from(["ramp32", "ramp64", "float32", "float64", "sparse", "repeat", "small"]))
    if kind == "ramp32":
        start, step = draw(st.integers(-(2**31), 2**31 - 1)), draw(st.integers(-(2**20), 2**20))
        return ((start + step * np.arange(32)) % 2**32).astype(np.uint32).tobytes()
    if kind == "ramp64":
        start, step = draw(st.integers(-(2**63), 2**63 - 1)), draw(st.integers(-(2**40), 2**40))
        return np.array([(start + step * i) % 2**64 for i in range(16)], dtype=np.uint64).tobytes()
    if kind in ("float32", "float64"):
        dt = np.float32 if kind == "float32" else np.float64
        vals = draw(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32 if dt is np.float32
                                       else 64), min_size=1, max_size=4))
        n = 128 // np.dtype(dt).itemsize
        return np.resize(np.array(vals, dtype=dt), n).tobytes()
    if kind == "sparse":
        x = np.zeros(32, np.uint32)
        for i, v in draw(st.dictionaries(st.integers(0, 31), st.integers(0, 2**32 - 1), max_size=5)).items():
            x[i] = v
        return x.tobytes()
    if kind == "repeat":
        word = draw(st.integers(0, 2**32 - 1))
        return np.full(32, word, np.uint32).tobytes()
    return np.array(draw(st.lists(st.integers(-300, 300), min_size=32, max_size=32)), np.int32).tobytes()


any_entry = st.one_of(entry_bytes, structured_entries())


@pytest.mark.parametrize("width", WIDTHS)
@given(entry=any_entry)
@settings(max_examples=150, deadline=None)
def test_size_path_and_encoder_match_reference(width: int, entry: bytes) -> None:
    bpc = BPC(width)
    code = reference_code(entry, width)
    assert bpc.bits(entry).tolist() == [len(code)]
    lengths, payload = bpc.encode_entries(entry)
    assert lengths.tolist() == [len(code)]
    assert payload.tobytes() == packed(code)


@pytest.mark.parametrize("width", WIDTHS)
@given(entries=st.lists(any_entry, min_size=1, max_size=12))
@settings(max_examples=150, deadline=None)
def test_round_trip(width: int, entries: list[bytes]) -> None:
    bpc = BPC(width)
    data = b"".join(entries)
    lengths, payload = bpc.encode_entries(data)
    assert np.array_equal(lengths, bpc.bits(data))
    assert bpc.decode_entries(lengths, payload).tobytes() == data
    assert bpc.decode(bpc.encode(data)) == data


@pytest.mark.parametrize("width", WIDTHS)
@given(data=st.binary(min_size=0, max_size=700))
@settings(max_examples=100, deadline=None)
def test_stream_round_trip_any_length(width: int, data: bytes) -> None:
    # the stream remembers the exact byte count, so a ragged tail entry comes back unpadded
    bpc = BPC(width)
    assert bpc.decode(bpc.encode(data)) == data


def test_round_trip_on_array_kinds() -> None:
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(4000).astype(np.float32), rng.standard_normal(3001),
              np.maximum(rng.standard_normal(5000, dtype=np.float32), 0),
              rng.integers(-(2**31), 2**31, 4096, dtype=np.int32), np.arange(10**4, dtype=np.int64),
              np.array([np.nan, np.inf, -np.inf, 0.0, -0.0] * 100)]
    for width in WIDTHS:
        bpc = BPC(width)
        for x in arrays:
            assert bpc.decode(bpc.encode(x)) == x.tobytes()


# --- the decoder refuses damaged input with ValueError, and never anything else ---


@pytest.mark.parametrize("width", WIDTHS)
@given(entries=st.lists(any_entry, min_size=1, max_size=6), data=st.data())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_truncated_or_flipped_stream_raises_valueerror(width: int, entries: list[bytes],
                                                       data: st.DataObject) -> None:
    bpc = BPC(width)
    stream = bytearray(bpc.encode(b"".join(entries)))
    if data.draw(st.booleans(), label="truncate"):
        cut = data.draw(st.integers(0, len(stream) - 1), label="cut")
        damaged = bytes(stream[:cut])
    else:
        bit = data.draw(st.integers(0, 8 * len(stream) - 1), label="bit")
        stream[bit // 8] ^= 1 << (bit % 8)
        damaged = bytes(stream)
    # any damage is caught: structure checks name the entry, the CRC catches the rest
    with pytest.raises(ValueError):
        bpc.decode(damaged)


@pytest.mark.parametrize("width", WIDTHS)
@given(entries=st.lists(any_entry, min_size=1, max_size=6), data=st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_decoder_accepts_only_canonical_codes(width: int, entries: list[bytes], data: st.DataObject) -> None:
    """Damaged codes decode only if they are the encoder's own output for what they decode to."""
    bpc = BPC(width)
    lengths, payload = bpc.encode_entries(b"".join(entries))
    payload = payload.copy()
    for _ in range(data.draw(st.integers(1, 3), label="flips")):
        bit = data.draw(st.integers(0, 8 * payload.size - 1), label="bit")
        payload[bit // 8] ^= np.uint8(1 << (bit % 8))
    try:
        out = bpc.decode_entries(lengths, payload)
    except ValueError as exc:
        assert str(exc).startswith("entry ")
        return
    again_lengths, again_payload = bpc.encode_entries(out)
    assert np.array_equal(again_lengths, lengths)
    assert np.array_equal(again_payload, payload)


@pytest.mark.parametrize("width", WIDTHS)
@given(lengths=st.lists(st.integers(0, 1200), min_size=1, max_size=4), blob=st.binary(max_size=600))
@settings(max_examples=300, deadline=None)
def test_decoder_on_garbage(width: int, lengths: list[int], blob: bytes) -> None:
    bpc = BPC(width)
    lengths_arr = np.array(lengths, dtype=np.uint16)
    try:
        out = bpc.decode_entries(lengths_arr, np.frombuffer(blob, np.uint8))
    except ValueError:
        return
    again_lengths, again_payload = bpc.encode_entries(out)
    assert np.array_equal(again_lengths, lengths_arr)
    assert again_payload.tobytes() == blob


def test_error_names_entry() -> None:
    bpc = BPC(32)
    x = np.arange(32 * 4, dtype=np.uint32) * 977
    lengths, payload = bpc.encode_entries(x)
    with pytest.raises(ValueError, match=r"entry 3: .*truncated"):
        bpc.decode_entries(lengths, payload[:-1])
    bad = lengths.copy()
    bad[2] = 5000
    with pytest.raises(ValueError, match=r"entry 2: code length 5000"):
        bpc.decode_entries(bad, payload)
    with pytest.raises(ValueError, match="not a BPC stream"):
        bpc.decode(b"x" * 64)
    with pytest.raises(ValueError, match="written by bpc32"):
        BPC(64).decode(bpc.encode(x))


def test_registry() -> None:
    """Names and configs rebuild BPC; its numcodecs and zarr codecs are tested in test_codec.py."""
    assert repr(get("bpc64")) == "BPC(width=64)"
    assert get(get("bpc32").get_config()).width == 32
    with pytest.raises(ValueError, match="width must be 32 or 64"):
        BPC(16)
