"""A package with no application of its own: `m0serve asgipkg` finds main.py's."""
