"""A graph's output directory may be shared: gnuplot writes only inside a private
folder the CLI made, what it wrote is checked before anything is replaced, two
runs with the same -o DIR never mix their outputs, and names with quotes or
"]]>" make a valid script and a valid SVG (docs/security.md)."""
import os
import resource
import signal
import stat
import subprocess
import xml.dom.minidom

import pytest

from clisupport import CLI, gnuplot_itself, needs_gnuplot

MEM = "1394031412.5#a.py:3:f=>409600\n1394031413.5#a.py:4:g=>-409600\n"


def write_mem(d, thread):
    p = d / (thread + ".mem")
    p.write_text(MEM)
    return str(p)


def wrapper(tmp_path, name, body):
    """A $GNUPLOT that runs body (sh) and then the real gnuplot."""
    real = gnuplot_itself()
    p = tmp_path / name
    p.write_text("#!/bin/sh\n%s\nexec '%s' \"$@\"\n" % (body, real))
    p.chmod(0o755)
    return str(p)


def run(*args, env=None, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([CLI] + [str(a) for a in args], capture_output=True,
                          text=True, env=e, timeout=120, **kw)


@needs_gnuplot
def test_gnuplot_output_cannot_be_redirected_in_a_shared_dir(tmp_path):
    """The attacker is another user who can write into DIR (mode 1777): a
    $GNUPLOT wrapper plants a symlink at the very name gnuplot is about to
    open whenever that name is in a folder others can enter.  It must never
    be: the victim stays intact and the graph is a regular file."""
    out = tmp_path / "shared"
    out.mkdir()
    out.chmod(0o1777)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    planter = wrapper(tmp_path, "gp-attacker", """
for a in "$@"; do case "$a" in outfile=*) f=${a#outfile=\\'}; f=${f%%\\'};; esac; done
d=$(dirname "$PWD/$f")
if [ "$(stat -c %%a "$d")" != 700 ]; then rm -f "$PWD/$f"; ln -s '%s' "$PWD/$f"; fi
""" % victim)
    mem = write_mem(tmp_path, "T")
    for keep in ([], ["--keep"]):
        r = run("memg", *keep, "-o", out, mem, env={"GNUPLOT": planter})
        assert r.returncode == 0, r.stderr
        assert victim.read_bytes() == b"precious\n"
        st = os.lstat(out / "memg.svg")
        assert stat.S_ISREG(st.st_mode) and st.st_size > 0
    assert not [n for n in os.listdir(out) if n.startswith(".")], os.listdir(out)


@needs_gnuplot
def test_full_disk_never_replaces_a_good_graph(tmp_path):
    """gnuplot exits 0 when its write fails: the CLI checks the graph is whole.
    A file size limit (SIGXFSZ ignored, so writes fail with EFBIG as on a full
    disk) lets the CLI write its small files but cuts gnuplot's graph."""
    mem = write_mem(tmp_path, "T")
    out = tmp_path / "out"
    env = {"GNUPLOT": gnuplot_itself()}
    r = run("memg", "-o", out, mem, env=env)
    assert r.returncode == 0, r.stderr
    good = (out / "memg.svg").read_bytes()
    legend = (out / "memg.txt").read_bytes()
    assert len(good) > 12000

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
    mem2 = tmp_path / "T.mem"
    mem2.write_text(MEM.replace("409600", "819200"))
    r = run("memg", "-o", out, mem2, env=env, preexec_fn=limit, restore_signals=False)
    assert r.returncode != 0
    assert "incomplete graph" in r.stderr
    assert (out / "memg.svg").read_bytes() == good
    assert (out / "memg.txt").read_bytes() == legend
    assert sorted(os.listdir(out)) == ["memg.svg", "memg.txt"]


@needs_gnuplot
def test_two_runs_in_one_dir_do_not_mix(tmp_path):
    """Run A stops just before its gnuplot starts; run B, into the same DIR
    with --keep, goes to the end; then A ends.  What is left is all of A: its
    graph drew its own data, beside its legend and its kept script."""
    out = tmp_path / "out"
    out.mkdir()
    started, go = tmp_path / "started", tmp_path / "go"
    os.mkfifo(started)
    os.mkfifo(go)
    paused = wrapper(tmp_path, "gp-paused", "echo x > '%s'; read x < '%s'" % (started, go))
    alpha, beta = write_mem(tmp_path, "alpha"), write_mem(tmp_path, "beta")
    a = subprocess.Popen([CLI, "memg", "--keep", "-o", str(out), alpha],
                         env=dict(os.environ, GNUPLOT=paused),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with open(started) as f:  # blocks until A's gnuplot is about to run
            f.read()
        r = run("memg", "--keep", "-o", out, beta)
        assert r.returncode == 0, r.stderr
        with open(go, "w") as f:
            f.write("x\n")
        _, err = a.communicate(timeout=120)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    assert a.returncode == 0, err
    svg = (out / "memg.svg").read_text()
    gp = (out / "memg-plot" / "memg.gp").read_text()
    assert ">alpha<" in svg and "beta" not in svg
    assert "'alpha'" in gp and "beta" not in gp
    assert (out / "memg.txt").read_text().startswith("0: alpha>")
    assert not [n for n in os.listdir(out) if n.startswith(".")], os.listdir(out)


def test_kept_folder_gets_the_umask_mode(tmp_path):
    """The private folder is 0700 while made; kept, it has the usual mode."""
    mem = write_mem(tmp_path, "T")
    old = os.umask(0o022)
    try:
        r = run("memg", "--script-only", "-o", tmp_path / "o", mem)
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(tmp_path / "o" / "memg-plot").st_mode) == 0o755


@needs_gnuplot
@pytest.mark.parametrize("thread", ["'worker'", "''", "]]>", "a''b", "x'", "'"])
def test_quotes_and_cdata_end_in_thread_names(tmp_path, thread):
    mem = write_mem(tmp_path, thread)
    stack = tmp_path / (thread + ".stack")
    stack.write_text("1394031412.5#a.py:3:f\n 1394031412.6#a.py:4:g\n")
    for cmd, args in (("memg", [mem]), ("interleave", [mem]), ("nesting", [str(stack)])):
        out = tmp_path / cmd
        r = run(cmd, "--terminal", "svg", "-o", out, *args)
        assert r.returncode == 0, (cmd, r.stderr)
        doc = xml.dom.minidom.parse(str(out / (cmd + ".svg")))
        texts = "".join(n.data for n in _text_nodes(doc))
        if cmd != "interleave":  # interleave names threads on its axis, cut
            assert thread in texts, (cmd, texts)


def _text_nodes(node):
    for c in node.childNodes:
        if c.nodeType == c.TEXT_NODE:
            yield c
        else:
            yield from _text_nodes(c)
