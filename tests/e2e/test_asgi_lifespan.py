"""ASGI lifespan: startup before serving, state, shutdown on SIGTERM,
failures, applications without lifespan, and the drain of streams."""

import json
import signal
import socket
import uuid

import pytest

from conftest import APPS, HOST, HTTP_TIMEOUT, READY_PREFIX, READY_RE, RawReader, http_request, \
    read_response, wait_until

# Every test here serves an ASGI application: a free-threaded build refuses it.
pytestmark = pytest.mark.gil

EXIT_TIMEOUT = 20
STOP_WITHIN = 10  # seconds; the drain is bounded at 5


def exit_code(server, timeout=EXIT_TIMEOUT):
    rc = server.wait_exit(timeout)
    assert rc is not None, f"still running after {timeout}s\n{server.describe()}"
    return rc


def sigterm(server):
    server.send_signal(signal.SIGTERM)
    return exit_code(server, STOP_WITHIN)


# --------------------------------------------------------------------------
# startup


@pytest.fixture(scope="module")
def server(serve_module):
    return serve_module("asgi_raw:application")


def test_startup_state_reaches_http_and_websocket_scopes(server):
    from websockets.sync.client import connect

    state = server.get_json("/state")
    assert state["greeting"] == "hello from lifespan"
    with connect(f"ws://{HOST}:{server.port}/ws/scope", open_timeout=HTTP_TIMEOUT) as conn:
        scope = json.loads(conn.recv(timeout=HTTP_TIMEOUT))
    assert scope["state"] == state


def test_startup_runs_before_the_listener_opens_and_sigterm_ends_it(serve, tmp_path):
    """A startup that is still running: no banner, nothing listening;
    SIGTERM then ends the server with 0, and it never served."""
    mark = tmp_path / "startup-began"
    s = serve("asgi_raw:slow_startup", wait=False, env={"M0_TEST_STARTUP_MARK": str(mark)})
    wait_until(lambda: mark.exists() or not s.running, EXIT_TIMEOUT, "the lifespan startup to begin")
    assert s.running, s.describe()
    assert READY_PREFIX not in s.stdout
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((HOST, s.port), timeout=HTTP_TIMEOUT).close()
    assert sigterm(s) == 0, s.describe()
    assert READY_PREFIX not in s.stdout, s.describe()


def test_startup_failed_exits_1_before_the_banner(serve):
    s = serve("asgi_raw:lifespan_failed", wait=False)
    assert exit_code(s) == 1, s.describe()
    assert "m0serve: asgi: lifespan startup failed: database unreachable" in s.stderr.splitlines(), s.describe()
    assert READY_PREFIX not in s.stdout


@pytest.mark.parametrize("spec", ["asgi_lifespans:starlette_failing", "asgi_lifespans:fastapi_failing"])
def test_framework_startup_raising_exits_1_before_the_banner(serve, spec):
    s = serve(spec, wait=False)
    assert exit_code(s) == 1, s.describe()
    assert "RuntimeError: startup exploded: no database" in s.stderr, s.describe()
    assert READY_PREFIX not in s.stdout


def test_app_raising_on_the_lifespan_scope_is_served(serve):
    s = serve("asgi_raw:no_lifespan")
    m = READY_RE.match(s.ready_line)
    assert m and m["protocol"] == "asgi", s.ready_line
    assert "does not support lifespan" in s.stderr, s.describe()
    assert s.get_json("/state") == {}
    assert s.get("/head").text == "hello world"
    assert sigterm(s) == 0, s.describe()


def test_app_returning_on_the_lifespan_scope_is_served(serve):
    """`if scope["type"] != "http": return` - the commonest way to ignore lifespan."""
    s = serve("asgimod", app_dir=APPS / "discovery")
    assert s.get("/").text == "served by asgimod:app\n"
    assert sigterm(s) == 0, s.describe()


# --------------------------------------------------------------------------
# shutdown


@pytest.mark.parametrize("args", [
    ("--loop", "uvloop"),
    ("--loop", "asyncio"),
    ("--blocking-threads", "2"),  # the buffered path: the lifespan on a loop of its own thread
], ids=["uvloop", "asyncio", "buffered"])
def test_shutdown_runs_on_sigterm(serve, tmp_path, args):
    done = tmp_path / "shutdown"
    s = serve("asgi_raw:application", args=args, env={"M0_TEST_SHUTDOWN_FILE": str(done)})
    assert s.get_json("/state")["greeting"] == "hello from lifespan"
    assert s.get("/head").status_code == 200
    assert not done.exists()
    assert sigterm(s) == 0, s.describe()
    assert done.read_text() == "shutdown complete\n"


@pytest.mark.parametrize("spec", ["asgi_lifespans:starlette_state", "asgi_lifespans:fastapi_state"])
def test_framework_lifespan_state_and_shutdown(serve, tmp_path, spec):
    done = tmp_path / "shutdown"
    s = serve(spec, env={"M0_TEST_SHUTDOWN_FILE": str(done)})
    r = s.get("/db")
    assert r.status_code == 200 and r.text == "connected"
    assert sigterm(s) == 0, s.describe()
    assert done.read_text() == "closed db\n"


def test_sigterm_ends_an_endless_stream_then_shuts_down(serve, tmp_path):
    """The drain tells the streaming request its client is gone
    (http.disconnect); the stream ends, the lifespan shutdown runs, exit 0."""
    done = tmp_path / "shutdown"
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    s = serve("asgi_raw:application",
              env={"M0_TEST_SHUTDOWN_FILE": str(done), "M0_TEST_EVENTS_DIR": str(events_dir)})
    key = uuid.uuid4().hex
    with s.connect() as sock:
        sock.sendall(http_request("GET", f"/forever?id={key}", s.port))
        reader = RawReader(sock, timeout=STOP_WITHIN)
        assert reader.read_until(b"tick 1\n") is not None, reader.raw
        s.send_signal(signal.SIGTERM)
        reader.read_to_eof()
    assert not reader.timed_out, f"the stream was still open {STOP_WITHIN}s after SIGTERM"
    assert reader.eof
    assert exit_code(s, STOP_WITHIN) == 0, s.describe()
    recorded = [json.loads(line) for line in (events_dir / key).read_text().splitlines()]
    assert recorded == ["http.disconnect", "stream ended"]
    assert done.read_text() == "shutdown complete\n"
    shutdown = [json.loads(line) for line in (events_dir / "lifespan").read_text().splitlines()]
    assert shutdown == [{"shutdown": "began", "http_in_flight": 0}], "the shutdown ran before the stream ended"


def test_sigterm_lets_an_inflight_request_finish_before_the_shutdown(serve, tmp_path):
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    s = serve("asgi_raw:application", env={"M0_TEST_EVENTS_DIR": str(events_dir)})
    key = uuid.uuid4().hex
    with s.connect() as sock:
        sock.sendall(http_request("GET", f"/sleep?s=1&id={key}", s.port))
        wait_until(lambda: s.get_json(f"/events?id={key}") == ["sleeping"], 5, "the request to be in the app")
        s.send_signal(signal.SIGTERM)
        resp = read_response(RawReader(sock, timeout=STOP_WITHIN))
    assert resp.status == 200 and resp.complete and resp.body == b"slept\n", resp
    assert exit_code(s, STOP_WITHIN) == 0, s.describe()
    recorded = [json.loads(line) for line in (events_dir / "lifespan").read_text().splitlines()]
    assert recorded == [{"shutdown": "began", "http_in_flight": 0}]


def test_drain_is_bounded_for_a_stream_that_never_listens(serve):
    """A stream that never calls receive() does not hear the drain; the
    drain's bound (5 s) ends it, and the server still exits 0."""
    s = serve("asgi_raw:application")
    with s.connect() as sock:
        sock.sendall(http_request("GET", "/stream?n=100000&delay=0.05", s.port))
        reader = RawReader(sock, timeout=STOP_WITHIN + 5)
        assert reader.read_until(b"chunk 1\n") is not None, reader.raw
        s.send_signal(signal.SIGTERM)
        reader.read_to_eof()
        assert not reader.timed_out, f"the stream outlived the drain\n{s.describe()}"
    assert exit_code(s, STOP_WITHIN) == 0, s.describe()


def test_shutdown_failed_is_logged_and_exits_0(serve):
    s = serve("asgi_raw:shutdown_failed")
    assert s.get("/head").status_code == 200
    assert sigterm(s) == 0, s.describe()
    lines = [line for line in s.stderr.splitlines() if "asgi: lifespan shutdown failed" in line]
    assert len(lines) == 1 and "could not flush the cache" in lines[0], s.describe()


def test_shutdown_that_never_answers_is_bounded(serve):
    s = serve("asgi_raw:shutdown_hangs")
    assert s.get("/head").status_code == 200
    assert sigterm(s) == 0, s.describe()
    assert "lifespan shutdown did not finish in time" in s.stderr, s.describe()
