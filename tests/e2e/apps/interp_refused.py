"""A WSGI application that imports an extension module without support for
subinterpreters (CPython's own test module for it)."""
import _testsinglephase  # noqa: F401


def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
