"""examples/hello served through wsgiref.validate.validator."""

import sys
from pathlib import Path
from wsgiref.validate import validator

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "hello"
sys.path.insert(0, str(EXAMPLE))

from hello import application as hello  # noqa: E402

application = validator(hello)
