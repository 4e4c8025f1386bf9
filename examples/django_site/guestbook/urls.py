from django.urls import path

from . import views

app_name = "guestbook"

urlpatterns = [
    path("", views.index, name="index"),
    path("recent", views.recent, name="recent"),
    path("entries.json", views.entries_json, name="entries_json"),
    path("stream", views.stream, name="stream"),
    path("download", views.download, name="download"),
    path("boom", views.boom, name="boom"),
]
