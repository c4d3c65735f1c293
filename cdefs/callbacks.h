/* SPDX-License-Identifier: MIT */
/* callbacks: C -> Python calls. Kept last in the build order: they use types
 * declared by the other modules. */

/* Progress and cancellation: fn(handle, done, total); non-zero return = stop. */
typedef int (*tf_progress_fn)(void *handle, int64_t done, int64_t total);

/* The Python implementation of tf_progress_fn (tensorffi/_callbacks.py). */
extern "Python" int tf_py_progress(void *handle, int64_t done, int64_t total);

/* Self-test of the callback path. */
int tf_core_count(int64_t total, int64_t steps, tf_progress_fn fn, void *handle, int64_t *reached);
