"""threadgraph export --pprof and --speedscope, read back by independent readers.

A 7 MiB bytearray planted in plant(), called by loader() in the thread "Loader",
must appear in the pprof profile (decoded by the protobuf package from a schema
of google/pprof's profile.proto built here, without protoc) in alloc_space and
inuse_space with its bytes and the thread label, and in the speedscope file
(checked against the rules of speedscope's file-format-schema.json) with its
weight: from the accounting snapshot, and without accounting from the recorded
per-call deltas.
"""
import glob
import gzip
import json
import os
import stat
import subprocess

import pytest

import threadgraph
from tgtest import only_dir, run_scenario

CLI = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")

PLANT = 7 * 1024 * 1024
# The bytearray is one block of PLANT + 1 bytes (its buffer) plus its object
# (57 bytes on 3.8 to 3.13): nothing else is allocated in plant(), so its
# bytes are PLANT plus at most this, with accounting and, without, as plant()'s
# own delta (the thread's memory change over the call; it has no callees).
HEADER_TOLERANCE = 1024

PROGRAM = """
import threading
from threadgraph import ProcessProfile
KEEP = [None]

def plant():
    KEEP[0] = bytearray(%d)

def loader():
    plant()

p = ProcessProfile(format=%%r, default_log_path="out", accounting=%%s)
p.trackStack()
p.enable()
t = threading.Thread(target=loader, name="Loader")
t.start()
t.join()
p.disable()
""" % PLANT
PLANT_LINE = 6   # "def plant():" in PROGRAM (the line a Python function's frame names)


def cli(*args):
    return subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=60)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The scenario's runs: [ACCT] text dumps, [("binary", ACCT)] the capture."""
    out = {}
    for fmt in ("text", "binary"):
        for acct in (True, False):
            tmp = tmp_path_factory.mktemp(fmt + ("-acct" if acct else "-noacct"))
            run_scenario(tmp, PROGRAM % (fmt, acct))
            out[acct if fmt == "text" else (fmt, acct)] = only_dir(tmp / "out")
    return out


# --- an independent pprof reader: profile.proto's schema, built by hand ----------

def profile_class():
    pb = pytest.importorskip("google.protobuf", reason="the protobuf package is needed to "
                             "read pprof profiles (pip install protobuf)")
    del pb
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    I64, U64, STR, MSG, BOOL = F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_STRING, F.TYPE_MESSAGE, F.TYPE_BOOL
    schema = {  # google/pprof proto/profile.proto (Breakdown and LabelSet left out)
        "Profile": [("sample_type", 1, MSG, 1, "ValueType"), ("sample", 2, MSG, 1, "Sample"),
                    ("mapping", 3, MSG, 1, "Mapping"), ("location", 4, MSG, 1, "Location"),
                    ("function", 5, MSG, 1, "Function"), ("string_table", 6, STR, 1, None),
                    ("drop_frames", 7, I64, 0, None), ("keep_frames", 8, I64, 0, None),
                    ("time_nanos", 9, I64, 0, None), ("duration_nanos", 10, I64, 0, None),
                    ("period_type", 11, MSG, 0, "ValueType"), ("period", 12, I64, 0, None),
                    ("comment", 13, I64, 1, None), ("default_sample_type", 14, I64, 0, None)],
        "ValueType": [("type", 1, I64, 0, None), ("unit", 2, I64, 0, None)],
        "Sample": [("location_id", 1, U64, 1, None), ("value", 2, I64, 1, None),
                   ("label", 3, MSG, 1, "Label")],
        "Label": [("key", 1, I64, 0, None), ("str", 2, I64, 0, None), ("num", 3, I64, 0, None),
                  ("num_unit", 4, I64, 0, None)],
        "Mapping": [("id", 1, U64, 0, None), ("memory_start", 2, U64, 0, None),
                    ("memory_limit", 3, U64, 0, None), ("file_offset", 4, U64, 0, None),
                    ("filename", 5, I64, 0, None), ("build_id", 6, I64, 0, None),
                    ("has_functions", 7, BOOL, 0, None), ("has_filenames", 8, BOOL, 0, None),
                    ("has_line_numbers", 9, BOOL, 0, None),
                    ("has_inline_frames", 10, BOOL, 0, None)],
        "Location": [("id", 1, U64, 0, None), ("mapping_id", 2, U64, 0, None),
                     ("address", 3, U64, 0, None), ("line", 4, MSG, 1, "Line"),
                     ("is_folded", 5, BOOL, 0, None)],
        "Line": [("function_id", 1, U64, 0, None), ("line", 2, I64, 0, None)],
        "Function": [("id", 1, U64, 0, None), ("name", 2, I64, 0, None),
                     ("system_name", 3, I64, 0, None), ("filename", 4, I64, 0, None),
                     ("start_line", 5, I64, 0, None)],
    }
    fdp = descriptor_pb2.FileDescriptorProto(name="tg_test_profile.proto",
                                             package="tgtest.perftools.profiles", syntax="proto3")
    for name, fields in schema.items():
        m = fdp.message_type.add(name=name)
        for fname, num, typ, rep, tname in fields:
            f = m.field.add(name=fname, number=num, type=typ,
                            label=F.LABEL_REPEATED if rep else F.LABEL_OPTIONAL)
            if tname:
                f.type_name = ".tgtest.perftools.profiles." + tname
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("tgtest.perftools.profiles.Profile")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def read_pprof(path):
    """The Profile in PATH, checked for pprof's rules, and its samples as
    (thread, [(function, file, line) leaf first], {sample type: value})."""
    with gzip.open(str(path), "rb") as f:   # gzip'd, as pprof files are on disk
        data = f.read()
    prof = profile_class()()
    prof.ParseFromString(data)
    # nothing the schema does not know, every field in its canonical encoding
    assert prof.SerializeToString() == data
    st = list(prof.string_table)
    assert st[0] == ""
    types = [(st[t.type], st[t.unit]) for t in prof.sample_type]
    assert types == [("alloc_objects", "count"), ("alloc_space", "bytes"),
                     ("inuse_objects", "count"), ("inuse_space", "bytes")]
    funcs = {f.id: (st[f.name], st[f.filename]) for f in prof.function}
    assert len(funcs) == len(prof.function) and 0 not in funcs
    locs = {}
    for loc in prof.location:
        assert loc.id and loc.id not in locs and len(loc.line) == 1
        locs[loc.id] = funcs[loc.line[0].function_id] + (loc.line[0].line,)
    samples = []
    for s in prof.sample:
        assert len(s.value) == 4 and s.location_id
        labels = {st[l.key]: st[l.str] for l in s.label}
        samples.append((labels["thread"], [locs[i] for i in s.location_id],
                        dict(zip([t[0] for t in types], s.value))))
    return prof, samples


def check_speedscope(doc):
    """The rules of https://www.speedscope.app/file-format-schema.json that a
    file of sampled profiles must follow (required fields, types, enums)."""
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert isinstance(frames, list)
    for fr in frames:
        assert isinstance(fr["name"], str)
        assert set(fr) <= {"name", "file", "line", "col"}
        assert isinstance(fr.get("file", ""), str)
        assert isinstance(fr.get("line", 0), (int, float))
    assert isinstance(doc["profiles"], list)
    for key in ("name", "exporter"):
        assert isinstance(doc.get(key, ""), str)
    assert isinstance(doc.get("activeProfileIndex", 0), int)
    for p in doc["profiles"]:
        assert p["type"] == "sampled"
        assert isinstance(p["name"], str)
        assert p["unit"] in ("none", "nanoseconds", "microseconds", "milliseconds",
                             "seconds", "bytes")
        assert p["unit"] == "bytes"
        assert p["startValue"] <= p["endValue"]
        assert len(p["samples"]) == len(p["weights"])
        for stack in p["samples"]:
            assert all(isinstance(i, int) and 0 <= i < len(frames) for i in stack)
        assert all(isinstance(w, (int, float)) and w > 0 for w in p["weights"])
        assert p["endValue"] - p["startValue"] == sum(p["weights"])


def planted(samples, thread="Loader"):
    """The samples whose leaf is plant(), in THREAD."""
    return [s for s in samples if s[1][0][0] == "plant" and s[0] == thread]


@pytest.mark.parametrize("fmt", ["text", "binary"])
@pytest.mark.parametrize("acct", [True, False], ids=["accounting", "deltas"])
def test_pprof_planted_allocation(runs, tmp_path, acct, fmt):
    out = tmp_path / "run.pb.gz"
    r = cli("export", "--pprof", "-o", out, runs[acct if fmt == "text" else (fmt, acct)])
    assert r.returncode == 0, r.stderr
    assert ("no allocation accounting" in r.stderr) == (not acct)
    prof, samples = read_pprof(out)
    (s,) = planted(samples)
    for key in ("alloc_space", "inuse_space"):
        assert PLANT <= s[2][key] <= PLANT + HEADER_TOLERANCE, (key, s)
    assert s[2]["alloc_objects"] >= 1 and s[2]["inuse_objects"] >= 1
    leaf, caller = s[1][0], s[1][1]
    assert leaf[1].endswith("scenario.py") and leaf[2] == PLANT_LINE
    assert caller[0] == "loader"
    # nothing else of that size: the 7 MiB is counted once
    assert all(o[2]["inuse_space"] < PLANT for o in samples if o is not s)
    comments = [prof.string_table[c] for c in prof.comment]
    assert any(("accounting" if acct else "per-call deltas") in c for c in comments)


def test_pprof_comment_of_a_peak_snapshot(runs, tmp_path):
    """A peak snapshot's alloc_* are what was allocated up to the peak: the
    comment says so, not "over the run" (the final snapshot's)."""
    (peak,) = glob.glob(os.path.join(runs[True], "snapshot-*-peak"))
    out = tmp_path / "peak.pb.gz"
    r = cli("export", "--pprof", "-o", out, peak)
    assert r.returncode == 0, r.stderr
    prof, _ = read_pprof(out)
    (what,) = [prof.string_table[c] for c in prof.comment
               if "allocation accounting" in prof.string_table[c]]
    assert "alloc_* allocated until the snapshot was written" in what, what
    assert "alloc_* allocated over the run" not in what, what


@pytest.mark.parametrize("fmt", ["text", "binary"])
@pytest.mark.parametrize("acct", [True, False], ids=["accounting", "deltas"])
def test_speedscope_planted_frame(runs, tmp_path, acct, fmt):
    out = tmp_path / "run.json"
    r = cli("export", "--speedscope", out, runs[acct if fmt == "text" else (fmt, acct)])
    assert r.returncode == 0, r.stderr
    with open(str(out)) as f:
        doc = json.load(f)
    check_speedscope(doc)
    frames = doc["shared"]["frames"]
    names = [p["name"] for p in doc["profiles"]]
    assert len(names) == len(set(names)) and "Loader" in names
    (p,) = [p for p in doc["profiles"] if p["name"] == "Loader"]
    hits = [(st, w) for st, w in zip(p["samples"], p["weights"])
            if frames[st[-1]]["name"] == "plant"]
    assert len(hits) == 1
    stack, weight = hits[0]
    assert PLANT <= weight <= PLANT + HEADER_TOLERANCE
    assert frames[stack[-2]]["name"] == "loader"     # outermost first: the caller before
    assert frames[stack[-1]]["line"] == PLANT_LINE
    assert frames[stack[-1]]["file"].endswith("scenario.py")


def test_speedscope_live_weights(runs, tmp_path):
    out = tmp_path / "live.json"
    r = cli("export", "--speedscope", out, "--metric", "live", runs[True])
    assert r.returncode == 0, r.stderr
    with open(str(out)) as f:
        doc = json.load(f)
    check_speedscope(doc)
    (p,) = [p for p in doc["profiles"] if p["name"] == "Loader"]
    assert PLANT <= max(p["weights"]) <= PLANT + HEADER_TOLERANCE


def test_both_at_once_and_errors(runs, tmp_path):
    pb, js = tmp_path / "a.pb.gz", tmp_path / "a.json"
    r = cli("export", "--pprof", "-o", pb, "--speedscope", js, runs[True])
    assert r.returncode == 0, r.stderr
    assert pb.exists() and js.exists()
    # an unwritable output: a message naming it, no file, non-zero exit
    missing = tmp_path / "no" / "such" / "dir" / "x.pb.gz"
    r = cli("export", "--pprof", "-o", missing, runs[True])
    assert r.returncode == 1 and "error:" in r.stderr and str(missing.parent) in r.stderr
    # a disk full: the error, and the device is written, never replaced
    if os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode):
        r = cli("export", "--pprof", "-o", "/dev/full", runs[True])
        assert r.returncode == 1 and "'/dev/full'" in r.stderr, r.stderr
        assert "No space left on device" in r.stderr, r.stderr
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    # a pipe: written directly (the reader gets the whole profile)
    r = subprocess.run([CLI, "export", "-q", "--pprof", "-o", "/dev/stdout", runs[True]],
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stderr == b""
    with open(str(pb), "rb") as f:
        assert gzip.decompress(r.stdout) == gzip.decompress(f.read())
    r = cli("export", "--pprof", runs[True])
    assert r.returncode == 2 and "--pprof needs -o FILE" in r.stderr
    r = cli("export", "--speedscope", js, "--metric", "peak", runs[True])
    assert r.returncode == 2 and "unknown metric 'peak'" in r.stderr
    # a run with neither accounting nor stacks has nothing to export
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "Thread-1.mem").write_text("a.py:1:f=>10\n")
    r = cli("export", "--pprof", "-o", pb, bare)
    assert r.returncode == 1 and "no .stack files" in r.stderr, r.stderr
    r = cli("export", "--speedscope", js, tmp_path / "nowhere")
    assert r.returncode == 1 and "error:" in r.stderr



def test_a_link_is_written_through_never_replaced(runs, tmp_path):
    # `-o /dev/stdout` with stdout redirected to a file made /dev/stdout (a link)
    # look like a regular file: the profile was written beside it and renamed over
    # the link, replacing the system's /dev/stdout.  Here the same with links of
    # the test's own: a link to a regular file, and one to the process's stdout
    # while stdout is a file, for export, flamegraph and report.
    target = tmp_path / "target.pb.gz"
    target.write_bytes(b"old")
    link = tmp_path / "link.pb.gz"
    link.symlink_to(target)
    r = cli("export", "-q", "--pprof", "-o", link, runs[True])
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(str(link)) == str(target)
    assert gzip.decompress(target.read_bytes())  # the profile, through the link
    fd1 = tmp_path / "fd1"
    fd1.symlink_to("/proc/self/fd/1")
    for args in (["export", "-q", "--pprof", "-o", fd1],
                 ["flamegraph", "-o", fd1],
                 ["report", "-o", fd1]):
        sink = tmp_path / "stdout.txt"
        with open(str(sink), "wb") as out:
            r = subprocess.run([CLI] + [str(a) for a in args] + [runs[True]], stdout=out,
                               stderr=subprocess.PIPE, timeout=120)
        assert r.returncode == 0, (args, r.stderr)
        assert fd1.is_symlink(), args
        assert sink.stat().st_size > 0, args
        assert not [n for n in os.listdir(str(tmp_path)) if ".tmp." in n], args

def test_a_link_planted_by_another_user_is_replaced_not_followed(runs, tmp_path):
    # docs/security.md: the CLI never writes through a symlink planted in the
    # output's directory.  -o FILE wrote through any link (so that the user's
    # own, and /dev/stdout, work): a link that another user put in a directory
    # of theirs overwrote the file it named.  Now only the user's own links,
    # and those in a directory no one else may write, are written through.
    import pwd
    if os.geteuid() != 0:
        pytest.skip("needs root, to make a link of another user's")
    nobody = pwd.getpwnam("nobody")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(str(shared), nobody.pw_uid, nobody.pw_gid)
    victim = tmp_path / "victim"
    for args in (["export", "-q", "--pprof", "-o"], ["flamegraph", "-o"], ["report", "-o"]):
        victim.write_bytes(b"precious")
        link = shared / ("out-" + args[0])
        link.symlink_to(victim)
        os.lchown(str(link), nobody.pw_uid, nobody.pw_gid)
        r = cli(*(args + [link, runs[True]]))
        assert r.returncode == 0, (args, r.stderr)
        assert victim.read_bytes() == b"precious", args
        assert not link.is_symlink() and link.stat().st_size > 0, args
        assert not [n for n in os.listdir(str(shared)) if ".tmp." in n], args


def test_pprof_values_at_the_edges(tmp_path):
    # int64 values at their limits and negative (a damaged or hostile snapshot: a
    # negative int64 is a ten-byte varint), a call without file or line
    snap = tmp_path / "snapshot-1-final"
    snap.write_text("# threadgraph snapshot 2\n# thread: 0 w 1\n"
                    "# columns: ID PARENT THREAD LIVE_BYTES LIVE_COUNT TOTAL_BYTES "
                    "TOTAL_COUNT CALL\n"
                    "1 - 0 -5 1 9223372036854775807 3 /x y.py:2:neg\n"
                    "2 1 - 300 2 -9223372036854775807 2 <no python frame>\n"
                    "3 2 - 0 0 0 0 /z.py:4:nothing\n")
    out = tmp_path / "p.pb.gz"
    r = cli("export", "--pprof", "-o", out, snap)
    assert r.returncode == 0, r.stderr
    prof, samples = read_pprof(out)
    assert samples == [
        ("w 1", [("neg", "/x y.py", 2)],
         {"alloc_objects": 3, "alloc_space": 2 ** 63 - 1, "inuse_objects": 1, "inuse_space": -5}),
        ("w 1", [("<no python frame>", "", 0), ("neg", "/x y.py", 2)],
         {"alloc_objects": 2, "alloc_space": -(2 ** 63 - 1), "inuse_objects": 2,
          "inuse_space": 300}),
    ]


POOL_PROGRAM = """
from concurrent.futures import ThreadPoolExecutor
from threadgraph import ProcessProfile
KEEP = []

def plant():
    KEEP.append(bytearray(%d))

def task(_):
    plant()

p = ProcessProfile(default_log_path="out", aggregate=%%s)
p.trackStack()
p.enable()
with ThreadPoolExecutor(1, thread_name_prefix="Pool") as ex:
    list(ex.map(task, range(2)))
p.disable()
""" % PLANT


@pytest.mark.parametrize("aggregate", [False, True], ids=["capture", "aggregate"])
def test_pool_tasks_keep_their_thread_without_accounting(tmp_path, aggregate):
    """Without accounting the samples come from the recorded per-call deltas;
    `folded` grafts a pool's tasks under the call that submitted them (in the
    main thread), but the profiles' thread is the one that allocated: Pool_0,
    as with accounting.  An aggregate run keeps the calls per path: its
    objects count them (they were 0)."""
    run_scenario(tmp_path, POOL_PROGRAM % aggregate)
    run = only_dir(tmp_path / "out")
    out = tmp_path / "pool.pb.gz"
    r = cli("export", "--pprof", "-o", out, run)
    assert r.returncode == 0, r.stderr
    _, samples = read_pprof(out)
    plants = [s for s in samples if s[1][0][0] == "plant"]
    assert [s[0] for s in plants] == ["Pool_0"], plants
    (s,) = plants
    assert 2 * PLANT <= s[2]["alloc_space"] <= 2 * PLANT + 2 * HEADER_TOLERANCE, s
    assert s[2]["alloc_objects"] == 2, s    # plant() was called twice
    assert all("[" not in name for _, stack, _ in samples for name, _, _ in stack)
    js = tmp_path / "pool.json"
    r = cli("export", "--speedscope", js, run)
    assert r.returncode == 0, r.stderr
    with open(str(js)) as f:
        doc = json.load(f)
    check_speedscope(doc)
    (p,) = [p for p in doc["profiles"] if p["name"] == "Pool_0"]
    assert max(p["weights"]) >= 2 * PLANT
