"""--static PREFIX=DIR through m0serve: files from Go in front of the
application, sendfile traced with strace, and a headless Chromium showing that
an SVG renders in <img> while its script never runs when it is opened."""

import hashlib
import os
import shutil
import subprocess
import time

import pytest
import requests

from conftest import HTTP_TIMEOUT, wait_until
from test_asgi_sendfile import trace, traced_bytes, wait_traced

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once

SIZE = 4 << 20


@pytest.fixture
def evil(tmp_path):
    d = tmp_path / "public"
    d.mkdir(exist_ok=True)
    svg = (b'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20">'
           b'<rect width="40" height="20" fill="red"/>'
           b'<script>fetch("/pwned")</script></svg>')
    (d / "evil.svg").write_bytes(svg)
    (d / "page.html").write_text(
        '<!doctype html><title>waiting</title>'
        '<img id="i" src="evil.svg" '
        'onload="document.title=\'loaded:\'+this.naturalWidth" onerror="document.title=\'error\'">')
    return d


def start(serve, tmp_path, directory, *extra):
    hits = tmp_path / "hits"
    hits.write_text("")
    server = serve("static_app:application", args=("--static", f"/static={directory}", *extra),
                   env={"M0_TEST_HITS": str(hits)})
    return server, hits


def test_files_and_fall_through(serve, tmp_path):
    d = tmp_path / "public"
    d.mkdir()
    (d / "hello.txt").write_text("hello, static\n")
    (d / ".env").write_text("SECRET=1")
    server, _ = start(serve, tmp_path, d, "--static-cache-control", "public, max-age=60",
                      "--static-header", "X-Frame-Options: DENY", "--static-header", "Referrer-Policy: no-referrer")
    r = requests.get(server.url("/static/hello.txt"), timeout=HTTP_TIMEOUT)
    assert r.status_code == 200 and r.text == "hello, static\n"
    assert r.headers["Cache-Control"] == "public, max-age=60"
    assert r.headers["X-Frame-Options"] == "DENY" and r.headers["Referrer-Policy"] == "no-referrer"
    assert r.headers["X-Content-Type-Options"] == "nosniff" and "X-App" not in r.headers
    again = requests.get(server.url("/static/hello.txt"), headers={"If-None-Match": r.headers["ETag"]},
                         timeout=HTTP_TIMEOUT)
    assert again.status_code == 304 and again.content == b""
    part = requests.get(server.url("/static/hello.txt"), headers={"Range": "bytes=0-4"}, timeout=HTTP_TIMEOUT)
    assert part.status_code == 206 and part.text == "hello" and part.headers["Content-Range"] == "bytes 0-4/14"
    for path in ["/static/missing.txt", "/static/.env", "/static/../secret", "/elsewhere"]:
        r = requests.get(server.url(path), timeout=HTTP_TIMEOUT)
        assert r.headers.get("X-App") == "yes" and "SECRET" not in r.text, (path, r.status_code, r.text)
        assert "X-Frame-Options" not in r.headers, path


@pytest.mark.parametrize("rng", [None, "bytes=1000-3000000"], ids=["whole", "one range"])
def test_sendfile(serve, tmp_path, rng):
    assert shutil.which("strace"), "strace is not installed (scripts/test installs it)"
    d = tmp_path / "public"
    d.mkdir()
    data = os.urandom(SIZE)
    (d / "big.bin").write_bytes(data)
    server, _ = start(serve, tmp_path, d)
    out = tmp_path / "strace.txt"
    tracer = trace(server.proc.pid, out)
    try:
        headers = {"Range": rng} if rng else {}
        r = requests.get(server.url("/static/big.bin"), headers=headers, timeout=HTTP_TIMEOUT)
        wait_traced(out, len(r.content))
    finally:
        tracer.send_signal(2)
        tracer.wait(10)
    want = data[1000:3000001] if rng else data
    assert r.status_code == (206 if rng else 200)
    assert hashlib.sha256(r.content).digest() == hashlib.sha256(want).digest()
    sent, written = traced_bytes(out)
    # The first 512 bytes go out with the head, in one write, as net/http
    # sends them; sendfile carries the rest.
    assert len(want) - 512 <= sent <= len(want), f"sendfile carried {sent} of {len(want)} bytes"
    assert written < 64 << 10, f"{written} bytes went through write: the file was copied"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def browse(url, tmp_path):
    """The DOM of url after headless Chromium loaded it."""
    assert CHROMIUM, "chromium is not installed (scripts/test installs it)"
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=3000",
                           "--dump-dom", url], capture_output=True, text=True, timeout=60)
    return proc.stdout


def hit_count(hits):
    return hits.read_text().count("hit")


def test_svg_renders_in_img_and_its_script_never_runs(serve, tmp_path, evil):
    server, hits = start(serve, tmp_path, evil)
    r = requests.get(server.url("/static/evil.svg"), timeout=HTTP_TIMEOUT)
    assert r.headers["Content-Type"] == "image/svg+xml" and "sandbox" in r.headers["Content-Security-Policy"]
    # In <img> it renders (its width is known), as an image never runs script.
    dom = browse(server.url("/static/page.html"), tmp_path)
    assert "<title>loaded:40</title>" in dom, dom[:500]
    # Opened directly, the policy sandboxes it: the script does not run.
    browse(server.url("/static/evil.svg"), tmp_path)
    time.sleep(0.5)
    assert hit_count(hits) == 0, "the SVG's script ran when the SVG was opened directly"
    # The control: the same SVG without the policy does run its script, so
    # the check above can fail.
    browse(server.url("/raw-evil.svg"), tmp_path)
    wait_until(lambda: hit_count(hits) > 0, 10, "the control SVG's script to run")
