"""The WSGI environ the server builds (PEP 3333), seen from pep3333.py."""

import json

import pytest

from conftest import FRONT_ENDS, RawReader, http_request, read_response, serve_on


def environ_via_raw(server, headers=(), method="GET", path="/environ", body=b"", version="HTTP/1.1"):
    """GET /environ over a raw socket; returns (report, client socket's local port)."""
    with server.connect() as sock:
        local_port = sock.getsockname()[1]
        sock.sendall(http_request(method, path, server.port, headers, body, version))
        resp = read_response(RawReader(sock), method)
    assert resp.status == 200, resp
    return json.loads(resp.body), local_port


@pytest.fixture(scope="module")
def basic(pep_server):
    r = pep_server.get("/environ/caf%C3%A9?a=1&b=%20x&c=caf%C3%A9&d",
                       headers={"X-Custom-Header": "v1", "User-Agent": "e2e-agent/1.0"})
    assert r.status_code == 200
    return r.json()


def test_request_line(basic):
    env = basic["environ"]
    assert env["REQUEST_METHOD"] == "GET"
    assert env["SCRIPT_NAME"] == ""
    assert env["SERVER_PROTOCOL"] == "HTTP/1.1"


def test_path_info_is_decoded_and_carried_as_latin1(basic):
    # %C3%A9 is UTF-8 for "é"; PEP 3333 hands the raw bytes over as latin-1 chars.
    assert basic["environ"]["PATH_INFO"] == "/environ/caf\xc3\xa9"


def test_query_string_is_raw(basic):
    assert basic["environ"]["QUERY_STRING"] == "a=1&b=%20x&c=caf%C3%A9&d"


def test_server_name_and_port(basic, pep_server):
    env = basic["environ"]
    assert env["SERVER_NAME"] == "127.0.0.1"
    assert env["SERVER_PORT"] == str(pep_server.port)


def test_http_headers(basic, pep_server):
    env = basic["environ"]
    assert env["HTTP_X_CUSTOM_HEADER"] == "v1"
    assert env["HTTP_USER_AGENT"] == "e2e-agent/1.0"
    assert env["HTTP_HOST"] == f"127.0.0.1:{pep_server.port}"


def test_every_cgi_value_is_a_str(basic):
    wrong = {k: type(v).__name__ for k, v in basic["environ"].items()
             if not k.startswith("wsgi.") and "." not in k and not isinstance(v, str)}
    assert wrong == {}


def test_wsgi_keys(basic):
    env, types = basic["environ"], basic["wsgi_types"]
    assert basic["wsgi.version"] == [1, 0] and types["wsgi.version"] == "tuple"
    assert env["wsgi.url_scheme"] == "http"
    assert env["wsgi.multithread"] is True
    assert env["wsgi.multiprocess"] is False
    assert env["wsgi.run_once"] is False
    for key in ("wsgi.input", "wsgi.errors", "wsgi.file_wrapper"):
        assert key in types, f"{key} missing"
    assert basic["input_methods"] == ["read", "readline", "readlines", "__iter__"]
    assert basic["errors_methods"] == ["write", "writelines", "flush"]
    assert basic["file_wrapper_callable"] is True


def test_content_type_and_length(pep_server):
    r = pep_server.post("/environ", data=b"hello", headers={"Content-Type": "text/x-test"})
    assert r.status_code == 200
    env = r.json()["environ"]
    assert env["REQUEST_METHOD"] == "POST"
    assert env["CONTENT_TYPE"] == "text/x-test"
    assert env["CONTENT_LENGTH"] == "5"
    assert "HTTP_CONTENT_TYPE" not in env
    assert "HTTP_CONTENT_LENGTH" not in env


def test_http10_protocol(pep_server):
    report, _ = environ_via_raw(pep_server, version="HTTP/1.0")
    assert report["environ"]["SERVER_PROTOCOL"] == "HTTP/1.0"


@pytest.fixture(scope="module", params=FRONT_ENDS)
def pep_on_both(request, serve_module):
    """pep3333.py on each front end: m0serve's fasthttp and net/http."""
    return serve_on(serve_module, request.param, "pep3333:application", validated=True)


FILLERS = [(f"X-Filler-{i}", str(i)) for i in range(70)]


@pytest.mark.parametrize("headers, key, want", [
    ([("X-Multi", "a"), ("X-Multi", "b")], "HTTP_X_MULTI", "a,b"),
    ([("Accept", "text/html"), ("X-Other", "o"), ("accept", "*/*")], "HTTP_ACCEPT", "text/html,*/*"),
    ([("Forwarded", "a, b"), ("Forwarded", "c")], "HTTP_FORWARDED", "a, b,c"),
    ([("Cookie", "a=1"), ("Cookie", "b=2")], "HTTP_COOKIE", "a=1; b=2"),
    ([*FILLERS, ("X-Late", "1"), ("X-Late", "2")], "HTTP_X_LATE", "1,2"),
    ([("X-Early", "1"), *FILLERS, ("X-Early", "2")], "HTTP_X_EARLY", "1,2"),
], ids=["twice", "apart", "own-commas", "cookie", "after-70-names", "around-70-names"])
def test_repeated_header_is_joined_with_a_comma(pep_on_both, headers, key, want):
    """As gunicorn, granian and Werkzeug join them: ",", Cookie with "; ",
    whatever the number of other headers."""
    report, _ = environ_via_raw(pep_on_both, headers=headers)
    assert report["environ"].get(key) == want


def test_underscore_header_is_dropped(pep_server):
    report, _ = environ_via_raw(pep_server, headers=[("X_Forwarded_For", "6.6.6.6")])
    env = report["environ"]
    assert "HTTP_X_FORWARDED_FOR" not in env
    leaked = {k: v for k, v in env.items() if isinstance(v, str) and "6.6.6.6" in v}
    assert leaked == {}


def test_underscore_header_does_not_shadow_the_real_one(pep_server):
    report, _ = environ_via_raw(pep_server, headers=[
        ("X_Forwarded_For", "6.6.6.6"), ("X-Forwarded-For", "10.1.2.3")])
    assert report["environ"]["HTTP_X_FORWARDED_FOR"] == "10.1.2.3"


def test_hyphen_header_is_kept(pep_server):
    report, _ = environ_via_raw(pep_server, headers=[("X-Forwarded-For", "10.1.2.3")])
    assert report["environ"]["HTTP_X_FORWARDED_FOR"] == "10.1.2.3"


def test_remote_addr_and_port(pep_server):
    report, local_port = environ_via_raw(pep_server)
    env = report["environ"]
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["REMOTE_PORT"] == str(local_port)
