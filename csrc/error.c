/* SPDX-License-Identifier: MIT */
/* error.c — the error plumbing every C module calls: tf_error() sets the calling
 * thread's message and returns the status; tf_last_error() reads it (declared in
 * tensorffi.h; cdefs/core.h gives Python tf_last_error). It calls nothing else, so
 * core.c and runtime.c both call it without calling each other back. */
#define TF_INTERNAL
#include "tensorffi.h"

#include <stdarg.h>
#include <stdio.h>

/* The only per-process storage in the library: thread-local, so never shared. */
static _Thread_local char tf_errbuf[1024];

const char *tf_last_error(void) { return tf_errbuf; }

void tf_clear_error(void) { tf_errbuf[0] = '\0'; }

int tf_error(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tf_errbuf, sizeof tf_errbuf, fmt, ap);
    va_end(ap);
    return code;
}
