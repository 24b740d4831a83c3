"""Huge memory deltas: one beyond 2^53 is a malformed line, sums beyond 2^63 an
error (or a warned cap in folded), never a wrapped or silently capped number."""
import re

import pytest

COMMANDS = [
    ["memg", "--held", "--script-only", "-o", "OUT"],
    ["threads"],
    ["memh", "--script-only", "-o", "OUT"],
]


def write_run(path, n, delta):
    """Threads T and U, n calls each of +delta and -delta."""
    path.mkdir()
    for name, sign, frac in (("T", "", "0"), ("U", "-", "5")):
        (path / f"{name}.mem").write_text(
            "".join(f"{i}.{frac}#a.py:1:f=>{sign}{delta}\n" for i in range(1, n + 1)))
        (path / f"{name}.stack").write_text(
            "".join(f"{i}.{frac}#a.py:1:f\n" for i in range(1, n + 1)))
    return path


def no_wrapped(r):
    # no 19-digit number: a wrapped or capped sum
    assert not re.search(r"\d{19}", r.stdout), r.stdout


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0] + ("-held" if "--held" in a else ""))
def test_delta_beyond_bound_is_malformed(tg, tmp_path, args):
    run = write_run(tmp_path / "run", 20, 999999999999999999)
    r = tg(*[str(tmp_path / "out") if a == "OUT" else a for a in args], run)
    assert "malformed line skipped (memory delta out of range)" in r.stderr
    assert r.returncode != 0  # nothing left to show
    no_wrapped(r)


@pytest.mark.parametrize("args,msg", [
    (COMMANDS[0], "held memory beyond 2^63 bytes at line 1024 (damaged dumps?)"),
    (COMMANDS[1], "held memory beyond 2^63 bytes at line 1024 (damaged dumps?)"),
    (COMMANDS[2], "the deltas of call site 'a.py:1:f' sum beyond 2^63 bytes"),
], ids=["memg-held", "threads", "memh"])
def test_sum_beyond_int64_is_an_error(tg, tmp_path, args, msg):
    # 2^53 is taken; 1024 of them reach 2^63
    run = write_run(tmp_path / "run", 1100, 2 ** 53)
    r = tg(*[str(tmp_path / "out") if a == "OUT" else a for a in args], run)
    assert r.returncode != 0
    assert msg in r.stderr
    no_wrapped(r)


def test_folded_cap_is_warned(tg, tmp_path):
    run = write_run(tmp_path / "run", 1100, 2 ** 53)
    r = tg("folded", "--metric", "delta", run)
    assert r.returncode == 0, r.stderr
    assert "1 frame summed beyond 2^63: shown capped at 9223372036854775807" in r.stderr
