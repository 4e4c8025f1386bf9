"""Minimal PEP 3333 application: the baseline for benchmarks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

BODY = b"Hello, World!\n"
HEADERS = (
    ("Content-Type", "text/plain; charset=utf-8"),
    ("Content-Length", str(len(BODY))),
)


def application(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    # PEP 3333 wants a real list, and servers may append to it, so hand out a fresh copy.
    start_response("200 OK", list(HEADERS))
    return [BODY]
