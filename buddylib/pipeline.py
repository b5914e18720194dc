"""The work of ``make reproduce`` as independent tasks, run on a dask cluster.

Generating workload runs, sweeping the timing model over each, measuring memory against batch size,
the fidelity studies, and executing the notebooks are independent of one another (the notebooks
only read what the generation tasks cached in ``data/``), so they run as tasks of a dask cluster:
by default a ``LocalCluster`` of one single-threaded worker process per core, or any running
cluster given by its scheduler address. Every task is deterministic and writes its own cache
files, so the results are those of a serial run (``scheduler="serial"`` runs the same tasks in
this process, one after another).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm


@dataclass(frozen=True)
class Task:
    """One unit of work: ``kind`` (run, paper, batch, maturity, caffe, notebook...) on ``name``."""

    kind: str
    name: str
    scale: str | float
    cost: float  # rough seconds, to start the longest first

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}" + (f"@{self.scale}" if self.kind != "notebook" else "")


def generation_tasks(scale: str | float, names: Sequence[str], paper_names: Sequence[str] = (),
                     batch_names: Sequence[str] = (), study_names: Sequence[str] = (),
                     hpc_scales: Sequence[str | float] = ()) -> list[Task]:
    """What the notebooks and the index will read, one task each: a run and its timing-model sweep per
    workload, paper-scale runs, memory-vs-batch measurements, the training-maturity and framework studies,
    HPC runs at other problem sizes."""
    from buddylib import workloads

    tasks = [Task("run", n, scale, 60.0 if workloads.get(n).suite != "hpc" else 30.0) for n in names]
    tasks += [Task("paper", n, "paper", 120.0) for n in paper_names]
    tasks += [Task("batch", n, scale, 60.0) for n in batch_names]
    tasks += [Task("maturity", n, scale, 150.0) for n in study_names]
    tasks += [Task("caffe", n, scale, 60.0) for n in study_names]
    tasks += [Task("run", n, s, 10.0) for s in hpc_scales for n in workloads.names("hpc")]
    return sorted(tasks, key=lambda t: -t.cost)


def execute(task: Task, data: str, seed: int = 0, notebook_args: dict[str, Any] | None = None) -> tuple[str, float]:
    """Do one task in this process; return its label and the seconds it took."""
    from buddylib import experiments, fidelity, workloads

    t0 = time.perf_counter()
    if task.kind == "run":
        workloads.cached_run(task.name, task.scale, seed, data)
        experiments.slowdowns([task.name], task.scale, seed, data, progress=False)
    elif task.kind == "paper":
        workloads.cached_run(task.name, "paper", seed, data)
    elif task.kind == "batch":
        batches = experiments.BATCHES.get(str(task.scale), experiments.BATCHES["default"])
        experiments.memory_vs_batch([task.name], batches, task.scale, seed, data, progress=False)
    elif task.kind == "maturity":
        fidelity.maturity([task.name], task.scale, seed=seed, data=data, progress=False)
    elif task.kind == "caffe":
        fidelity.framework_accounting([task.name], task.scale, seed, data, progress=False)
    elif task.kind == "notebook":
        from buddylib import reproduce

        reproduce.execute_notebook(Path(task.name), **(notebook_args or {}))
    else:
        raise ValueError(f"unknown task kind {task.kind!r}")
    return task.label, time.perf_counter() - t0


def run_all(tasks: Sequence[Task], data: str | Path, scheduler: str | None = None, seed: int = 0,
            desc: str = "tasks", notebook_args: dict[str, Any] | None = None) -> dict[str, float]:
    """Every task, on ``scheduler`` (None: a local cluster of one worker per core; "serial": here, in
    order; else a scheduler address); a progress bar counts them as they finish. Returns seconds per task."""
    data = str(Path(data).resolve())
    if not tasks:
        return {}
    bar = tqdm(total=len(tasks), desc=desc, unit="task", dynamic_ncols=True)
    times: dict[str, float] = {}
    try:
        if scheduler == "serial":
            for t in tasks:
                bar.set_postfix_str(t.label)
                label, seconds = execute(t, data, seed, notebook_args)
                times[label] = seconds
                bar.update()
            return times
        from distributed import as_completed

        with _client(scheduler) as client:
            futures = {client.submit(execute, t, data, seed, notebook_args, pure=False, key=f"{t.label}-{id(t)}"): t
                       for t in tasks}
            for fut in as_completed(futures):
                label, seconds = fut.result()  # a failed task raises here, naming its error
                times[label] = seconds
                bar.set_postfix_str(label)
                bar.update()
        return times
    finally:
        bar.close()


@contextlib.contextmanager
def _client(scheduler: str | None) -> Iterator[Any]:
    """A dask client: to ``scheduler`` if given, else to a local cluster of single-threaded worker
    processes (one per core; numba and the math libraries limited to one thread each, so workers do not
    oversubscribe the cores)."""
    import dask
    from distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler, timeout="10s") as client:
            yield client
        return
    single = {k: "1" for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": single, "distributed.worker.daemon": False}), \
            LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, processes=True, memory_limit=0,
                         dashboard_address=None) as cluster, Client(cluster) as client:
        yield client
