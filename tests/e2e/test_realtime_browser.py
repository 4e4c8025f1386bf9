"""The realtime contract as a browser lives it: headless Chromium opens the
Flask chat example, its EventSource receives frames, the connection is cut
and Chromium reconnects by itself with Last-Event-ID and receives exactly
what it missed; after a server restart it receives m0-gap.

Between the browser and m0serve sits a small TCP proxy (the page's origin),
so the test can cut the browser's connections, hold its reconnects until the
missed frames are published, and point it at a restarted server. Chromium is
driven over its DevTools protocol with the websockets client."""

import json
import re
import select
import shutil
import socket
import subprocess
import threading
import time

import pytest
from websockets.sync.client import connect as ws_connect

from conftest import EXAMPLES, HTTP_TIMEOUT, wait_until

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_TIMEOUT = 20  # seconds for the page to show what is awaited (EventSource retries after ~3 s)


class Proxy:
    """A TCP proxy on 127.0.0.1: forwards each connection to the current
    target port. pause() makes new connections wait (accepted, not yet
    forwarded) until resume(); cut() resets every open connection. It notes
    the head of each request it forwards (a browser writes a head at once)."""

    def __init__(self, target):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.open = threading.Event()
        self.open.set()
        self.pairs = []
        self.heads = []  # the first bytes of each connection, as the browser sent them
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        self.open.wait()
        if self.closed:
            client.close()
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=HTTP_TIMEOUT)
        except OSError:
            client.close()
            return
        with self.lock:
            self.pairs.append((client, upstream))
        socks = [client, upstream]
        try:
            while True:
                ready, _, _ = select.select(socks, [], [], 0.5)
                if self.closed:
                    break
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is client and re.match(rb"[A-Z]+ /", data):
                        with self.lock:
                            self.heads.append(data.split(b"\r\n\r\n", 1)[0].decode("latin-1"))
                    (upstream if s is client else client).sendall(data)
        except OSError:
            return
        finally:
            for s in socks:
                s.close()

    def pause(self):
        self.open.clear()

    def resume(self):
        self.open.set()

    def cut(self):
        """Reset every open connection, as a network that drops would."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for s in pair:
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def event_heads(self):
        with self.lock:
            return [h for h in self.heads if h.startswith("GET /events ")]

    def close(self):
        self.closed = True
        self.open.set()
        self.listener.close()
        self.cut()


class Browser:
    """Headless Chromium on a page, read through the DevTools protocol."""

    def __init__(self, url, profile):
        assert CHROMIUM, "chromium is not installed (scripts/test installs it)"
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-port=0", "--remote-allow-origins=*", f"--user-data-dir={profile}", url],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.stderr = []
        endpoint = None
        deadline = time.monotonic() + 60
        while endpoint is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.stderr.append(line)
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                endpoint = m.group(1)
        assert endpoint, "chromium printed no DevTools endpoint:\n" + "".join(self.stderr)
        threading.Thread(target=self._drain, daemon=True).start()
        self.browser = ws_connect(endpoint, open_timeout=HTTP_TIMEOUT, max_size=None)
        self.next_id = 0
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def call(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.browser.send(json.dumps(msg))
        while True:
            reply = json.loads(self.browser.recv(timeout=HTTP_TIMEOUT))
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", session=self.session, expression=expression, returnByValue=True)
        return r["result"].get("value")

    def items(self, list_id):
        """The text of each <li> in the page's list list_id."""
        return self.evaluate(
            f"Array.from(document.querySelectorAll('#{list_id} li')).map(li => li.textContent)") or []

    def close(self):
        try:
            self.browser.close()
        finally:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def browser_factory(tmp_path):
    made = []

    def make(url):
        b = Browser(url, tmp_path / f"chromium{len(made)}")
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def header_fields(head):
    """A request head's fields, by lower-case name."""
    fields = {}
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return fields


def held(server, kind="sse"):
    m = re.search(r'^m0_realtime_held\{kind="%s"\} (\d+)' % kind, server.get("/__metrics").text, re.M)
    return int(m.group(1)) if m else 0


def publish(server, text):
    r = server.post("/publish", data={"text": text}, timeout=HTTP_TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["id"]


def test_browser_reconnects_for_what_it_missed_and_sees_the_gap(serve, browser_factory):
    app_dir = EXAMPLES / "flask_realtime"
    args = ("--realtime", "--metrics")
    server = serve("app:app", app_dir=app_dir, args=args)
    proxy = Proxy(server.port)
    try:
        page = browser_factory(f"http://127.0.0.1:{proxy.port}/")
        wait_until(lambda: held(server) == 1, BROWSER_TIMEOUT, "the page's EventSource to be held")
        # A WebSocket hears only what is published once it is held.
        wait_until(lambda: held(server, "websocket") == 1, BROWSER_TIMEOUT, "the page's WebSocket to be held")

        # Live frames reach the page, and its WebSocket hears them too.
        ids = [publish(server, f"live {i}") for i in range(3)]
        want = [f"{fid} live {i}" for i, fid in enumerate(ids)]
        wait_until(lambda: page.items("sse") == want, BROWSER_TIMEOUT,
                   lambda: f"the live frames on the page: {page.items('sse')}")
        wait_until(lambda: page.items("ws") == [f"live {i}" for i in range(3)], BROWSER_TIMEOUT,
                   lambda: f"the frames on the page's socket: {page.items('ws')}")

        # The connection is cut; while the browser is away, frames go out.
        proxy.pause()
        proxy.cut()
        wait_until(lambda: held(server) == 0, 10, "the server to notice the cut stream")
        missed = [publish(server, f"missed {i}") for i in range(2)]
        proxy.resume()
        # Chromium reconnects by itself, presenting the last id it saw.
        wait_until(lambda: len(proxy.event_heads()) == 2, BROWSER_TIMEOUT,
                   lambda: f"the browser to reconnect: {proxy.event_heads()}")
        first, again = proxy.event_heads()
        assert "last-event-id" not in header_fields(first), first
        assert header_fields(again)["last-event-id"] == ids[-1], again
        want += [f"{fid} missed {i}" for i, fid in enumerate(missed)]
        wait_until(lambda: page.items("sse") == want, BROWSER_TIMEOUT,
                   lambda: f"exactly the missed frames: {page.items('sse')}")
        after = publish(server, "after the cut")
        want.append(f"{after} after the cut")
        wait_until(lambda: page.items("sse") == want, BROWSER_TIMEOUT,
                   lambda: f"the live feed after the replay: {page.items('sse')}")

        # The server restarts: the drain ends the stream cleanly with a
        # retry, the browser comes back to the new run and gets the gap.
        proxy.pause()
        assert server.stop() == 0
        server = serve("app:app", app_dir=app_dir, args=args)
        proxy.target = server.port
        newest = publish(server, "first of the new run")
        proxy.resume()
        wait_until(lambda: len(page.items("sse")) > len(want), BROWSER_TIMEOUT,
                   lambda: f"the browser to come back after the restart: {page.items('sse')}")
        shown = page.items("sse")
        assert shown[:len(want)] == want, shown
        assert len(shown) == len(want) + 1, shown
        kind, _, data = shown[-1].partition(" ")
        assert kind == "gap", shown
        assert json.loads(data) == {"last_event_id": after, "newest_id": newest}
        live = publish(server, "live again")
        wait_until(lambda: page.items("sse")[len(want) + 1:] == [f"{live} live again"], BROWSER_TIMEOUT,
                   lambda: f"the live feed of the new run: {page.items('sse')}")
    finally:
        proxy.close()
