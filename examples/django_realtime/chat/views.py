"""The chat room: holds approved here, frames published from views and a
management command."""

from io import StringIO

from django.core.management import call_command
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt, ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST
from m0serve import m0pub

CHANNEL = "chat"


@ensure_csrf_cookie
@require_GET
def index(request: HttpRequest) -> HttpResponse:
    return render(request, "chat/index.html")


@require_GET
def events(request: HttpRequest) -> HttpResponse:
    # Approve the hold: the server keeps the stream, this thread is free.
    return HttpResponse(headers={"M0-Hold": "stream", "M0-Channel": CHANNEL})


@require_GET
def ws(request: HttpRequest) -> HttpResponse:
    return HttpResponse(headers={"M0-Hold": "websocket", "M0-Channel": CHANNEL})


@csrf_exempt  # the server posts what a socket sends; no browser form does
@require_POST
def ws_message(request: HttpRequest) -> HttpResponse:
    text = request.body.decode("utf-8", "replace")
    m0pub.publish(request.headers["M0-Channel"], f"{request.headers['M0-Slot']}: {text}")
    return HttpResponse(status=204)


@require_POST
def publish(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"id": m0pub.publish(CHANNEL, request.POST.get("text", ""))})


@require_POST
def announce(request: HttpRequest) -> JsonResponse:
    # The management command, run inside the server, where m0pub reaches it.
    out = StringIO()
    call_command("announce", request.POST.get("text", ""), stdout=out)
    return JsonResponse({"output": out.getvalue().strip()})
