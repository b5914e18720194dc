"""FPC (SPEC §2.3): hand-derived cases and a pure-Python reference on arbitrary entries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from buddylib.compressors.fpc import FPC

# --------------------------------------------------------------------------- reference


def _sext_fits(v: int, nbits: int) -> bool:
    return -(1 << (nbits - 1)) <= v < (1 << (nbits - 1))


def ref_word_bits(w: int) -> int:
    """Bits of the cheapest pattern (3-bit prefix + data) matching the nonzero word ``w``."""
    v = w - (1 << 32) if w >> 31 else w                  # the word as signed int32
    lo, hi = w & 0xFFFF, w >> 16
    lo_s = lo - (1 << 16) if lo >> 15 else lo            # each halfword as signed int16
    hi_s = hi - (1 << 16) if hi >> 15 else hi
    patterns = [
        (_sext_fits(v, 4), 3 + 4),
        (_sext_fits(v, 8), 3 + 8),
        (_sext_fits(v, 16), 3 + 16),
        (lo == 0, 3 + 16),                               # halfword padded with a zero halfword
        (_sext_fits(lo_s, 8) and _sext_fits(hi_s, 8), 3 + 16),
        (len(set(w.to_bytes(4, "little"))) == 1, 3 + 8),  # four repeated bytes
        (True, 3 + 32),                                  # uncompressed
    ]
    return min(bits for match, bits in patterns if match)


def ref_fpc(entry: bytes) -> int:
    """FPC code length of one entry: zero runs of 1-8 words at 6 bits, other words alone."""
    words = [int.from_bytes(entry[i:i + 4], "little") for i in range(0, 128, 4)]
    total = 0
    i = 0
    while i < 32:
        if words[i] == 0:
            j = i
            while j < 32 and words[j] == 0:
                j += 1
            run = j - i
            total += 6 * ((run + 7) // 8)                # each symbol covers up to 8 words
            i = j
        else:
            total += ref_word_bits(words[i])
            i += 1
    return total


# --------------------------------------------------------------------------- strategies

_int32 = st.integers(-(2**31), 2**31 - 1)


@st.composite
def word_entries(draw: st.DrawFn) -> bytes:
    """32 words that hit every FPC pattern: zero runs, small ints, padded, byte pairs, repeats."""
    pattern_word = st.one_of(
        st.just(0), st.just(0), st.just(0),                              # zero runs
        st.integers(-9, 8), st.integers(-129, 128), st.integers(-32769, 32768),
        st.integers(1, 0xFFFF).map(lambda h: h << 16),                   # zero low halfword
        st.tuples(st.integers(-129, 128), st.integers(-129, 128)).map(
            lambda t: ((t[0] & 0xFFFF) << 16) | (t[1] & 0xFFFF)),        # sign-extended byte pair
        st.integers(0, 255).map(lambda b: b * 0x01010101),               # four repeated bytes
        _int32,
    )
    words = draw(st.lists(pattern_word, min_size=32, max_size=32))
    return b"".join((w % 2**32).to_bytes(4, "little") for w in words)


@st.composite
def sparse_entries(draw: st.DrawFn) -> bytes:
    """Mostly zero words with a few arbitrary ones, to exercise run splitting."""
    words = [0] * 32
    for i in draw(st.lists(st.integers(0, 31), max_size=6)):
        words[i] = draw(_int32)
    return b"".join((w % 2**32).to_bytes(4, "little") for w in words)


any_entry = st.one_of(st.binary(min_size=128, max_size=128), word_entries(), sparse_entries(),
                      st.just(bytes(128)))


def _arr(entries: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(entries), dtype=np.uint8).reshape(-1, 128).copy()


def _words(vals: list[int]) -> np.ndarray:
    return np.array([v % 2**32 for v in vals], dtype=np.uint32)


# --------------------------------------------------------------------------- known cases

KNOWN = [
    # 32 zero words: runs cover at most 8 words, so 4 run symbols of 3+3 bits.
    ("all zeros", _words([0] * 32), 24),
    # 0 -> one run (6); 1..7 fit 4-bit signed (7 each, 49); 8..31 fit 8-bit (11 each, 264).
    ("words 0..31", _words(list(range(32))), 6 + 49 + 264),
    # A single 1 at word 10: run of 10 zeros = 2 symbols (12), the 1 (7), run of 21 = 3 (18).
    ("one word", _words([0] * 10 + [1] + [0] * 21), 12 + 7 + 18),
    # Alternating 0, 5: sixteen runs of one zero (6 each) and sixteen 4-bit words (7 each).
    ("alternating", _words([0, 5] * 16), 16 * 6 + 16 * 7),
    # -1 = 0xFFFFFFFF is a 4-bit sign-extended value (also four repeated bytes, but 7 < 11).
    ("-1", _words([-1] * 32), 32 * 7),
    # -100 is 8-bit sign-extended: 11 each.
    ("-100", _words([-100] * 32), 32 * 11),
    # 0x01010101 is four repeated bytes: 11 each (no sign-extended pattern fits).
    ("repeated bytes", _words([0x01010101] * 32), 32 * 11),
    # 200 and 128 exceed 8-bit signed, fit 16-bit signed: 19 each.
    ("16-bit", _words([200, 128] * 16), 32 * 19),
    # 0x12340000: low halfword zero: 19 each.
    ("zero low halfword", _words([0x12340000] * 32), 32 * 19),
    # 0x007FFF80: halfwords 0x007F = 127 and 0xFF80 = -128, each a sign-extended byte: 19.
    ("byte pair", _words([0x007FFF80] * 32), 32 * 19),
    # 0x12345678 matches nothing: 3 + 32 = 35 each, the longest code, 1120 bits.
    ("uncompressed", _words([0x12345678] * 32), 32 * 35),
]


@pytest.mark.parametrize(("label", "data", "bits"), KNOWN, ids=[k[0] for k in KNOWN])
def test_known(label: str, data: np.ndarray, bits: int) -> None:
    assert data.nbytes == 128
    assert FPC().bits(data).tolist() == [bits]
    assert ref_fpc(data.tobytes()) == bits  # the reference agrees


def test_max_bits_and_config() -> None:
    assert FPC.name == "fpc" and FPC.max_bits == 1120
    assert FPC().get_config() == {"id": "fpc"}
    assert FPC().bits(np.zeros(0, np.uint8)).shape == (0,)


def test_random_bytes_many_entries() -> None:
    """A large batch (the parallel path) agrees with the reference entry by entry."""
    rng = np.random.default_rng(2)
    data = rng.integers(0, 256, (2000, 128), dtype=np.uint8)
    data[::3, :64] = 0                                   # some zero runs as well
    expected = [ref_fpc(row.tobytes()) for row in data]
    assert FPC().bits(data).tolist() == expected


# --------------------------------------------------------------------------- properties


@settings(max_examples=200, deadline=None)
@given(st.lists(any_entry, min_size=1, max_size=6))
def test_matches_reference(entries: list[bytes]) -> None:
    bits = FPC().bits(_arr(entries))
    assert bits.dtype == np.uint16
    assert bits.tolist() == [ref_fpc(e) for e in entries]
    assert (bits <= FPC.max_bits).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(any_entry, min_size=1, max_size=6), st.booleans())
def test_sectors(entries: list[bytes], zero_flag: bool) -> None:
    fpc = FPC()
    arr = _arr(entries)
    sectors = fpc.sectors(arr, zero_flag=zero_flag)
    assert sectors.dtype == np.uint8
    for entry, s in zip(entries, sectors, strict=True):
        if zero_flag and entry == bytes(128):
            assert s == 0
        else:
            assert s == min(4, -(-ref_fpc(entry) // 256))


def test_sectors_zero_entry() -> None:
    fpc = FPC()
    zero = np.zeros(128, np.uint8)
    assert fpc.sectors(zero).tolist() == [0]                    # flagged in metadata
    assert fpc.sectors(zero, zero_flag=False).tolist() == [1]   # 24 bits -> 1 sector
    assert fpc.sectors(_words([0x12345678] * 32)).tolist() == [4]  # 1120 bits -> raw, 4
