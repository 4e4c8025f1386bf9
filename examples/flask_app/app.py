"""Flask example covering the request/response features m0serve must handle."""

from __future__ import annotations

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
