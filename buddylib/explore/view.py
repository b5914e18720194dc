"""The explorer's view (notebook 00): the figure of a :class:`~buddylib.explore.model.View` and its slowdown, and
the ipywidgets controls that drive a :class:`~buddylib.explore.model.Model`; ``buddy analyze --plot`` draws the
same figure."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from buddylib import layout, regions
from buddylib.explore.model import REGIONS, Model, SlowdownView, View, builtin_names
from buddylib.timing import GPUS, LINKS
from buddylib.timing import model as tm

#: Allocations drawn one by one in the per-allocation panel; the rest are summed into one bar.
TOP_ALLOCATIONS = 20
COLORS = {"device": "tab:blue", "metadata": "black", "buddy": "tab:orange"}
#: What the bandwidth-accounting control offers: (label, bandwidth_credit).
ACCOUNTING = (("no credit (paper's basis)", False), ("with bandwidth credit", True))

# ---------------------------------------------------------------------------------------
# the figure
# ---------------------------------------------------------------------------------------


def draw(view: View, slowdown: SlowdownView | None = None, fig: Figure | None = None) -> Figure:
    """Per-allocation device/metadata/buddy bytes with targets, the sectors-per-entry distribution, the
    effective ratio over snapshots, and (given ``slowdown``) the slowdown per link. Redraws ``fig`` if given."""
    fig = fig if fig is not None else Figure(figsize=(13, 7.5 if slowdown is not None else 6))
    fig.clear()
    rows = 3 if slowdown is not None else 2
    # fixed margins, not a layout engine: the engine's solver took most of an update's time
    grid = fig.add_gridspec(rows, 2, width_ratios=[1.35, 1], left=0.13, right=0.985, bottom=0.08, top=0.9,
                            wspace=0.18, hspace=0.6)
    _draw_allocations(fig.add_subplot(grid[:, 0]), view)
    _draw_sectors(fig.add_subplot(grid[0, 1]), view)
    _draw_ratios(fig.add_subplot(grid[1, 1]), view)
    if slowdown is not None:
        _draw_slowdown(fig.add_subplot(grid[2, 1]), slowdown)
    if view.title:
        fig.suptitle(view.title)
    return fig


def _unit(nbytes: float) -> tuple[str, float]:
    for name, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return name, float(size)
    return "B", 1.0


def top_allocations(table: pd.DataFrame, n: int = TOP_ALLOCATIONS) -> pd.DataFrame:
    """The ``n`` largest allocations, largest first, and the rest summed into one row (target NaN)."""
    t = table.sort_values("bytes", ascending=False, kind="stable")
    if len(t) <= n:
        return t
    rest = t.iloc[n - 1:]
    other = rest[["bytes", "device bytes", "metadata bytes", "buddy bytes"]].sum()
    other["kind"], other["target"] = "", np.nan
    other["overflow %"] = float((rest["overflow %"] * rest["bytes"]).sum() / rest["bytes"].sum())
    return pd.concat([t.iloc[:n - 1], other.to_frame(f"({len(rest)} others)").T.astype(t.dtypes)])


def _draw_allocations(ax: Any, view: View) -> None:
    t = top_allocations(view.table)
    unit, size = _unit(float(t["bytes"].max()))
    labels = [n if len(n) <= 30 else n[:14] + "…" + n[-15:] for n in map(str, t.index)]
    y = np.arange(len(t))
    left = np.zeros(len(t))
    for col, name in (("device bytes", "device"), ("metadata bytes", "metadata"), ("buddy bytes", "buddy")):
        width = t[col].to_numpy(float) / size
        ax.barh(y, width, left=left, color=COLORS[name], label=f"{name} ({'reserved' if name == 'buddy' else 'held'})",
                hatch="//" if name == "buddy" else None, alpha=0.5 if name == "buddy" else 1.0, gid=name)
        left += width
    for yi, (x, r, o) in enumerate(zip(left, t["target"], t["overflow %"], strict=True)):
        text = ("" if r != r else f"{r:.3g}x, ") + f"{o:.0f}% overflow"
        ax.text(x, yi, " " + text, va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, left.max() * 1.3 if left.size and left.max() > 0 else 1)
    ax.set(xlabel=f"memory ({unit})", title="per allocation: device, metadata and buddy bytes; chosen target")
    ax.legend(loc="lower right", fontsize=8)


def _draw_sectors(ax: Any, view: View) -> None:
    share = 100 * view.sectors / max(view.sectors.sum(), 1)
    ax.bar(layout.SECTOR_VALUES, share, color="tab:green", gid="sectors")
    ax.set_xticks(layout.SECTOR_VALUES)
    ax.set(xlabel="compressed size (32-B sectors per 128-B entry)", ylabel="entries (%)",
           title=f"sectors per entry: ideal ratio {view.totals['ideal ratio']:.2f}x")


def _draw_ratios(ax: Any, view: View) -> None:
    k = view.snapshot
    title = f"effective ratio {view.totals['effective ratio']:.2f}x"
    if view.steps.size == 1:  # one snapshot (a file of arrays): the two ratios side by side
        values = [view.effective[0], view.ideal[0]]
        ax.bar([0, 1], values, color=["tab:blue", "tab:gray"], gid="effective")
        for x, v in enumerate(values):
            ax.text(x, v, f"{v:.3f}x", ha="center", va="bottom", fontsize=9)
        ax.set_xticks([0, 1], ["effective ratio (Buddy)", "ideal ratio (no placement)"])
        ax.set(ylabel="compression ratio (x)", title=title)
        ax.set_ylim(0, max(values) * 1.2 if np.isfinite(max(values)) else 1)
        return
    ax.plot(view.steps, view.effective, marker="o", color="tab:blue", label="effective ratio (Buddy)", gid="effective")
    ax.plot(view.steps, view.ideal, marker=".", ls="--", color="tab:gray", label="ideal ratio (no placement)")
    ax.plot([view.steps[k]], [view.effective[k]], marker="o", ms=11, mfc="none", color="tab:red", ls="none",
            label="shown snapshot")
    ax.set(xlabel="step", ylabel="compression ratio (x)", title=f"{title} at step {view.steps[k]}")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)


def _draw_slowdown(ax: Any, sv: SlowdownView) -> None:
    if sv.reason:
        ax.text(0.5, 0.5, f"no slowdown: {sv.reason}", ha="center", va="center", wrap=True, fontsize=9,
                transform=ax.transAxes)
        ax.set(xticks=[], yticks=[], title="slowdown vs ideal GPU")
        return
    names = sorted(sv.by_link, key=lambda n: LINKS[n].bandwidth)
    pct = [100 * (sv.by_link[n] - 1) for n in names]
    ax.bar(range(len(names)), pct, color=["tab:red" if n == sv.link else "tab:gray" for n in names], gid="slowdown")
    ax.set_xticks(range(len(names)), names, fontsize=7)
    ax.axhline(0, color="k", lw=0.8)
    credit = "with" if sv.bandwidth_credit else "no"
    ax.set(ylabel="slowdown vs ideal GPU (%)",
           title=f"{sv.gpu}, {credit} bandwidth credit: {100 * (sv.slowdown - 1):.2f}% on {sv.link}")


def png(fig: Figure, dpi: int = 80) -> bytes:
    """The figure as PNG bytes (what notebook 00 shows statically)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def svg(fig: Figure) -> bytes:
    """The figure as SVG with text left as text: what the explorer's image widget shows, written in about
    60% of a PNG's time (text rendering dominates an update)."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


# ---------------------------------------------------------------------------------------
# the explorer: widgets driving a model, and its figure
# ---------------------------------------------------------------------------------------


class Explorer:
    """ipywidgets controls (``controls``: workload, snapshot, compressor, threshold, policy, gpu, link, region
    (target granularity), rule, accounting) that set a :class:`~buddylib.explore.model.Model` (``model``), an
    image of :func:`draw`'s figure and an HTML line of its numbers. Display it with ``explorer.ui``. ``numbers``,
    ``timings`` (with the drawing's seconds), ``computed``, ``source``, ``view`` and ``slowdown`` are the model's."""

    def __init__(self, workload: str = "md", scale: str | float = "quick", seed: int = 0,
                 data_dir: str | Path | None = None, snapshot: int = -1, compressor: str = "bpc32",
                 threshold: float = layout.DEFAULT_THRESHOLD, policy: str = "profile", gpu: str = "V100-32GB",
                 link: str = "NVLink2", bandwidth_credit: bool = False, params: tm.Params | None = None,
                 region: str = "allocation", rule: str = "budget"):
        import ipywidgets as w

        self.model = Model(workload, scale, seed, data_dir, params, snapshot=snapshot, compressor=compressor,
                           threshold=threshold, policy=policy, gpu=gpu, link=link,
                           bandwidth_credit=bool(bandwidth_credit), region=region, rule=rule)
        s, n = self.model.settings, len(self.model.source.snapshots)
        cont = {"continuous_update": False, "style": {"description_width": "110px"}}
        self.controls = {
            "workload": w.Combobox(value=workload, options=builtin_names(scale, seed, data_dir), ensure_option=False,
                                   description="workload", placeholder="built-in name, or a file path", **cont),
            "snapshot": w.IntSlider(value=s["snapshot"], min=0, max=n - 1, description="snapshot", **cont),
            "compressor": w.Dropdown(options=self.model.source.compressors, value=s["compressor"],
                                     description="compressor", style=cont["style"]),
            "threshold": w.FloatSlider(value=s["threshold"], min=0, max=0.5, step=0.05, description="buddy threshold",
                                       readout_format=".2f", **cont),
            "policy": w.Dropdown(options=layout.POLICIES, value=s["policy"], description="policy",
                                 style=cont["style"]),
            "region": w.Dropdown(options=REGIONS, value=s["region"], description="target per",
                                 style=cont["style"]),
            "rule": w.Dropdown(options=regions.RULES, value=s["rule"], description="region rule",
                               style=cont["style"]),
            "gpu": w.Dropdown(options=list(GPUS), value=s["gpu"], description="GPU", style=cont["style"]),
            "link": w.Dropdown(options=list(LINKS), value=s["link"], description="link", style=cont["style"]),
            "accounting": w.ToggleButtons(options=ACCOUNTING, value=s["bandwidth_credit"],
                                          description="bandwidth",
                                          style={"button_width": "200px", "description_width": "110px"}),
        }
        self.summary = w.HTML()
        self.image = w.Image(format="svg+xml", layout=w.Layout(width="100%", max_width="1040px"))
        c = self.controls
        self.ui = w.VBox([w.HBox([w.VBox([c["workload"], c["snapshot"], c["compressor"], c["threshold"]]),
                                  w.VBox([c["policy"], c["gpu"], c["link"]]),
                                  w.VBox([c["region"], c["rule"]])]),
                          c["accounting"], self.summary, self.image])
        self.figure = Figure(figsize=(13, 7.5))
        self._quiet = False
        for name, ctl in c.items():
            ctl.observe(self._on_workload if name == "workload" else self._on_change, names="value")
        self._redraw()

    # the model's state, read through the explorer
    source = property(lambda self: self.model.source)
    numbers = property(lambda self: self.model.numbers)
    timings = property(lambda self: self.model.timings)
    computed = property(lambda self: self.model.computed)
    view = property(lambda self: self.model.view)
    slowdown = property(lambda self: self.model.slowdown)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The live controls where a front end runs widgets (JupyterLab), else a still of them (``text/html``:
        what an HTML export, the report and the documentation show once the widget's model id is stripped), and
        a line of their values as ``text/plain`` (what nbval compares) instead of the widgets' repr."""
        bundle = dict(self.ui._repr_mimebundle_(include=include, exclude=exclude) or {})
        values = ", ".join(f"{k}={_value(c)!r}" for k, c in self.controls.items())
        bundle["text/plain"] = f"Explorer({values})"
        bundle["text/html"] = still(self.controls, [("workload", "snapshot", "compressor", "threshold"),
                                                    ("policy", "gpu", "link"), ("region", "rule")], "accounting")
        return bundle

    def _hist(self, compressor: str) -> Any:
        return self.model._hist(compressor)

    def text(self) -> str:
        """The numbers shown, as plain text (what notebook 00 prints for nbval)."""
        return self.model.text()

    # -- callbacks ----------------------------------------------------------------------

    def _on_change(self, change: dict) -> None:
        if self._quiet:
            return
        name = "bandwidth_credit" if change["owner"] is self.controls["accounting"] else \
            next(k for k, c in self.controls.items() if c is change["owner"])
        self.model.set(**{name: change["new"]})
        self._redraw()

    def _on_workload(self, change: dict) -> None:
        if self._quiet:
            return
        try:
            self.load(change["new"])
        except (ValueError, TypeError, OSError) as exc:
            self.summary.value = f"<b style='color:#b00'>{_escape(' '.join(str(exc).split()))}</b>"

    def load(self, workload: str) -> None:
        """Switch to another workload or file: the model loads it, the controls follow, the figure is redrawn."""
        self.model.load(workload)
        source, s, c = self.model.source, self.model.settings, self.controls
        self._quiet = True
        try:
            c["snapshot"].max = len(source.snapshots) - 1
            c["snapshot"].value = s["snapshot"]
            c["compressor"].options = source.compressors
            c["compressor"].value = s["compressor"]
        finally:
            self._quiet = False
        self._redraw()

    def update(self) -> None:
        """Recompute the model for the controls' values and redraw."""
        v = {("bandwidth_credit" if k == "accounting" else k): c.value for k, c in self.controls.items()}
        v.pop("workload")
        self.model.set(**v)
        self._redraw()

    def _redraw(self) -> None:
        t0 = time.perf_counter()
        draw(self.model.view, self.model.slowdown, self.figure)
        self.image.value = svg(self.figure)
        seconds = time.perf_counter() - t0
        last = self.model.timings[-1]
        last["draw"] = seconds
        last["total"] += seconds
        self.summary.value = _escape(self.text()).replace("\n", "<br>") + \
            f"<br><small>updated in {last['total']:.2f} s</small>"


def _value(control: Any) -> Any:
    """A control's value as it shows it: a selection's label (a toggle's, not the value behind it), else its value."""
    return control.label if hasattr(control, "label") else control.value


def _still_control(control: Any) -> str:
    """One control as disabled HTML: its description, then its value as the widget would show it."""
    label = (f"<label style='display:inline-block;width:110px;text-align:right;padding-right:8px'>"
             f"{_escape(control.description)}</label>")
    value = _value(control)
    if hasattr(control, "readout"):  # a slider
        text = f"{value:{control.readout_format}}" if hasattr(control, "readout_format") else str(value)
        field = (f"<input type='range' disabled min='{control.min}' max='{control.max}' step='{control.step}' "
                 f"value='{value}'> {_escape(text)}")
    else:
        field = f"<select disabled><option selected>{_escape(str(value))}</option></select>"
    return f"<div style='margin:3px 0'>{label}{field}</div>"


def still(controls: dict[str, Any], columns: list[tuple[str, ...]], row: str) -> str:
    """A still of the explorer's controls as static HTML: ``columns`` of controls side by side, then ``row``'s
    buttons, the chosen one marked. What a renderer without a widget manager shows in place of the widgets."""
    cols = "".join("<div style='margin-right:16px'>" + "".join(_still_control(controls[k]) for k in col) + "</div>"
                   for col in columns)
    toggle = controls[row]
    chosen = "background:#1976d2;color:white"
    buttons = "".join(f"<button disabled style='width:200px;margin-right:2px;{chosen if i == toggle.index else ''}'>"
                      f"{_escape(label)}</button>" for i, label in enumerate(toggle._options_labels))
    return (f"<div class='buddy-explorer-still' style='font-family:sans-serif;font-size:13px'>"
            f"<div style='display:flex'>{cols}</div>"
            f"<div><label style='display:inline-block;width:110px;text-align:right;padding-right:8px'>"
            f"{_escape(toggle.description)}</label>{buttons}</div>"
            f"<div><small>(a still of the explorer's controls: run the notebook in JupyterLab to use them)"
            f"</small></div></div>")


def _escape(text: str) -> str:
    import html

    return html.escape(text)
