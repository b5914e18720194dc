"""Run one notebook with papermill into a report folder (its executed copy, HTML, figures and tidy data): what
``make reproduce``'s notebook tasks do, on whichever worker the pipeline gives them."""

from __future__ import annotations

from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def notebook_paths(only: list[str] | None = None) -> list[Path]:
    """The numbered notebooks (or ``only`` these, by stem), in order."""
    return [nb for nb in sorted(NOTEBOOKS.glob("[0-9]*.ipynb")) if only is None or nb.stem in only]


def execute_notebook(nb: Path, out: str, data: str, scale: str = "default", names: list[str] | None = None) -> None:
    """Execute one notebook with papermill at ``scale`` into ``out``: ipynb, HTML, and the figures and tidy
    data it writes into ``out/<notebook>/``."""
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
                               progress_bar=False, kernel_name="python3")
    html, _ = nbconvert.HTMLExporter().from_filename(str(executed))
    executed.with_suffix(".html").write_text(html)


def _parameters(nb: Path) -> set[str]:
    """Names assigned in the notebook's cell tagged ``parameters``."""
    import ast

    import nbformat

    for cell in nbformat.read(nb, as_version=4).cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return {t.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)}
    return set()
