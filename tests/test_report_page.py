"""The report page of ``make reproduce``: rendered from saved results alone, every link and image leads
somewhere, and (where Chromium is installed) a real browser shows it without errors at a laptop's width."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from buddylib import paper
from buddylib.report import index_page

LAPTOP_WIDTH = 1366


def small_results() -> index_page.Results:
    """A collected-results object shaped like a run's, small enough to write by hand."""
    hpc = pd.DataFrame({"seconds": [0.3, 0.4], "footprint_MiB": [1.5, 2.25], "allocations": [2, 3],
                        "snapshots": [8, 8], "ideal bpc32": [3.3, 1.0], "effective bpc32": [1.3, 0.996],
                        "buddy access fraction bpc32": [0.067, 0.0]},
                       index=pd.Index(["ostencil", "ep"], name="workload"))
    slow = pd.DataFrame({"PCIe3-x16": [1.06, 0.39], "NVLink2": [0.86, 0.39], "UM (64 KiB pages), x": [281.7, 1.0]},
                        index=pd.Index(["ostencil", "ep"], name="workload"))
    attribution = pd.DataFrame({"value": [1.06, 1.1, 1.5], "change": [0.0, 0.045, 0.44],
                                "share of the gap": [0.0, 0.1, 1.0]},
                               index=pd.Index(["this suite, default", "best of BPC-32|ZVC", "paper"], name="factor"))
    return index_page.Results(
        bench_mib=1, hpc_ratio={"ostencil": 1.3, "ep": 0.996}, hpc_slowdown={"ostencil": 1.0086, "ep": 1.0039},
        hpc_slowdown_credit={"ostencil": 0.7, "ep": 1.0039}, hpc_table=hpc, slowdown_table=slow,
        bpc_ratio={"sparse": 1.06, "smooth": 1.0, "random": 1.0}, bench_markdown="# Compressor benchmark\n\ntext\n",
        files={"hpc": ["hpc/hpc_ratios.nc"], "slowdown": ["slowdown/slowdown.csv"],
               "bench": ["bench/bench.csv", "bench/bench.md", "bench/bench.png"]},
        took={"compressor benchmark": 1.0, "HPC analysis": 2.0, "slowdown collection": 0.5,
              "explorer in JupyterLab": 0.0, "total": 3.5},
        skipped={"explorer in JupyterLab": "no Chromium on PATH: `apt-get install chromium` (Debian) enables it"},
        tasks={"run:ostencil@quick": 0.7, "notebook 02_hpc_ratios": 15.0}, environment={"cpus": "2"},
        notebooks=[{"notebook": "02_hpc_ratios", "seconds": 15.0, "files": ["hpc_ratios.csv", "hpc_ratios.png"]},
                   {"notebook": "09_fidelity", "seconds": 30.0, "files": ["attribution.png", "dl_attribution.csv"]}],
        dl_ratio={"alexnet": 1.02, "vgg16": 1.1}, dl_slowdown={"alexnet": 1.005, "vgg16": 1.0},
        dl_slowdown_credit={"alexnet": 0.95, "vgg16": 0.9}, batch_gain={"alexnet": 1.09},
        fidelity={"dl_attribution.csv": attribution})


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reports folder holding what :func:`small_results` names, and the page written from it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = tmp_path_factory.mktemp("reports")
    r = small_results()
    names = [*(f for fs in r.files.values() for f in fs),
             *(f"{nb['notebook']}/{f}" for nb in r.notebooks for f in nb["files"]),
             *(f"notebooks/{nb['notebook']}.{ext}" for nb in r.notebooks for ext in ("ipynb", "html"))]
    for name in names:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".png"):  # a wide figure, as the slowdown one is
            fig, ax = plt.subplots(figsize=(16, 4))
            ax.plot(np.arange(10))
            fig.savefig(out / name, dpi=100)
            plt.close(fig)
        else:
            (out / name).write_text("x")
    index_page.write(r, out)
    return out


def test_page_shows_the_results(page: Path) -> None:
    text = (page / "README.md").read_text()
    html = (page / "index.html").read_text()
    assert "| effective capacity, HPC workloads (BPC-32, threshold 30%, mean of 2) | 1.15x" in text
    assert f"| {paper.HPC_RATIO_ISCA}x (ISCA), {paper.HPC_RATIO_ARXIV}x (arXiv) |" in text  # the paper's, quoted
    assert "paper (quoted)" in html and "credited with the HBM bytes they save" in html  # both accountings
    assert "<td>ostencil</td>" in html and "<pre>" not in html.split("## Compressors")[0]  # HPC table is a table
    assert html.count('class="gallery"') == 1 and html.count("<figure>") == 3  # thumbnails
    assert 'href="notebooks/09_fidelity.html"' in html and 'href="bench/bench.md"' in html  # what drew them
    assert "<td>best of BPC-32|ZVC</td>" in html  # a '|' in a cell does not break its table
    assert "share of the gap" in html and "Step times" in html and "Environment" in html
    assert f'href="{index_page.SITE}/notebooks/09_fidelity.html"' in html  # each notebook's page on the site
    assert f'href="{index_page.SITE}/guide/index.html"' in html  # and where to start
    # a step that did not do its work says why and how to enable it, never "done in 0 s"
    assert "| explorer in JupyterLab | skipped: no Chromium on PATH: `apt-get install chromium`" in text


def test_page_renders_again_from_saved_results(page: Path) -> None:
    """Nothing is recomputed: the saved results give the same page, byte for byte."""
    before = (page / "README.md").read_text(), (page / "index.html").read_text()
    again = index_page.Results.load(page / index_page.RESULTS_FILE)
    pd.testing.assert_frame_equal(again.hpc_table, small_results().hpc_table)
    index_page.rerender(page)
    assert ((page / "README.md").read_text(), (page / "index.html").read_text()) == before


def test_every_link_and_image_resolves(page: Path, tmp_path: Path) -> None:
    assert index_page.broken_links(page) == []
    html = (page / "index.html").read_text()
    assert html.count("<img") >= 4 and 'href="#' in html  # figures, thumbnails and anchors were checked
    (tmp_path / "index.html").write_text('<a href="gone.csv">x</a><img src="../x.png"><a href="#nowhere">y</a>'
                                         '<a href="https://example.org">z</a>')
    (tmp_path.parent / "x.png").write_text("outside the reports folder")
    assert index_page.broken_links(tmp_path) == ["gone.csv", "../x.png", "#nowhere"]


def chromium() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


def browse(page: Path, screenshot: Path, width: int = LAPTOP_WIDTH, timeout: float = 60) -> dict[str, Any]:
    """Load ``page`` in headless Chromium at ``width`` CSS pixels through the DevTools protocol; save a
    full-page screenshot; return the console errors, exceptions and failed loads, and the page's width."""
    import base64

    websocket = pytest.importorskip("websocket")  # websocket-client, a Jupyter dependency
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.Popen([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                 "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + timeout
            while not (port_file.exists() and port_file.read_text().strip()):
                assert time.monotonic() < deadline and proc.poll() is None, "Chromium did not start"
                time.sleep(0.1)
            port = port_file.read_text().split()[0]
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=timeout))
            url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            ws = websocket.create_connection(url, timeout=timeout, suppress_origin=True)
            events: list[dict[str, Any]] = []
            ids = itertools.count(1)

            def call(method: str, **params: Any) -> dict[str, Any]:
                ident = next(ids)
                ws.send(json.dumps({"id": ident, "method": method, "params": params}))
                while True:
                    msg = json.loads(ws.recv())
                    if msg.get("id") == ident:
                        assert "error" not in msg, msg
                        return msg["result"]
                    events.append(msg)

            for domain in ("Runtime", "Log", "Page"):
                call(f"{domain}.enable")
            call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
            call("Page.navigate", url=page.as_uri())
            while not any(e.get("method") == "Page.loadEventFired" for e in events):
                assert time.monotonic() < deadline, "the page did not finish loading"
                events.append(json.loads(ws.recv()))
            size = call("Page.getLayoutMetrics")["cssContentSize"]
            shot = call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": width, "height": size["height"], "scale": 1})
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            scroll = call("Runtime.evaluate", expression="document.documentElement.scrollWidth")["result"]["value"]
            ws.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    errors = [e["params"] for e in events if e.get("method") == "Runtime.exceptionThrown"
              or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    return {"errors": errors, "scroll_width": scroll, "height": size["height"]}


@pytest.mark.skipif(chromium() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_page_in_a_browser(page: Path) -> None:
    """No console errors, no image or file that fails to load, nothing wider than a laptop's screen."""
    seen = browse(page / "index.html", page / "index.png")
    assert seen["errors"] == []
    assert seen["scroll_width"] <= LAPTOP_WIDTH  # wide tables scroll inside themselves, figures shrink
    assert (page / "index.png").stat().st_size > 10_000
