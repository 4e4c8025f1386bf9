"""A WSGI application for the realtime contract's edges: holds of any
channel, frames of any bytes, the M0-* headers a request arrives with, and
holds answered wrongly."""

import json
import threading
from urllib.parse import parse_qsl

from m0serve import m0pub

posts = []
lock = threading.Lock()


def application(environ, start_response):
    path = environ["PATH_INFO"]
    query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
    channel = query.get("c", "room")
    if path == "/hold":
        start_response("200 OK", [("M0-Hold", "stream"), ("M0-Channel", channel), ("X-From-View", "yes")])
        return [b"not sent"]
    if path == "/ws":
        start_response("200 OK", [("M0-Hold", "websocket"), ("M0-Channel", channel)])
        return []
    if path == "/publish":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        if "event" in query:
            result = m0pub.publish(channel, body, event=query["event"])
        else:
            result = m0pub.publish(channel, body)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps({"id": result}).encode()]
    if path == "/publish-burst":
        # threads Python threads at once, each publishing n frames
        # "T.I" on the channel; the ids each got, in its order.
        threads, n = int(query.get("threads", "4")), int(query.get("n", "100"))
        got = [[] for _ in range(threads)]
        start = threading.Barrier(threads)

        def burst(t):
            start.wait()
            for i in range(n):
                got[t].append(m0pub.publish(channel, f"{t}.{i}".encode()))

        workers = [threading.Thread(target=burst, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(got).encode()]
    if path == "/ws/message":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        with lock:
            posts.append({
                "channel": environ.get("HTTP_M0_CHANNEL"), "slot": environ.get("HTTP_M0_SLOT"),
                "opcode": environ.get("HTTP_M0_OPCODE"), "type": environ.get("CONTENT_TYPE"),
                "cookie": environ.get("HTTP_COOKIE"), "body": body.decode("latin-1"),
            })
        start_response("204 No Content", [])
        return []
    if path == "/posts":
        with lock:
            body = json.dumps(posts).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]
    if path == "/echo-m0":
        seen = sorted(k for k in environ if k.startswith("HTTP_M0_"))
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(seen).encode()]
    if path == "/bad-hold":
        start_response("200 OK", [("M0-Hold", "stream")])  # no channel
        return []
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"plain\n"]
