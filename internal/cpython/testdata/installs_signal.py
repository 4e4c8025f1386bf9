"""An application that installs a SIGINT handler while it imports."""
import signal

signal.signal(signal.SIGINT, signal.default_int_handler)


def app(environ, start_response):
    start_response("200 OK", [])
    return [b""]
