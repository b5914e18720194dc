"""The warm-up compiles every kernel signature the library uses, so processes started after it compile nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from buddylib import warm

#: In a fresh process: the warm-up steps, then the library's own calls on every kind of input (writable
#: and read-only arrays, bytes, memory maps, streams, small and large), each kernel's signatures printed
#: after each.
_PROBE = """
import json, sys
import numpy as np
from buddylib import compressors, warm
from buddylib.compressors import abc, bdi, bpc_kernels, ebo, fpc, zvc
from buddylib.timing import caches

kernels = {"sectors": abc._sectors, "sectors serial": abc._sectors_serial, "bdi": bdi._bdi_kernel,
           "bdi serial": bdi._bdi_kernel_serial, "fpc": fpc._fpc_kernel, "fpc serial": fpc._fpc_kernel_serial,
           "zvc": zvc._zvc_kernel, "zvc serial": zvc._zvc_kernel_serial,
           "metadata cache": caches._set_assoc_lru, "page LRU": caches._page_lru_faults}
for parallel, trio in ebo.KERNELS.items():
    for name, k in zip(("bits", "encode", "decode"), trio):
        kernels[f"ebo {name} {parallel}"] = k
for (parallel, width), trio in bpc_kernels.KERNELS.items():
    for name, k in zip(("bits", "encode", "decode"), trio):
        kernels[f"bpc{width} {name} {parallel}"] = k

def signatures():
    return {name: sorted(map(str, k.signatures)) for name, k in kernels.items()}

for fn in warm.steps().values():
    fn()
warmed = signatures()
rng = np.random.default_rng(1)
data = {"writable": rng.integers(0, 9, 3000 * 32, dtype=np.int32),
        "bytes": rng.standard_normal(3000 * 16).tobytes(),
        "read-only": np.frombuffer(bytes(3000 * 128 + 5), dtype=np.uint8),
        "memmap": np.load(sys.argv[1], mmap_mode="r")}
for x in data.values():
    for n in (3, 3000):
        part = x[: n * 128] if isinstance(x, bytes) else x[: n * 128 // np.asarray(x).itemsize]
        for name in compressors.names():
            compressors.get(name).sectors(part)
        compressors.get("bdi").encodings(part)
        for w in (32, 64):
            bpc = compressors.get(f"bpc{w}")
            bpc.decode(bpc.encode(part))
            bpc.decode(memoryview(bytearray(bpc.encode(part))))
            bpc.decode_entries(*bpc.encode_entries(part))
        for fmt in ("bf16", "fp16"):
            e = compressors.get(f"ebo-{fmt}")
            e.decode(e.encode(part))
            e.decode(memoryview(bytearray(e.encode(part))))
            e.decode_entries(*e.encode_entries(part))
caches.set_associative_hits(np.arange(50, dtype=np.int32), 1024, 32, 2)
caches.page_faults(np.frombuffer(np.arange(9).tobytes(), dtype=np.int64), 3)
print(json.dumps({"warmed": warmed, "after": signatures()}))
"""


def test_the_library_compiles_no_signature_the_warm_up_does_not(tmp_path: Path) -> None:
    """Every input kind reaches a kernel with the types the warm-up gave it (read-only, contiguous), so a
    worker started after :func:`warm.warm` finds all it runs in numba's cache."""
    import numpy as np

    np.save(tmp_path / "x.npy", np.arange(3000 * 16, dtype=np.float64))
    out = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "x.npy")], capture_output=True, text=True,
                         check=True)
    seen = json.loads(out.stdout.splitlines()[-1])
    assert all(seen["warmed"].values()), seen["warmed"]  # every kernel ran
    assert seen["after"] == seen["warmed"]


def test_after_the_warm_up_a_fresh_process_compiles_nothing() -> None:
    """What xdist's workers and dask's rely on: once :func:`warm.warm` ran, numba's cache holds every kernel
    signature the warm-up steps use, so a new process (one for all the groups' steps) only loads them."""
    warm.warm()
    proc = warm._run_group(list(warm.GROUPS), {**os.environ, "BUDDY_WARM_MEASURE": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = json.loads(proc.stdout.splitlines()[-1])
    assert done["compiled"] == []
    ran = {s.removesuffix(" set-up and step") for s in done["steps"]}
    assert ran >= {n for names in warm.WORKLOADS.values() for n in names}


def test_warm_once_per_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process under one that warmed the same cache (an xdist worker, a dask worker) starts no process;
    another cache folder is warmed, and then marked."""
    started: list[list[str]] = []
    monkeypatch.setattr(warm, "_run_group", lambda g: started.append(g) or subprocess.CompletedProcess([], 0))
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/tmp/one")
    monkeypatch.setenv(warm.WARMED, warm._cache_key())
    assert warm.warm() == 0.0 and started == []
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/tmp/other")
    warm.warm(processes=2)
    assert started == warm.share(2) and os.environ[warm.WARMED].endswith("|/tmp/other")
    warm.warm(processes=2)
    assert started == warm.share(2)


def test_groups_shared_among_processes_by_cost() -> None:
    for n in (1, 2, 3, 16):
        shares = warm.share(n)
        assert sorted(g for s in shares for g in s) == sorted(warm.GROUPS) and len(shares) == min(n, len(warm.GROUPS))
        loads = [sum(warm.COST[g] for g in s) for s in shares]
        assert max(loads) - min(loads) <= max(warm.COST.values())  # none waits on the others by more than a group


def test_bytecode_names_modules_this_environment_has() -> None:
    """``make``'s install writes the bytecode of these (``python -m buddylib.warm --bytecode``): a name that no
    longer resolves (a package dropped or renamed) would silently leave its modules to compile in every process."""
    import importlib.util

    names = [*warm.IMPORTED_LATER[0], *warm.IMPORTED_LATER[1], *warm.COMPILED_WHOLE]
    assert len(set(names)) == len(names)
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    assert missing == []
    assert all(importlib.util.find_spec(n).submodule_search_locations for n in warm.COMPILED_WHOLE)  # packages
