"""How a search's evaluations are dispatched: in this process, to local worker processes, or as
Ray tasks on a local Ray runtime or a cluster.

A *work* (`Work`) says what a worker builds once (`build()`: the training step, the target) and
how it evaluates one item with it (`run(state, item)`); `failed(item, reason)` is the record of
an item whose evaluation raised: the search keeps it, with its one-line reason, and goes on.
A backend's `map(items)` returns one result per item **in the items' order**, whatever order
the workers finish in, so a search's results never depend on the backend or on `--jobs`.

- `LocalBackend(work, jobs)`: with one job, in this process (on a prebuilt state when given);
  with more, `jobs` worker processes (fork where available: a worker inherits the prebuilt
  state instead of building its own). A worker that dies (killed, out of memory) breaks the
  pool: the pool is started again and the chunks without a result are sent again
  (`MAX_RESTARTS` times at most), so nothing is lost and nothing counted twice. Workers die
  with their parent, however it ends (`_watch_parent`): on Linux the kernel kills a worker
  whose parent dies (`PR_SET_PDEATHSIG`), elsewhere (and as a fallback) a thread of each
  worker ends it within `PARENT_POLL_SECONDS` of the parent's death; a parent interrupted by
  SIGINT, SIGTERM or SIGHUP (`monet_ir.errors.terminations_interrupt`) kills its workers on
  the way out (`close(abort=True)`). Workers ignore SIGINT (Ctrl-C reaches the whole process
  group; the parent alone decides).
- `RayBackend(work)`: each chunk of items is a Ray task. The work (the model and target files
  and the step's options) is put in Ray's object store once per search (`ray.put`); a Ray
  worker process builds the step the first time it runs a task of that search and keeps it for
  the next ones. A worker process or node that dies has its tasks run again elsewhere (Ray's
  task retries, `max_retries`); a task's result is taken once, by its position.

`ray_session(address, num_cpus)` starts a local Ray runtime (address None; `num_cpus` CPUs) or
joins a cluster (`auto`, `ray://host:port`, `host:port`), and shuts down only what it started.
Ray is optional: `import_ray()` raises a one-line `UsageError` saying how to install it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from monet_ir.errors import UsageError

MAX_RESTARTS = 8  # local pool restarts per backend before giving up
PARENT_POLL_SECONDS = 0.5  # how often a local worker checks that its parent is alive (fallback)
RAY_TASK_RETRIES = 4  # Ray re-runs a task whose worker died at most this many times
RAY_INSTALL = "pip install -e '.[ray]' (or pip install 'ray[default]>=2.9')"


class Work(Protocol):
    """What the workers of a search evaluate (see the module docstring); picklable."""

    key: str  # identifies the state `build` makes (one search): workers cache it under this key

    def build(self) -> Any: ...

    def run(self, state: Any, item: Any) -> Any: ...

    def failed(self, item: Any, reason: str) -> Any: ...


def one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else '(no message)'}"


def run_item(work: Work, state: Any, item: Any) -> Any:
    """One evaluation; an exception becomes the work's failure record (the search goes on)."""
    try:
        return work.run(state, item)
    except Exception as e:  # noqa: BLE001  (one candidate's failure must not end a long search)
        return work.failed(item, one_line(e))


def run_items(work: Work, state: Any, items: Sequence[Any]) -> list[Any]:
    return [run_item(work, state, item) for item in items]


def chunks(items: Sequence[Any], workers: int, per_worker: int = 4) -> list[list[Any]]:
    """`items` cut in order into chunks of decreasing size (guided self-scheduling): each chunk
    holds the items left divided by `workers * per_worker / 2`, rounded up, so the first chunks
    are large (few round trips) and the last ones hold one item each. Workers take chunks in
    order as they become free, so when the last item starts every other worker is busy with
    at most one item: the time a worker waits at the end of a batch (a search's generation)
    for the others is at most about one item's, not one chunk's (with equal chunks of k items,
    up to k items' worth)."""
    divisor = max(1, workers * per_worker // 2)
    parts = []
    start = 0
    while start < len(items):
        size = max(1, math.ceil((len(items) - start) / divisor))
        parts.append(list(items[start:start + size]))
        start += size
    return parts


def local_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


# ---------------------------------------------------------------------- local processes

_LOCAL: dict[str, Any] = {}


def _watch_parent(parent: int, kernel: bool = True) -> None:
    """End this worker process when `parent` (its parent's pid) is gone: the kernel's parent-death
    signal on Linux (`kernel`: only when the parent forked from its main thread, as the signal
    comes when the forking thread ends), and a thread polling the parent's pid everywhere."""
    import threading

    if kernel:
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            PR_SET_PDEATHSIG = 1
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # not Linux
            pass
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)

    def watch() -> None:
        import time

        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="monet-parent-watch", daemon=True).start()


def _init_local_worker(work: Work, state: Any, parent: int | None = None, main_thread: bool = True) -> None:
    import gc
    import signal

    # the parent handles interruptions and stops its workers; a worker ends on SIGTERM at once
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    if parent is not None:
        _watch_parent(parent, kernel=main_thread)
    _LOCAL["work"] = work
    _LOCAL["state"] = work.build() if state is None else state
    gc.freeze()  # the worker's step and caches, for the worker's life (see evaluate.tuned_collection)


def _run_local_chunk(items: list[Any]) -> list[Any]:
    return run_items(_LOCAL["work"], _LOCAL["state"], items)


class LocalBackend:
    """In this process (jobs = 1) or on `jobs` local worker processes."""

    name = "local"

    def __init__(self, work: Work, jobs: int = 1, state: Any = None):
        self.work = work
        self.jobs = max(1, jobs)
        self.state = state
        self.executor = None
        self.restarts = 0

    def _start(self):
        if self.executor is None:
            import multiprocessing
            import threading
            from concurrent.futures import ProcessPoolExecutor

            fork = "fork" in multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if fork else None)
            # forked workers inherit the prebuilt state; others build their own
            self.executor = ProcessPoolExecutor(self.jobs, mp_context=context, initializer=_init_local_worker,
                                                initargs=(self.work, self.state if fork else None, os.getpid(),
                                                          threading.current_thread() is threading.main_thread()))
        return self.executor

    def map(self, items: Sequence[Any], progress: Callable[[int], None] | None = None) -> list[Any]:
        """One result per item, in order; `progress(n)` after each arrival (n results so far)."""
        if not items:
            return []
        if self.jobs == 1:
            if self.state is None:
                self.state = self.work.build()
            results = []
            for item in items:
                results.append(run_item(self.work, self.state, item))
                if progress is not None:
                    progress(len(results))
            return results
        from concurrent.futures import as_completed
        from concurrent.futures.process import BrokenProcessPool

        parts = chunks(items, self.jobs)
        done: dict[int, list[Any]] = {}
        while len(done) < len(parts):
            executor = self._start()
            futures = {i: executor.submit(_run_local_chunk, part) for i, part in enumerate(parts) if i not in done}
            index = {future: i for i, future in futures.items()}
            try:
                for future in as_completed(index):
                    done[index[future]] = future.result()
                    if progress is not None:
                        progress(sum(len(parts[i]) for i in done))
            except BrokenProcessPool:
                # a worker died: keep what finished, start a new pool, send the rest again
                for i, future in futures.items():
                    if i not in done and future.done() and future.exception() is None:
                        done[i] = future.result()
                executor.shutdown(wait=True, cancel_futures=True)
                self.executor = None
                self.restarts += 1
                if self.restarts > MAX_RESTARTS:
                    raise RuntimeError(f"local worker processes died {self.restarts} times; giving up") from None
        return [result for i in range(len(parts)) for result in done[i]]

    def workers_alive(self) -> int:
        if self.jobs == 1 or self.executor is None:
            return 1 if self.jobs == 1 else 0
        processes = getattr(self.executor, "_processes", None) or {}
        return sum(1 for p in processes.values() if p.is_alive())

    def close(self, abort: bool = False) -> None:
        """Stop the workers: after their current items, or at once (`abort`: the search was
        interrupted or failed; a killed worker loses nothing that was to be kept)."""
        if self.executor is None:
            return
        if abort:
            for process in list((getattr(self.executor, "_processes", None) or {}).values()):
                if process.is_alive():
                    process.kill()
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.executor = None


# ---------------------------------------------------------------------- Ray


def import_ray():
    """The `ray` module, or a one-line UsageError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"--backend ray needs Ray, which is not installed: {RAY_INSTALL}") from None
    return ray


@contextmanager
def ray_session(address: str | None = None, num_cpus: int | None = None) -> Iterator[Any]:
    """Ray initialized for the block: an existing connection is used as it is; otherwise a local
    runtime (`address` None, `num_cpus` CPUs) is started or the cluster at `address` joined, and
    shut down at the end."""
    import logging

    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
    if address:
        options["address"] = address
    elif num_cpus is not None:
        options["num_cpus"] = num_cpus
    try:
        ray.init(**options)
    except (ConnectionError, ValueError, RuntimeError) as e:
        where = f"--ray-address {address}" if address else "a local Ray runtime"
        raise UsageError(f"{where}: cannot start or join Ray: {str(e).strip().splitlines()[0] if str(e).strip() else e}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


_RAY_WORKER: dict[str, Any] = {}


def _ray_run_chunk(boxed_work: list, key: str, items: list[Any]) -> list[Any]:
    """A Ray task: the work arrives as an object reference inside a list (so that Ray does not
    fetch it for every task); it is fetched and built once per worker process and search."""
    if _RAY_WORKER.get("key") != key:
        import gc

        import ray

        _RAY_WORKER.clear()
        work = ray.get(boxed_work[0])
        _RAY_WORKER.update(key=key, work=work, state=work.build())
        gc.freeze()
    return run_items(_RAY_WORKER["work"], _RAY_WORKER["state"], items)


class RayBackend:
    """Chunks of items as Ray tasks (Ray must be initialized: see `ray_session`)."""

    name = "ray"

    def __init__(self, work: Work, per_worker: int = 4, max_retries: int = RAY_TASK_RETRIES):
        ray = import_ray()
        if not ray.is_initialized():
            raise UsageError("--backend ray: Ray is not initialized")
        self.ray = ray
        self.work = work
        self.per_worker = per_worker
        self.ref = ray.put(work)  # once per search
        self.task = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(_ray_run_chunk)

    def cpus(self) -> int:
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def map(self, items: Sequence[Any], progress: Callable[[int], None] | None = None) -> list[Any]:
        """One result per item, in order; `progress(n)` after each arrival (n results so far)."""
        if not items:
            return []
        parts = chunks(items, self.cpus(), self.per_worker)
        refs = [self.task.remote([self.ref], self.work.key, part) for part in parts]
        index = {ref: i for i, ref in enumerate(refs)}
        done: dict[int, list[Any]] = {}
        pending = list(refs)
        while pending:
            ready, pending = self.ray.wait(pending, num_returns=1)
            for ref in ready:
                done[index[ref]] = self.ray.get(ref)
            if progress is not None:
                progress(sum(len(parts[i]) for i in done))
        return [result for i in range(len(parts)) for result in done[i]]

    def workers_alive(self) -> int:
        """CPUs of the cluster's live nodes."""
        return int(sum(node.get("Resources", {}).get("CPU", 0) for node in self.ray.nodes() if node.get("Alive")))

    def close(self, abort: bool = False) -> None:
        self.ref = None
