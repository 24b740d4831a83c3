"""A CLI built while its sources change is not kept (Makefile, BUILD_KEEP).

make once built the CLI (and each C test) with one compiler run over every
source, one file after another (now each object, then the program, is guarded
the same way).  A checkout or merge landing during that run gave a
program whose early files saw the old headers and later ones the new: struct
tg_stackrec without its last field on fold_load.c's stack, written by
records.c (ASan: stack-buffer-overflow in tg_stackrec_parse, from
tg_fold_load_pair), and make kept that program as newer than every source.
Here a stand-in compiler changes a header in the middle of the build, as such
a merge does: make must fail and leave no program, then build it when run
again.  (Nothing is compiled: the stand-in writes the output file.)
"""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FAKE_CC = r"""#!/bin/sh
# a compiler that writes its -o file; with $TOUCH set, a header changes meanwhile
out=; prev=
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
if [ -n "$TOUCH" ]; then
    touch -d "@$(( $(date +%s) + 5 ))" src/lib/records.h
fi
echo program > "$out"
"""


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("target", ["build/threadgraph", "build/asan/threadgraph",
                                    "build/ctest/test_records"])
def test_a_program_built_while_its_sources_change_is_not_kept(tmp_path, target):
    tree = tmp_path / "tree"
    shutil.copytree(os.path.join(ROOT, "src"), str(tree / "src"))
    shutil.copytree(os.path.join(ROOT, "tests", "c"), str(tree / "tests" / "c"))
    os.makedirs(str(tree / "threadgraph"))
    shutil.copy(os.path.join(ROOT, "threadgraph", "_version.py"), str(tree / "threadgraph"))
    shutil.copy(os.path.join(ROOT, "Makefile"), str(tree))
    cc = tmp_path / "cc"
    cc.write_text(FAKE_CC)
    cc.chmod(0o755)

    def make(touch):
        env = dict(os.environ, TOUCH="1" if touch else "")
        return subprocess.run(["make", "-s", "CC=%s" % cc, target], cwd=str(tree), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60)

    r = make(True)
    assert r.returncode != 0, (r.stdout, r.stderr)
    # (the object being compiled when the header changed, or the program)
    assert "sources changed while build/" in r.stderr, r.stderr
    assert not os.path.exists(str(tree / target))
    where = tree / os.path.dirname(target)
    assert not where.exists() or not [n for n in os.listdir(str(where))
                                      if n.startswith(os.path.basename(target))]
    # (the stand-in dated the header ahead, beyond any clock granularity: back
    # to the past, as a finished merge's file is to the next build)
    header = str(tree / "src" / "lib" / "records.h")
    os.utime(header, (os.path.getmtime(header) - 60,) * 2)
    r = make(False)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (tree / target).read_text() == "program\n"
