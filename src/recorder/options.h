/*
 * options.h - the choices and defaults of enable()'s string options (profile,
 * memory, backend, format): their one definition.
 *
 * enable() (module.c) validates against these tables; the module exports them
 * as _recorder.OPTION_CHOICES and _recorder.OPTION_DEFAULTS, from which
 * threadgraph/_options.py gives ProcessProfile, `threadgraph run` (argparse
 * choices, defaults, --help) and --follow-exec their lists.  Adding a choice
 * here adds it everywhere; tests/python/test_options.py checks that docs/api.md
 * and docs/run.md name every one.
 */
#ifndef TG_OPTIONS_H
#define TG_OPTIONS_H

#include "tg_compat.h"

#pragma GCC visibility push(hidden)

/* One choice: the name Python passes and the value enable() uses for it. */
struct tg_choice {
    const char *name;
    int value;
};

/* The choices of one option.  Immutable (static tables). */
struct tg_option_choices {
    const char *option;               /* keyword argument: "profile" */
    const struct tg_choice *choices;  /* ends with a { NULL, 0 } entry */
    int default_index;                /* index of the default choice */
};

/* Values: profile is a mask of TG_PROFILE_PYTHON/C; memory an enum
 * tg_memory_mode; backend an enum tg_backend or TG_BACKEND_AUTO; format a mask
 * of TG_FORMAT_TEXT/BINARY. */
#define TG_PROFILE_PYTHON 1
#define TG_PROFILE_C 2
#define TG_BACKEND_AUTO (-1)
#define TG_FORMAT_TEXT 1
#define TG_FORMAT_BINARY 2
/* mode: a full recording (the profile function or sys.monitoring) or a sampled
 * one (sampled.h). */
#define TG_MODE_FULL 0
#define TG_MODE_SAMPLED 1
/* time_resolution: every timed record reads the clock ("us"), or a thread's
 * records of one clock beat share its first reading ("ms", clock_beat.h). */
#define TG_TIME_US 0
#define TG_TIME_MS 1

/* enable()'s numeric and boolean keyword defaults, defined once: enable()'s
 * locals and docstring (module.c), a new Recorder (tg_recorder_init) and
 * _recorder.VALUE_DEFAULTS, which threadgraph/_options.py hands to
 * ProcessProfile and `threadgraph run`; tests/python/test_options.py checks
 * the defaults docs/api.md and docs/run.md state against it. */
#define TG_DEFAULT_TRACK_MEMORY 1
#define TG_DEFAULT_TRACK_STACK 0
#define TG_DEFAULT_TRACK_SLEEPS 1
#define TG_DEFAULT_TIMESTAMPS 1
#define TG_DEFAULT_SAMPLE_EVERY 1000  /* process.mem: one request per N events */
#define TG_DEFAULT_ACCOUNTING 0
#define TG_DEFAULT_COMPRESS 0
#define TG_DEFAULT_NATIVE 0
#define TG_STR_(x) #x
#define TG_STR(x) TG_STR_(x)

extern const struct tg_option_choices tg_opt_profile, tg_opt_memory, tg_opt_backend,
    tg_opt_format, tg_opt_mode, tg_opt_time_resolution;

/* The choice of O named NAME, or NULL. */
const struct tg_choice *tg_choice_find(const struct tg_option_choices *o, const char *name);
/* The name of O's default choice. */
const char *tg_choice_default(const struct tg_option_choices *o);
/* Raise ValueError "OPTION must be 'a', 'b' or 'c', not 'NAME'"; returns NULL. */
PyObject *tg_choice_error(const struct tg_option_choices *o, const char *name);
/* Add OPTION_CHOICES ({option: (names...)}), OPTION_DEFAULTS ({option:
 * name}) and VALUE_DEFAULTS ({keyword: bool or int}, TG_DEFAULT_*) to MODULE.  Returns 0, or -1 with an exception set. */
int tg_options_export(PyObject *module);

#pragma GCC visibility pop

#endif /* TG_OPTIONS_H */
