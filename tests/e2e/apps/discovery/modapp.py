"""Found by `m0serve modapp`: a module whose WSGI callable is named `app`."""

from wsgiref.validate import validator


def _app(environ, start_response):
    body = b"served by modapp:app\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


app = validator(_app)
