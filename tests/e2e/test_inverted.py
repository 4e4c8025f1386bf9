"""M0_INVERTED=1: the ASGI application's network on its event loop's thread
(docs/asgi.md, "The inverted loop"). scripts/test also runs the ASGI
modules a second time with it; here is what only it does: its refusals,
its connections' limits and drain, and its hand-offs to the fasthttp front
end, seen from a client."""

import os
import signal
import socket
import time

import pytest
import requests
from websockets.sync.client import connect

from conftest import HOST, HTTP_TIMEOUT, READY_RE, RawReader, http_request, read_response, wait_until
from test_load import GOMAXPROCS_SET, ONE_P, looping

pytestmark = pytest.mark.gil

INVERTED = {"M0_INVERTED": "1"}


def header(r, name):
    return ",".join(v for n, v in r.headers if n.lower() == name).lower()


def served(serve, spec="asgi_raw:application", args=(), **kwargs):
    s = serve(spec, args=args, env=INVERTED, **kwargs)
    m = READY_RE.match(s.ready_line)
    assert m and m["protocol"] == "asgi" and " loop=inverted " in s.ready_line, s.ready_line
    return s


def served_by(r):
    """Which front end answered r: the inline one writes the application's
    header names as it sent them (asgi_raw sends them in lower case), the
    fasthttp front end in their canonical form."""
    names = list(r.headers.keys())
    if "content-type" in names:
        return "inline"
    assert "Content-Type" in names, names
    return "fasthttp"


@pytest.mark.once
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason=ONE_P)
@pytest.mark.skipif("GOMAXPROCS" in os.environ, reason=GOMAXPROCS_SET)
def test_a_busy_loop_sheds_its_connections_to_go_and_loses_no_request(serve):
    """On more than one usable CPU, once the loop's thread is the pace under
    many connections, what they send next goes to the fasthttp front end,
    whose goroutines read and write beside the loop, and a new connection
    at once; a connection handed off stays there, and once a light load
    follows, a new connection is served inline again (docs/asgi.md, "The
    inverted loop"). Every request is answered, a kept-alive connection's
    on that connection, through the change. The application's 10 ms of
    Python a request leaves its network a thousandth of a CPU, so a tenth
    of a CPU idle beside the loop (the least a shed needs) decides it."""
    s = served(serve)

    def scope(session, n):
        r = session.get(s.url(f"/scope?n={n}"), timeout=HTTP_TIMEOUT)
        assert r.status_code == 200 and r.json()["query_string"] == f"n={n}", r.text
        return served_by(r), r.json()["client"][1]

    with requests.Session() as watcher:
        first, port = scope(watcher, 0)
        assert first == "inline"
        answered = []

        def client(stop):
            with requests.Session() as session:
                n = 0
                while not stop.is_set():
                    r = session.get(s.url("/spin?s=0.01"), timeout=HTTP_TIMEOUT)
                    assert r.status_code == 200 and r.text == "spun\n", r.text
                    n += 1
                answered.append(n)

        n = iter(range(1, 1 << 30))
        with looping(16, client):
            wait_until(lambda: scope(watcher, next(n)) == ("fasthttp", port), 30,
                       lambda: f"the watcher's connection handed off under the load\n{s.describe()}", interval=0.1)
            assert scope(requests, -1)[0] == "fasthttp", "a new connection under the load was served inline"
        assert len(answered) == 16 and min(answered) > 0, answered
        # A light load of new connections, one at a time: the loop is no
        # longer the pace, and the next ones are served inline.
        wait_until(lambda: scope(requests, 0)[0] == "inline", 30,
                   lambda: f"a new connection served inline after the load\n{s.describe()}", interval=0.01)
        assert scope(watcher, -2) == ("fasthttp", port), "a connection handed off went back, or was not kept"


def test_serves_keep_alive_and_pipelined_requests(serve):
    s = served(serve)
    with requests.Session() as session:
        for n in range(20):
            r = session.get(s.url(f"/scope?n={n}"), timeout=HTTP_TIMEOUT)
            assert r.status_code == 200 and r.json()["query_string"] == f"n={n}", r.text
    with s.connect() as sock:
        sock.sendall(http_request("GET", "/scope?a=1", s.port) + http_request("POST", "/echo", s.port, body=b"xyz"))
        reader = RawReader(sock, HTTP_TIMEOUT)
        first, second = read_response(reader), read_response(reader, "POST")
    assert first.status == 200 and b'"a=1"' in first.body, first
    assert second.status == 200 and second.body == b"xyz", second


def test_what_is_not_plain_goes_to_the_fasthttp_front_end(serve):
    """A chunked upload, an HTTP/1.0 request, a refused head and a WebSocket
    are answered as under the default front end, on the connection handed
    over with what was read."""
    s = served(serve, args=("--max-body", "1m"))
    r = s.post("/echo", data=iter([b"ab", b"cd"]))  # chunked
    assert r.status_code == 200 and r.content == b"abcd", r
    r = s.raw("GET", "/scope", version="HTTP/1.0")
    assert r.status == 200, r
    r = s.raw("GET", "/scope", headers=[("Content-Length", "1"), ("Content-Length", "2")])
    assert r.status == 400, r
    r = s.post("/echo", data=b"x" * (2 << 20))
    assert r.status_code == 413, r
    with connect(f"ws://{HOST}:{s.port}/ws/echo", open_timeout=HTTP_TIMEOUT) as ws:
        ws.send("hello")
        assert ws.recv(timeout=HTTP_TIMEOUT) == "hello"


def test_an_idle_connection_closes(serve):
    s = served(serve, args=("--idle-timeout", "1"))
    with s.connect() as sock:
        sock.sendall(http_request("GET", "/scope", s.port))
        reader = RawReader(sock, HTTP_TIMEOUT)
        assert read_response(reader).status == 200
        assert reader.at_eof(wait=4), "the idle connection stayed open"


def test_max_keepalive_requests(serve):
    s = served(serve, args=("--max-keepalive-requests", "2"))
    with s.connect() as sock:
        reader = RawReader(sock, HTTP_TIMEOUT)
        sock.sendall(http_request("GET", "/scope", s.port))
        first = read_response(reader)
        sock.sendall(http_request("GET", "/scope", s.port))
        second = read_response(reader)
        assert first.status == 200 and second.status == 200
        assert header(second, "connection") == "close", second
        assert reader.at_eof(wait=2), "the connection stayed open after its last request"


def test_sigterm_answers_the_request_in_flight(serve):
    s = served(serve)
    with s.connect() as sock:
        sock.sendall(http_request("GET", "/sleep?s=1&id=inverted-drain", s.port))
        wait_until(lambda: "sleeping" in s.get_json("/events?id=inverted-drain"), HTTP_TIMEOUT,
                   "the request in the application")
        s.send_signal(signal.SIGTERM)
        r = read_response(RawReader(sock, HTTP_TIMEOUT))
    assert r.status == 200 and r.body == b"slept\n", r
    assert header(r, "connection") == "close", r
    assert s.wait_exit(20) == 0, s.describe()


def test_an_application_error_is_a_500_and_one_log_line(serve):
    s = served(serve)
    mark = len(s.stderr)
    r = s.get("/error/before-start")
    assert r.status_code == 500, r
    s.wait_for_stderr("application error", since=mark)
    assert s.get("/scope").status_code == 200


@pytest.mark.parametrize("args,spec,found", [
    ((), "pep3333:application", "a wsgi application on the pool"),
    (("--blocking-threads", "2"), "asgi_raw:application", "beside --blocking-threads"),
    (("--realtime",), "asgi_raw:application", "beside --realtime"),
    (("--access-log",), "asgi_raw:application", "beside --access-log"),
    (("--limit-concurrency", "4"), "asgi_raw:application", "beside --limit-concurrency"),
], ids=["wsgi", "buffered", "realtime", "access-log", "limit-concurrency"])
def test_refused_where_it_does_not_serve(serve, args, spec, found):
    s = serve(spec, args=args, env=INVERTED, wait=False)
    rc = s.wait_exit(20)
    assert rc == 78, s.describe()
    assert "M0_INVERTED=1" in s.stderr and found in s.stderr and "unset M0_INVERTED" in s.stderr, s.stderr


def test_a_value_not_1_or_0_is_ignored_with_a_note(serve):
    """As every M0_* variable read leniently: a note, and the default."""
    s = serve("asgi_raw:application", env={"M0_INVERTED": "yes"})
    assert " loop=pump " in s.ready_line and "M0_INVERTED=yes" in s.stderr, s.describe()


def read_answer(f):
    """One response from a binary file of a socket: (status, headers, body),
    the body by its Content-Length."""
    status = int(f.readline().split()[1])
    headers = {}
    while (line := f.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, f.read(int(headers.get("content-length", 0)))


BIG = 16 << 20  # more than loopback's socket buffers hold: the server's writes wait


def test_a_hand_off_behind_an_answer_that_fills_the_socket(serve):
    """A chunked upload pipelined behind an answer the socket cannot take
    at once is handed off once that answer is out, not dropped."""
    s = served(serve)
    with s.connect() as sock:
        sock.sendall(http_request("GET", f"/big?size={BIG}", s.port)
                     + http_request("POST", "/echo", s.port, headers=[("Transfer-Encoding", "chunked")],
                                    body=b"3\r\nabc\r\n0\r\n\r\n"))
        f = sock.makefile("rb")
        status, _, body = read_answer(f)
        assert status == 200 and len(body) == BIG
        status, _, body = read_answer(f)
        assert status == 200 and body == b"abc"


def test_a_client_that_stops_reading_is_dropped(serve):
    s = served(serve, args=("--idle-timeout", "1"))
    with s.connect() as sock:
        sock.sendall(http_request("GET", f"/big?size={BIG}", s.port))
        time.sleep(3)  # well past --idle-timeout without the server's writes making progress
        got, closed = 0, False
        sock.settimeout(HTTP_TIMEOUT)
        try:
            while data := sock.recv(1 << 20):
                got += len(data)
            closed = True
        except ConnectionResetError:
            closed = True
    assert closed and got < BIG, f"{got} bytes of {BIG}, closed {closed}"


def test_an_answer_goes_out_after_the_client_closes_its_side(serve):
    s = served(serve)
    with s.connect() as sock:
        sock.sendall(http_request("GET", "/sleep?s=0.2", s.port))
        sock.shutdown(socket.SHUT_WR)
        r = read_response(RawReader(sock, HTTP_TIMEOUT))
    assert r.status == 200 and r.body == b"slept\n", r


def test_a_health_path_sent_encoded_is_the_servers(serve):
    """--health-path matched decoded, as under the fasthttp front end."""
    s = served(serve, args=("--health-path", "/health"))
    for path in ("/health", "/%68ealth"):
        r = s.get(path)
        assert r.status_code == 200 and r.json()["status"] == "ok", (path, r.text)
