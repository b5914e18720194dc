"""Layout and policy (SPEC §3) on sector histograms, against cases worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from buddylib import layout

# 100 entries: 10 take 0 sectors, 20 take 1, 30 take 2, 25 take 3, 15 take 4
HIST = np.array([10, 20, 30, 25, 15])


def test_device_share_per_target() -> None:
    assert layout.device_share_bytes(layout.EXTENDED_TARGETS).tolist() == [128, 96, 64, 32, 16, 8]


def test_overflow_fraction_by_hand() -> None:
    # r=1 keeps all 4 sectors: nothing overflows; r=4/3 (96 B): only 4-sector entries (15);
    # r=2 (64 B): 3 and 4 sectors (25 + 15); r=4 (32 B): 2, 3, 4 sectors (30 + 25 + 15)
    got = layout.overflow_fraction(HIST, np.array(layout.TARGETS))
    np.testing.assert_allclose(got, [0.0, 0.15, 0.40, 0.70])
    # extended: an 8-byte share is exceeded by every nonzero entry
    assert layout.overflow_fraction(HIST, 16.0) == pytest.approx(0.9)


def test_overflow_bytes_by_hand() -> None:
    # at r=2 each 3-sector entry puts 32 B and each 4-sector entry 64 B in buddy memory
    assert layout.overflow_bytes(HIST, 2.0) == 25 * 32 + 15 * 64


def test_overflow_entries_by_hand() -> None:
    # at r=2 the 3- and 4-sector entries overflow; weighted, their weights are summed instead
    assert layout.overflow_entries(HIST, 2.0) == 25 + 15
    np.testing.assert_allclose(layout.overflow_entries(HIST * 0.5, np.array([1.0, 4.0])), [0.0, 35.0])


def test_policy_targets_by_hand() -> None:
    # two snapshots of two allocations (one compressor): "a" like HIST then incompressible, "b" all zero
    h = np.zeros((2, 2, 1, 5))
    h[0, 0, 0], h[1, 0, 0] = HIST, [0, 0, 0, 0, 100]
    h[:, 1, 0] = [100, 0, 0, 0, 0]
    th = np.array([0.3, 0.7])
    profile = layout.policy_targets(h, th, layout.TARGETS, "profile")
    assert profile.shape == (2, 2, 1, 2)
    np.testing.assert_allclose(profile[:, 0, 0], [[1.0, 1.0]] * 2)  # its worst snapshot decides
    np.testing.assert_allclose(profile[:, 1, 0], [[4.0, 4.0]] * 2)
    oracle = layout.policy_targets(h, th, layout.TARGETS, "oracle")
    np.testing.assert_allclose(oracle[:, 0, 0], [[4 / 3, 4.0], [1.0, 1.0]])  # each snapshot on its own
    # global: one target for both, on their summed histogram in every snapshot; in snapshot 1 half the
    # entries take 4 sectors, so at 30% nothing beyond r=1 qualifies, though "b" alone would take r=4
    np.testing.assert_allclose(layout.policy_targets(h, th, layout.TARGETS, "global")[0, :, 0], [[1.0, 4.0]] * 2)
    with pytest.raises(ValueError, match="unknown policy"):
        layout.policy_targets(h, th, layout.TARGETS, "best")


def test_choose_target_most_aggressive_within_threshold() -> None:
    assert layout.choose_target(HIST[None], 0.3) == pytest.approx(4 / 3)
    assert layout.choose_target(HIST[None], 0.4) == 2.0
    assert layout.choose_target(HIST[None], 0.7) == 4.0
    assert layout.choose_target(HIST[None], 0.0) == 1.0  # 15 entries always overflow below r=1
    # every profiled snapshot must satisfy the threshold: an incompressible later snapshot wins
    both = np.stack([HIST, [0, 0, 0, 0, 100]])
    assert layout.choose_target(both, 0.3) == 1.0
    # vectorised over leading axes (e.g. allocations)
    many = np.stack([HIST[None], np.array([[100, 0, 0, 0, 0]])])
    np.testing.assert_allclose(layout.choose_target(many, 0.3), [4 / 3, 4.0])


def test_bytes_by_hand() -> None:
    assert layout.device_bytes(100, 2.0) == 100 * 64
    assert layout.buddy_bytes(100, 4 / 3) == pytest.approx(100 * 32)
    assert layout.metadata_bytes(100) == 50  # 4 bits per entry = 0.39% of 128 B
    assert layout.metadata_bytes(1) / 128 == pytest.approx(0.0039, abs=1e-4)


def test_sector_histogram() -> None:
    s = np.array([0, 1, 1, 4, 2, 2, 2], np.uint8)
    assert layout.sector_histogram(s).tolist() == [1, 2, 3, 0, 1]
    w = np.array([1, 0, 0, 5, 1, 1, 1.0])
    assert layout.sector_histogram(s, w).tolist() == [1, 0, 3, 0, 5]
    with pytest.raises(ValueError, match=r"0\.\.4"):
        layout.sector_histogram(np.array([5], np.uint8))


@pytest.mark.parametrize("bad", [-0.1, 1.5, np.nan])
def test_threshold_outside_unit_interval(bad: float) -> None:
    with pytest.raises(ValueError, match="buddy threshold"):
        layout.check_threshold(bad)


@pytest.mark.parametrize("bad", [3, 0.5, 32])
def test_unknown_target(bad: float) -> None:
    with pytest.raises(ValueError, match=f"target {bad:g} is not supported"):
        layout.check_targets([1, bad])


def test_tiered_entries_keep_more_in_buddy_memory_than_on_the_device() -> None:
    # the device keeps 128/r bytes of an entry; it is tiered where its other sectors are more than that
    assert layout.tiered([1, 2, 4, 8, 16]).tolist() == [
        [False] * 5, [False] * 5, [False, False, False, True, True], [False, False, True, True, True],
        [False, True, True, True, True]]
    h = np.array([10, 0, 0, 3, 5])  # 10 zero entries, 3 taking 3 sectors, 5 raw
    assert layout.tiered_entries(h, 4.0) == 8 and layout.tiered_buddy_bytes(h, 4.0) == 3 * 64 + 5 * 96
    assert layout.tiered_entries(h, 2.0) == 0


def test_buddy_analyze_says_how_much_of_the_ratio_is_tiering(tmp_path, capsys) -> None:
    from buddylib.cli import main

    rng = np.random.default_rng(0)
    path = tmp_path / "half.npy"
    np.save(path, np.concatenate([np.zeros(1 << 18, np.uint8), rng.integers(0, 256, 1 << 18).astype(np.uint8)]))
    assert main(["analyze", str(path), "--compressor", "bpc32"]) == 0
    assert "tiering" not in capsys.readouterr().out  # the paper's targets park no entry in buddy memory
    assert main(["analyze", str(path), "--compressor", "bpc32", "--targets", "16", "8", "4", "2", "1",
                 "--region", "4KiB"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    effective, alone = (float(line.split(x)[1].split("x")[0]) for x in ("effective ratio ", "compression alone "))
    assert "of it tiering" in line and effective > 2.0 > alone > 1.0  # past the ideal (2x) only by tiering
