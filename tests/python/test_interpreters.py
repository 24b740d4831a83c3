"""The recorder's state is process-wide and protected by the GIL
(src/recorder/recorder.h): the module refuses to run in a subinterpreter, and a
free-threaded build is refused by setup.py (docs/api.md, "Interpreters")."""
import os
import subprocess
import sys

import pytest

from tgtest import env_with_package, run_scenario

HERE = os.path.dirname(os.path.abspath(__file__))
SETUP_PY = os.path.join(HERE, "..", "..", "setup.py")
MESSAGE = "threadgraph._recorder runs in the main interpreter only"

_testcapi = pytest.importorskip("_testcapi", reason="CPython's _testcapi runs subinterpreters")


def test_legacy_subinterpreter_import_is_refused(tmp_path):
    """A subinterpreter sharing the main one's GIL (Py_NewInterpreter, what
    mod_wsgi and the like use) gets an ImportError naming the reason; the main
    interpreter's module keeps working."""
    proc = run_scenario(tmp_path, """
        import _testcapi
        import threadgraph
        from threadgraph import ProcessProfile
        rc = _testcapi.run_in_subinterp("import threadgraph._recorder")
        p = ProcessProfile(format="text", default_log_path="out")
        p.enable()
        sum(range(10))
        p.disable()
        print("rc", rc)
    """)
    assert proc.stdout.split() == ["rc", "-1"], proc.stderr
    assert "ImportError: " + MESSAGE in proc.stderr, proc.stderr


@pytest.mark.skipif(sys.version_info < (3, 12), reason="own-GIL subinterpreters are 3.12+")
def test_own_gil_subinterpreter_import_is_refused(tmp_path):
    """A subinterpreter with its own GIL (PEP 684): CPython refuses the module
    from its Py_mod_multiple_interpreters slot."""
    proc = run_scenario(tmp_path, """
        import threadgraph
        try:
            import _interpreters as interp  # 3.13: isolated, own GIL by default
        except ImportError:
            interp = None
        if interp is not None:
            res = interp.run_string(interp.create(), "import threadgraph._recorder")
            print("refused" if res is not None and res.type.__name__ == "ImportError"
                  else "loaded", getattr(res, "msg", ""))
        else:
            import _xxsubinterpreters as interp  # 3.12
            try:
                interp.run_string(interp.create(isolated=True), "import threadgraph._recorder")
                print("loaded")
            except interp.RunFailedError as e:
                print("refused", e)
    """)
    assert proc.stdout.startswith("refused"), (proc.stdout, proc.stderr)
    assert "subinterpreter" in proc.stdout, proc.stdout


@pytest.mark.skipif(sys.version_info < (3, 12), reason="own-GIL subinterpreters are 3.12+")
def test_subinterpreter_import_of_the_package_is_lazy(tmp_path):
    """docs/api.md "Interpreters": `import threadgraph` loads the recorder
    lazily, so it succeeds in a subinterpreter; its first ProcessProfile() is
    what raises the ImportError."""
    proc = run_scenario(tmp_path, """
        try:
            import _interpreters as interp
        except ImportError:
            interp = None
        code = ("import threadgraph\\nprint('imported', flush=True)\\n"
                "threadgraph.ProcessProfile()")
        if interp is not None:
            res = interp.run_string(interp.create(), code)
            print("refused" if res is not None and res.type.__name__ == "ImportError"
                  else "loaded")
        else:
            import _xxsubinterpreters as interp
            try:
                interp.run_string(interp.create(isolated=True), code)
                print("loaded")
            except interp.RunFailedError:
                print("refused")
    """)
    assert proc.stdout.split() == ["imported", "refused"], (proc.stdout, proc.stderr)


def test_free_threaded_build_is_refused(tmp_path):
    """setup.py stops with a plain message when the Python it builds for has no
    GIL (Py_GIL_DISABLED, 3.13t).  No free-threaded Python is installed here:
    the config variable is set for setup.py's check alone."""
    pytest.importorskip("setuptools", reason="setup.py needs setuptools")
    code = ("import sys, sysconfig\n"
            "real = sysconfig.get_config_var\n"
            "sysconfig.get_config_var = lambda n: 1 if n == 'Py_GIL_DISABLED' else real(n)\n"
            "sys.argv = ['setup.py', '--version']\n"
            "import runpy\n"
            "runpy.run_path(%r, run_name='__main__')\n" % os.path.abspath(SETUP_PY))
    proc = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(SETUP_PY),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60)
    assert proc.returncode != 0
    assert "threadgraph needs the GIL: free-threaded CPython" in proc.stderr, proc.stderr
