"""A subset of pyperformance, run in-process without pyperf's worker machinery.

Each benchmark's run_benchmark.py is imported from the installed pyperformance
package's data files (under a module name other than __main__, so its pyperf.Runner
never starts) and its benchmark function is called directly with a fixed loop count.
LOOPS is tuned so that one unprofiled run takes roughly 0.3-1 s.
"""

import importlib.util
import os
import pickle
import types

DESCRIPTION = "pyperformance benchmark functions called directly"

# name -> (data-files directory, loops at scale 1.0)
LOOPS = {
    "deltablue": ("bm_deltablue", 150),
    "raytrace": ("bm_raytrace", 2),
    "richards": ("bm_richards", 14),
    "nqueens": ("bm_nqueens", 6),
    "go": ("bm_go", 4),
    "json_dumps": ("bm_json_dumps", 45),
    "json_loads": ("bm_json_loads", 1200),
    "pickles": ("bm_pickle", 900),
    "regex_v8": ("bm_regex_v8", 28),
    "telco": ("bm_telco", 70),
}
NAMES = list(LOOPS)


def benchmarks_dir():
    import pyperformance
    return os.path.join(os.path.dirname(pyperformance.__file__), "data-files", "benchmarks")


def available():
    try:
        import pyperf  # noqa: F401  (the benchmark modules import it)
        return os.path.isdir(benchmarks_dir())
    except ImportError:
        return False


def _load(dirname):
    path = os.path.join(benchmarks_dir(), dirname, "run_benchmark.py")
    spec = importlib.util.spec_from_file_location("tgbench_" + dirname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def prepare(name, scale=1.0):
    """Import the benchmark (outside the timed section); return a zero-argument run."""
    dirname, loops = LOOPS[name]
    loops = max(1, int(round(loops * scale)))
    m = _load(dirname)
    if name == "deltablue":
        return lambda: [m.delta_blue(100) for _ in range(loops)]
    if name == "raytrace":
        return lambda: m.bench_raytrace(loops, m.DEFAULT_WIDTH, m.DEFAULT_HEIGHT, None)
    if name == "richards":
        r = m.Richards()
        return lambda: [r.run(1) for _ in range(loops)]
    if name == "nqueens":
        return lambda: [m.bench_n_queens(8) for _ in range(loops)]
    if name == "go":
        return lambda: [m.versus_cpu() for _ in range(loops)]
    if name == "json_dumps":
        data = [(obj, range(count)) for obj, count in (getattr(m, c) for c in m.CASES)]
        return lambda: [m.bench_json_dumps(data) for _ in range(loops)]
    if name == "json_loads":
        import json
        objs = (json.dumps(m.DICT), json.dumps(m.TUPLE), json.dumps(m.DICT_GROUP))
        return lambda: [m.bench_json_loads(objs) for _ in range(loops)]
    if name == "pickles":
        opts = types.SimpleNamespace(protocol=pickle.HIGHEST_PROTOCOL)

        def run_pickles():
            m.bench_pickle(loops, pickle, opts)
            m.bench_unpickle(loops, pickle, opts)
            m.bench_pickle_list(loops, pickle, opts)
            m.bench_unpickle_list(loops, pickle, opts)
            m.bench_pickle_dict(loops, pickle, opts)
        return run_pickles
    if name == "regex_v8":
        return lambda: m.bench_regex_v8(loops)
    if name == "telco":
        filename = os.path.join(benchmarks_dir(), dirname, "data", "telco-bench.b")
        return lambda: m.bench_telco(loops, filename)
    raise KeyError(name)
