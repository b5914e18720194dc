"""The arithmetic behind notebook 09's waterfall (fidelity.attribution and the helpers that make its rows), on small
hand-made numbers, so a sign or baseline slip fails here instead of being committed as the notebook's output."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from buddylib.studies.fidelity import attribution, on_subset, substituted


def test_rows_are_changes_from_one_baseline_and_shares_of_the_gap() -> None:
    t = attribution(1.5, {"bigger": 1.8, "nothing": 1.5, "worse": 1.2, "both": 2.0}, 2.5, "ours, quick")
    assert list(t.index) == ["ours, quick", "bigger", "nothing", "worse", "both", "paper"]
    assert t.loc["ours, quick", "change"] == 0 and t.loc["ours, quick", "share of the gap"] == 0  # the baseline
    assert t.loc["paper", "change"] == pytest.approx(1.0) and t.loc["paper", "share of the gap"] == pytest.approx(1.0)
    assert t.loc["nothing", "change"] == 0 and t.loc["nothing", "share of the gap"] == 0  # moves nothing: reads 0
    assert t.loc["bigger", "share of the gap"] == pytest.approx(0.3)  # (1.8 - 1.5) / (2.5 - 1.5)
    assert t.loc["worse", "share of the gap"] == pytest.approx(-0.3)  # away from the paper: a negative share
    # each factor from the same baseline, not compounded: "both" is its own measurement, not bigger + worse
    assert t.loc["both", "change"] == pytest.approx(0.5)


def test_a_gap_the_other_way_keeps_the_signs_meaningful() -> None:
    t = attribution(2.0, {"closer": 1.8}, 1.0)  # ours above the paper's: closing the gap means going down
    assert t.loc["closer", "change"] == pytest.approx(-0.2)
    assert t.loc["closer", "share of the gap"] == pytest.approx(0.2)


def test_no_gap_gives_no_shares_and_names_cannot_hide_the_ends() -> None:
    assert attribution(1.0, {"f": 1.2}, 1.0)["share of the gap"].isna().all()
    with pytest.raises(ValueError, match="hide the baseline"):
        attribution(1.0, {"paper": 1.2}, 2.0)


def test_a_factor_measured_on_a_subset_is_its_change_on_that_subset() -> None:
    per = pd.Series({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0})  # mean 3
    assert on_subset(per, ["a", "b"], 2.5) == pytest.approx(4.0)  # subset mean 1.5 -> 2.5: +1 on the mean of all
    assert on_subset(per, ["a", "b"], 1.5) == pytest.approx(3.0)  # the subset as it is: no change
    # the slip this guards against: a subset's mean set beside all five's reads as an effect of the factor
    assert on_subset(per, ["d", "e"], 4.5) == pytest.approx(3.0) != per.loc[["d", "e"]].mean()
    with pytest.raises(ValueError, match="not among"):
        on_subset(per, ["a", "z"], 1.0)


def test_substituting_some_networks_moves_the_mean_by_their_changes_over_all() -> None:
    per = pd.Series({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})  # mean 2.5
    assert substituted(per, {"a": 1.0}) == pytest.approx(2.5)  # its own value: no change
    assert substituted(per, {"a": 3.0, "d": 6.0}) == pytest.approx(2.5 + (2.0 + 2.0) / 4)
    assert per.tolist() == [1.0, 2.0, 3.0, 4.0]  # the measured series is left as it was
    with pytest.raises(ValueError, match="not among"):
        substituted(per, {"z": 1.0})
    assert np.isfinite(substituted(per, {}))
