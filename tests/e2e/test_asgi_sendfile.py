"""http.response.pathsend goes out with sendfile: the file's bytes never pass
through the server's user space. Proved by tracing the server's threads with
strace while one file is sent, and counting what went through sendfile and
what through write."""

import hashlib
import os
import re
import shutil
import subprocess
import time
import urllib.parse

import pytest
import requests

from conftest import HTTP_TIMEOUT

# Every test here serves an ASGI application: a free-threaded build refuses it.
pytestmark = pytest.mark.gil

SIZE = 4 << 20


def trace(pid, out):
    """strace on every thread of pid, as a Popen; stop it with SIGINT."""
    tids = sorted(os.listdir(f"/proc/{pid}/task"))
    argv = ["strace", "-f", "-qq", "-e", "trace=sendfile,write,writev", "-o", str(out)]
    for tid in tids:
        argv += ["-p", tid]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # Attached to every thread (a thread started later is a traced one's
    # clone, which -f follows), or strace gave up.
    deadline = time.monotonic() + HTTP_TIMEOUT
    while proc.poll() is None and not traced_by(pid, proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, f"strace could not attach: {proc.stderr.read()}"
    return proc


def traced_by(pid, tracer):
    """Whether every thread of pid is traced by tracer."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                if f"TracerPid:\t{tracer}\n" not in f.read():
                    return False
        except FileNotFoundError:
            pass  # the thread ended
    return True


def wait_traced(out, n):
    """Waits until the trace accounts for n bytes, by sendfile or write.

    The client can hold a response's last byte before strace has logged the
    return of the call that sent it: the thread waits at the call's exit for
    strace, which may still be busy with other threads' stops. A SIGINT then
    detaches it with the call unfinished ("sendfile(... <detached ...>"), and
    its count is lost. Gives up after HTTP_TIMEOUT; the assertions judge."""
    deadline = time.monotonic() + HTTP_TIMEOUT
    while sum(traced_bytes(out)) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def traced_bytes(out):
    """Bytes that went out by sendfile, and by write/writev, in a trace."""
    sent = written = 0
    for line in out.read_text().splitlines():
        # A call another thread interrupted in the log ends on a line of its own.
        m = (re.search(r"\b(sendfile|write|writev)\(.*\)\s+=\s+(\d+)", line)
             or re.search(r"<\.\.\. (sendfile|write|writev) resumed>.*=\s+(\d+)", line))
        if not m:
            continue
        if m[1] == "sendfile":
            sent += int(m[2])
        else:
            written += int(m[2])
    return sent, written


def test_pathsend_uses_sendfile(serve, tmp_path):
    assert shutil.which("strace"), "strace is not installed (scripts/test installs it)"
    data = os.urandom(SIZE)
    path = tmp_path / "payload.bin"
    path.write_bytes(data)
    server = serve("asgi_raw:application")
    out = tmp_path / "strace.txt"
    tracer = trace(server.proc.pid, out)
    try:
        r = requests.get(server.url("/pathsend?path=" + urllib.parse.quote(str(path))), timeout=HTTP_TIMEOUT)
        wait_traced(out, len(r.content))
    finally:
        tracer.send_signal(2)
        tracer.wait(10)
    assert r.status_code == 200 and r.headers["x-sent-by"] == "pathsend"
    assert hashlib.sha256(r.content).digest() == hashlib.sha256(data).digest()
    sent, written = traced_bytes(out)
    assert sent == SIZE, f"sendfile carried {sent} of {SIZE} bytes\n{out.read_text()[:2000]}"
    assert written < 64 << 10, f"{written} bytes went through write: the file was copied"
