"""Executed notebooks keep no widget state (notebook 00's widget models, keyed by random ids, and those ids in its
outputs) and no cell timings: re-executing an unchanged notebook the way ``make fixtures`` does writes the same
bytes, and ``make reproduce``'s papermill copies carry none of it either."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import nbformat
import pytest

from buddylib.report import notebooks

ROOT = Path(__file__).resolve().parents[1]


def _widget_state(nb: dict) -> list[str]:
    """The widget state and timings in the notebook ``nb`` (its JSON): what would differ in the next run."""
    times = [f"metadata.papermill.{k}" for k in notebooks.PAPERMILL_TIMES if k in nb["metadata"].get("papermill", {})]
    return ["metadata.widgets"] * ("widgets" in nb["metadata"]) + times + [
        f"cell {i}: {mime}" for i, cell in enumerate(nb["cells"]) for output in cell.get("outputs", [])
        for mime in output.get("data", {}) if "jupyter.widget" in mime] + [
        f"cell {i}: {key}" for i, cell in enumerate(nb["cells"]) for key in ("execution", "papermill")
        if key in cell.get("metadata", {})]


@pytest.mark.parametrize("path", notebooks.notebook_paths(), ids=lambda p: p.stem)
def test_committed_notebooks_hold_no_widget_state(path: Path) -> None:
    text = path.read_text()
    assert _widget_state(json.loads(text)) == []
    assert '"model_id"' not in text


def _with_widgets() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    view = {notebooks.WIDGET_VIEW: {"model_id": "7454ca153c144cc6929bf545ab587535", "version_major": 2,
                                    "version_minor": 0}}
    nb.cells = [nbformat.v4.new_markdown_cell("# x"),
                nbformat.v4.new_code_cell("ui", outputs=[
                    nbformat.v4.new_output("execute_result", {**view, "text/plain": "VBox(...)"}, execution_count=1),
                    nbformat.v4.new_output("display_data", view),  # a widget alone: the output goes
                    nbformat.v4.new_output("stream", text="1.707x\n")])]
    nb.metadata.widgets = {"application/vnd.jupyter.widget-state+json": {"state": {"7454ca": {}}, "version_major": 2,
                                                                         "version_minor": 0}}
    nb.metadata.papermill = {"parameters": {"scale": "quick"}, "start_time": "2026-12-05T11:00:00", "duration": 1.5}
    nb.cells[1].metadata.execution = {"iopub.execute_input": "2026-12-05T11:00:00.1Z"}
    nb.cells[1].metadata.papermill = {"status": "completed", "duration": 0.2}
    return nb


def test_strip_volatile_keeps_what_nbval_compares() -> None:
    nb, resources = notebooks.strip_volatile(_with_widgets(), {"r": 1})
    assert resources == {"r": 1} and _widget_state(nb) == []
    assert nb.metadata.papermill == {"parameters": {"scale": "quick"}}  # what ran, not when
    outputs = nb.cells[1].outputs
    assert [o.output_type for o in outputs] == ["execute_result", "stream"]
    assert outputs[0].data == {"text/plain": "VBox(...)"} and outputs[1].text == "1.707x\n"


def test_make_fixtures_executes_without_widget_state() -> None:
    """The Makefile's nbconvert call: no timings, no widget state, and ``strip_volatile`` after executing."""
    from traitlets.utils.importstring import import_item

    make = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    command = re.search(r"^EXECUTE_NOTEBOOKS := (.*)$", make, re.M).group(1).split()
    assert "$(EXECUTE_NOTEBOOKS) notebooks/[0-9]*.ipynb" in make
    assert {"--execute", "--inplace", "--ExecutePreprocessor.record_timing=False",
            "--ExecutePreprocessor.store_widget_state=False"} <= set(command)
    (preprocessor,) = [a.split("=", 1)[1] for a in command if a.startswith("--NotebookExporter.preprocessors=")]
    assert import_item(preprocessor) is notebooks.strip_volatile


def test_reproduce_executes_without_widget_state(tmp_path: Path, monkeypatch) -> None:
    """``execute_notebook`` (make reproduce's notebook task) tells papermill's nbclient to keep no widget state or
    timings, and strips the model ids from what papermill wrote (papermill and nbconvert stubbed: no kernel)."""
    calls = {}

    def execute(src, dst, **kwargs):
        calls.update(kwargs)
        nbformat.write(_with_widgets(), dst)

    class HTMLExporter:
        def from_filename(self, path):
            return "<html/>", {}

    monkeypatch.setitem(sys.modules, "papermill", types.SimpleNamespace(execute_notebook=execute))
    monkeypatch.setitem(sys.modules, "nbconvert", types.SimpleNamespace(HTMLExporter=HTMLExporter))
    notebooks.execute_notebook(notebooks.NOTEBOOKS / "00_explore.ipynb", str(tmp_path), str(tmp_path / "data"),
                               scale="quick")
    assert calls["store_widget_state"] is False and calls["record_timing"] is False
    written = (tmp_path / "notebooks" / "00_explore.ipynb").read_text()
    assert _widget_state(json.loads(written)) == [] and '"model_id"' not in written
