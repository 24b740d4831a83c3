/*
 * options.c - the choices and defaults of enable()'s string options (options.h).
 */
#include "options.h"
#include "recorder.h"

#include <stdio.h>
#include <string.h>

static const struct tg_choice tg_profile_choices[] = {
    {"python", TG_PROFILE_PYTHON},
    {"c", TG_PROFILE_C},
    {"both", TG_PROFILE_PYTHON | TG_PROFILE_C},
    {NULL, 0}
};
const struct tg_option_choices tg_opt_profile = {"profile", tg_profile_choices, 2};

static const struct tg_choice tg_memory_choices[] = {
    {"thread", TG_MEM_THREAD},
    {"process", TG_MEM_PROCESS},
    {"rss", TG_MEM_RSS},
    {NULL, 0}
};
const struct tg_option_choices tg_opt_memory = {"memory", tg_memory_choices, 0};

static const struct tg_choice tg_backend_choices[] = {
    {"auto", TG_BACKEND_AUTO},
    {"setprofile", TG_BACKEND_SETPROFILE},
    {"monitoring", TG_BACKEND_MONITORING},
    {NULL, 0}
};
const struct tg_option_choices tg_opt_backend = {"backend", tg_backend_choices, 0};

static const struct tg_choice tg_format_choices[] = {
    {"binary", TG_FORMAT_BINARY},
    {"text", TG_FORMAT_TEXT},
    {"both", TG_FORMAT_TEXT | TG_FORMAT_BINARY},
    {NULL, 0}
};
const struct tg_option_choices tg_opt_format = {"format", tg_format_choices, 0};

static const struct tg_choice tg_mode_choices[] = {
    {"full", TG_MODE_FULL},
    {"sampled", TG_MODE_SAMPLED},
    {NULL, 0}
};
const struct tg_option_choices tg_opt_mode = {"mode", tg_mode_choices, 0};

static const struct tg_choice tg_time_resolution_choices[] = {
    {"us", TG_TIME_US},
    {"ms", TG_TIME_MS},
    {NULL, 0}
};
const struct tg_option_choices tg_opt_time_resolution = {"time_resolution",
                                                         tg_time_resolution_choices, 0};

/* Every table, for the export. */
static const struct tg_option_choices *const tg_option_tables[] = {
    &tg_opt_profile, &tg_opt_memory, &tg_opt_backend, &tg_opt_format, &tg_opt_mode,
    &tg_opt_time_resolution, NULL
};

const struct tg_choice *
tg_choice_find(const struct tg_option_choices *o, const char *name)
{
    const struct tg_choice *c;

    for (c = o->choices; c->name != NULL; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

const char *
tg_choice_default(const struct tg_option_choices *o)
{
    return o->choices[o->default_index].name;
}

PyObject *
tg_choice_error(const struct tg_option_choices *o, const char *name)
{
    char list[256];
    size_t len = 0;
    const struct tg_choice *c;

    /* "'a', 'b' or 'c'": the names are short literals, LIST cannot overflow. */
    list[0] = '\0';
    for (c = o->choices; c->name != NULL; c++) {
        const char *sep = c == o->choices ? "" : c[1].name == NULL ? " or " : ", ";
        int n = snprintf(list + len, sizeof list - len, "%s'%s'", sep, c->name);
        if (n < 0 || (size_t)n >= sizeof list - len)
            break;
        len += (size_t)n;
    }
    PyErr_Format(PyExc_ValueError, "%s must be %s, not '%s'", o->option, list, name);
    return NULL;
}

int
tg_options_export(PyObject *module)
{
    PyObject *choices = PyDict_New(), *defaults = PyDict_New(), *names = NULL;
    const struct tg_option_choices *const *o;
    int rc = -1;

    if (choices == NULL || defaults == NULL)
        goto cleanup;
    for (o = tg_option_tables; *o != NULL; o++) {
        Py_ssize_t n = 0, i;
        PyObject *dflt;

        while ((*o)->choices[n].name != NULL)
            n++;
        names = PyTuple_New(n);
        if (names == NULL)
            goto cleanup;
        for (i = 0; i < n; i++) {
            PyObject *s = PyUnicode_FromString((*o)->choices[i].name);
            if (s == NULL)
                goto cleanup;
            PyTuple_SET_ITEM(names, i, s);
        }
        if (PyDict_SetItemString(choices, (*o)->option, names) < 0)
            goto cleanup;
        Py_CLEAR(names);
        dflt = PyUnicode_FromString(tg_choice_default(*o));
        if (dflt == NULL)
            goto cleanup;
        if (PyDict_SetItemString(defaults, (*o)->option, dflt) < 0) {
            Py_DECREF(dflt);
            goto cleanup;
        }
        Py_DECREF(dflt);
    }
    if (PyModule_AddObject(module, "OPTION_CHOICES", choices) < 0)
        goto cleanup;
    choices = NULL;  /* stolen */
    if (PyModule_AddObject(module, "OPTION_DEFAULTS", defaults) < 0)
        goto cleanup;
    defaults = Py_BuildValue("{s:N,s:N,s:N,s:N,s:l,s:N,s:N,s:N}",
                             "track_memory", PyBool_FromLong(TG_DEFAULT_TRACK_MEMORY),
                             "track_stack", PyBool_FromLong(TG_DEFAULT_TRACK_STACK),
                             "track_sleeps", PyBool_FromLong(TG_DEFAULT_TRACK_SLEEPS),
                             "timestamps", PyBool_FromLong(TG_DEFAULT_TIMESTAMPS),
                             "sample_every", (long)TG_DEFAULT_SAMPLE_EVERY,
                             "accounting", PyBool_FromLong(TG_DEFAULT_ACCOUNTING),
                             "compress", PyBool_FromLong(TG_DEFAULT_COMPRESS),
                             "native", PyBool_FromLong(TG_DEFAULT_NATIVE));
    if (defaults == NULL || PyModule_AddObject(module, "VALUE_DEFAULTS", defaults) < 0)
        goto cleanup;
    defaults = NULL;
    rc = 0;
cleanup:
    Py_XDECREF(names);
    Py_XDECREF(choices);
    Py_XDECREF(defaults);
    return rc;
}
