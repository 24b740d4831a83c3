/*
 * tg_snapshot.h - the text formats of allocation accounting: heap snapshots
 * (snapshot-<N>-<label>[.gz], format 2) and the summary (summary.txt[.gz],
 * format 1), shared by their writers and their reader.
 *
 * docs/formats.md describes both for users; this header is their single
 * definition in code.  Plain C (string literals and numbers only), so the
 * recorder (src/recorder/acct_snapshot.c writes snapshots), the analysis
 * library (src/lib/snapshot.c reads both) and the C unit tests include it.
 * summary.txt is written by the Python layer (threadgraph/_accounting.py);
 * tests/python/test_snapshot_format.py checks that its spellings are these.
 *
 * Snapshot, format 2 (one line each, in this order):
 *
 *   # threadgraph snapshot 2
 *   # label: <text>            # number: <N>          # time: <sec>.<usec>
 *   # pid: <pid>               # run_start: <sec>.<usec>
 *   # live_bytes: ...  # live_count: ...  # total_bytes: ...  # total_count: ...
 *   # process_live_bytes: ...  # process_peak_bytes: ...
 *   [# sampled: <mean bytes>]  only under sample_bytes
 *   # thread: <ix> <base name> one per thread that owns a written node
 *   # columns: ID PARENT THREAD LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT CALL
 *   <id> <parent|-> <thread|-> <live bytes> <live count> <total bytes> <total count> <call>
 *
 * Format 1 had no ID, PARENT and THREAD columns.  CALL is "file:line:func"
 * (escaped as the records are) or one of the TG_SNAP_CALL_* texts.
 *
 * Summary, format 1: a "# threadgraph summary 1" line, then tab-separated
 * records:
 *
 *   process <figure> <value>
 *   thread  <figure> <value> <thread name>
 *   window  <figure> <value> <window name>
 *   hist    alloc|free <bin> <count> process|"thread <name>"
 *
 * Cross-thread frees, added to format 1 (a reader that predates them warns
 * about the lines it does not know; a summary without them reads as before):
 *
 *   process   freed_by_lost_bytes <bytes>     present when the pairs were counted
 *   thread    live_at_end_bytes <bytes> <thread name>
 *   freed_by  <bytes> <blocks> <allocated in> <freed in>
 */
#ifndef TG_SNAPSHOT_FORMAT_H
#define TG_SNAPSHOT_FORMAT_H

/* --- snapshots ----------------------------------------------------------- */

/* First line: TG_SNAP_MAGIC followed by the version number. */
#define TG_SNAP_MAGIC "# threadgraph snapshot "
#define TG_SNAP_VERSION 2
#define TG_SNAP_VERSION_STR "2"
/* Oldest version the reader accepts. */
#define TG_SNAP_VERSION_MIN 1

/* A header line "# KEY: value"; TG_SNAP_HDR("label") is the literal "# label: ". */
#define TG_SNAP_HDR(key) "# " key ": "

/* Header keys. */
#define TG_SNAP_KEY_LABEL "label"
#define TG_SNAP_KEY_NUMBER "number"
#define TG_SNAP_KEY_TIME "time"
#define TG_SNAP_KEY_PID "pid"
#define TG_SNAP_KEY_RUN_START "run_start"
#define TG_SNAP_KEY_LIVE_BYTES "live_bytes"
#define TG_SNAP_KEY_LIVE_COUNT "live_count"
#define TG_SNAP_KEY_TOTAL_BYTES "total_bytes"
#define TG_SNAP_KEY_TOTAL_COUNT "total_count"
#define TG_SNAP_KEY_PROCESS_LIVE "process_live_bytes"
#define TG_SNAP_KEY_PROCESS_PEAK "process_peak_bytes"
#define TG_SNAP_KEY_SAMPLED "sampled"
#define TG_SNAP_KEY_THREAD "thread"
#define TG_SNAP_KEY_COLUMNS "columns"

/* The columns line of format 2 (without its newline). */
#define TG_SNAP_COLUMNS \
    TG_SNAP_HDR(TG_SNAP_KEY_COLUMNS) \
    "ID PARENT THREAD LIVE_BYTES LIVE_COUNT TOTAL_BYTES TOTAL_COUNT CALL"

/* Space-separated numeric fields before CALL on a node line. */
#define TG_SNAP_NUM_FIELDS_V1 4
#define TG_SNAP_NUM_FIELDS_V2 7

/* PARENT or THREAD when there is none. */
#define TG_SNAP_NONE_REF "-"

/* CALL of a thread's allocations outside any recorded call (node 0 and the
 * children of a thread's root), and of the node that collects everything once
 * the recorder's site table is full. */
#define TG_SNAP_CALL_NO_FRAME "<no python frame>"
#define TG_SNAP_CALL_TABLE_FULL "<site table full>"

/* Snapshot file names: snapshot-<N>-<label>[.gz]; the end of the final one. */
#define TG_SNAP_FILE_PREFIX "snapshot-"
#define TG_SNAP_FINAL_SUFFIX "-final"
#define TG_SNAP_PEAK_LABEL "peak"
#define TG_SNAP_FINAL_LABEL "final"

/* --- summary.txt ------------------------------------------------------------ */

#define TG_SUM_FILENAME "summary.txt"
#define TG_SUM_JSON_FILENAME "summary.json"
/* First line: TG_SUM_MAGIC followed by the version number. */
#define TG_SUM_MAGIC "# threadgraph summary "
#define TG_SUM_VERSION 1

/* Record kinds (the first tab-separated field). */
#define TG_SUM_REC_PROCESS "process"
#define TG_SUM_REC_THREAD "thread"
#define TG_SUM_REC_WINDOW "window"
#define TG_SUM_REC_HIST "hist"
#define TG_SUM_REC_FREED_BY "freed_by"
/* The cross-thread records' figures (not in TG_SUM_FIGURES_INIT). */
#define TG_SUM_FIG_FREED_BY_LOST "freed_by_lost_bytes"
#define TG_SUM_FIG_LIVE_AT_END "live_at_end_bytes"
/* hist records: the second field, and the owner field's forms ("process", or
 * TG_SUM_HIST_THREAD followed by the thread's name). */
#define TG_SUM_HIST_ALLOC "alloc"
#define TG_SUM_HIST_FREE "free"
#define TG_SUM_HIST_PROCESS "process"
#define TG_SUM_HIST_THREAD "thread "

/* The figures of a process, thread or window, in the order printed
 * (threadgraph/_accounting.py FIGURES). */
#define TG_SUM_NFIG 6
#define TG_SUM_FIGURES_INIT \
    { "total_requested_bytes", "freed_bytes", "alloc_calls", "free_calls", \
      "live_bytes", "peak_bytes" }
/* Size-histogram bins: bin b holds sizes of bit length b (0 for size 0). */
#define TG_SUM_BINS 65

/* Length of a string literal (without its NUL). */
#define TG_LIT_LEN(s) (sizeof(s "") - 1)

#endif /* TG_SNAPSHOT_FORMAT_H */
