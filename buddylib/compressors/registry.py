"""One registry of compressors by name, so data, configs and plots name them by string."""

from __future__ import annotations

from typing import Any

from buddylib.compressors.abc import Compressor

_REGISTRY: dict[str, tuple[type[Compressor], dict[str, Any]]] = {}


def register(name: str, cls: type[Compressor], **options: Any) -> None:
    """Register ``cls`` (built with ``options``) under ``name``; re-registering replaces."""
    _REGISTRY[name] = (cls, options)


def get(name_or_config: str | dict[str, Any]) -> Compressor:
    """Build the compressor registered as ``name`` (or from a ``get_config()`` dict)."""
    if isinstance(name_or_config, dict):
        config = dict(name_or_config)
        name = config.pop("id", None)
    else:
        name, config = name_or_config, {}
    if name not in _REGISTRY:
        raise ValueError(f"unknown compressor {name!r}; available: {', '.join(names())}")
    cls, options = _REGISTRY[name]
    return cls(**{**options, **config})


def names() -> list[str]:
    """Names of all registered compressors, in registration order."""
    return list(_REGISTRY)
