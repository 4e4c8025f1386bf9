"""A WSGI application for the listening tests: every answer says which
process served it, over what, and which of the service manager's
variables the application can see (none should reach it).

  /            {"pid", "remote_addr", "server_name", "server_port", "seen"}
  /sleep?s=S   sleeps S seconds first
"""

import json
import os
import time
from urllib.parse import parse_qsl

MANAGER_VARS = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


def application(environ, start_response):
    query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
    if environ["PATH_INFO"] == "/sleep":
        time.sleep(float(query.get("s", "0.1")))
    body = json.dumps({
        "pid": os.getpid(),
        "remote_addr": environ.get("REMOTE_ADDR"),
        "server_name": environ.get("SERVER_NAME"),
        "server_port": environ.get("SERVER_PORT"),
        "seen": sorted(k for k in MANAGER_VARS if k in os.environ),
    }).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
