"""The Flask part of examples/mixed, served under /flask by the Go program."""

from flask import Flask, render_template, request
from m0serve import grant

app = Flask(__name__)


@app.get("/")
def index():
    # A signed URL for the Go side's hold mount: the stream is held in Go,
    # never calling back into Python.
    stream = grant.stream_url("/streams", "clock", session=request.cookies.get("sessionid"), ttl=3600)
    return render_template("index.html", stream=stream)


@app.get("/about")
def about():
    return {"served_under": request.script_root, "path": request.path}
