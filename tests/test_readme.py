"""The guide's `buddy analyze` examples print exactly what the guide shows (docs/guide/own-data.md), and the README's
command runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from buddylib.cli import main

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide" / "own-data.md"
README = ROOT / "README.md"


def test_guide_analyze_example(tmp_path: Path, capsys, monkeypatch) -> None:
    text = GUIDE.read_text()
    block = re.search(r"```sh\n\.venv/bin/python -c \"(.+?)\"\n\.venv/bin/buddy analyze example\.npz\n```\n\n"
                      r"```text\n(.+?)\n```", text, re.S)
    assert block, "the guide lost its buddy analyze example"
    code, shown = block.groups()
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    assert main(["analyze", "example.npz"]) == 0
    assert capsys.readouterr().out.rstrip() == shown.rstrip()


def test_guide_summary_example(capsys) -> None:
    """`buddy analyze` of a committed summary prints the two lines the guide shows (its slowdown from the
    summary's accesses)."""
    text = GUIDE.read_text()
    block = re.search(r"```sh\n\.venv/bin/buddy analyze (data/summaries/\S+) (--region \S+) .*?\n```\n\n"
                      r"```text\n(.+?)\n```", text, re.S)
    assert block, "the guide lost its example of a committed summary"
    path, region, shown = block.groups()
    assert main(["analyze", str(ROOT / path), *region.split()]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-2:] == shown.rstrip().splitlines()


def test_readme_summary_command(capsys) -> None:
    """The README's one command prints a 1 GiB summary's effective ratio and its slowdown in both accountings."""
    block = re.search(r"```sh\n\.venv/bin/buddy analyze (data/summaries/\S+) (--region \S+)", README.read_text())
    assert block, "README lost its buddy analyze command"
    path, region = block.groups()
    assert main(["analyze", str(ROOT / path), *region.split()]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^effective ratio \d+\.\d+x", out, re.M)
    assert re.search(r"^slowdown \d+\.\d+x .* without HBM credit .*, \d+\.\d+x with it", out, re.M), out
