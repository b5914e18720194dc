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
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm


@dataclass(frozen=True)
class Task:
    """One unit of work: ``kind`` (run, paper, batch, maturity, caffe, notebook...) on ``name``.

    Parameters
    ----------
    kind : str
        What to do (:func:`execute` says each): ``"run"``, ``"paper"``, ``"batch"``, ``"maturity"``, ``"caffe"``,
        ``"adam"``, ``"llm"`` or ``"notebook"``.
    name : str
        The workload, or the notebook's path.
    scale : str or float
        A named scale or a footprint in MiB.
    cost : float
        Rough seconds, to start the longest first.

    Examples
    --------
    >>> Task("run", "cg", "quick", 30.0).label
    'run:cg@quick'
    """

    kind: str
    name: str
    scale: str | float
    cost: float  # rough seconds, to start the longest first

    @property
    def label(self) -> str:
        """How progress and errors name the task."""
        if self.kind == "notebook":
            return f"notebook:{Path(self.name).stem}"
        return f"{self.kind}:{self.name}@{self.scale}"


def generation_tasks(scale: str | float, names: Sequence[str], paper_names: Sequence[str] = (),
                     batch_names: Sequence[str] = (), study_names: Sequence[str] = (),
                     hpc_scales: Sequence[str | float] = (), optimizer_names: Sequence[str] = (),
                     maturity_names: Sequence[str] | None = None,
                     hpc_committed: Sequence[tuple[str, str]] = (), llm: bool = False) -> list[Task]:
    """What the notebooks and the index will read, one task each: a run and its timing-model sweep per
    workload, paper-scale runs, memory-vs-batch measurements, the training-maturity (of ``maturity_names``,
    default ``study_names``: a committed one is read, not run), framework and optimizer studies, HPC runs at
    other problem sizes (``hpc_scales``, but none of ``hpc_committed``: (name, scale) pairs whose committed
    summary is read instead), and with ``llm`` notebook 10's study (:func:`buddylib.studies.llm.study`).

    Parameters
    ----------
    scale : str or float
        The scale of the runs and studies: a named scale or a footprint in MiB.
    names : sequence of str
        The workloads to run, each with its timing-model sweep.
    paper_names, batch_names, study_names, optimizer_names : sequence of str
        Paper-scale runs; memory against batch size; the training-maturity and framework studies; the optimizer
        study.
    hpc_scales : sequence of str or float
        Other sizes to run every HPC workload at.
    maturity_names : sequence of str, optional
        The maturity study's networks, if not ``study_names``.
    hpc_committed : sequence of (str, str)
        ``(name, scale name)`` pairs of ``hpc_scales`` whose committed summary is read instead.
    llm : bool
        Whether to add notebook 10's study.

    Returns
    -------
    list of Task
        The longest first (by ``cost``).
    """
    from buddylib import workloads
    from buddylib.studies import summaries

    tasks = [Task("run", n, scale, 60.0 if workloads.get(n).suite != "hpc" else 30.0) for n in names]
    tasks += [Task("paper", n, "paper", 120.0) for n in paper_names]
    tasks += [Task("batch", n, scale, 60.0) for n in batch_names]
    tasks += [Task("maturity", n, scale, 150.0) for n in (study_names if maturity_names is None else maturity_names)]
    tasks += [Task("caffe", n, scale, 60.0) for n in study_names]
    tasks += [Task("adam", n, scale, 90.0) for n in optimizer_names]
    committed = set(hpc_committed)
    tasks += [Task("run", n, s, 10.0) for s in hpc_scales for n in workloads.names("hpc")
              if (n, summaries.scale_name(s)) not in committed]
    tasks += [Task("llm", "llm", scale, 200.0)] if llm else []
    return sorted(tasks, key=lambda t: -t.cost)


def execute(task: Task, data: str, seed: int = 0, notebook_args: dict[str, Any] | None = None) -> tuple[str, float]:
    """Do one task in this process; return its label and the seconds it took.

    Parameters
    ----------
    task : Task
        ``run``: the workload's run, timing-model sweep and ratios; ``paper``: its paper-scale run (in a child
        process, which gives the memory back); ``batch``: memory against batch size; ``maturity``, ``caffe``,
        ``adam``: the fidelity studies; ``llm``: notebook 10's study; ``notebook``: the notebook executed.
    data : str
        The folder the results are cached in.
    seed : int
        The runs' seed.
    notebook_args : dict, optional
        Keyword arguments of :func:`buddylib.report.notebooks.execute_notebook` (``out``, ``data``, ...).

    Returns
    -------
    tuple of (str, float)
        :attr:`Task.label` and the seconds the task took.

    Raises
    ------
    ValueError
        An unknown ``task.kind``.
    """
    from buddylib import workloads
    from buddylib.studies import experiments, fidelity

    t0 = time.perf_counter()
    if task.kind == "run":
        workloads.cached_run(task.name, task.scale, seed, data)
        experiments.slowdowns([task.name], task.scale, seed, data, progress=False)
        experiments.workload_ratios([task.name], task.scale, seed, data, progress=False)  # what notebooks 01-04 read
    elif task.kind == "paper":
        _in_child(workloads.cached_run, task.name, "paper", seed, data)
    elif task.kind == "batch":
        batches = experiments.BATCHES.get(str(task.scale), experiments.BATCHES["default"])
        experiments.memory_vs_batch([task.name], batches, task.scale, seed, data, progress=False)
    elif task.kind == "maturity":
        fidelity.maturity([task.name], task.scale, seed=seed, data=data, progress=False)
    elif task.kind == "caffe":
        fidelity.framework_accounting([task.name], task.scale, seed, data, progress=False)
    elif task.kind == "adam":
        fidelity.optimizer([task.name], task.scale, seed, data, progress=False)
    elif task.kind == "llm":
        from buddylib.studies import llm

        llm.study(task.scale, seed, data)
    elif task.kind == "notebook":
        from buddylib.report import notebooks

        notebooks.execute_notebook(Path(task.name), **(notebook_args or {}))
    else:
        raise ValueError(f"unknown task kind {task.kind!r}")
    return task.label, time.perf_counter() - t0


def run_all(tasks: Sequence[Task], data: str | Path, scheduler: str | None = None, seed: int = 0,
            desc: str = "tasks", notebook_args: dict[str, Any] | None = None) -> dict[str, float]:
    """Every task, on ``scheduler`` (None: a local cluster of one worker per core; "serial": here; else a
    scheduler address), started in the order given. A progress bar counts them as they finish and names the
    running ones with their seconds so far. A failed task's error is raised with a note naming the task.

    Parameters
    ----------
    tasks : sequence of Task
        The tasks, in the order they start.
    data : str or Path
        The folder the results are cached in (made absolute: a worker's folder is its own).
    scheduler : str, optional
        None: a local cluster of one worker per core; ``"serial"``: here, one after another; else a scheduler
        address.
    seed, desc, notebook_args
        The runs' seed; the progress bar's label; :func:`execute`'s keyword arguments for notebook tasks.

    Returns
    -------
    dict of str to float
        Seconds per task, by :attr:`Task.label`.
    """
    data = str(Path(data).resolve())
    if not tasks:
        return {}
    times: dict[str, float] = {}
    with _Progress(len(tasks), desc) as progress:
        if scheduler == "serial":
            for t in tasks:
                progress.running([t.label])
                with _named(t.label):
                    label, times[label] = execute(t, data, seed, notebook_args)
                progress.finished(label)
            return times
        progress.note = "starting workers"
        with _client(scheduler) as client:
            progress.note = ""
            for task, future in _as_threads_free(client, progress.running, execute, tasks, data, seed, notebook_args):
                with _named(task.label):  # a failed task raises here, with its error
                    label, times[label] = future.result()
                progress.finished(label)
    return times


def _as_threads_free(client: Any, started: Callable[[list[str]], None], fn: Any, tasks: Sequence[Task],
                     *args: Any) -> Iterator[tuple[Task, Any]]:
    """``fn(task, *args)`` for every task, each submitted once a worker thread is free, in the order given (the
    longest first), so the next task always goes to the first worker free. Submitted together, dask would assign
    every task to a worker at once by its guess of their durations (unknown: each task is a group of its own),
    and a worker whose queue ran out would sit idle beside one with several still waiting (make reproduce's
    generation step: 127 s idle of its 891 in a fresh clone). Yields each task as it finishes, with its future;
    ``started`` is told the labels of the running tasks whenever some start."""
    from distributed import as_completed

    waiting, running = list(tasks), {}

    def submit() -> Any:
        task = waiting.pop(0)
        future = client.submit(fn, task, *args, pure=False, key=f"{task.label}-{id(task)}")
        running[future] = task
        return future

    finished = as_completed([submit() for _ in range(min(len(waiting), _threads(client)))])
    started([t.label for t in running.values()])
    for future in finished:
        task = running.pop(future)
        if waiting:
            while waiting and len(running) < _threads(client):
                finished.add(submit())
            started([t.label for t in running.values()])
        yield task, future


def _threads(client: Any) -> int:
    """Worker threads of the cluster now (workers may join or leave during a run); at least one, so a task
    waits at the scheduler for the first worker to come."""
    return max(1, sum(client.nthreads().values()))


@contextlib.contextmanager
def _named(label: str) -> Iterator[None]:
    """A task's error, raised with the task's name added: the error alone ('unknown workload ...', a
    notebook's cell error) does not say which of dozens of tasks on which cluster raised it."""
    try:
        yield
    except Exception as exc:
        exc.add_note(f"in task {label} of make reproduce")
        raise


def _in_child(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a new Python process: a paper-scale run holds gigabytes, which the allocator keeps in a
    long-lived worker after the run ends (a worker at 13.7 GB after the paper-scale BigLSTM and ResNet-50 ran
    in it was killed for memory); a child gives them back when it exits. A plain subprocess, not
    ``multiprocessing``: a worker started by ``dask worker`` is a daemonic process, which multiprocessing
    forbids to have children. ``fn``, its arguments and its result or error travel pickled through a file."""
    import pickle
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="buddylib-child-") as tmp:
        box = Path(tmp) / "call.pickle"
        box.write_bytes(pickle.dumps((fn, args)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # where this process found fn
        done = subprocess.run([sys.executable, "-c", _CHILD, str(box)], env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{getattr(fn, '__qualname__', fn)}{args} in a child process: exit status "
                               f"{done.returncode} (killed for memory if -9)")
        ok, out = pickle.loads(box.read_bytes())
    if not ok:
        raise out
    return out


_CHILD = """import pickle, sys
with open(sys.argv[1], "rb") as f:
    fn, args = pickle.load(f)
try:
    out = (True, fn(*args))
except Exception as exc:
    out = (False, exc)
with open(sys.argv[1], "wb") as f:
    pickle.dump(out, f)
"""


class _Progress:
    """A tqdm bar over tasks whose postfix names the running tasks and the seconds each has run so far
    (refreshed every second by a thread, so a long task shows it is still going)."""

    def __init__(self, total: int, desc: str) -> None:
        self.bar = tqdm(total=total, desc=desc, unit="task", dynamic_ncols=True)
        self.started: dict[str, float] = {}
        self.note = ""  # shown while nothing runs
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the ticker thread shows while the caller updates
        self._ticker = threading.Thread(target=self._tick, daemon=True)

    def __enter__(self) -> _Progress:
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._ticker.join()
        self.started.clear()
        self.bar.set_postfix_str("")
        self.bar.close()

    def running(self, labels: Iterable[str]) -> None:
        """These tasks run now (those already running keep their start time)."""
        now = time.perf_counter()
        with self._lock:
            self.started = {label: self.started.get(label, now) for label in labels}

    def finished(self, label: str) -> None:
        with self._lock:
            self.started.pop(label, None)
            self.bar.update()
        self.show()

    def show(self) -> None:
        with self._lock:
            now = time.perf_counter()
            running = sorted(self.started.items(), key=lambda kv: kv[1])
            text = ", ".join(f"{label} {now - t0:.0f}s" for label, t0 in running[:4]) or self.note
            self.bar.set_postfix_str(text + (f" +{len(running) - 4} more" if len(running) > 4 else ""))

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self.show()


@contextlib.contextmanager
def cluster(scheduler: str | None) -> Iterator[str]:
    """The scheduler for several :func:`run_all` in a row: for None a :func:`local_cluster` with a worker per
    core, started once and kept for all of them (its address), so its workers start and import once; an
    address or "serial" as it is.

    Parameters
    ----------
    scheduler : str, optional
        None, ``"serial"`` or a scheduler address.

    Yields
    ------
    str
        The scheduler to give :func:`run_all`.
    """
    if scheduler is not None:
        yield scheduler
        return
    with local_cluster(os.cpu_count() or 1) as local:
        yield local.scheduler_address


@contextlib.contextmanager
def _client(scheduler: str | None) -> Iterator[Any]:
    """A dask client: to ``scheduler`` if given, else to :func:`local_cluster` with a worker per core."""
    from distributed import Client

    if scheduler:
        with Client(scheduler, timeout="10s") as client:
            yield client
        return
    with local_cluster(os.cpu_count() or 1) as cluster, Client(cluster) as client:
        yield client


#: The environment of a worker process: numba and the math libraries limited to one thread each, so that
#: single-threaded workers, one per core, do not oversubscribe the cores. Workers started with dask's
#: command line get it from their own environment (``NUMBA_NUM_THREADS=1 dask worker ...``; dask's nanny
#: already sets the other three).
SINGLE_THREADED = {k: "1" for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                    "OPENBLAS_NUM_THREADS")}


@contextlib.contextmanager
def local_cluster(n_workers: int) -> Iterator[Any]:
    """A dask ``LocalCluster`` of ``n_workers`` single-threaded worker processes with the
    :data:`SINGLE_THREADED` environment (:func:`run_all` gives each one task at a time).

    This process's environment is given back when the cluster closes (dask's nannies change it).

    Parameters
    ----------
    n_workers : int
        Worker processes.

    Yields
    ------
    distributed.LocalCluster
        The running cluster (its ``scheduler_address`` for :func:`run_all`).
    """
    import dask
    from distributed import LocalCluster

    with _environ_kept(), dask.config.set({"distributed.nanny.pre-spawn-environ": SINGLE_THREADED}), \
            LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, memory_limit=0,
                         dashboard_address=None) as cluster:
        yield cluster


@contextlib.contextmanager
def _environ_kept() -> Iterator[None]:
    """Give this process its environment back after the cluster: dask's nannies, which run here, set their
    pre-spawn variables in *this* process's ``os.environ`` for good, and numba re-reads it at every compilation,
    so a later compile here would fail ('Cannot set NUMBA_NUM_THREADS ... once the threads have been launched')."""
    before = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)
