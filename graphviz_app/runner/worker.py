"""The loop inside a worker process: run jobs under a memory limit, answer with plain data."""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from .deadline import mark_worker_process
from .errors import JobNotPortable

try:  # POSIX only; elsewhere jobs run without a memory limit
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

__all__ = ["worker_main", "run_job", "die_with_parent"]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_WATCH_S = 1.0  # how often a worker without a parent-death signal looks for its parent
_ALLOC_FAILURES = ("can't allocate memory", "Cannot allocate memory", "out of memory")


def worker_main(conn: Connection, threads: int) -> None:
    """Serve jobs from `conn` until the parent closes it (or is gone: then quietly, with no traceback)."""
    try:
        _serve(conn, threads)
    except (EOFError, OSError):
        # The parent ended (a command stopped at its deadline, Ctrl-C) while this worker
        # started or answered: nobody is left to tell, and a traceback would reach the
        # person's terminal through the stderr both processes share.
        os._exit(0)


def _serve(conn: Connection, threads: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the parent
    die_with_parent()
    if hasattr(os, "setpgid"):
        # Its own process group, so that stopping the worker also stops what a
        # job started (a `dot` layout) instead of leaving it running.
        os.setpgid(0, 0)
    _limit_threads(threads)
    mark_worker_process()  # jobs may end this process at a hard deadline (runner.deadline)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone or closed the pipe
        except Exception as e:  # noqa: BLE001 - the job could not be unpickled here
            _send(conn, ("error", JobNotPortable(
                f"the job could not be loaded in the worker ({type(e).__name__}: {e}): "
                "jobs must be top-level functions of an importable module"), ""))
            continue
        job, args, memory_limit = message
        _send(conn, run_job(job, args, memory_limit))


def die_with_parent() -> None:
    """End this process when its parent ends, even by SIGKILL (nothing then closes the pipe we read from
    while a job runs): the kernel's parent-death signal on Linux, a thread watching the parent elsewhere.

    The parent is the forkserver, which ends when the pipe from the process that owns the pool
    reads end-of-file, that is when every holder of its write end has ended: the owner, and every
    worker, which multiprocessing hands a copy "to keep the forkserver alive". A worker lets its copy
    go, so a killed owner ends the forkserver, and the forkserver's end ends the workers.
    """
    _let_go_of_the_forkserver()
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent:  # it ended before the signal was armed
                    os._exit(0)
                return
        except (OSError, AttributeError):
            pass  # no libc to call: watch instead

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_S)
        os._exit(0)

    threading.Thread(target=watch, name="graphviz-app-parent-watch", daemon=True).start()


def _let_go_of_the_forkserver() -> None:
    # multiprocessing keeps the fd in a private attribute of its forkserver module (Python 3.8-3.13).
    server = getattr(sys.modules.get("multiprocessing.forkserver"), "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(fd, int):
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None  # type: ignore[union-attr]


def run_job(job: Callable[..., Any], args: tuple[Any, ...], memory_limit: int | None) -> tuple[Any, ...]:
    """Run one job; ("ok", result), ("memory", text) or ("error", exception, traceback)."""
    _set_memory_limit(memory_limit)
    _fresh_random_state()
    try:
        return ("ok", job(*args))
    except MemoryError as e:
        return ("memory", str(e))
    except BaseException as e:  # noqa: BLE001 - SystemExit too: the worker must survive
        if any(marker in str(e) for marker in _ALLOC_FAILURES):
            return ("memory", str(e).strip().splitlines()[0] if str(e).strip() else "")
        return ("error", _portable(e), traceback.format_exc())
    finally:
        _set_memory_limit(None)


def _fresh_random_state() -> None:
    # Workers serve many visitors: one job's torch.manual_seed must not fix the
    # next job's random numbers, so every job starts from a fresh random seed.
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()


def _send(conn: Connection, message: tuple[Any, ...]) -> None:
    try:
        conn.send(message)
    except Exception as e:  # noqa: BLE001 - the result could not be pickled
        conn.send(("error", JobNotPortable(
            f"the job's result could not be sent back ({type(e).__name__}: {e}): "
            "return plain data (numbers, strings, lists, dicts, frozen records, detached tensors)"), ""))


def _portable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling, else a JobNotPortable with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return JobNotPortable(f"the job failed: {type(exc).__name__}: {exc}", kind="job")


def _limit_threads(threads: int) -> None:
    # The runner never imports torch itself: a torch the forkserver preloaded gets the
    # count now, one a job imports later reads it from the environment.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


def _vm_size() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _set_memory_limit(limit: int | None) -> None:
    # RLIMIT_AS caps the address space: allocations past it fail with
    # MemoryError (Python) or "can't allocate memory" (torch) instead of
    # letting the machine swap or the OOM killer pick a victim.
    if resource is None:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if limit is None:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        return
    current = _vm_size()
    if current is None:
        return
    soft = current + limit
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
