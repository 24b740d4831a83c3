"""docs/cli.md and --help agree: every option documented in a command's section
is in that command's --help, and every option in --help is documented there."""
import os
import re

from clisupport import REPO

PYTHON_COMMANDS = ("run", "attach", "detach")
OPT = re.compile(r"(?<![\w-])--[a-z][a-z_-]*[a-z]")


def commands(tg):
    """Every command of the CLI's command table, as `threadgraph --help` lists
    them: a new command is checked without editing this file."""
    helptext = tg("--help").stdout
    listing = helptext[helptext.index("commands:"):helptext.index("global options:")]
    names = re.findall(r"^ {4}([a-z][a-z-]*) ", listing, flags=re.M)
    assert len(names) >= 10, names
    # run, attach and detach are the Python package's, documented in docs/run.md
    # and docs/attach.md (their options are checked by tests/python/test_options.py
    # and test_attach.py); the C program only names them, first
    assert names[:len(PYTHON_COMMANDS)] == list(PYTHON_COMMANDS), names
    return names[len(PYTHON_COMMANDS):]


def sections():
    with open(os.path.join(REPO, "docs", "cli.md")) as f:
        text = f.read()
    parts = re.split(r"^## ", text, flags=re.M)
    return {p.split("\n", 1)[0].strip(): p for p in parts[1:]}


def test_every_command_documented(tg):
    assert set(commands(tg)) <= set(sections())


def test_documented_options_in_help(tg):
    docs = sections()
    for cmd in commands(tg):
        documented = set(OPT.findall(docs[cmd]))
        assert documented, cmd
        helptext = tg(cmd, "--help").stdout
        in_help = set(OPT.findall(helptext))
        assert documented - in_help == set(), (cmd, documented - in_help)
        assert in_help - documented - {"--help"} == set(), (cmd, in_help - documented)


def test_global_options_documented(tg):
    with open(os.path.join(REPO, "docs", "cli.md")) as f:
        text = f.read()
    helptext = tg("--help").stdout
    global_part = helptext[helptext.index("global options:"):]
    opts = OPT.findall(global_part)
    assert "--no_time" in opts and "--version" in opts
    for opt in opts:
        assert opt in text, opt


USAGE_OPT = re.compile(r"(?<![\w-])(--[a-z][a-z_-]*[a-z]|-[a-zA-Z])(?![\w-])")


def usage_lines(helptext):
    """The forms --help's usage gives, one per line, without "usage: "."""
    head = helptext[len("usage: "):helptext.index("\n\n")]
    return [line.strip() for line in head.split("\n")]


def parser_options(helptext):
    """The options the parser accepts, as --help's table lists them (it is
    printed from the parser's own table): each a set of its spellings."""
    table = helptext[helptext.index("\noptions:\n"):]
    found = re.findall(r"^ {4}(?:(-[a-zA-Z]), )?(--[a-z][\w-]*)", table, flags=re.M)
    return [{long} | ({short} if short else set()) for short, long in found
            if long != "--help"]


def synopsis(section):
    """A docs/cli.md section's first code block: the command's forms (a
    comment after two spaces or more left out)."""
    lines = section.split("\n")[1:]
    i = 0
    while i < len(lines) and not lines[i].startswith("    "):
        i += 1
    forms = []
    while i < len(lines) and lines[i].startswith("    "):
        forms.append(re.split(r"\s{2,}", lines[i].strip())[0])
        i += 1
    return forms


def test_usage_lines_name_what_the_parser_accepts(tg):
    """Each command's usage lines are its docs/cli.md synopsis, name only
    options its parser accepts, and name every one of them: by its short or
    long spelling, or through "[options]" (the table below it, all of them)."""
    docs = sections()
    for cmd in commands(tg):
        helptext = tg(cmd, "--help").stdout
        forms = usage_lines(helptext)
        assert forms == synopsis(docs[cmd]), (cmd, forms, synopsis(docs[cmd]))
        accepted = parser_options(helptext)
        spellings = set().union(*accepted)
        named = {opt for form in forms for opt in USAGE_OPT.findall(form)}
        assert named <= spellings, (cmd, named - spellings)
        if not any("[options]" in form for form in forms):
            unnamed = [sorted(opt) for opt in accepted if not opt & named]
            assert not unnamed, (cmd, unnamed)


def test_graph_output_help_says_what_is_written(tg, tmp_path):
    """-o's help names a legend only for the graph commands that write one
    (nesting and hist write the graph alone)."""
    fixtures = os.path.join(REPO, "tests", "cli", "fixtures")
    inputs = {"memg": "tutorial", "memh": "tutorial", "nesting": "tutorial",
              "interleave": "tutorial", "hist": "accounting"}
    for cmd, fixture in inputs.items():
        out = tmp_path / cmd
        r = tg(cmd, "--script-only", "-o", out, os.path.join(fixtures, fixture))
        assert r.returncode == 0, (cmd, r.stderr)
        legends = sorted(f for f in os.listdir(out) if f != cmd + "-plot")
        help_o = [line for line in tg(cmd, "--help").stdout.splitlines()
                  if "--output DIR" in line]
        assert len(help_o) == 1, (cmd, help_o)
        if legends:
            assert "legend (%s)" % legends[0] in help_o[0], (cmd, legends, help_o)
        else:
            assert "legend" not in help_o[0], (cmd, help_o)
