"""The README's `buddy analyze` example prints exactly what the README shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from buddylib.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_analyze_example(tmp_path: Path, capsys, monkeypatch) -> None:
    text = README.read_text()
    block = re.search(r"```sh\n\.venv/bin/python -c \"(.+?)\"\n\.venv/bin/buddy analyze example\.npz\n```\n\n"
                      r"```text\n(.+?)\n```", text, re.S)
    assert block, "README lost its buddy analyze example"
    code, shown = block.groups()
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    assert main(["analyze", "example.npz"]) == 0
    assert capsys.readouterr().out.rstrip() == shown.rstrip()


def test_readme_summary_example(capsys) -> None:
    """`buddy analyze` of a committed summary prints the two lines the README shows (its slowdown from the
    summary's accesses)."""
    text = README.read_text()
    block = re.search(r"```sh\n\.venv/bin/buddy analyze (data/summaries/\S+) (--region \S+) .*?\n```\n\n"
                      r"```text\n(.+?)\n```", text, re.S)
    assert block, "README lost its example of a committed summary"
    path, region, shown = block.groups()
    assert main(["analyze", str(README.parent / path), *region.split()]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-2:] == shown.rstrip().splitlines()
