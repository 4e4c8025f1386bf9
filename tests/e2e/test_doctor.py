"""m0serve --doctor: one JSON object, the checks serving runs, the same exit code."""

import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest

from conftest import APPS, FREE_THREADED, M0SERVE, READY_PREFIX, free_port

SCHEMA = json.loads((Path(__file__).parent / "doctor.schema.json").read_text())
DISCOVERY = APPS / "discovery"
TIMEOUT = 30


def run(args, env=None, timeout=TIMEOUT):
    return subprocess.run([str(M0SERVE), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def doctor(args, env=None):
    proc = run(["--doctor", *args], env)
    last = proc.stdout.strip().splitlines()[-1]
    report = json.loads(last)
    jsonschema.validate(report, SCHEMA)
    assert report["exit"] == proc.returncode, proc.stdout
    return report, proc.returncode


def serve_exit(args, env=None):
    """The exit code serving gives, or 0 once it is ready (then it is stopped)."""
    port = [] if "M0_PORT" in (env or {}) else ["--port", str(free_port())]
    host = [] if "M0_HOST" in (env or {}) else ["--host", "127.0.0.1"]
    proc = subprocess.Popen([str(M0SERVE), *host, *port, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    try:
        for line in proc.stdout:
            if line.startswith(READY_PREFIX):
                proc.terminate()
                assert proc.wait(TIMEOUT) == 0
                return 0
        return proc.wait(TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# A bad M0_PORT is ignored with a note, and serving takes port 8000: on a
# loopback address of the test's own, where a server a developer runs on
# 127.0.0.1:8000 does not collide with it.
OWN_HOST = "127.0.0.77"

# Each case: arguments (an application spec last, or none), extra environment.
CASES = {
    "environment only": ([], {}),
    "ready app": (["--app-dir", str(DISCOVERY), "modapp:app"], {}),
    "discovered app": (["--app-dir", str(DISCOVERY), "mod"], {}),
    "port 0 by flag": (["--port", "0", "--app-dir", str(DISCOVERY), "modapp"], {}),
    "port 0 by variable": (["--app-dir", str(DISCOVERY), "modapp"], {"M0_PORT": "0"}),
    "port bad by variable": (["--app-dir", str(DISCOVERY), "modapp"], {"M0_PORT": "80eighty", "M0_HOST": OWN_HOST}),
    "port bad by flag": (["--port", "80eighty", "modapp"], {}),
    "pg-listen without realtime": (["--pg-listen", "postgres://m0@127.0.0.1:1/m0", "--app-dir", str(DISCOVERY), "modapp"], {}),
    "pg-listen unreachable": (["--realtime", "--app-dir", str(DISCOVERY), "modapp"], {"M0_PG_LISTEN": "postgres://m0:secret@127.0.0.1:1/m0"}),
    "replay frames over the cap": (["--replay-frames", "5000", "--app-dir", str(DISCOVERY), "modapp"], {}),
    "import fails": (["--app-dir", str(DISCOVERY), "failing_import"], {}),
    "no such module": (["--app-dir", str(DISCOVERY), "no_such_module_here"], {}),
    "no libpython": (["--app-dir", str(DISCOVERY), "modapp"], {"M0_PYTHON_LIBRARY": "/nonexistent/libpython3.11.so"}),
    "asgi app": (["--app-dir", str(DISCOVERY), "asgimod"], {}),
    "asgi app, buffered": (["--blocking-threads", "2", "--app-dir", str(DISCOVERY), "asgimod"], {}),
    "asgi app, loop asyncio": (["--app-dir", str(DISCOVERY), "asgimod"], {"M0_LOOP": "asyncio"}),
    "asgi app, loop unknown": (["--loop", "trio", "--app-dir", str(DISCOVERY), "asgimod"], {}),
    "asgi app, inverted loop": (["--app-dir", str(DISCOVERY), "asgimod"], {"M0_INVERTED": "1"}),
    "inverted loop, a wsgi app": (["--app-dir", str(DISCOVERY), "modapp"], {"M0_INVERTED": "1"}),
    "static dir missing": (["--static", "/s=/nonexistent/dir", "--app-dir", str(DISCOVERY), "modapp"], {}),
    "static dir": (["--static", f"/s={DISCOVERY}", "--app-dir", str(DISCOVERY), "modapp"], {}),
}
WANT = {
    "environment only": 0, "ready app": 0, "discovered app": 0,
    "port 0 by flag": 78, "port 0 by variable": 78, "port bad by variable": 0, "port bad by flag": 2,
    "pg-listen without realtime": 78, "pg-listen unreachable": 78, "replay frames over the cap": 78,
    "import fails": 1, "no such module": 1, "no libpython": 78,
    "asgi app": 0, "asgi app, buffered": 0, "asgi app, loop asyncio": 0, "asgi app, loop unknown": 2,
    "asgi app, inverted loop": 0, "inverted loop, a wsgi app": 78, "static dir missing": 78, "static dir": 0,
}


@pytest.mark.gil
def test_doctor_reports_the_asgi_loop():
    """topology.loop: pump on the executor, n/a on the buffered path."""
    report, code = doctor(["--app-dir", str(DISCOVERY), "asgimod"])
    assert code == 0 and report["app"]["protocol"] == "asgi", report
    topo = report["topology"]
    assert topo["loop"] == "pump" and topo["asgi_path"] == "executor", topo
    assert topo["event_loop"] in ("uvloop", "asyncio") and topo["pool"] is False, topo
    report, _ = doctor(["--app-dir", str(DISCOVERY), "asgimod"], {"M0_LOOP": "asyncio"})
    assert report["topology"]["event_loop"] == "asyncio", report["topology"]
    assert report["config"]["loop"] == {"value": "asyncio", "source": "env", "env": "M0_LOOP"}
    report, _ = doctor(["--blocking-threads", "2", "--app-dir", str(DISCOVERY), "asgimod"])
    assert report["topology"]["loop"] == "n/a" and report["topology"]["asgi_path"] == "buffered", report["topology"]
    report, _ = doctor(["--app-dir", str(DISCOVERY), "modapp"])
    assert report["topology"]["loop"] == "n/a" and "asgi_path" not in report["topology"], report["topology"]


@pytest.mark.gil
def test_loop_uvloop_without_uvloop_is_refused(tmp_path):
    """--loop uvloop where uvloop is not importable: 78 with the fix, from
    the doctor and from serving alike."""
    # A sitecustomize that hides uvloop from this interpreter.
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['uvloop'] = None\n")
    env = {"PYTHONPATH": str(tmp_path)}
    args = ["--loop", "uvloop", "--app-dir", str(DISCOVERY), "asgimod"]
    report, code = doctor(args, env)
    failed = [c for c in report["checks"] if not c["ok"]]
    assert code == 78 and failed and failed[0]["name"] == "loop", report["checks"]
    assert "uvloop" in failed[0]["detail"] and "pip install uvloop" in failed[0]["fix"]
    assert serve_exit(args, env) == 78


@pytest.mark.parametrize("name", sorted(CASES))
def test_doctor_exit_matches_serving(name):
    args, env = CASES[name]
    want = WANT[name]
    if FREE_THREADED and name.startswith("asgi app") and want == 0:
        want = 78  # an ASGI application, refused on a free-threaded build
    report, code = doctor(args, env)
    assert code == want, report["checks"]
    failed = [c for c in report["checks"] if not c["ok"]]
    assert (code == 0) == (not failed), report["checks"]
    if failed:
        assert failed[0]["exit"] == code
    if args and not any(a == "--port" for a in args):
        # Serving the same arguments (on a free port) ends the same way.
        assert serve_exit(args, env) == code


def test_doctor_reports_sources_and_the_resolved_app():
    report, code = doctor(["--blocking-threads", "3", "--app-dir", str(DISCOVERY), "mod"],
                          {"M0_MAX_BODY": "4m", "M0_PORT": "80eighty"})
    assert code == 0
    cfg = report["config"]
    assert cfg["blocking-threads"] == {"value": "3", "source": "flag", "env": "M0_BLOCKING_THREADS"}
    assert cfg["max-body"]["source"] == "env"
    assert cfg["port"] == {"value": "8000", "source": "default", "env": "M0_PORT"}
    assert report["app"]["resolved"] == "mod.wsgi:application" and report["app"]["protocol"] == "wsgi"
    assert report["topology"]["blocking_threads"] == 3 and report["topology"]["blocking_threads_auto"] is False
    assert report["python"]["shared"] is True


def test_doctor_never_prints_a_grant_key():
    secret = "s3cr3t-grant-key-value"
    proc = run(["--doctor"], {"M0_GRANT_KEY": secret, "M0_GRANT_KEY_PREV": secret + "-old"})
    assert secret not in proc.stdout and secret not in proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["env"]["M0_GRANT_KEY"] == "set" and report["env"]["M0_GRANT_KEY_PREV"] == "set"


def test_doctor_binds_nothing():
    """The doctor does not listen, so a port in use is no failure for it."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        report, code = doctor(["--host", "127.0.0.1", "--port", str(port), "--app-dir", str(DISCOVERY), "modapp"])
    assert code == 0, report["checks"]


def test_refusals_are_one_line_with_a_fix():
    proc = run(["--port", "0", "--app-dir", str(DISCOVERY), "modapp"])
    assert proc.returncode == 78
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(")") and "(" in lines[0], proc.stderr


def test_help_names_every_variable():
    proc = run(["--help"])
    assert proc.returncode == 0
    for var in ["M0_HOST", "M0_PORT", "M0_WORKERS", "M0_THREADS", "M0_BLOCKING_THREADS", "M0_ACCESS_LOG",
                "M0_QOS", "M0_SPAWN_WORKERS", "M0_MAX_BODY", "M0_BODY_TIMEOUT", "M0_REPLAY_FRAMES",
                "M0_MAX_KEEPALIVE_REQUESTS", "M0_PG_LISTEN", "M0_BIND", "M0_UDS", "M0_UNIX_MODE", "M0_BACKLOG",
                "M0_PID_FILE", "M0_MAX_REQUESTS", "M0_MAX_REQUESTS_JITTER", "M0_WORKERS_MAX_RSS", "M0_WORKERS_LIFETIME"]:
        assert var in proc.stdout, var
    for flag in ["--idle-timeout", "--protocol", "--app-dir", "--mount", "--static", "--static-cache-control",
                 "--static-header", "--health-path", "--metrics", "--realtime", "--reload", "--doctor"]:
        assert flag in proc.stdout, flag


def real_libpython():
    import sysconfig

    return str(Path(sysconfig.get_config_var("LIBDIR")) / sysconfig.get_config_var("LDLIBRARY"))


@pytest.mark.parametrize("env, want", [
    ({}, "python3"),
    ({"MOJO_PYTHON_LIBRARY": "LIB"}, "MOJO_PYTHON_LIBRARY"),
    ({"M0_PYTHON_LIBRARY": "LIB", "MOJO_PYTHON_LIBRARY": "/nonexistent/libpython3.11.so"}, "M0_PYTHON_LIBRARY"),
], ids=["neither", "seed's name", "both: ours wins"])
def test_library_variables(env, want):
    """MOJO_PYTHON_LIBRARY, the seed's name, names the library as
    M0_PYTHON_LIBRARY does; when both are set M0_PYTHON_LIBRARY wins, and
    the doctor says which was used. Serving agrees."""
    env = {k: real_libpython() if v == "LIB" else v for k, v in env.items()}
    env = {"M0_PYTHON_LIBRARY": "", "MOJO_PYTHON_LIBRARY": "", **env}
    report, code = doctor(["--app-dir", str(DISCOVERY), "modapp:app"], env)
    assert code == 0, report
    assert report["python"]["library_from"] == want, report["python"]
    if want != "python3":
        assert report["python"]["library"] == real_libpython(), report["python"]
    assert serve_exit(["--app-dir", str(DISCOVERY), "modapp:app"], env) == 0


def test_seed_library_variable_refused_by_its_name():
    proc = run(["--app-dir", str(DISCOVERY), "modapp:app"],
               {"M0_PYTHON_LIBRARY": "", "MOJO_PYTHON_LIBRARY": "/nonexistent/libpython3.11.so"})
    assert proc.returncode == 78, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "MOJO_PYTHON_LIBRARY=/nonexistent/libpython3.11.so does not exist" in lines[0], lines


@pytest.mark.gil
def test_inverted_loop_refusal_says_why():
    """M0_INVERTED=1 beside what the inverted loop does not serve is refused
    with 78 naming it, from the doctor and from serving alike; served, the
    doctor's topology says loop: inverted."""
    env = {"M0_INVERTED": "1"}
    args = ["--metrics", "--app-dir", str(DISCOVERY), "asgimod"]
    report, code = doctor(args, env)
    failed = [c for c in report["checks"] if not c["ok"]]
    assert code == 78 and [c["name"] for c in failed] == ["inverted"], report["checks"]
    assert "--metrics" in failed[0]["detail"], failed[0]
    assert "unset M0_INVERTED" in failed[0]["fix"], failed[0]
    proc = run(args, env)
    assert proc.returncode == 78, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "M0_INVERTED=1 beside --metrics" in line, proc.stderr
    report, code = doctor(["--app-dir", str(DISCOVERY), "asgimod"], env)
    assert code == 0 and report["topology"]["loop"] == "inverted", report["topology"]