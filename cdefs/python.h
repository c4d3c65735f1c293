/* SPDX-License-Identifier: MIT */
/* The extern "Python" functions: C -> Python calls whose C bodies cffi generates.
 * cffi-only (a C compiler cannot read `extern "Python"`), so the one file of cdefs/
 * that csrc/tensorffi.h does not include; last in the build order, as it uses types
 * of the other files. */

/* The Python implementation of tf_progress_fn (tensorffi/_callbacks.py). */
extern "Python" int tf_py_progress(void *handle, int64_t done, int64_t total);
