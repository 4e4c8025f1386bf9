"""A module that raises while being imported: the server must not start."""

from wsgiref.validate import validator


def _app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"unreachable\n"]


application = validator(_app)

raise RuntimeError("failing_import: this module refuses to import")
