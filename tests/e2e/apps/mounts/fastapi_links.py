"""A FastAPI application under a mount: its routes, url_for and root_path."""

from fastapi import FastAPI, Request

app = FastAPI()


@app.get("/")
async def index(request: Request):
    return {"url": str(request.url_for("item", n=3)), "root_path": request.scope["root_path"]}


@app.get("/items/{n}", name="item")
async def item(n: int):
    return {"n": n}
