/* SPDX-License-Identifier: MIT */
/* core: status codes, thread-local errors, build facts, CPU features, self-tests.
 * Trimmed mirror of csrc/tensorffi.h (section "core"). */

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

enum { TF_SIMD_SCALAR = 0, TF_SIMD_AVX2 = 1, TF_SIMD_AVX512 = 2 };

/* Message of the last error raised on the calling thread ("" if none). */
const char *tf_last_error(void);
void tf_clear_error(void);

/* Package version compiled into the module (checked at import). */
const char *tf_version(void);
const char *tf_build_compiler(void);
const char *tf_build_flags(void);
int tf_build_native(void);

/* Best SIMD level of this CPU (capped by TENSORFFI_SIMD=scalar|avx2|avx512). */
int tf_simd_level(void);
const char *tf_simd_name(int level);
int tf_cpu_count(void);

/* The thread runtime: where a run of `threads` threads would get them now (0 inline,
 * 1 tensorffi's own pool, 2 the host OpenMP team), and the size of the own pool. */
int tf_runtime_backend(int threads);
int tf_runtime_pool_size(void);

/* The bridge's native call path: adds NativeCall to the Python module `module`. */
int tf_bridge_install(const char *module);

/* Bridge self-test kernels. */
void tf_core_scale_f32(float *x, int64_t n, float a);
void tf_core_axpy_f64(const double *x, double *y, int64_t n, double a);
/* out[r] = sum_c a[r * lda + c]: a BLAS-style strided read. */
int tf_core_rowsum_f64(const double *a, int64_t rows, int64_t cols, int64_t lda, double *out);
int tf_core_iota_i64(int64_t *x, int64_t n);
void tf_core_spin_ms(int ms);
/* y[i] = a * x[i], on up to nthreads threads (tf_parallel_for). */
int tf_core_scaled_f32(const float *x, float *y, int64_t n, float a, int nthreads);

/* Waits (spinning, GIL released) until *flag != 0; TF_EINTERRUPTED after timeout_ms.
 * Another Python thread can only set the flag if this call released the GIL. */
int tf_core_wait_flag(const int32_t *flag, int timeout_ms);

typedef struct tf_core_span {
    const float *data;
    int64_t n;
} tf_core_span;
int tf_core_span_sum(const tf_core_span *span, double *out);
