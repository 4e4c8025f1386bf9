"""A Django Channels application as people write one: a chat consumer on
the in-memory channel layer. Its disconnect() awaits group_discard and
more, then records that it ran to its end (in the file M0_TEST_MARKS
names), so a test sees whether the server let it finish."""

import asyncio
import os

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="m0-test",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["channels"],
    CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
)
django.setup()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402


def index(request):
    return HttpResponse("chat\n", content_type="text/plain")


urlpatterns = [path("", index)]


def mark(line):
    with open(os.environ["M0_TEST_MARKS"], "a") as f:
        f.write(line + "\n")


class Chat(AsyncWebsocketConsumer):
    async def connect(self):
        await self.channel_layer.group_add("room", self.channel_name)
        await self.accept()

    async def receive(self, text_data=None, bytes_data=None):
        await self.channel_layer.group_send("room", {"type": "chat.message", "text": text_data})

    async def chat_message(self, event):
        await self.send(text_data=event["text"])

    async def disconnect(self, code):
        await self.channel_layer.group_discard("room", self.channel_name)
        await asyncio.sleep(0.2)  # more cleanup, after an await
        mark(f"disconnect {code}")


application = ProtocolTypeRouter({
    "http": get_asgi_application(),
    "websocket": URLRouter([path("ws/chat/", Chat.as_asgi())]),
})
