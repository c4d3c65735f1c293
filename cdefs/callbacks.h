/* SPDX-License-Identifier: MIT */
/* callbacks: C -> Python calls. Kept last in the build order: they use types
 * declared by the other modules. */

/* Progress and cancellation: fn(handle, done, total); non-zero return = stop. */
typedef int (*tf_progress_fn)(void *handle, int64_t done, int64_t total);

/* The Python implementation of tf_progress_fn (tensorffi/_callbacks.py). */
extern "Python" int tf_py_progress(void *handle, int64_t done, int64_t total);

/* Self-test of the callback path. */
int tf_core_count(int64_t total, int64_t steps, tf_progress_fn fn, void *handle, int64_t *reached);

/* Self-test of the thread runtime: out[i] = 3 i + 1, in `units` units of `rounds`
 * rounds each on up to `nthreads` threads; tids[u] = thread index that ran unit u;
 * units >= fail_from (>= 0) fail with TF_EINVAL "unit <u> failed"; progress from the
 * calling thread every interval_ms (0: every caller checkpoint). */
int tf_core_parallel_fill(int64_t *out, int64_t n, int64_t units, int64_t rounds, int nthreads, int32_t *tids,
                          int64_t fail_from, int interval_ms, tf_progress_fn fn, void *handle);
