"""Which code made a cached result, so a result made by other code is never reused.

Runs, slowdown sweeps and batch measurements are cached in ``data/`` because they take
minutes; a cache made before a compressor, a workload or the timing model changed would
silently give the old numbers. Each cache records :func:`code_version` of the source it
depends on and is recomputed when that differs.

The exception is a *frozen* folder, one holding a :data:`MANIFEST` (the committed fixtures,
:mod:`buddylib.fixtures`): its runs are read as they are and never remade in place, because
remaking them on another CPU would give other bytes; a test checks them against a fresh run.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
#: Source the bytes and sectors of a saved workload run depend on.
RUN_SOURCES = ("workloads", "compressors", "entries.py", "snapshot.py")
#: ... and what analysing a run (placement, timing) adds.
ANALYSIS_SOURCES = (*RUN_SOURCES, "analysis.py", "layout.py", "timing", "experiments.py")


#: The file that marks a folder of runs as frozen, and says how and where they were made.
MANIFEST = "MANIFEST.json"


def frozen(folder: str | Path) -> bool:
    """Whether ``folder`` holds committed runs (a :data:`MANIFEST`): read them, never remake them there."""
    return (Path(folder) / MANIFEST).is_file()


@functools.cache
def code_version(*parts: str) -> str:
    """Short SHA-256 of the Python source under ``parts`` (files or folders of the package).

    >>> code_version("entries.py") == code_version("entries.py") != code_version("layout.py")
    True
    """
    h = hashlib.sha256()
    for part in parts:
        root = PACKAGE / part
        if not root.exists():
            raise ValueError(f"code_version: {part!r} is not part of the buddylib package")
        for f in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            h.update(str(f.relative_to(PACKAGE)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]
