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
