"""Apps that break PEP 3333: the server answers 500, logs the problem, and
never lets a bad header reach the wire."""

import pytest
import requests

# route -> regex that the new stderr line must match (case-insensitive)
BROKEN = {
    "/raise-before": r"raise-before: the app failed before start_response",
    "/no-start": r"start_response",
    "/non-bytes": r"bytes|str",
    "/bad-status": r"status|abc",
    "/crlf-name": r"header",
    "/crlf-value": r"header",
    "/non-latin1": r"latin-?1|header|encod",
}


@pytest.mark.parametrize("route", list(BROKEN))
def test_broken_route_is_500_logged_and_harmless(broken_server, route):
    mark = broken_server.mark()
    resp = broken_server.raw("GET", route)
    assert resp.status == 500, resp
    assert resp.complete, resp
    assert b"Set-Cookie: evil" not in resp.raw, f"an injected header reached the wire: {resp.raw!r}"
    assert resp.header_values("Set-Cookie") == [] and resp.header_values("X-Non-Latin1") == []
    broken_server.wait_for_stderr(f"(?i){BROKEN[route]}", since=mark)
    ok = broken_server.get("/ok")
    assert ok.status_code == 200 and ok.content == b"ok\n"


@pytest.mark.parametrize("route", ["/crlf-name", "/crlf-value"])
def test_header_injection_with_requests(broken_server, route):
    r = broken_server.get(route)
    assert r.status_code == 500
    assert "evil" not in r.cookies and "Set-Cookie" not in r.headers


def test_errors_on_a_keep_alive_connection_do_not_break_it(broken_server):
    with requests.Session() as s:
        for route in BROKEN:
            assert s.get(broken_server.url(route), timeout=10).status_code == 500, route
            assert s.get(broken_server.url("/ok"), timeout=10).status_code == 200, f"after {route}"
