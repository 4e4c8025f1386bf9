"""A WSGI application written against the other m0serve implementation's
calls (PyPI's m0serve 1.16.0) and nothing of this one's own: the ones of
its m0pub and grant an application makes, with the argument types that
one takes (an event name, an SSE frame it built, a session as bytes, a ttl
as a float)."""

import json
from urllib.parse import parse_qs

from m0serve import grant, m0pub


def application(environ, start_response):
    q = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    path = environ["PATH_INFO"]
    if path == "/grant":
        body = {"url": grant.stream_url("/streams", q["channel"], session=q["session"].encode(), ttl=3600.0)}
    elif path == "/publish":
        body = {"sent": m0pub.publish(q["channel"], q["data"], event=q.get("event"))}
    elif path == "/publish_with_id":
        sent, event_id = m0pub.publish_with_id(q["channel"], q["data"], event=q.get("event"))
        body = {"sent": sent, "id": event_id}
    elif path == "/publish_frame":
        frame = m0pub.sse_event(q["data"], event=q.get("event"), event_id=m0pub.next_event_id())
        body = {"sent": m0pub.publish_frame(q["channel"], frame)}
    else:
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found"]
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(body).encode()]
