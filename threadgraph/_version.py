"""threadgraph's version: the one definition.

pyproject.toml reads it (``[tool.setuptools.dynamic]``), setup.py and the Makefile
compile it into the C processor (``threadgraph --version``) and the recorder
(``_recorder.VERSION``) as ``-DTG_VERSION``, and ``threadgraph.__version__`` is
this.  tests/python/test_version.py checks that they all agree.  Keep the line
below in this exact form: setup.py and the Makefile read it as text.
"""
__version__ = "0.1.0"
