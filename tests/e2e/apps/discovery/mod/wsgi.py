"""Found by `m0serve mod`: a package whose wsgi submodule has `application`."""

from wsgiref.validate import validator


def _app(environ, start_response):
    body = b"served by mod.wsgi:application\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


application = validator(_app)
