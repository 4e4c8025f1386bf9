"""Flask example covering the request/response features m0serve must handle."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import NoReturn

from flask import Flask, Response, jsonify, render_template, request
from markupsafe import escape

app = Flask(__name__)


@app.get("/")
def index() -> str:
    return render_template("index.html")


@app.get("/json")
def json_hello() -> Response:
    return jsonify(hello="world")


@app.post("/echo")
def echo() -> Response:
    return Response(
        request.get_data(),
        content_type=request.content_type or "application/octet-stream",
    )


@app.get("/stream")
def stream() -> Response:
    def generate() -> Iterator[bytes]:
        for i in range(5):
            yield f"line {i}\n".encode()

    # A generator has no known length, so the body goes out without Content-Length.
    return Response(generate(), mimetype="text/plain")


# Messages for /events, and the streams that heard their client leave.
MESSAGES: list[str] = []
LEFT: list[str] = []


@app.get("/events")
def events() -> Response:
    def generate() -> Iterator[str]:
        try:
            yield "event: hello\ndata: connected\n\n"
            while True:
                while not MESSAGES:  # waits for data, sending nothing meanwhile
                    time.sleep(0.1)
                yield f"data: {MESSAGES.pop(0)}\n\n"
        finally:
            LEFT.append("events")

    return Response(generate(), mimetype="text/event-stream")


@app.get("/left")
def left() -> Response:
    return jsonify(LEFT)


@app.route("/form", methods=["GET", "POST"])
def form() -> str:
    if request.method == "POST":
        return f"Hello, {escape(request.form.get('name', ''))}!"
    return render_template("form.html")


@app.get("/headers")
def headers() -> Response:
    data: dict[str, str | None] = dict(request.headers)
    data["remote_addr"] = request.remote_addr
    data["path"] = request.path
    data["query"] = request.query_string.decode()
    return jsonify(data)


@app.get("/boom")
def boom() -> NoReturn:
    raise RuntimeError("boom")
