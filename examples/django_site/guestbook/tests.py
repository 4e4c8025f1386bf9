import re

from django.test import Client, TestCase

from .models import Entry


class GuestbookTests(TestCase):
    def setUp(self) -> None:
        self.client = Client(enforce_csrf_checks=True)

    def csrf_token(self) -> str:
        page = self.client.get("/").content.decode()
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert match is not None
        return match.group(1)

    def test_sign_and_list(self) -> None:
        token = self.csrf_token()
        response = self.client.post(
            "/", {"name": "Ada", "message": "Hi <there>", "csrfmiddlewaretoken": token}
        )
        self.assertEqual(response.status_code, 302)
        self.assertEqual(response["Location"], "/")

        page = self.client.get("/")
        self.assertContains(page, "Guestbook")
        self.assertContains(page, 'class="entry"', count=1)
        self.assertContains(page, "Hi &lt;there&gt;")

        listing = self.client.get("/entries.json")
        self.assertEqual(listing.json(), [{"name": "Ada", "message": "Hi <there>"}])

    def test_newest_first(self) -> None:
        Entry.objects.create(name="a", message="first")
        Entry.objects.create(name="b", message="second")
        names = [e["name"] for e in self.client.get("/entries.json").json()]
        self.assertEqual(names, ["b", "a"])

    def test_invalid_form_is_400(self) -> None:
        token = self.csrf_token()
        with self.assertLogs("django.request", "WARNING"):
            response = self.client.post(
                "/", {"name": "", "message": "x", "csrfmiddlewaretoken": token}
            )
        self.assertEqual(response.status_code, 400)
        self.assertContains(response, "errorlist", status_code=400)
        self.assertFalse(Entry.objects.exists())

    def test_post_without_csrf_is_rejected(self) -> None:
        with self.assertLogs("django.security.csrf", "WARNING"):
            response = self.client.post("/", {"name": "Ada", "message": "Hi"})
        self.assertEqual(response.status_code, 403)

    def test_stream(self) -> None:
        response = self.client.get("/stream")
        self.assertTrue(response.streaming)
        self.assertFalse(response.has_header("Content-Length"))
        body = b"".join(response.streaming_content)
        self.assertEqual(body, b"".join(f"chunk {i}\n".encode() for i in range(5)))

    def test_download(self) -> None:
        response = self.client.get("/download")
        self.assertEqual(response["Content-Type"], "text/plain")
        self.assertTrue(response["Content-Disposition"].startswith("inline"))
        self.assertEqual(b"".join(response.streaming_content), b"hello from a file\n")

    def test_boom(self) -> None:
        client = Client(raise_request_exception=False)
        with self.assertLogs("django.request", "ERROR"):
            response = client.get("/boom")
        self.assertEqual(response.status_code, 500)
