"""Build threadgraph: the recorder extension and the C command-line processor.

The recorder (src/recorder, src/common) becomes the extension module
``threadgraph._recorder``.  The analysis library and CLI (src/lib, src/cli) become the
executable ``threadgraph/_bin/threadgraph``, which the ``threadgraph`` console script
runs (threadgraph/__main__.py).  Both are compiled by the same compiler setuptools uses
for extensions, so no build tool beyond setuptools is needed.
"""
import glob
import os
import re
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
CFLAGS = ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
          "-Werror=implicit-function-declaration"]


def read_version():
    """threadgraph/_version.py's ``__version__ = "X"``: the one definition of the
    version, compiled into the C processor and the recorder as TG_VERSION."""
    with open(os.path.join(HERE, "threadgraph", "_version.py")) as f:
        match = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    if match is None:
        raise RuntimeError("threadgraph/_version.py has no __version__ line")
    return match.group(1)


VERSION_MACRO = ("TG_VERSION", '"%s"' % read_version())


def rel_sources(pattern):
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, pattern)))


class BuildExtAndCli(build_ext):
    """build_ext that also links the CLI executable into the package."""

    def run(self):
        # build_ext takes an extension as up to date by the files' times, not by
        # the macros it was compiled with: a build tree of the other zstd setting
        # (`pip install .` builds in ./build; libzstd-dev installed since, or
        # THREADGRAPH_NO_ZSTD set) would install its stale extension beside a
        # fresh CLI.  The setting of the last build is kept in build_temp.
        stamp = os.path.join(self.build_temp, "zstd-setting")
        setting = "zstd\n" if ZSTD else "no zstd\n"
        try:
            with open(stamp) as f:
                built = f.read()
        except OSError:
            built = None
        if built != setting:
            self.force = True
        super().run()
        self.build_cli()
        if not self.dry_run:
            os.makedirs(self.build_temp, exist_ok=True)
            with open(stamp, "w") as f:
                f.write(setting)
        warn_without_zstd()

    def build_cli(self):
        sources = rel_sources("src/lib/*.c") + rel_sources("src/cli/*.c")
        if not sources:
            return
        objects = self.compiler.compile(
            sources,
            output_dir=os.path.join(self.build_temp, "cli"),
            include_dirs=["src/common", "src/lib", "src/cli"],
            macros=[VERSION_MACRO] + ([("TG_HAVE_ZSTD", "1")] if ZSTD else []),
            extra_postargs=CFLAGS,
            depends=rel_sources("src/*/*.h"),
        )
        if self.inplace:
            pkg_dir = os.path.join(HERE, "threadgraph")
        else:
            pkg_dir = os.path.join(self.build_lib, "threadgraph")
        out = os.path.join(pkg_dir, "_bin", "threadgraph")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        # link_executable wants a name relative to output_dir.
        self.compiler.link_executable(
            objects, "threadgraph", output_dir=os.path.dirname(out),
            libraries=["m", "z"] + (["zstd"] if ZSTD else [])
        )


def have_zstd():
    """Whether libzstd's header is installed (libzstd-dev): the recorder then
    compresses the binary capture's chunks with compress=True.  THREADGRAPH_NO_ZSTD=1
    builds without it."""
    if os.environ.get("THREADGRAPH_NO_ZSTD"):
        return False
    dirs = ["/usr/include", "/usr/local/include"]
    for var in ("CPATH", "C_INCLUDE_PATH"):
        dirs += [d for d in os.environ.get(var, "").split(os.pathsep) if d]
    return any(os.path.exists(os.path.join(d, "zstd.h")) for d in dirs)


ZSTD = have_zstd()

NO_ZSTD_WARNING = (
    "WARNING: threadgraph is being built WITHOUT zstd (%s): this build cannot read "
    "a binary capture whose chunks are zstd-compressed (written with compress=True "
    "by a build with zstd), and its compress=True writes captures uncompressed. "
    "Install libzstd-dev (zstd.h) and reinstall to read and write compressed captures."
)


def warn_without_zstd():
    """Say on stderr that this build has no zstd: when setup.py starts and again
    after the build (the end of a build log).  pip shows a successful build's
    output only with -v; the reader's error on a compressed chunk also names the
    cause (src/lib/capture_read.c)."""
    if ZSTD:
        return
    why = ("THREADGRAPH_NO_ZSTD is set" if os.environ.get("THREADGRAPH_NO_ZSTD")
           else "no zstd.h found")
    sys.stderr.write(NO_ZSTD_WARNING % why + "\n")
    sys.stderr.flush()


warn_without_zstd()


def refuse_free_threaded():
    """The recorder's tables are protected by the GIL (src/recorder/recorder.h):
    a free-threaded CPython (3.13t, Py_GIL_DISABLED) would race in them.  Say
    so plainly rather than fail in the compiler (tg_compat.h has the same check)."""
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        sys.exit("error: threadgraph needs the GIL: free-threaded CPython (%s, "
                 "Py_GIL_DISABLED) is not supported; install it with the regular "
                 "build of the same Python" % sys.version.split()[0])


refuse_free_threaded()

recorder = Extension(
    "threadgraph._recorder",
    sources=rel_sources("src/recorder/*.c"),
    include_dirs=["src/common", "src/recorder"],
    depends=rel_sources("src/recorder/*.h") + rel_sources("src/common/*.h"),
    extra_compile_args=CFLAGS,
    define_macros=[VERSION_MACRO] + ([("TG_HAVE_ZSTD", "1")] if ZSTD else []),
    # dl: dlsym/dlopen for native=True (glibc < 2.34); zstd: compressed captures
    libraries=["pthread", "z", "dl", "m"] + (["zstd"] if ZSTD else []),
)

setup(
    ext_modules=[recorder],
    cmdclass={"build_ext": BuildExtAndCli},
)
