"""manage.py announce TEXT: say TEXT to the room."""

from django.core.management.base import BaseCommand, CommandError, CommandParser
from m0serve import m0pub


class Command(BaseCommand):
    help = "Say TEXT to the chat room (inside the server; from a shell it says why not)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("text")

    def handle(self, *args: object, **options: str) -> None:
        try:
            frame_id = m0pub.publish("chat", f"announcement: {options['text']}")
        except m0pub.NotServing as e:  # a server without --realtime
            raise CommandError(str(e)) from None
        if frame_id is False:  # outside the server: its warning says why
            raise CommandError("the announcement was not published")
        self.stdout.write(str(frame_id))
