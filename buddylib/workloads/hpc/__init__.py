"""HPC proxies of the paper's SPEC ACCEL and DOE FastForward applications, one module each.

Importing this package registers them all.
"""

from buddylib.workloads.hpc import ostencil  # noqa: F401
