"""The CLI tests' fixtures; they and the helpers live in clisupport.py, a name of its
own, so that tests/cli and tests/python can run in one pytest session."""
from clisupport import fixtures, tg, tutorial  # noqa: F401  (pytest fixtures)
