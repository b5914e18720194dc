"""The documentation site's promises that need no build (``make docs`` builds it, warnings as errors): every module
the API reference lists exists, and every public function, class and method in it has a docstring."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def api_modules() -> list[str]:
    """The modules the API reference lists (its autosummary entries)."""
    text = (DOCS / "api" / "index.md").read_text()
    return re.findall(r"^   (buddylib[\w.]*)$", text, re.M)


def public_names(module) -> list[str]:
    """What a reader of the module's page sees: its ``__all__``, else what it defines without a leading underscore."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", None)
            == module.__name__ and (inspect.isfunction(v) or inspect.isclass(v))]


def undocumented(module) -> list[str]:
    out = []
    for name in public_names(module):
        obj = getattr(module, name)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if not inspect.getdoc(obj):
            out.append(name)
        if inspect.isclass(obj):
            for m, v in vars(obj).items():
                f = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
                if not m.startswith("_") and inspect.isfunction(f) and not inspect.getdoc(getattr(obj, m)):
                    out.append(f"{name}.{m}")
    return out


def test_api_reference_lists_real_modules() -> None:
    mods = api_modules()
    assert len(mods) > 20 and len(set(mods)) == len(mods)
    for m in mods:
        importlib.import_module(m)


@pytest.mark.parametrize("name", api_modules())
def test_public_names_have_docstrings(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__, f"{name} has no module docstring"
    assert not undocumented(module), f"{name}: no docstring for {', '.join(undocumented(module))}"
