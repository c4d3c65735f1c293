/* SPDX-License-Identifier: MIT */
/* core.c — build facts, CPU feature detection and the bridge's self-test kernels
 * (the error plumbing is error.c, the thread runtime runtime.c). */
#define _GNU_SOURCE
#define TF_INTERNAL
#include "tensorffi.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef TF_VERSION_STR
#error "TF_VERSION_STR must be defined by build_ffi.py"
#endif
#ifndef TF_COMPILER_STR
#define TF_COMPILER_STR "unknown"
#endif
#ifndef TF_FLAGS_STR
#define TF_FLAGS_STR ""
#endif
#ifndef TF_NATIVE_BUILD
#define TF_NATIVE_BUILD 0
#endif

const char *tf_version(void) { return TF_VERSION_STR; }
/* The compiler that compiled this file, from its own predefined macros (the build's
 * $CC may be a wrapper or a path); TF_COMPILER_STR is what build_ffi.py ran. */
const char *tf_build_compiler(void) {
#define TF_STR2(x) #x
#define TF_STR(x) TF_STR2(x)
#if defined(__clang__)
    return "clang " TF_STR(__clang_major__) "." TF_STR(__clang_minor__) "." TF_STR(__clang_patchlevel__) " (" TF_COMPILER_STR ")";
#elif defined(__GNUC__)
    return "gcc " __VERSION__ " (" TF_COMPILER_STR ")";
#else
    return TF_COMPILER_STR;
#endif
}
const char *tf_build_flags(void) { return TF_FLAGS_STR; }
int tf_build_native(void) { return TF_NATIVE_BUILD; }

static int tf_simd_detect(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return TF_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return TF_SIMD_AVX2;
#endif
    return TF_SIMD_SCALAR;
}

int tf_simd_level(void) {
    /* Recomputed per call (cheap) rather than cached: no global mutable state. */
    int level = tf_simd_detect();
    const char *cap = getenv("TENSORFFI_SIMD");
    if (cap && cap[0]) {
        int want = level;
        if (strcmp(cap, "scalar") == 0) want = TF_SIMD_SCALAR;
        else if (strcmp(cap, "avx2") == 0) want = TF_SIMD_AVX2;
        else if (strcmp(cap, "avx512") == 0) want = TF_SIMD_AVX512;
        if (want < level) level = want;
    }
    return level;
}

const char *tf_simd_name(int level) {
    switch (level) {
    case TF_SIMD_AVX512: return "avx512";
    case TF_SIMD_AVX2: return "avx2";
    default: return "scalar";
    }
}

int tf_cpu_count(void) {
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- bridge self-test kernels ------------------------------------------ */

void tf_core_scale_f32(float *x, int64_t n, float a) {
    for (int64_t i = 0; i < n; i++) x[i] *= a;
}

void tf_core_axpy_f64(const double *x, double *y, int64_t n, double a) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

int tf_core_rowsum_f64(const double *a, int64_t rows, int64_t cols, int64_t lda, double *out) {
    if (rows < 0 || cols < 0)
        return tf_error(TF_ESHAPE, "tf_core_rowsum_f64: negative size (rows=%lld, cols=%lld)",
                        (long long)rows, (long long)cols);
    if (rows > 1 && lda < cols)
        return tf_error(TF_EINVAL, "tf_core_rowsum_f64: lda=%lld is smaller than cols=%lld",
                        (long long)lda, (long long)cols);
    for (int64_t r = 0; r < rows; r++) {
        double s = 0.0;
        for (int64_t c = 0; c < cols; c++) s += a[r * lda + c];
        out[r] = s;
    }
    return TF_OK;
}

int tf_core_iota_i64(int64_t *x, int64_t n) {
    if (n < 0) return tf_error(TF_EINVAL, "tf_core_iota_i64: n must be >= 0, got %lld", (long long)n);
    for (int64_t i = 0; i < n; i++) x[i] = i;
    return TF_OK;
}

void tf_core_spin_ms(int ms) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t sink = 0;
    for (;;) {
        for (int i = 0; i < 1000; i++) {
            sink += (uint64_t)i;
            __asm__ volatile("" : "+r"(sink)); /* keeps the loop: it is the point */
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        double el = (double)(t.tv_sec - t0.tv_sec) * 1e3 + (double)(t.tv_nsec - t0.tv_nsec) * 1e-6;
        if (el >= ms) break;
    }
}

int tf_core_wait_flag(const int32_t *flag, int timeout_ms) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        double el = (double)(t.tv_sec - t0.tv_sec) * 1e3 + (double)(t.tv_nsec - t0.tv_nsec) * 1e-6;
        if (el >= timeout_ms)
            return tf_error(TF_EINTERRUPTED, "tf_core_wait_flag: flag not set within %d ms", timeout_ms);
    }
    return TF_OK;
}

typedef struct {
    const float *x;
    float *y;
    float a;
} tf_scaled_ctx;

static int tf_scaled_range(void *ctx, int64_t begin, int64_t end) {
    const tf_scaled_ctx *c = (const tf_scaled_ctx *)ctx;
    for (int64_t i = begin; i < end; i++) c->y[i] = c->a * c->x[i];
    return TF_OK;
}

int tf_core_scaled_f32(const float *x, float *y, int64_t n, float a, int nthreads) {
    if (n < 0) return tf_error(TF_EINVAL, "tf_core_scaled_f32: n must be >= 0, got %lld", (long long)n);
    if (nthreads < 1)
        return tf_error(TF_EINVAL, "tf_core_scaled_f32: nthreads must be >= 1, got %d", nthreads);
    tf_scaled_ctx ctx = {x, y, a};
    return tf_parallel_for(n, nthreads, 1 << 14, tf_scaled_range, &ctx);
}

int tf_core_span_sum(const tf_core_span *span, double *out) {
    if (!span || (!span->data && span->n > 0))
        return tf_error(TF_EINVAL, "tf_core_span_sum: span has no data");
    double s = 0.0;
    for (int64_t i = 0; i < span->n; i++) s += span->data[i];
    *out = s;
    return TF_OK;
}

int tf_core_count(int64_t total, int64_t steps, tf_progress_fn fn, void *handle, int64_t *reached) {
    if (total < 0 || steps <= 0)
        return tf_error(TF_EINVAL, "tf_core_count: need total >= 0 and steps > 0");
    int64_t done = 0;
    *reached = 0;
    for (int64_t s = 1; s <= steps; s++) {
        done = total * s / steps;
        *reached = done;
        if (fn && fn(handle, done, total) != 0)
            return tf_error(TF_EINTERRUPTED, "tf_core_count: stopped at %lld of %lld",
                            (long long)done, (long long)total);
    }
    return TF_OK;
}
