"""docs/cli.md and --help agree: every option documented in a command's section
is in that command's --help, and every option in --help is documented there."""
import os
import re

from clisupport import REPO

COMMANDS = ["memg", "peaks", "memh", "nesting", "interleave", "decorate-stack", "export"]
OPT = re.compile(r"(?<![\w-])--[a-z][a-z_-]*[a-z]")


def sections():
    with open(os.path.join(REPO, "docs", "cli.md")) as f:
        text = f.read()
    parts = re.split(r"^## ", text, flags=re.M)
    return {p.split("\n", 1)[0].strip(): p for p in parts[1:]}


def test_every_command_documented():
    assert set(COMMANDS) <= set(sections())


def test_documented_options_in_help(tg):
    docs = sections()
    for cmd in COMMANDS:
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
