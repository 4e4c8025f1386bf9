"""A pure-Python CPU-bound WSGI view, for scaling across threads on a
free-threaded CPython: GET /?n=K&seed=S runs K iterations of an integer
recurrence that releases the GIL nowhere, from S (7 by default), and
answers the result (tests/e2e/test_freethreaded.py checks each answer)."""


def _work(n, seed):
    x = seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def application(environ, start_response):
    q = dict(p.split("=", 1) for p in environ.get("QUERY_STRING", "").split("&") if "=" in p)
    body = b"%d\n" % _work(int(q.get("n", "20000")), int(q.get("seed", "7")))
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
