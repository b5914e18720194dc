"""Entries: any buffer viewed as (E, 128) uint8, zero-padded, without copying when aligned."""

from __future__ import annotations

import numpy as np
import pytest

from buddylib import as_entries
from buddylib.entries import n_entries


def test_aligned_contiguous_array_is_a_view() -> None:
    x = np.arange(64, dtype=np.float32)  # 256 bytes = 2 entries
    e = as_entries(x)
    assert e.shape == (2, 128) and e.dtype == np.uint8
    assert np.shares_memory(e, x)
    assert e.tobytes() == x.tobytes()


def test_tail_entry_is_zero_padded() -> None:
    x = np.arange(40, dtype=np.uint32)  # 160 bytes -> 2 entries, 96 bytes of padding
    e = as_entries(x)
    assert e.shape == (2, 128)
    assert e.reshape(-1)[:160].tobytes() == x.tobytes()
    assert not e.reshape(-1)[160:].any()


def test_bytes_memoryview_and_multidimensional() -> None:
    raw = bytes(range(256))
    assert as_entries(raw).tobytes() == raw
    assert not as_entries(raw).flags.writeable  # a view of immutable bytes stays read-only
    assert as_entries(memoryview(bytearray(raw))).tobytes() == raw
    m = np.arange(32 * 3, dtype=np.int64).reshape(8, 12)
    assert as_entries(memoryview(m)).tobytes() == m.tobytes()
    assert np.shares_memory(as_entries(m), m)


def test_non_contiguous_is_copied_in_logical_order() -> None:
    m = np.arange(64 * 4, dtype=np.uint32).reshape(64, 4)
    col = m[:, 1]  # strided
    assert as_entries(col).tobytes() == np.ascontiguousarray(col).tobytes()
    assert as_entries(memoryview(m)[::2]).tobytes() == m[::2].tobytes()


def test_empty_and_counts() -> None:
    assert as_entries(np.zeros(0, np.float64)).shape == (0, 128)
    assert as_entries(b"").shape == (0, 128)
    assert [n_entries(n) for n in (0, 1, 128, 129)] == [0, 1, 1, 2]


def test_entries_array_passes_through() -> None:
    e = np.zeros((3, 128), np.uint8)
    assert as_entries(e) is e


@pytest.mark.parametrize("bad", [np.array(["a", "b"], dtype=object), np.array(["text"]), [object()]])
def test_object_and_text_arrays_are_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="weights"):
        as_entries(bad, name="weights")
