"""Registry, module-level helpers and whole-allocation references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import buddylib
from buddylib import compressors
from buddylib.compressors.reference import reference_bytes, reference_compress, reference_ratio


def test_names_and_round_trip_of_configs() -> None:
    assert compressors.names() == ["bpc32", "bpc64", "bdi", "fpc", "zvc", "bpc32zvc", "ebo-bf16", "ebo-fp16",
                                  "ebo-e4m3"]
    for name in compressors.names():
        c = compressors.get(name)
        assert c.name == name
        assert compressors.get(c.get_config()).name == name


def test_unknown_compressor_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown compressor 'lzma'; available: bpc32"):
        compressors.bits(b"\0" * 128, "lzma")


def test_module_level_helpers() -> None:
    x = np.arange(32, dtype=np.uint32)
    assert buddylib.compressors.bits(x, "bpc32").tolist() == [15]
    assert buddylib.compressors.sectors(np.zeros(64, np.float32), "bdi").tolist() == [0, 0]
    for name in compressors.names():
        s = compressors.sectors(np.random.default_rng(0).bytes(128 * 50), name)
        assert s.dtype == np.uint8 and s.shape == (50,) and s.max() <= 4
        b = compressors.bits(np.zeros(128, np.uint8), name)
        assert b.dtype == np.uint16 and b[0] <= compressors.get(name).max_bits


def test_references_are_real_codecs() -> None:
    import lz4.frame
    import zstandard

    x = np.tile(np.arange(1000, dtype=np.float64), 10)
    z = reference_compress(x, "zstd", 1)
    assert zstandard.ZstdDecompressor().decompress(z) == x.tobytes()
    assert lz4.frame.decompress(reference_compress(x, "lz4")) == x.tobytes()
    assert reference_bytes(x, "zstd") == len(z) < x.nbytes
    assert reference_ratio(x, "lz4") > 1
    with pytest.raises(ValueError, match="unknown reference compressor"):
        reference_bytes(x, "gzip")


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=1, max_size=2048), st.integers(0, 31))
def test_best_of_bpc_and_zvc_is_the_shorter_code_plus_a_selector(data: bytes, zero_every: int) -> None:
    words = np.frombuffer(data + bytes(-len(data) % 4), dtype=np.uint32).copy()
    if zero_every:
        words[::zero_every] = 0  # scattered zeros, as ReLU leaves them
    best = compressors.bits(words, "bpc32zvc").astype(int)
    parts = np.minimum(compressors.bits(words, "bpc32"), compressors.bits(words, "zvc")).astype(int)
    assert (best == parts + 1).all()
    assert (compressors.sectors(words, "bpc32zvc") <= np.maximum(compressors.sectors(words, "bpc32"),
                                                                 compressors.sectors(words, "zvc"))).all()
