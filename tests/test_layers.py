"""The package's layers, as CONTRIBUTING.md draws them: no module imports from a layer above its own, and no two
modules import each other, directly or round a loop. Imports inside functions count like any other (that is
where a cycle hides), and so do imports only a type checker reads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "buddylib"

#: Lowest first. A module imports only from layers below its own (and from its own package, without a cycle).
#: A top-level module or a subpackage is one unit; every unit of the package must be listed here.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("entries",),
    ("compressors",),
    ("buddylib",),  # the package's __init__: the compressors' names at the top
    ("provenance",),
    ("snapshot", "paper", "threads", "outputs"),
    ("layout",),
    ("regions",),  # targets per region: the rules that share an allocation's overflow budget
    ("analysis",),
    ("workloads",),
    ("timing",),
    ("userdata",),  # your own data: readers of files, the recorder of your own model
    ("warm",),
    ("studies",),  # results from the workloads: experiments, summaries, fidelity, fixtures, llm, granularity, remake
    ("explore",),  # notebook 00's explorer: model, view, screenshot
    ("report",),  # make reproduce and make bench: the pipeline, the benchmark, the index page
    ("cli",),
)


def _modules() -> dict[str, Path]:
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


MODULES = _modules()


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _imports(module: str) -> set[str]:
    """The package's modules ``module`` imports, anywhere in its code (``from buddylib import x`` is module x)."""
    f = MODULES[module]
    package = module if f.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join([*base, *([node.module] if node.module else [])])
            else:
                mod = node.module or ""
            candidates = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in MODULES] or [mod]
        else:
            continue
        found |= {c for c in candidates if c in MODULES and c != module}
    return found


#: Imports the rule allows, each with why. ``buddylib.capture``: the package face names the recorder of your own model
#: (issue 39: ``from buddylib import capture``) by a lazy module attribute, imported on first use only, so
#: ``import buddylib`` still imports nothing above the compressors (checked below).
EXCEPTIONS = {("buddylib", "buddylib.userdata.capture")}
GRAPH = {m: _imports(m) - {t for s, t in EXCEPTIONS if s == m} for m in MODULES}
LEVEL = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def test_every_unit_of_the_package_has_a_layer() -> None:
    assert {_unit(m) for m in MODULES} <= set(LEVEL), "a new module or package: give it a layer in LAYERS"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_from_a_layer_above_its_own(module: str) -> None:
    mine = LEVEL[_unit(module)]
    upward = sorted(t for t in GRAPH[module] if _unit(t) != _unit(module) and LEVEL[_unit(t)] >= mine)
    assert not upward, f"{module} (layer {LAYERS[mine]}) imports {upward}"


def test_no_import_cycle_between_modules() -> None:
    """Tarjan's strongly connected components of the import graph: each must be one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in sorted(GRAPH):
        if m not in index:
            visit(m)
    assert not cycles, f"modules that import each other: {cycles}"


def test_the_checks_see_a_function_level_import() -> None:
    """What the layer and cycle checks rest on: an import inside a function is found like a top-level one."""
    assert "buddylib.studies.experiments" in GRAPH["buddylib.report.index_page"]  # imported inside a function
    assert "buddylib.snapshot" in GRAPH["buddylib.userdata.readers"]


def test_the_package_face_imports_the_recorder_only_when_asked() -> None:
    """The exception above: ``import buddylib`` leaves torch and the recorder unimported; ``buddylib.capture`` and
    ``from buddylib import capture`` are the recorder's module."""
    import subprocess
    import sys

    code = ("import sys, buddylib; assert 'torch' not in sys.modules and 'buddylib.userdata.capture' not in "
            "sys.modules; from buddylib import capture; import buddylib.userdata.capture as c; "
            "assert capture is c is buddylib.capture and capture.Recorder")
    subprocess.run([sys.executable, "-c", code], check=True)
