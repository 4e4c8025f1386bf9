"""examples/flask_app served through wsgiref.validate.validator."""

import sys
from pathlib import Path
from wsgiref.validate import validator

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "flask_app"
sys.path.insert(0, str(EXAMPLE))

from app import app  # noqa: E402


class _ReadAllInput:
    """wsgiref.validate's input wrapper only accepts read(size) (the PEP 333
    rule), but PEP 3333 lets an app call read() with no size, and Werkzeug
    does so when the server sets wsgi.input_terminated. Serve that call with
    sized reads, so every byte still goes through the validator's checks."""

    def __init__(self, inner):
        self._inner = inner

    def read(self, size=-1):
        if size is not None and size >= 0:
            return self._inner.read(size)
        chunks = []
        while chunk := self._inner.read(65536):
            chunks.append(chunk)
        return b"".join(chunks)

    def __iter__(self):
        return iter(self._inner)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _allow_read_all(wsgi_app):
    def wrapped(environ, start_response):
        environ["wsgi.input"] = _ReadAllInput(environ["wsgi.input"])
        return wsgi_app(environ, start_response)

    return wrapped


application = validator(_allow_read_all(app))
