"""Run one notebook with papermill into a report folder (its executed copy, HTML, figures and tidy data): what
``make reproduce``'s notebook tasks do, on whichever worker the pipeline gives them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

#: The mime type of a widget's output: the id of a widget model, new (random) in every run
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: What nbclient (papermill's and ``jupyter nbconvert --execute``'s executor) is told, so that an executed notebook
#: keeps no widget state (its models by random id, ``metadata.widgets``) and no timestamps of its cells
EXECUTE_OPTIONS = {"store_widget_state": False, "record_timing": False}


def notebook_paths(only: list[str] | None = None) -> list[Path]:
    """The numbered notebooks, in order.

    Parameters
    ----------
    only : list of str, optional
        Only these notebooks, by stem (``"01_compressors"``); None: all.

    Returns
    -------
    list of Path
        The notebooks' files in ``notebooks/``, sorted by name.

    Examples
    --------
    >>> [nb.name for nb in notebook_paths(["01_compressors"])]
    ['01_compressors.ipynb']
    """
    return [nb for nb in sorted(NOTEBOOKS.glob("[0-9]*.ipynb")) if only is None or nb.stem in only]


def execute_notebook(nb: Path, out: str, data: str, scale: str = "default", names: list[str] | None = None) -> None:
    """Execute one notebook with papermill at ``scale`` into ``out``: ipynb, HTML, and the figures and tidy
    data it writes into ``out/<notebook>/``.

    The executed copy and its HTML go to ``out/notebooks/``, stripped of what changes from run to run
    (:func:`strip_volatile`). ``out_dir`` is always passed; ``data_dir``, ``scale``, ``names`` and ``paper_scale``
    only where the notebook's ``parameters`` cell declares them.

    Parameters
    ----------
    nb : Path
        The notebook (run with ``notebooks/`` as its working folder).
    out : str
        The report folder; the notebook's ``out_dir`` is ``out/<notebook stem>``.
    data : str
        The folder of cached runs, the notebook's ``data_dir``.
    scale : str
        The workloads' scale; ``"default"`` also sets ``paper_scale="paper"`` (notebook 09: the CNNs as published).
    names : list of str, optional
        The workloads to use (None: the notebook's own choice).
    """
    import nbconvert
    import papermill

    out_path = Path(out)
    (out_path / "notebooks").mkdir(parents=True, exist_ok=True)
    params: dict[str, object] = {"out_dir": str((out_path / nb.stem).resolve())}
    declared = _parameters(nb)
    paper_scale = "paper" if scale == "default" else scale  # notebook 09: the CNNs as published
    for key, value in (("scale", scale), ("data_dir", str(Path(data).resolve())), ("names", names),
                       ("paper_scale", paper_scale)):
        if key in declared and value is not None:
            params[key] = value
    executed = out_path / "notebooks" / nb.name
    papermill.execute_notebook(str(nb), str(executed), parameters=params, cwd=str(NOTEBOOKS),
                               progress_bar=False, kernel_name="python3", **EXECUTE_OPTIONS)
    _strip_file(executed)
    html, _ = nbconvert.HTMLExporter().from_filename(str(executed))
    executed.with_suffix(".html").write_text(html)


#: Papermill's record of when a run started and ended (the notebook's and each cell's): timings, new in every run
PAPERMILL_TIMES = ("start_time", "end_time", "duration")


def strip_volatile(nb: Any, resources: dict | None = None) -> tuple[Any, dict | None]:
    """Drop what changes from run to run of an unchanged notebook: the widget state (``metadata.widgets``, its
    models keyed by random ids), the ``WIDGET_VIEW`` of every output (a model's id; the output keeps its
    ``text/plain``, what nbval compares), and the timings (each cell's ``execution`` timestamps, papermill's per-cell
    record and its notebook start, end and duration; papermill's parameters stay).

    It is also the nbconvert preprocessor ``make fixtures`` runs after executing (``--NotebookExporter.preprocessors``),
    so the committed notebooks re-execute byte for byte.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        The notebook, changed in place.
    resources : dict, optional
        nbconvert's resources, passed through.

    Returns
    -------
    tuple
        ``(nb, resources)``, as an nbconvert preprocessor returns them.
    """
    nb.metadata.pop("widgets", None)
    for key in PAPERMILL_TIMES:
        nb.metadata.get("papermill", {}).pop(key, None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("papermill", None)
        if cell.cell_type != "code":
            continue
        for output in cell.outputs:
            output.get("data", {}).pop(WIDGET_VIEW, None)
        cell.outputs = [o for o in cell.outputs if "data" not in o or o["data"]]
    return nb, resources


def _strip_file(path: Path) -> None:
    """``strip_volatile`` on the notebook file at ``path``, rewritten in place."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nbformat.write(strip_volatile(nb)[0], path)


def _parameters(nb: Path) -> set[str]:
    """Names assigned in the notebook's cell tagged ``parameters``."""
    import ast

    import nbformat

    for cell in nbformat.read(nb, as_version=4).cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return {t.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)}
    return set()
