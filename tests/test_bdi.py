"""BDI (SPEC §2.2): hand-derived cases, a pure-Python reference, and a lossless round trip.

The reference below is written for readability, not speed: it reads each entry as Python
integers and tries every encoding literally as the SPEC words it. The round trip packs
the encoding the compiled kernel chose into real bytes (base, deltas, mask), decodes them
knowing only the encoding id, and must get the entry back, with exactly ``bits`` bits.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from buddylib.compressors.bdi import BASE_DELTA, BDI, ENCODING_BITS, ENCODINGS

# --------------------------------------------------------------------------- reference


def _values(entry: bytes, size: int) -> list[int]:
    """The entry as unsigned little-endian ``size``-byte integers."""
    return [int.from_bytes(entry[i:i + size], "little") for i in range(0, 128, size)]


def _signed(u: int, size: int) -> int:
    """Unsigned ``size``-byte integer ``u`` read as two's complement."""
    return u - (1 << (8 * size)) if u >> (8 * size - 1) else u


def _fits(x: int, size: int) -> bool:
    """Whether the Python integer ``x`` fits a ``size``-byte signed field."""
    return -(1 << (8 * size - 1)) <= x < (1 << (8 * size - 1))


def ref_pack(entry: bytes, b: int, d: int) -> bytes | None:
    """Pack ``entry`` as B-byte base + Δ-byte deltas + n-bit mask, or None if it does not fit.

    Layout: base (B bytes) | n deltas (Δ bytes each, signed) | mask (n bits, bit i = 1 when
    value i uses the explicit base). Its length in bits is the BDI size.
    """
    n = 128 // b
    base = None
    deltas = []
    mask = 0
    for i, u in enumerate(_values(entry, b)):
        if _fits(_signed(u, b), d):                      # immediate from the zero base
            deltas.append(_signed(u, b))
            continue
        if base is None:                                 # first non-immediate is the base
            base = u
        delta = _signed((u - base) % (1 << (8 * b)), b)  # what a B-byte subtractor gives
        if not _fits(delta, d):
            return None
        deltas.append(delta)
        mask |= 1 << i
    base = 0 if base is None else base
    return (base.to_bytes(b, "little")
            + b"".join(x.to_bytes(d, "little", signed=True) for x in deltas)
            + mask.to_bytes(n // 8, "little"))


def ref_unpack(code: bytes, b: int, d: int) -> bytes:
    """Inverse of :func:`ref_pack`, using only the packed bytes and (B, Δ)."""
    n = 128 // b
    base = int.from_bytes(code[:b], "little")
    mask = int.from_bytes(code[b + n * d:], "little")
    out = b""
    for i in range(n):
        delta = int.from_bytes(code[b + i * d: b + (i + 1) * d], "little", signed=True)
        value = (base + delta if mask >> i & 1 else delta) % (1 << (8 * b))
        out += value.to_bytes(b, "little")
    return out


def ref_bdi(entry: bytes) -> tuple[int, int]:
    """(encoding id, bits) of one entry: the smallest encoding that fits, lower id on ties."""
    if entry == bytes(128):
        return 0, 8
    if len(set(_values(entry, 8))) == 1:
        return 1, 64
    candidates = [(1024, 8)]
    for enc_id, (b, d) in enumerate(BASE_DELTA, start=2):
        code = ref_pack(entry, b, d)
        if code is not None:
            candidates.append((8 * len(code), enc_id))
    bits, enc_id = min(candidates)
    return enc_id, bits


def ref_decode(enc_id: int, entry: bytes) -> tuple[bytes, int]:
    """Encode ``entry`` with encoding ``enc_id`` (which must fit), decode it back.

    Returns the reconstructed entry and the code length in bits actually used.
    """
    name = ENCODINGS[enc_id]
    if name == "zeros":
        code = b"\0"
        return bytes(128), 8 * len(code)
    if name == "repeated":
        code = entry[:8]
        return code * 16, 8 * len(code)
    if name == "uncompressed":
        return bytes(entry), 1024
    b, d = BASE_DELTA[enc_id - 2]
    code = ref_pack(entry, b, d)
    assert code is not None, f"kernel chose {name} but the entry does not fit it"
    return ref_unpack(code, b, d), 8 * len(code)


# --------------------------------------------------------------------------- strategies


@st.composite
def base_delta_entries(draw: st.DrawFn) -> bytes:
    """Values that are immediates or base + delta for some (B, Δ), with edge-of-range values."""
    b = draw(st.sampled_from([2, 4, 8]))
    d = draw(st.sampled_from([x for x in (1, 2, 4) if x < b]))
    lim = 1 << (8 * d - 1)
    small = st.integers(-lim, lim - 1)                   # inside the Δ-byte signed range
    top = 1 << (8 * b)
    # Half the time the base sits next to the signed wrap point 2^(8B-1), so base + delta
    # crosses it and only a wrapping B-byte difference fits.
    base = draw(st.one_of(st.integers(0, top - 1), st.integers(-lim, lim).map(lambda x: top // 2 + x)))
    n = 128 // b
    kinds = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    vals = [(base + draw(small)) if k else draw(small) for k in kinds]
    # Sometimes push one value just past the range, to probe the boundary from outside.
    for i in draw(st.lists(st.integers(0, n - 1), max_size=1)):
        vals[i] += draw(st.sampled_from([-1, 1])) * lim
    return b"".join((v % (1 << (8 * b))).to_bytes(b, "little") for v in vals)


@st.composite
def ramp_entries(draw: st.DrawFn) -> bytes:
    """A wrapping arithmetic ramp of B-byte values (array indices, pointers, counters)."""
    b = draw(st.sampled_from([2, 4, 8]))
    start = draw(st.integers(0, (1 << (8 * b)) - 1))
    step = draw(st.one_of(st.integers(-8, 8), st.integers(-300, 300)))
    return b"".join(((start + i * step) % (1 << (8 * b))).to_bytes(b, "little") for i in range(128 // b))


@st.composite
def word_entries(draw: st.DrawFn) -> bytes:
    """32-bit words: small ints, sparse, or one repeated word with a few changes."""
    kind = draw(st.sampled_from(["small", "sparse", "repeated"]))
    if kind == "small":
        words = draw(st.lists(st.integers(-40000, 40000), min_size=32, max_size=32))
    elif kind == "sparse":
        words = draw(st.lists(st.one_of(st.just(0), st.just(0), st.integers(-(2**31), 2**31 - 1)),
                              min_size=32, max_size=32))
    else:
        words = [draw(st.integers(-(2**31), 2**31 - 1))] * 32
        for i in draw(st.lists(st.integers(0, 31), max_size=3)):
            words[i] = draw(st.integers(-(2**31), 2**31 - 1))
    return b"".join((w % 2**32).to_bytes(4, "little") for w in words)


# base_delta_entries twice: it is the strategy that reaches every (B, Δ) and its edges.
any_entry = st.one_of(st.binary(min_size=128, max_size=128), base_delta_entries(), base_delta_entries(),
                      ramp_entries(), word_entries(), st.just(bytes(128)))


def _arr(entries: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(entries), dtype=np.uint8).reshape(-1, 128).copy()


# --------------------------------------------------------------------------- known cases

BIG = 10**12  # needs more than 4 bytes, so never an immediate; 0xE8_D4A5_1000


def _i64(vals: list[int]) -> np.ndarray:
    return np.array(vals, dtype=np.int64)


KNOWN = [
    # One byte of code, the all-zeros encoding.
    ("zeros", np.zeros(16, np.int64), "zeros", 8),
    # 16 copies of one 8-byte value: the value itself, 8 bytes.
    ("repeated", np.full(16, 0x0123456789ABCDEF, np.int64), "repeated", 64),
    # int64 BIG + 3i: no value is a 1-byte immediate, base = BIG, deltas 0..45 fit 1 byte:
    # 8-byte base + 16 one-byte deltas + 16 mask bits = 64 + 128 + 16.
    ("int64 base+small deltas", _i64([BIG + 3 * i for i in range(16)]), "b8d1", 208),
    # int32 0..31: as int64 the pairs (2j+1)<<32 | 2j step by 2^33+2, no 8-byte encoding
    # fits; as int32 every value is a 1-byte immediate: 32 + 32*8 + 32 = 320.
    ("int32 ramp 0..31", np.arange(32, dtype=np.int32), "b4d1", 320),
    # Small ints (zero-base immediates) interleaved with pointers 0x7FFF00001000 + 16j
    # (base = first pointer, deltas 0..112 fit 1 byte): b8d1, 208 bits.
    ("immediates + base", _i64([v for j in range(8) for v in ((-5, 7, 0, 127, -128, 3, 9, 1)[j],
                                                               0x7FFF00001000 + 16 * j)]), "b8d1", 208),
    # uint32 0x7FFFFFF0 + i crosses the signed wrap point at i = 16. Base = 0x7FFFFFF0;
    # 0x80000005 as signed is -2^31+5, whose exact difference from the base overflows 4
    # bytes, but the wrapping 4-byte difference is 21, which fits: b4d1, 320 bits.
    ("wrapping delta", (np.arange(32, dtype=np.uint64) + 0x7FFFFFF0).astype(np.uint32), "b4d1", 320),
    # int64 BIG + 1000i: deltas up to 15000 need 2 bytes; as int32 the high words (232)
    # are not 1-byte immediates and are far from the low-word base: b8d2 = 64+256+16.
    ("b8d2", _i64([BIG + 1000 * i for i in range(16)]), "b8d2", 336),
    # int32 100000 + 1000i: deltas up to 31000 need 2 bytes; int64 pairs step by
    # 2000 + 2000<<32, beyond 4 bytes: b4d2 = 32 + 32*16 + 32.
    ("b4d2", (100000 + 1000 * np.arange(32)).astype(np.int32), "b4d2", 576),
    # int64 BIG + 100000i: deltas up to 1.5e6 need 4 bytes; as int32 the low words step
    # by 100000 (> 2 bytes): b8d4 = 64 + 512 + 16.
    ("b8d4", _i64([BIG + 100000 * i for i in range(16)]), "b8d4", 592),
    # int16 1000 + i: base 1000, deltas 0..63; wider views step by 2+2<<16 (int32) and
    # 4(1+2^16+2^32+2^48) (int64), too far: b2d1 = 16 + 64*8 + 64.
    ("b2d1", (1000 + np.arange(64)).astype(np.int16), "b2d1", 592),
    # int64 (1 + i%3) << 16: fits b8d4 (4-byte immediates) AND b2d1 (int16 parts are 0..3),
    # both 592 bits; b4d2 fails (base 1<<16, 3<<16 is 2<<16 away). Tie goes to b8d4.
    ("tie b8d4 vs b2d1", _i64([(1 + i % 3) << 16 for i in range(16)]), "b8d4", 592),
]


@pytest.mark.parametrize(("label", "data", "enc", "bits"), KNOWN, ids=[k[0] for k in KNOWN])
def test_known(label: str, data: np.ndarray, enc: str, bits: int) -> None:
    assert data.nbytes == 128
    bdi = BDI()
    assert bdi.bits(data).tolist() == [bits]
    assert [ENCODINGS[i] for i in bdi.encodings(data)] == [enc]
    assert ref_bdi(data.tobytes()) == (ENCODINGS.index(enc), bits)  # the reference agrees


def test_tie_candidate_really_fits_b2d1() -> None:
    """The tie case above is a real tie: b2d1 represents it too, at the same size."""
    entry = _i64([(1 + i % 3) << 16 for i in range(16)]).tobytes()
    code = ref_pack(entry, 2, 1)
    assert code is not None and 8 * len(code) == 592 and ref_unpack(code, 2, 1) == entry


def test_random_bytes_uncompressed() -> None:
    # 4096 random entries: the chance that 64 random 16-bit values sit within ±128 of two
    # points is nil, so every entry is raw, 1024 bits, 4 sectors.
    data = np.random.default_rng(1).integers(0, 256, (4096, 128), dtype=np.uint8)
    bdi = BDI()
    assert (bdi.bits(data) == 1024).all()
    assert (bdi.encodings(data) == ENCODINGS.index("uncompressed")).all()
    assert (bdi.sectors(data) == 4).all()


def test_encoding_table() -> None:
    assert ENCODINGS == ("zeros", "repeated", "b8d1", "b8d2", "b8d4", "b4d1", "b4d2", "b2d1", "uncompressed")
    assert ENCODING_BITS.tolist() == [8, 64, 208, 336, 592, 320, 576, 592, 1024]
    assert BDI.name == "bdi" and BDI.max_bits == 1024
    assert BDI().get_config() == {"id": "bdi"}


def test_empty_and_padding() -> None:
    bdi = BDI()
    assert bdi.bits(np.zeros(0, np.uint8)).shape == (0,)
    # 130 bytes -> 2 entries; the second is the two bytes 5, 0 then zero padding: the
    # int16 values 5, 0, ... are all 1-byte immediates, and as int64 too: b8d1.
    data = np.zeros(130, np.uint8)
    data[128] = 5
    assert bdi.encodings(data).tolist() == [0, 2]


# --------------------------------------------------------------------------- properties


@settings(max_examples=200, deadline=None)
@given(st.lists(any_entry, min_size=1, max_size=6))
def test_matches_reference(entries: list[bytes]) -> None:
    bdi = BDI()
    arr = _arr(entries)
    expected = [ref_bdi(e) for e in entries]
    assert bdi.encodings(arr).tolist() == [enc for enc, _ in expected]
    assert bdi.bits(arr).tolist() == [bits for _, bits in expected]


@settings(max_examples=200, deadline=None)
@given(st.lists(any_entry, min_size=1, max_size=6))
def test_round_trip(entries: list[bytes]) -> None:
    """The chosen encoding, packed to real bytes, decodes to the entry in exactly ``bits``."""
    bdi = BDI()
    arr = _arr(entries)
    for entry, enc_id, bits in zip(entries, bdi.encodings(arr), bdi.bits(arr), strict=True):
        decoded, used = ref_decode(int(enc_id), entry)
        assert decoded == entry
        assert used == bits == ENCODING_BITS[enc_id]


@settings(max_examples=100, deadline=None)
@given(st.lists(any_entry, min_size=1, max_size=6), st.booleans())
def test_sectors(entries: list[bytes], zero_flag: bool) -> None:
    bdi = BDI()
    arr = _arr(entries)
    sectors = bdi.sectors(arr, zero_flag=zero_flag)
    assert sectors.dtype == np.uint8
    for entry, bits, s in zip(entries, bdi.bits(arr), sectors, strict=True):
        if zero_flag and entry == bytes(128):
            assert s == 0
        else:
            assert s == min(4, -(-int(bits) // 256))


def test_sectors_zero_entry() -> None:
    bdi = BDI()
    zero = np.zeros(128, np.uint8)
    assert bdi.sectors(zero).tolist() == [0]                    # flagged in metadata
    assert bdi.sectors(zero, zero_flag=False).tolist() == [1]   # 8 bits -> 1 sector
