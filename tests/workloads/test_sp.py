"""sp: the pentadiagonal line solver is exact, the fields fill in from zero (class S: test_adi.py)."""

from __future__ import annotations

import numpy as np

from buddylib.workloads.hpc import sp
from buddylib.workloads.hpc.sp import SP


def test_penta_line_matches_numpy_solve() -> None:
    rng = np.random.default_rng(7)
    for n in (5, 8, 13, 31):
        band = rng.uniform(-1, 1, (5, n))
        band[2] = np.sign(rng.uniform(-1, 1, n)) * (4.5 + rng.uniform(0, 1, n))  # diagonally dominant
        dense = np.zeros((n, n))
        for i in range(n):
            for b in range(5):
                if 0 <= i + b - 2 < n:
                    dense[i, i + b - 2] = band[b, i]
        rhs = rng.normal(size=(5, n))
        # solve rows 1..3 of a strided view, as the solver sees a y- or z-line
        store = np.zeros((5, 2 * n))
        store[:, ::2] = rhs
        a = np.zeros((5, 3 * n))
        a[:, ::3] = band
        sp.penta_line(a[:, ::3], store[:, ::2], 1, 4, n)
        np.testing.assert_allclose(store[1:4, ::2], np.linalg.solve(dense, rhs[1:4].T).T, rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(store[[0, 4], ::2], rhs[[0, 4]])  # other right-hand sides untouched


def test_fields_fill_in_from_zero() -> None:
    run = SP().run("quick", n_snapshots=8, compressors=["bpc32"])
    zero = {a.name: [] for a in run.snapshots[0].allocations}
    for s in run.snapshots:
        for a in s.allocations:
            zero[a.name].append(np.mean(a.sectors["bpc32"] == 0))
    for name in ("rhs", "lhs", "lhsp", "speed"):
        assert zero[name][0] == 1.0 and zero[name][-1] < 0.2, (name, zero[name])
