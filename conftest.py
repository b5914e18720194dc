"""Test-session set-up shared by every test path (tests, doctests, README, notebooks)."""

from __future__ import annotations

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before pytest-xdist starts its workers (its own ``pytest_sessionstart`` runs last), compile or load
    numba's kernels once here, so that every worker loads them from numba's cache instead of each
    compiling them from a cold one. Only in a session that will start workers: not in a worker, and not
    in a single-process run, which compiles what it uses as it goes."""
    if session.config.pluginmanager.hasplugin("dsession"):
        from buddylib import warm

        seconds = warm.warm()
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"numba's kernels compiled or loaded in {seconds:.1f} s, before the workers start")
