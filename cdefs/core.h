/* SPDX-License-Identifier: MIT */
/* core: status codes, thread-local errors, build facts, CPU features, self-tests (core.c, runtime.c).
 * Written once: cffi reads this file to build tensorffi._native (build_ffi.py) and
 * csrc/tensorffi.h includes it, so the C sources and Python see the same declarations. */

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
/* Number of CPUs this process may run on (its CPU affinity; all online CPUs where
 * the system has no affinity call). */
int tf_cpu_count(void);

/* The thread runtime (runtime.c): where a run of `threads` threads started on the
 * calling thread now would get its threads: 0 none (inline: threads == 1, or inside
 * a parallel region already), 1 tensorffi's own pool, 2 the host OpenMP runtime's
 * team (PyTorch's intra-op threads). */
int tf_runtime_backend(int threads);
/* Threads in tensorffi's own pool (created on demand and kept; 0 in a fresh fork). */
int tf_runtime_pool_size(void);

/* The bridge's native call path (bridge_call.c, the one file that uses the CPython
 * API): adds the NativeCall type and its configuration functions to the Python module
 * named `module` (tensorffi._native). Called once, at import. */
int tf_bridge_install(const char *module);

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
/* y[i] = a * x[i] for i < n, split over up to `nthreads` threads (tf_parallel_for): an
 * out-of-place, differentiable example for the operator layer, and the multi-threaded
 * kernel of the fork-safety tests. TF_EINVAL if n < 0 or nthreads < 1. */
int tf_core_scaled_f32(const float *x, float *y, int64_t n, float a, int nthreads);

/* Waits (spinning, GIL released) until *flag != 0; TF_EINTERRUPTED after timeout_ms.
 * Another Python thread can only set the flag if this call released the GIL. */
int tf_core_wait_flag(const int32_t *flag, int timeout_ms);

/* A struct that carries pointers: proves that the bridge keeps tensors placed in a
 * struct alive for as long as the struct lives. */
typedef struct tf_core_span {
    const float *data;
    int64_t n;
} tf_core_span;
/* *out = sum of span->data[0 .. span->n). */
int tf_core_span_sum(const tf_core_span *span, double *out);
