"""An ASGI application that checks the scope of every HTTP request against
the ASGI specification and answers it, its body and what is wrong with it,
as JSON (the asgi package's FuzzScope)."""

import json


def _text(b):
    return b.decode("latin-1") if isinstance(b, bytes) else b


def _check(scope):
    problems = []

    def want(ok, what):
        if not ok:
            problems.append(what)

    want(scope.get("type") == "http", "type %r" % scope.get("type"))
    asgi = scope.get("asgi")
    want(isinstance(asgi, dict) and asgi.get("version") == "3.0" and isinstance(asgi.get("spec_version"), str),
         "asgi %r" % (asgi,))
    want(scope.get("http_version") in ("1.0", "1.1"), "http_version %r" % scope.get("http_version"))
    for k in ("method", "scheme", "path", "root_path"):
        want(type(scope.get(k)) is str, "%s is a %s, not a str" % (k, type(scope.get(k)).__name__))
    for k in ("raw_path", "query_string"):
        want(type(scope.get(k)) is bytes, "%s is a %s, not bytes" % (k, type(scope.get(k)).__name__))
    want(scope.get("scheme") == "http", "scheme %r" % scope.get("scheme"))
    headers = scope.get("headers")
    try:
        pairs = [tuple(h) for h in headers]
    except TypeError:
        pairs = []
        problems.append("headers %r is not iterable" % (headers,))
    for p in pairs:
        if len(p) != 2 or type(p[0]) is not bytes or type(p[1]) is not bytes:
            problems.append("header %r is not a pair of bytes" % (p,))
        elif p[0] != p[0].lower():
            problems.append("header name %r is not lowercase" % p[0])
    for k in ("client", "server"):
        v = scope.get(k)
        want(v is None or (len(v) == 2 and type(v[0]) is str and type(v[1]) is int), "%s %r" % (k, v))
    return pairs, problems


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            if m["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    pairs, problems = _check(scope)
    body = b""
    while True:
        m = await receive()
        if m["type"] != "http.request":
            problems.append("receive() gave %r before the body ended" % m["type"])
            break
        if type(m.get("body", b"")) is not bytes:
            problems.append("a body chunk is a %s" % type(m["body"]).__name__)
            break
        body += m.get("body", b"")
        if not m.get("more_body", False):
            break
    out = {
        "method": scope.get("method"), "path": scope.get("path"), "raw_path": _text(scope.get("raw_path")),
        "query_string": _text(scope.get("query_string")), "root_path": scope.get("root_path"),
        "http_version": scope.get("http_version"), "server": scope.get("server"),
        "headers": [[_text(n), _text(v)] for n, v in pairs if type(n) is bytes and type(v) is bytes],
        "body": body.decode("latin-1"), "problems": problems,
    }
    data = json.dumps(out).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
