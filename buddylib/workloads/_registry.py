"""The workloads by name: each workload module registers its class here (``@register``), and
:func:`buddylib.workloads.get` looks them up. A module of its own, below the workload modules, so the package
that loads them and the modules that register with it do not import each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from buddylib.workloads.base import Workload

_REGISTRY: dict[str, type[Workload]] = {}


def register(cls: type[Workload]) -> type[Workload]:
    """Class decorator: make ``cls`` available by its ``name``."""
    _REGISTRY[cls.name] = cls
    return cls
