"""Native memory (ProcessProfile(native=True), docs/api.md "Native memory") on real
components: a C extension built here at test time (native/natext.c) that mallocs,
reallocs, maps and frees known sizes, from Python threads and from a pthread of
its own, and NumPy from PyPI.

Deltas are exact for the native blocks themselves; what the interpreter allocates
around a call (the int holding a pointer, a frame) is bounded by named tolerances.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import pytest

import threadgraph
from tgtest import only_dir, parse_mem, run_scenario

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(os.path.dirname(threadgraph.__file__), "_bin", "threadgraph")

# Python objects made around one call of the extension (an int, a tuple, the
# counters' own tuple): far below any planted size.
PY_OBJECTS = 2048
# A NumPy array of N bytes: the data buffer (exactly N) plus the array object,
# its shape/strides and allocator rounding of the small parts.
NUMPY_HEADER = 4096
PAGE = os.sysconf("SC_PAGE_SIZE")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="native=True patches ELF relocations (Linux)")


@pytest.fixture(scope="module")
def natext(tmp_path_factory):
    """Directory holding the built natext extension."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the test extension")
    out = tmp_path_factory.mktemp("natext")
    target = out / ("natext" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [cc, "-O0", "-shared", "-fPIC", "-pthread",
           "-I" + sysconfig.get_paths()["include"],
           "-o", str(target), os.path.join(HERE, "native", "natext.c"), "-ldl"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if r.returncode != 0:
        pytest.fail("building natext failed:\n" + r.stdout)
    return str(out)


def _run(tmp_path, natext, code):
    """run_scenario with the natext directory first on sys.path."""
    head = "import sys\nsys.path.insert(0, %r)\n" % natext
    return run_scenario(tmp_path, head + textwrap.dedent(code))


def deltas(mem, func):
    return [d for (_, _, f, d) in mem if f == func]


def cli(*args):
    return subprocess.run([CLI] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60)


# --- the C extension, loaded after enable() (patched through the dlopen hook) ---

EXACT = """
import json, threading
from threadgraph import ProcessProfile, _recorder as R

p = ProcessProfile(format="text", default_log_path="out", native=True, accounting=True)
p.enable()
import natext          # loaded while enabled: patched by the dlopen hook
PAGE = %(page)d
res = {"slots": R.native_slots()}

def delta(f, *a):
    c0 = R.thread_counters()
    r = f(*a)
    c1 = R.thread_counters()
    return r, (c1[0] - c0[0]) - (c1[1] - c0[1])

b, res["malloc"] = delta(natext.malloc, 1000000)
b, res["realloc"] = delta(natext.realloc, b, 3000000)
_, res["free"] = delta(natext.free, b)
b, res["calloc"] = delta(natext.calloc, 1000, 1000)
_, res["free_calloc"] = delta(natext.free, b)
b, res["posix_memalign"] = delta(natext.posix_memalign, 100000)
_, res["free_memalign"] = delta(natext.free, b)
b, res["aligned_alloc"] = delta(natext.aligned_alloc, 8 * 4096)
_, res["free_aligned"] = delta(natext.free, b)
b, res["got_memalign"] = delta(natext.ptr_memalign, 200000)
_, res["free_got_memalign"] = delta(natext.free, b)
b, res["word_valloc"] = delta(natext.ptr_valloc, 300000)
_, res["free_word_valloc"] = delta(natext.free, b)
m, res["mmap"] = delta(natext.mmap, 10 * PAGE)
_, res["munmap_middle"] = delta(natext.munmap, m + 4 * PAGE, 3 * PAGE)
_, res["munmap_rest"] = delta(natext.munmap, m, 10 * PAGE)
m, res["mmap4"] = delta(natext.mmap, 4 * PAGE)
m, res["mremap"] = delta(natext.mremap, m, 4 * PAGE, 8 * PAGE)
_, res["munmap8"] = delta(natext.munmap, m, 8 * PAGE)
_, res["bytearray"] = delta(bytearray, 10000000)   # Python domain: counted once
import ctypes          # a function pointer taken with dlsym (hooked dlsym)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
b, res["ctypes_malloc"] = delta(libc.malloc, 50000000)
_, res["ctypes_free"] = delta(libc.free, b)

KEEP = {}
barrier = threading.Barrier(4)

def make_block(i):
    KEEP[i] = natext.malloc((i + 1) * 1000000)

def release_block(i):
    natext.free(KEEP.pop(i))

def worker(i):
    barrier.wait()
    make_block(i)
    barrier.wait()
    release_block((i + 1) %% 4)     # another thread's block

ts = [threading.Thread(target=worker, args=(i,), name="w%%d" %% i) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()

def big_peak():
    b = natext.malloc(64 * 1000000)
    natext.free(b)

def native_leak():
    KEEP["leak"] = natext.malloc(8000000)

big_peak()
p.snapshot("before")
native_leak()
res["tid"], kept = natext.pthread_alloc(5000000, True)
natext.free(kept)      # freed by the main thread: its own figures go negative
p.disable()
res["slots_after"] = R.native_slots()
c0 = R.thread_counters()
natext.free(KEEP.pop("leak"))   # a block from the run, freed after disable
res["after_disable"] = R.thread_counters()[0] - c0[0]
res["dir"] = p.output_dir
print(json.dumps(res))
"""


@pytest.fixture(scope="module")
def exact(natext, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exact")
    proc = _run(tmp, natext, EXACT % {"page": PAGE})
    return json.loads(proc.stdout.strip().splitlines()[-1])


def near(value, expected, tol=PY_OBJECTS):
    """VALUE is EXPECTED give or take TOL (Python objects made or freed around it)."""
    return abs(value - expected) <= tol


def test_malloc_family_exact(exact):
    assert exact["slots"] > 0
    assert near(exact["malloc"], 1000000)
    assert near(exact["realloc"], 2000000)
    assert near(exact["free"], -3000000)
    assert near(exact["calloc"], 1000000)
    assert near(exact["free_calloc"], -1000000)
    assert near(exact["posix_memalign"], 100000)
    assert near(exact["free_memalign"], -100000)
    assert near(exact["aligned_alloc"], 8 * 4096)
    assert near(exact["free_aligned"], -8 * 4096)


def test_allocators_reached_through_the_got_and_a_data_word(exact):
    # natext's memalign through its GOT (a GLOB_DAT relocation) and valloc
    # through an initialised pointer (an absolute one): both sit in the RELA
    # table after the RELATIVE relocations the patcher skips unread
    assert near(exact["got_memalign"], 200000)
    assert near(exact["free_got_memalign"], -200000)
    assert near(exact["word_valloc"], 300000)
    assert near(exact["free_word_valloc"], -300000)


def test_mmap_partial_munmap_and_mremap_exact(exact):
    assert near(exact["mmap"], 10 * PAGE)
    assert near(exact["munmap_middle"], -3 * PAGE)
    assert near(exact["munmap_rest"], -7 * PAGE)      # the two ranges left
    assert near(exact["mmap4"], 4 * PAGE)
    assert near(exact["mremap"], 4 * PAGE)             # grown by 4 pages
    assert near(exact["munmap8"], -8 * PAGE)


def test_python_allocations_counted_once(exact):
    # bytearray -> PyObject_Malloc -> PyMem_RawMalloc -> malloc: one count, not two
    assert near(exact["bytearray"], 10000001, 256)


def test_ctypes_malloc_counted(exact):
    assert near(exact["ctypes_malloc"], 50000000)
    assert near(exact["ctypes_free"], -50000000)


def test_disable_restores_the_relocations(exact):
    assert exact["slots_after"] == 0
    assert exact["after_disable"] == 0


LOADS = """
import ctypes, importlib.machinery, importlib.util, json, os, shutil, _ctypes
from threadgraph import ProcessProfile, _recorder as R

def load_copy(name):
    # another file, so another object: dlopen loads it anew
    path = os.path.abspath(shutil.copy(natext_path, name + EXT))
    loader = importlib.machinery.ExtensionFileLoader("natext", path)
    spec = importlib.util.spec_from_file_location("natext", path, loader=loader)
    return importlib.util.module_from_spec(spec)

def delta(f, *a):
    c0 = R.thread_counters()
    r = f(*a)
    c1 = R.thread_counters()
    return r, (c1[0] - c0[0]) - (c1[1] - c0[1])

p = ProcessProfile(format="text", default_log_path="out", native=True)
p.enable()
import natext
natext_path = natext.__file__
EXT = natext_path[natext_path.index(".", natext_path.rindex("/")):]
res = {"slots": [R.native_slots()]}
first = load_copy("copy1")                 # patched by its dlopen's walk
res["slots"].append(R.native_slots())
lib = ctypes.CDLL(os.path.abspath(shutil.copy(natext_path, "gone" + EXT)))
_ctypes.dlclose(lib._handle)                # an unload: the walks' table starts again
second = load_copy("copy2")
res["slots"].append(R.native_slots())
for name, m in (("natext", natext), ("first", first), ("second", second)):
    b, res[name] = delta(m.malloc, 1234567)
    _, res[name + "_free"] = delta(m.free, b)
p.disable()
res["slots"].append(R.native_slots())
print(json.dumps(res))
"""


def test_objects_loaded_after_others_and_after_an_unload(natext, tmp_path):
    # Each dlopen walks every loaded object again, from the slots it remembers
    # per object (nat_objs.c); an unload makes it read them all afresh.
    proc = _run(tmp_path, natext, LOADS)
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    before, after_first, after_second, after_disable = res["slots"]
    assert 0 < before < after_first < after_second
    assert after_disable == 0
    for name in ("natext", "first", "second"):
        assert near(res[name], 1234567), name
        assert near(res[name + "_free"], -1234567), name


def test_threads_see_their_own_native_deltas(exact):
    run = exact["dir"]
    for i in range(4):
        mem = parse_mem(os.path.join(run, "w%d.mem" % i))
        (made,) = deltas(mem, "make_block")
        assert near(made, (i + 1) * 1000000), (i, made)
        (freed,) = deltas(mem, "release_block")
        other = ((i + 1) % 4 + 1) * 1000000
        assert near(freed, -other), (i, freed)


def test_pthread_counted_under_native_name(exact):
    with open(os.path.join(exact["dir"], "summary.json")) as f:
        s = json.load(f)
    name = "native-%d" % exact["tid"]
    (t,) = [t for t in s["threads"] if t["name"] == name]
    assert t["total_requested_bytes"] == 5000000
    assert t["live_bytes"] == 5000000     # it kept the block; the main thread freed it
    # its one allocation, in the size histogram: 5,000,000 has bit length 23
    assert t["hist_alloc"][(5000000).bit_length()] == 1 and sum(t["hist_alloc"]) == 1
    r = cli("summary", exact["dir"])
    assert r.returncode == 0, r.stderr
    assert name in r.stdout
    # no site of its own (its block went to the thread-less <no python frame>):
    # what it made that is still live is unknown, not 0 (docs/accounting.md)
    assert t["live_at_end_bytes"] is None
    r = cli("threads", "--json", exact["dir"])
    assert r.returncode == 0, r.stderr
    (row,) = [x for x in json.loads(r.stdout)["threads"] if x["name"] == name]
    assert row["live_at_end"] is None and row["allocated"] == 5000000, row


def test_summary_totals_and_peak_include_native(exact):
    with open(os.path.join(exact["dir"], "summary.json")) as f:
        proc = json.load(f)["process"]
    assert proc["peak_bytes"] >= 64 * 1000000
    assert proc["total_requested_bytes"] >= 64 * 1000000 + 8000000 + 5000000 + 10 * 1000000


def test_native_leak_is_top_of_diff(exact):
    run = exact["dir"]
    r = cli("diff", "--base", os.path.join(run, "snapshot-1-before"), run, "--top", "3")
    assert r.returncode == 0, r.stderr
    data = [l for l in r.stdout.splitlines() if not l.startswith("#")][1:]
    first = data[0].split(None, 6)
    assert "native_leak" in first[6], r.stdout
    assert near(int(first[0]), 8000000, PY_OBJECTS)


# --- loaded before enable(): patched by the walk at enable; old blocks; fork ---

BEFORE = """
import json, os
import natext
from threadgraph import ProcessProfile, _recorder as R

old = natext.malloc(4000000)          # before enable: unknown to the table
# dlsym(RTLD_NEXT) searches after the object that calls it: natext, which does not
# link zlib, finds no deflate; were the caller taken to be threadgraph's
# extension (which links zlib), it would.
next_before = natext.next_sym("deflate")
old_map = natext.mmap(16 * %(page)d)
p = ProcessProfile(format="text", default_log_path="out", native=True)
if %(follow)s:
    p.enableForkedProfile()
p.enable()
res = {"slots": R.native_slots()}
res["next_sym"] = [next_before, natext.next_sym("deflate")]
c0 = R.thread_counters()
natext.free(old)
natext.munmap(old_map, 16 * %(page)d)
c1 = R.thread_counters()
res["old_freed"] = c1[1] - c0[1]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    c0 = R.thread_counters()
    b = natext.malloc(3000000)
    c1 = R.thread_counters()
    os.write(w, json.dumps([c1[0] - c0[0], R.native_slots()]).encode())
    natext.free(b)
    os._exit(0)
os.close(w)
data = b""
while True:
    chunk = os.read(r, 4096)
    if not chunk:
        break
    data += chunk
os.waitpid(pid, 0)
res["child"] = json.loads(data.decode())
c0 = R.thread_counters()
b = natext.malloc(2000000)
res["parent_after_fork"] = R.thread_counters()[0] - c0[0]
natext.free(b)
p.disable()
print(json.dumps(res))
"""


@pytest.mark.parametrize("follow", [False, True])
def test_loaded_before_enable_old_blocks_and_fork(natext, tmp_path, follow):
    proc = _run(tmp_path, natext, BEFORE % {"page": PAGE, "follow": follow})
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["slots"] > 0
    assert res["next_sym"] == [0, 0]
    # Blocks from before enable() free 0 bytes, never negative garbage.
    assert 0 <= res["old_freed"] <= PY_OBJECTS
    child_alloc, child_slots = res["child"]
    if follow:       # the child keeps counting
        assert near(child_alloc, 3000000)
        assert child_slots > 0
    else:            # the child stops: relocations restored, nothing counted
        assert child_alloc == 0
        assert child_slots == 0
    assert near(res["parent_after_fork"], 2000000)


def test_run_native_option(natext, tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("import sys\nsys.path.insert(0, %r)\nimport natext\n"
                    "KEEP = []\n"
                    "def grab():\n    KEEP.append(natext.malloc(6000000))\n"
                    "grab()\n" % natext)
    env = dict(os.environ)
    from tgtest import PKG_PARENT
    env["PYTHONPATH"] = PKG_PARENT + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "threadgraph", "run", "--format", "text", "--native", "-o",
                        str(tmp_path / "out"), str(prog)], cwd=str(tmp_path), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    assert r.returncode == 0, r.stderr
    run = only_dir(tmp_path / "out")
    (d,) = deltas(parse_mem(os.path.join(run, "MainThread.mem")), "grab")
    assert near(d, 6000000)
    with open(os.path.join(run, "runinfo.json")) as f:
        assert json.load(f)["native"] is True


def test_process_mode_includes_native(natext, tmp_path):
    proc = _run(tmp_path, natext, """
        import natext
        from threadgraph import ProcessProfile
        KEEP = []
        def grab():
            KEEP.append(natext.malloc(6000000))
        p = ProcessProfile(format="text", default_log_path="out", memory="process", native=True)
        p.enable()
        grab()
        p.disable()
        print(p.output_dir)
    """)
    run = proc.stdout.strip().splitlines()[-1]
    (d,) = deltas(parse_mem(os.path.join(run, "MainThread.mem")), "grab")
    assert near(d, 6000000)


def test_native_off_by_default(natext, tmp_path):
    proc = _run(tmp_path, natext, """
        import natext
        from threadgraph import ProcessProfile, _recorder as R
        p = ProcessProfile(format="text", default_log_path="out")
        p.enable()
        c0 = R.thread_counters()
        b = natext.malloc(5000000)
        c1 = R.thread_counters()
        natext.free(b)
        print(R.native_slots(), c1[0] - c0[0])
        p.disable()
    """)
    slots, d = map(int, proc.stdout.split())
    assert slots == 0 and d < PY_OBJECTS


# --- NumPy from PyPI ---------------------------------------------------------

NUMPY = """
import json, threading, tracemalloc
import numpy as np
from threadgraph import ProcessProfile, _recorder as R

SIZES = [1000000, 2000000, 3000000, 4000000]     # float64 elements
ARRAYS = {}
p = ProcessProfile(format="text", default_log_path="out", native=True)
p.enable()
barrier = threading.Barrier(4)

def create_array(i):
    ARRAYS[i] = np.ones(SIZES[i])

def drop_other_array(i):
    del ARRAYS[i]

def worker(i):
    barrier.wait()
    create_array(i)
    barrier.wait()
    drop_other_array((i + 1) %% 4)

ts = [threading.Thread(target=worker, args=(i,), name="np%%d" %% i) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()

# NumPy reports its buffers to tracemalloc too (PyTraceMalloc_Track): with
# tracemalloc running, the array must still be counted once.
tracemalloc.start()
def traced_array():
    ARRAYS["t"] = np.zeros(1000000)
traced_array()
tracemalloc.stop()
p.disable()
print(p.output_dir)
"""


def test_numpy_arrays_in_four_threads(tmp_path):
    try:
        import numpy  # noqa: F401
    except ImportError:
        pytest.skip("NumPy is not installed for this interpreter (no wheel for it)")
    proc = run_scenario(tmp_path, NUMPY % {})
    run = proc.stdout.strip().splitlines()[-1]
    sizes = [1000000, 2000000, 3000000, 4000000]
    for i in range(4):
        mem = parse_mem(os.path.join(run, "np%d.mem" % i))
        (made,) = deltas(mem, "create_array")
        assert near(made, sizes[i] * 8, NUMPY_HEADER), (i, made)
        (dropped,) = deltas(mem, "drop_other_array")
        other = sizes[(i + 1) % 4] * 8
        assert -other - NUMPY_HEADER <= dropped <= -other + PY_OBJECTS, (i, dropped)
    (traced,) = deltas(parse_mem(os.path.join(run, "MainThread.mem")), "traced_array")
    assert near(traced, 8000000, NUMPY_HEADER)


# --- sampled mode with native=True (docs/api.md "Sampled mode") ---

SAMPLED = """
import os, threading
from threadgraph import ProcessProfile

os.environ["THREADGRAPH_SAMPLE_SEED"] = "5"    # read at enable(): a seeded sampler

p = ProcessProfile(default_log_path="out", native=True, mode="sampled")
p.enable()
import natext
KEEP = []
def native_plant():             # 48 native blocks of 1 MiB, kept
    for _ in range(48):
        KEEP.append(natext.malloc(1 << 20))
t = threading.Thread(target=native_plant, name="nplanter")
t.start(); t.join()
p.disable()
print(p.output_dir)
"""


def test_sampled_mode_samples_native_blocks_with_their_python_stack(tmp_path, natext):
    proc = _run(tmp_path, natext, SAMPLED)
    run = proc.stdout.strip().splitlines()[-1]
    with open(os.path.join(run, "summary.json")) as f:
        (thread,) = [t for t in json.load(f)["threads"] if t["name"] == "nplanter"]
    assert thread["hist_alloc"][21] >= 48        # every native block counted
    live = 0
    for line in open(os.path.join(run, "snapshot-1-final")):
        if not line.startswith("#") and line.rstrip("\n").endswith(":native_plant"):
            live += int(line.split(" ")[3])
    n, mib = 512 * 1024, 1 << 20
    p = 1 - math.exp(-mib / n)
    sd = math.sqrt(48 * mib * mib * (1 - p) / p)  # the estimate's standard deviation
    assert abs(live - 48 * mib) <= 4.5 * sd, live


@pytest.mark.parametrize("native", [True, False])
def test_report_says_whether_native_memory_was_counted(tmp_path, native):
    """Two reports of one program differ by what native code took: the page's
    first lines say which kind of run it is (runinfo.json "native")."""
    run_scenario(tmp_path, """
        import threadgraph
        p = threadgraph.ProcessProfile(default_log_path="out", native=%r)
        p.enable()
        KEEP = bytearray(1 << 20)
        p.disable()
    """ % native)
    out = str(tmp_path / "r.html")
    r = cli("report", "-q", "-o", out, str(only_dir(tmp_path / "out")))
    assert r.returncode == 0, r.stderr
    with open(out, encoding="utf-8") as f:
        head = f.read().split("<nav>", 1)[0]
    said = "native memory counted" if native else "Python's allocators only (no native memory)"
    assert said in head, head[-400:]
