"""make reproduce's parallel steps: the same results on a dask cluster as one after another."""

from __future__ import annotations

import json
import os
from pathlib import Path

import xarray as xr

from buddylib import pipeline


def test_cluster_and_serial_give_identical_results(tmp_path: Path) -> None:
    tasks = pipeline.generation_tasks("quick", ["ostencil", "squeezenet"])
    assert [t.label for t in tasks] == ["run:squeezenet@quick", "run:ostencil@quick"]  # the longest first
    serial = pipeline.run_all(tasks, tmp_path / "serial", scheduler="serial")
    environ = dict(os.environ)
    parallel = pipeline.run_all(tasks, tmp_path / "cluster")  # a local cluster, one worker per core
    # the workers' single-thread settings stay theirs: numba in this process re-reads os.environ at every compile
    assert dict(os.environ) == environ
    assert set(serial) == set(parallel) == {t.label for t in tasks}
    for name in ("ostencil", "squeezenet"):
        stem = f"{name}-quick-s0"
        digests = [json.loads((tmp_path / d / f"{stem}.profile.json").read_text())["digest"]
                   for d in ("serial", "cluster")]
        assert digests[0] == digests[1]
        sweeps = [xr.open_dataset(tmp_path / d / f"{stem}.slowdown-t0.3.nc").load() for d in ("serial", "cluster")]
        xr.testing.assert_identical(sweeps[0], sweeps[1])


def test_progress_names_the_running_tasks() -> None:
    """The bar's postfix names what runs now and for how long, oldest first; a finished task leaves it."""
    import re

    assert pipeline.Task("notebook", "/x/notebooks/02_hpc_ratios.ipynb", "quick", 0).label == "notebook:02_hpc_ratios"
    with pipeline._Progress(2, "notebooks") as progress:
        progress.running(["notebook:02_hpc_ratios"])
        progress.running(["notebook:02_hpc_ratios", "notebook:09_fidelity"])  # the first keeps its start
        progress.show()
        assert re.fullmatch(r"notebook:02_hpc_ratios \d+s, notebook:09_fidelity \d+s", progress.bar.postfix)
        progress.finished("notebook:02_hpc_ratios")
        assert re.fullmatch(r"notebook:09_fidelity \d+s", progress.bar.postfix) and progress.bar.n == 1


def test_running_means_executing_not_assigned() -> None:
    """The scheduler assigns every ready task to a worker at once; only those a worker executes are running."""
    import time

    with pipeline._client(None) as client:
        workers = len(client.scheduler_info()["workers"])
        futures = [client.submit(time.sleep, 3, pure=False) for _ in range(3 * workers)]
        time.sleep(1.5)
        executing = [k for keys in client.run(pipeline._executing).values() for k in keys]
        assigned = [k for keys in client.processing().values() for k in keys]
        assert 1 <= len(executing) <= workers < len(assigned)
        client.cancel(futures)


def test_a_worker_going_away_does_not_end_the_run_and_paper_runs_give_their_memory_back() -> None:
    """The progress bar's question to the workers fails while a dead worker is being replaced (its tasks are
    recomputed elsewhere): no answer, not an error. Paper-scale runs go to a child process, which returns the
    result and its gigabytes when it exits."""
    import operator

    from distributed.comm.core import CommClosedError

    class Dying:
        def run(self, fn, on_error="raise"):
            raise CommClosedError("in <TCP (closed) Scheduler Broadcast>: Connection reset by peer")

    assert pipeline._ask(Dying(), pipeline._executing) == {}
    assert pipeline._in_child(operator.mul, 6, 7) == 42
