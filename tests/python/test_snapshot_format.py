"""summary.txt is written by Python (threadgraph/_accounting.py) and read by C
(src/lib/snapshot.c); its spellings are defined once, in
src/common/tg_snapshot.h.  These tests hold the Python writer to that header."""
import os
import re

from threadgraph import _accounting

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HEADER = os.path.join(ROOT, "src", "common", "tg_snapshot.h")


def _defines():
    """NAME -> string value of each string #define of the header (adjacent
    literals joined), and the figures of TG_SUM_FIGURES_INIT."""
    text = open(HEADER).read().replace("\\\n", " ")
    out = {}
    for m in re.finditer(r"^#define (TG_\w+)\s+((?:\"[^\"]*\"\s*)+)$", text, re.M):
        out[m.group(1)] = "".join(re.findall(r"\"([^\"]*)\"", m.group(2)))
    m = re.search(r"^#define TG_SUM_FIGURES_INIT\s+\{([^}]*)\}", text, re.M)
    out["figures"] = tuple(re.findall(r"\"([^\"]*)\"", m.group(1)))
    m = re.search(r"^#define TG_SUM_VERSION (\d+)$", text, re.M)
    out["version"] = m.group(1)
    return out


FIGS = {
    "process": dict({k: i + 1 for i, k in enumerate(_accounting.FIGURES)},
                    hist_alloc=[0, 3] + [0] * 63, hist_free=[2] + [0] * 64),
    "threads": [dict({k: 10 + i for i, k in enumerate(_accounting.FIGURES)}, name="Main",
                     hist_alloc=[0, 3] + [0] * 63, hist_free=[0] * 65)],
    "windows": [{"name": "w", "process": {k: 20 + i for i, k in enumerate(_accounting.FIGURES)}}],
}


def test_figures_are_the_headers():
    assert _accounting.FIGURES == _defines()["figures"]


def test_summary_lines_use_the_headers_spellings():
    d = _defines()
    lines = _accounting.summary_lines(FIGS)
    assert lines[0] == d["TG_SUM_MAGIC"] + d["version"]
    kinds = {line.split("\t")[0] for line in lines[1:]}
    assert kinds == {d["TG_SUM_REC_PROCESS"], d["TG_SUM_REC_THREAD"], d["TG_SUM_REC_WINDOW"],
                     d["TG_SUM_REC_HIST"]}
    hists = [line.split("\t") for line in lines if line.startswith(d["TG_SUM_REC_HIST"] + "\t")]
    assert {h[1] for h in hists} == {d["TG_SUM_HIST_ALLOC"], d["TG_SUM_HIST_FREE"]}
    owners = {h[4] for h in hists}
    assert owners == {d["TG_SUM_HIST_PROCESS"], d["TG_SUM_HIST_THREAD"] + "Main"}
