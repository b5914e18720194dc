"""The order in which pytest-xdist hands out the units of work (``--dist loadscope``: a file, or a test class)."""

from __future__ import annotations

import pytest

#: Units that run for tens of seconds each, about the longest first. pytest-xdist hands units out in collection
#: order (``--no-loadscope-reorder``), so these start first and the short ones fill the gaps: both workers stay
#: busy to the end instead of one of them starting a long unit when the other has finished. Only the order
#: changes, never what runs; a name no longer here is ignored.
LONG = (
    # first: it computes the timing-model sweeps of every committed run, cached beside them, which notebooks
    # 05, 06 and 09 read at the end instead of computing them again
    "tests/test_timing.py",
    "tests/test_workloads.py::TestDLExtra",
    "tests/test_workloads.py::TestDL",
    "tests/workloads/dl/test_dl.py",
    "tests/test_pipeline.py",  # with the small reproduce run on its cluster
    "tests/test_workloads.py::TestHPC",
    "tests/test_summaries.py",
    "tests/workloads/dl/test_caffe.py",
    "tests/workloads/dl/test_minilm.py",
    "tests/workloads/dl/test_efficientnet.py",
    "tests/test_cli.py",
    "notebooks/",  # a folder: each notebook a unit, up to half a minute
)


def _rank(item: pytest.Item) -> int:
    return next((i for i, unit in enumerate(LONG)
                 if item.nodeid.startswith(unit if unit.endswith("/") else f"{unit}::")), len(LONG))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long units first, the rest in collection order (a stable sort: a unit's items, a notebook's cells,
    keep their order)."""
    items.sort(key=_rank)
