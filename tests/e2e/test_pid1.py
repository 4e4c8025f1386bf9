"""m0serve as PID 1 of a new PID namespace, as in a container."""

import concurrent.futures
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from conftest import APPS, HTTP_TIMEOUT, M0SERVE, READY_PREFIX, READY_TIMEOUT, STOP_TIMEOUT, children_of, free_port, wait_until

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = [pytest.mark.once, pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                                   reason="a new PID namespace needs root and unshare(1)")]


def children(pid):
    """Every child of a process, whichever of its threads is the parent."""
    return sorted(children_of(pid))


def state(pid):
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def test_pid1_reaps_orphans_and_drains():
    port = free_port()
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", str(M0SERVE), "--host", "127.0.0.1",
         "--port", str(port), "--app-dir", str(APPS), "pep3333:application"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
        start_new_session=True)
    lines = []
    ready = threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(READY_PREFIX):
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(READY_TIMEOUT), "".join(lines) + proc.stderr.read() if proc.poll() is not None else lines
        (init,) = children(proc.pid)
        nspid = [l for l in Path(f"/proc/{init}/status").read_text().splitlines() if l.startswith("NSpid:")][0]
        assert nspid.split()[-1] == "1", nspid  # PID 1 inside its namespace

        url = f"http://127.0.0.1:{port}"
        assert requests.get(url + "/orphan", timeout=HTTP_TIMEOUT).text == "spawned\n"
        # The orphan sleeps 0.2 s, then ends: let it, then its zombie must go.
        time.sleep(0.5)
        wait_until(lambda: all(state(c) != "Z" for c in children(init)), 5, "PID 1 to reap the orphan")
        assert len(children(init)) == 1  # the server alone

        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            slow = pool.submit(requests.get, url + "/sleep?s=1", timeout=HTTP_TIMEOUT)
            time.sleep(0.3)
            os.kill(init, signal.SIGTERM)
            r = slow.result(timeout=HTTP_TIMEOUT)
        assert r.status_code == 200 and r.text == "slept\n"
        assert proc.wait(STOP_TIMEOUT) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
