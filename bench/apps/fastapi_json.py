"""FastAPI JSON endpoint for bench/run asgi: a framework on top of ASGI.

GET /json answers 200 application/json {"message":"Hello, World!"}.
"""

from fastapi import FastAPI

app = FastAPI()


@app.get("/json")
async def j():
    return {"message": "Hello, World!"}
