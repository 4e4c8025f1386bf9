"""WSGI entry point: m0serve --realtime --app-dir examples/django_realtime realtime_site.wsgi"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realtime_site.settings")
application = get_wsgi_application()
