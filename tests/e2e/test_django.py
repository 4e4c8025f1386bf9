"""examples/django_site, served through wsgiref.validate.validator."""

import json
import re
import uuid
from html.parser import HTMLParser

import requests

from conftest import HTTP_TIMEOUT


class EntryParser(HTMLParser):
    """Collects the text of elements whose class list contains "entry"."""

    def __init__(self):
        super().__init__()
        self.entries = []
        self._depth = 0  # >0 while inside an .entry element

    def handle_starttag(self, tag, attrs):
        if self._depth:
            self._depth += 1
        elif "entry" in (dict(attrs).get("class") or "").split():
            self._depth = 1
            self.entries.append("")

    def handle_endtag(self, tag):
        if self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.entries[-1] += data


def entries_in(html):
    parser = EntryParser()
    parser.feed(html)
    return parser.entries


def csrf_token(html):
    m = re.search(r'name="csrfmiddlewaretoken"\s+value="([^"]+)"', html) or \
        re.search(r'value="([^"]+)"\s+name="csrfmiddlewaretoken"', html)
    assert m, "no csrfmiddlewaretoken in the form"
    return m.group(1)


def test_index(django_server):
    r = django_server.get("/")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    assert "Guestbook" in r.text
    assert "<form" in r.text
    assert 'name="name"' in r.text and 'name="message"' in r.text
    csrf_token(r.text)


def test_post_entry_redirects_and_shows_up(django_server):
    marker = f"hello from the e2e suite {uuid.uuid4().hex[:8]}"
    with requests.Session() as s:
        page = s.get(django_server.url("/"), timeout=HTTP_TIMEOUT)
        assert page.status_code == 200
        r = s.post(django_server.url("/"), timeout=HTTP_TIMEOUT, allow_redirects=False, data={
            "csrfmiddlewaretoken": csrf_token(page.text), "name": "Grace", "message": marker})
        assert r.status_code == 302, r.text[:2000]
        assert r.headers["Location"] in ("/", django_server.url("/"))

        page = s.get(django_server.url("/"), timeout=HTTP_TIMEOUT)
        assert any(marker in e for e in entries_in(page.text)), entries_in(page.text)

        r = s.get(django_server.url("/entries.json"), timeout=HTTP_TIMEOUT)
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("application/json")
        assert marker in json.dumps(r.json())

        # The recent-entries page (the benchmark's page) lists it too.
        r = s.get(django_server.url("/recent"), timeout=HTTP_TIMEOUT)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
        assert "<h1>Recent entries</h1>" in r.text and marker in r.text
        assert re.search(r"\d+ entr(y|ies) in all", r.text), r.text[:2000]


def test_invalid_post_is_400(django_server):
    with requests.Session() as s:
        page = s.get(django_server.url("/"), timeout=HTTP_TIMEOUT)
        r = s.post(django_server.url("/"), timeout=HTTP_TIMEOUT, allow_redirects=False, data={
            "csrfmiddlewaretoken": csrf_token(page.text), "name": "", "message": ""})
        assert r.status_code == 400


def test_stream(django_server):
    r = django_server.get("/stream", stream=True)
    assert r.status_code == 200
    assert "Content-Length" not in r.headers
    assert b"".join(r.iter_content(chunk_size=None)) == b"".join(b"chunk %d\n" % i for i in range(5))


def test_download(django_server):
    r = django_server.get("/download")
    assert r.status_code == 200
    assert r.content == b"hello from a file\n"


def test_boom_is_500_and_server_survives(django_server):
    assert django_server.get("/boom").status_code == 500
    r = django_server.get("/")
    assert r.status_code == 200 and "Guestbook" in r.text
