"""examples/django_site served through wsgiref.validate.validator.

The example reads its SQLite path from M0_EXAMPLE_DB; the test fixture
migrates that database before starting the server.
"""

import os
import sys
from pathlib import Path
from wsgiref.validate import validator

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "django_site"
sys.path.insert(0, str(EXAMPLE))
os.environ["DJANGO_SETTINGS_MODULE"] = "mysite.settings"

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = validator(get_wsgi_application())
