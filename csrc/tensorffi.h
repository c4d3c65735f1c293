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
 * The files in cdefs/ mirror this header (trimmed); the build compiles the cffi module with
 * -Werror, so a mismatch between the two is a build error.
 */
#ifndef TENSORFFI_H
#define TENSORFFI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* core                                                                     */
/* ======================================================================== */

enum {
    TF_OK = 0,
    TF_EINVAL = -1,       /* an argument is invalid */
    TF_ESHAPE = -2,       /* sizes do not agree */
    TF_ETYPE = -3,        /* unsupported element type */
    TF_ENOMEM = -4,       /* a C-side allocation failed */
    TF_EPARSE = -5,       /* malformed input text */
    TF_EOVERFLOW = -6,    /* a value does not fit its type */
    TF_EINTERRUPTED = -7, /* stopped by a callback (Ctrl-C, cancellation) */
    TF_ECALLBACK = -8,    /* a Python callback raised; the exception is re-raised */
    TF_EIO = -9,          /* an operating-system I/O call failed */
    TF_EINTERNAL = -10    /* a bug in tensorffi: please report it */
};

/* SIMD levels reported by tf_simd_level(). */
enum {
    TF_SIMD_SCALAR = 0,
    TF_SIMD_AVX2 = 1,   /* AVX2 + FMA */
    TF_SIMD_AVX512 = 2  /* AVX-512 F/DQ/BW/VL */
};

/* Message of the last error raised on the calling thread ("" if none). */
const char *tf_last_error(void);
/* Clear the calling thread's error message. */
void tf_clear_error(void);

/* Package version compiled into the module (checked at import). */
const char *tf_version(void);
/* Compiler and flags the module was built with. */
const char *tf_build_compiler(void);
const char *tf_build_flags(void);
/* 1 if built with TENSORFFI_NATIVE=1 (-march=native), else 0. */
int tf_build_native(void);

/* Best SIMD level this CPU supports (capped by TENSORFFI_SIMD=scalar|avx2|avx512). */
int tf_simd_level(void);
const char *tf_simd_name(int level);
/* Number of CPUs this process may run on. */
int tf_cpu_count(void);

/* Bridge self-test kernels: small, real functions used by the tests, the demo and
 * the call-overhead benchmark. */
/* x[i] *= a for i < n. */
void tf_core_scale_f32(float *x, int64_t n, float a);
/* y[i] += a * x[i] for i < n. */
void tf_core_axpy_f64(const double *x, double *y, int64_t n, double a);
/* out[r] = sum_c a[r * lda + c] for r < rows, c < cols (a BLAS-style strided read). */
int tf_core_rowsum_f64(const double *a, int64_t rows, int64_t cols, int64_t lda, double *out);
/* Fails with TF_EINVAL and a message when n < 0; otherwise fills x[i] = i. */
int tf_core_iota_i64(int64_t *x, int64_t n);
/* Busy-waits for `ms` milliseconds without touching Python (GIL-release test). */
void tf_core_spin_ms(int ms);

/* A struct that carries pointers: proves that the bridge keeps tensors placed in a
 * struct alive for as long as the struct lives. */
typedef struct tf_core_span {
    const float *data;
    int64_t n;
} tf_core_span;
/* *out = sum of span->data[0 .. span->n). */
int tf_core_span_sum(const tf_core_span *span, double *out);

/* ======================================================================== */
/* signal: IIR filtering (signal.c) */
/* ======================================================================== */

/* (declarations of the signal module go here) */

/* ======================================================================== */
/* physics: particle simulation (physics.c) */
/* ======================================================================== */

/* Integration methods of tf_physics_params.method. */
enum {
    TF_PHYSICS_LEAPFROG = 0,         /* kick-drift-kick, second order, symplectic */
    TF_PHYSICS_SYMPLECTIC_EULER = 1  /* v += a(x) dt, then x += v dt; first order */
};

/* Integration parameters of tf_physics_nbody_*: they cross into C as one struct. */
typedef struct tf_physics_params {
    double dt;            /* time step: finite, non-zero (negative integrates backwards) */
    double G;             /* gravitational constant: finite */
    double softening;     /* Plummer softening length epsilon: finite, >= 0 */
    int64_t steps;        /* number of steps: >= 0 */
    int64_t record_every; /* 0: no trajectory; k > 0: one frame of positions every k steps */
    int method;           /* TF_PHYSICS_LEAPFROG or TF_PHYSICS_SYMPLECTIC_EULER */
} tf_physics_params;

/* Advance b independent systems of n bodies by params->steps steps of softened
 * gravity, in place: the acceleration of body i is
 *   sum_{j != i} G m_j (r_j - r_i) / (|r_j - r_i|^2 + eps^2)^(3/2).
 * pos and vel are [b][n][3], mass is [b][n], all C-contiguous. With
 * params->record_every = k > 0, traj ([b][frames][n][3], frames = steps / k) receives
 * the positions after steps k, 2k, ..., frames*k; with k = 0, frames must be 0 and
 * traj is not touched (it may be NULL). Work is spread over up to `nthreads`
 * threads (bodies of one system, or whole systems). `fn(handle, done, total)` is
 * called from the calling thread every ~0.1 s with done/total in steps; a non-zero
 * return stops the run at a step boundary with TF_EINTERRUPTED. `fn` is a
 * tf_progress_fn, spelled out because that typedef comes later in the build order
 * (cdefs/callbacks.h is read last, and cffi refuses a repeated typedef). */
int tf_physics_nbody_f32(float *pos, float *vel, const float *mass, int64_t b, int64_t n,
                         const tf_physics_params *params, float *traj, int64_t frames,
                         int nthreads, int (*fn)(void *handle, int64_t done, int64_t total),
                         void *handle);
int tf_physics_nbody_f64(double *pos, double *vel, const double *mass, int64_t b, int64_t n,
                         const tf_physics_params *params, double *traj, int64_t frames,
                         int nthreads, int (*fn)(void *handle, int64_t done, int64_t total),
                         void *handle);

/* Total energy of each of b systems, out[s] = sum_i m_i |v_i|^2 / 2
 * - sum_{i<j} G m_i m_j / sqrt(|r_j - r_i|^2 + eps^2), accumulated in double. */
int tf_physics_energy_f32(const float *pos, const float *vel, const float *mass, int64_t b,
                          int64_t n, double G, double softening, int nthreads, float *out);
int tf_physics_energy_f64(const double *pos, const double *vel, const double *mass, int64_t b,
                          int64_t n, double G, double softening, int nthreads, double *out);

/* Total momentum of each of b systems, out[s][k] = sum_i m_i v_i[k] (double accumulation). */
int tf_physics_momentum_f32(const float *vel, const float *mass, int64_t b, int64_t n, float *out);
int tf_physics_momentum_f64(const double *vel, const double *mass, int64_t b, int64_t n, double *out);

/* ======================================================================== */
/* parse: numeric CSV parsing (parse.c) */
/* ======================================================================== */

/* (declarations of the parse module go here) */

/* ======================================================================== */
/* callbacks: C -> Python callbacks (progress, cancellation) */
/* ======================================================================== */

/* Progress and cancellation: a long-running kernel calls `fn(handle, done, total)`
 * from the thread that called it, every so often. A non-zero return asks the
 * kernel to stop: it then returns TF_EINTERRUPTED as soon as it can, leaving its
 * outputs partially written. `fn` may be NULL (no reporting). On the Python side
 * `fn` is the extern "Python" function tf_py_progress (cdefs/callbacks.h), and
 * `handle` a cffi handle to the Python object that receives the reports. */
typedef int (*tf_progress_fn)(void *handle, int64_t done, int64_t total);

/* Self-test of the callback path: counts to `total` in `steps` steps, reporting each
 * step; returns TF_EINTERRUPTED if the callback asks to stop, and writes the last
 * count reached to *reached. */
int tf_core_count(int64_t total, int64_t steps, tf_progress_fn fn, void *handle, int64_t *reached);

/* ---- internal helpers (not declared in cdefs/) ------------------------- */
#ifdef TF_INTERNAL
/* Set the thread-local message and return `code`. printf-style. */
int tf_error(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Run fn(ctx, begin, end) over [0, n) split in contiguous blocks on up to
 * `nthreads` threads (threads are created per call: no pool, fork-safe). Returns
 * the first non-zero status returned by fn, or 0. */
typedef int (*tf_range_fn)(void *ctx, int64_t begin, int64_t end);
int tf_parallel_for(int64_t n, int nthreads, int64_t min_per_thread, tf_range_fn fn, void *ctx);
#endif

#ifdef __cplusplus
}
#endif
#endif /* TENSORFFI_H */
