"""--mount PREFIX=SPEC and --mount PREFIX=hold: several applications in one
process, each under its prefix and in its own mode, their links built under
the prefix (Flask url_for, Django reverse, Starlette and FastAPI url_for),
and a stream held against a grant the application signed."""

import json
import os
import re
import subprocess
import time

import pytest
import requests
from conftest import APPS, FREE_THREADED, HTTP_TIMEOUT, M0SERVE, READY_RE, free_port

MOUNTS = APPS / "mounts"
KEY = "k" * 40  # M0_GRANT_KEY: 32 bytes or more
MIXED = ("--mount", "/flask=flask_links:app", "--mount", "/dj=django_links",
         "--mount", "/api=starlette_links:app", "--mount", "/fast=fastapi_links:app",
         "--mount", "/streams=hold", "--realtime")


@pytest.fixture(scope="module")
def mixed(serve_module):
    return serve_module(None, app_dir=MOUNTS, args=MIXED, env={"M0_GRANT_KEY": KEY, "M0_GRANT_COOKIE": None})


@pytest.mark.gil  # the mixed server mounts Starlette and FastAPI
def test_banner_names_every_mount(mixed):
    m = READY_RE.match(mixed.ready_line)
    assert m, mixed.ready_line
    assert m["spec"] == ("/flask=flask_links:app,/dj=django_links:application,/api=starlette_links:app,"
                         "/fast=fastapi_links:app,/streams=hold"), mixed.ready_line
    assert m["protocol"] == "wsgi+asgi+hold" and m["threads"] and m["loop"], mixed.ready_line


@pytest.mark.gil  # the mixed server mounts Starlette and FastAPI
def test_flask_url_for_under_the_prefix(mixed):
    r = mixed.get("/flask/")
    assert r.status_code == 200, r.text
    assert r.json() == {"url": "/flask/items/3", "external": mixed.url("/flask/items/3"),
                        "script_name": "/flask", "path_info": "/"}
    # The link it built works.
    assert mixed.get("/flask/items/3").json() == {"n": 3}
    # The prefix alone is the application's, with an empty PATH_INFO, which
    # Flask redirects to the prefix's root as it does under any server.
    r = mixed.get("/flask", allow_redirects=False)
    assert r.status_code == 308 and r.headers["Location"].endswith("/flask/"), r.headers


@pytest.mark.gil  # the mixed server mounts Starlette and FastAPI
def test_django_reverse_under_the_prefix(mixed):
    r = mixed.get("/dj/")
    assert r.status_code == 200, r.text
    assert r.json() == {"url": "/dj/items/3/", "absolute": mixed.url("/dj/items/3/"),
                        "script_name": "/dj", "path_info": "/", "path": "/dj/"}
    assert mixed.get("/dj/items/3/").json() == {"n": 3}


@pytest.mark.gil  # the mixed server mounts Starlette and FastAPI
def test_asgi_root_path_and_url_for(mixed):
    r = mixed.get("/api/")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["url"] == mixed.url("/api/items/3") and body["root_path"] == "/api" and body["path"] == "/api/", body
    assert mixed.get("/api/items/3").json() == {"n": 3}
    # Each ASGI mount has its own executor and lifespan: this one ran once.
    assert body["startups"] == 1
    r = mixed.get("/fast/")
    assert r.json() == {"url": mixed.url("/fast/items/3"), "root_path": "/fast"}, r.text
    assert mixed.get("/fast/items/3").json() == {"n": 3}
    assert mixed.get("/fast/docs").status_code == 200
    assert "/fast/openapi.json" in mixed.get("/fast/docs").text


@pytest.mark.gil  # the mixed server mounts Starlette and FastAPI
@pytest.mark.parametrize("path", ["/", "/nothing", "/flaskish", "/apis/x", "/streamsx"])
def test_unclaimed_paths_are_404_in_go(mixed, path):
    """A path no mount claims never reaches Python: Go's plain 404."""
    r = mixed.get(path)
    assert r.status_code == 404 and r.text == "Not Found\n", (path, r.text)


def test_longest_prefix_wins(serve):
    s = serve(None, app_dir=MOUNTS, args=("--mount", "/a=flask_links:app", "--mount", "/a/b=django_links"))
    assert s.get("/a/").json()["script_name"] == "/a"
    assert s.get("/a/b/").json()["script_name"] == "/a/b"
    assert s.get("/a/b/items/4/").json() == {"n": 4}
    # /a/bc is not under /a/b: Flask's own 404 under /a, not the server's.
    r = s.get("/a/bc")
    assert r.status_code == 404 and "<!doctype html>" in r.text, r.text


def test_buffered_asgi_mount_sees_root_path(serve):
    """--blocking-threads N > 0 puts ASGI mounts on the buffered path: the
    scope is the same, root_path beside the whole path."""
    s = serve(None, app_dir=MOUNTS, blocking_threads=2,
              args=("--mount", "/api=starlette_links:app", "--mount", "/flask=flask_links:app"))
    body = s.get("/api/").json()
    assert body["url"] == s.url("/api/items/3") and body["root_path"] == "/api" and body["path"] == "/api/", body
    assert s.get("/api/items/3").json() == {"n": 3}
    assert s.get("/flask/").json()["script_name"] == "/flask"


def test_positional_app_serves_what_no_mount_claims(serve):
    s = serve("flask_links:app", app_dir=MOUNTS, args=("--mount", "/dj=django_links"))
    assert s.get("/").json()["script_name"] == ""
    assert s.get("/items/5").json() == {"n": 5}
    assert s.get("/dj/").json()["script_name"] == "/dj"


def read_events(response, n, named=False):
    """The first n frames (id and data, and event when named) of an SSE
    response; comments and the server's m0-position skipped, and named
    events unless named."""
    events, event = [], {}
    for line in response.iter_lines(decode_unicode=True):
        if line == "":
            if "data" in event and ("event" not in event or named and event["event"] != "m0-position"):
                events.append(event)
                if len(events) == n:
                    return events
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            event[name] = event[name] + "\n" + value if name == "data" and name in event else value
    raise AssertionError(f"the stream ended after {events}")


def signed(server, channel, session=None, ttl=60):
    cookies = {"sessionid": session} if session else None
    r = server.get(f"/flask/grant?channel={channel}&ttl={ttl}", cookies=cookies)
    assert r.status_code == 200, r.text
    return r.json()["url"]


def publish(server, channel, text):
    r = server.post("/flask/publish", data={"channel": channel, "text": text})
    assert r.status_code == 200, r.text
    return r.json()["id"]


@pytest.mark.gil  # the mixed server mounts Starlette and FastAPI
def test_hold_mount_holds_a_signed_stream(mixed):
    url = signed(mixed, "news")
    assert url.startswith("/streams?") and "ch=news" in url, url
    with requests.get(mixed.url(url), stream=True, timeout=HTTP_TIMEOUT) as r:
        assert r.status_code == 200 and r.headers["Content-Type"] == "text/event-stream", r.headers
        fid = publish(mixed, "news", "hello")
        events = read_events(r, 1)
    assert events[0]["id"] == fid and events[0]["data"] == "hello", events


@pytest.mark.gil  # the mixed server mounts Starlette and FastAPI
def test_hold_mount_binds_the_session(mixed):
    url = signed(mixed, "news", session="s3ss10n")
    ok = requests.get(mixed.url(url), cookies={"sessionid": "s3ss10n"}, stream=True, timeout=HTTP_TIMEOUT)
    assert ok.status_code == 200
    ok.close()
    for cookies in ({"sessionid": "another"}, None):
        r = requests.get(mixed.url(url), cookies=cookies, timeout=HTTP_TIMEOUT)
        assert r.status_code == 403, (cookies, r.text)


def tamper(url, field, value):
    return re.sub(rf"([?&]{field}=)[^&]*", lambda m: m.group(1) + value, url)


@pytest.mark.gil  # the mixed server mounts Starlette and FastAPI
def test_forged_grants_get_403_and_one_line_each(mixed):
    url = signed(mixed, "news")
    forged = {
        "re-targeted": tamper(url, "ch", "secrets"),
        "extended": tamper(url, "exp", str(int(time.time()) + 3600)),
        "forged signature": tamper(url, "sig", "A" * 43),
        "no signature": re.sub(r"&sig=[^&]*", "", url),
        "another prefix": url.replace("/streams?", "/streams/x?"),
    }
    mark = mixed.mark()
    for what, bad in forged.items():
        r = requests.get(mixed.url(bad), timeout=HTTP_TIMEOUT)
        want = 404 if what == "another prefix" else 403
        assert r.status_code == want, (what, bad, r.status_code, r.text)
    expired = signed(mixed, "news", ttl=1)
    time.sleep(2.1)
    assert requests.get(mixed.url(expired), timeout=HTTP_TIMEOUT).status_code == 403
    lines = [line for line in mixed.stderr_since(mark).splitlines() if "a grant is refused" in line]
    assert len(lines) == 5, lines


def test_an_application_of_the_other_implementation_runs_unchanged(serve):
    """apps/mounts/other_calls.py makes the calls of the other m0serve's
    m0pub and grant, as an application written for it does: its stream URL
    (a session as bytes, a ttl as a float) holds a stream, and the frames it
    publishes (an event name, a frame it built with sse_event) arrive there
    as it published them, numbered by the server."""
    s = serve(None, app_dir=MOUNTS, args=("--mount", "/app=other_calls:application", "--mount", "/streams=hold",
                                          "--realtime"), env={"M0_GRANT_KEY": KEY, "M0_GRANT_COOKIE": None})
    r = s.get("/app/grant?channel=news&session=s3ss10n")
    assert r.status_code == 200, r.text
    url = r.json()["url"]
    assert requests.get(s.url(url), cookies={"sessionid": "another"}, timeout=HTTP_TIMEOUT).status_code == 403
    with requests.get(s.url(url), cookies={"sessionid": "s3ss10n"}, stream=True, timeout=HTTP_TIMEOUT) as stream:
        assert stream.status_code == 200, stream.text
        answers = [s.get(f"/app/{call}", params=params).json() for call, params in (
            ("publish", {"channel": "news", "data": "plain"}),
            ("publish", {"channel": "news", "data": "named", "event": "greeting"}),
            ("publish_with_id", {"channel": "news", "data": "numbered", "event": "update"}),
            ("publish_frame", {"channel": "news", "data": "two\nlines", "event": "framed"}),
        )]
        events = read_events(stream, 4, named=True)
    assert all(a["sent"] for a in answers), answers
    assert answers[0]["sent"] == events[0]["id"] and answers[2]["id"] == events[2]["id"], (answers, events)
    assert [(e.get("event"), e["data"]) for e in events] == [
        (None, "plain"), ("greeting", "named"), ("update", "numbered"), ("framed", "two\nlines")], events
    ids = [e["id"] for e in events]
    assert len(set(ids)) == 4, ids


def test_rotated_key(serve):
    """M0_GRANT_KEY_PREV still verifies during a rotation; a grant signed
    with a key that is neither is refused."""
    old, new = "o" * 40, "n" * 40
    env = {"M0_GRANT_KEY": old}
    s = serve(None, app_dir=MOUNTS, args=("--mount", "/flask=flask_links:app", "--mount", "/streams=hold",
                                          "--realtime"), env=env)
    url = signed(s, "news")
    assert s.stop() == 0
    s = serve(None, app_dir=MOUNTS, args=("--mount", "/flask=flask_links:app", "--mount", "/streams=hold",
                                          "--realtime"), env={"M0_GRANT_KEY": new, "M0_GRANT_KEY_PREV": old})
    with requests.get(s.url(url), stream=True, timeout=HTTP_TIMEOUT) as r:
        assert r.status_code == 200
    assert s.stop() == 0
    s = serve(None, app_dir=MOUNTS, args=("--mount", "/flask=flask_links:app", "--mount", "/streams=hold",
                                          "--realtime"), env={"M0_GRANT_KEY": new})
    assert requests.get(s.url(url), timeout=HTTP_TIMEOUT).status_code == 403


def refused(args, env=None):
    proc = subprocess.run([str(M0SERVE), "--host", "127.0.0.1", "--port", str(free_port()),
                           "--app-dir", str(MOUNTS), *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None})
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("args,env,want", [
    (("--mount", "/s=hold", "--realtime"), {}, "M0_GRANT_KEY is not set"),
    (("--mount", "/s=hold", "--realtime"), {"M0_GRANT_KEY": "short"}, "M0_GRANT_KEY is 5 bytes"),
    (("--mount", "/s=hold"), {"M0_GRANT_KEY": KEY}, "--realtime is not set"),
    (("--mount", "/a=flask_links:app", "--mount", "/a/=django_links"), {}, "/a is served already"),
    (("--mount", "/api=starlette_links:app", "--realtime"), {}, "is an ASGI application"),
    pytest.param(("--threads", "2", "--mount", "/a=flask_links:app"), {}, "at most 1 (max_threads)",
                 marks=pytest.mark.skipif(FREE_THREADED, reason="a free-threaded build takes --threads above 1 "
                                          "(test_freethreaded.py)")),
    (("--mount", "/=hold", "--realtime"), {"M0_GRANT_KEY": KEY}, "a hold mount answers its prefix alone"),
    (("--mount", "/a=flask_links:app"), {"M0_APP_TICK_MS": "5"}, "the application has no producer"),
    (("--mount", "/a=flask_links:app"), {"M0_GRANT_KEY": "short"}, "M0_GRANT_KEY is 5 bytes"),
    (("--mount", "/a=flask_links:app"), {"M0_GRANT_COOKIE": "sid"}, "there is none"),
    (("--protocol", "asgi", "--mount", "/a=flask_links:app"), {}, "only mounts are given"),
])
def test_refusals(args, env, want):
    code, stderr = refused(args, {"M0_GRANT_KEY": None, **env} if "M0_GRANT_KEY" not in env else env)
    assert code == 78 and want in stderr, (code, stderr)
    assert len(stderr.strip().splitlines()) == 1, stderr


def test_a_mount_that_fails_to_import_names_it():
    code, stderr = refused(("--mount", "/x=no_such_module_here:app"))
    assert code == 1 and "--mount /x=no_such_module_here:app" in stderr, stderr


@pytest.mark.gil
def test_doctor_without_a_wsgi_mount_reports_no_pool():
    proc = subprocess.run([str(M0SERVE), "--doctor", "--app-dir", str(MOUNTS), "--realtime",
                           "--mount", "/api=starlette_links:app", "--mount", "/live=hold"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env={**os.environ, "M0_GRANT_KEY": KEY})
    topo = json.loads(proc.stdout.strip().splitlines()[-1])["topology"]
    assert proc.returncode == 0 and topo["protocol"] == "asgi+hold", topo
    assert topo["pool"] is False and topo["blocking_threads"] == 0 and topo["loop"] == "pump", topo


@pytest.mark.gil
def test_doctor_lists_the_mounts():
    proc = subprocess.run([str(M0SERVE), "--doctor", "--app-dir", str(MOUNTS), *MIXED],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env={**os.environ, "M0_GRANT_KEY": KEY})
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0 and report["exit"] == 0, report["checks"]
    assert report["mounts"] == [
        {"prefix": "/flask", "spec": "flask_links:app", "protocol": "wsgi", "mode": "pool"},
        {"prefix": "/dj", "spec": "django_links", "protocol": "wsgi", "mode": "pool"},
        {"prefix": "/api", "spec": "starlette_links:app", "protocol": "asgi", "mode": "executor"},
        {"prefix": "/fast", "spec": "fastapi_links:app", "protocol": "asgi", "mode": "executor"},
        {"prefix": "/streams", "spec": "hold", "protocol": "hold", "mode": "hold"},
    ], report["mounts"]
    assert report["env"]["M0_GRANT_KEY"] == "set" and KEY not in proc.stdout
    assert report["declares"] == {"max_workers": 0, "max_threads": 1}
    topo = report["topology"]
    assert topo["protocol"] == "wsgi+asgi+hold", topo
    # The ASGI mounts' executor beside the WSGI mounts' pool.
    assert topo["loop"] == "pump" and topo["asgi_path"] == "executor" and topo["event_loop"], topo
    assert topo["pool"] is True and topo["blocking_threads"] >= 1, topo


def test_socket_messages_under_a_mount(serve):
    """A WSGI application mounted at /rt under --realtime holds a WebSocket,
    and the socket's messages are posted to it under its prefix
    (SCRIPT_NAME=/rt, PATH_INFO=/ws/message)."""
    from websockets.sync.client import connect as ws_connect

    from conftest import APPS, wait_until
    s = serve(None, app_dir=APPS, args=("--realtime", "--mount", "/rt=realtime_app:application"))
    with ws_connect(s.url("/rt/ws?c=sock").replace("http", "ws", 1), open_timeout=HTTP_TIMEOUT) as ws:
        ws.send("hello")
        posts = wait_until(lambda: [p for p in s.get_json("/rt/posts") if p["channel"] == "sock"], 10,
                           "the message posted to the mounted application")
        assert posts[-1]["body"] == "hello" and posts[-1]["opcode"] == "1", posts
        s.post("/rt/publish?c=sock", data=b"back")
        assert ws.recv(timeout=HTTP_TIMEOUT) == "back"
    assert "refused a WebSocket message" not in s.stderr


@pytest.mark.gil
def test_a_failed_lifespan_shuts_down_the_mounts_that_started(tmp_path):
    """/a's lifespan starts, /b's fails: the start-up ends with exit 1,
    and /a's lifespan is shut down first, as a drain would."""
    from conftest import APPS
    closed = tmp_path / "closed"
    proc = subprocess.run([str(M0SERVE), "--host", "127.0.0.1", "--port", str(free_port()), "--app-dir", str(APPS),
                           "--mount", "/a=asgi_lifespans:starlette_state",
                           "--mount", "/b=asgi_lifespans:starlette_failing"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env={**os.environ, "M0_TEST_SHUTDOWN_FILE": str(closed)})
    assert proc.returncode == 1 and "startup exploded" in proc.stderr, proc.stderr
    assert closed.read_text() == "closed db\n", proc.stderr
