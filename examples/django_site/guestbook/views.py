from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from django.http import (
    FileResponse,
    HttpRequest,
    HttpResponse,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from .forms import EntryForm
from .models import Entry

HELLO_FILE = Path(__file__).resolve().parent / "static_files" / "hello.txt"
PAGE_SIZE = 100


@require_http_methods(["GET", "POST"])
def index(request: HttpRequest) -> HttpResponse:
    status = 200
    if request.method == "POST":
        form = EntryForm(request.POST)
        if form.is_valid():
            form.save()
            # Post/redirect/get, so reloading the page does not sign twice.
            return redirect("guestbook:index")
        status = 400
    else:
        form = EntryForm()
    context = {"form": form, "entries": Entry.objects.all()[:PAGE_SIZE]}
    return render(request, "guestbook/index.html", context, status=status)


@require_GET
def recent(request: HttpRequest) -> HttpResponse:
    """The 20 newest entries in a table: a template over an ORM query, the
    benchmark's realistic page."""
    context = {"entries": Entry.objects.all()[:20], "total": Entry.objects.count()}
    return render(request, "guestbook/recent.html", context)


@require_GET
def entries_json(request: HttpRequest) -> JsonResponse:
    entries = list(Entry.objects.values("name", "message"))
    return JsonResponse(entries, safe=False)


@require_GET
def stream(request: HttpRequest) -> StreamingHttpResponse:
    def chunks() -> Iterator[str]:
        for i in range(5):
            yield f"chunk {i}\n"

    return StreamingHttpResponse(chunks(), content_type="text/plain")


@require_GET
def download(request: HttpRequest) -> FileResponse:
    # FileResponse closes the file once the server has sent it.
    return FileResponse(HELLO_FILE.open("rb"), as_attachment=False)


def boom(request: HttpRequest) -> NoReturn:
    raise ValueError("boom")
