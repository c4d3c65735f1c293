/* SPDX-License-Identifier: MIT */
/* callbacks: C -> Python callbacks (progress, cancellation).
 * Written once: cffi reads this file to build tensorffi._native (build_ffi.py) and
 * csrc/tensorffi.h includes it, so the C sources and Python see the same declarations. */

/* Progress and cancellation: a long-running kernel calls `fn(handle, done, total)`
 * from the thread that called it, every so often. A non-zero return asks the
 * kernel to stop: it then returns TF_EINTERRUPTED as soon as it can, leaving its
 * outputs partially written. `fn` may be NULL (no reporting). On the Python side
 * `fn` is the extern "Python" function tf_py_progress (cdefs/python.h), and
 * `handle` a cffi handle to the Python object that receives the reports. */
typedef int (*tf_progress_fn)(void *handle, int64_t done, int64_t total);

/* Self-test of the callback path: counts to `total` in `steps` steps, reporting each
 * step; returns TF_EINTERRUPTED if the callback asks to stop, and writes the last
 * count reached to *reached. */
int tf_core_count(int64_t total, int64_t steps, tf_progress_fn fn, void *handle, int64_t *reached);

/* Self-test of the thread runtime: out[i] = 3 i + 1 for i < n, written in `units`
 * units (contiguous slices) on up to `nthreads` threads. Each unit writes its slice
 * `rounds` times (round r < rounds - 1 writes -(r + 1)), with a checkpoint after each
 * round; tids[u] receives the index of the thread that ran unit u (0: the caller).
 * Units u >= fail_from (if fail_from >= 0) fail with TF_EINVAL and the message "unit
 * <u> failed" (written on the thread that ran it): the lowest such unit's is the
 * call's. Progress (in rounds of units) goes to fn from the calling thread, every
 * `interval_ms` (0: at every checkpoint of the caller); a non-zero answer stops the
 * run with TF_EINTERRUPTED. */
int tf_core_parallel_fill(int64_t *out, int64_t n, int64_t units, int64_t rounds, int nthreads, int32_t *tids,
                          int64_t fail_from, int interval_ms, tf_progress_fn fn, void *handle);
