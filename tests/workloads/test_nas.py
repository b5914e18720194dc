"""_nas: the NAS generator EP and CG share is exact, and reproduces NPB's published EP class S sums."""

from __future__ import annotations

import numpy as np

from buddylib.workloads.hpc import _nas, cg, ep

MOD = 2**46
A = 5**13


def test_randlc_matches_integer_lcg() -> None:
    """x <- a x mod 2^46 and the deviate x 2^-46, exactly, for EP's and CG's seeds and for a multiplier
    near 2^46 (the jump-ahead powers EP squares its way to)."""
    for seed, a in ((271828183, A), (314159265, A), (MOD - 1, A), (12345677, pow(A, 2**17, MOD)), (3, MOD - 3)):
        x, xi = float(seed), seed
        for _ in range(50):
            x, r = _nas.randlc(x, float(a))
            xi = a * xi % MOD
            assert x == xi and r == xi / MOD
    for e in (0, 1, 2, 17, 2**17, 2**40 + 12345):
        assert _nas.power(float(A), e) == pow(A, e, MOD)


def test_ep_and_cg_draw_from_the_shared_generator() -> None:
    assert ep.randlc is _nas.randlc and cg.randlc is _nas.randlc and ep.A == cg.A == _nas.A == A


def test_ep_class_s_sums_match_npb() -> None:
    """NPB 3.3 EP (EP/ep.f, ``verify``): class S (M = 24, seed 271828183) gives
    sx = -3.247834652034740e3, sy = -6.958407078382297e3, which NPB accepts to 1e-8; every one of
    its 2^25 uniforms comes from randlc."""
    w = ep.EP()
    w.setup_class(24, 64)
    for _ in range(w.n_steps):
        w.step()
    np.testing.assert_allclose(w.sums, [-3.247834652034740e3, -6.958407078382297e3], rtol=1e-8)
