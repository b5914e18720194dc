"""make reproduce's parallel steps: the same results on a dask cluster as one after another; and the whole pipeline
end to end, small, on the workers of a cluster started with dask's command line (one cluster for the module)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import xarray as xr

from buddylib import analysis, paper, snapshot
from buddylib.report import pipeline, reproduce


@pytest.fixture(scope="module")
def cli_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A scheduler and two single-threaded workers started with dask's command line in a folder of their own,
    as a user starts them on a cluster (with numba single-threaded, as the README says); yields the address.
    Every process group it started is ended afterwards, whatever the tests did. The workers can import this
    module, for the functions it sends them."""
    folder = tmp_path_factory.mktemp("cluster")
    dask = Path(sys.executable).with_name("dask")
    if not dask.exists():
        pytest.skip(f"dask's command line is not installed beside {sys.executable}")
    here = str(Path(__file__).parents[__name__.count(".")])  # the folder this module is imported from
    env = {**os.environ, "NUMBA_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    procs: list[subprocess.Popen] = []
    log = folder / "cluster.log"

    def start(*args: str) -> None:
        with log.open("a") as out:
            procs.append(subprocess.Popen([str(dask), *args], cwd=folder, env=env, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True))

    try:
        start("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", "scheduler.json")
        address, deadline = None, time.monotonic() + 60
        while address is None and procs[0].poll() is None and time.monotonic() < deadline:
            try:
                address = json.loads((folder / "scheduler.json").read_text())["address"]
            except (OSError, ValueError, KeyError):  # not written yet, or not whole yet
                time.sleep(0.2)
        if address is None:
            pytest.skip(f"dask scheduler did not start: {log.read_text()[-2000:]}")
        for _ in range(2):
            start("worker", address, "--nthreads", "1", "--no-dashboard")
        from distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=180)
        yield address
    finally:
        for p in procs:
            _signal_group(p, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _signal_group(p, signal.SIGKILL)
                p.wait()


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to the process group ``p`` leads (a worker's nanny and the worker it started)."""
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass


def test_cli_cluster_and_serial_give_identical_results(small_run: Path, cli_cluster: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs and sweeps made by workers of a cluster started with dask's command line are those made here,
    one after another (ostencil's: the small reproduce run's, which ran a notebook there too); relative folders
    mean folders here, not the workers'."""
    monkeypatch.chdir(tmp_path)
    tasks = pipeline.generation_tasks("quick", ["ostencil", "transformer"])
    assert [t.label for t in tasks] == ["run:transformer@quick", "run:ostencil@quick"]  # the longest first
    serial = pipeline.run_all(tasks, Path("serial"), scheduler="serial")
    cluster = pipeline.run_all(tasks[:1], Path("cluster"), scheduler=cli_cluster)
    assert set(serial) == {t.label for t in tasks} and set(cluster) == {tasks[0].label}
    for name, there in (("ostencil", small_run / "data"), ("transformer", tmp_path / "cluster")):
        stem = f"{name}-quick-s0"
        digests = [json.loads((d / f"{stem}.profile.json").read_text())["digest"] for d in (tmp_path / "serial", there)]
        assert digests[0] == digests[1]
        sweeps = [xr.open_dataset(d / f"{stem}.slowdown-t0.3.nc").load() for d in (tmp_path / "serial", there)]
        xr.testing.assert_identical(sweeps[0], sweeps[1])


@pytest.fixture(scope="module")
def small_run(cli_cluster: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A whole ``make reproduce``, small, on the workers of :func:`cli_cluster`: one workload, one notebook. Returns
    the folder holding reports/, data/."""
    tmp_path = tmp_path_factory.mktemp("reproduce")
    reproduce.run(tmp_path / "reports", bench_mib=1, data=tmp_path / "data", scale="quick",
                  names=["ostencil"], notebooks=["02_hpc_ratios"], scheduler=cli_cluster)
    return tmp_path


def test_pipeline_small(small_run: Path) -> None:
    tmp_path = small_run
    text = (tmp_path / "reports/README.md").read_text()
    for f in ("bench/bench.csv", "bench/bench.png", "hpc/hpc_ratios.nc", "hpc/hpc_ratios.csv",
              "slowdown/slowdown.nc", "slowdown/slowdown.csv"):
        assert (tmp_path / "reports" / f).stat().st_size > 0, f
    # the index's HPC number is the saved run's final snapshot at the headline configuration, beside the paper's
    final = analysis.analyze(snapshot.load(tmp_path / "data/ostencil-quick-s0.nc"), [paper.HEADLINE["compressor"]],
                             thresholds=[paper.HEADLINE["threshold"]]).isel(snapshot=-1)
    eff = float(paper.headline(final.effective_ratio))
    hpc = xr.open_dataset(tmp_path / "reports/hpc/hpc_ratios.nc")
    assert float(paper.headline(hpc.effective_ratio.sel(workload="ostencil"))) == eff
    row = next(ln for ln in text.splitlines() if ln.startswith("| effective capacity, HPC workloads"))
    assert row == (f"| effective capacity, HPC workloads (BPC-32, threshold 30%, mean of 1) | {eff:.2f}x (geometric "
                   f"mean {eff:.2f}x) | {paper.HPC_RATIO_ISCA}x (ISCA), {paper.HPC_RATIO_ARXIV}x (arXiv) |")
    slow = pd.read_csv(tmp_path / "reports/slowdown/slowdown.csv", index_col=0)
    nv = float(paper.headline(xr.open_dataset(tmp_path / "reports/slowdown/slowdown.nc").slowdown).item())
    assert list(slow.index) == ["ostencil"] and slow.loc["ostencil", "NVLink2"] == pytest.approx(100 * (nv - 1))
    row = next(ln for ln in text.splitlines() if ln.startswith("| slowdown vs ideal GPU, V100-32GB + NVLink2, HPC"))
    assert f"| {100 * (nv - 1):+.1f}% (range" in row and row.endswith(f"| {paper.SLOWDOWN_TEXT} |")
    assert paper.CITATION in text
    assert (tmp_path / "data/ostencil-quick-s0.nc").exists()  # cached for the next run
    assert (tmp_path / "reports/index.html").exists()
    assert (tmp_path / "reports/notebooks/02_hpc_ratios.html").exists()
    assert (tmp_path / "reports/02_hpc_ratios/hpc_ratios.png").exists()
    assert "](02_hpc_ratios/hpc_ratios.png)" in text  # the index shows the notebook's figure
    assert "05_slowdown_sensitivity/slowdown_sensitivity.png" not in text  # notebook 05 did not run
    assert "notebook 02_hpc_ratios" in text


def test_small_run_page(small_run: Path, capsys) -> None:
    """The page's links all resolve; it is rendered again, unchanged, from the results saved beside it; the
    run's step times are there for the next run's estimate."""
    from buddylib.report import index_page

    out = small_run / "reports"
    assert index_page.broken_links(out) == []
    assert 'href="02_hpc_ratios/hpc_ratios.png"' in (out / "index.html").read_text()  # a thumbnail
    before = [(out / f).read_text() for f in ("README.md", "index.html")]
    index_page.rerender(out)
    assert [(out / f).read_text() for f in ("README.md", "index.html")] == before
    last = reproduce.last_run_seconds(out)
    assert {"compressor benchmark", "total", "run:ostencil@quick", "notebook 02_hpc_ratios"} <= set(last)
    reproduce._Clock(last)
    assert "make reproduce: about" in capsys.readouterr().out


def test_a_failed_task_is_named(cli_cluster: str, tmp_path: Path) -> None:
    """A task's error reaches the caller as itself, with the task's name, here and from a cluster's worker."""
    bad = [pipeline.Task("run", "nosuch", "quick", 1.0)]
    for scheduler in ("serial", cli_cluster):
        with pytest.raises(ValueError, match="unknown workload 'nosuch'") as err:
            pipeline.run_all(bad, tmp_path, scheduler=scheduler)
        assert "in task run:nosuch@quick of make reproduce" in err.value.__notes__


def test_cli_workers_start_children(cli_cluster: str) -> None:
    """dask's command line starts daemonic workers, which multiprocessing forbids to have children: a
    paper-scale run's child process starts there all the same."""
    import operator

    from distributed import Client

    with Client(cli_cluster) as client:
        assert sorted(client.run(_daemonic).values()) == [True, True]
        child = client.submit(pipeline._in_child, os.getpid, pure=False).result()
        assert child not in client.run(os.getpid).values()
        assert client.submit(pipeline._in_child, operator.mul, 6, 7).result() == 42
        with pytest.raises(ZeroDivisionError):
            client.submit(pipeline._in_child, operator.truediv, 1, 0).result()


def test_tasks_start_in_the_order_given() -> None:
    """The longest first, as given: dask's own order for tasks submitted together is another (mostly the reverse
    for these), which left a long task to the end with the other workers idle. One worker, so the order shows."""
    from distributed import Client

    from buddylib import workloads

    environ = dict(os.environ)
    tasks = [pipeline.Task("run", n, "quick", 1.0) for n in workloads.names("hpc")]
    with pipeline.local_cluster(1) as cluster, Client(cluster) as client:
        done = pipeline._as_threads_free(client, lambda labels: None, _where_and_when, tasks)
        starts = [f.result()[1] for _, f in done]
    assert starts == sorted(starts)
    # the workers' single-thread settings stay theirs: numba in this process re-reads os.environ at every compile
    assert dict(os.environ) == environ


def test_a_free_worker_takes_the_next_task(cli_cluster: str) -> None:
    """A worker never waits while tasks wait: dask, given every task at once, assigns them all to workers up front
    (3 and 3 here), and the short tasks queued behind the long one waited for it. Two workers, one long task
    given first: the other worker runs all the short ones, and the run ends with the long task."""
    from distributed import Client

    tasks = [pipeline.Task("sleep", "long", 2.0, 2.0)] + [pipeline.Task("sleep", f"short{i}", 0.1, 0.1)
                                                          for i in range(5)]
    seen: list[list[str]] = []
    with Client(cli_cluster) as client:
        assert len(client.nthreads()) == 2
        done = [(t.name, *f.result()) for t, f in pipeline._as_threads_free(client, seen.append, _where_and_when,
                                                                            tasks)]
    (long_worker,) = {w for name, w, _ in done if name == "long"}
    assert [name for name, _, _ in done][-1] == "long"
    assert {w for name, w, _ in done if name != "long"} == {w for _, w, _ in done} - {long_worker}
    assert seen[0] == ["sleep:long@2.0", "sleep:short0@0.1"] and max(map(len, seen)) == 2


def _where_and_when(task: pipeline.Task) -> tuple[str, float]:
    """The worker a task ran on and when it started; it lasts ``task.scale`` seconds."""
    from distributed import get_worker

    start = time.time()
    time.sleep(float(task.scale) if task.kind == "sleep" else 0.0)
    return get_worker().address, start


def _daemonic() -> bool:
    import multiprocessing

    return multiprocessing.current_process().daemon


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


def test_paper_runs_give_their_memory_back() -> None:
    """Paper-scale runs go to a child process, which returns the result and its gigabytes when it exits."""
    import operator

    assert pipeline._in_child(operator.mul, 6, 7) == 42
    assert pipeline._in_child(os.getpid) != os.getpid()


def test_scaleout_page_states_the_speedup_and_the_goal(tmp_path: Path) -> None:
    """The benchmark's scale-out bookkeeping (never its speed): the speed-up of medians beside the goal, and
    its two factors, workers computing longer and workers idle, multiplying back to it."""
    import re

    import pandas as pd

    from buddylib.report import bench

    runs = pd.DataFrame({"workers": [1, 2, 1, 2], "repeat": [0, 0, 1, 1], "tasks": 15, "scale": "quick",
                         "load_1min": 0.5, "seconds": [40.0, 21.0, 42.0, 23.0], "busy": [39.0, 40.0, 41.0, 42.0],
                         "cpu": [38.0, 36.0, 40.0, 38.0],
                         "idle": [1.0, 2.0, 1.0, 4.0], "idle_at_end": [0.5, 1.0, 0.5, 3.0], "longest_task": 4.0})
    tasks = pd.DataFrame({"workers": [1], "repeat": [0], "task": ["run:bt@quick"], "worker": ["tcp://w"],
                          "start": [0.0], "seconds": [4.0]})
    text = bench.write_scaleout(runs, tasks, tmp_path)["scaleout_markdown"].read_text()
    assert "| 2 | 22.0 (21.0, 23.0) | 41.0 (37.0) | 3.0 (2.0) | 4.0 | 1.86x | >= 1.8x: met |" in text
    total, busy, share = map(float, re.search(r"\*\*([\d.]+)x\*\* \(goal >= 1\.8x\) = 2 x ([\d.]+) .+? x ([\d.]+) ",
                                              text).groups())
    assert total == pytest.approx(41 / 22, abs=0.005) and total == pytest.approx(2 * busy * share, abs=0.005)
    slower = bench.write_scaleout(runs.assign(seconds=[40.0, 30.0, 42.0, 31.0]), tasks, tmp_path)
    assert "| 1.34x | >= 1.8x: **not met** |" in slower["scaleout_markdown"].read_text()
    assert pd.read_csv(tmp_path / "scaleout.csv").equals(runs.assign(seconds=[40.0, 30.0, 42.0, 31.0]))


def test_an_hpc_task_does_not_import_torch() -> None:
    """Every dask worker pays its imports: one that runs HPC proxies only is spared torch's (2 CPU-seconds)."""
    code = ("import sys; from buddylib import workloads; from buddylib.report import pipeline; "
            "workloads.names('hpc'); workloads.get('ostencil'); "
            "print('torch' in sys.modules, len(workloads.names()) > len(workloads.names('hpc')), "
            "'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "True"]  # asking for the DL workloads still registers them
