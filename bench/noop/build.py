"""Build bench/noop/noophook.c into bench/build/ for the running Python.

Usage: python3 bench/noop/build.py   (run.py calls it; rebuilds only when stale)
Prints the directory to put on sys.path.
"""
import os
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(os.path.dirname(HERE), "build")


def build(quiet=False):
    src = os.path.join(HERE, "noophook.c")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    out = os.path.join(BUILD, "noophook" + suffix)
    if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src):
        return BUILD
    os.makedirs(BUILD, exist_ok=True)
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-O2", "-shared", "-fPIC", "-Wall", "-Wextra",
           "-I" + sysconfig.get_paths()["include"], src, "-o", out]
    if not quiet:
        print(" ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    return BUILD


if __name__ == "__main__":
    print(build())
