"""The application behind --static in test_static.py: it answers what the
static directory does not have, and counts the hits on /pwned, which an SVG's
script would make if it ran."""

import os

HITS = os.environ.get("M0_TEST_HITS", "/tmp/m0-static-hits")

EVIL_SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20">'
    b'<rect width="40" height="20" fill="red"/>'
    b'<script>fetch("/pwned")</script></svg>'
)


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/pwned":
        with open(HITS, "a") as f:
            f.write("hit\n")
        start_response("204 No Content", [])
        return [b""]
    if path == "/raw-evil.svg":
        # The same SVG with no policy: the control that shows the script runs.
        start_response("200 OK", [("Content-Type", "image/svg+xml")])
        return [EVIL_SVG]
    body = ("app:" + path).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("X-App", "yes")])
    return [body]
