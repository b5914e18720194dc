"""bt and sp (the NPB ADI proxies): each reproduces NPB's class-S verification."""

from __future__ import annotations

import itertools
from types import ModuleType

import numpy as np
import pytest

from buddylib.workloads.hpc import bt, sp
from buddylib.workloads.hpc._adi import ADI


@pytest.mark.parametrize(("module", "cls", "fall"), [(bt, bt.BT, 1e-5), (sp, sp.SP, 1e-6)], ids=["bt", "sp"])
def test_class_s_matches_npb_verification(module: ModuleType, cls: type[ADI], fall: float) -> None:
    class_s = module.CLASS_S
    w = cls()
    w.setup_grid(class_s["n"], class_s["dt"])
    errors = [w.error_norm()]
    for _ in range(class_s["niter"] // 10):
        for _ in range(10):
            w.advance()
        errors.append(w.error_norm())
    # the discrete solution approaches the manufactured one: every variable's error falls every 10 steps
    assert all((b < a).all() for a, b in itertools.pairwise(errors))
    assert (errors[-1] < fall * errors[0]).all()
    # NPB's own acceptance test: RMS error and residual within 1e-8 of the published class-S values
    np.testing.assert_allclose(errors[-1], class_s["xce"], rtol=1e-8)
    np.testing.assert_allclose(w.residual_norm(), class_s["xcr"], rtol=1e-8)
