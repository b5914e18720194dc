"""One registry of compressors by name, so data, configs and plots name them by string."""

from __future__ import annotations

from typing import Any

from buddylib.compressors.abc import Compressor

_REGISTRY: dict[str, tuple[type[Compressor], dict[str, Any]]] = {}


def register(name: str, cls: type[Compressor], **options: Any) -> None:
    """Register ``cls`` (built with ``options``) under ``name``; re-registering replaces.

    Parameters
    ----------
    name : str
        The name :func:`get` takes and a compressor's ``get_config()`` gives as ``"id"``.
    cls : type of Compressor
        The compressor class.
    **options
        Keyword arguments ``cls`` is built with (a config's own options override them).
    """
    _REGISTRY[name] = (cls, options)


def get(name_or_config: str | dict[str, Any]) -> Compressor:
    """Build the compressor registered as ``name`` (or from a ``get_config()`` dict).

    Parameters
    ----------
    name_or_config : str or dict
        A registered name (:func:`names`), or a ``get_config()`` dict: its ``"id"`` the name, its other items
        options that override the registered ones.

    Returns
    -------
    Compressor
        A new instance.

    Raises
    ------
    ValueError
        An unknown name (or a config without ``"id"``).

    Examples
    --------
    >>> import buddylib.compressors
    >>> get("bpc64"), get({"id": "ebo-fp16", "parallel": False})
    (BPC(width=64), EBO('fp16', parallel=False))
    """
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
