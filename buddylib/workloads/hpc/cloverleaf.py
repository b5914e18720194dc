"""cloverleaf: 2-D Lagrangian-Eulerian hydrodynamics (proxy of SPEC ACCEL 353.clvrleaf, CloverLeaf).

CloverLeaf solves the compressible Euler equations for an ideal gas (gamma = 1.4) on a
staggered Cartesian grid: density, energy, pressure, viscosity and sound speed live at cell
centres, velocities at the nodes, volume and mass fluxes on the faces. Each step is the
full CloverLeaf hydro cycle, kernel for kernel as in the reference Fortran (UK-MAC
CloverLeaf_ref), not a simplified scheme:

``timestep`` (ideal_gas, halo update, Wilkins artificial ``viscosity``, ``calc_dt``),
``PdV`` predictor (half step) with ``ideal_gas`` on the predicted state and ``revert``,
``accelerate`` (nodal momentum from pressure and viscosity gradients), ``PdV`` corrector,
``flux_calc``, then the advective remap back to the fixed Eulerian grid: directionally
split second-order van Leer ``advec_cell`` (mass and energy) and ``advec_mom`` (nodal
momentum), x-then-y and y-then-x on alternate steps, and ``reset_field``. All external
boundaries are reflective, applied by ``update_halo`` on a two-cell halo. One liberty:
``advec_mom`` computes the staggered-cell mass fluxes and masses once per sweep and shares
them between the two velocity components (CloverLeaf's ``which_vel == 1`` branch), where the
reference recomputes them for each; the numbers are identical.

The problem is CloverLeaf's standard test (clover.in): a 10 x 10 box of gas at density 0.2
and energy 1.0 with a rectangle [0, 5) x [0, 2) at density 1.0 and energy 2.5 in one corner
(pressure 1.0 against 0.08), so a shock runs outward into the low-pressure gas.

Allocations are those of a CloverLeaf chunk on the GPU, named as in the code, all float64
as in the original: the 2-D cell, node and face fields, the seven node-sized
``work_array1..7`` (PdV's volume_change, accelerate's stepbymass, calc_dt's per-cell
dt_min, advec_cell's pre/post volumes, masses and energy flux, advec_mom's node fluxes,
masses and momentum flux), the geometry (``volume``, ``xarea``, ``yarea`` and the 1-D
``cellx``/``celldx``/``vertexx``/``vertexdx`` in x and y). They matter for compressibility
because the velocities, viscosity, fluxes and work arrays start at exactly zero and fill in
only where the shock has passed, the two-state initial fields are piecewise constant, and
the geometry arrays are constant or linear.

Checks (``field_summary``): total mass is conserved to round-off by the whole step (the
remap is conservative and the walls pass no flux); total energy, internal plus kinetic, is
conserved to round-off by the Lagrangian phase (PdV work equals the work of the nodal
forces), and through the remap only up to the kinetic energy that the momentum advection
dissipates, as in CloverLeaf itself; the shock runs outward at the exact 1-D Riemann speed.

Run length, ours / upstream (UK-MAC/CloverLeaf_ref ``InputDecks``): every benchmark deck
(``clover_bm.in`` 960^2, ``clover_bm16.in`` 3840^2, ... up to 122880^2) stops at ``end_step = 2955`` or
``end_time = 15.5`` (16.0, 15.6 in two), whichever comes first, a full step past it; on 960^2 the two meet
(step 2955 ends at t = 15.50), every finer deck stops at 2,955 steps (``hydro.f90``). The short decks stop
at 87 steps. Ours stops as the decks do (:data:`END_STEP`, :data:`END_TIME`; one
``step`` of the workload is 1/28 of that end, :mod:`~buddylib.workloads.hpc._schedule`). The time step,
limited by the sound speed over the cell width, shrinks as the grid refines, so a finer grid takes
more cycles to the same time, about 2,955 x n / 960 up to the step cap: the whole run at quick (120^2,
to t = 15.5) and 32 MiB (400^2, to t = 15.5); 1/7 of it (:data:`REACH`, snapshots on the same fractions
of the end at every size) at 128 MiB (810^2, to t = 15.5 / 7), which ``make reproduce`` runs, 1 GiB (2310^2,
where the deck's end is its 2,955th step, long before t = 15.5: 423 cycles to t = 1.03, 5 min here; the whole
run would take about 36) and 4 GiB (4620^2, 423 cycles). The cycle counts are recorded in every summary and saved run.

Arrays, ours / upstream (read: UK-MAC/CloverLeaf_ref ``build_field.f90`` and
``definitions.f90``; SPEC ACCEL 353.clvrleaf's own source is not public): one chunk's field
arrays, name for name and shape for shape: ``density0/1``, ``energy0/1``, ``pressure``,
``viscosity``, ``soundspeed``, ``volume`` (cells, xmin-2:xmax+2 by ymin-2:ymax+2);
``xvel0/1``, ``yvel0/1``, ``work_array1..7`` (nodes, xmin-2:xmax+3 by ymin-2:ymax+3);
``vol_flux_x``, ``mass_flux_x``, ``xarea`` (x faces) and ``vol_flux_y``, ``mass_flux_y``,
``yarea`` (y faces); ``cellx``, ``celldx``, ``vertexx``, ``vertexdx`` and the same in y. No
differences: with one chunk every face is external, so CloverLeaf allocates no MPI
communication buffers, and we hold none.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from buddylib.workloads._registry import register
from buddylib.workloads.base import Access, AccessProfile, Kernel, Workload, grid_kernel, threads_for
from buddylib.workloads.hpc._schedule import Scheduled, reach

#: array index of the first interior cell in x and y (CloverLeaf's x_min with a two-deep halo)
MIN = 2
GAMMA = 1.4
G_SMALL, G_BIG = 1.0e-16, 1.0e21
DTC_SAFE, DTU_SAFE, DTV_SAFE, DTDIV_SAFE = 0.7, 0.5, 0.5, 0.7
DTINIT, DTMAX, DTRISE = 0.04, 0.04, 1.5
#: clover.in: (density, energy) of the background and of the rectangle [0, 5) x [0, 2) in a 10 x 10 box
STATES = ((0.2, 1.0), (1.0, 2.5))
BOX, RECT = 10.0, (5.0, 2.0)


# ---------------------------------------------------------------- halo (reflective walls)

@nb.njit(cache=True)
def _reflect(a, xnode, ynode, sx, sy, x_max, y_max):
    """update_halo on external faces: mirror a two-deep halo, flipping the normal component.

    ``xnode``/``ynode``: the array is node-centred in that direction; ``sx``/``sy``: sign of
    the mirror across an x wall / a y wall. Bottom and top first, then left and right.
    """
    ny, nx = a.shape
    ytop = y_max + 1 if ynode else y_max
    xtop = x_max + 1 if xnode else x_max
    for d in range(1, 3):
        sb = MIN + d if ynode else MIN - 1 + d
        st = ytop - d if ynode else ytop + 1 - d
        for j in range(nx):
            a[MIN - d, j] = sy * a[sb, j]
            a[ytop + d, j] = sy * a[st, j]
    for k in range(ny):
        for d in range(1, 3):
            sl = MIN + d if xnode else MIN - 1 + d
            sr = xtop - d if xnode else xtop + 1 - d
            a[k, MIN - d] = sx * a[k, sl]
            a[k, xtop + d] = sx * a[k, sr]


# ---------------------------------------------------------------- timestep kernels

@grid_kernel
def _ideal_gas(x_max, y_max, density, energy, pressure, soundspeed):
    for k in nb.prange(MIN, y_max + 1):
        for j in range(MIN, x_max + 1):
            v = 1.0 / density[k, j]
            pressure[k, j] = (GAMMA - 1.0) * density[k, j] * energy[k, j]
            pressurebyenergy = (GAMMA - 1.0) * density[k, j]
            pressurebyvolume = -density[k, j] * pressure[k, j]
            sound_speed_squared = v * v * (pressure[k, j] * pressurebyenergy - pressurebyvolume)
            soundspeed[k, j] = np.sqrt(sound_speed_squared)


@grid_kernel
def _viscosity(x_max, y_max, celldx, celldy, density0, pressure, viscosity, xvel0, yvel0):
    """Wilkins' artificial viscosity: non-zero only in cells under compression."""
    for k in nb.prange(MIN, y_max + 1):
        for j in range(MIN, x_max + 1):
            ugrad = (xvel0[k, j + 1] + xvel0[k + 1, j + 1]) - (xvel0[k, j] + xvel0[k + 1, j])
            vgrad = (yvel0[k + 1, j] + yvel0[k + 1, j + 1]) - (yvel0[k, j] + yvel0[k, j + 1])
            div = celldx[j] * ugrad + celldy[k] * vgrad
            strain2 = (0.5 * (xvel0[k + 1, j] + xvel0[k + 1, j + 1] - xvel0[k, j] - xvel0[k, j + 1]) / celldy[k]
                       + 0.5 * (yvel0[k, j + 1] + yvel0[k + 1, j + 1] - yvel0[k, j] - yvel0[k + 1, j]) / celldx[j])
            pgradx = (pressure[k, j + 1] - pressure[k, j - 1]) / (celldx[j] + celldx[j + 1])
            pgrady = (pressure[k + 1, j] - pressure[k - 1, j]) / (celldy[k] + celldy[k + 1])
            pgradx2 = pgradx * pgradx
            pgrady2 = pgrady * pgrady
            limiter = (((0.5 * ugrad / celldx[j]) * pgradx2 + (0.5 * vgrad / celldy[k]) * pgrady2
                        + strain2 * pgradx * pgrady) / max(pgradx2 + pgrady2, 1.0e-16))
            if limiter > 0.0 or div >= 0.0:
                viscosity[k, j] = 0.0
            else:
                dirx = -1.0 if pgradx < 0.0 else 1.0
                pgradx = dirx * max(1.0e-16, abs(pgradx))
                diry = -1.0 if pgradx < 0.0 else 1.0  # sic: CloverLeaf tests pgradx here
                pgrady = diry * max(1.0e-16, abs(pgrady))
                pgrad = np.sqrt(pgradx * pgradx + pgrady * pgrady)
                xgrad = abs(celldx[j] * pgrad / pgradx)
                ygrad = abs(celldy[k] * pgrad / pgrady)
                grad = min(xgrad, ygrad)
                viscosity[k, j] = 2.0 * density0[k, j] * grad * grad * limiter * limiter


@grid_kernel
def _calc_dt(x_max, y_max, xarea, yarea, celldx, celldy, volume, density0, viscosity, soundspeed, xvel0, yvel0,
             dt_min):
    """Per-cell stable time step into ``dt_min`` (a work array); the caller min-reduces it."""
    for k in nb.prange(MIN, y_max + 1):
        for j in range(MIN, x_max + 1):
            dsx = celldx[j]
            dsy = celldy[k]
            cc = soundspeed[k, j] ** 2 + 2.0 * viscosity[k, j] / density0[k, j]
            cc = max(np.sqrt(cc), G_SMALL)
            dtct = DTC_SAFE * min(dsx, dsy) / cc
            dv1 = (xvel0[k, j] + xvel0[k + 1, j]) * xarea[k, j]
            dv2 = (xvel0[k, j + 1] + xvel0[k + 1, j + 1]) * xarea[k, j + 1]
            div = dv2 - dv1
            dtut = DTU_SAFE * 2.0 * volume[k, j] / max(abs(dv1), abs(dv2), G_SMALL * volume[k, j])
            dv1 = (yvel0[k, j] + yvel0[k, j + 1]) * yarea[k, j]
            dv2 = (yvel0[k + 1, j] + yvel0[k + 1, j + 1]) * yarea[k + 1, j]
            div = div + dv2 - dv1
            dtvt = DTV_SAFE * 2.0 * volume[k, j] / max(abs(dv1), abs(dv2), G_SMALL * volume[k, j])
            div = div / (2.0 * volume[k, j])
            dtdivt = DTDIV_SAFE * (-1.0 / div) if div < -G_SMALL else G_BIG
            dt_min[k, j] = min(dtct, dtut, dtvt, dtdivt)


@nb.njit(cache=True)
def _min_interior(x_max, y_max, a):
    m = G_BIG
    for k in range(MIN, y_max + 1):
        for j in range(MIN, x_max + 1):
            m = min(m, a[k, j])
    return m


# ---------------------------------------------------------------- Lagrangian kernels

@grid_kernel
def _pdv(predict, x_max, y_max, dt, xarea, yarea, volume, density0, density1, energy0, energy1, pressure, viscosity,
         xvel0, xvel1, yvel0, yvel1, volume_change):
    """Cell volume change from the face velocities; PdV work into the internal energy."""
    for k in nb.prange(MIN, y_max + 1):
        for j in range(MIN, x_max + 1):
            if predict:
                left_flux = (xarea[k, j] * (xvel0[k, j] + xvel0[k + 1, j] + xvel0[k, j] + xvel0[k + 1, j])) \
                    * 0.25 * dt * 0.5
                right_flux = (xarea[k, j + 1] * (xvel0[k, j + 1] + xvel0[k + 1, j + 1] + xvel0[k, j + 1]
                                                 + xvel0[k + 1, j + 1])) * 0.25 * dt * 0.5
                bottom_flux = (yarea[k, j] * (yvel0[k, j] + yvel0[k, j + 1] + yvel0[k, j] + yvel0[k, j + 1])) \
                    * 0.25 * dt * 0.5
                top_flux = (yarea[k + 1, j] * (yvel0[k + 1, j] + yvel0[k + 1, j + 1] + yvel0[k + 1, j]
                                               + yvel0[k + 1, j + 1])) * 0.25 * dt * 0.5
            else:
                left_flux = (xarea[k, j] * (xvel0[k, j] + xvel0[k + 1, j] + xvel1[k, j] + xvel1[k + 1, j])) \
                    * 0.25 * dt
                right_flux = (xarea[k, j + 1] * (xvel0[k, j + 1] + xvel0[k + 1, j + 1] + xvel1[k, j + 1]
                                                 + xvel1[k + 1, j + 1])) * 0.25 * dt
                bottom_flux = (yarea[k, j] * (yvel0[k, j] + yvel0[k, j + 1] + yvel1[k, j] + yvel1[k, j + 1])) \
                    * 0.25 * dt
                top_flux = (yarea[k + 1, j] * (yvel0[k + 1, j] + yvel0[k + 1, j + 1] + yvel1[k + 1, j]
                                               + yvel1[k + 1, j + 1])) * 0.25 * dt
            total_flux = right_flux - left_flux + top_flux - bottom_flux
            volume_change[k, j] = volume[k, j] / (volume[k, j] + total_flux)
            recip_volume = 1.0 / volume[k, j]
            energy_change = (pressure[k, j] / density0[k, j] + viscosity[k, j] / density0[k, j]) \
                * total_flux * recip_volume
            energy1[k, j] = energy0[k, j] - energy_change
            density1[k, j] = density0[k, j] * volume_change[k, j]


@grid_kernel
def _revert(x_max, y_max, density0, density1, energy0, energy1):
    for k in nb.prange(MIN, y_max + 1):
        for j in range(MIN, x_max + 1):
            density1[k, j] = density0[k, j]
            energy1[k, j] = energy0[k, j]


@grid_kernel
def _accelerate(x_max, y_max, dt, xarea, yarea, volume, density0, pressure, viscosity, xvel0, yvel0, xvel1, yvel1,
                stepbymass):
    """Nodal velocities from the pressure and viscosity forces on the surrounding faces."""
    for k in nb.prange(MIN, y_max + 2):
        for j in range(MIN, x_max + 2):
            nodal_mass = (density0[k - 1, j - 1] * volume[k - 1, j - 1] + density0[k - 1, j] * volume[k - 1, j]
                          + density0[k, j] * volume[k, j] + density0[k, j - 1] * volume[k, j - 1]) * 0.25
            stepbymass[k, j] = 0.5 * dt / nodal_mass
    for k in nb.prange(MIN, y_max + 2):
        for j in range(MIN, x_max + 2):
            s = stepbymass[k, j]
            xvel1[k, j] = xvel0[k, j] - s * (xarea[k, j] * (pressure[k, j] - pressure[k, j - 1])
                                             + xarea[k - 1, j] * (pressure[k - 1, j] - pressure[k - 1, j - 1]))
            yvel1[k, j] = yvel0[k, j] - s * (yarea[k, j] * (pressure[k, j] - pressure[k - 1, j])
                                             + yarea[k, j - 1] * (pressure[k, j - 1] - pressure[k - 1, j - 1]))
            xvel1[k, j] = xvel1[k, j] - s * (xarea[k, j] * (viscosity[k, j] - viscosity[k, j - 1])
                                             + xarea[k - 1, j] * (viscosity[k - 1, j] - viscosity[k - 1, j - 1]))
            yvel1[k, j] = yvel1[k, j] - s * (yarea[k, j] * (viscosity[k, j] - viscosity[k - 1, j])
                                             + yarea[k, j - 1] * (viscosity[k, j - 1] - viscosity[k - 1, j - 1]))


@grid_kernel
def _flux_calc(x_max, y_max, dt, xarea, yarea, xvel0, yvel0, xvel1, yvel1, vol_flux_x, vol_flux_y):
    for k in nb.prange(MIN, y_max + 1):
        for j in range(MIN, x_max + 2):
            vol_flux_x[k, j] = 0.25 * dt * xarea[k, j] * (xvel0[k, j] + xvel0[k + 1, j] + xvel1[k, j]
                                                          + xvel1[k + 1, j])
    for k in nb.prange(MIN, y_max + 2):
        for j in range(MIN, x_max + 1):
            vol_flux_y[k, j] = 0.25 * dt * yarea[k, j] * (yvel0[k, j] + yvel0[k, j + 1] + yvel1[k, j]
                                                          + yvel1[k, j + 1])


# ---------------------------------------------------------------- advection kernels

@nb.njit(cache=True, inline="always")
def _vanleer(diffuw, diffdw, sigma3, sigma4, weight):
    if diffuw * diffdw > 0.0:
        sign = 1.0 if diffdw >= 0.0 else -1.0
        return weight * sign * min(abs(diffuw), abs(diffdw), (sigma3 * abs(diffuw) + sigma4 * abs(diffdw)) / 6.0)
    return 0.0


@grid_kernel
def _advec_cell(xdir, sweep_number, x_max, y_max, vertexdx, vertexdy, volume, density1, energy1, mass_flux_x,
                vol_flux_x, mass_flux_y, vol_flux_y, pre_vol, post_vol, pre_mass, post_mass, advec_vol, post_ener,
                ener_flux):
    """Directionally split van Leer remap of mass and internal energy (one sweep)."""
    ny, nx = volume.shape
    for k in nb.prange(0, ny):
        for j in range(0, nx):
            dx = vol_flux_x[k, j + 1] - vol_flux_x[k, j]
            dy = vol_flux_y[k + 1, j] - vol_flux_y[k, j]
            if sweep_number == 1:
                pre_vol[k, j] = volume[k, j] + (dx + dy)
                post_vol[k, j] = pre_vol[k, j] - (dx if xdir else dy)
            else:
                pre_vol[k, j] = volume[k, j] + (dx if xdir else dy)
                post_vol[k, j] = volume[k, j]
    if xdir:
        for k in nb.prange(MIN, y_max + 1):
            for j in range(MIN, x_max + 3):
                if vol_flux_x[k, j] > 0.0:
                    upwind, donor, downwind, dif = j - 2, j - 1, j, j - 1
                else:
                    upwind, donor, downwind = min(j + 1, x_max + 2), j, j - 1
                    dif = upwind
                sigmat = abs(vol_flux_x[k, j]) / pre_vol[k, donor]
                sigma3 = (1.0 + sigmat) * (vertexdx[j] / vertexdx[dif])
                sigma4 = 2.0 - sigmat
                limiter = _vanleer(density1[k, donor] - density1[k, upwind], density1[k, downwind] - density1[k, donor],
                                   sigma3, sigma4, 1.0 - sigmat)
                mass_flux_x[k, j] = vol_flux_x[k, j] * (density1[k, donor] + limiter)
                sigmam = abs(mass_flux_x[k, j]) / (density1[k, donor] * pre_vol[k, donor])
                limiter = _vanleer(energy1[k, donor] - energy1[k, upwind], energy1[k, downwind] - energy1[k, donor],
                                   sigma3, sigma4, 1.0 - sigmam)
                ener_flux[k, j] = mass_flux_x[k, j] * (energy1[k, donor] + limiter)
        for k in nb.prange(MIN, y_max + 1):
            for j in range(MIN, x_max + 1):
                pre_mass[k, j] = density1[k, j] * pre_vol[k, j]
                post_mass[k, j] = pre_mass[k, j] + mass_flux_x[k, j] - mass_flux_x[k, j + 1]
                post_ener[k, j] = (energy1[k, j] * pre_mass[k, j] + ener_flux[k, j] - ener_flux[k, j + 1]) \
                    / post_mass[k, j]
                advec_vol[k, j] = pre_vol[k, j] + vol_flux_x[k, j] - vol_flux_x[k, j + 1]
                density1[k, j] = post_mass[k, j] / advec_vol[k, j]
                energy1[k, j] = post_ener[k, j]
    else:
        for k in nb.prange(MIN, y_max + 3):
            for j in range(MIN, x_max + 1):
                if vol_flux_y[k, j] > 0.0:
                    upwind, donor, downwind, dif = k - 2, k - 1, k, k - 1
                else:
                    upwind, donor, downwind = min(k + 1, y_max + 2), k, k - 1
                    dif = upwind
                sigmat = abs(vol_flux_y[k, j]) / pre_vol[donor, j]
                sigma3 = (1.0 + sigmat) * (vertexdy[k] / vertexdy[dif])
                sigma4 = 2.0 - sigmat
                limiter = _vanleer(density1[donor, j] - density1[upwind, j], density1[downwind, j] - density1[donor, j],
                                   sigma3, sigma4, 1.0 - sigmat)
                mass_flux_y[k, j] = vol_flux_y[k, j] * (density1[donor, j] + limiter)
                sigmam = abs(mass_flux_y[k, j]) / (density1[donor, j] * pre_vol[donor, j])
                limiter = _vanleer(energy1[donor, j] - energy1[upwind, j], energy1[downwind, j] - energy1[donor, j],
                                   sigma3, sigma4, 1.0 - sigmam)
                ener_flux[k, j] = mass_flux_y[k, j] * (energy1[donor, j] + limiter)
        for k in nb.prange(MIN, y_max + 1):
            for j in range(MIN, x_max + 1):
                pre_mass[k, j] = density1[k, j] * pre_vol[k, j]
                post_mass[k, j] = pre_mass[k, j] + mass_flux_y[k, j] - mass_flux_y[k + 1, j]
                post_ener[k, j] = (energy1[k, j] * pre_mass[k, j] + ener_flux[k, j] - ener_flux[k + 1, j]) \
                    / post_mass[k, j]
                advec_vol[k, j] = pre_vol[k, j] + vol_flux_y[k, j] - vol_flux_y[k + 1, j]
                density1[k, j] = post_mass[k, j] / advec_vol[k, j]
                energy1[k, j] = post_ener[k, j]


@nb.njit(cache=True, inline="always")
def _mom_limiter(vdiffuw, vdiffdw, sigma, width, width_dif):
    if vdiffuw * vdiffdw > 0.0:
        auw = abs(vdiffuw)
        adw = abs(vdiffdw)
        wind = -1.0 if vdiffdw <= 0.0 else 1.0
        return wind * min(width * ((2.0 - sigma) * adw / width + (1.0 + sigma) * auw / width_dif) / 6.0, auw, adw)
    return 0.0


@grid_kernel
def _advec_mom_nodes(xdir, sweep_number, x_max, y_max, mass_flux_x, vol_flux_x, mass_flux_y, vol_flux_y, volume,
                     density1, node_flux, node_mass_post, node_mass_pre, pre_vol, post_vol):
    """advec_mom, first half: staggered-cell mass flux and masses before and after the sweep.

    Computed once per sweep and shared by both velocity components, as CloverLeaf does for
    ``which_vel == 1``.
    """
    mom_sweep = (1 if xdir else 2) + 2 * (sweep_number - 1)
    ny, nx = volume.shape
    for k in nb.prange(0, ny):
        for j in range(0, nx):
            dx = vol_flux_x[k, j + 1] - vol_flux_x[k, j]
            dy = vol_flux_y[k + 1, j] - vol_flux_y[k, j]
            if mom_sweep == 1:
                post_vol[k, j] = volume[k, j] + dy
                pre_vol[k, j] = post_vol[k, j] + dx
            elif mom_sweep == 2:
                post_vol[k, j] = volume[k, j] + dx
                pre_vol[k, j] = post_vol[k, j] + dy
            elif mom_sweep == 3:
                post_vol[k, j] = volume[k, j]
                pre_vol[k, j] = post_vol[k, j] + dy  # sic (pre_vol is set, never used)
            else:
                post_vol[k, j] = volume[k, j]
                pre_vol[k, j] = post_vol[k, j] + dx
    if xdir:
        for k in nb.prange(MIN, y_max + 2):
            for j in range(MIN - 2, x_max + 3):
                node_flux[k, j] = 0.25 * (mass_flux_x[k - 1, j] + mass_flux_x[k, j]
                                          + mass_flux_x[k - 1, j + 1] + mass_flux_x[k, j + 1])
            for j in range(MIN - 1, x_max + 3):
                node_mass_post[k, j] = 0.25 * (density1[k - 1, j] * post_vol[k - 1, j] + density1[k, j] * post_vol[k, j]
                                               + density1[k - 1, j - 1] * post_vol[k - 1, j - 1]
                                               + density1[k, j - 1] * post_vol[k, j - 1])
                node_mass_pre[k, j] = node_mass_post[k, j] - node_flux[k, j - 1] + node_flux[k, j]
    else:
        for k in nb.prange(MIN - 2, y_max + 3):
            for j in range(MIN, x_max + 2):
                node_flux[k, j] = 0.25 * (mass_flux_y[k, j - 1] + mass_flux_y[k, j]
                                          + mass_flux_y[k + 1, j - 1] + mass_flux_y[k + 1, j])
        for k in nb.prange(MIN - 1, y_max + 3):
            for j in range(MIN, x_max + 2):
                node_mass_post[k, j] = 0.25 * (density1[k - 1, j] * post_vol[k - 1, j] + density1[k, j] * post_vol[k, j]
                                               + density1[k - 1, j - 1] * post_vol[k - 1, j - 1]
                                               + density1[k, j - 1] * post_vol[k, j - 1])
                node_mass_pre[k, j] = node_mass_post[k, j] - node_flux[k - 1, j] + node_flux[k, j]


@grid_kernel
def _advec_mom_vel(vel1, xdir, x_max, y_max, node_flux, node_mass_post, node_mass_pre, advec_vel, mom_flux, celldx,
                   celldy):
    """advec_mom, second half: van Leer momentum flux and the update of one velocity component."""
    if xdir:
        for k in nb.prange(MIN, y_max + 2):
            for j in range(MIN - 1, x_max + 2):
                if node_flux[k, j] < 0.0:
                    upwind, donor, downwind, dif = j + 2, j + 1, j, j + 1
                else:
                    upwind, donor, downwind, dif = j - 1, j, j + 1, j - 1
                sigma = abs(node_flux[k, j]) / node_mass_pre[k, donor]
                limiter = _mom_limiter(vel1[k, donor] - vel1[k, upwind], vel1[k, downwind] - vel1[k, donor], sigma,
                                       celldx[j], celldx[dif])
                advec_vel[k, j] = vel1[k, donor] + (1.0 - sigma) * limiter
                mom_flux[k, j] = advec_vel[k, j] * node_flux[k, j]
        for k in nb.prange(MIN, y_max + 2):
            for j in range(MIN, x_max + 2):
                vel1[k, j] = (vel1[k, j] * node_mass_pre[k, j] + mom_flux[k, j - 1] - mom_flux[k, j]) \
                    / node_mass_post[k, j]
    else:
        for k in nb.prange(MIN - 1, y_max + 2):
            for j in range(MIN, x_max + 2):
                if node_flux[k, j] < 0.0:
                    upwind, donor, downwind, dif = k + 2, k + 1, k, k + 1
                else:
                    upwind, donor, downwind, dif = k - 1, k, k + 1, k - 1
                sigma = abs(node_flux[k, j]) / node_mass_pre[donor, j]
                limiter = _mom_limiter(vel1[donor, j] - vel1[upwind, j], vel1[downwind, j] - vel1[donor, j], sigma,
                                       celldy[k], celldy[dif])
                advec_vel[k, j] = vel1[donor, j] + (1.0 - sigma) * limiter
                mom_flux[k, j] = advec_vel[k, j] * node_flux[k, j]
        for k in nb.prange(MIN, y_max + 2):
            for j in range(MIN, x_max + 2):
                vel1[k, j] = (vel1[k, j] * node_mass_pre[k, j] + mom_flux[k - 1, j] - mom_flux[k, j]) \
                    / node_mass_post[k, j]


@grid_kernel
def _reset_field(x_max, y_max, density0, density1, energy0, energy1, xvel0, xvel1, yvel0, yvel1):
    for k in nb.prange(MIN, y_max + 1):
        for j in range(MIN, x_max + 1):
            density0[k, j] = density1[k, j]
            energy0[k, j] = energy1[k, j]
    for k in nb.prange(MIN, y_max + 2):
        for j in range(MIN, x_max + 2):
            xvel0[k, j] = xvel1[k, j]
            yvel0[k, j] = yvel1[k, j]


@nb.njit(cache=True)
def _field_summary(x_max, y_max, volume, density, energy, xvel, yvel):
    """(volume, mass, internal energy, kinetic energy) over the interior, as CloverLeaf's field_summary."""
    vol = mass = ie = ke = 0.0
    for k in range(MIN, y_max + 1):
        for j in range(MIN, x_max + 1):
            vsqrd = 0.0
            for kv in range(k, k + 2):
                for jv in range(j, j + 2):
                    vsqrd += 0.25 * (xvel[kv, jv] ** 2 + yvel[kv, jv] ** 2)
            cell_vol = volume[k, j]
            cell_mass = cell_vol * density[k, j]
            vol += cell_vol
            mass += cell_mass
            ie += cell_mass * energy[k, j]
            ke += cell_mass * 0.5 * vsqrd
    return vol, mass, ie, ke


CELL = ("density0", "density1", "energy0", "energy1", "pressure", "viscosity", "soundspeed", "volume")
NODE = ("xvel0", "xvel1", "yvel0", "yvel1", *(f"work_array{i}" for i in range(1, 8)))
XFACE = ("vol_flux_x", "mass_flux_x", "xarea")
YFACE = ("vol_flux_y", "mass_flux_y", "yarea")
#: halo layout of each field: (node-centred in x, in y, sign across an x wall, across a y wall)
HALO = {**{n: (False, False, 1.0, 1.0) for n in CELL}, "xvel0": (True, True, -1.0, 1.0),
        "xvel1": (True, True, -1.0, 1.0), "yvel0": (True, True, 1.0, -1.0), "yvel1": (True, True, 1.0, -1.0),
        "vol_flux_x": (True, False, -1.0, 1.0), "mass_flux_x": (True, False, -1.0, 1.0),
        "vol_flux_y": (False, True, 1.0, -1.0), "mass_flux_y": (False, True, 1.0, -1.0)}


def grid_bytes(n: int) -> int:
    """Bytes of all allocations for an n x n cell grid."""
    cells, nodes, faces = (n + 4) ** 2, (n + 5) ** 2, (n + 4) * (n + 5)
    return 8 * (len(CELL) * cells + len(NODE) * nodes + (len(XFACE) + len(YFACE)) * faces + 4 * (n + 4) + 4 * (n + 5))


#: The benchmark decks' end (``clover_bm*.in``): step 2,955 or time 15.5, whichever comes first
END_STEP, END_TIME = 2955, 15.5
#: The share of the decks' end a run of up to so many bytes goes to: the whole run where it fits the time one
#: size is given (the whole run at 128 MiB is about 2,500 cycles, at 1 GiB 2,955 of a 2310^2 grid)
REACH = ((64 << 20, 1.0), (math.inf, 1 / 7))



@register
class CloverLeaf(Scheduled, Workload):
    name = "cloverleaf"
    proxies = "SPEC ACCEL 353.clvrleaf (CloverLeaf)"

    def setup(self, footprint: int, rng: np.random.Generator, n: int | None = None) -> None:
        # the problem is deterministic (clover.in); rng is not needed
        if n is None:
            n = 10 * max(2, int(np.sqrt(footprint / 200)) // 10 + 1)
            while n > 20 and grid_bytes(n) > footprint:
                n -= 10
        self.n = n
        self.begin(END_TIME, END_STEP, reach(REACH, footprint))
        self.x_max = self.y_max = MIN + n - 1  # last interior cell
        self.f: dict[str, np.ndarray] = {}
        for names, shape in ((CELL, (n + 4, n + 4)), (NODE, (n + 5, n + 5)), (XFACE, (n + 4, n + 5)),
                             (YFACE, (n + 5, n + 4))):
            for name in names:
                self.f[name] = np.zeros(shape)
        # initialise_chunk: uniform mesh on [0, BOX]^2
        d = BOX / n
        self.f["vertexx"] = (np.arange(n + 5) - MIN) * d
        self.f["vertexy"] = self.f["vertexx"].copy()
        self.f["vertexdx"] = np.full(n + 5, d)
        self.f["vertexdy"] = np.full(n + 5, d)
        self.f["cellx"] = 0.5 * (self.f["vertexx"][:-1] + self.f["vertexx"][1:])
        self.f["celly"] = self.f["cellx"].copy()
        self.f["celldx"] = np.full(n + 4, d)
        self.f["celldy"] = np.full(n + 4, d)
        self.f["volume"][:] = d * d
        self.f["xarea"][:] = d  # celldy
        self.f["yarea"][:] = d  # celldx
        # generate_chunk: background state, then the rectangle where a cell overlaps it
        f = self.f
        vx, vy = f["vertexx"], f["vertexy"]
        f["density0"][:], f["energy0"][:] = STATES[0]
        inside = (((vy[1:, None] >= 0.0) & (vy[:-1, None] < RECT[1]))
                  & ((vx[None, 1:] >= 0.0) & (vx[None, :-1] < RECT[0])))
        f["density0"][inside], f["energy0"][inside] = STATES[1]
        f["density1"][:], f["energy1"][:] = f["density0"], f["energy0"]
        _ideal_gas(self.x_max, self.y_max, f["density0"], f["energy0"], f["pressure"], f["soundspeed"])
        self._halo("pressure", "soundspeed", "density0", "energy0", "density1", "energy1")
        self.dt = self.dtold = DTINIT
        self.time, self.cycles = 0.0, 0
        self.advect_x = True

    # ------------------------------------------------------------ the hydro cycle
    def _halo(self, *names: str) -> None:
        for name in names:
            _reflect(self.f[name], *HALO[name], self.x_max, self.y_max)

    def timestep(self) -> None:
        f, xm, ym = self.f, self.x_max, self.y_max
        _ideal_gas(xm, ym, f["density0"], f["energy0"], f["pressure"], f["soundspeed"])
        self._halo("pressure", "energy0", "density0", "xvel0", "yvel0")
        _viscosity(xm, ym, f["celldx"], f["celldy"], f["density0"], f["pressure"], f["viscosity"], f["xvel0"],
                   f["yvel0"])
        self._halo("viscosity")
        _calc_dt(xm, ym, f["xarea"], f["yarea"], f["celldx"], f["celldy"], f["volume"], f["density0"], f["viscosity"],
                 f["soundspeed"], f["xvel0"], f["yvel0"], f["work_array1"])
        self.dt = min(_min_interior(xm, ym, f["work_array1"]), self.dtold * DTRISE, DTMAX)
        self.dtold = self.dt

    def _pdv(self, predict: bool) -> None:
        f = self.f
        _pdv(predict, self.x_max, self.y_max, self.dt, f["xarea"], f["yarea"], f["volume"], f["density0"],
             f["density1"], f["energy0"], f["energy1"], f["pressure"], f["viscosity"], f["xvel0"], f["xvel1"],
             f["yvel0"], f["yvel1"], f["work_array1"])

    def lagrangian_step(self) -> None:
        """timestep, PdV predictor (+ ideal_gas, revert), accelerate, PdV corrector."""
        with threads_for(self.n * self.n):
            self._lagrangian_step()

    def _lagrangian_step(self) -> None:
        f, xm, ym = self.f, self.x_max, self.y_max
        self.timestep()
        self._pdv(True)
        _ideal_gas(xm, ym, f["density1"], f["energy1"], f["pressure"], f["soundspeed"])
        self._halo("pressure")
        _revert(xm, ym, f["density0"], f["density1"], f["energy0"], f["energy1"])
        _accelerate(xm, ym, self.dt, f["xarea"], f["yarea"], f["volume"], f["density0"], f["pressure"],
                    f["viscosity"], f["xvel0"], f["yvel0"], f["xvel1"], f["yvel1"], f["work_array1"])
        self._pdv(False)

    def _advec_cell(self, xdir: bool, sweep: int) -> None:
        f = self.f
        _advec_cell(xdir, sweep, self.x_max, self.y_max, f["vertexdx"], f["vertexdy"], f["volume"], f["density1"],
                    f["energy1"], f["mass_flux_x"], f["vol_flux_x"], f["mass_flux_y"], f["vol_flux_y"],
                    *(f[f"work_array{i}"] for i in range(1, 8)))

    def _advec_mom(self, xdir: bool, sweep: int) -> None:
        f = self.f
        # node_flux, node_mass_post, node_mass_pre, advec_vel, mom_flux, pre_vol, post_vol
        wa = [f[f"work_array{i}"] for i in range(1, 8)]
        _advec_mom_nodes(xdir, sweep, self.x_max, self.y_max, f["mass_flux_x"], f["vol_flux_x"], f["mass_flux_y"],
                         f["vol_flux_y"], f["volume"], f["density1"], wa[0], wa[1], wa[2], wa[5], wa[6])
        for vel in ("xvel1", "yvel1"):
            _advec_mom_vel(f[vel], xdir, self.x_max, self.y_max, wa[0], wa[1], wa[2], wa[3], wa[4], f["celldx"],
                           f["celldy"])

    def advection_step(self) -> None:
        """flux_calc, the split cell and momentum remap, reset_field."""
        with threads_for(self.n * self.n):
            self._advection_step()

    def _advection_step(self) -> None:
        f, xm, ym = self.f, self.x_max, self.y_max
        _flux_calc(xm, ym, self.dt, f["xarea"], f["yarea"], f["xvel0"], f["yvel0"], f["xvel1"], f["yvel1"],
                   f["vol_flux_x"], f["vol_flux_y"])
        first = self.advect_x
        self._halo("energy1", "density1", "vol_flux_x", "vol_flux_y")
        self._advec_cell(first, 1)
        self._halo("density1", "energy1", "xvel1", "yvel1", "mass_flux_x", "mass_flux_y")
        self._advec_mom(first, 1)
        self._advec_cell(not first, 2)
        self._halo("density1", "energy1", "xvel1", "yvel1", "mass_flux_x", "mass_flux_y")
        self._advec_mom(not first, 2)
        _reset_field(xm, ym, f["density0"], f["density1"], f["energy0"], f["energy1"], f["xvel0"], f["xvel1"],
                     f["yvel0"], f["yvel1"])
        self.advect_x = not self.advect_x
        self.time += self.dt

    def advance(self) -> None:
        """One hydro cycle."""
        with threads_for(self.n * self.n):
            self.lagrangian_step()
            self.advection_step()
        self.cycles += 1

    # ------------------------------------------------------------ checks
    def field_summary(self, density: str = "density0", energy: str = "energy0", xvel: str = "xvel0",
                      yvel: str = "yvel0") -> dict[str, float]:
        """Volume, mass, internal, kinetic and total energy of the interior (CloverLeaf's field_summary)."""
        f = self.f
        vol, mass, ie, ke = _field_summary(self.x_max, self.y_max, f["volume"], f[density], f[energy], f[xvel],
                                           f[yvel])
        return {"volume": vol, "mass": mass, "internal": ie, "kinetic": ke, "total": ie + ke}

    def interior(self, name: str) -> np.ndarray:
        """A cell field without its halo, indexed [y, x]."""
        return self.f[name][MIN:self.y_max + 1, MIN:self.x_max + 1]

    # ------------------------------------------------------------ Workload contract
    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        scratch = {f"work_array{i}" for i in range(1, 8)}
        geometry = {"volume", "xarea", "yarea", "cellx", "celly", "vertexx", "vertexy", "celldx", "celldy", "vertexdx",
                    "vertexdy"}
        return {n: (a, "other" if n in scratch or n in geometry else "field") for n, a in self.f.items()}

    def profile(self) -> AccessProfile:
        n2 = float(self.n * self.n)
        halo = min(1.0, 8.0 / self.n)  # share of a field in its two-deep halo ring

        def rd(*names: str) -> list[Access]:
            return [Access(x) for x in names]

        def wr(*names: str) -> list[Access]:
            return [Access(x, "write") for x in names]

        def rw(*names: str) -> list[Access]:
            return [Access(x, "readwrite") for x in names]

        def hal(*names: str) -> Kernel:
            return Kernel("update_halo", [Access(x, "readwrite", "strided", fraction=halo, stride=self.n + 5)
                                          for x in names], 0.0)

        wa = [f"work_array{i}" for i in range(1, 8)]
        cell_adv = (rd("volume", "vol_flux_x", "vol_flux_y", "vertexdx", "vertexdy") + rw("density1", "energy1")
                    + wr(*wa))
        mom_nodes = rd("mass_flux_x", "mass_flux_y", "vol_flux_x", "vol_flux_y", "volume", "density1") \
            + wr("work_array1", "work_array2", "work_array3", "work_array6", "work_array7")
        mom_vel = rd("work_array1", "work_array2", "work_array3", "celldx", "celldy") + wr("work_array4", "work_array5")
        pdv = rd("xarea", "yarea", "volume", "density0", "energy0", "pressure", "viscosity", "xvel0", "yvel0")
        return AccessProfile(self.name, [
            Kernel("ideal_gas", rd("density0", "energy0") + wr("pressure", "soundspeed"), 9 * n2),
            hal("pressure", "energy0", "density0", "xvel0", "yvel0"),
            Kernel("viscosity", rd("celldx", "celldy", "density0", "pressure", "xvel0", "yvel0") + wr("viscosity"),
                   50 * n2),
            hal("viscosity"),
            Kernel("calc_dt", rd("xarea", "yarea", "celldx", "celldy", "volume", "density0", "viscosity",
                                 "soundspeed", "xvel0", "yvel0") + wr("work_array1"), 40 * n2),
            Kernel("PdV_predict", pdv + wr("work_array1", "energy1", "density1"), 35 * n2),
            Kernel("ideal_gas_predict", rd("density1", "energy1") + wr("pressure", "soundspeed"), 9 * n2),
            hal("pressure"),
            Kernel("revert", rd("density0", "energy0") + wr("density1", "energy1"), 0.0),
            Kernel("accelerate", rd("xarea", "yarea", "volume", "density0", "pressure", "viscosity", "xvel0", "yvel0")
                   + wr("work_array1", "xvel1", "yvel1"), 45 * n2),
            Kernel("PdV_correct", pdv + rd("xvel1", "yvel1") + wr("work_array1", "energy1", "density1"), 39 * n2),
            Kernel("flux_calc", rd("xarea", "yarea", "xvel0", "yvel0", "xvel1", "yvel1") + wr("vol_flux_x",
                                                                                              "vol_flux_y"), 10 * n2),
            hal("energy1", "density1", "vol_flux_x", "vol_flux_y"),
            Kernel("advec_cell_x", cell_adv + wr("mass_flux_x"), 60 * n2),
            hal("density1", "energy1", "xvel1", "yvel1", "mass_flux_x", "mass_flux_y"),
            Kernel("advec_mom_x_nodes", mom_nodes, 20 * n2),
            Kernel("advec_mom_x_xvel", mom_vel + rw("xvel1"), 30 * n2),
            Kernel("advec_mom_x_yvel", mom_vel + rw("yvel1"), 30 * n2),
            Kernel("advec_cell_y", cell_adv + wr("mass_flux_y"), 60 * n2),
            hal("density1", "energy1", "xvel1", "yvel1", "mass_flux_x", "mass_flux_y"),
            Kernel("advec_mom_y_nodes", mom_nodes, 20 * n2),
            Kernel("advec_mom_y_xvel", mom_vel + rw("xvel1"), 30 * n2),
            Kernel("advec_mom_y_yvel", mom_vel + rw("yvel1"), 30 * n2),
            Kernel("reset_field", rd("density1", "energy1", "xvel1", "yvel1")
                   + wr("density0", "energy0", "xvel0", "yvel0"), 0.0),
        ])
