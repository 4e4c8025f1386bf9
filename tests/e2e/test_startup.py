"""Start-up: the banner, app discovery, and failures before serving."""

import os
from pathlib import Path

import pytest

from conftest import APPS, READY_PREFIX, READY_RE, WORKER_RE, auto_blocking_threads

DISCOVERY = APPS / "discovery"
EXIT_TIMEOUT = 20


def ppid_of(pid):
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_banner(serve):
    server = serve("pep3333:application", validated=True)
    lines = server.stdout.splitlines()
    ready_index = next(i for i, line in enumerate(lines) if line.startswith(READY_PREFIX))
    want = (f"🔥 m0serve: pep3333:application on http://127.0.0.1:{server.port} "
            f"(protocol=wsgi workers=1) blocking-threads={auto_blocking_threads()} (auto)")
    assert lines[ready_index] == want

    workers = [WORKER_RE.match(line) for line in lines[:ready_index]]
    workers = [m for m in workers if m]
    assert len(workers) == 1, f"want one '[worker 0] pid=PID armed for a graceful stop' line before the banner:\n{server.stdout}"
    pid = int(workers[0]["pid"])
    assert pid == server.proc.pid or ppid_of(pid) == server.proc.pid, (pid, server.proc.pid)
    assert server.get("/ok").status_code == 200


def test_explicit_blocking_threads_in_banner(serve):
    server = serve("pep3333:application", blocking_threads=3, validated=True)
    assert server.ready_line == (f"🔥 m0serve: pep3333:application on http://127.0.0.1:{server.port} "
                                 f"(protocol=wsgi workers=1) blocking-threads=3")


@pytest.mark.parametrize("spec, resolved, body", [
    ("mod", "mod.wsgi:application", b"served by mod.wsgi:application\n"),
    ("modapp", "modapp:app", b"served by modapp:app\n"),
    ("modapp:app", "modapp:app", b"served by modapp:app\n"),
])
def test_discovery(serve, spec, resolved, body):
    server = serve(spec, app_dir=DISCOVERY, validated=True)
    m = READY_RE.match(server.ready_line)
    assert m, server.ready_line
    assert m["spec"] == resolved
    r = server.get("/")
    assert r.status_code == 200 and r.content == body


def test_discovery_takes_a_django_projects_asgi_module_first(serve, tmp_path):
    """startproject writes asgi.py beside wsgi.py: a bare MODULE tries
    MODULE.asgi:application first, and serves it on the executor."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "django_site"
    server = serve("mysite", app_dir=examples, env={"M0_EXAMPLE_DB": str(tmp_path / "db.sqlite3")})
    m = READY_RE.match(server.ready_line)
    assert m and m["spec"] == "mysite.asgi:application" and m["protocol"] == "asgi", server.ready_line
    assert m["loop"] in ("uvloop", "asyncio"), server.ready_line


def test_protocol_wsgi_passes_over_the_asgi_module(serve, tmp_path):
    """--protocol wsgi: discovery passes over asgi.py and serves wsgi.py."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "django_site"
    server = serve("mysite", app_dir=examples, args=("--protocol", "wsgi"),
                   env={"M0_EXAMPLE_DB": str(tmp_path / "db.sqlite3")})
    m = READY_RE.match(server.ready_line)
    assert m and m["spec"] == "mysite.wsgi:application" and m["protocol"] == "wsgi", server.ready_line


def test_app_failing_at_import_exits_1(serve):
    server = serve("failing_import", app_dir=DISCOVERY, wait=False)
    rc = server.wait_exit(EXIT_TIMEOUT)
    assert rc is not None, f"still running after {EXIT_TIMEOUT}s\n{server.describe()}"
    assert rc == 1, server.describe()
    assert "Traceback" in server.stderr
    assert "RuntimeError: failing_import: this module refuses to import" in server.stderr
    assert READY_PREFIX not in server.stdout


def test_missing_module_exits_1_with_a_clear_message(serve):
    server = serve("no_such_module_xyz", app_dir=DISCOVERY, wait=False)
    rc = server.wait_exit(EXIT_TIMEOUT)
    assert rc is not None, f"still running after {EXIT_TIMEOUT}s\n{server.describe()}"
    assert rc == 1, server.describe()
    assert "no_such_module_xyz" in server.stderr
    assert READY_PREFIX not in server.stdout


def test_missing_attribute_exits_1(serve):
    server = serve("modapp:no_such_callable", app_dir=DISCOVERY, wait=False)
    rc = server.wait_exit(EXIT_TIMEOUT)
    assert rc is not None, f"still running after {EXIT_TIMEOUT}s\n{server.describe()}"
    assert rc == 1, server.describe()
    assert "no_such_callable" in server.stderr
    assert READY_PREFIX not in server.stdout


def test_no_libpython_exits_78_with_one_line(serve):
    server = serve("pep3333:application", wait=False,
                   env={"M0_PYTHON_LIBRARY": "/nonexistent/libpython.so"})
    rc = server.wait_exit(EXIT_TIMEOUT)
    assert rc is not None, f"still running after {EXIT_TIMEOUT}s\n{server.describe()}"
    assert rc == 78, server.describe()
    lines = [line for line in server.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"want exactly one stderr line, got:\n{server.stderr}"
    assert "M0_PYTHON_LIBRARY" in lines[0]
    assert READY_PREFIX not in server.stdout


@pytest.mark.parametrize("qos, nice, batch", [
    ("default", 0, False),
    ("utility", 5, True),
    ("background", 10, True),
    pytest.param("user-interactive", -10, False,
                 marks=pytest.mark.skipif(os.geteuid() != 0, reason="a nice level below 0 needs root")),
])
def test_qos_sets_the_python_threads_scheduling(serve, qos, nice, batch):
    server = serve("pep3333:application", args=["--qos", qos], validated=True)
    for _ in range(5):  # whichever thread serves it
        assert server.get_json("/sched") == {"nice": nice, "batch": batch}
