"""A one-file Django project that reports the links reverse() builds."""

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.http import JsonResponse
from django.urls import path, reverse

settings.configure(
    DEBUG=False,
    SECRET_KEY="mount-tests",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    MIDDLEWARE=[],
    INSTALLED_APPS=[],
)


def index(request):
    return JsonResponse({
        "url": reverse("item", args=[3]),
        "absolute": request.build_absolute_uri(reverse("item", args=[3])),
        "script_name": request.META["SCRIPT_NAME"],
        "path_info": request.path_info,
        "path": request.path,
    })


def item(request, n):
    return JsonResponse({"n": n})


urlpatterns = [path("", index), path("items/<int:n>/", item, name="item")]

application = get_wsgi_application()
