"""Captures of every format version stay readable by every command.

tests/cli/fixtures/capture-vN-KIND/ is a real run of the recorder of capture
format version N (plain and zstd-compressed; made once by
tests/cli/fixtures/make_captures.py and never rewritten), and
capture-vN-KIND.export/ the text `threadgraph export` gave for it then.  Every
command that reads a run must read each fixture cleanly and see what it sees on
that text; export must give the text back byte for byte.  When the format
version changes, the new version's fixtures are added beside these.
"""
import json
import os
import re
import shutil
import subprocess

import pytest

from clisupport import CLI, FIXTURES

VERSIONS = sorted(d for d in os.listdir(FIXTURES)
                  if re.match(r"^capture-v\d+-\w+$", d)
                  and os.path.isdir(os.path.join(FIXTURES, d + ".export")))

# The commands that read a run's records, each with its arguments; OUT is an
# output directory, RUN the run (the capture or its exported text).
COMMANDS = {
    "peaks": [["--peak=3"], ["--json", "--top=5"]],
    "memg": [["--script-only", "-o", "OUT"], ["--held", "--script-only", "-o", "OUT"]],
    "memh": [["--script-only", "-o", "OUT"]],
    "nesting": [["--script-only", "-o", "OUT"]],
    "interleave": [["--script-only", "-o", "OUT"]],
    "folded": [["--metric", "delta"], ["--metric", "time"]],
    "flamegraph": [["--metric", "delta", "-o", "OUT/flame.svg"]],
    "report": [["-o", "OUT/report.html"]],
    "live": [["--once"]],
    "threads": [["--json"]],
}
# Commands that read no run of records (accounting files, processes, captures only).
OTHERS = {"run", "attach", "detach", "summary", "hist", "top", "diff", "export",
          "decorate-stack"}


def cli(*args):
    return subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=120)


def test_every_command_is_listed():
    """A new command must say whether it reads runs (and join COMMANDS)."""
    r = cli("--help")
    names = set(re.findall(r"^    ([a-z][a-z-]*) ", r.stdout, re.M))
    assert names and names == set(COMMANDS) | OTHERS, names ^ (set(COMMANDS) | OTHERS)


def test_there_is_a_fixture_of_the_current_version():
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "src", "common", "tg_capture.h")) as f:
        current = int(re.search(r"#define TG_CAP_VERSION (\d+)", f.read()).group(1))
    have = {int(re.match(r"capture-v(\d+)-", v).group(1)) for v in VERSIONS}
    assert have == set(range(1, current + 1)), (have, current)


def copy_run(tmp_path, name):
    """The fixture in tmp_path/cap and its export in tmp_path/text."""
    cap, text = tmp_path / "cap", tmp_path / "text"
    shutil.copytree(os.path.join(FIXTURES, name), str(cap))
    shutil.copytree(os.path.join(FIXTURES, name + ".export"), str(text))
    return cap, text


def text_files(cap, text, stacks):
    """The exported files copied beside the capture (the paths the capture's
    records are named by), given one by one: .mem and process.mem, and the
    .stack files too when STACKS."""
    names = sorted(f for f in os.listdir(text) if f.endswith(".mem") or
                   (stacks and f.endswith(".stack")))
    for f in names:
        shutil.copy(os.path.join(text, f), str(cap))
    return [str(cap / f) for f in names]


@pytest.mark.parametrize("name", VERSIONS)
def test_export_gives_the_text_back(tmp_path, name):
    cap, text = copy_run(tmp_path, name)
    out = tmp_path / "out"
    r = cli("export", cap, "-o", out)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    assert sorted(os.listdir(out)) == sorted(os.listdir(text) + ["runinfo.json"])
    for f in os.listdir(text):
        with open(os.path.join(out, f), "rb") as a, open(os.path.join(text, f), "rb") as b:
            assert a.read() == b.read(), f


def version(name):
    return int(re.match(r"capture-v(\d+)-", name).group(1))


def outputs(d):
    got = {}
    for root, _, files in os.walk(d):
        for f in files:
            if f.endswith((".gp", ".dat", ".txt", ".svg", ".html")):
                with open(os.path.join(root, f), "rb") as fh:
                    got[os.path.relpath(os.path.join(root, f), d)] = fh.read()
    return got


# Commands whose text output is compared (the graphs' files name their inputs).
SAME_TEXT = {"folded", "threads"}
# Commands that read a capture only (a live recording's).
CAPTURE_ONLY = {"live"}
# Commands that take a run directory only (not a list of files).
DIR_ONLY = {"folded", "flamegraph", "report", "live", "threads"}


@pytest.mark.parametrize("name", VERSIONS)
def test_every_command_reads_the_fixture(tmp_path, name):
    cap, text = copy_run(tmp_path, name)
    files = text_files(cap, text, stacks=True)
    for cmd, variants in COMMANDS.items():
        for args in variants:
            seen = []
            runs = [[str(cap / "capture.tg")], [str(text)] if cmd in DIR_ONLY else files]
            for run in runs[:1] if cmd in CAPTURE_ONLY else runs:
                out = tmp_path / "out"
                shutil.rmtree(str(out), ignore_errors=True)
                out.mkdir()
                full = [a.replace("OUT", str(out)) for a in args]
                strict = ["--strict"] if cmd not in ("live", "report", "flamegraph") else []
                r = cli(cmd, *strict, *full, *run)
                assert r.returncode == 0, (name, cmd, args, r.stderr)
                # (a .stack file given to a command that reads .mem is skipped; a
                # report says what it leaves out: no gnuplot, no accounting)
                err = "\n".join(l for l in r.stderr.splitlines()
                                 if "gnuplot not found" not in l and "accounting" not in l)
                for bad in ("warning", "malformed", "error"):
                    assert bad not in err or run == files, (name, cmd, args, r.stderr)
                seen.append((r.stdout.replace(str(text), str(cap)), outputs(out)))
            if cmd in CAPTURE_ONLY:
                continue
            if cmd == "peaks" and "--json" not in args:
                # the same peaks; column 5 names the run (capture) or the file (text)
                cols = [[l.split("\t")[:4] + l.split("\t")[5:] for l in x[0].splitlines()]
                        for x in seen]
                assert cols[0] == cols[1] and cols[0], (name, cmd, args)
            if cmd in SAME_TEXT and not (cmd == "threads" and version(name) >= 2):
                assert seen[0] == seen[1], (name, cmd, args)
            elif cmd == "threads":
                # from version 2 a capture's LEVEL marks (docs/formats.md) put
                # held memory right where the text dumps, which have no place
                # for them, cannot: the same threads, their figures may differ
                names = [[t["name"] for t in json.loads(x[0])["threads"]] for x in seen]
                assert names[0] == names[1] and names[0], (name, cmd, args)
            if any("OUT" in a for a in args):
                assert seen[0][1] and seen[1][1], (name, cmd, args)  # files written
    # decorate-stack: one call's subtree, by record number
    a = cli("decorate-stack", cap, "MainThread", "5")
    b = cli("decorate-stack", cap / "MainThread.mem", cap / "MainThread.stack", "5")
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout, (a.stderr, b.stderr)


# Aggregate runs (docs/formats.md "Aggregate"): fixtures/aggregate-vN/ is a real
# run of the recorder writing aggregate.tga version N (version 2 with two ended
# threads folded), read by every command that reads one.
AGG_VERSIONS = sorted(d for d in os.listdir(FIXTURES) if re.match(r"^aggregate-v\d+$", d))
AGG_COMMANDS = [["summary"], ["peaks", "--peak=0"], ["memg", "--script-only", "-o", "OUT"],
                ["folded", "--metric", "delta"], ["folded", "--metric", "time"],
                ["flamegraph", "--metric", "delta", "-o", "OUT/flame.svg"],
                ["report", "-o", "OUT/report.html"]]


def test_there_is_an_aggregate_fixture_of_the_current_version():
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "src", "recorder", "aggregate.h")) as f:
        current = int(re.search(r'#define TG_AGG_MAGIC "threadgraph-aggregate (\d+)"',
                                f.read()).group(1))
    have = {int(v.split("-v")[1]) for v in AGG_VERSIONS}
    assert have == set(range(1, current + 1)), (have, current)


@pytest.mark.parametrize("version", AGG_VERSIONS)
def test_aggregate_fixture_is_read(version, tmp_path):
    run = os.path.join(FIXTURES, version)
    for i, args in enumerate(AGG_COMMANDS):
        out = tmp_path / str(i)
        out.mkdir()
        r = cli(*[str(out) if a == "OUT" else a.replace("OUT", str(out)) for a in args] + [run])
        assert r.returncode == 0, (args, r.stderr)
        if args[0] == "summary":
            assert "Thread-3 (handler): " in r.stdout, r.stdout
            folded = "Thread-* (handler): 2 ended threads folded, " in r.stdout
            assert folded == (version != "aggregate-v1"), r.stdout
        if args[0] == "folded":
            assert "\nThread-3 (handler);_bootstrap" in "\n" + r.stdout, r.stdout


# runinfo.json of an aggregate run (docs/formats.md "runinfo.json"): before
# threads_folded every thread was listed; since, the folded ones are counted
# by family instead.  The readers take both.
RUNINFO_COMMANDS = AGG_COMMANDS + [["threads"]]


@pytest.mark.parametrize("form", ["every thread", "threads_folded"])
def test_aggregate_runinfo_forms_are_read(form, tmp_path):
    import json
    run = tmp_path / "run"
    shutil.copytree(os.path.join(FIXTURES, "aggregate-v2"), str(run))
    if form == "threads_folded":
        # as the recorder writes it now: the two threads the file folds leave
        # the list, counted under their entry's name
        with open(str(run / "runinfo.json")) as f:
            info = json.load(f)
        folded = {"Thread-1 (handler)", "Thread-2 (handler)"}
        assert folded <= {t["name"] for t in info["threads"]}
        info["threads"] = [t for t in info["threads"] if t["name"] not in folded]
        info["threads_folded"] = [{"base": "Thread-* (handler)", "threads": 2}]
        with open(str(run / "runinfo.json"), "w") as f:
            json.dump(info, f, indent=2)
    for i, args in enumerate(RUNINFO_COMMANDS):
        out = tmp_path / str(i)
        out.mkdir()
        r = cli(*[str(out) if a == "OUT" else a.replace("OUT", str(out)) for a in args] + [run])
        assert r.returncode == 0, (form, args, r.stderr)
        if args[0] in ("summary", "threads"):
            assert "Thread-* (handler)" in r.stdout and "Thread-3 (handler)" in r.stdout, \
                (args, r.stdout)
    # memg draws an aggregate run's curves as the threads' memory, not calls
    gp_dir = tmp_path / "gp"
    r = cli("memg", "--script-only", "-o", gp_dir, run)
    assert r.returncode == 0, r.stderr
    gp = (gp_dir / "memg-plot" / "memg.gp").read_text()
    assert "its memory at each reading of its curve" in gp and "Thread memory (KB)" in gp
    # live reads an aggregate run's file (rewritten every second while it runs):
    # an entry per thread and per folded family, the calls on their paths
    r = cli("live", "--once", run)
    assert r.returncode == 0, r.stderr
    assert "run ended" in r.stdout.splitlines()[0], r.stdout
    folded = [l for l in r.stdout.splitlines() if l.startswith(" Thread-* (handler) ")]
    assert len(folded) == 1 and folded[0].split()[-1] == "80", r.stdout
    assert "top functions by net bytes of their calls, all threads" in r.stdout
    r = cli("live", "--once", run / "aggregate.tga")
    assert r.returncode == 1 and "give live its run directory" in r.stderr, r.stderr
