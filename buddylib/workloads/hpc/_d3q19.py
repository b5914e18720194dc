"""The D3Q19 lattice shared by the lattice Boltzmann proxies (olbm, ilbdc).

Directions in the order of SPEC 470.lbm's ``lbm.h``: C, N, S, E, W, T, B, NE, NW, SE, SW,
NT, NB, ST, SB, ET, EB, WT, WB, with N = +y, E = +x, T = +z. ``equilibrium`` is the
second-order BGK equilibrium written as 470.lbm writes it,
``w_i rho (1 + c_i.u (4.5 c_i.u + 3) - 1.5 u.u)``.
"""

from __future__ import annotations

import numpy as np

Q = 19
NAMES = ("C", "N", "S", "E", "W", "T", "B", "NE", "NW", "SE", "SW", "NT", "NB", "ST", "SB", "ET", "EB", "WT", "WB")
_STEP = {"E": (1, 0, 0), "W": (-1, 0, 0), "N": (0, 1, 0), "S": (0, -1, 0), "T": (0, 0, 1), "B": (0, 0, -1)}
#: Lattice velocities (x, y, z) per direction, int64, shape (19, 3).
C = np.array([np.sum([_STEP[ch] for ch in n], axis=0) if n != "C" else (0, 0, 0) for n in NAMES], np.int64)
CX, CY, CZ = (np.ascontiguousarray(C[:, k]) for k in range(3))
#: Lattice weights: 1/3 (rest), 1/18 (faces), 1/36 (edges).
W = np.array([1 / 3] + [1 / 18] * 6 + [1 / 36] * 12)
#: Index of the opposite direction.
OPP = np.array([int(np.flatnonzero((C == -c).all(axis=1))[0]) for c in C], np.int64)
#: Sound speed squared of the lattice.
CS2 = 1 / 3


def equilibrium(rho: np.ndarray | float, u: np.ndarray) -> np.ndarray:
    """Equilibrium distributions, shape (19, *rho.shape), for density ``rho`` and velocity ``u`` (3, ...)."""
    rho = np.asarray(rho, np.float64)
    u = np.asarray(u, np.float64)
    u2 = 1.5 * (u[0] ** 2 + u[1] ** 2 + u[2] ** 2)
    cu = np.tensordot(C.astype(np.float64), u, axes=(1, 0))
    w = W.reshape((Q,) + (1,) * rho.ndim)
    return w * rho * (1.0 + cu * (4.5 * cu + 3.0) - u2)


def moments(f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Density, momentum (3, ...) and momentum flux (3, 3, ...) of distributions ``f`` (19, ...)."""
    c = C.astype(np.float64)
    rho = f.sum(axis=0)
    j = np.tensordot(c.T, f, axes=(1, 0))
    pi = np.einsum("qa,qb,q...->ab...", c, c, f)
    return rho, j, pi
