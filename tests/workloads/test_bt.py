"""bt: the block-tridiagonal line solver is exact, the Jacobians are the flux derivatives (class S: test_adi.py)."""

from __future__ import annotations

import numpy as np

from buddylib.workloads.hpc import _adi, bt


def test_block_tridiag_line_matches_numpy_solve() -> None:
    rng = np.random.default_rng(11)
    for n in (2, 3, 7, 20):
        blocks = rng.uniform(-1, 1, (3, 5, 5, n))
        blocks[1] += 12.0 * np.eye(5)[:, :, None]  # block diagonally dominant
        blocks[0, :, :, 0] = 0.0  # no A block in the first row, no C block in the last
        blocks[2, :, :, -1] = 0.0
        dense = np.zeros((5 * n, 5 * n))
        for s in range(n):
            for b, t in ((0, s - 1), (1, s), (2, s + 1)):
                if 0 <= t < n:
                    dense[5 * s:5 * s + 5, 5 * t:5 * t + 5] = blocks[b, :, :, s]
        rhs = rng.normal(size=(5, n))
        want = np.linalg.solve(dense, rhs.T.reshape(-1)).reshape(n, 5).T
        # a strided view, as the solver sees a y- or z-line
        a = np.zeros((3, 5, 5, 2 * n))
        a[..., ::2] = blocks
        r = np.zeros((5, 3 * n))
        r[:, ::3] = rhs
        bt.block_tridiag_line(a[..., ::2], r[:, ::3], n)
        np.testing.assert_allclose(r[:, ::3], want, rtol=1e-10, atol=1e-12)


def test_jacobians_are_the_flux_derivatives() -> None:
    """bt_line's fjac is the Jacobian of NPB's Euler flux in each direction (central differences)."""
    rng = np.random.default_rng(3)
    u = np.array([1.3, 0.4, -0.7, 0.2, 3.1])[:, None] + 0.1 * rng.normal(size=(5, 3))

    def flux(w: np.ndarray, d: int) -> np.ndarray:
        rho, vel = w[0], w[1:4] / w[0]
        p = _adi.C2 * (w[4] - 0.5 * rho * (vel**2).sum())
        f = w * vel[d]
        f[1 + d] += p
        f[4] += p * vel[d]
        return f

    for d in range(3):
        w = u.copy()
        rho_i = 1.0 / w[0]
        square = 0.5 * (w[1:4] ** 2).sum(0) * rho_i
        qs = square * rho_i
        fjac, njac = np.zeros((5, 5, 3)), np.zeros((5, 5, 3))
        lhs, r = np.zeros((3, 5, 5, 3)), np.zeros((5, 3))
        bt.bt_line(fjac, njac, lhs, r, w, rho_i, qs, square, 3, d, 0.0, 0.0)
        for s in range(3):
            num = np.empty((5, 5))
            for c in range(5):
                h = np.zeros(5)
                h[c] = 1e-6
                num[:, c] = (flux(w[:, s] + h, d) - flux(w[:, s] - h, d)) / 2e-6
            np.testing.assert_allclose(fjac[:, :, s], num, atol=1e-7)
