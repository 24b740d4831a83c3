"""Shared helpers for the recorder tests.

Most recorder tests change process-wide state (allocator hooks, profile
functions, thread wrappers), so each scenario runs in a fresh interpreter
(``run_scenario``) and the test parses the files it produced.
"""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

import threadgraph

PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(threadgraph.__file__)))

# One record per line, as docs/formats.md: TIME is digits '.' 6 digits.
TIME_RE = r"\d+\.\d{6}"
MEM_RE = re.compile(r"^(?:(?P<time>%s)#)?(?P<site>.*):(?P<line>-?\d+):(?P<func>[^:]*)=>(?P<delta>-?\d+)$" % TIME_RE)
STACK_RE = re.compile(r"^(?P<indent> *)(?:(?P<time>%s)#)?(?P<site>.*):(?P<line>-?\d+):(?P<func>[^:]*)$" % TIME_RE)
PROCESS_RE = re.compile(r"^(?:(?P<time>%s)#)?(?P<bytes>\d+)$" % TIME_RE)


def env_with_package(extra=None, keep_cli=False):
    """os.environ with threadgraph importable from this tree, without
    PYTHONWARNINGS (and without TG_CLI unless KEEP_CLI), plus EXTRA."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_PARENT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONWARNINGS", None)
    if not keep_cli:
        env.pop("TG_CLI", None)
    env.update(extra or {})
    return env


def run_dirs(base):
    """The run directories under BASE, sorted."""
    return sorted(d for d in glob.glob(os.path.join(str(base), "*")) if os.path.isdir(d))


def run_scenario(tmp_path, code, timeout=120, check=True, env=None):
    """Run CODE (dedented) as a script in TMP_PATH with threadgraph importable.
    Returns the CompletedProcess; fails the test on a non-zero exit if CHECK.
    TIMEOUT only bounds a hang (a scenario takes a second or two of CPU): the
    script then gets SIGABRT, on which faulthandler (PYTHONFAULTHANDLER) prints
    every thread's Python stack, and the test fails with them."""
    script = tmp_path / "scenario.py"
    script.write_text(textwrap.dedent(code))
    full_env = env_with_package(env, keep_cli=True)
    full_env.setdefault("PYTHONFAULTHANDLER", "1")
    args = [sys.executable, str(script)]
    proc = subprocess.Popen(args, cwd=str(tmp_path), env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        pytest.fail("scenario still running after %d s (hung?): stopped with SIGABRT\n"
                    "stdout:\n%s\nstderr (its threads' stacks):\n%s" % (timeout, out, err))
    res = subprocess.CompletedProcess(args, proc.returncode, out, err)
    if check and res.returncode != 0:
        pytest.fail("scenario failed (%d)\nstdout:\n%s\nstderr:\n%s"
                    % (res.returncode, res.stdout, res.stderr))
    return res


def only_dir(base):
    """The single run directory under BASE."""
    entries = sorted(os.listdir(str(base)))
    assert len(entries) == 1, entries
    return os.path.join(str(base), entries[0])


def read_lines(path):
    with open(path, "rb") as f:
        data = f.read().decode("utf-8", "surrogateescape")
    assert data == "" or data.endswith("\n"), "last line incomplete in %s" % path
    return data.splitlines()


def parse_mem(path, timestamps=True):
    out = []
    for line in read_lines(path):
        m = MEM_RE.match(line)
        assert m, "bad .mem line %r in %s" % (line, path)
        assert (m.group("time") is not None) == timestamps, line
        out.append((m.group("site"), int(m.group("line")), m.group("func"), int(m.group("delta"))))
    return out


def parse_stack(path, timestamps=True):
    out = []
    for line in read_lines(path):
        m = STACK_RE.match(line)
        assert m, "bad .stack line %r in %s" % (line, path)
        assert (m.group("time") is not None) == timestamps, line
        out.append((len(m.group("indent")), m.group("site"), int(m.group("line")), m.group("func")))
    return out


def check_pairing(stack, mem):
    """The .stack lines describe a forest in pre-order; its post-order must be
    the .mem lines' (FILE, FUNCTION) sequence, calls still open at the end aside."""
    post = []
    open_ = []
    prev_depth = -1
    for depth, site, _line, func in stack:
        assert depth <= prev_depth + 1, "depth jumps from %d to %d" % (prev_depth, depth)
        while len(open_) > depth:
            post.append(open_.pop())
        open_.append((site, func))
        prev_depth = depth
    closed = [(site, func) for site, _l, func, _d in mem]
    # Calls still open at the end (the run stopped inside them) have no .mem line.
    while open_ and len(post) < len(closed):
        post.append(open_.pop())
    assert post == closed


def load_runinfo(run_dir):
    with open(os.path.join(run_dir, "runinfo.json")) as f:
        return json.load(f)
