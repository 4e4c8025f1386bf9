"""--interpreters N: WSGI applications served from N subinterpreters, each
with its own GIL, in one process (docs/running.md#interpreters).

On CPython 3.13 and newer GIL builds every request runs in one of the N
subinterpreters, never the main one, and both take requests; Flask, Django
with SQLite and the realtime quickstart work as they do without; streamed
bodies, mounts, --workers and --realtime compose; the drain runs every
interpreter's atexit handlers; --timeout interrupts a request in a
subinterpreter. An ASGI application runs in each, on a loop of its own
(the executor) or on the buffered path (--blocking-threads N), its
lifespan in each. Where it cannot run (3.12 and older, a free-threaded
build, --loop uvloop, an extension module without support) it is refused
with 78 saying why."""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import APPS, EXAMPLES, FREE_THREADED, M0SERVE, READY_PREFIX, free_port, wait_until

SUPPORTED = sys.version_info >= (3, 13) and not FREE_THREADED
needs = pytest.mark.skipif(not SUPPORTED, reason="needs CPython 3.13 or newer, a GIL build")
WHY_NOT = ("is a free-threaded build" if FREE_THREADED else
           "abort the process when two import the same module at once" if sys.version_info >= (3, 12) else
           "subinterpreters with their own GIL came in 3.12")


def who(server, path="/", n=1, parallel=1):
    """What served n requests to path, sent parallel at a time."""
    def one(_):
        r = server.get(path)
        assert r.status_code == 200, r.text
        return r.json()
    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(one, range(n)))


def run(*args, app="interp_app:application", app_dir=APPS, env=None):
    return subprocess.run([str(M0SERVE), "--port", str(free_port()), "--app-dir", str(app_dir), *args, app],
                          capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
                          stdin=subprocess.DEVNULL)


@needs
def test_requests_run_in_every_subinterpreter_and_never_the_main_one(serve, tmp_path):
    bye = tmp_path / "atexit"
    bye.mkdir()
    server = serve("interp_app:application", args=("--interpreters", "2", "--blocking-threads", "2"),
                   env={"M0_TEST_ATEXIT_DIR": str(bye)})
    assert "interpreters=2" in server.ready_line, server.ready_line
    seen = who(server, "/slow?0.2", n=16, parallel=8)
    interps = {s["interp"] for s in seen}
    assert len(interps) == 2, seen
    for i in interps:
        peak = max(s["peak"] for s in seen if s["interp"] == i)
        assert peak <= 2, (i, peak, "requests at once, more than --blocking-threads")
    assert all(s["multiprocess"] and s["multithread"] for s in seen), seen
    assert server.stop() == 0
    # Every interpreter ran its atexit handlers: the two that served, and
    # the main one, which imported the application to check it.
    left = sorted(p.name for p in bye.iterdir())
    assert len(left) == 3, left
    assert {int(n.split("-")[1]) for n in left} >= interps, (left, interps)


@needs
def test_workers_each_run_their_own_interpreters(serve):
    server = serve("interp_app:application", args=("--workers", "2", "--interpreters", "2"))
    pairs = set()

    def all_four():  # two workers, two interpreters each
        pairs.update((s["pid"], s["interp"]) for s in who(server, "/slow?0.05", n=16, parallel=8))
        return len(pairs) == 4
    wait_until(all_four, 30, lambda: f"two workers' two interpreters each to answer: {pairs}")
    assert len({pid for pid, _ in pairs}) == 2, pairs


@needs
def test_flask(serve):
    server = serve("app:app", app_dir=EXAMPLES / "flask_app", args=("--interpreters", "2"))
    r = server.get("/")
    assert r.status_code == 200 and "Flask on m0serve" in r.text, r.text[:500]
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda _: server.get("/").status_code, range(40)))
    assert codes == [200] * 40
    assert server.get("/no-such-page").status_code == 404


@needs
def test_django_with_sqlite(serve, tmp_path):
    db = tmp_path / "db.sqlite3"
    env = {"M0_EXAMPLE_DB": str(db)}
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=EXAMPLES / "django_site",
                             env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert migrate.returncode == 0, migrate.stderr
    args = ("--interpreters", "2")
    server = serve("mysite.wsgi:application", app_dir=EXAMPLES / "django_site", args=args, env=env)
    s = server.get("/")
    assert s.status_code == 200, s.text[:2000]
    token = s.cookies["csrftoken"]
    for i in range(4):
        r = server.post("/", data={"name": f"guest {i}", "message": f"hello {i}", "csrfmiddlewaretoken": token},
                        cookies={"csrftoken": token})
        assert r.status_code in (200, 302), r.text[:2000]
    with ThreadPoolExecutor(4) as pool:
        pages = list(pool.map(lambda _: server.get("/entries.json"), range(8)))
    for p in pages:
        assert p.status_code == 200, p.text[:2000]
        names = json.dumps(p.json())
        assert all(f"guest {i}" in names for i in range(4)), names
    assert server.get("/admin/login/").status_code == 200


@needs
def test_the_realtime_quickstart(serve):
    from test_realtime import SSE, start_room
    room = start_room(serve, "flask", args=("--interpreters", "2"))
    s = SSE(room.server, "/events")
    assert s.status == 200
    ids = [room.publish(f"frame {i}") for i in range(6)]
    assert len(set(ids)) == 6, ids
    for i, fid in enumerate(ids):
        assert s.event() == {"data": f"frame {i}".encode(), "id": fid}
    s.close()


@needs
def test_every_interpreter_publishes_to_the_one_hub(serve):
    from test_realtime import SSE
    server = serve("interp_app:application", args=("--interpreters", "2", "--blocking-threads", "2", "--realtime"))
    s = SSE(server, "/events")
    assert s.status == 200
    sent = []

    def both():  # publish, several at once, until both interpreters have
        sent.extend(who(server, "/publish", n=8, parallel=4))
        return len({p["interp"] for p in sent}) == 2
    wait_until(both, 30, lambda: f"both interpreters to publish: {sent}")
    ids = [p["id"] for p in sent]
    assert all(ids) and len(set(ids)) == len(ids), sent  # one counter numbers them all
    got = {}
    for _ in sent:
        e = s.event()
        got[e["id"]] = int(e["data"])
    assert got == {p["id"]: p["interp"] for p in sent}, (got, sent)
    s.close()


@pytest.fixture(scope="module")
def pep_in_a_subinterpreter(serve_module):
    # One subinterpreter: the close() counts the application keeps are that
    # interpreter's, and every request reads the same ones.
    if not SUPPORTED:
        pytest.skip("needs CPython 3.13 or newer, a GIL build")
    return serve_module("pep3333:application", args=("--interpreters", "1", "--blocking-threads", "2"),
                        validated=True)


@pytest.mark.parametrize("case", [
    "test_first_chunk_arrives_before_the_generator_finishes",
    "test_close_called_after_a_complete_stream",
    "test_close_called_when_the_client_disconnects_mid_stream",
    "test_error_mid_stream_truncates_the_chunked_body",
    "test_server_keeps_serving_after_stream_errors",
])
def test_streamed_bodies(pep_in_a_subinterpreter, case):
    """test_streaming's cases, on a subinterpreter's thread: the body is
    produced there part by part, a client that leaves interrupts it through
    the interpreter's own control thread, and close() runs there."""
    import test_streaming
    getattr(test_streaming, case)(pep_in_a_subinterpreter)


@needs
def test_a_mount_runs_in_every_interpreter(serve):
    server = serve("interp_app:application", args=("--interpreters", "2", "--mount", "/m=interp_app:application"))
    for path in ("/slow?0.2", "/m/slow?0.2"):
        assert len({s["interp"] for s in who(server, path, n=8, parallel=4)}) == 2, path


@needs
def test_timeout_interrupts_a_request_in_a_subinterpreter(serve):
    server = serve("interp_app:application", args=("--interpreters", "2", "--timeout", "1"))
    r = server.get("/forever")
    assert r.status_code == 504, r.text
    server.wait_for_stderr(r"request timed out")
    assert server.get("/").status_code == 200


@needs
def test_an_extension_module_without_support_is_refused_by_name(tmp_path):
    p = run("--interpreters", "2", app="interp_refused:application")
    assert p.returncode == 78, p.stderr
    assert "imports the extension module _testsinglephase, which does not support subinterpreters" in p.stderr, p.stderr
    assert "--workers N" in p.stderr, p.stderr
    doctor = subprocess.run([str(M0SERVE), "--doctor", "--interpreters", "2", "--app-dir", str(APPS),
                             "interp_refused:application"], capture_output=True, text=True, timeout=60)
    report = json.loads(doctor.stdout.strip().splitlines()[-1])
    check = next(c for c in report["checks"] if c["name"] == "interpreters")
    assert check["exit"] == 78 and "_testsinglephase" in check["detail"], check
    assert report["topology"]["interpreters"] == 2


# The two paths of an ASGI application: on the executor (--blocking-threads
# unset) a loop of asyncio's on a thread of its own in each interpreter; on
# the buffered path (--blocking-threads N) a loop on each of the threads
# that run its requests there.
ASGI_PATHS = {"executor": (), "buffered": ("--blocking-threads", "2")}


@needs
@pytest.mark.parametrize("path", ASGI_PATHS)
def test_asgi_runs_in_every_subinterpreter(serve, tmp_path, path):
    """An ASGI application runs in each subinterpreter on either path; its
    lifespan starts in each (the state a request sees is its own
    interpreter's) and shuts down in each at the drain; requests that
    overlap go to both."""
    shut = tmp_path / "shutdown"
    shut.mkdir()
    server = serve("interp_asgi:app", args=("--interpreters", "2", *ASGI_PATHS[path]),
                   env={"M0_TEST_SHUTDOWN_DIR": str(shut)})
    assert "interpreters=2" in server.ready_line, server.ready_line
    if path == "executor":
        assert "event-loop=asyncio" in server.ready_line, server.ready_line
    seen = who(server, "/?0.05", n=32, parallel=8)
    interps = {s["interp"] for s in seen}
    assert len(interps) == 2, seen
    assert all(s["started_in"] == s["interp"] for s in seen), seen
    assert server.stop() == 0
    assert {int(f.name) for f in shut.iterdir()} == interps
    assert "exiting anyway" not in server.stderr, server.stderr


@needs
@pytest.mark.parametrize("path", ASGI_PATHS)
def test_asgi_and_wsgi_mounts_share_the_interpreters(serve, path):
    """An ASGI mount and a WSGI mount both serve from both interpreters,
    and the drain is clean. On the buffered path the two share one pool of
    the interpreters' places, so that no request waits for a place past the
    pool's bounds; on the executor the ASGI mount has a loop in each."""
    server = serve(None, args=("--interpreters", "2", *ASGI_PATHS[path],
                               "--mount", "/a=interp_asgi:app", "--mount", "/w=interp_app:application"))
    asgi = who(server, "/a/?0.05", n=16, parallel=8)
    wsgi = who(server, "/w/slow?0.05", n=16, parallel=8)
    assert len({s["interp"] for s in asgi}) == 2 and len({s["interp"] for s in wsgi}) == 2, (asgi, wsgi)
    assert {s["interp"] for s in asgi} == {s["interp"] for s in wsgi}
    assert server.stop() == 0
    assert "exiting anyway" not in server.stderr, server.stderr


@needs
def test_streams_and_websockets_on_the_executor_in_every_subinterpreter(serve):
    """On the executor a streamed body and a WebSocket run on a loop in
    either interpreter: requests one after another take turns, and two
    WebSockets open at once are on different loops."""
    from websockets.sync.client import connect

    server = serve("interp_asgi:app", args=("--interpreters", "2"))
    streamed = set()
    for _ in range(4):
        r = server.get("/stream")
        assert r.status_code == 200, r.text
        parts = [line.split() for line in r.text.splitlines()]
        assert [p[0] for p in parts] == ["0", "1", "2"] and len({p[1] for p in parts}) == 1, r.text
        streamed.add(parts[0][1])
    assert len(streamed) == 2, streamed
    url = f"ws://127.0.0.1:{server.port}/ws"
    with connect(url, open_timeout=10) as a, connect(url, open_timeout=10) as b:
        echoed = []
        for conn in (a, b):
            conn.send("hello")
            word, interp = conn.recv(timeout=10).split()
            assert word == "hello"
            echoed.append(interp)
        assert echoed[0] != echoed[1] and set(echoed) == streamed, (echoed, streamed)
    assert server.stop() == 0


@needs
def test_blocking_threads_0_keeps_asgi_on_the_executor(serve):
    """--blocking-threads 0 is the executor's for an ASGI application, so
    it runs a loop in each interpreter (it is refused for WSGI only)."""
    server = serve("interp_asgi:app", args=("--interpreters", "2", "--blocking-threads", "0"))
    assert "event-loop=asyncio interpreters=2" in server.ready_line, server.ready_line
    assert len({s["interp"] for s in who(server, "/?0.05", n=16, parallel=8)}) == 2
    assert server.stop() == 0


@needs
def test_a_startup_that_fails_in_one_subinterpreter_fails_the_start(tmp_path):
    """The lifespan runs in each interpreter; one failure is the outcome,
    as one process's would be: exit 1 before the banner, naming it."""
    p = run("--interpreters", "2", app="interp_asgi:app", env={"M0_TEST_FAIL_ONE": str(tmp_path / "one")})
    assert p.returncode == 1, p.stderr
    assert any(line.startswith("m0serve: asgi: lifespan startup failed: failed in ") for line in p.stderr.splitlines()), p.stderr
    assert READY_PREFIX not in p.stdout, p.stdout


@needs
def test_blocking_threads_0_is_refused_for_wsgi():
    p = run("--interpreters", "2", "--blocking-threads", "0")
    assert p.returncode == 78, p.stderr
    assert "--blocking-threads 0 runs every WSGI request on one thread of the main interpreter" in p.stderr, p.stderr


@needs
def test_starlette_on_the_buffered_path(serve):
    server = serve("app:app", app_dir=EXAMPLES / "starlette_app", args=("--interpreters", "2", "--blocking-threads", "1"))
    r = server.get("/")
    assert r.status_code == 200, r.text
    assert server.stop() == 0


@needs
def test_starlette_on_the_executor(serve):
    """Starlette as it is written, on the executor in two subinterpreters:
    a page, a streamed body, a POST with a background task, and a
    WebSocket echo."""
    from websockets.sync.client import connect

    server = serve("app:app", app_dir=EXAMPLES / "starlette_app", args=("--interpreters", "2"))
    for _ in range(4):  # each interpreter's loop answers in turn
        r = server.get("/")
        assert r.status_code == 200, r.text
    r = server.get("/stream-polling?n=3")
    assert r.status_code == 200 and r.text == "line 0\nline 1\nline 2\n", r.text
    r = server.post("/signup", json={"email": "ada@example.com"})
    assert r.status_code == 202 and r.json() == {"signed_up": "ada@example.com"}, r.text
    for _ in range(2):
        with connect(f"ws://127.0.0.1:{server.port}/ws", open_timeout=10) as conn:
            conn.send("hello")
            assert conn.recv(timeout=10) == "HELLO"
            conn.send("bye")
            with pytest.raises(Exception):
                conn.recv(timeout=10)
            assert conn.close_code == 1000 and conn.close_reason == "bye"
    assert server.stop() == 0
    assert "exiting anyway" not in server.stderr, server.stderr


@needs
def test_uvloop_is_refused_beside_the_subinterpreters():
    p = run("--interpreters", "2", "--loop", "uvloop", app="interp_asgi:app")
    assert p.returncode == 78, p.stderr
    assert "uvloop's extension modules do not support subinterpreters" in p.stderr and "--loop auto or asyncio" in p.stderr, p.stderr


@needs
def test_fastapi_is_refused_by_its_extension_module():
    """FastAPI imports pydantic-core, which does not support subinterpreters."""
    p = run("--interpreters", "2", "--blocking-threads", "1", app="main:app", app_dir=EXAMPLES / "fastapi_app")
    assert p.returncode == 78, p.stderr
    assert "imports the extension module pydantic_core" in p.stderr and "--workers N" in p.stderr, p.stderr


@pytest.mark.skipif(SUPPORTED, reason="the refusal of a CPython without own-GIL subinterpreters")
def test_refused_where_there_are_none():
    p = run("--interpreters", "2")
    assert p.returncode == 78, p.stderr
    assert WHY_NOT in p.stderr, p.stderr


def test_the_doctor_reports_the_subinterpreters():
    doctor = subprocess.run([str(M0SERVE), "--doctor", "--interpreters", "2", "--app-dir", str(APPS),
                             "interp_app:application"], capture_output=True, text=True, timeout=60)
    report = json.loads(doctor.stdout.strip().splitlines()[-1])
    check = next(c for c in report["checks"] if c["name"] == "interpreters")
    if SUPPORTED:
        assert check["ok"] and doctor.returncode == 0, report["checks"]
        assert "2 subinterpreters, own GIL each" in check["detail"], check
    else:
        assert check["exit"] == 78 and WHY_NOT in check["detail"], check
