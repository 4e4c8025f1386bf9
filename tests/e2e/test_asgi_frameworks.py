"""ASGI frameworks: examples/fastapi_app, examples/starlette_app and
examples/django_site (its asgi.py), each served as ASGI by the real binary."""

import asyncio
import os
import signal
import subprocess
import sys
import uuid

import httpx
import pytest
import requests
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from conftest import EXAMPLES, HOST, HTTP_TIMEOUT, READY_RE, RawReader, http_request, wait_until
from test_django import csrf_token, entries_in

# Every test here serves an ASGI application: a free-threaded build refuses it.
pytestmark = pytest.mark.gil

STOP_WITHIN = 10  # seconds; the drain is bounded at 5


def ws_connect(server, path, **kwargs):
    return connect(f"ws://{HOST}:{server.port}{path}", open_timeout=HTTP_TIMEOUT,
                   close_timeout=HTTP_TIMEOUT, **kwargs)


def parse_sse(text):
    """Events of a text/event-stream body: [{"id":..., "event":..., "data":...}]."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
        if fields:
            events.append(fields)
    return events


# --------------------------------------------------------------------------
# FastAPI


@pytest.fixture(scope="module")
def fastapi_server(serve_module):
    return serve_module("main:app", app_dir=EXAMPLES / "fastapi_app")


def test_fastapi_banner_and_json(fastapi_server):
    m = READY_RE.match(fastapi_server.ready_line)
    assert m and m["spec"] == "main:app" and m["protocol"] == "asgi", fastapi_server.ready_line
    r = fastapi_server.get("/")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    assert r.json() == {"hello": "world", "lifespan": "lifespan ran"}


def test_fastapi_post_model_then_path_param(fastapi_server):
    name = f"pen {uuid.uuid4().hex[:8]}"
    r = fastapi_server.post("/items", json={"name": name, "price": 1.5, "tags": ["office"]})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["name"] == name and created["price"] == 1.5 and created["tags"] == ["office"]
    r = fastapi_server.get(f"/items/{created['id']}", params={"q": "a b"})
    assert r.status_code == 200
    assert r.json() == {**created, "q": "a b"}


@pytest.mark.parametrize("body", [
    {"name": "", "price": 1},
    {"name": "pen", "price": -1},
    {"price": 1},
    ["not", "an", "object"],
])
def test_fastapi_invalid_body_is_422(fastapi_server, body):
    r = fastapi_server.post("/items", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"], r.text


def test_fastapi_path_param_validation(fastapi_server):
    r = fastapi_server.get("/items/not-a-number")
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["path", "item_id"]
    r = fastapi_server.get("/items/987654321")
    assert r.status_code == 404 and r.json() == {"detail": "no such item"}


def test_fastapi_large_body_in_chunks(fastapi_server):
    """A JSON body over the server's 256 KiB chunk comes in several receive()s."""
    tags = [f"tag-{i:06d}" for i in range(60_000)]  # about 720 KB of JSON
    r = fastapi_server.post("/items", json={"name": "many tags", "price": 2, "tags": tags})
    assert r.status_code == 201, r.text[:500]
    assert r.json()["tags"] == tags


def test_fastapi_background_task_runs_after_the_response(fastapi_server):
    name = f"audited {uuid.uuid4().hex[:8]}"
    r = fastapi_server.post("/items", json={"name": name, "price": 3})
    assert r.status_code == 201
    line = f"created item {r.json()['id']}: {name}"
    wait_until(lambda: line in fastapi_server.get_json("/audit"), 5, f"the background task to log {line!r}")


def test_fastapi_streaming_response(fastapi_server):
    resp = fastapi_server.raw("GET", "/stream?n=4")
    assert resp.status == 200 and resp.complete and resp.chunked, resp
    assert resp.header("Content-Length") is None
    assert resp.header("Content-Type") == "text/plain; charset=utf-8"
    assert resp.body == b"line 0\nline 1\nline 2\nline 3\n"


def test_fastapi_websocket_echo(fastapi_server):
    with ws_connect(fastapi_server, "/ws") as conn:
        for text in ["hello", "fastapi", "☃"]:
            conn.send(text)
            assert conn.recv(timeout=HTTP_TIMEOUT) == f"echo: {text}"


def test_fastapi_openapi_schema(fastapi_server):
    schema = fastapi_server.get_json("/openapi.json")
    assert schema["info"]["title"] == "m0serve FastAPI example"
    assert {"/", "/items", "/items/{item_id}", "/stream", "/audit"} <= set(schema["paths"])


def test_fastapi_concurrent_clients(fastapi_server):
    async def main():
        async with httpx.AsyncClient(base_url=fastapi_server.url(), timeout=HTTP_TIMEOUT) as client:
            posts = [client.post("/items", json={"name": f"c{i}", "price": i + 1}) for i in range(40)]
            return await asyncio.gather(*posts)

    results = asyncio.run(main())
    assert [r.status_code for r in results] == [201] * 40
    ids = [r.json()["id"] for r in results]
    assert len(set(ids)) == 40, ids
    assert sorted(r.json()["name"] for r in results) == sorted(f"c{i}" for i in range(40))


# --------------------------------------------------------------------------
# Starlette


@pytest.fixture(scope="module")
def starlette_server(serve_module):
    return serve_module("app:app", app_dir=EXAMPLES / "starlette_app")


def test_starlette_index_with_lifespan_state(starlette_server):
    assert starlette_server.get_json("/") == {"hello": "world", "lifespan": "hello from the lifespan"}


def test_starlette_streaming_response(starlette_server):
    with httpx.Client(timeout=HTTP_TIMEOUT) as client:
        with client.stream("GET", starlette_server.url("/stream?n=3")) as r:
            assert r.status_code == 200
            assert "content-length" not in r.headers
            assert r.headers["transfer-encoding"] == "chunked"
            assert list(r.iter_lines()) == ["line 0", "line 1", "line 2"]


def test_starlette_server_sent_events(starlette_server):
    with httpx.Client(timeout=HTTP_TIMEOUT) as client:
        with client.stream("GET", starlette_server.url("/events?count=3")) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            assert r.headers["cache-control"] == "no-store"
            body = r.read().decode()
    assert parse_sse(body) == [{"id": str(i), "event": "tick", "data": f"tick {i}"} for i in range(3)]


def test_starlette_endless_events_client_leaves(starlette_server):
    """The client reads a few events of an endless stream and leaves; the
    server goes on serving."""
    with httpx.Client(timeout=HTTP_TIMEOUT) as client:
        with client.stream("GET", starlette_server.url("/events?count=0")) as r:
            lines = r.iter_lines()
            got = []
            while len(got) < 3:
                line = next(lines)
                if line.startswith("data: "):
                    got.append(line)
    assert got == ["data: tick 0", "data: tick 1", "data: tick 2"]
    assert starlette_server.get("/").status_code == 200


def test_starlette_sse_polling_is_disconnected(starlette_server):
    """sse-starlette's documented loop, `await request.is_disconnected()` in
    the generator, beside the response's own disconnect listener: two
    receive() calls at once, which uvicorn allows. The stream is whole."""
    with httpx.Client(timeout=HTTP_TIMEOUT) as client:
        with client.stream("GET", starlette_server.url("/sse-polling?count=4")) as r:
            assert r.status_code == 200
            body = r.read().decode()
    assert parse_sse(body) == [{"id": str(i), "event": "tick", "data": f"tick {i}"} for i in range(4)]


def test_starlette_streaming_response_polls_is_disconnected(starlette_server):
    with httpx.Client(timeout=HTTP_TIMEOUT) as client:
        with client.stream("GET", starlette_server.url("/stream-polling?n=3")) as r:
            assert r.status_code == 200
            assert list(r.iter_lines()) == ["line 0", "line 1", "line 2"]


@pytest.mark.parametrize("path, first, name", [
    ("/quiet", "data: and then nothing", "quiet"),
    ("/sse-polling?count=0", "data: tick 0", "sse-polling"),
])
def test_starlette_stream_hears_its_client_leave(starlette_server, path, first, name):
    """A client that leaves a stream is told to the application within a
    second, as under uvicorn: a quiet one (it has nothing to send, so no
    write would tell) and one that polls is_disconnected()."""
    before = starlette_server.get_json("/left").count(name)
    with httpx.Client(timeout=HTTP_TIMEOUT) as client:
        with client.stream("GET", starlette_server.url(path)) as r:
            for line in r.iter_lines():
                if line == first:
                    break
    wait_until(lambda: starlette_server.get_json("/left").count(name) == before + 1, 1.0,
               f"{name} to hear its client leave")


def test_starlette_file_response(starlette_server):
    """Starlette's FileResponse sends http.response.pathsend when the scope
    offers it: the file goes out from Go."""
    want = (EXAMPLES / "starlette_app" / "static" / "hello.txt").read_bytes()
    r = starlette_server.get("/file")
    assert r.status_code == 200
    assert r.content == want
    assert r.headers["Content-Length"] == str(len(want))
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert r.headers["ETag"] and r.headers["Last-Modified"]
    r = starlette_server.request("HEAD", "/file")
    assert r.status_code == 200 and r.content == b""
    assert r.headers["Content-Length"] == str(len(want))


def test_starlette_file_range(starlette_server):
    r = starlette_server.get("/file", headers={"Range": "bytes=0-4"})
    assert r.status_code == 206
    assert r.content == b"hello"
    assert r.headers["Content-Range"].startswith("bytes 0-4/")


def test_starlette_background_task(starlette_server):
    email = f"{uuid.uuid4().hex[:8]}@example.com"
    r = starlette_server.post("/signup", json={"email": email})
    assert r.status_code == 202 and r.json() == {"signed_up": email}
    wait_until(lambda: f"welcome mail to {email}" in starlette_server.get_json("/outbox"), 5,
               "the background task to send the mail")
    r = starlette_server.post("/signup", json={"email": "nobody"})
    assert r.status_code == 400


def test_starlette_websocket_endpoint(starlette_server):
    with ws_connect(starlette_server, "/ws") as conn:
        conn.send("hello starlette")
        assert conn.recv(timeout=HTTP_TIMEOUT) == "HELLO STARLETTE"
        conn.send("bye")
        with pytest.raises(ConnectionClosed) as info:
            conn.recv(timeout=HTTP_TIMEOUT)
    assert info.value.rcvd is not None
    assert (info.value.rcvd.code, info.value.rcvd.reason) == (1000, "bye")


def test_starlette_unknown_route_is_404(starlette_server):
    assert starlette_server.get("/no/such/page").status_code == 404


@pytest.mark.parametrize("path, marker", [
    ("/events?count=0", b"data: tick 1"),
    ("/stream?n=100000", b"line 1\n"),  # 0.01 s a line: about 17 minutes
], ids=["sse", "streaming-response"])
def test_sigterm_ends_an_endless_stream_and_exits_0(serve, path, marker):
    s = serve("app:app", app_dir=EXAMPLES / "starlette_app")
    with s.connect() as sock:
        sock.sendall(http_request("GET", path, s.port))
        reader = RawReader(sock, timeout=STOP_WITHIN)
        assert reader.read_until(marker) is not None, reader.raw
        s.send_signal(signal.SIGTERM)
        reader.read_to_eof()
    assert not reader.timed_out, f"the stream was still open {STOP_WITHIN}s after SIGTERM\n{s.describe()}"
    assert reader.eof
    rc = s.wait_exit(STOP_WITHIN)
    assert rc == 0, s.describe()


# --------------------------------------------------------------------------
# Django, through mysite/asgi.py


@pytest.fixture(scope="module")
def django_asgi_server(serve_module, tmp_path_factory):
    db = tmp_path_factory.mktemp("django-asgi") / "db.sqlite3"
    env = {"M0_EXAMPLE_DB": str(db)}
    migrate = subprocess.run(
        [sys.executable, str(EXAMPLES / "django_site" / "manage.py"), "migrate", "--noinput"],
        env={**os.environ, **env}, cwd=EXAMPLES / "django_site", stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120)
    assert migrate.returncode == 0, f"manage.py migrate failed:\n{migrate.stdout}\n{migrate.stderr}"
    return serve_module("mysite.asgi:application", app_dir=EXAMPLES / "django_site",
                        args=("--protocol", "asgi"), env=env)


def test_django_asgi_banner(django_asgi_server):
    m = READY_RE.match(django_asgi_server.ready_line)
    assert m and m["spec"] == "mysite.asgi:application" and m["protocol"] == "asgi", django_asgi_server.ready_line
    # Django's ASGI handler takes no lifespan; it is served anyway, and the
    # note is one INFO line naming what it raised, not a traceback.
    notes = [r for r in django_asgi_server.records() if "does not support lifespan" in r]
    assert len(notes) == 1 and "\n" not in notes[0], notes
    assert " INFO asgi: the application does not support lifespan; serving it without" in notes[0], notes[0]
    assert 'detail="ValueError: Django can only handle ASGI/HTTP connections, not lifespan."' in notes[0], notes[0]
    assert "Traceback" not in django_asgi_server.stderr


def test_django_asgi_index(django_asgi_server):
    r = django_asgi_server.get("/")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    assert "Guestbook" in r.text and "<form" in r.text
    csrf_token(r.text)


def test_django_asgi_post_entry_redirects_and_shows_up(django_asgi_server):
    server = django_asgi_server
    marker = f"hello over ASGI {uuid.uuid4().hex[:8]}"
    with requests.Session() as s:
        page = s.get(server.url("/"), timeout=HTTP_TIMEOUT)
        assert page.status_code == 200
        r = s.post(server.url("/"), timeout=HTTP_TIMEOUT, allow_redirects=False, data={
            "csrfmiddlewaretoken": csrf_token(page.text), "name": "Ada", "message": marker})
        assert r.status_code == 302, r.text[:2000]
        assert r.headers["Location"] in ("/", server.url("/"))
        page = s.get(server.url("/"), timeout=HTTP_TIMEOUT)
        assert any(marker in e for e in entries_in(page.text)), entries_in(page.text)
        r = s.get(server.url("/entries.json"), timeout=HTTP_TIMEOUT)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
        assert {"name": "Ada", "message": marker} in r.json()


def test_django_asgi_invalid_post_is_400(django_asgi_server):
    with requests.Session() as s:
        page = s.get(django_asgi_server.url("/"), timeout=HTTP_TIMEOUT)
        r = s.post(django_asgi_server.url("/"), timeout=HTTP_TIMEOUT, allow_redirects=False, data={
            "csrfmiddlewaretoken": csrf_token(page.text), "name": "", "message": ""})
        assert r.status_code == 400


def test_django_asgi_post_without_csrf_is_403(django_asgi_server):
    r = django_asgi_server.post("/", data={"name": "x", "message": "y"})
    assert r.status_code == 403


def test_django_asgi_stream(django_asgi_server):
    resp = django_asgi_server.raw("GET", "/stream")
    assert resp.status == 200 and resp.complete, resp
    assert resp.header("Content-Length") is None and resp.chunked, resp
    assert resp.body == b"".join(b"chunk %d\n" % i for i in range(5))


def test_django_asgi_download(django_asgi_server):
    r = django_asgi_server.get("/download")
    assert r.status_code == 200
    assert r.content == b"hello from a file\n"


def test_django_asgi_admin_login_page(django_asgi_server):
    r = django_asgi_server.get("/admin/login/")
    assert r.status_code == 200 and "csrfmiddlewaretoken" in r.text


def test_django_asgi_boom_is_500_and_server_survives(django_asgi_server):
    assert django_asgi_server.get("/boom").status_code == 500
    r = django_asgi_server.get("/")
    assert r.status_code == 200 and "Guestbook" in r.text


def test_django_asgi_concurrent_writes(django_asgi_server):
    """Entries posted from several clients at once all land in the ORM."""
    server = django_asgi_server
    prefix = uuid.uuid4().hex[:8]
    with requests.Session() as s:
        page = s.get(server.url("/"), timeout=HTTP_TIMEOUT)
        token, cookies = csrf_token(page.text), s.cookies.get_dict()

    async def main():
        async with httpx.AsyncClient(base_url=server.url(), timeout=HTTP_TIMEOUT, cookies=cookies) as client:
            posts = [client.post("/", data={"csrfmiddlewaretoken": token, "name": "Load",
                                            "message": f"{prefix} {i}"}) for i in range(10)]
            return await asyncio.gather(*posts)

    results = asyncio.run(main())
    assert [r.status_code for r in results] == [302] * 10
    messages = {e["message"] for e in server.get_json("/entries.json")}
    assert {f"{prefix} {i}" for i in range(10)} <= messages
