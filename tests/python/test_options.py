"""One definition each for the version and the option choices (issue 11): every
place that shows or checks them agrees with it, and the docs name them all."""
import os
import re
import subprocess
import sys

import pytest

import threadgraph
from threadgraph import _options, _recorder
from threadgraph._run import build_parser, split_argv, value_options

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")


def read_doc(name):
    with open(os.path.join(DOCS, name), encoding="utf-8") as f:
        return f.read()


def run(args):
    env = dict(os.environ)
    env.pop("TG_CLI", None)  # the packaged processor, built from this tree
    return subprocess.run([sys.executable, "-m", "threadgraph"] + args, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60)


def test_version_is_the_same_everywhere():
    with open(os.path.join(ROOT, "threadgraph", "_version.py")) as f:
        defined = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M).group(1)
    assert threadgraph.__version__ == defined
    assert _recorder.VERSION == defined          # compiled in by setup.py
    res = run(["--version"])
    assert res.returncode == 0, res.stderr
    assert res.stdout == "threadgraph %s\n" % defined   # the C processor's
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover (3.8 has it)
        pytest.skip("no importlib.metadata")
    try:
        assert version("threadgraph") == defined  # the installed package's metadata
    except PackageNotFoundError:
        pytest.skip("threadgraph is not installed (run from the source tree)")


def test_choices_come_from_the_recorder_table():
    assert _options.CHOICES == {k: tuple(v) for k, v in _recorder.OPTION_CHOICES.items()}
    assert set(_options.CHOICES) == {"profile", "memory", "backend", "format", "mode",
                                     "time_resolution"}
    for option, default in _options.DEFAULTS.items():
        assert default in _options.CHOICES[option]
    # ProcessProfile's defaults are the table's.
    prof = threadgraph.ProcessProfile(backend=None)
    assert prof.profile == _options.DEFAULTS["profile"]
    assert prof.memory == _options.DEFAULTS["memory"]
    assert prof.format == _options.DEFAULTS["format"]
    # Python and C refuse the same values with the same message.
    rec = _recorder.Recorder()
    for option in _options.CHOICES:
        with pytest.raises(ValueError) as py_err:
            threadgraph.ProcessProfile(**{option: "nonsense"})
        with pytest.raises(ValueError) as c_err:
            rec.enable(ROOT, **{option: "nonsense"})
        assert str(py_err.value) == str(c_err.value)
        assert str(c_err.value).startswith(option + " must be ")


def test_run_parser_offers_exactly_the_choices():
    parser = build_parser()
    by_dest = {}
    for a in parser._actions:  # the first: --mode's, not --sampled's shorthand
        by_dest.setdefault(a.dest, a)
    for option, choices in _options.CHOICES.items():
        assert tuple(by_dest[option].choices) == choices
    # --format's default depends on --mode (text for a sampled run): resolved
    # after parsing.
    assert by_dest["format"].default is None
    assert by_dest["mode"].default == _options.DEFAULTS["mode"]


def test_docs_name_every_choice():
    api, run_md = read_doc("api.md"), read_doc("run.md")
    for option, choices in _options.CHOICES.items():
        for choice in choices:
            assert '"%s"' % choice in api, "docs/api.md: %s=%r" % (option, choice)
        listed = "--%s %s" % (option.replace("_", "-"), "|".join(choices))
        assert listed in run_md, "docs/run.md should list `%s`" % listed


def test_every_run_help_option_is_documented():
    res = run(["run", "--help"])
    assert res.returncode == 0, res.stderr
    shown = set(re.findall(r"^\s+(-[-\w]+)", res.stdout, re.M))
    shown |= set(re.findall(r"^\s+-\w(?: \S+)?, (--[-\w]+)", res.stdout, re.M))
    assert {"--output", "--profile", "--format", "--sample-bytes"} <= shown
    run_md = read_doc("run.md")
    missing = sorted(opt for opt in shown
                     if opt not in ("-h", "--help")
                     and not re.search(r"`%s[` =]" % re.escape(opt), run_md))
    assert not missing, "options in `threadgraph run --help` not in docs/run.md: %s" % missing


def test_split_argv_knows_every_option_that_takes_a_value():
    parser = build_parser()
    opts = value_options(parser)
    for action in parser._actions:
        if action.option_strings and action.dest != "module":
            for opt in action.option_strings:
                assert (opt in opts) == (action.nargs != 0), opt
    # Each value option's value is never taken for the script.
    for opt in opts:
        ours, target, rest = split_argv([opt, "VALUE", "prog.py", "--stack"])
        assert ours == [opt, "VALUE"] and target == ("script", "prog.py")
        assert rest == ["--stack"]


def test_value_defaults_are_one_table():
    # enable()'s numeric and boolean defaults: src/recorder/options.h, exported,
    # and what ProcessProfile, run --help, enable()'s docstring and the docs say.
    d = _options.VALUE_DEFAULTS
    assert d == _recorder.VALUE_DEFAULTS
    assert set(d) == {"track_memory", "track_stack", "track_sleeps", "timestamps",
                      "sample_every", "accounting", "compress", "native"}
    p = threadgraph.ProcessProfile()
    assert p._frequence == d["sample_every"]
    assert (p._memory, p._stack, p._sleeps, p._timestamps) == (
        d["track_memory"], d["track_stack"], d["track_sleeps"], d["timestamps"])
    doc = _recorder.Recorder.enable.__doc__
    for key, value in d.items():
        assert "%s=%s" % (key, value) in doc, key
    help_text = " ".join(build_parser().format_help().split())
    assert "(default: %d; ProcessProfile.setProcessMemoryFrequence)" % d["sample_every"] in help_text
    api = " ".join(read_doc("api.md").split())
    assert "`setProcessMemoryFrequence(n)`" in api
    assert re.findall(r"profile events of the process \(default (\d+)\)", api) == [
        str(d["sample_every"])]
    doc = " ".join(threadgraph.ProcessProfile.setProcessMemoryFrequence.__doc__.split())
    assert re.findall(r"\(default (\d+)\)", doc) == [str(d["sample_every"])]
    run_md = " ".join(read_doc("run.md").split())
    assert re.findall(r"`0` turns `process.mem` off\. Default (\d+)\.", run_md) == [
        str(d["sample_every"])]


# --- numeric ranges: checked before enable() makes a directory ---------------------

@pytest.mark.parametrize("kwargs, option", [
    ({"max_size": "99999999999999999999999T"}, "max_size"),
    ({"max_size": "9" * 400}, "max_size"),  # a float would be inf
    ({"max_size": 1 << 63}, "max_size"),
    ({"sample_bytes": 99999999999999999999999}, "sample_bytes"),
    ({"sample_bytes": _options.SAMPLE_BYTES_MAX + 1}, "sample_bytes"),
    ({"sample_bytes": float("inf")}, "sample_bytes"),
])
def test_oversized_numbers_raise_value_error(tmp_path, kwargs, option):
    with pytest.raises(ValueError, match=option + " must be"):
        threadgraph.ProcessProfile(default_log_path=str(tmp_path / "out"), **kwargs)
    assert not os.path.exists(str(tmp_path / "out"))


def test_oversized_frequency_raises_value_error(tmp_path):
    prof = threadgraph.ProcessProfile(default_log_path=str(tmp_path / "out"))
    for bad in (99999999999999999999, _options.SAMPLE_EVERY_MAX + 1, -1, "x"):
        with pytest.raises(ValueError, match="process memory frequency must be"):
            prof.setProcessMemoryFrequence(bad)
    assert not os.path.exists(str(tmp_path / "out"))


@pytest.mark.parametrize("bad", [0.5, 1.5, 1000.7, True])
def test_fractional_or_bool_counts_raise_value_error(tmp_path, bad):
    """docs/api.md: invalid values raise ValueError.  int() would truncate them:
    sample_bytes=0.5 would silently turn sampling (and accounting) off, 1.5 would
    sample every byte, setProcessMemoryFrequence(0.4) would turn process.mem off."""
    with pytest.raises(ValueError, match="sample_bytes must be a whole number"):
        threadgraph.ProcessProfile(default_log_path=str(tmp_path / "out"), sample_bytes=bad)
    prof = threadgraph.ProcessProfile(default_log_path=str(tmp_path / "out"))
    with pytest.raises(ValueError, match="process memory frequency must be a whole number"):
        prof.setProcessMemoryFrequence(bad)
    # whole numbers given as floats or text still work
    assert threadgraph.ProcessProfile(default_log_path=str(tmp_path / "out"),
                                      sample_bytes=4096.0).sample_bytes == 4096
    prof.setProcessMemoryFrequence("20")
    assert prof._frequence == 20
    assert not os.path.exists(str(tmp_path / "out"))


def test_largest_numbers_are_what_the_recorder_takes(tmp_path):
    # the limits _options checks are the recorder's own: at them enable() runs
    prof = threadgraph.ProcessProfile(default_log_path=str(tmp_path),
                                      max_size=_options.MAX_SIZE_MAX,
                                      sample_bytes=_options.SAMPLE_BYTES_MAX)
    prof.setProcessMemoryFrequence(_options.SAMPLE_EVERY_MAX)
    prof.enable()
    prof.disable()
    assert os.path.isdir(prof.output_dir)


class _FailingRecorder:
    """A Recorder whose enable() fails, as the C one does on a bad value."""
    active = False

    def enable(self, outdir, **kwargs):
        raise ValueError("refused")


def test_failed_enable_leaves_no_directory(tmp_path):
    base = tmp_path / "new" / "base"
    prof = threadgraph.ProcessProfile(default_log_path=str(base))
    prof._rec = _FailingRecorder()
    with pytest.raises(ValueError, match="refused"):
        prof.enable()
    assert os.listdir(str(tmp_path)) == []  # base and its parent were made for the run
    # a base that was there stays, and so does what is in it
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "other").write_text("x")
    prof.default_log_path = str(tmp_path / "kept")
    with pytest.raises(ValueError, match="refused"):
        prof.enable()
    assert os.listdir(str(tmp_path / "kept")) == ["other"]
    # an empty <pid> directory that was there (enable() reuses it) stays too
    pid_dir = tmp_path / "kept" / str(os.getpid())
    pid_dir.mkdir()
    with pytest.raises(ValueError, match="refused"):
        prof.enable()
    assert pid_dir.is_dir()
    assert prof._output_dir is None  # output_dir: still the planned one


def test_output_path_that_is_a_file(tmp_path):
    (tmp_path / "afile").write_text("x")
    prof = threadgraph.ProcessProfile(default_log_path=str(tmp_path / "afile"))
    with pytest.raises(NotADirectoryError, match="not a directory"):
        prof.enable()


def test_wrong_types_raise_type_error(tmp_path):
    """docs/api.md: a value of the wrong type is a TypeError saying what is
    expected (addSleepTrigger(5, 6) leaked an AttributeError of str.startswith
    from the import machinery); one that does not resolve stays an ImportError
    or AttributeError."""
    prof = threadgraph.ProcessProfile(default_log_path=str(tmp_path / "out"))
    with pytest.raises(TypeError, match="the filter prefix must be a str or None"):
        prof.setFilter(5)
    for module, name in ((5, 6), ("time", 6), (b"time", "sleep"), ("time", None)):
        with pytest.raises(TypeError, match="a sleep trigger is a module name and an "
                                            "attribute path, both str"):
            prof.addSleepTrigger(module, name)
    with pytest.raises(AttributeError):
        prof.addSleepTrigger("time", "no_such_function")
    with pytest.raises(ImportError):
        prof.addSleepTrigger("no_such_module_tg", "f")
    with pytest.raises(TypeError, match="is not a function"):
        prof.addSleepTrigger("os", "sep")
    assert prof._triggers == []
    assert not os.path.exists(str(tmp_path / "out"))


def test_compress_without_anything_to_compress_is_refused(tmp_path):
    """compress=True with format="text" and no accounting compresses nothing:
    a ValueError, as threadgraph run's --compress --format text is a usage
    error (it was silently ignored); with accounting, or a capture, it stands."""
    out = str(tmp_path / "out")
    for kwargs in ({"format": "text"}, {"stream_factory": lambda kind: None}):
        with pytest.raises(ValueError, match="with format='text' it needs accounting"):
            threadgraph.ProcessProfile(default_log_path=out, compress=True, **kwargs)
    for kwargs in ({"format": "text", "accounting": True},
                   {"format": "text", "sample_bytes": 4096}, {"mode": "sampled"},
                   {"format": "both"}, {}):
        assert threadgraph.ProcessProfile(default_log_path=out, compress=True,
                                          **kwargs).compress
    # the attributes are read at enable(): checked there too
    prof = threadgraph.ProcessProfile(default_log_path=out, format="text")
    prof.compress = True
    with pytest.raises(ValueError, match="with format='text' it needs accounting"):
        prof.enable()
    assert not os.path.exists(out)
    script = tmp_path / "prog.py"
    script.write_text("pass\n")
    r = run(["run", "--compress", "--format", "text", "-o", out, str(script)])
    assert r.returncode == 2 and "--compress compresses the binary capture" in r.stderr, r.stderr
