"""The flame graph and the report opened in a real headless Chromium (cdp.py):
the page loads with no console error and fetches nothing, the planted frame is
found, a real mouse click on it zooms (its rectangle then spans the width), and
the search box highlights and measures matches.  Skipped without Chromium
(Debian: apt-get install chromium).  With TG_SCREENSHOTS=DIR the screenshots are
kept in DIR for a person to look at.
"""
import json
import os
import shutil

import pytest

from cdp import Chromium, find_chromium
from clisupport import FIXTURES, HAVE_GNUPLOT

RUN = os.path.join(FIXTURES, "flamerun")
CHROMIUM = find_chromium()
INNER = 1200 - 20
ALLOC_TOTAL = 5570  # the planted run's bytes allocated (test_flame.py)

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium not installed (apt-get install chromium)")


@pytest.fixture
def browser():
    b = Chromium(CHROMIUM)
    try:
        yield b
    finally:
        b.close()


def keep(tmp_path, browser, name, full=False):
    path = str(tmp_path / name)
    browser.screenshot(path, full=full)
    assert os.path.getsize(path) > 1000
    keep_dir = os.environ.get("TG_SCREENSHOTS")
    if keep_dir:
        os.makedirs(keep_dir, exist_ok=True)
        shutil.copy(path, keep_dir)


def frame_js(svg_id, name):
    """JS for the <g> of the frame called NAME in the svg SVG_ID."""
    return ("Array.from(document.querySelectorAll('#%s g.f')).find(function(g){"
            "return g.querySelector('title').textContent.split('\\n')[0]===%s;})"
            % (svg_id, json.dumps(name)))


def click_frame(browser, svg_id, name):
    """Clicks the frame's rectangle with the mouse, in its middle."""
    box = browser.js("(function(){var g=%s;g.scrollIntoView({block:'center'});"
                     "var r=g.querySelector('rect').getBoundingClientRect();"
                     "return [r.left+r.width/2,r.top+r.height/2];})()" % frame_js(svg_id, name))
    browser.click(box[0], box[1])


def rect_of(browser, svg_id, name):
    return browser.js("(function(){var g=%s;if(!g)return null;var r=g.querySelector('rect');"
                      "return {x:+r.getAttribute('x'),w:+r.getAttribute('width'),"
                      "shown:g.style.display!=='none'};})()" % frame_js(svg_id, name))


def test_flamegraph_in_the_browser(tg, tmp_path, browser):
    svg = tmp_path / "flame.svg"
    r = tg("flamegraph", RUN, "-o", svg)
    assert r.returncode == 0, r.stderr
    browser.open("file://" + str(svg))
    fill = "fill (/app/cache.py:3)"
    before = rect_of(browser, "tgflame", fill)
    assert before["w"] == pytest.approx(3000 / ALLOC_TOTAL * INNER, abs=0.01)
    keep(tmp_path, browser, "flame.png")

    click_frame(browser, "tgflame", fill)
    after = rect_of(browser, "tgflame", fill)
    assert after["shown"] and after["x"] == pytest.approx(10) and \
        after["w"] == pytest.approx(INNER, abs=0.01)
    # its callers span the width too, a frame of the other thread is hidden
    assert rect_of(browser, "tgflame", "main (/app/main.py:1)")["w"] == pytest.approx(INNER)
    assert not rect_of(browser, "tgflame", "worker 1")["shown"]
    assert browser.js("document.getElementById('tgflame').getAttribute('data-zoom')") == fill
    keep(tmp_path, browser, "flame-zoomed.png")

    # hover shows the frame, its bytes and share
    click_frame(browser, "tgflame", "all")  # unzoom
    assert rect_of(browser, "tgflame", "worker 1")["shown"]
    browser.js("%s.dispatchEvent(new MouseEvent('mouseover'))" % frame_js("tgflame", fill))
    details = browser.js("document.getElementById('tgflame-details').textContent")
    assert details == "%s \u2014 3,000 B (2.93 KB), 53.86%%" % fill

    # search: the two frames of load cover 3700 of 5570 bytes
    browser.js("document.getElementById('tgflame-search').focus()")
    browser.type_text("load")
    assert browser.js("document.getElementById('tgflame-match').textContent") == \
        "Matched: 66.4%"
    assert browser.js("document.querySelectorAll('#tgflame g.s').length") == 1
    keep(tmp_path, browser, "flame-search.png")
    assert browser.errors() == []
    assert browser.fetched() == []


def test_report_in_the_browser(tg, tmp_path, browser):
    out = tmp_path / "report.html"
    r = tg("report", "--peak", "1", "--peak_delta_time", "0", "--peak_delta_value", "0",
           RUN, "-o", out)
    assert r.returncode == 0, r.stderr
    browser.open("file://" + str(out))
    keep(tmp_path, browser, "report.png", full=True)
    if HAVE_GNUPLOT:  # the inlined gnuplot graphs (held, memory, sizes) decode and have a size
        sizes = browser.js("Array.from(document.images).map(function(i){"
                           "return i.complete?i.naturalWidth:0;})")
        assert len(sizes) == 3 and all(s > 0 for s in sizes), sizes
    # the peaks table links to the subtrees
    target = browser.js("document.querySelector('a[href^=\"#peak-\"]').getAttribute('href')")
    assert browser.js("document.querySelector(%s).querySelector('pre').textContent"
                      % json.dumps(target)).startswith("fill@/app/cache.py:3-4")
    # both inline flame graphs work on their own
    for svg_id in ("flame-peak", "flame-alloc"):
        click_frame(browser, svg_id, "fill (/app/cache.py:3)")
        after = rect_of(browser, svg_id, "fill (/app/cache.py:3)")
        assert after["w"] == pytest.approx(INNER, abs=0.01)
    assert rect_of(browser, "flame-peak", "worker 1")["shown"] is False
    keep(tmp_path, browser, "report-zoomed.png")
    assert browser.errors() == []
    assert browser.fetched() == []


def test_report_peaks_table_keeps_numbers_on_one_line(tg, tmp_path, browser):
    """The peaks table of a run with long file paths: the time and the delta
    stay on one line each (they wrapped as "2026-11-26 / 17:46:48.645119" and
    "442,540 B (432.2 / KiB)" beside a long path, which now wraps instead), and
    the table stays within the page."""
    run = tmp_path / "run"
    run.mkdir()
    path = "/home/someone/projects/" + "/".join(["a_rather_long_directory_name"] * 4) + "/app.py"
    stack, mem = [], []
    for i in range(3):
        stack.append("1764175608.%06d#%s:24:doStuff" % (100000 * i + 1, path))
        mem.append("1764175608.%06d#%s:31:doStuff=>%d" % (100000 * i + 50000, path,
                                                          442540 + 1000 * i))
    (run / "T.stack").write_text("\n".join(stack) + "\n")
    (run / "T.mem").write_text("\n".join(mem) + "\n")
    out = tmp_path / "report.html"
    r = tg("report", "--peak", "1", "--peak_delta_time", "0", "--peak_delta_value", "0",
           run, "-o", out)
    assert r.returncode == 0, r.stderr
    browser.open("file://" + str(out))
    keep(tmp_path, browser, "report-long-paths.png", full=True)
    def lines(cell_js):
        # line boxes of a cell's text, for each peak row (td.time)
        return browser.js(
            "Array.from(document.querySelectorAll('td.time')).map(function(t){"
            "var r=document.createRange(); r.selectNodeContents(" + cell_js + ");"
            "return r.getClientRects().length;})")
    assert lines("t") == [1, 1, 1]                                      # time
    assert lines("t.parentNode.lastElementChild") == [1, 1, 1]          # delta
    assert all(n > 1 for n in lines("t.parentNode.querySelector('code')"))  # path
    right = browser.js("Math.max.apply(null, Array.from(document.querySelectorAll("
                       "'td.time')).map(function(t){"
                       "return t.parentNode.lastElementChild.getBoundingClientRect().right;}))")
    assert right <= browser.js("document.documentElement.clientWidth")
    assert browser.errors() == []
