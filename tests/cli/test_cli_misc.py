"""Global options, help, usage errors, exit codes, stdout errors."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from clisupport import CLI, tutorial_mems

COMMANDS = ["memg", "peaks", "memh", "nesting", "interleave", "decorate-stack"]


def test_version(tg):
    r = tg("--version")
    assert r.returncode == 0 and r.stdout == "threadgraph 0.1.0\n"


def test_help(tg):
    r = tg("--help")
    assert r.returncode == 0
    for c in COMMANDS:
        assert "\n    %s " % c in r.stdout
    r = tg("-h")
    assert r.returncode == 0


def test_help_names_run_and_points_run_to_the_python_command(tg):
    r = tg("help")
    assert r.returncode == 0 and r.stdout == tg("--help").stdout
    assert "\n    run " in r.stdout
    r = tg("run", "app.py")
    assert r.returncode == 2 and "'run' is the Python package's command" in r.stderr


def test_no_command(tg):
    r = tg()
    assert r.returncode == 2 and r.stderr.startswith("usage: threadgraph")


def test_unknown_command_and_option(tg):
    r = tg("frobnicate")
    assert r.returncode == 2 and "error: unknown command 'frobnicate'" in r.stderr
    r = tg("--bogus", "memg")
    assert r.returncode == 2 and "error: unknown option '--bogus'" in r.stderr
    for c in COMMANDS:
        r = tg(c, "--bogus", "x.mem")
        assert r.returncode == 2, c
        assert r.stderr.startswith("error: unknown option '--bogus'\nusage: threadgraph " + c)


def test_command_help(tg):
    for c in COMMANDS:
        r = tg(c, "--help")
        assert r.returncode == 0, c
        assert r.stdout.startswith("usage: threadgraph " + c)
        assert "--help" in r.stdout


def test_option_value_forms_and_errors(tg, tmp_path):
    a = tg("peaks", "--peak=20", "--peak_delta_time", "0", *tutorial_mems()).stdout
    b = tg("peaks", "--peak", "20", "--peak_delta_time=0", *tutorial_mems()).stdout
    assert a == b and a
    r = tg("peaks", "--peak=abc", *tutorial_mems())
    assert r.returncode == 2
    assert r.stderr == "error: option '--peak' expects a number, got 'abc'\n"
    r = tg("peaks", *tutorial_mems(), "--peak")
    assert r.returncode == 2 and "option '--peak' requires a value" in r.stderr
    r = tg("memg", "--no_process=1", *tutorial_mems())
    assert r.returncode == 2 and "takes no value" in r.stderr
    r = tg("peaks")
    assert r.returncode == 2 and "no dump files given" in r.stderr
    # "--" ends the options
    r = tg("peaks", "--", "--peak")
    assert r.returncode == 1 and "unable to open '--peak'" in r.stderr


def test_stdout_write_error():
    with open("/dev/full", "w") as full:
        r = subprocess.run([CLI, "peaks", "--peak=1", "--peak_delta_time=0"] + tutorial_mems(),
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 1
    assert "error: unable to write to standard output" in r.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_rebuilds_when_the_zstd_setting_changes(tmp_path):
    """build/zstd-setting changes with the setting only: the same setting
    leaves a built CLI alone, THREADGRAPH_NO_ZSTD (or libzstd-dev coming or
    going) rebuilds it without (with) -DTG_HAVE_ZSTD.  Dry runs (make -n)."""
    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    b = str(tmp_path / "b")
    cli = os.path.join(b, "threadgraph")

    def dry(env=None):
        e = dict(os.environ)
        e.pop("THREADGRAPH_NO_ZSTD", None)
        e.update(env or {})
        return subprocess.run(["make", "-n", "B=" + b, cli], cwd=repo, env=e,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60).stdout

    dry()  # writes the setting
    # objects of the library and the CLI, then a CLI, newer than every source
    # and the setting
    for part in ("lib", "cli"):
        os.makedirs(os.path.join(b, "obj", part))
        for name in os.listdir(os.path.join(repo, "src", part)):
            if name.endswith(".c"):
                open(os.path.join(b, "obj", part, name[:-2] + ".o"), "w").close()
    open(cli, "w").close()
    assert " -o " + cli not in dry()
    out = dry({"THREADGRAPH_NO_ZSTD": "1"})
    assert " -o " + cli in out and "TG_HAVE_ZSTD" not in out


@pytest.mark.skipif(shutil.which("make") is None or os.environ.get("TG_CLI") is not None
                    or not os.path.exists("/usr/include/zstd.h")
                    or sys.version_info[:2] != (3, 11),
                    reason="builds a CLI without zstd (-O0, about 10 s): "
                           "once, under CPython 3.11, in the plain run of a tree whose own "
                           "CLI has zstd")
def test_a_cli_built_without_zstd_says_so(tmp_path):
    """pip shows no build output, so the build's warning goes unseen: a CLI built
    without zstd says so in --version, and refuses a compressed capture with the
    remedy instead of reading it wrong."""
    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    b = str(tmp_path / "b")
    cli = os.path.join(b, "threadgraph")
    env = dict(os.environ, THREADGRAPH_NO_ZSTD="1")
    r = subprocess.run(["make", "-s", "B=" + b, "CFLAGS=-O0", cli], cwd=repo, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([cli, "--version"], stdout=subprocess.PIPE, universal_newlines=True)
    assert r.stdout == ("threadgraph 0.1.0 (built without zstd: a capture with "
                        "zstd-compressed chunks cannot be read)\n")
    fixtures = os.path.join(repo, "tests", "cli", "fixtures")
    r = subprocess.run([cli, "peaks", os.path.join(fixtures, "capture-v1-zstd")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert r.returncode == 1
    assert "this threadgraph was built without zstd (install libzstd-dev" in r.stderr, r.stderr
    r = subprocess.run([cli, "peaks", os.path.join(fixtures, "capture-v1-plain")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert r.returncode == 0, r.stderr


# Each command that writes its result to standard output, on a run it reads.
_STDOUT_COMMANDS = [
    ["peaks", "capture-v1-plain"],
    ["folded", "capture-v1-plain"],
    ["folded", "--metric", "time", "capture-v1-plain"],
    ["folded", "accounting"],
    ["threads", "capture-v1-plain"],
    ["live", "--once", "capture-v1-plain"],
    ["summary", "accounting"],
    ["hist", "accounting"],
    ["top", "accounting"],
    ["threads", "accounting"],
]


@pytest.mark.parametrize("args", _STDOUT_COMMANDS, ids=lambda a: "-".join(a))
def test_closed_pipe_is_not_an_error(args, fixtures):
    """docs/cli.md "A closed pipe": a reader gone before the command writes
    (`threadgraph folded RUN | head -1`) ends it quietly with status 0."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([CLI] + args[:-1] + [os.path.join(fixtures, args[-1])],
                           stdout=w, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(w)
    assert p.returncode == 0, p.stderr
    assert "error" not in p.stderr, p.stderr


def test_folded_and_flamegraph_of_a_capture_file_show_its_deltas(fixtures, tmp_path):
    """A capture file given as such (not its run directory) holds no accounting:
    the default metric falls back to the recorded deltas, as for a run
    directory without accounting, with a note naming it a capture."""
    cap = os.path.join(fixtures, "capture-v1-plain", "capture.tg")
    r = subprocess.run([CLI, "folded", cap], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "is a capture, which holds no allocation accounting" in r.stderr
    d = subprocess.run([CLI, "folded", "--metric", "delta", cap], capture_output=True,
                       text=True, timeout=60)
    assert d.returncode == 0 and r.stdout == d.stdout and r.stdout
    svg = tmp_path / "f.svg"
    r = subprocess.run([CLI, "flamegraph", "-o", str(svg), cap], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert svg.read_text().lstrip().startswith("<")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("args", [["report"], ["flamegraph", "--metric", "delta"]],
                         ids=["report", "flamegraph"])
def test_output_on_a_full_device_names_the_file_and_why(fixtures, args):
    """A write that fails names the output and errno, not a part of the page."""
    r = subprocess.run([CLI] + args + ["-o", "/dev/full",
                                       os.path.join(fixtures, "capture-v1-plain")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "error: unable to write '/dev/full': No space left on device" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [
    ["flamegraph", "-o", "nodir/f.svg", "flamerun"],
    ["report", "-o", "nodir/r.html", "flamerun"],
    ["export", "--pprof", "-o", "nodir/p.pb.gz", "accounting"],
    ["export", "--speedscope", "nodir/s.json", "accounting"],
], ids=["flamegraph", "report", "export-pprof", "export-speedscope"])
def test_output_errors_name_the_file_asked_for(fixtures, tmp_path, args):
    """A missing directory is named with the file asked for, never the temporary
    DIR/.NAME.tmp.PID (a name of its own on every run)."""
    path = args[-2]
    args = args[:-1] + [os.path.join(fixtures, args[-1])]
    r = subprocess.run([CLI] + args, cwd=str(tmp_path), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1, r.stderr
    assert ("error: unable to write '%s': No such file or directory (its directory "
            "'nodir' does not exist)" % path) in r.stderr, r.stderr
    assert ".tmp." not in r.stderr


def _as_nobody():
    """The command prefix that runs as user nobody, or None (not root, no setpriv,
    or the CLI out of nobody's reach)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    pre = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    if subprocess.run(pre + [CLI, "--version"], capture_output=True).returncode != 0:
        return None
    return pre


def test_output_errors_in_an_unwritable_dir_name_the_output(fixtures, tmp_path):
    """As a user who may not write DIR: the graph's DIR or the file asked for, never
    the private DIR/.NAME-plot-XXXXXX or DIR/.NAME.tmp.PID."""
    pre = _as_nobody()
    if pre is None:
        pytest.skip("needs root (to run as nobody) and setpriv")
    ro = tempfile.mkdtemp(prefix="tg-ro-")  # pytest's tmp_path is root's alone
    try:
        os.chmod(ro, 0o755)
        run = os.path.join(fixtures, "flamerun")
        r = subprocess.run(pre + [CLI, "memg", "-o", ro, run], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "error: unable to write the graph into '%s': Permission denied" % ro \
            in r.stderr, r.stderr
        assert "-plot-" not in r.stderr, r.stderr
        for cmd, name in [("report", "r.html"), ("flamegraph", "f.svg")]:
            out = os.path.join(ro, name)
            r = subprocess.run(pre + [CLI, cmd, "-o", out, run],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 1, r.stderr
            assert ("error: unable to write '%s': Permission denied (its directory '%s' "
                    "is not writable" % (out, ro)) in r.stderr, r.stderr
            assert ".tmp." not in r.stderr, r.stderr
    finally:
        shutil.rmtree(ro)


def _runinfo_opens(tmp_path, *args):
    """Runs the CLI under strace; returns its result and how many times it
    opened a runinfo.json."""
    if not shutil.which("strace"):
        pytest.skip("strace not installed")
    log = tmp_path / "strace.log"
    # LeakSanitizer cannot run under ptrace (a CLI built with ASan)
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    r = subprocess.run(["strace", "-f", "-qq", "-o", str(log), "-e", "trace=open,openat",
                        CLI] + [str(a) for a in args], capture_output=True, text=True,
                       errors="replace", env=env)
    if not log.exists():
        pytest.skip("strace cannot trace here: " + r.stderr[-300:])
    return r, log.read_text(errors="replace").count('runinfo.json"')


def test_live_reads_the_runs_runinfo_once(fixtures, tmp_path):
    # which kind of run it is (sampled, aggregate, text dumps only) comes from
    # one reading of its runinfo.json
    run = tmp_path / "cap"
    shutil.copytree(os.path.join(fixtures, "capture-v1-plain"), run)
    r, opens = _runinfo_opens(tmp_path, "live", "--once", run)
    assert r.returncode == 0, r.stderr
    assert opens == 1, opens
    text = tmp_path / "text"
    text.mkdir()
    (text / "runinfo.json").write_text('{"format": 1, "pid": 7, "mode": "full", '
                                       '"capture": null, "threads": []}\n')
    (text / "T.mem").write_text("1.000000#/a.py:6:f=>10\n")
    r, opens = _runinfo_opens(tmp_path, "live", "--once", text)
    assert r.returncode == 1 and "is a run of text dumps (--format text)" in r.stderr, r.stderr
    assert opens == 1, opens


def test_sizes_say_one_unit(tg, tmp_path):
    """Every size printed for people is in KB, MB... of 1024 (the tutorial's
    KB): 10839170 bytes are 10.3 MB in threads, the report's tables, the held
    memory's largest peak (memg-held.txt, its graph's label, the report's
    sentence and table: with the exact bytes beside it where it is a total) and
    the flame graph, never a MiB beside an MB; 2 GiB held are 2.00 GB, not
    "2048.02 MB"."""
    (tmp_path / "T.stack").write_text("1764175608.000001#/a/app.py:24:main\n"
                                      " 1764175608.100001#/a/app.py:5:load\n")
    (tmp_path / "T.mem").write_text("1764175608.200000#/a/app.py:9:load=>10839170\n"
                                    "1764175608.300000#/a/app.py:30:main=>10839170\n")
    r = tg("threads", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "10.3 MB" in r.stdout, r.stdout
    r = tg("memg", "--held", "--script-only", "-o", tmp_path / "h", tmp_path)
    assert r.returncode == 0, r.stderr
    held = (tmp_path / "h" / "memg-held.txt").read_text()
    assert "held memory: 10.3 MB (10839170 bytes) at " in held, held
    r = tg("report", "--peak", "1", "--peak_delta_time", "0", "--peak_delta_value", "0",
           "-o", tmp_path / "r.html", tmp_path)
    assert r.returncode == 0, r.stderr
    report = (tmp_path / "r.html").read_text()
    assert "10.3 MB" in report and "MB</td>" in report and "10.34" not in report
    assert "held memory: <b>10.3 MB</b> (10839170 bytes)" in report, report
    big = tmp_path / "big"
    big.mkdir()
    (big / "Big.stack").write_text("1764175608.000001#/a/app.py:24:run\n"
                                   " 1764175608.100001#/a/app.py:5:touch\n")
    (big / "Big.mem").write_text("1764175608.200000#/a/app.py:9:touch=>2147504128\n"
                                 "1764175608.800000#/a/app.py:30:run=>0\n")
    r = tg("memg", "--held", "--script-only", "-o", tmp_path / "b", big)
    assert r.returncode == 0, r.stderr
    held = (tmp_path / "b" / "memg-held.txt").read_text()
    assert "held memory: 2.00 GB (2147504128 bytes) at " in held, held
    label = (tmp_path / "b" / "memg-held-plot" / "held-peak.dat").read_text()
    assert '"largest peak: 2.00 GB"' in label, label
    r = tg("flamegraph", "-o", tmp_path / "fg.svg", tmp_path)
    assert r.returncode == 0, r.stderr
    flame = (tmp_path / "fg.svg").read_text()
    assert "10,839,170 B (10.3 MB)" in flame
    for text in (held, report, flame):
        assert not re.search(r"\d [KMGTPE]iB\b", text)
