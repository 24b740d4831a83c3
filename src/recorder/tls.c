/*
 * tls.c - the one definition of the recorder's thread-local state (tls.h).
 */
#include "tls.h"

_Thread_local struct tg_tls tg_tls __attribute__((tls_model("initial-exec")));
