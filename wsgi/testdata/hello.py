"""The WSGI application of the package's examples."""


def application(environ, start_response):
    body = ("Hello from Python at %s\n" % environ["PATH_INFO"]).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
