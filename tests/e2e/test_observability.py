"""--access-log, --metrics and --health-path through the binary."""

import concurrent.futures
import json
import re
import shutil
import subprocess
import time

import pytest
import requests

from conftest import FRONT_ENDS, HTTP_TIMEOUT, serve_on, wait_until

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once

TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
FIELDS = ["time", "level", "msg", "method", "path", "status", "dur_us", "bytes", "remote_addr"]


def access_lines(server):
    return [json.loads(line) for line in server.stdout.splitlines() if line.startswith('{"time"')]


def test_access_log_has_exactly_the_fields(serve):
    server = serve("pep3333:application", args=["--access-log"], validated=True)
    assert server.get("/ok?x=1").text == "ok\n"
    requests.head(server.url("/ok"), timeout=HTTP_TIMEOUT)
    body = "".join(requests.get(server.url("/stream?n=3"), timeout=HTTP_TIMEOUT).text)
    wait_until(lambda: len(access_lines(server)) >= 3, 5, "three access lines")
    get_ok, head_ok, stream = access_lines(server)[:3]
    for line in (get_ok, head_ok, stream):
        assert list(line) == FIELDS, line
        assert TIME_RE.match(line["time"]), line["time"]
        assert line["level"] == "INFO" and line["msg"] == "access"
        assert isinstance(line["status"], int) and isinstance(line["dur_us"], int) and isinstance(line["bytes"], int)
        assert line["remote_addr"] == "127.0.0.1"
    assert (get_ok["method"], get_ok["path"], get_ok["status"], get_ok["bytes"]) == ("GET", "/ok", 200, 3)
    assert (head_ok["method"], head_ok["bytes"]) == ("HEAD", 0)
    assert stream["path"] == "/stream" and stream["bytes"] == len(body.encode())


def test_no_access_log_by_default(serve):
    server = serve("pep3333:application", validated=True)
    server.get("/ok")
    assert access_lines(server) == []


def test_health_is_answered_before_python(serve):
    server = serve("pep3333:application", args=["--health-path", "/healthz"], blocking_threads=1, validated=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        slow = pool.submit(requests.get, server.url("/sleep?s=1.5"), timeout=HTTP_TIMEOUT)
        time.sleep(0.3)  # the one Python thread is asleep now
        r = requests.get(server.url("/healthz"), timeout=1)
        assert not slow.done(), "health waited for the Python thread"
        assert slow.result(timeout=HTTP_TIMEOUT).status_code == 200
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    assert r.json()["status"] == "ok"


def test_metrics_exposition(serve, tmp_path):
    server = serve("pep3333:application", args=["--metrics"], validated=True)
    for _ in range(3):
        server.get("/ok")
    text = requests.get(server.url("/__metrics"), timeout=HTTP_TIMEOUT).text
    count = re.search(r'^m0_http_request_duration_seconds_count\{code="200",method="GET"\} (\d+)$', text, re.M)
    assert count and int(count.group(1)) >= 3, text[:2000]
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package prometheus)")
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr


def test_refusals_are_logged_and_counted(serve):
    """A 413 the server gives before the application runs is still a response."""
    server = serve("pep3333:application", args=["--access-log", "--metrics", "--max-body", "1k"], validated=True)
    r = requests.post(server.url("/input"), data=b"x" * 4096, timeout=HTTP_TIMEOUT)
    assert r.status_code == 413
    wait_until(lambda: any(line["status"] == 413 for line in access_lines(server)), 5, "the 413's access line")
    line = next(line for line in access_lines(server) if line["status"] == 413)
    assert list(line) == FIELDS and line["method"] == "POST" and line["path"] == "/input" and line["bytes"] > 0
    text = requests.get(server.url("/__metrics"), timeout=HTTP_TIMEOUT).text
    assert re.search(r'^m0_http_request_duration_seconds_count\{code="413",method="POST"\} 1$', text, re.M), text[:3000]


def test_http10_stream_is_logged_with_its_bytes(serve):
    server = serve("pep3333:application", args=["--access-log"], validated=True)
    out = subprocess.run(["curl", "-s", "--http1.0", server.url("/stream?n=3&delay=0.3")],
                         capture_output=True, timeout=HTTP_TIMEOUT)
    body = out.stdout
    assert body.count(b"chunk") == 3, out
    wait_until(lambda: access_lines(server), 5, "the access line")
    line = access_lines(server)[-1]
    assert line["status"] == 200 and line["bytes"] == len(body), line
    assert line["dur_us"] < 300_000, line  # to the head, not to the end of the body


def test_duration_counts_from_the_headers(serve):
    """An upload that takes 0.6 s is logged with at least that long."""
    import socket
    server = serve("pep3333:application", args=["--access-log"], validated=True)
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(b"POST /input HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\nConnection: close\r\n\r\n")
        for _ in range(3):
            time.sleep(0.2)
            s.sendall(b"0123456789")
        while s.recv(65536):
            pass
    wait_until(lambda: access_lines(server), 5, "the access line")
    line = access_lines(server)[-1]
    assert line["path"] == "/input" and line["dur_us"] >= 550_000, line


GUNICORN_LINE = re.compile(r'^(?P<h>\S+) - (?P<u>\S+) \[(?P<t>\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\] '
                           r'"(?P<r>[^"]*)" (?P<s>\d{3}) (?P<b>\S+) "(?P<f>[^"]*)" "(?P<a>[^"]*)"$')


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_access_log_in_gunicorns_format(serve, front_end):
    """--access-log-format gunicorn is gunicorn's default line, field for
    field, for pipelines that parse it; more atoms by name."""
    server = serve_on(serve, front_end, "pep3333:application", args=["--access-log-format", "gunicorn"])
    requests.get(server.url("/ok?x=1"), auth=("bob", "pw"), headers={"Referer": "http://ref/", "User-Agent": "probe/1"},
                  timeout=HTTP_TIMEOUT)
    requests.post(server.url("/input"), data=b"x" * 10, timeout=HTTP_TIMEOUT)
    wait_until(lambda: len([ln for ln in server.stdout.splitlines() if GUNICORN_LINE.match(ln)]) >= 2, 5,
               lambda: f"two access lines\n{server.stdout}")
    lines = [GUNICORN_LINE.match(ln).groupdict() for ln in server.stdout.splitlines() if GUNICORN_LINE.match(ln)]
    get, post = lines[0], lines[1]
    assert get == {**get, "h": "127.0.0.1", "u": "bob", "r": "GET /ok?x=1 HTTP/1.1", "s": "200", "b": "3",
                   "f": "http://ref/", "a": "probe/1"}, get
    assert post["r"] == "POST /input HTTP/1.1" and post["u"] == "-" and post["f"] == "-", post
    # The access log is on with a format alone, and writes no JSON line.
    assert access_lines(server) == []


def test_access_log_format_atoms(serve):
    fmt = '%(m)s %(U)s %(q)s %(H)s %(s)s %(B)s %(D)s %(p)s %({X-Trace}i)s %({Content-Type}o)s %({M0_TEST_ENV}e)s 100%%'
    server = serve("pep3333:application", args=["--access-log-format", fmt], env={"M0_TEST_ENV": "staging"})
    requests.get(server.url("/ok?y=2"), headers={"X-Trace": "t-1"}, timeout=HTTP_TIMEOUT)
    wait_until(lambda: "GET /ok" in server.stdout, 5, "the access line")
    line = next(ln for ln in server.stdout.splitlines() if ln.startswith("GET /ok"))
    m = re.fullmatch(r"GET /ok y=2 HTTP/1.1 200 3 (\d+) <(\d+)> t-1 (.+) staging 100%", line)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) == server.proc.pid, line
    assert m.group(3).startswith("text/plain"), line


def test_access_log_fields_and_refusals(serve):
    server = serve("pep3333:application", args=["--access-log", "--access-log-fields", "user_agent,referer,request_id"])
    requests.get(server.url("/ok"), headers={"User-Agent": "probe/2", "Referer": "http://r/", "X-Request-ID": "req-9"},
                 timeout=HTTP_TIMEOUT)
    wait_until(lambda: access_lines(server), 5, "the access line")
    line = access_lines(server)[0]
    assert list(line) == FIELDS + ["user_agent", "referer", "request_id"], line
    assert (line["user_agent"], line["referer"], line["request_id"]) == ("probe/2", "http://r/", "req-9")
    bad = serve("pep3333:application", args=["--access-log-format", "%(h)s", "--access-log-fields", "referer"], wait=False)
    assert bad.wait_exit(30) == 78 and "put the headers in the format instead" in bad.stderr
    unknown = serve("pep3333:application", args=["--access-log-format", "%(zz)s"], wait=False)
    assert unknown.wait_exit(30) == 2 and "no atom %(zz)s" in unknown.stderr
