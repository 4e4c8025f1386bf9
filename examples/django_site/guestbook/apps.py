from django.apps import AppConfig


class GuestbookConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "guestbook"
