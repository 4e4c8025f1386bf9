"""manage.py seed N: sign the guestbook N times, with varied names and
messages (the benchmark's database)."""

from django.core.management.base import BaseCommand

from guestbook.models import Entry

NAMES = ["Ada", "Grace", "Linus", "Barbara", "Edsger", "Margaret", "Dennis", "Frances"]
WORDS = ("a quick note to say the page loads fast and the coffee here is good "
         "we came for the talks and stayed for the hallway track see you next year").split()


class Command(BaseCommand):
    help = "Sign the guestbook N times."

    def add_arguments(self, parser):
        parser.add_argument("n", type=int)

    def handle(self, *args, n, **options):
        Entry.objects.bulk_create(
            Entry(name=f"{NAMES[i % len(NAMES)]} {i}",
                  message=" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12 + i % 20)))
            for i in range(n)
        )
        self.stdout.write(f"{Entry.objects.count()} entries")
