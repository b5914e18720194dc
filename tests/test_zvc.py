"""ZVC (SPEC §2.4): hand-derived cases and a pure-Python reference on arbitrary entries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from buddylib.compressors.zvc import ZVC


def ref_zvc(entry: bytes) -> int:
    """32-bit word mask plus 32 bits per nonzero little-endian 32-bit word."""
    nonzero = sum(entry[i:i + 4] != bytes(4) for i in range(0, 128, 4))
    return 32 + 32 * nonzero


@st.composite
def sparse_entries(draw: st.DrawFn) -> bytes:
    """Words each zero or not, with nonzero words that may hold a single nonzero byte."""
    word = st.one_of(st.just(0), st.just(0), st.integers(1, 2**32 - 1),
                     st.integers(0, 3).map(lambda k: 1 << (8 * k + 7)))  # one byte set
    words = draw(st.lists(word, min_size=32, max_size=32))
    return b"".join(w.to_bytes(4, "little") for w in words)


any_entry = st.one_of(st.binary(min_size=128, max_size=128), sparse_entries(), st.just(bytes(128)))


def _arr(entries: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(entries), dtype=np.uint8).reshape(-1, 128).copy()


half = np.zeros(32, np.uint32)
half[::2] = 7
top_byte = np.zeros(32, np.uint32)
top_byte[5] = 0x80000000

KNOWN = [
    ("all zeros", np.zeros(32, np.uint32), 32),              # the mask alone
    ("half zeros", half, 32 + 16 * 32),                       # mask + 16 nonzero words = 544
    ("one high byte", top_byte, 32 + 32),                     # any nonzero byte makes the word nonzero
    ("dense", np.arange(1, 33, dtype=np.uint32), 32 + 32 * 32),  # 1056, the longest code
    # float32 1.0 is 0x3F800000, nonzero; -0.0 is 0x80000000, also nonzero (bit-exact).
    ("float zeros", np.array([0.0, -0.0, 1.0, 0.0] * 8, np.float32), 32 + 16 * 32),
]


@pytest.mark.parametrize(("label", "data", "bits"), KNOWN, ids=[k[0] for k in KNOWN])
def test_known(label: str, data: np.ndarray, bits: int) -> None:
    assert data.nbytes == 128
    assert ZVC().bits(data).tolist() == [bits]
    assert ref_zvc(data.tobytes()) == bits


def test_max_bits_and_config() -> None:
    assert ZVC.name == "zvc" and ZVC.max_bits == 1056
    assert ZVC().get_config() == {"id": "zvc"}
    assert ZVC().bits(np.zeros(0, np.uint8)).shape == (0,)


@settings(max_examples=200, deadline=None)
@given(st.lists(any_entry, min_size=1, max_size=6))
def test_matches_reference(entries: list[bytes]) -> None:
    bits = ZVC().bits(_arr(entries))
    assert bits.dtype == np.uint16
    assert bits.tolist() == [ref_zvc(e) for e in entries]


@settings(max_examples=100, deadline=None)
@given(st.lists(any_entry, min_size=1, max_size=6), st.booleans())
def test_sectors(entries: list[bytes], zero_flag: bool) -> None:
    zvc = ZVC()
    sectors = zvc.sectors(_arr(entries), zero_flag=zero_flag)
    assert sectors.dtype == np.uint8
    for entry, s in zip(entries, sectors, strict=True):
        if zero_flag and entry == bytes(128):
            assert s == 0
        else:
            assert s == min(4, -(-ref_zvc(entry) // 256))


def test_sectors_zero_entry() -> None:
    zvc = ZVC()
    zero = np.zeros(128, np.uint8)
    assert zvc.sectors(zero).tolist() == [0]                   # flagged in metadata
    assert zvc.sectors(zero, zero_flag=False).tolist() == [1]  # 32 bits -> 1 sector
    assert zvc.sectors(half).tolist() == [3]                   # 544 bits -> 3 sectors
