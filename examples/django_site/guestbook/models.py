from django.db import models


class Entry(models.Model):
    name = models.CharField(max_length=100)
    message = models.TextField(max_length=2000)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        # Entries written within one clock tick share a timestamp; the id keeps
        # "newest first" deterministic.
        ordering = ["-created", "-id"]
        verbose_name_plural = "entries"

    def __str__(self) -> str:
        return f"{self.name}: {self.message[:40]}"
