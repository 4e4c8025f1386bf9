"""Raises at import: under --workers N the supervisor prints the traceback
once and exits 1. The message is built at run time so that it appears in
the traceback once, on its last line, and not in the quoted source too."""

raise RuntimeError("prefork-import-" + "failure")
