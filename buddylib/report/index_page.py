"""The index of a ``make reproduce`` run: what it shows, saved beside it, and the page made from it.

:func:`buddylib.report.reproduce.run` computes; this module only keeps and renders. :class:`Results` holds
every number, table, file and step time the index shows and is saved as ``index.json`` beside the
page, so the page (``README.md`` and ``index.html``) can be rendered again, after a change to how it
looks, without recomputing anything: ``python -m buddylib.report.index_page reports``.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from buddylib import paper

#: notebook 09's attribution tables shown on the page: title, file under ``09_fidelity/``
FIDELITY_TABLES = (("DL effective ratio (mean of the paper's six networks)", "dl_attribution.csv"),
                   ("HPC effective ratio (mean of the HPC proxies)", "hpc_attribution.csv"),
                   ("HPC slowdown, %", "slowdown_hpc_attribution.csv"),
                   ("DL slowdown, %", "slowdown_dl_attribution.csv"))
RESULTS_FILE = "index.json"
#: The benchmark size its speed targets are stated at (``make bench``).
BENCH_TARGET_MIB = 256


@dataclass
class Results:
    """What one run computed, as the index shows it. Ratios and slowdowns are per workload at the
    headline configuration (:data:`buddylib.paper.HEADLINE`); slowdowns are factors (1.01 = 1%); an
    empty mapping means the run did not compute it. Paths are relative to the reports folder.

    Parameters
    ----------
    bench_mib : int
        MiB per data kind of the run's compressor benchmark.
    hpc_ratio, dl_ratio, dl_ideal, extra_ratio : dict of str to float
        Effective ratio per HPC and DL workload, the DL workloads' ideal ratio, and the effective ratio of the
        workloads beyond the paper.
    hpc_slowdown, hpc_slowdown_credit, dl_slowdown, dl_slowdown_credit : dict of str to float
        Slowdown per workload without bandwidth credit (the paper's comparison) and with it.
    hpc_table, slowdown_table : pandas.DataFrame
        Run facts, ideal and effective ratios per HPC workload; percent slowdown per link preset, then UM (times
        slower).
    bpc_ratio : dict of str to float
        BPC-32's ideal ratio per benchmark data kind.
    bench_markdown : str
        The benchmark's report (:func:`buddylib.report.bench.write`'s Markdown).
    files : dict of str to list of str
        The result files of ``"hpc"``, ``"slowdown"`` and ``"bench"``.
    took, tasks : dict of str to float
        Seconds per phase (``"total"`` last) and per parallel task.
    environment : dict of str to str
        What the run was measured on.
    notebooks : list of dict
        Per executed notebook: ``notebook``, ``seconds``, ``files``.
    batch_gain : dict of str to float
        Largest batch, Buddy over uncompressed, per CNN (notebook 07).
    fidelity : dict of str to pandas.DataFrame
        Notebook 09's attribution tables by file name (:data:`FIDELITY_TABLES`).
    summaries : pandas.DataFrame
        The committed summaries read instead of run (:func:`buddylib.studies.remake.provenance`), one row each.
    llm_ratios, llm_capacity, granularity : pandas.DataFrame
        Beyond the paper: ratio per LLM tensor kind and the capacity question (notebook 10); effective ratio per
        target granularity and rule, per suite and size (notebook 11).
    scales : pandas.DataFrame
        The headline per suite and size: this run's, and at the committed summaries' scales.
    skipped : dict of str to str
        Phases that did not do their work, each with why and how to enable it (the step table says so instead of
        a time).
    """

    bench_mib: int
    hpc_ratio: dict[str, float]
    hpc_slowdown: dict[str, float]  # without bandwidth credit, the paper's comparison
    hpc_slowdown_credit: dict[str, float]
    hpc_table: pd.DataFrame  # run facts, ideal and effective ratios per HPC workload
    slowdown_table: pd.DataFrame  # percent per link preset, then UM (times slower)
    bpc_ratio: dict[str, float]  # BPC-32 ideal ratio per benchmark data kind
    bench_markdown: str
    files: dict[str, list[str]]  # "hpc", "slowdown", "bench": the result files
    took: dict[str, float]  # seconds per phase, "total" last
    tasks: dict[str, float]  # seconds per parallel task
    environment: dict[str, str]
    notebooks: list[dict[str, Any]] = field(default_factory=list)  # notebook, seconds, files
    dl_ratio: dict[str, float] = field(default_factory=dict)
    dl_slowdown: dict[str, float] = field(default_factory=dict)
    dl_slowdown_credit: dict[str, float] = field(default_factory=dict)
    extra_ratio: dict[str, float] = field(default_factory=dict)  # beyond the paper
    batch_gain: dict[str, float] = field(default_factory=dict)  # largest batch, Buddy / uncompressed (nb 07)
    fidelity: dict[str, pd.DataFrame] = field(default_factory=dict)  # file name -> attribution table
    # the committed summaries this run read instead of running (buddylib.studies.remake.provenance): one row each
    summaries: pd.DataFrame = field(default_factory=pd.DataFrame)
    # beyond the paper (notebook 10): ratio per LLM tensor kind (codes and peers), and the capacity question
    llm_ratios: pd.DataFrame = field(default_factory=pd.DataFrame)
    llm_capacity: pd.DataFrame = field(default_factory=pd.DataFrame)
    # beyond the paper (notebook 11): effective ratio per target granularity and rule, per suite and size
    granularity: pd.DataFrame = field(default_factory=pd.DataFrame)
    dl_ideal: dict[str, float] = field(default_factory=dict)
    # the headline per suite and size: this run's, and at the committed summaries' scales (computed from them)
    scales: pd.DataFrame = field(default_factory=pd.DataFrame)
    # phases that did not do their work, each with why and how to enable it (the JupyterLab screenshot without a
    # browser): the step table says so instead of a time
    skipped: dict[str, str] = field(default_factory=dict)

    def save(self, path: Path) -> Path:
        """Write as JSON (floats round-trip exactly).

        Parameters
        ----------
        path : Path
            The file to write (``index.json``).

        Returns
        -------
        Path
            ``path``.
        """
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name in ("hpc_table", "slowdown_table", "summaries", "llm_ratios", "llm_capacity", "granularity",
                     "scales"):
            data[name] = _frame_json(data[name])
        data["fidelity"] = {k: _frame_json(v) for k, v in self.fidelity.items()}
        path.write_text(json.dumps(data, indent=1, default=_plain))
        return path

    @classmethod
    def load(cls, path: Path) -> Results:
        """The results :meth:`save` wrote (``index.json``), so the page renders again without recomputing.

        Parameters
        ----------
        path : Path
            The saved file; one from an older run may lack the newer tables (they stay empty).

        Returns
        -------
        Results
            As saved.
        """
        data = json.loads(Path(path).read_text())
        for name in ("hpc_table", "slowdown_table"):
            data[name] = _frame(data[name])
        for name in ("summaries", "llm_ratios", "llm_capacity", "granularity", "scales"):  # absent from an older one
            if name in data:
                data[name] = _frame(data[name])
        data["fidelity"] = {k: _frame(v) for k, v in data.get("fidelity", {}).items()}
        return cls(**data)


def write(results: Results, out: Path) -> Path:
    """Save ``results`` and render the page from them into ``out``.

    Parameters
    ----------
    results : Results
        What the run computed; saved as ``out/index.json``.
    out : Path
        The reports folder; the page is ``README.md`` and ``index.html`` there.

    Returns
    -------
    Path
        The Markdown index, ``out/README.md``.
    """
    results.save(out / RESULTS_FILE)
    text = markdown(results, out)
    index = out / "README.md"
    index.write_text(text)
    (out / "index.html").write_text(to_html(text))
    return index


#: The documentation site as ``make docs`` builds it, from the report folder (``reports/`` beside ``docs/``).
SITE = "../docs/_build/html"


def markdown(r: Results, out: Path) -> str:
    """The index as Markdown.

    Parameters
    ----------
    r : Results
        What the run computed.
    out : Path
        The reports folder: figures are shown only where it holds them (their notebook ran).

    Returns
    -------
    str
        The page's Markdown.
    """
    lines = ["# buddylib reports", "",
             "Generated by `make reproduce`; every number in the 'this suite' column is computed by this run "
             f"from data it generated. The paper's column is quoted from {paper.CITATION}.", "",
             f"Where to start: the headline at each size below, then the figures. The documentation site (`make docs`) "
             f"says what each notebook asks ([notebooks]({SITE}/notebooks.html)), how the model works "
             f"([how it works]({SITE}/how-it-works.html)), and how to run it on your own data or model "
             f"([user guide]({SITE}/guide/index.html)).", ""]
    lines += _headline(r)
    lines += _results(r)
    lines += _gallery(r, out)
    lines += _fidelity(r, out)
    lines += _summaries(r)
    lines += ["", "## HPC workloads", "",
              *_figure(out, "02_hpc_ratios/hpc_ratios.png", "HPC effective and ideal ratios (notebook 02)"),
              *_table(r.hpc_table, 3), "",
              "## Slowdown (timing model)", "",
              "Without bandwidth credit (the paper's comparison). Columns: link presets "
              f"(percent slowdown on a {paper.HEADLINE['gpu']} at threshold {paper.HEADLINE['threshold']:.0%}), "
              "then Unified-Memory oversubscription by the same capacity factor (times slower).", "",
              *_figure(out, "05_slowdown_sensitivity/slowdown_sensitivity.png",
                       "slowdown and its sensitivity (notebook 05)"),
              *_table(r.slowdown_table, 2), "",
              "## Compressors on built-in data", ""]
    lines += [f"The benchmark of this run used {r.bench_mib} MiB per data kind; its speed targets are stated at "
              f"{BENCH_TARGET_MIB} MiB, which `make bench` runs, with the parallel-crossover table (a smaller size "
              "in `make reproduce` keeps the main job short; its speeds are noisier).", ""]
    lines += [f"- BPC-32 ideal ratio on {kind} data ({r.bench_mib} MiB): {ratio:.2f}x"
              for kind, ratio in r.bpc_ratio.items()]
    lines += ["", "![compressor benchmark](bench/bench.png)", "",
              r.bench_markdown.replace("# Compressor benchmark", "### Compressor benchmark")]
    lines += _step_times(r)
    lines += ["", "## Environment", "", *(f"- {k}: {v}" for k, v in r.environment.items()), ""]
    return "\n".join(lines)


def _headline(r: Results) -> list[str]:
    """Ours beside the paper's: capacity, and the slowdown both without and with bandwidth credit."""
    h = paper.HEADLINE
    config = f"{h['compressor'].upper().replace('BPC', 'BPC-')}, threshold {h['threshold']:.0%}"
    machine = f"{h['gpu']} + {h['link']}"
    lines = ["## Headline numbers", "", "| quantity | this suite | paper (quoted) |", "|---|---|---|",
             _ratio_row("effective capacity, HPC workloads", config, r.hpc_ratio,
                        f"{paper.HPC_RATIO_ISCA}x (ISCA), {paper.HPC_RATIO_ARXIV}x (arXiv)"),
             _ratio_row("effective capacity, DL training", config, r.dl_ratio, f"{paper.DL_RATIO}x"),
             _slowdown_rows(f"{machine}, HPC", r.hpc_slowdown, r.hpc_slowdown_credit),
             _slowdown_rows(f"{machine}, DL", r.dl_slowdown, r.dl_slowdown_credit)]
    if r.extra_ratio:  # beyond the paper: mixed precision, pre-trained weights
        lines.append(f"| effective capacity beyond the paper ({config}) | "
                     + ", ".join(f"{n} {v:.2f}x" for n, v in r.extra_ratio.items()) + " | not in the paper |")
    if r.batch_gain:
        gain = np.array(list(r.batch_gain.values()))
        lines.append(f"| largest mini-batch in a fixed GPU memory, Buddy / uncompressed ({gain.size} CNNs, "
                     f"notebook 07) | {gain.min():.2f}x to {gain.max():.2f}x (mean {gain.mean():.2f}x) | "
                     "larger batches (case study) |")
    lines += ["", *_scale_rows(r)]
    return [
        *lines,
        "",
        "Our HPC workloads are proxies that run the same algorithms on the same kinds of data structures as "
        "the paper's SPEC ACCEL and DOE applications, at a smaller scale; they are not those binaries. "
        "The slowdown beside the paper's is a net slowdown against an ideal GPU without bandwidth credit: "
        "every accessed entry costs its uncompressed HBM bytes, so Buddy Compression only adds time (the "
        f"paper's basis: {paper.SLOWDOWN_BASIS}). The row below it credits compressed entries with the HBM "
        "sectors they save (SPEC §4); there a negative slowdown is a speed-up.", "",
        *_granularity_rows(r), *_llm_rows(r)]


def _scale_rows(r: Results) -> list[str]:
    """The headline per suite and size: ideal and effective ratio (means), slowdown without and with bandwidth
    credit (geometric means), where each came from, beside the paper's."""
    if r.scales.empty:
        return []
    return ["### The headline at each size", "",
            f"Per suite and size (BPC-32, threshold {paper.HEADLINE['threshold']:.0%}, {paper.HEADLINE['gpu']} + "
            f"{paper.HEADLINE['link']}): mean ideal and effective ratio, geometric-mean slowdown against an ideal GPU "
            "without and with bandwidth credit. The paper sized its inputs to fill a 12-32 GB GPU; its numbers are "
            "quoted, not computed.", "", *scale_table(r.scales)]


def scale_table(scales: pd.DataFrame) -> list[str]:
    """The headline per suite and size as a Markdown table (the index's, and the documentation site's landing
    page's), beside the paper's quoted numbers.

    Parameters
    ----------
    scales : pandas.DataFrame
        One row per suite and size: ``suite`` (``"hpc"`` or ``"dl"``), ``size``, ``workloads``, ``source``,
        ``ideal``, ``effective``, ``slowdown``, ``slowdown_credit`` (NaN where not computed), optionally
        ``timed`` (the workloads whose slowdown was computed) and ``current`` (false: the code has changed since).

    Returns
    -------
    list of str
        The table's lines, one row per row of ``scales``.
    """
    theirs = {"hpc": f"{paper.HPC_RATIO_ISCA}x (ISCA; arXiv {paper.HPC_RATIO_ARXIV}x), {paper.SLOWDOWN_TEXT}",
              "dl": f"{paper.DL_RATIO}x, {paper.SLOWDOWN_TEXT}"}
    lines = ["| suite | size | where from | ideal | effective | slowdown | with credit | paper (quoted) |",
             "|---|---|---|---|---|---|---|---|"]
    for _, row in scales.iterrows():
        timed = int(row.get("timed", row["workloads"]) if pd.notna(row.get("timed", np.nan)) else row["workloads"])
        slow = (f"{100 * (row['slowdown'] - 1):+.2f}%" + (f" ({timed} of {row['workloads']})"
                                                          if timed < row["workloads"] else "")
                if pd.notna(row["slowdown"]) else "capacity only: no accesses kept")
        credit = f"{100 * (row['slowdown_credit'] - 1):+.2f}%" if pd.notna(row["slowdown_credit"]) else "—"
        stale = "" if row.get("current", True) in (True, 1) or pd.isna(row.get("current")) else " (code since changed)"
        lines.append(f"| {str(row['suite']).upper()} ({row['workloads']}) | {row['size']} | {row['source']}{stale} | "
                     f"{row['ideal']:.2f}x | {row['effective']:.2f}x | {slow} | {credit} | {theirs[row['suite']]} |")
    return lines


def _granularity_rows(r: Results) -> list[str]:
    """Beyond the paper (notebook 11): the suites' mean effective ratio per target granularity and rule, a table of
    its own."""
    t = r.granularity
    if t.empty:
        return []
    t = t.rename(index=lambda w: str(w).replace(", traffic", ", equal traffic").replace(
        ", budget", ", full budget (partly tiering)") if not str(w).startswith("allocation") else "one per allocation "
        "(the paper's)")
    return ["### Beyond the paper: a target per region (notebook 11)", "",
            "Mean effective ratio per suite and size, BPC-32, threshold 30%, the paper's targets; the frontier of "
            "capacity against slowdown per design is notebook 11's figure.", "", *_table(t, 2), ""]


def _llm_rows(r: Results) -> list[str]:
    """The LLM-era rows (notebook 10, beyond the paper): per tensor kind the per-entry codes' ideal and Buddy
    ratios and the whole-tensor peers'; then the capacity question, extrapolated to a 7B-class model."""
    rows = []
    t = r.llm_ratios
    for group, row in t.iterrows():
        codes = ", ".join(f"{c.upper().replace('BPC', 'BPC-').replace('EBO-BF16', 'EBO')} {row[f'{c} ideal']:.2f}x · "
                          f"{row[f'{c} Buddy']:.2f}x" for c in ("bpc32", "ebo-bf16") if pd.notna(row[f"{c} ideal"]))
        peers = ", ".join(f"{p} {row[p]:.2f}x" for p in ("dfloat11", "zipnn", "zstd-1") if pd.notna(row.get(p)))
        rows.append(f"| {group} | {codes} | {peers} |")
    c = r.llm_capacity
    for budget, part in (c.groupby("budget", sort=False) if len(c) else []):
        cells = []
        for g, per_gpu in part.groupby("gpu", sort=False):
            base = int(per_gpu.loc[per_gpu.compressor == "none", "sequences"].iloc[0])
            best = per_gpu.loc[per_gpu.gain.idxmax()]
            cells.append(f"{g} {base} → {int(best.sequences)}"
                         + (f" ({best.compressor}, {best.slowdown - 1:+.1%})" if best.compressor != "none" else ""))
        rows.append(f"| concurrent 4,096-token sequences beside a Llama-2-7B-shaped bf16 model, decode-step slowdown ≤ "
                    f"{budget} (extrapolated from MiniLM's ratios and slowdowns) | " + "; ".join(cells) + " | |")
    if not rows:
        return []
    return ["### Beyond the paper: LLM-era memory (notebook 10)", "",
            "Per tensor kind: the per-entry codes' ideal · Buddy ratio at threshold 30%, and the whole-tensor peers.",
            "", "| kind | per-entry codes | whole tensor |", "|---|---|---|", *rows, ""]


def _ratio_row(what: str, config: str, ratios: dict[str, float], theirs: str) -> str:
    """An effective-capacity row: arithmetic and geometric mean over the workloads, beside the paper's."""
    if not ratios:
        return f"| {what} | not computed in this run | {theirs} |"
    x = np.array(list(ratios.values()))
    return (f"| {what} ({config}, mean of {x.size}) | {x.mean():.2f}x (geometric mean {_geomean(x):.2f}x) | "
            f"{theirs} |")


def _slowdown_rows(what: str, plain: dict[str, float], credited: dict[str, float]) -> str:
    """Two rows: the slowdown without bandwidth credit beside the paper's, and with it."""
    if not plain:
        return f"| slowdown vs ideal GPU, {what} | not computed in this run | {paper.SLOWDOWN_TEXT} |"

    def stats(d: dict[str, float]) -> str:
        x = np.array(list(d.values()))
        return f"{100 * (_geomean(x) - 1):+.1f}% (range {100 * (x.min() - 1):+.1f}% to {100 * (x.max() - 1):+.1f}%)"

    return (f"| slowdown vs ideal GPU, {what} (geometric mean of {len(plain)}) | {stats(plain)} | "
            f"{paper.SLOWDOWN_TEXT} |\n"
            f"| the same, compressed entries credited with the HBM bytes they save | {stats(credited)} | "
            "not the paper's comparison |")


def _geomean(x: np.ndarray) -> float:
    from buddylib.studies.experiments import geometric_mean

    return float(geometric_mean(xr.DataArray(x, dims="workload")))


def _results(r: Results) -> list[str]:
    """Every result file and executed notebook, with the seconds each took."""
    rows = [("HPC effective and ideal ratios per workload", "hpc", "HPC analysis"),
            ("slowdown (timing model) per workload, link/latency/threshold/metadata-cache sweeps, UM", "slowdown",
             "slowdown collection"),
            ("compressor study: speed and ratio beside zstd/lz4", "bench", "compressor benchmark")]
    lines = ["## Results", "", "| result | files | took |", "|---|---|--:|"]
    lines += [f"| {what} | " + ", ".join(f"[{Path(p).name}]({p})" for p in r.files[key])
              + f" | {_seconds(r.took.get(phase, np.nan))} |" for what, key, phase in rows]
    for nb in r.notebooks:
        name = nb["notebook"]
        lines.append(f"| notebook {name}: [executed](notebooks/{name}.ipynb), [HTML](notebooks/{name}.html), "
                     f"[on the site]({SITE}/notebooks/{name}.html) | "
                     + ", ".join(f"[{f}]({name}/{f})" for f in nb["files"]) + f" | {_seconds(nb['seconds'])} |")
    return lines


def _gallery(r: Results, out: Path) -> list[str]:
    """A thumbnail of every figure of the run, linking to the figure and to what drew it (its executed
    notebook; the benchmark's report for the benchmark's figure)."""
    figures = [(f"{nb['notebook']}/{f}", f"notebooks/{nb['notebook']}.html", f"notebook {nb['notebook']}")
               for nb in r.notebooks for f in nb["files"] if f.endswith(".png")]
    figures += [(f, "bench/bench.md", "compressor benchmark") for f in r.files.get("bench", []) if f.endswith(".png")]
    figures = [fig for fig in figures if (out / fig[0]).exists()]
    if not figures:
        return []
    cells = [f'<figure><a href="{html.escape(path)}"><img src="{html.escape(path)}" alt="{html.escape(path)}" '
             f'width="320"></a><figcaption>{html.escape(Path(path).stem)}: <a href="{html.escape(path)}">full '
             f'size</a>, <a href="{html.escape(source)}">{html.escape(what)}</a></figcaption></figure>'
             for path, source, what in figures]
    return ["", "## Figures", "", "Every figure of this run; each opens full size, beside a link to the "
            "executed notebook (or report) that drew it.", "", '<div class="gallery">', *cells, "</div>", ""]


def _fidelity(r: Results, out: Path) -> list[str]:
    """Notebook 09's attribution tables: each headline number from ours to the paper's."""
    if not r.fidelity:
        return []
    lines = ["", "## Fidelity: where our numbers and the paper's part",
             "", "Each row is one factor measured from the same baseline (rows do not add up); the last row is "
             "the paper's number. From notebook 09.", ""]
    lines += _figure(out, "09_fidelity/attribution.png", "attribution (notebook 09)")
    for title, name in FIDELITY_TABLES:
        if name not in r.fidelity:
            continue
        lines += [f"**{title}**", "", "| factor | value | change | share of the gap |", "|---|---|---|---|"]
        lines += [f"| {_cell(f)} | {row['value']:.3g} | {row['change']:+.3g} | {_percent(row['share of the gap'])} |"
                  for f, row in r.fidelity[name].iterrows()]
        lines.append("")
    return lines


def _summaries(r: Results) -> list[str]:
    """Which numbers were read from committed summaries of slow studies, not computed by this run, and the
    code digest, date and machine that made each (``buddy summaries --check`` remakes and compares them)."""
    if r.summaries.empty:
        return []
    stale = int((~r.summaries["code current"].astype(bool)).sum())
    return ["", "## Numbers read from committed summaries", "",
            f"These {len(r.summaries)} results are too slow to run in every `make reproduce`; this run read them "
            "from `data/summaries/` (committed sector histograms and study results), as notebook 09 does. Every "
            "other number on this page was computed by this run. `make reproduce-paper` remakes them and "
            "`make check-paper` compares a fresh run with them (HPC bit for bit, DL within a stated tolerance). "
            + ("Each was made by this checkout's code." if not stale else
               f"{stale} were made by code that has changed since ('code current' no): remake them."), "",
            *_table(r.summaries, 0)]


def _step_times(r: Results) -> list[str]:
    slowest = sorted(r.tasks.items(), key=lambda kv: -kv[1])[:12]
    return ["", "## Step times", "", f"On {r.environment.get('cpus', '?')} cores; tasks run in parallel within a "
            "phase.", "", "| phase | took |", "|---|--:|",
            *(f"| {k} | " + (f"skipped: {r.skipped[k]}" if k in r.skipped else _seconds(v)) + " |"
              for k, v in r.took.items()), "",
            "| slowest tasks | took |", "|---|--:|", *(f"| {k} | {_seconds(v)} |" for k, v in slowest)]


def _table(df: pd.DataFrame, decimals: int) -> list[str]:
    """A Markdown table of ``df``: its index first, floats rounded to ``decimals``."""
    def cell(v: object) -> str:
        return f"{np.round(v, decimals):.{decimals}f}" if isinstance(v, float) else _cell(v)

    head = [_cell(df.index.name or ""), *map(_cell, df.columns)]
    return ["| " + " | ".join(head) + " |", "|---|" + "--:|" * len(df.columns),
            *("| " + " | ".join([_cell(i), *map(cell, row)]) + " |" for i, row in zip(df.index, df.itertuples(
                index=False), strict=True))]


def _figure(out: Path, path: str, title: str) -> list[str]:
    """A notebook's figure, if that notebook ran (the figures are the notebooks')."""
    return [f"![{title}]({path})", ""] if (out / path).exists() else []


def _seconds(x: float) -> str:
    return "–" if x != x else f"{x:.0f}\u00a0s"  # no break between number and unit


def _cell(x: object) -> str:
    """Text for a Markdown table cell: a '|' in it (e.g. 'BPC-32|ZVC') would end the cell."""
    return str(x).replace("|", "\\|")


def _percent(x: float) -> str:
    return "" if x != x else f"{x:.0%}"


STYLE = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:auto;padding:0 16px;line-height:1.45;color:#222}
img{max-width:100%;height:auto}
table{border-collapse:collapse;margin:8px 0;font-size:14px;display:block;overflow-x:auto;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 8px;vertical-align:top}
th{background:#f3f3f3}
td{overflow-wrap:break-word}
tbody tr:nth-child(even){background:#fafafa}
pre{overflow-x:auto;font-size:12px;background:#f6f6f6;padding:8px}
.anchor-link{display:none}
.gallery{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:12px}
.gallery figure{margin:0;border:1px solid #ddd;padding:6px;text-align:center;font-size:13px}
.gallery img{width:100%;height:180px;object-fit:contain}
"""


def to_html(text: str) -> str:
    """The Markdown index as a standalone HTML page that fits a laptop's screen.

    Parameters
    ----------
    text : str
        The Markdown (:func:`markdown`).

    Returns
    -------
    str
        The HTML page.
    """
    from nbconvert.filters import markdown2html

    return (f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'><title>buddylib reports</title>"
            f"<style>{STYLE}</style></head>\n<body>\n{markdown2html(text)}\n</body></html>\n")


def rerender(out: Path) -> Path:
    """Render the page again from the results a run saved in ``out`` (nothing is recomputed).

    Parameters
    ----------
    out : Path
        The reports folder, holding ``index.json``.

    Returns
    -------
    Path
        The Markdown index (:func:`write`).
    """
    return write(Results.load(out / RESULTS_FILE), out)


def broken_links(out: Path) -> list[str]:
    """Every link and image source in ``out/index.html`` that leads nowhere: a file the folder lacks, or
    an anchor the page lacks (web addresses are not followed, nor the documentation site's pages under
    :data:`SITE`, which ``make docs`` builds beside the report).

    Parameters
    ----------
    out : Path
        The reports folder; a link must lead to a file inside it.

    Returns
    -------
    list of str
        The broken targets, as the page writes them (empty: none).
    """
    from html.parser import HTMLParser
    from urllib.parse import unquote, urlsplit

    class Page(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.ids: set[str] = set()
            self.targets: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            self.ids |= {a[k] or "" for k in ("id", "name") if k in a}
            self.targets += [a[k] or "" for k in ("href", "src") if k in a and tag in ("a", "img", "link", "script")]

    page = Page()
    page.feed((out / "index.html").read_text())
    broken = []
    for target in page.targets:
        url = urlsplit(target)
        if url.scheme or url.netloc or target.startswith(f"{SITE}/"):
            continue
        if not url.path:
            ok = unquote(url.fragment) in page.ids
        else:
            path = os.path.normpath(out / unquote(url.path))  # inside the folder, as written (links may be links)
            ok = Path(path).is_file() and Path(path).is_relative_to(os.path.normpath(out))
        if not ok:
            broken.append(target)
    return broken


def _frame_json(df: pd.DataFrame) -> dict[str, Any]:
    return {"index_name": df.index.name, "columns": [str(c) for c in df.columns], "index": list(df.index),
            "data": df.to_numpy(dtype=object).tolist(), "dtypes": [str(t) for t in df.dtypes]}


def _frame(d: dict[str, Any]) -> pd.DataFrame:
    df = pd.DataFrame(d["data"], columns=d["columns"],
                      index=pd.Index(d["index"], name=d["index_name"])) if d["data"] else pd.DataFrame(
        columns=d["columns"], index=pd.Index([], name=d["index_name"]))
    return df.astype(dict(zip(d["columns"], d["dtypes"], strict=True)))


def _plain(x: object) -> object:
    """numpy scalars and paths as JSON values."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"{type(x).__name__} is not JSON serialisable")


if __name__ == "__main__":
    print(f"wrote {rerender(Path(sys.argv[1] if len(sys.argv) > 1 else 'reports'))}")
