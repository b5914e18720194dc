"""HPC proxies of the paper's SPEC ACCEL and DOE FastForward applications, one module each.

Importing this package registers them all.
"""

from buddylib.workloads.hpc import (  # noqa: F401 - imported to register
    bt,
    cg,
    cloverleaf,
    ep,
    hpgmg,
    ilbdc,
    lulesh,
    md,
    minighost,
    mriq,
    olbm,
    ostencil,
    seismic,
    sp,
    swim,
)
