"""A Flask application that reports the links url_for builds, for mounts."""

from flask import Flask, request, url_for
from m0serve import grant, m0pub

app = Flask(__name__)


@app.get("/")
def index():
    return {
        "url": url_for("item", n=3),
        "external": url_for("item", n=3, _external=True),
        "script_name": request.environ["SCRIPT_NAME"],
        "path_info": request.environ["PATH_INFO"],
    }


@app.get("/items/<int:n>")
def item(n):
    return {"n": n}


@app.get("/grant")
def stream_grant():
    """A signed EventSource URL for the hold mount at /streams."""
    session = request.cookies.get("sessionid")
    return {"url": grant.stream_url("/streams", request.args["channel"], session=session,
                                    ttl=int(request.args.get("ttl", "60")))}


@app.post("/publish")
def publish():
    return {"id": m0pub.publish(request.form["channel"], request.form["text"])}
