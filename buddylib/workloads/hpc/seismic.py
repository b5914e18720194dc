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
the first derivative of a Gaussian, and rigid (Dirichlet) outer faces.

The problem is SEISMIC_CPML's own: a homogeneous medium (cp = 3300 m/s, cs = cp / 1.732, rho = 2800
kg/m^3, scalar constants as upstream), a 7 Hz source (t0 = 1.2 / f0, factor 1e7, force at 135 degrees in
the x-y plane) at upstream's grid point (ISOURCE = NX - 2 NPOINTS_PML - 1, JSOURCE = 2 NY / 3 + 1, the
cut plane NZ / 2), C-PML layers 100 m thick (NPOINTS_PML = 10 at 10 m), and a start of all zeros. Precision
is float64 (``double precision``), as in SEISMIC_CPML.

Run length and size, ours / upstream (geodynamics/seismic_cpml ``seismic_CPML_3D_isotropic_MPI_OpenMP.f90``;
SPEC does not publish 355.seismic's input): upstream's slab is 101 x 641 x 640 points 10 m apart
(1000 x 6400 x 6390 m, about 9 GB of our arrays) and runs NSTEP = 2,500 steps of DELTAT = 1.6 ms: 4 s of
simulated time. Ours keeps that slab and those 4 s at every size and sets the spacing to the finest the
footprint holds (:func:`upstream_grid`), with the time step scaled with it (upstream's Courant number,
0.91), so a finer grid takes more steps, as a refined run of upstream would:

========  ===============  ==========  =====  ========================
size      points           spacing     steps  absorbing layers
========  ===============  ==========  =====  ========================
quick     7 x 39 x 39      167 m       150    2 points (the minimum)
32 MiB    16 x 97 x 97     67 m        375    2 points (the minimum)
128 MiB   25 x 155 x 154   42 m        600    2 points
1 GiB     50 x 315 x 314   20 m        1225   5 points
4 GiB     79 x 500 x 499   13 m        1950   8 points
========  ===============  ==========  =====  ========================

Every size runs the whole 4 s; one ``step`` of the workload is 1/28 of it
(:mod:`~buddylib.workloads.hpc._schedule`). Below 128 MiB the grid is too coarse for the wave (under
eight points per S wavelength at 32 MiB, two at quick), and at quick the source sits at the first point
inside the x layer, where upstream's point would fall in it: those sizes stand for the allocations, not
the seismology.

Allocations are those of the original: nine wavefield arrays ``vx vy vz sigmaxx sigmayy
sigmazz sigmaxy sigmaxz sigmayz`` and eighteen full-size C-PML memory arrays (zero outside
the absorbing layers and zero everywhere until the wave reaches them), plus the 1-D damping
profiles. They matter for compressibility because the wavefield starts at exactly zero and
fills in as a spherical shell from the source, which leaves the slab through the layers within
about 2.5 s, and the memory arrays stay zero except in the layers.

Checks: the outermost point above a threshold moves away from the source at the P-wave
speed; the energy in the medium grows while the source injects it, then stays bounded and is
absorbed by the C-PML once the wave reaches the boundaries.

Arrays, ours / upstream (read: ``seismic_CPML_3D_isotropic_MPI_OpenMP.f90`` in
geodynamics/seismic_cpml; SPEC ACCEL 355.seismic's own source is not public):

=========================================  ===================================================
ours                                       SEISMIC_CPML
=========================================  ===================================================
``vx vy vz sigmaxx sigmayy sigmazz         the same nine, (NX, NY, 0:NZ_LOCAL+1): two extra
sigmaxy sigmaxz sigmayz`` (nz, ny, nx)     z planes for the MPI exchange
the eighteen ``memory_d*_d*``              the same eighteen, (NX, NY, NZ_LOCAL)
(none)                                     scalar constants ``rho``, ``lambda``, ``mu``
``a_*``, ``b_*``, ``K_*`` and their        ``d_*``, ``K_*``, ``alpha_*``, ``a_*``, ``b_*`` and
``_half`` per axis (18 vectors)            their ``_half`` per axis (30 vectors)
(none)                                     receivers ``ix_rec``, ``iy_rec``, ``xrec``, ``yrec``,
                                           seismograms ``sisvx``, ``sisvy`` (NSTEP x NREC),
                                           ``total_energy`` (NSTEP)
=========================================  ===================================================

Where ours differs, and why: one rank, so no MPI planes; the damping profiles ``d_*`` and
``alpha_*`` are only used to compute ``a_*`` and ``b_*`` at start-up, so they are not kept; no
receivers or seismograms (output, not state); the energy uses the 3-D stress-strain inversion
(upstream's is the 2-D formula).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, AccessProfile, Kernel, Workload, grid_kernel, threads_for
from buddylib.workloads.hpc import _libm
from buddylib.workloads.hpc._schedule import Scheduled

#: SEISMIC_CPML's model: NX x NY x NZ points DELTA m apart, NSTEP steps of DELTAT s, a homogeneous medium
UPSTREAM_POINTS = (101, 641, 640)  # NX, NY, NZ
UPSTREAM_DELTA, UPSTREAM_DELTAT, NSTEP = 10.0, 1.6e-3, 2500
END_TIME = NSTEP * UPSTREAM_DELTAT  # 4 s of simulated time
EXTENT = tuple((p - 1) * UPSTREAM_DELTA for p in UPSTREAM_POINTS)  # 1000 x 6400 x 6390 m
CP, RHO = 3300.0, 2800.0  # m/s, kg/m^3
CS = CP / 1.732
F0 = 7.0  # Hz, the source's dominant frequency
NPOINTS_PML = 10  # points of each absorbing layer at DELTA = 10 m (100 m)
RCOEF, NPOWER, K_MAX_PML = 0.001, 2.0, 1.0
ANGLE_FORCE = 135.0  # degrees, clockwise from the y axis, in the x-y plane, as in SEISMIC_CPML
FACTOR = 1.0e7
WAVES = ("vx", "vy", "vz", "sigmaxx", "sigmayy", "sigmazz", "sigmaxy", "sigmaxz", "sigmayz")
MEMORY = tuple(f"memory_{n}" for n in (
    "dvx_dx", "dvx_dy", "dvx_dz", "dvy_dx", "dvy_dy", "dvy_dz", "dvz_dx", "dvz_dy", "dvz_dz",
    "dsigmaxx_dx", "dsigmayy_dy", "dsigmazz_dz", "dsigmaxy_dx", "dsigmaxy_dy", "dsigmaxz_dx", "dsigmaxz_dz",
    "dsigmayz_dy", "dsigmayz_dz"))
PROFILES = tuple(f"{c}_{d}{h}" for d in "xyz" for c in ("a", "b", "K") for h in ("", "_half"))


@grid_kernel
def _stress_diag(vx, vy, vz, sxx, syy, szz, m_dvx_dx, m_dvy_dy, m_dvz_dz, dt_lambda, dt_l2mu, a_x_half, b_x_half,
                 K_x_half, a_y, b_y, K_y, a_z, b_z, K_z, inv_d):
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
                sxx[k, j, i] = dt_l2mu * dvx_dx + dt_lambda * (dvy_dy + dvz_dz) + sxx[k, j, i]
                syy[k, j, i] = dt_lambda * (dvx_dx + dvz_dz) + dt_l2mu * dvy_dy + syy[k, j, i]
                szz[k, j, i] = dt_lambda * (dvx_dx + dvy_dy) + dt_l2mu * dvz_dz + szz[k, j, i]


@grid_kernel
def _stress_xy(vx, vy, sxy, m_dvy_dx, m_dvx_dy, dt_mu, a_x, b_x, K_x, a_y_half, b_y_half, K_y_half, inv_d):
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
                sxy[k, j, i] = dt_mu * (dvy_dx + dvx_dy) + sxy[k, j, i]


@grid_kernel
def _stress_xz_yz(vx, vy, vz, sxz, syz, m_dvz_dx, m_dvx_dz, m_dvz_dy, m_dvy_dz, dt_mu, a_x, b_x, K_x, a_y_half,
                  b_y_half, K_y_half, a_z_half, b_z_half, K_z_half, inv_d):
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
                sxz[k, j, i] = dt_mu * (dvz_dx + dvx_dz) + sxz[k, j, i]
        for j in range(0, ny - 1):
            for i in range(0, nx):
                dvz_dy = (vz[k, j + 1, i] - vz[k, j, i]) * inv_d
                dvy_dz = (vy[k + 1, j, i] - vy[k, j, i]) * inv_d
                m_dvz_dy[k, j, i] = b_y_half[j] * m_dvz_dy[k, j, i] + a_y_half[j] * dvz_dy
                m_dvy_dz[k, j, i] = b_z_half[k] * m_dvy_dz[k, j, i] + a_z_half[k] * dvy_dz
                dvz_dy = dvz_dy / K_y_half[j] + m_dvz_dy[k, j, i]
                dvy_dz = dvy_dz / K_z_half[k] + m_dvy_dz[k, j, i]
                syz[k, j, i] = dt_mu * (dvz_dy + dvy_dz) + syz[k, j, i]


@grid_kernel
def _velocity_xy(vx, vy, sxx, syy, sxy, sxz, syz, m_dsxx_dx, m_dsxy_dy, m_dsxz_dz, m_dsxy_dx, m_dsyy_dy, m_dsyz_dz,
                 dt_over_rho, a_x, b_x, K_x, a_x_half, b_x_half, K_x_half, a_y, b_y, K_y, a_y_half, b_y_half,
                 K_y_half, a_z, b_z, K_z, inv_d):
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
                vx[k, j, i] = dt_over_rho * (dsxx_dx + dsxy_dy + dsxz_dz) + vx[k, j, i]
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
                vy[k, j, i] = dt_over_rho * (dsxy_dx + dsyy_dy + dsyz_dz) + vy[k, j, i]


@grid_kernel
def _velocity_z(vz, szz, sxz, syz, m_dsxz_dx, m_dsyz_dy, m_dszz_dz, dt_over_rho, a_x_half, b_x_half, K_x_half, a_y,
                b_y, K_y, a_z_half, b_z_half, K_z_half, inv_d):
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
                vz[k, j, i] = dt_over_rho * (dsxz_dx + dsyz_dy + dszz_dz) + vz[k, j, i]


@grid_kernel
def _energy(npml, vx, vy, vz, sxx, syy, szz, sxy, sxz, syz, rho, lam, mu):
    """Kinetic and strain energy of the medium inside the absorbing layers (J per m^3 of cell volume)."""
    nz, ny, nx = vx.shape
    kin = np.zeros(nz)
    pot = np.zeros(nz)
    for k in nb.prange(npml, nz - npml):
        for j in range(npml, ny - npml):
            for i in range(npml, nx - npml):
                kin[k] += 0.5 * rho * (vx[k, j, i] ** 2 + vy[k, j, i] ** 2 + vz[k, j, i] ** 2)
                la, m = lam, mu
                dn = m * (3.0 * la + 2.0 * m)
                a, b, c = sxx[k, j, i], syy[k, j, i], szz[k, j, i]
                pot[k] += 0.5 * (((la + m) * (a * a + b * b + c * c) - la * (a * b + b * c + a * c)) / dn
                                 + (sxy[k, j, i] ** 2 + sxz[k, j, i] ** 2 + syz[k, j, i] ** 2) / m)
    return kin.sum(), pot.sum()


def cpml_profile(n: int, npml: int, cp: float, dt: float, f0: float, delta: float) -> dict[str, np.ndarray]:
    """SEISMIC_CPML's damping profile along one axis: a, b, K on the grid points and the half points."""
    out = {}
    if npml == 0:  # no absorbing layer: a = 0, b = K = 1 leaves the memory variables at zero
        for half in ("", "_half"):
            out |= {f"a{half}": np.zeros(n), f"b{half}": np.ones(n), f"K{half}": np.ones(n)}
        return out
    thickness = npml * delta
    d0 = -(NPOWER + 1) * cp * math.log(RCOEF) / (2.0 * thickness)
    alpha_max = 2.0 * np.pi * (f0 / 2.0)
    val = delta * np.arange(n)
    for half, shift in (("", 0.0), ("_half", delta / 2.0)):
        d = np.zeros(n)
        kk = np.ones(n)
        alpha = np.zeros(n)
        for absc in (thickness - (val + shift), (val + shift) - ((n - 1) * delta - thickness)):
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


def grid_bytes(shape: tuple[int, int, int]) -> int:
    """Bytes of the wavefield, memory and profile arrays on an (nx, ny, nz) grid."""
    return 8 * (math.prod(shape) * (len(WAVES) + len(MEMORY)) + sum(shape) * len(PROFILES) // 3)


def upstream_grid(footprint: int) -> tuple[tuple[int, int, int], float]:
    """SEISMIC_CPML's model refined or coarsened to ``footprint`` bytes: the (nx, ny, nz) points and the
    spacing (m) of the finest grid over its 1000 x 6400 x 6390 m slab that fits."""
    for nx in range(4096, 2, -1):
        delta = EXTENT[0] / (nx - 1)
        shape = (nx, *(round(e / delta) + 1 for e in EXTENT[1:]))
        if grid_bytes(shape) <= footprint:
            return shape, delta
    raise ValueError(f"seismic: a footprint of {footprint} bytes holds no grid of SEISMIC_CPML's model")


@register
class Seismic(Scheduled, Workload):
    name = "seismic"
    proxies = "SPEC ACCEL 355.seismic (SEISMIC_CPML)"

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        # SEISMIC_CPML's start is all zeros and a fixed source: rng is not needed
        shape, delta = upstream_grid(footprint)
        npml = max(2, round(NPOINTS_PML * UPSTREAM_DELTA / delta))  # the layers' 100 m
        nx, ny, nz = shape
        # ISOURCE = NX - 2 NPOINTS_PML - 1, JSOURCE = 2 NY / 3 + 1, the cut plane NZ / 2 (1-based); on a grid
        # too coarse to hold that outside the x layer, the first point inside it
        source = (nz // 2 - 1, 2 * ny // 3, max(npml, nx - 2 * npml - 2))
        self.init(shape, delta, UPSTREAM_DELTAT * delta / UPSTREAM_DELTA, npml, F0, source)
        self.begin(END_TIME, math.inf, 1.0)

    def init(self, shape: tuple[int, int, int], delta: float, dt: float, npml: int, f0: float,
             source: tuple[int, int, int]) -> None:
        """A zero wavefield on ``shape`` = (nx, ny, nz) points ``delta`` m apart, steps of ``dt`` s, absorbing
        layers ``npml`` points thick, a force of dominant frequency ``f0`` Hz at ``source`` = (k, j, i)."""
        self.shape, self.delta, self.dt, self.npml, self.f0 = shape, delta, dt, npml, f0
        self.source = source
        self.t0 = 1.2 / f0
        nx, ny, nz = shape
        self.f: dict[str, np.ndarray] = {name: np.zeros((nz, ny, nx)) for name in WAVES + MEMORY}  # x fastest
        for d, n in zip("xyz", shape, strict=True):
            prof = cpml_profile(n, npml, CP, dt, f0, delta)
            self.f |= {f"{c}_{d}{h}": prof[f"{c}{h}"] for c in ("a", "b", "K") for h in ("", "_half")}
        self.time, self.cycles = 0.0, 0

    def source_term(self, it: int) -> float:
        """SEISMIC_CPML's source: the first derivative of a Gaussian, at time step ``it`` (it = 1 is t = 0)."""
        a = np.pi * np.pi * self.f0 * self.f0
        t = (it - 1) * self.dt
        return -FACTOR * 2.0 * a * (t - self.t0) * math.exp(-a * (t - self.t0) ** 2)

    def advance(self) -> None:
        """One time step: the stress and velocity kernels, the point force, the rigid outer faces."""
        f, inv = self.f, 1.0 / self.delta
        dt = self.dt
        lam, mu = RHO * (CP * CP - 2.0 * CS * CS), RHO * CS * CS
        self.cycles += 1
        self.time = self.cycles * dt
        with threads_for(math.prod(self.shape)):
            _stress_diag(f["vx"], f["vy"], f["vz"], f["sigmaxx"], f["sigmayy"], f["sigmazz"], f["memory_dvx_dx"],
                         f["memory_dvy_dy"], f["memory_dvz_dz"], dt * lam, dt * RHO * CP * CP, f["a_x_half"],
                         f["b_x_half"], f["K_x_half"], f["a_y"], f["b_y"], f["K_y"], f["a_z"], f["b_z"], f["K_z"], inv)
            _stress_xy(f["vx"], f["vy"], f["sigmaxy"], f["memory_dvy_dx"], f["memory_dvx_dy"], dt * mu, f["a_x"],
                       f["b_x"], f["K_x"], f["a_y_half"], f["b_y_half"], f["K_y_half"], inv)
            _stress_xz_yz(f["vx"], f["vy"], f["vz"], f["sigmaxz"], f["sigmayz"], f["memory_dvz_dx"],
                          f["memory_dvx_dz"], f["memory_dvz_dy"], f["memory_dvy_dz"], dt * mu, f["a_x"], f["b_x"],
                          f["K_x"], f["a_y_half"], f["b_y_half"], f["K_y_half"], f["a_z_half"], f["b_z_half"],
                          f["K_z_half"], inv)
            _velocity_xy(f["vx"], f["vy"], f["sigmaxx"], f["sigmayy"], f["sigmaxy"], f["sigmaxz"], f["sigmayz"],
                         f["memory_dsigmaxx_dx"], f["memory_dsigmaxy_dy"], f["memory_dsigmaxz_dz"],
                         f["memory_dsigmaxy_dx"], f["memory_dsigmayy_dy"], f["memory_dsigmayz_dz"], dt / RHO,
                         f["a_x"], f["b_x"], f["K_x"], f["a_x_half"], f["b_x_half"], f["K_x_half"], f["a_y"], f["b_y"],
                         f["K_y"], f["a_y_half"], f["b_y_half"], f["K_y_half"], f["a_z"], f["b_z"], f["K_z"], inv)
            _velocity_z(f["vz"], f["sigmazz"], f["sigmaxz"], f["sigmayz"], f["memory_dsigmaxz_dx"],
                        f["memory_dsigmayz_dy"], f["memory_dsigmazz_dz"], dt / RHO, f["a_x_half"], f["b_x_half"],
                        f["K_x_half"], f["a_y"], f["b_y"], f["K_y"], f["a_z_half"], f["b_z_half"], f["K_z_half"], inv)
            # the point force, then the rigid outer faces
            k, j, i = self.source
            s = self.source_term(self.cycles)
            angle = math.radians(ANGLE_FORCE)
            f["vx"][k, j, i] += math.sin(angle) * s * dt / RHO
            f["vy"][k, j, i] += math.cos(angle) * s * dt / RHO
            for v in (f["vx"], f["vy"], f["vz"]):
                v[0], v[-1], v[:, 0], v[:, -1], v[:, :, 0], v[:, :, -1] = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0

    # ------------------------------------------------------------ checks
    def energy(self) -> float:
        """Kinetic plus strain energy inside the absorbing layers (per unit cell volume)."""
        f = self.f
        kin, pot = _energy(self.npml, f["vx"], f["vy"], f["vz"], f["sigmaxx"], f["sigmayy"], f["sigmazz"],
                           f["sigmaxy"], f["sigmaxz"], f["sigmayz"], RHO, RHO * (CP * CP - 2.0 * CS * CS),
                           RHO * CS * CS)
        return float(kin + pot)

    def front_radius(self, threshold: float = 1e-3) -> float:
        """Distance (m) from the source of the farthest point where |v| exceeds ``threshold`` x its maximum."""
        f = self.f
        speed = np.sqrt(f["vx"] ** 2 + f["vy"] ** 2 + f["vz"] ** 2)
        k, j, i = np.nonzero(speed > threshold * speed.max())
        sk, sj, si = self.source
        return float(self.delta * np.sqrt((k - sk) ** 2 + (j - sj) ** 2 + (i - si) ** 2).max())

    # ------------------------------------------------------------ Workload contract
    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        return {name: (a, "input" if name in PROFILES else "field") for name, a in self.f.items()}

    def profile(self) -> AccessProfile:
        n3 = float(math.prod(self.shape))

        def rd(*names: str) -> list[Access]:
            return [Access(x) for x in names]

        def rw(*names: str) -> list[Access]:
            return [Access(x, "readwrite") for x in names]

        def prof(*names: str) -> list[Access]:
            return [Access(f"{c}_{n}", "read") for n in names for c in ("a", "b", "K")]

        nx, ny, nz = self.shape
        faces = min(1.0, 2.0 / nx + 2.0 / ny + 2.0 / nz)
        return AccessProfile(self.name, [
            Kernel("stress_xx_yy_zz", rd("vx", "vy", "vz") + prof("x_half", "y", "z")
                   + rw("sigmaxx", "sigmayy", "sigmazz", "memory_dvx_dx", "memory_dvy_dy", "memory_dvz_dz"), 33 * n3),
            Kernel("stress_xy", rd("vx", "vy") + prof("x", "y_half")
                   + rw("sigmaxy", "memory_dvy_dx", "memory_dvx_dy"), 17 * n3),
            Kernel("stress_xz_yz", rd("vx", "vy", "vz") + prof("x", "y_half", "z_half")
                   + rw("sigmaxz", "sigmayz", "memory_dvz_dx", "memory_dvx_dz", "memory_dvz_dy", "memory_dvy_dz"),
                   34 * n3),
            Kernel("velocity_xy", rd("sigmaxx", "sigmayy", "sigmaxy", "sigmaxz", "sigmayz")
                   + prof("x", "x_half", "y", "y_half", "z")
                   + rw("vx", "vy", "memory_dsigmaxx_dx", "memory_dsigmaxy_dy", "memory_dsigmaxz_dz",
                        "memory_dsigmaxy_dx", "memory_dsigmayy_dy", "memory_dsigmayz_dz"), 50 * n3),
            Kernel("velocity_z", rd("sigmaxz", "sigmayz", "sigmazz") + prof("x_half", "y", "z_half")
                   + rw("vz", "memory_dsigmaxz_dx", "memory_dsigmayz_dy", "memory_dsigmazz_dz"), 25 * n3),
            Kernel("dirichlet", [Access(v, "write", "strided", fraction=faces, stride=nx)
                                 for v in ("vx", "vy", "vz")], 0.0),
        ])
