"""Dump text is untrusted: hostile thread, file and function names must not run
anything through gnuplot (backquotes, system(), quotes, newlines)."""
import os

from clisupport import needs_gnuplot

HOSTILE_THREAD = "x`touch PWNED_T`'; system(\"touch PWNED_S\") #"
HOSTILE_FUNC = "f`touch PWNED_F`\"); system(\"touch PWNED_G\"); print(\""


def make_hostile(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    mem = data / (HOSTILE_THREAD + ".mem")
    mem.write_text(
        "1394031412.5#`touch PWNED_FILE`.py:3:%s=>409600\n"
        "1394031413.5#a.py:3:'\"`touch PWNED_Q`=>-409600\n" % HOSTILE_FUNC)
    return str(mem)


def assert_nothing_ran(*dirs):
    for d in dirs:
        assert not [n for n in os.listdir(d) if n.startswith("PWNED")], os.listdir(d)


@needs_gnuplot
def test_hostile_names_run_nothing(tg, tmp_path):
    mem = make_hostile(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    r = tg("memg", "--peak=1", "-o", out, mem, cwd=tmp_path)
    assert_nothing_ran(tmp_path, out, tmp_path / "data")
    assert r.returncode == 0, r.stderr
    svg = (out / "memg.svg").read_text()
    # the title is shown literally (XML-escaped by gnuplot)
    assert "x`touch PWNED_T`" in svg
    legend = (out / "memg.txt").read_text()
    assert legend.startswith("0: " + HOSTILE_THREAD + ">`touch PWNED_FILE`.py:3:")
    # rerunning the kept script by hand is just as safe
    import subprocess
    r = tg("memg", "--keep", "--peak=1", "-o", out, mem, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    subprocess.run(["gnuplot", "memg.gp"], cwd=out / "memg-plot", capture_output=True,
                   timeout=60)
    assert_nothing_ran(tmp_path, out, tmp_path / "data")


def test_hostile_title_is_quoted_in_script(tg, tmp_path):
    mem = make_hostile(tmp_path)
    r = tg("memg", "--script-only", "--peak=1", "-o", tmp_path, mem)
    assert r.returncode == 0, r.stderr
    gp = (tmp_path / "memg-plot" / "memg.gp").read_text()
    # (its 44 characters shortened to the key's 32: docs/cli.md "Long thread names")
    assert ("title 'x`touch PWNED_T`'.sprintf('%c',39).'; s..WNED_S\") #'"
            in gp)
    # function and file names never reach the script, only the legend
    assert "PWNED_F" not in gp and "PWNED_FILE" not in gp


def test_control_characters_escaped_on_terminal(tg, tmp_path):
    mem = tmp_path / "evil\x1b[31m.mem"
    mem.write_text("1.5#a.py:1:f\x1b]0;title\x07=>409600\n")
    r = tg("peaks", "--peak=1", mem)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "evil\\x1b[31m" in r.stdout and "f\\x1b]0;title\\x07" in r.stdout
    r = tg("memg", "--script-only", "-o", tmp_path, mem)
    assert "\x1b" not in r.stderr
    assert "Processing data for thread evil\\x1b[31m" in r.stderr
    gp = (tmp_path / "memg-plot" / "memg.gp").read_text()
    assert "\x1b" not in gp and "title 'evil?[31m'" in gp
