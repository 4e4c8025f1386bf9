"""The FastAPI part of examples/mixed, served under /api by the Go program."""

from fastapi import FastAPI, Request

app = FastAPI(title="mixed")


@app.get("/")
async def index(request: Request) -> dict[str, str]:
    return {"items": str(request.url_for("item", n=1)), "root_path": request.scope["root_path"]}


@app.get("/items/{n}", name="item")
async def item(n: int) -> dict[str, int]:
    return {"n": n}
