/* SPDX-License-Identifier: MIT */
/*
 * tensorffi.h — the one public header of tensorffi's native library.
 *
 * Conventions (see DESIGN.md):
 *   - names tf_<module>_<verb>[_f32|_f64]; error codes TF_E<NAME>;
 *   - every fallible function returns int (0 = ok, negative = TF_E*) and writes
 *     results through its arguments; the message is kept in a thread-local buffer
 *     read by tf_last_error();
 *   - lengths and strides are int64_t; C never allocates memory Python owns;
 *   - no global mutable state: every function is reentrant and thread-safe.
 *
 * The public declarations are written once, in cdefs/ (one file per module, in
 * build_ffi.py's order): cffi reads them to build tensorffi._native, and this header
 * includes them, so a C source that defines a function differently from its
 * declaration fails to compile (-Werror). Below them, the internal section
 * (TF_INTERNAL): what the C sources share and Python never sees.
 */
#ifndef TENSORFFI_H
#define TENSORFFI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../cdefs/core.h"
#include "../cdefs/signal.h"
#include "../cdefs/physics.h"
#include "../cdefs/parse.h"
#include "../cdefs/callbacks.h"

/* ---- internal helpers (not declared in cdefs/) ------------------------- */
#ifdef TF_INTERNAL
/* Set the thread-local message and return `code`. printf-style. */
int tf_error(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- the thread runtime (runtime.c) ------------------------------------
 * One parallel call is a *run*: a driver function on the calling thread that opens
 * phases of independent units; idle threads (the host OpenMP runtime's, or our
 * pool's) take units one at a time and the caller works too. See runtime.c. */
typedef struct tf_rt tf_rt;
/* A unit of work; tid is the thread's index in the run (0 = the caller, < threads).
 * A non-zero return stops the run with that status (the lowest failing unit wins;
 * its tf_error message is carried to the caller's thread). */
typedef int (*tf_rt_unit_fn)(void *ctx, int64_t unit, int tid);
typedef struct {
    int threads;                  /* threads that may take part (1: inline, no thread) */
    tf_progress_fn fn;            /* progress callback, called on the caller only (NULL: none) */
    void *handle;
    int64_t (*done)(void *ctx);   /* progress so far, for the runtime's own reports (NULL: the
                                     driver reports alone, with tf_rt_report) */
    void *done_ctx;
    int64_t total;                /* progress total passed to fn */
    double interval;              /* seconds between reports (<= 0: 0.1) */
} tf_rt_opts;
/* Run driver(rt, ctx) on the calling thread, with up to opts->threads threads for its
 * phases. Returns the driver's status if non-zero, else the run's first failure (a
 * unit's status, or TF_EINTERRUPTED after a stop), else 0. */
int tf_rt_run(const tf_rt_opts *opts, int (*driver)(tf_rt *rt, void *ctx), void *ctx);
/* Driver only: run fn over units [0, units) on the run's threads and return when all
 * are done (or, after a stop, when those already started are): the run's status. */
int tf_rt_phase(tf_rt *rt, int64_t units, tf_rt_unit_fn fn, void *ctx);
/* Inside a unit, at a point where the thread may pause (it touches no caller memory
 * while paused): parks while the caller reports progress. Returns non-zero once the
 * run is stopping: return from the unit without touching caller memory again. */
int tf_rt_checkpoint(tf_rt *rt);
/* Caller thread only (a no-op elsewhere): call the progress callback with `done` if
 * the interval has passed (or `force`), once every other thread is out of its unit.
 * Returns non-zero once the run is stopping (the callback is then never called again). */
int tf_rt_report(tf_rt *rt, int64_t done, int force);
int tf_rt_stopped(const tf_rt *rt);
/* Stop the run with `status` (TF_EINTERRUPTED if 0): no unit starts afterwards. */
void tf_rt_stop(tf_rt *rt, int status);
/* Threads that may take part in the run (per-thread buffers: tid < this). */
int tf_rt_threads(const tf_rt *rt);
/* Threads worth using for `work`: at most nthreads, and one per min_work_per_thread. */
int tf_rt_threads_for(double work, double min_work_per_thread, int nthreads);

/* Run fn(ctx, begin, end) over [0, n) on up to nthreads threads, at most one thread
 * per min_per_thread items (fewer items: fn(ctx, 0, n) on the calling thread). The
 * range is cut into about four contiguous blocks per thread, taken on demand.
 * Returns the first non-zero status returned by fn, or 0. */
typedef int (*tf_range_fn)(void *ctx, int64_t begin, int64_t end);
int tf_parallel_for(int64_t n, int nthreads, int64_t min_per_thread, tf_range_fn fn, void *ctx);

/* Fault in the pages of a large output before threads write it: C calls this on a
 * buffer it is about to overwrite entirely, before its parallel phase. Fresh pages
 * (a new mapping, as malloc gives for blocks of 32 MiB and more) are asked for as
 * 2 MiB pages where transparent huge pages are on "madvise", and faulted in with one
 * MADV_POPULATE_WRITE call (Linux >= 5.14; else one write per page, keeping the
 * contents). Buffers under TF_POPULATE_MIN_BYTES, and buffers already in memory,
 * are left alone. */
#define TF_POPULATE_MIN_BYTES ((int64_t)1 << 22)
void tf_populate(void *ptr, int64_t bytes);
#endif

#ifdef __cplusplus
}
#endif
#endif /* TENSORFFI_H */
