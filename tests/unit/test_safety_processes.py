"""`monet explore --jobs 2` killed by SIGTERM, SIGHUP, SIGINT or SIGKILL leaves no worker process
behind (monet_ir/explore/dispatch.py); the parent-watch fallback ends a worker whose parent is gone
where the kernel's parent-death signal is not available."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from monet_ir.explore import state as saved

REPO = Path(__file__).resolve().parents[2]
MLP = str(REPO / "tests" / "data" / "models" / "mlp_b4.onnx")


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet is dead)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


SIGNALS = ("SIGTERM", "SIGHUP", "SIGINT", "SIGKILL")


def test_killing_the_parent_leaves_no_worker(tmp_path):
    searches = {}
    for name in SIGNALS:  # all at once: the wait for the workers to start is shared
        out = tmp_path / name
        searches[name] = (out, subprocess.Popen(
            [sys.executable, "-m", "monet_ir.tools.monet", "explore", MLP, "--target", "tpu_like_quad_core", "--out",
             str(out), "--population", "16", "--generations", "1000000", "--seed", "5", "--jobs", "2", "--no-plots"],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True))
    try:
        workers = {}
        for name, (out, parent) in searches.items():
            assert wait_for(lambda: len([p for p in children(parent.pid) if alive(p)]) >= 2
                            and (out / saved.STATE_FILE).exists(), 120), name
            workers[name] = [p for p in children(parent.pid) if alive(p)]
        for name, (_, parent) in searches.items():
            os.kill(parent.pid, getattr(signal, name))
        for name, (out, parent) in searches.items():
            number = getattr(signal, name)
            assert parent.wait(30) == (-number if name == "SIGKILL" else 128 + number), name
            assert wait_for(lambda: not any(alive(p) for p in workers[name]), 10), (name, workers[name])
            if name != "SIGKILL":
                assert "interrupted: the state after the last complete generation is in" in parent.stderr.read().decode()
            saved.load(out)  # the state of the last generation is whole
    finally:
        for _, parent in searches.values():
            if parent.poll() is None:
                parent.kill()
                parent.wait()
            parent.stderr.close()


WORKER_WITHOUT_PDEATHSIG = """
import ctypes, os, subprocess, sys, time
child = '''
import ctypes, os, time
def no_prctl(*args, **kwargs):
    raise OSError("no prctl here")
ctypes.CDLL = no_prctl
from monet_ir.explore import dispatch
dispatch._watch_parent(os.getppid())
print("watching", flush=True)
time.sleep(60)
'''
worker = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE)
assert worker.stdout.readline() == b"watching\\n"
print(worker.pid, flush=True)
os._exit(0)
"""


def test_the_parent_watch_ends_a_worker_without_the_kernels_help():
    middle = subprocess.run([sys.executable, "-c", WORKER_WITHOUT_PDEATHSIG], capture_output=True, text=True,
                            cwd=REPO, timeout=60)
    worker = int(middle.stdout.strip())
    try:
        assert wait_for(lambda: not alive(worker), 5)
    finally:
        if alive(worker):
            os.kill(worker, signal.SIGKILL)
