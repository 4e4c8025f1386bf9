"""realtime_app, imported by the first worker at once and by every later one
only once the file M0_TEST_GATE/open exists: a worker that starts after its
sibling began to serve, at a moment the test chooses."""

import os
import time
from pathlib import Path

gate = Path(os.environ["M0_TEST_GATE"])
try:
    (gate / "first").touch(exist_ok=False)
except FileExistsError:
    while not (gate / "open").exists():
        time.sleep(0.02)

from realtime_app import application  # noqa: E402,F401
