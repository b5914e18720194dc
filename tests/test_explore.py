"""The explorer (notebook 00): its model alone, and its widgets driven from Python, show what analysis, layout and
timing compute.

Every test reads the committed quick fixtures (no workload runs), so the numbers are the same everywhere.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from buddylib import analysis, explore, layout, timing
from buddylib.studies import fixtures
from buddylib.timing import model as tm

RUN = fixtures.FOLDER / "md-quick-s0.nc"


@pytest.fixture(scope="module")
def explorer() -> explore.Explorer:
    return explore.Explorer("md")


@pytest.fixture(scope="module")
def workset() -> tm.Workset:
    return tm.Workset.load(RUN)


def _direct(ws: tm.Workset, compressor: str, threshold: float, policy: str, snapshot: int):
    ds = analysis.analyze(ws.snapshots, [compressor], thresholds=[threshold], policy=policy, progress=False)
    return ds, analysis.allocation_table(ds, compressor, threshold, snapshot)


def _bars(ax, gid: str) -> np.ndarray:
    return np.array([p.get_width() if p.get_width() else 0.0 for p in ax.patches if p.get_gid() == gid])


def test_default_state_matches_analysis_and_timing(explorer, workset) -> None:
    n = explorer.numbers
    ds, table = _direct(workset, "bpc32", 0.3, "profile", -1)
    total = analysis.total_row(ds, "bpc32", 0.3)
    assert n["effective ratio"] == pytest.approx(total["effective"], rel=1e-12)
    assert n["ideal ratio"] == pytest.approx(total["ideal bpc32"], rel=1e-12)
    assert n["device bytes"] == pytest.approx(total["device bytes"])
    assert n["buddy bytes"] == pytest.approx(total["buddy bytes"])
    assert n["bytes"] == total["bytes"] and n["allocations"] == len(table)
    # the timing model's own answer at the last snapshot with the profile policy
    direct = timing.slowdown(workset, "V100-32GB", "NVLink2", 0.3, bandwidth_credit=False)["slowdown"]
    assert n["slowdown"] == pytest.approx(direct, rel=1e-12)
    assert f"effective ratio {total['effective']:.3f}x" in explorer.summary.value
    assert f"{100 * (direct - 1):.2f}%" in explorer.summary.value


def test_figure_shows_the_allocations_and_sectors(explorer, workset) -> None:
    ds, table = _direct(workset, "bpc32", 0.3, "profile", -1)
    ax_alloc, ax_sectors, ax_ratio, ax_slow = explorer.figure.axes
    unit = {"MiB": 1 << 20, "KiB": 1 << 10, "B": 1}[ax_alloc.get_xlabel().split("(")[1].rstrip(")")]
    shown = explore.top_allocations(table.assign(**{"metadata bytes": ds.metadata_bytes.isel(snapshot=-1).values}))
    assert np.allclose(_bars(ax_alloc, "device") * unit, shown["device bytes"])
    assert np.allclose(_bars(ax_alloc, "buddy") * unit, shown["buddy bytes"])
    counts = ds.sector_count.isel(snapshot=-1).sel(compressor="bpc32").sum("allocation").values
    assert np.allclose(_bars_height(ax_sectors, "sectors"), 100 * counts / counts.sum())
    line = next(ln for ln in ax_ratio.lines if ln.get_gid() == "effective")
    assert np.allclose(line.get_ydata(), ds.effective_ratio.sel(compressor="bpc32", threshold=0.3).values)
    assert len(_bars_height(ax_slow, "slowdown")) == len(timing.LINKS)
    assert explorer.image.format == "svg+xml" and b"<svg" in bytes(explorer.image.value)[:2000]
    assert explore.png(explorer.figure)[:8] == b"\x89PNG\r\n\x1a\n"


def _bars_height(ax, gid: str) -> np.ndarray:
    return np.array([p.get_height() for p in ax.patches if p.get_gid() == gid])


@pytest.mark.parametrize("changes", [
    {"threshold": 0.1, "policy": "oracle"},
    {"compressor": "bdi", "snapshot": 3, "policy": "global"},
    {"gpu": "H200-141GB", "link": "PCIe3-x16", "accounting": True, "threshold": 0.5},
])
def test_setting_controls_recomputes(explorer, workset, changes) -> None:
    for k, v in changes.items():
        explorer.controls[k].value = v
    c = {k: ctl.value for k, ctl in explorer.controls.items()}
    ds, table = _direct(workset, c["compressor"], c["threshold"], c["policy"], c["snapshot"])
    total = analysis.total_row(ds, c["compressor"], c["threshold"], c["snapshot"])
    n = explorer.numbers
    assert n["snapshot"] == c["snapshot"] and n["step"] == int(ds.step[c["snapshot"]])
    assert n["effective ratio"] == pytest.approx(total["effective"], rel=1e-12)
    assert n["device bytes"] == pytest.approx(total["device bytes"])
    assert explorer.view.table["target"].tolist() == table["target"].tolist()
    # timing: model.traffic + kernel_times on that snapshot with the policy's targets
    one = tm.Workset(workset.name, [workset.snapshots[c["snapshot"]]], workset.profile, workset.index_arrays,
                     c["compressor"])
    targets = {str(a): float(r) for a, r in table["target"].items()}
    tr = tm.traffic(one, targets)
    params = tm.Params()
    g = timing.gpu(c["gpu"])
    base, buddy = tm.kernel_times(tr, tm._metadata_misses(one, params), g, timing.link(c["link"]), params,
                                  tm._peak(one, g), bandwidth_credit=c["accounting"])
    assert n["slowdown"] == pytest.approx(buddy.sum() / base.sum(), rel=1e-12)


def test_layout_only_changes_do_not_recompress(explorer) -> None:
    explorer.controls["compressor"].value = "bpc32"
    hist = explorer._hist("bpc32")
    before = dict(explorer.computed)
    explorer.controls["threshold"].value = 0.2
    explorer.controls["link"].value = "NVLink4"
    explorer.controls["policy"].value = "global"
    assert explorer._hist("bpc32") is hist and explorer.computed == before  # layout and timing only
    explorer.controls["snapshot"].value = (explorer.controls["snapshot"].value + 1) % len(explorer.source.snapshots)
    assert explorer.computed == {"histograms": before["histograms"], "replays": before["replays"] + 1}
    explorer.controls["compressor"].value = "zvc"
    explorer.controls["compressor"].value = "bpc32"  # back: its histograms come from the cache
    assert explorer.computed["histograms"] == before["histograms"] + 1


def test_a_file_through_the_readers(tmp_path: Path) -> None:
    path = tmp_path / "act.npy"
    np.save(path, np.maximum(np.random.default_rng(0).standard_normal(20000).astype(np.float32), 0))
    e = explore.Explorer("md")
    e.controls["workload"].value = str(path)
    ds = analysis.analyze({"act": np.load(path)}, ["bpc32"], progress=False)
    assert e.numbers["workload"] == "act.npy"
    assert e.numbers["effective ratio"] == pytest.approx(float(ds.effective_ratio.squeeze()), rel=1e-12)
    assert np.isnan(e.numbers["slowdown"]) and "no access profile" in e.summary.value
    assert e.controls["snapshot"].max == 0
    e.controls["workload"].value = str(tmp_path / "missing.npy")  # an error is shown, the view is kept
    assert "neither a built-in workload" in e.summary.value and e.numbers["workload"] == "act.npy"


def test_a_saved_run_file_brings_its_profile(tmp_path: Path) -> None:
    for f in RUN.parent.glob("md-quick-s0.*"):
        shutil.copy(f, tmp_path / f.name)
    e = explore.Explorer(str(tmp_path / RUN.name))
    assert e.numbers["workload"] == RUN.name and not e.slowdown.reason
    assert e.controls["snapshot"].max == len(tm.Workset.load(RUN).snapshots) - 1


def test_snapshot_without_the_profiled_allocations_says_why() -> None:
    e = explore.Explorer("alexnet", snapshot=0)
    assert "does not hold" in e.slowdown.reason and np.isnan(e.numbers["slowdown"])


def test_unknown_names_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="neither a built-in workload"):
        explore.load_source("no-such-workload")
    with pytest.raises(ValueError, match="compressor 'nope'"):
        explore.Explorer("md", compressor="nope")


def test_layout_view_matches_layout_functions() -> None:
    hist = np.array([10, 0, 30, 5, 55])
    sectors = np.repeat(np.arange(5), hist).astype(np.uint8)
    from buddylib.snapshot import Allocation, Snapshot

    snap = Snapshot("t", [Allocation("x", kind="field", dtype="float32", nbytes=sectors.size * 128,
                                     sectors={"bpc32": sectors})])
    ds = analysis.analyze([snap], ["bpc32"], thresholds=[0.3], progress=False)
    view = explore.layout_view(ds, "bpc32", 0.3)
    r = float(layout.choose_target(hist[None], 0.3))  # one profiled snapshot
    assert view.table["target"].item() == r
    assert view.table["device bytes"].item() == layout.device_bytes(hist.sum(), r)
    assert view.table["buddy bytes"].item() == layout.buddy_bytes(hist.sum(), r)
    assert view.totals["overflow"] == pytest.approx(float(layout.overflow_fraction(hist, r)))
    assert np.array_equal(view.sectors, hist)


def test_screenshot_skips_cleanly_without_chromium(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(explore.lab, "_chromium", lambda: None)
    assert explore.screenshot_lab(tmp_path / "lab.png") is None
    assert not (tmp_path / "lab.png").exists()


def test_the_model_alone_recomputes_what_a_change_needs(workset) -> None:
    """No widgets: the model's settings, caches and numbers (what the view draws and the controls set)."""
    m = explore.Model("md", threshold=0.2)
    ds, _ = _direct(workset, "bpc32", 0.2, "profile", -1)
    assert m.numbers["effective ratio"] == pytest.approx(float(ds.effective_ratio.isel(snapshot=-1).item()))
    before = dict(m.computed)
    m.set(threshold=0.4, link="NVLink4", policy="global", bandwidth_credit=True)  # layout and timing only
    assert m.computed == before and m.slowdown.link == "NVLink4" and m.slowdown.bandwidth_credit
    m.set(snapshot=0)
    assert m.computed == {"histograms": before["histograms"], "replays": before["replays"] + 1}
    with pytest.raises(ValueError, match="compressor 'nope'"):
        m.set(compressor="nope")
    with pytest.raises(ValueError, match="snapshot 99"):
        m.set(snapshot=99)
    with pytest.raises(TypeError, match="colour"):
        m.set(colour="red")
    assert m.settings["snapshot"] == 0 and m.settings["threshold"] == 0.4  # a refused change changes nothing
    assert "slowdown vs ideal GPU" in m.text() and m.timings[-1]["total"] >= m.timings[-1]["layout"]


def test_the_view_draws_a_model_and_the_controls_set_it(explorer) -> None:
    fig = explore.draw(explorer.model.view, explorer.model.slowdown)
    assert len(fig.axes) == len(explorer.figure.axes) > 1
    explorer.controls["threshold"].value = 0.1
    explorer.controls["accounting"].value = True
    assert explorer.model.settings["threshold"] == 0.1 and explorer.model.settings["bandwidth_credit"] is True
    assert explorer.numbers is explorer.model.numbers and "draw" in explorer.timings[-1]


def test_where_widgets_cannot_run_a_still_of_the_controls_shows(explorer) -> None:
    """The explorer's output: the live widget for JupyterLab, a still of every control (as HTML, its value chosen)
    for an HTML export once the widget's id is stripped, and a line of the values, never the widgets' repr."""
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    plain, html = bundle["text/plain"], bundle["text/html"]
    c = explorer.controls
    assert "VBox(" not in plain and plain.startswith(f"Explorer(workload={c['workload'].value!r}, snapshot=")
    for control in c.values():
        assert f">{control.description}</label>" in html
    assert f"<option selected>{c['link'].value}</option>" in html
    assert f"value='{c['threshold'].value}'> {c['threshold'].value:.2f}" in html
    assert html.count("background:#1976d2") == 1  # the chosen accounting, marked
