"""Deliberately broken WSGI app: each route breaks PEP 3333 in one way.

Not wrapped in wsgiref.validate.validator, which would reject these bugs
itself before the server ever saw them.

  /raise-before   raises before start_response
  /no-start       returns a body without calling start_response
  /non-bytes      yields a str instead of bytes
  /bad-status     status "abc"
  /crlf-name      header name with "\\r\\n" injected
  /crlf-value     header value with "\\r\\n" injected
  /non-latin1     header value that cannot be encoded as latin-1
  /ok             a normal 200
"""

INJECTED = "x\r\nSet-Cookie: evil=1"


def application(environ, start_response):
    path = environ["PATH_INFO"]

    if path == "/ok":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
        return [b"ok\n"]

    if path == "/raise-before":
        raise RuntimeError("raise-before: the app failed before start_response")

    if path == "/no-start":
        return [b"x"]

    if path == "/non-bytes":
        start_response("200 OK", [("Content-Type", "text/plain")])

        def gen():
            yield "a str, not bytes"

        return gen()

    if path == "/bad-status":
        start_response("abc", [("Content-Type", "text/plain")])
        return [b"bad status\n"]

    if path == "/crlf-name":
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-Evil\r\nSet-Cookie: evil=1\r\nX-Pad", "y")])
        return [b"crlf in a header name\n"]

    if path == "/crlf-value":
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-Evil", INJECTED)])
        return [b"crlf in a header value\n"]

    if path == "/non-latin1":
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-Non-Latin1", "\u00e9\u20ac")])
        return [b"non-latin-1 header value\n"]

    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not found\n"]
