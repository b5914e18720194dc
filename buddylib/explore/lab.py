"""A picture of the explorer (notebook 00) as a person sees it: JupyterLab in headless Chromium, the notebook run,
saved as a PNG (``make reproduce`` puts one in its report)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

# ---------------------------------------------------------------------------------------
# a picture of the explorer in JupyterLab
# ---------------------------------------------------------------------------------------


def _chromium() -> str | None:
    import shutil

    return next((p for n in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
                 if (p := shutil.which(n))), None)


def screenshot_lab(out_png: str | Path, notebook: str | Path | None = None, execute: bool = True,
                   timeout: float = 300.0) -> Path | None:
    """Open ``notebook`` (default notebooks/00_explore.ipynb) in JupyterLab in headless Chromium and save a PNG.

    With ``execute`` its cells run in that JupyterLab (Run All, through the DevTools protocol) and the picture
    waits for the live widgets and their figure; without, it shows the committed outputs. Returns the PNG's
    path, or None with a message on stderr when no Chromium is installed (``apt-get install chromium``).
    """
    import sys
    import tempfile

    chrome = _chromium()
    if chrome is None:
        print("screenshot_lab: skipped, no chromium on PATH (apt-get install -y chromium)", file=sys.stderr)
        return None
    out_png = Path(out_png).absolute()
    if not out_png.parent.is_dir():
        raise ValueError(f"screenshot_lab: folder {out_png.parent} does not exist")
    notebook = Path(notebook) if notebook else Path(__file__).resolve().parents[2] / "notebooks" / "00_explore.ipynb"
    with tempfile.TemporaryDirectory(prefix="buddy-lab-") as tmp:
        copy = Path(tmp) / notebook.name
        _prepare_notebook(notebook, copy, clear=execute)
        with _lab_server(Path(tmp), timeout) as (base, token):
            _chromium_screenshot(chrome, f"{base}/lab/tree/{copy.name}?token={token}", out_png, timeout, Path(tmp),
                                 run_all=execute)
    if not out_png.is_file():
        raise RuntimeError(f"screenshot_lab: chromium wrote no {out_png}")
    return out_png


def _prepare_notebook(src: Path, dst: Path, clear: bool) -> None:
    """Copy the notebook; with ``clear`` without outputs or widget state, so what the picture shows is fresh."""
    import nbformat

    nb = nbformat.read(src, as_version=4)
    if clear:
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
    nbformat.write(nb, dst)


class _lab_server:
    """``jupyter lab --no-browser`` on a free local port with a random token, stopped on exit."""

    def __init__(self, root: Path, timeout: float):
        self.root, self.timeout = root, timeout

    def __enter__(self) -> tuple[str, str]:
        import secrets
        import socket
        import subprocess
        import sys

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.token = secrets.token_hex(16)
        news = self.root / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        news.parent.mkdir(parents=True)
        news.write_text('{"fetchNews": "false"}')  # no "get notified about news?" toast over the picture
        self.log = open(self.root / "lab.log", "wb")  # closed in __exit__
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
             f"--ServerApp.token={self.token}", f"--ServerApp.root_dir={self.root}",
             "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             "--LabApp.expose_app_in_browser=True", f"--LabApp.user_settings_dir={self.root / 'settings'}",
             f"--LabApp.workspaces_dir={self.root / 'workspaces'}",
             *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.root)
        base = f"http://127.0.0.1:{port}"
        self._wait(f"{base}/api/status?token={self.token}")
        return base, self.token

    def _wait(self, url: str) -> None:
        import urllib.request

        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.proc.returncode}): "
                                   + (self.root / "lab.log").read_text(errors="replace")[-2000:])
            try:
                with urllib.request.urlopen(url, timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"jupyter lab did not answer within {self.timeout:g} s")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _chromium_screenshot(chrome: str, url: str, out_png: Path, timeout: float, profile: Path,
                         run_all: bool = True) -> None:
    """Headless Chromium driven over its DevTools protocol: open ``url``, wait for the notebook, run all
    cells (JupyterLab exposes its app with ``expose_app_in_browser``), wait for the widgets, save a PNG."""
    import base64
    import subprocess
    import urllib.request

    import websocket  # websocket-client, a jupyter_server dependency

    data_dir = profile / "chromium"
    browser = subprocess.Popen([chrome, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                "--hide-scrollbars", "--window-size=1400,1500", "--remote-debugging-port=0",
                                f"--user-data-dir={data_dir}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port = _until(lambda: (data_dir / "DevToolsActivePort").read_text().split()[0], timeout, "chromium's port")
        pages = _until(lambda: [t for t in json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
                                if t["type"] == "page"], timeout, "a chromium page")
        ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True)
        cdp = _Devtools(ws)
        cdp.call("Emulation.setFocusEmulationEnabled", enabled=True)
        cdp.call("Page.navigate", url=url)
        ready = "!!(window.jupyterapp && document.querySelector('.jp-Notebook .jp-Cell'))"
        _until(lambda: cdp.evaluate(ready) or None, timeout, "JupyterLab to open the notebook")
        if run_all:
            _until(lambda: cdp.evaluate(_KERNEL_IDLE) or None, timeout, "the notebook's kernel")
            cdp.call("Runtime.evaluate", expression=_RUN_ALL, awaitPromise=True)
            image = "(document.querySelector('img.widget-image') || {}).naturalWidth > 0"
            _until(lambda: cdp.evaluate(image) or None, timeout, "the explorer's widgets")
            _until(lambda: cdp.evaluate(_KERNEL_IDLE) or None, timeout, "the cells to finish")
        cdp.evaluate("(document.querySelector('.jupyter-widgets') || document.body).scrollIntoView({block: 'start'})")
        time.sleep(1)
        shot = cdp.call("Page.captureScreenshot", format="png")
        out_png.write_bytes(base64.b64decode(shot["data"]))
        ws.close()
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait()


#: JavaScript: the notebook panel (headless Chromium has no focus, so ``shell.currentWidget`` may be empty)
_PANEL = "Array.from(window.jupyterapp.shell.widgets('main')).find(w => w.sessionContext)"
#: JavaScript: is the notebook's kernel started and idle?
_KERNEL_IDLE = (f"(() => {{ const w = {_PANEL}; const s = w && w.sessionContext; "
                "const k = s && s.session && s.session.kernel; return !!k && k.status === 'idle'; })()")
#: JavaScript: make the notebook the current widget, then Run All
_RUN_ALL = (f"(() => {{ const w = {_PANEL}; window.jupyterapp.shell.activateById(w.id); "
            "return window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => true); })()")


class _Devtools:
    """The few DevTools-protocol calls the screenshot needs, over one websocket."""

    def __init__(self, ws: Any):
        self.ws, self.next_id = ws, 0

    def call(self, method: str, **params: Any) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"chromium {method}: {msg['error']}")
                return msg.get("result", {})

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


def _until(probe: Any, timeout: float, what: str) -> Any:
    """``probe()``'s first truthy value, polled until ``timeout`` seconds; errors while waiting count as no."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = probe()
        except (OSError, ValueError, IndexError, KeyError):
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(f"screenshot_lab: waited {timeout:g} s for {what}")
