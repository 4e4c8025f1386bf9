from django.urls import path

from chat import views

urlpatterns = [
    path("", views.index),
    path("events", views.events),
    path("ws", views.ws),
    path("ws/message", views.ws_message),
    path("publish", views.publish),
    path("announce", views.announce),
]
