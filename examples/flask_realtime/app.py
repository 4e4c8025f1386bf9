"""A chat room on m0serve --realtime: an EventSource and a WebSocket on one
channel, held by the server, fed by views and a command that publish.

    m0serve --realtime --app-dir examples/flask_realtime app:app
"""

from __future__ import annotations

import click
from flask import Flask, Response, jsonify, render_template, request
from m0serve import m0pub

app = Flask(__name__)

CHANNEL = "chat"


@app.get("/")
def index() -> str:
    return render_template("index.html")


@app.get("/events")
def events() -> Response:
    # Approve the hold: the server keeps the stream, this thread is free.
    return Response(headers={"M0-Hold": "stream", "M0-Channel": CHANNEL})


@app.route("/ws", websocket=True)
def ws() -> Response:
    return Response(headers={"M0-Hold": "websocket", "M0-Channel": CHANNEL})


@app.post("/ws/message")
def ws_message() -> tuple[str, int]:
    # What a socket sends arrives here; this room says it to everyone.
    text = request.get_data(as_text=True)
    m0pub.publish(request.headers["M0-Channel"], f"{request.headers['M0-Slot']}: {text}")
    return "", 204


@app.post("/publish")
def publish() -> Response:
    text = request.form.get("text") or request.get_data(as_text=True)
    return jsonify(id=m0pub.publish(CHANNEL, text))


@app.post("/announce")
def announce_view() -> Response:
    # Runs the command below inside the server, where m0pub reaches it.
    result = app.test_cli_runner().invoke(announce, [request.form.get("text", "")])
    return jsonify(output=result.output.strip(), exit_code=result.exit_code)


@app.cli.command("announce")
@click.argument("text")
def announce(text: str) -> None:
    """Say TEXT to the room (inside the server; from a shell it says why not)."""
    try:
        frame_id = m0pub.publish(CHANNEL, f"announcement: {text}")
    except m0pub.NotServing as e:  # a server without --realtime
        raise click.ClickException(str(e)) from None
    if frame_id is False:  # outside the server: its warning says why
        raise click.ClickException("the announcement was not published")
    click.echo(frame_id)
