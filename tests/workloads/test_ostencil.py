"""ostencil: Jacobi iterations approach the closed-form discrete steady state."""

from __future__ import annotations

import itertools

import numpy as np

from buddylib.workloads import get
from buddylib.workloads.hpc.ostencil import steady_state


def test_converges_to_discrete_steady_state() -> None:
    w = get("ostencil")
    w.setup(8 * 16**3, np.random.default_rng(0))  # a 14^3 interior
    errors = []
    for _ in range(6):
        for _ in range(100):
            w.step()
        errors.append(w.error())
    assert all(b <= a for a, b in itertools.pairwise(errors))  # monotone approach
    for _ in range(1000):
        w.step()
    assert w.error() < 1e-5  # float32 fields: converged to single precision


def test_steady_state_solves_the_discrete_problem() -> None:
    t = steady_state(10)
    interior = t[1:-1, 1:-1, 1:-1]
    mean6 = (t[:-2, 1:-1, 1:-1] + t[2:, 1:-1, 1:-1] + t[1:-1, :-2, 1:-1] + t[1:-1, 2:, 1:-1]
             + t[1:-1, 1:-1, :-2] + t[1:-1, 1:-1, 2:]) / 6
    np.testing.assert_allclose(interior, mean6, atol=1e-12)
    assert np.allclose(t[-1], 0) and np.allclose(t[:, 0], 0) and t[0].max() > 0.95


def test_heat_front_fills_the_field() -> None:
    run = get("ostencil").run("quick", n_snapshots=8, compressors=["bpc32"])
    zero_share = [np.mean(a.sectors["bpc32"] == 0) for s in run.snapshots for a in s.allocations[:1]]
    assert zero_share[0] > 0.9 and zero_share[-1] < zero_share[0]  # zeros before the field fills in
