"""ep: batches start at the jumped-ahead seeds, the annulus counts are those of Gaussian pairs, class S verifies."""

from __future__ import annotations

import math

import numpy as np

from buddylib.workloads import get
from buddylib.workloads.hpc import ep

MOD = 2**46
A = 5**13
SEED = 271828183


def test_batch_seeds_jump_ahead() -> None:
    """Batch k starts 2 NK k numbers into the stream (the generator itself: test_nas.py)."""
    for k in (0, 1, 2, 3, 77, 4095):
        an = float(pow(A, 2 * ep.NK, MOD))
        assert ep.batch_seed(k, an) == SEED * pow(A, 2 * ep.NK * k, MOD) % MOD


def test_buffer_holds_the_nas_stream() -> None:
    w = get("ep")
    w.setup_class(24, 4)  # class S, 4 batches per block
    w.step()
    w.step()  # second block: batches 4..7
    xx = w.xx.reshape(2 * ep.NK, 4)  # batch index fastest, as the OpenACC code lays it out
    for k in range(4):
        batch = 4 + k
        x = SEED * pow(A, 2 * ep.NK * batch, MOD) % MOD
        for i in (0, 1, 2, 2 * ep.NK // 8, 2 * ep.NK - 1):  # including a piece boundary and the end
            assert xx[i, k] == pow(A, i + 1, MOD) * x % MOD / MOD


def _annulus_probabilities() -> np.ndarray:
    """P(l <= max(|X|, |Y|) < l + 1) for independent standard normals X, Y."""
    p_in = [math.erf(r / math.sqrt(2)) ** 2 for r in range(ep.NQ + 1)]
    return np.diff(p_in)


def test_class_s_counts_sums_and_verification() -> None:
    run = get("ep").run("quick", compressors=["bpc32"])  # quick scale is NAS class S
    w = run.workload
    assert w.m == 24 and w.verified()  # sx, sy as NPB publishes them (also test_nas.py)
    q = w.counts()
    n_pairs = 2**24
    gc = q.sum()
    # acceptance of the polar method: pi / 4, binomial sd ~ 1.7e3 pairs
    assert abs(gc - n_pairs * math.pi / 4) < 5 * math.sqrt(n_pairs * 0.785 * 0.215)
    p = _annulus_probabilities()
    expected = gc * p
    # chi-square over annuli 0..4 and the pooled tail (expected >= 5 everywhere)
    obs = np.append(q[:5], q[5:].sum())
    exp = np.append(expected[:5], expected[5:].sum())
    chi2 = float(np.sum((obs - exp) ** 2 / exp))
    assert chi2 < 20.5  # 5 degrees of freedom, p = 0.001
    assert np.all(np.abs(obs - exp) < 4 * np.sqrt(exp))  # every annulus within 4 sigma
    assert q[6:].sum() == 0  # P(max >= 6) ~ 4e-9: none expected among 1.3e7 pairs


def test_snapshots_start_empty_and_fill_with_randoms() -> None:
    run = get("ep").run("quick", compressors=["bpc32"])
    first = {a.name: a for a in run.snapshots[0].allocations}
    last = {a.name: a for a in run.snapshots[-1].allocations}
    assert {"xx", "qq", "q", "sums"} == set(last)
    assert first["xx"].sectors["bpc32"].max() <= 1  # the -1e99 fill NAS starts from
    assert last["xx"].sectors["bpc32"].mean() > 3.5  # 46-bit uniform randoms barely compress
    assert last["xx"].dtype == "float64" and last["xx"].nbytes == run.workload.blksize * 2 * ep.NK * 8
