"""seismic: 3-D elastic wave propagation with C-PML (proxy of SPEC ACCEL 355.seismic, SEISMIC_CPML).

355.seismic is Komatitsch and Martin's SEISMIC_CPML: the 3-D isotropic elastic wave equation
in velocity-stress form on a second-order staggered grid (Madariaga 1976, Virieux 1986),
with unsplit convolutional perfectly matched layers (C-PML, Roden and Gedney 2000) on all
six faces. This proxy is that code (seismic_CPML_3D_isotropic_MPI_OpenMP.f90, one rank)
loop for loop: three stress kernels (sigma_xx/yy/zz; sigma_xy; sigma_xz and sigma_yz) and
two velocity kernels (vx and vy; vz), each updating the C-PML memory variables
``memory_dv*_d*`` / ``memory_dsigma*_d*`` with the recursive-convolution coefficients
``a``/``b``/``K`` (grid and half-grid profiles, d0 from Rcoef = 0.001, NPOWER = 2,
K_MAX = 1, ALPHA_MAX = pi f0), then a point force at one grid point whose time function is
a Ricker wavelet, and rigid (Dirichlet) outer faces.

Differences from the original, deliberate: the medium is a stack of horizontal layers drawn
from ``rng`` (P velocity 2800-4000 m/s, Poisson solid cs = cp / 1.732 as in SEISMIC_CPML,
density 2300-2900 kg/m^3) held in 3-D ``rho``/``lambda``/``mu`` arrays instead of three
constants; the grid is a cube (the original is a 101 x 641 x 640 slab) with the source at its
centre; the source is a Ricker wavelet (SEISMIC_CPML's other option is the first derivative of
a Gaussian) with f0 chosen so the P wavelength spans ten cells; the energy uses the 3-D
stress-strain inversion (the original's 2-D formula). Precision is float64 (``double
precision``), as in SEISMIC_CPML.

Allocations are those of the original: nine wavefield arrays ``vx vy vz sigmaxx sigmayy
sigmazz sigmaxy sigmaxz sigmayz`` and eighteen full-size C-PML memory arrays (zero outside
the absorbing layers and zero everywhere until the wave reaches them), plus the material
arrays and the 1-D damping profiles. They matter for compressibility because the wavefield
starts at exactly zero and fills in as a spherical shell from the source, and the memory
arrays stay zero except in the ten-cell boundary layers.

Checks: the outermost point above a threshold moves away from the source at the P-wave
speed; the energy in the medium grows while the source injects it, then stays bounded and is
absorbed by the C-PML once the wave reaches the boundaries.

Run length, ours / upstream (geodynamics/seismic_cpml ``seismic_CPML_3D_isotropic_MPI_OpenMP.f90``):
101 x 641 x 640 points 10 m apart, NSTEP = 2,500 steps of DELTAT = 1.6 ms (4 s simulated), a 7 Hz source;
SPEC does not publish 355.seismic's input. Ours runs 100 steps at quick and 480 at every larger size with
its own time step (0.89 ms), not yet the upstream's simulated time (issue 41 converts it next).

Arrays, ours / upstream (read: ``seismic_CPML_3D_isotropic_MPI_OpenMP.f90`` in
geodynamics/seismic_cpml; SPEC ACCEL 355.seismic's own source is not public):

=========================================  ===================================================
ours                                       SEISMIC_CPML
=========================================  ===================================================
``vx vy vz sigmaxx sigmayy sigmazz         the same nine, (NX, NY, 0:NZ_LOCAL+1): two extra
sigmaxy sigmaxz sigmayz`` (n^3)            z planes for the MPI exchange
the eighteen ``memory_d*_d*`` (n^3)        the same eighteen, (NX, NY, NZ_LOCAL)
``rho``, ``lambda``, ``mu`` (n^3)          scalar constants ``rho``, ``lambda``, ``mu``
``a_*``, ``b_*``, ``K_*`` and their        ``d_*``, ``K_*``, ``alpha_*``, ``a_*``, ``b_*`` and
``_half`` per axis (18 vectors)            their ``_half`` per axis (30 vectors)
(none)                                     receivers ``ix_rec``, ``iy_rec``, ``xrec``, ``yrec``,
                                           seismograms ``sisvx``, ``sisvy`` (NSTEP x NREC),
                                           ``total_energy`` (NSTEP)
=========================================  ===================================================

Where ours differs, and why: the layered medium needs 3-D material arrays (above); one rank, so
no MPI planes; the damping profiles ``d_*`` and ``alpha_*`` are only used to compute ``a_*`` and
``b_*`` at start-up, so they are not kept; no receivers or seismograms (output, not state).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import QUICK_LIMIT, Access, AccessProfile, Kernel, Workload, grid_kernel, threads_for
from buddylib.workloads.hpc import _libm

DELTA = 10.0  # m, grid spacing in x, y and z
COURANT = 0.6  # cp_max * dt * sqrt(3) / DELTA
RCOEF, NPOWER, K_MAX_PML = 0.001, 2.0, 1.0
ANGLE_FORCE = 135.0  # degrees, clockwise from the y axis, in the x-y plane, as in SEISMIC_CPML
FACTOR = 1.0e7
WAVES = ("vx", "vy", "vz", "sigmaxx", "sigmayy", "sigmazz", "sigmaxy", "sigmaxz", "sigmayz")
MEMORY = tuple(f"memory_{n}" for n in (
    "dvx_dx", "dvx_dy", "dvx_dz", "dvy_dx", "dvy_dy", "dvy_dz", "dvz_dx", "dvz_dy", "dvz_dz",
    "dsigmaxx_dx", "dsigmayy_dy", "dsigmazz_dz", "dsigmaxy_dx", "dsigmaxy_dy", "dsigmaxz_dx", "dsigmaxz_dz",
    "dsigmayz_dy", "dsigmayz_dz"))
MATERIAL = ("rho", "lambda", "mu")
PROFILES = tuple(f"{c}_{d}{h}" for d in "xyz" for c in ("a", "b", "K") for h in ("", "_half"))


@grid_kernel
def _stress_diag(vx, vy, vz, sxx, syy, szz, m_dvx_dx, m_dvy_dy, m_dvz_dz, lam, mu, a_x_half, b_x_half, K_x_half,
                 a_y, b_y, K_y, a_z, b_z, K_z, dt, inv_d):
    nz, ny, nx = vx.shape
    for k in nb.prange(1, nz):
        for j in range(1, ny):
            for i in range(0, nx - 1):
                dvx_dx = (vx[k, j, i + 1] - vx[k, j, i]) * inv_d
                dvy_dy = (vy[k, j, i] - vy[k, j - 1, i]) * inv_d
                dvz_dz = (vz[k, j, i] - vz[k - 1, j, i]) * inv_d
                m_dvx_dx[k, j, i] = b_x_half[i] * m_dvx_dx[k, j, i] + a_x_half[i] * dvx_dx
                m_dvy_dy[k, j, i] = b_y[j] * m_dvy_dy[k, j, i] + a_y[j] * dvy_dy
                m_dvz_dz[k, j, i] = b_z[k] * m_dvz_dz[k, j, i] + a_z[k] * dvz_dz
                dvx_dx = dvx_dx / K_x_half[i] + m_dvx_dx[k, j, i]
                dvy_dy = dvy_dy / K_y[j] + m_dvy_dy[k, j, i]
                dvz_dz = dvz_dz / K_z[k] + m_dvz_dz[k, j, i]
                dt_lambda = dt * lam[k, j, i]
                dt_l2mu = dt_lambda + 2.0 * dt * mu[k, j, i]
                sxx[k, j, i] = dt_l2mu * dvx_dx + dt_lambda * (dvy_dy + dvz_dz) + sxx[k, j, i]
                syy[k, j, i] = dt_lambda * (dvx_dx + dvz_dz) + dt_l2mu * dvy_dy + syy[k, j, i]
                szz[k, j, i] = dt_lambda * (dvx_dx + dvy_dy) + dt_l2mu * dvz_dz + szz[k, j, i]


@grid_kernel
def _stress_xy(vx, vy, sxy, m_dvy_dx, m_dvx_dy, mu, a_x, b_x, K_x, a_y_half, b_y_half, K_y_half, dt, inv_d):
    nz, ny, nx = vx.shape
    for k in nb.prange(0, nz):
        for j in range(0, ny - 1):
            for i in range(1, nx):
                dvy_dx = (vy[k, j, i] - vy[k, j, i - 1]) * inv_d
                dvx_dy = (vx[k, j + 1, i] - vx[k, j, i]) * inv_d
                m_dvy_dx[k, j, i] = b_x[i] * m_dvy_dx[k, j, i] + a_x[i] * dvy_dx
                m_dvx_dy[k, j, i] = b_y_half[j] * m_dvx_dy[k, j, i] + a_y_half[j] * dvx_dy
                dvy_dx = dvy_dx / K_x[i] + m_dvy_dx[k, j, i]
                dvx_dy = dvx_dy / K_y_half[j] + m_dvx_dy[k, j, i]
                sxy[k, j, i] = dt * mu[k, j, i] * (dvy_dx + dvx_dy) + sxy[k, j, i]


@grid_kernel
def _stress_xz_yz(vx, vy, vz, sxz, syz, m_dvz_dx, m_dvx_dz, m_dvz_dy, m_dvy_dz, mu, a_x, b_x, K_x, a_y_half, b_y_half,
                  K_y_half, a_z_half, b_z_half, K_z_half, dt, inv_d):
    nz, ny, nx = vx.shape
    for k in nb.prange(0, nz - 1):
        for j in range(0, ny):
            for i in range(1, nx):
                dvz_dx = (vz[k, j, i] - vz[k, j, i - 1]) * inv_d
                dvx_dz = (vx[k + 1, j, i] - vx[k, j, i]) * inv_d
                m_dvz_dx[k, j, i] = b_x[i] * m_dvz_dx[k, j, i] + a_x[i] * dvz_dx
                m_dvx_dz[k, j, i] = b_z_half[k] * m_dvx_dz[k, j, i] + a_z_half[k] * dvx_dz
                dvz_dx = dvz_dx / K_x[i] + m_dvz_dx[k, j, i]
                dvx_dz = dvx_dz / K_z_half[k] + m_dvx_dz[k, j, i]
                sxz[k, j, i] = dt * mu[k, j, i] * (dvz_dx + dvx_dz) + sxz[k, j, i]
        for j in range(0, ny - 1):
            for i in range(0, nx):
                dvz_dy = (vz[k, j + 1, i] - vz[k, j, i]) * inv_d
                dvy_dz = (vy[k + 1, j, i] - vy[k, j, i]) * inv_d
                m_dvz_dy[k, j, i] = b_y_half[j] * m_dvz_dy[k, j, i] + a_y_half[j] * dvz_dy
                m_dvy_dz[k, j, i] = b_z_half[k] * m_dvy_dz[k, j, i] + a_z_half[k] * dvy_dz
                dvz_dy = dvz_dy / K_y_half[j] + m_dvz_dy[k, j, i]
                dvy_dz = dvy_dz / K_z_half[k] + m_dvy_dz[k, j, i]
                syz[k, j, i] = dt * mu[k, j, i] * (dvz_dy + dvy_dz) + syz[k, j, i]


@grid_kernel
def _velocity_xy(vx, vy, sxx, syy, sxy, sxz, syz, m_dsxx_dx, m_dsxy_dy, m_dsxz_dz, m_dsxy_dx, m_dsyy_dy, m_dsyz_dz,
                 rho, a_x, b_x, K_x, a_x_half, b_x_half, K_x_half, a_y, b_y, K_y, a_y_half, b_y_half, K_y_half,
                 a_z, b_z, K_z, dt, inv_d):
    nz, ny, nx = vx.shape
    for k in nb.prange(1, nz):
        for j in range(1, ny):
            for i in range(1, nx):
                dsxx_dx = (sxx[k, j, i] - sxx[k, j, i - 1]) * inv_d
                dsxy_dy = (sxy[k, j, i] - sxy[k, j - 1, i]) * inv_d
                dsxz_dz = (sxz[k, j, i] - sxz[k - 1, j, i]) * inv_d
                m_dsxx_dx[k, j, i] = b_x[i] * m_dsxx_dx[k, j, i] + a_x[i] * dsxx_dx
                m_dsxy_dy[k, j, i] = b_y[j] * m_dsxy_dy[k, j, i] + a_y[j] * dsxy_dy
                m_dsxz_dz[k, j, i] = b_z[k] * m_dsxz_dz[k, j, i] + a_z[k] * dsxz_dz
                dsxx_dx = dsxx_dx / K_x[i] + m_dsxx_dx[k, j, i]
                dsxy_dy = dsxy_dy / K_y[j] + m_dsxy_dy[k, j, i]
                dsxz_dz = dsxz_dz / K_z[k] + m_dsxz_dz[k, j, i]
                vx[k, j, i] = dt / rho[k, j, i] * (dsxx_dx + dsxy_dy + dsxz_dz) + vx[k, j, i]
        for j in range(0, ny - 1):
            for i in range(0, nx - 1):
                dsxy_dx = (sxy[k, j, i + 1] - sxy[k, j, i]) * inv_d
                dsyy_dy = (syy[k, j + 1, i] - syy[k, j, i]) * inv_d
                dsyz_dz = (syz[k, j, i] - syz[k - 1, j, i]) * inv_d
                m_dsxy_dx[k, j, i] = b_x_half[i] * m_dsxy_dx[k, j, i] + a_x_half[i] * dsxy_dx
                m_dsyy_dy[k, j, i] = b_y_half[j] * m_dsyy_dy[k, j, i] + a_y_half[j] * dsyy_dy
                m_dsyz_dz[k, j, i] = b_z[k] * m_dsyz_dz[k, j, i] + a_z[k] * dsyz_dz
                dsxy_dx = dsxy_dx / K_x_half[i] + m_dsxy_dx[k, j, i]
                dsyy_dy = dsyy_dy / K_y_half[j] + m_dsyy_dy[k, j, i]
                dsyz_dz = dsyz_dz / K_z[k] + m_dsyz_dz[k, j, i]
                vy[k, j, i] = dt / rho[k, j, i] * (dsxy_dx + dsyy_dy + dsyz_dz) + vy[k, j, i]


@grid_kernel
def _velocity_z(vz, szz, sxz, syz, m_dsxz_dx, m_dsyz_dy, m_dszz_dz, rho, a_x_half, b_x_half, K_x_half, a_y, b_y, K_y,
                a_z_half, b_z_half, K_z_half, dt, inv_d):
    nz, ny, nx = vz.shape
    for k in nb.prange(0, nz - 1):
        for j in range(1, ny):
            for i in range(0, nx - 1):
                dsxz_dx = (sxz[k, j, i + 1] - sxz[k, j, i]) * inv_d
                dsyz_dy = (syz[k, j, i] - syz[k, j - 1, i]) * inv_d
                dszz_dz = (szz[k + 1, j, i] - szz[k, j, i]) * inv_d
                m_dsxz_dx[k, j, i] = b_x_half[i] * m_dsxz_dx[k, j, i] + a_x_half[i] * dsxz_dx
                m_dsyz_dy[k, j, i] = b_y[j] * m_dsyz_dy[k, j, i] + a_y[j] * dsyz_dy
                m_dszz_dz[k, j, i] = b_z_half[k] * m_dszz_dz[k, j, i] + a_z_half[k] * dszz_dz
                dsxz_dx = dsxz_dx / K_x_half[i] + m_dsxz_dx[k, j, i]
                dsyz_dy = dsyz_dy / K_y[j] + m_dsyz_dy[k, j, i]
                dszz_dz = dszz_dz / K_z_half[k] + m_dszz_dz[k, j, i]
                vz[k, j, i] = dt / rho[k, j, i] * (dsxz_dx + dsyz_dy + dszz_dz) + vz[k, j, i]


@grid_kernel
def _energy(npml, vx, vy, vz, sxx, syy, szz, sxy, sxz, syz, rho, lam, mu):
    """Kinetic and strain energy of the medium inside the absorbing layers (J per m^3 of cell volume)."""
    nz, ny, nx = vx.shape
    kin = np.zeros(nz)
    pot = np.zeros(nz)
    for k in nb.prange(npml, nz - npml):
        for j in range(npml, ny - npml):
            for i in range(npml, nx - npml):
                kin[k] += 0.5 * rho[k, j, i] * (vx[k, j, i] ** 2 + vy[k, j, i] ** 2 + vz[k, j, i] ** 2)
                la, m = lam[k, j, i], mu[k, j, i]
                dn = m * (3.0 * la + 2.0 * m)
                a, b, c = sxx[k, j, i], syy[k, j, i], szz[k, j, i]
                pot[k] += 0.5 * (((la + m) * (a * a + b * b + c * c) - la * (a * b + b * c + a * c)) / dn
                                 + (sxy[k, j, i] ** 2 + sxz[k, j, i] ** 2 + syz[k, j, i] ** 2) / m)
    return kin.sum(), pot.sum()


def cpml_profile(n: int, npml: int, cp: float, dt: float, f0: float) -> dict[str, np.ndarray]:
    """SEISMIC_CPML's damping profile along one axis: a, b, K on the grid points and the half points."""
    out = {}
    if npml == 0:  # no absorbing layer: a = 0, b = K = 1 leaves the memory variables at zero
        for half in ("", "_half"):
            out |= {f"a{half}": np.zeros(n), f"b{half}": np.ones(n), f"K{half}": np.ones(n)}
        return out
    thickness = npml * DELTA
    d0 = -(NPOWER + 1) * cp * math.log(RCOEF) / (2.0 * thickness)
    alpha_max = 2.0 * np.pi * (f0 / 2.0)
    val = DELTA * np.arange(n)
    for half, shift in (("", 0.0), ("_half", DELTA / 2.0)):
        d = np.zeros(n)
        kk = np.ones(n)
        alpha = np.zeros(n)
        for absc in (thickness - (val + shift), (val + shift) - ((n - 1) * DELTA - thickness)):
            inside = absc >= 0.0
            norm = absc[inside] / thickness
            d[inside] = d0 * _libm.power(norm, NPOWER)
            kk[inside] = 1.0 + (K_MAX_PML - 1.0) * _libm.power(norm, NPOWER)
            alpha[inside] = alpha_max * (1.0 - norm)
        alpha = np.maximum(alpha, 0.0)
        b = _libm.exp(-(d / kk + alpha) * dt)
        a = np.zeros(n)
        big = np.abs(d) > 1e-6
        a[big] = d[big] * (b[big] - 1.0) / (kk[big] * (d[big] + kk[big] * alpha[big]))
        out |= {f"a{half}": a, f"b{half}": b, f"K{half}": kk}
    return out


def grid_bytes(n: int) -> int:
    return 8 * (n**3 * (len(WAVES) + len(MEMORY) + len(MATERIAL)) + n * len(PROFILES))


@register
class Seismic(Workload):
    name = "seismic"
    proxies = "SPEC ACCEL 355.seismic (SEISMIC_CPML)"

    def setup(self, footprint: int, rng: np.random.Generator, n: int | None = None, n_layers: int | None = None,
              npml: int | None = None) -> None:
        if n is None:
            n = round((footprint / (8 * (len(WAVES) + len(MEMORY) + len(MATERIAL)))) ** (1 / 3)) + 1
            while grid_bytes(n) > footprint:
                n -= 1
        self.n = n
        self.npml = npml if npml is not None else max(2, min(10, n // 8))
        self.n_steps = 100 if footprint <= QUICK_LIMIT else 480
        # layered medium: horizontal interfaces at random depths, properties from rng
        n_layers = int(rng.integers(3, 6)) if n_layers is None else n_layers
        cuts = np.sort(rng.choice(np.arange(1, n), size=n_layers - 1, replace=False)) if n_layers > 1 else []
        layer_of_k = np.searchsorted(np.asarray(cuts), np.arange(n), side="right")
        if n_layers > 1:
            cp_l = rng.uniform(2800.0, 4000.0, n_layers)
            rho_l = rng.uniform(2300.0, 2900.0, n_layers)
        else:
            cp_l, rho_l = np.array([3300.0]), np.array([2800.0])
        cs_l = cp_l / 1.732
        self.cp_layers = cp_l
        shape = (n, n, n)  # [k, j, i]: x fastest, as in the Fortran
        self.f: dict[str, np.ndarray] = {name: np.zeros(shape) for name in WAVES + MEMORY}
        rho = np.broadcast_to(rho_l[layer_of_k][:, None, None], shape)
        mu = rho * np.broadcast_to((cs_l**2)[layer_of_k][:, None, None], shape)
        lam = rho * np.broadcast_to((cp_l**2 - 2 * cs_l**2)[layer_of_k][:, None, None], shape)
        self.f |= {"rho": np.ascontiguousarray(rho), "lambda": np.ascontiguousarray(lam),
                   "mu": np.ascontiguousarray(mu)}
        cp_max = float(cp_l.max())
        self.dt = COURANT * DELTA / (cp_max * np.sqrt(3.0))
        self.source = (n // 2, n // 2, n // 2)  # (k, j, i)
        self.cp_source = float(cp_l[layer_of_k[self.source[0]]])
        self.f0 = self.cp_source / (10.0 * DELTA)  # the dominant P wavelength spans ten cells
        self.t0 = 1.2 / self.f0
        prof = cpml_profile(n, self.npml, cp_max, self.dt, self.f0)
        for d in "xyz":
            self.f |= {f"{c}_{d}{h}": prof[f"{c}{h}"].copy() for c in ("a", "b", "K") for h in ("", "_half")}
        self.it = 0

    def source_term(self, it: int) -> float:
        """Ricker wavelet (second derivative of a Gaussian) at time step ``it`` (it = 1 is t = 0)."""
        a = np.pi * np.pi * self.f0 * self.f0
        t = (it - 1) * self.dt
        return FACTOR * (1.0 - 2.0 * a * (t - self.t0) ** 2) * math.exp(-a * (t - self.t0) ** 2)

    def step(self) -> None:
        f, dt, inv = self.f, self.dt, 1.0 / DELTA
        self.it += 1
        with threads_for(self.n**3):
            _stress_diag(f["vx"], f["vy"], f["vz"], f["sigmaxx"], f["sigmayy"], f["sigmazz"], f["memory_dvx_dx"],
                         f["memory_dvy_dy"], f["memory_dvz_dz"], f["lambda"], f["mu"], f["a_x_half"], f["b_x_half"],
                         f["K_x_half"], f["a_y"], f["b_y"], f["K_y"], f["a_z"], f["b_z"], f["K_z"], dt, inv)
            _stress_xy(f["vx"], f["vy"], f["sigmaxy"], f["memory_dvy_dx"], f["memory_dvx_dy"], f["mu"], f["a_x"],
                       f["b_x"], f["K_x"], f["a_y_half"], f["b_y_half"], f["K_y_half"], dt, inv)
            _stress_xz_yz(f["vx"], f["vy"], f["vz"], f["sigmaxz"], f["sigmayz"], f["memory_dvz_dx"],
                          f["memory_dvx_dz"], f["memory_dvz_dy"], f["memory_dvy_dz"], f["mu"], f["a_x"], f["b_x"],
                          f["K_x"], f["a_y_half"], f["b_y_half"], f["K_y_half"], f["a_z_half"], f["b_z_half"],
                          f["K_z_half"], dt, inv)
            _velocity_xy(f["vx"], f["vy"], f["sigmaxx"], f["sigmayy"], f["sigmaxy"], f["sigmaxz"], f["sigmayz"],
                         f["memory_dsigmaxx_dx"], f["memory_dsigmaxy_dy"], f["memory_dsigmaxz_dz"],
                         f["memory_dsigmaxy_dx"], f["memory_dsigmayy_dy"], f["memory_dsigmayz_dz"], f["rho"],
                         f["a_x"], f["b_x"], f["K_x"], f["a_x_half"], f["b_x_half"], f["K_x_half"], f["a_y"], f["b_y"],
                         f["K_y"], f["a_y_half"], f["b_y_half"], f["K_y_half"], f["a_z"], f["b_z"], f["K_z"], dt, inv)
            _velocity_z(f["vz"], f["sigmazz"], f["sigmaxz"], f["sigmayz"], f["memory_dsigmaxz_dx"],
                        f["memory_dsigmayz_dy"], f["memory_dsigmazz_dz"], f["rho"], f["a_x_half"], f["b_x_half"],
                        f["K_x_half"], f["a_y"], f["b_y"], f["K_y"], f["a_z_half"], f["b_z_half"], f["K_z_half"], dt,
                        inv)
            # the point force, then the rigid outer faces
            k, j, i = self.source
            s = self.source_term(self.it)
            angle = math.radians(ANGLE_FORCE)
            f["vx"][k, j, i] += math.sin(angle) * s * dt / f["rho"][k, j, i]
            f["vy"][k, j, i] += math.cos(angle) * s * dt / f["rho"][k, j, i]
            for v in (f["vx"], f["vy"], f["vz"]):
                v[0], v[-1], v[:, 0], v[:, -1], v[:, :, 0], v[:, :, -1] = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0

    # ------------------------------------------------------------ checks
    @property
    def time(self) -> float:
        """Time of the current wavefield (the source started at t = 0 with step 1)."""
        return self.it * self.dt

    def energy(self) -> float:
        """Kinetic plus strain energy inside the absorbing layers (per unit cell volume)."""
        f = self.f
        kin, pot = _energy(self.npml, f["vx"], f["vy"], f["vz"], f["sigmaxx"], f["sigmayy"], f["sigmazz"],
                           f["sigmaxy"], f["sigmaxz"], f["sigmayz"], f["rho"], f["lambda"], f["mu"])
        return float(kin + pot)

    def front_radius(self, threshold: float = 1e-3) -> float:
        """Distance (m) from the source of the farthest point where |v| exceeds ``threshold`` x its maximum."""
        f = self.f
        speed = np.sqrt(f["vx"] ** 2 + f["vy"] ** 2 + f["vz"] ** 2)
        k, j, i = np.nonzero(speed > threshold * speed.max())
        sk, sj, si = self.source
        return float(DELTA * np.sqrt((k - sk) ** 2 + (j - sj) ** 2 + (i - si) ** 2).max())

    # ------------------------------------------------------------ Workload contract
    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {name: (a, "input" if name in MATERIAL or name in PROFILES else "field") for name, a in self.f.items()}

    def profile(self) -> AccessProfile:
        n3 = float(self.n**3)

        def rd(*names: str) -> list[Access]:
            return [Access(x) for x in names]

        def rw(*names: str) -> list[Access]:
            return [Access(x, "readwrite") for x in names]

        def prof(*names: str) -> list[Access]:
            return [Access(f"{c}_{n}", "read") for n in names for c in ("a", "b", "K")]

        return AccessProfile(self.name, [
            Kernel("stress_xx_yy_zz", rd("vx", "vy", "vz", "lambda", "mu") + prof("x_half", "y", "z")
                   + rw("sigmaxx", "sigmayy", "sigmazz", "memory_dvx_dx", "memory_dvy_dy", "memory_dvz_dz"), 33 * n3),
            Kernel("stress_xy", rd("vx", "vy", "mu") + prof("x", "y_half")
                   + rw("sigmaxy", "memory_dvy_dx", "memory_dvx_dy"), 17 * n3),
            Kernel("stress_xz_yz", rd("vx", "vy", "vz", "mu") + prof("x", "y_half", "z_half")
                   + rw("sigmaxz", "sigmayz", "memory_dvz_dx", "memory_dvx_dz", "memory_dvz_dy", "memory_dvy_dz"),
                   34 * n3),
            Kernel("velocity_xy", rd("sigmaxx", "sigmayy", "sigmaxy", "sigmaxz", "sigmayz", "rho")
                   + prof("x", "x_half", "y", "y_half", "z")
                   + rw("vx", "vy", "memory_dsigmaxx_dx", "memory_dsigmaxy_dy", "memory_dsigmaxz_dz",
                        "memory_dsigmaxy_dx", "memory_dsigmayy_dy", "memory_dsigmayz_dz"), 50 * n3),
            Kernel("velocity_z", rd("sigmaxz", "sigmayz", "sigmazz", "rho") + prof("x_half", "y", "z_half")
                   + rw("vz", "memory_dsigmaxz_dx", "memory_dsigmayz_dy", "memory_dsigmazz_dz"), 25 * n3),
            Kernel("dirichlet", [Access(v, "write", "strided", fraction=min(1.0, 6.0 / self.n), stride=self.n)
                                 for v in ("vx", "vy", "vz")], 0.0),
        ])
