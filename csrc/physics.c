/* SPDX-License-Identifier: MIT */
/* physics.c — batched n-body integration (softened gravity), energy and momentum.
 *
 * One call advances b independent systems by many steps. The user's state is AoS
 * ([b][n][3]); during a step it lives in a padded SoA scratch copy that the force
 * kernels read, and the user's pos and vel are written once per step, when the step
 * is complete (so they always hold the state after a whole number of steps: what a
 * progress callback sees, and what a stopped run leaves).
 *
 * Threads come from the thread runtime (runtime.c), only as many as the work pays for
 * (TF_PHYS_MIN_WORK pair interactions per thread; fewer: the calling thread alone):
 *   - "systems" mode, many systems: one phase whose units are whole systems (all their
 *     steps); a unit passes a checkpoint after every step;
 *   - "shared" mode, few large systems: every step's forces are one phase of units
 *     (chunks of rows of equal pair counts, or blocks of bodies); the O(n) work between
 *     force phases (kick, drift, writing pos and vel) is the caller's.
 * Leapfrog is kick-drift-kick with two half kicks per step (the state is synchronised
 * at every step boundary). Progress and cancellation go through the runtime: the
 * callback runs on the calling thread while no other thread touches the caller's
 * memory, and a stop leaves every system after a whole step.
 *
 * Force kernels (physics_simd.h, AVX2+FMA and AVX-512, chosen at run time by
 * tf_simd_level(), and a portable one): an all-pairs kernel vectorised along i, a
 * pair-once "row" kernel (Newton's third law, tiled over j) for systems of
 * TF_PHYS_ROWS_MIN bodies or more, and for batches a pair-once "lanes" kernel that
 * runs one system per vector lane (systems mode, groups of as many systems as a
 * vector has lanes). The float kernels use the hardware reciprocal
 * square root with one Newton step (relative error ~1e-7), the double ones sqrt and a
 * division. A pair at exactly zero distance exerts no force (see physics_simd.h).
 */
#define _GNU_SOURCE
#define TF_INTERNAL
#include "tensorffi.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define TF_PHYS_X86 1
#include <immintrin.h>
#else
#define TF_PHYS_X86 0
#endif

#define TF_PHYS_STR2(x) #x
#define TF_PHYS_STR(x) TF_PHYS_STR2(x)

/* Padding of the SoA arrays and the unit of the body split: the largest block of any
 * kernel (32 floats, AVX-512), so that unit boundaries never cut a block. */
#define TF_PHYS_PAD 32
/* Pair interactions (one direction, all steps) a thread must get to be worth its
 * start and its share of the end of every phase (measured: benchmarks/RESULTS.md). */
#define TF_PHYS_MIN_WORK 200000.0
/* ...and, when bodies of one system are split, per thread and step. */
#define TF_PHYS_MIN_STEP_WORK 40000.0
/* Systems of at least this many bodies use the row kernel (each pair once). */
#define TF_PHYS_ROWS_MIN 128
/* Batches of at least lw systems (a vector's lanes) of at most this many bodies run
 * lw systems side by side, one per lane (the "lanes" kernel: each pair once, no masks).
 * Measured on Zen 4 (AVX-512, one thread), against one system at a time: 64 x 64
 * bodies 1.23x, 64 x 100 1.7x, 1024 x 16 2.5x, 32 x 512 1.06x, 16 x 1024 1.03x; beyond,
 * its rows no longer fit the L2 cache, where the row kernel's tiles fit L1. */
#define TF_PHYS_LANES_MAX 1024
/* Seconds between progress reports (and Ctrl-C checks). */
#define TF_PHYS_REPORT_S 0.1

typedef struct {
    int threads, shared;
} tf_phys_plan;

/* Threads, and whether they share the bodies of each system (few large systems) or
 * take whole systems (many). */
static tf_phys_plan tf_phys_make_plan(int64_t b, int64_t n, int64_t steps, int nthreads) {
    tf_phys_plan p = {1, 0};
    double work = (double)b * (double)n * (double)n * ((double)steps + 1.0);
    int64_t t = tf_rt_threads_for(work, TF_PHYS_MIN_WORK, nthreads);
    if (t <= 1) return p;
    int64_t blocks = (n + TF_PHYS_PAD - 1) / TF_PHYS_PAD;
    int shared_ok = blocks >= t && (double)n * (double)n / (double)t >= TF_PHYS_MIN_STEP_WORK;
    if (b >= t && (b % t == 0 || b >= 4 * t || !shared_ok)) {
        p.threads = (int)t;
    } else if (shared_ok) {
        p.threads = (int)t;
        p.shared = 1;
    } else {
        p.threads = (int)(b < t ? b : t);
    }
    return p;
}

typedef struct {
    _Atomic int64_t steps; /* system-steps completed by one thread (systems mode) */
    char pad[64 - sizeof(int64_t)];
} tf_phys_slot;

/* Steps completed by every system, on average (systems mode progress). */
static int64_t tf_phys_done_systems(tf_phys_slot *slots, int threads, int64_t b) {
    int64_t sum = 0;
    for (int t = 0; t < threads; t++) sum += atomic_load_explicit(&slots[t].steps, memory_order_relaxed);
    return sum / (b > 0 ? b : 1);
}

/* The SIMD level the force kernels of elements of `size` bytes run at. */
static int tf_phys_level(size_t size) {
    (void)size;
    return tf_simd_level();
}

int tf_physics_simd(void) { return tf_phys_level(sizeof(float)); }

static void *tf_phys_alloc(size_t bytes) {
    size_t rounded = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, rounded ? rounded : 64);
}

static void tf_phys_free(void *p) { free(p); }

/* ======================================================================== */
/* Potential energy (double precision, all element types)                   */
/* ======================================================================== */

typedef double (*tf_phys_pot_row_fn)(const double *x, const double *y, const double *z, const double *m,
                                     int64_t n, int64_t i, double eps2);

typedef struct {
    const double *soa; /* per system: x | y | z | m, each n long */
    int64_t n, rows;
    double eps2;
    double *partial;
    tf_phys_pot_row_fn row;
} tf_phys_pot;

static tf_phys_pot_row_fn tf_phys_pick_pot_row(void);

/* m_i * sum_{j > i} m_j / sqrt(r_ij^2 + eps^2); a pair with r^2 + eps^2 = 0 (two
 * bodies at the same place, no softening) is left out, as it is from the forces. */
static double tf_phys_pot_row(const double *x, const double *y, const double *z, const double *m,
                              int64_t n, int64_t i, double eps2) {
    const double xi = x[i], yi = y[i], zi = z[i];
    double acc[4] = {0, 0, 0, 0};
    int64_t j = i + 1;
    for (; j + 4 <= n; j += 4) {
        for (int k = 0; k < 4; k++) {
            double dx = x[j + k] - xi, dy = y[j + k] - yi, dz = z[j + k] - zi;
            double r2 = dx * dx + dy * dy + dz * dz + eps2;
            acc[k] += r2 == 0 ? 0.0 : m[j + k] / sqrt(r2);
        }
    }
    for (; j < n; j++) {
        double dx = x[j] - xi, dy = y[j] - yi, dz = z[j] - zi;
        double r2 = dx * dx + dy * dy + dz * dz + eps2;
        acc[0] += r2 == 0 ? 0.0 : m[j] / sqrt(r2);
    }
    return m[i] * ((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

/* Item r of a system covers rows r and n-1-r: every item has ~n pairs. */
static int tf_phys_pot_range(void *arg, int64_t begin, int64_t end) {
    tf_phys_pot *p = (tf_phys_pot *)arg;
    const int64_t n = p->n;
    for (int64_t item = begin; item < end; item++) {
        const int64_t s = item / p->rows, r = item % p->rows;
        const double *x = p->soa + s * 4 * n, *y = x + n, *z = y + n, *m = z + n;
        double v = p->row(x, y, z, m, n, r, p->eps2);
        if (n - 1 - r != r) v += p->row(x, y, z, m, n, n - 1 - r, p->eps2);
        p->partial[item] = v;
    }
    return TF_OK;
}

static int tf_phys_potential(const double *soa, int64_t b, int64_t n, double eps2, int nthreads, double *out) {
    tf_phys_pot p = {soa, n, (n + 1) / 2, eps2, NULL, tf_phys_pick_pot_row()};
    p.partial = malloc((size_t)(b * p.rows) * sizeof(double));
    if (!p.partial) return TF_ENOMEM;
    int64_t min_items = 200000 / (n > 0 ? n : 1);
    int rc = tf_parallel_for(b * p.rows, nthreads, min_items > 0 ? min_items : 1, tf_phys_pot_range, &p);
    for (int64_t s = 0; s < b; s++) {
        double v = 0;
        for (int64_t r = 0; r < p.rows; r++) v += p.partial[s * p.rows + r];
        out[s] = v;
    }
    free(p.partial);
    return rc;
}

/* ======================================================================== */
/* Vectorised force kernels                                                 */
/* ======================================================================== */

#if TF_PHYS_X86

#define K_CAT2(a, b) a##b
#define K_CAT(a, b) K_CAT2(a, b)

/* The macros every instantiation undefines afterwards. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

static inline __m256 tf_phys_inv3_avx2_ps(__m256 r2, __m256 m) {
    /* y ~ r2^-1/2 to 12 bits; u = y (3 - r2 y^2) = 2 y' after one Newton step, so
     * m y'^3 = m u^3 / 8 (the 1/8 is applied to the sums). */
    __m256 y = _mm256_rsqrt_ps(r2);
    __m256 u = _mm256_mul_ps(y, _mm256_fnmadd_ps(_mm256_mul_ps(r2, y), y, _mm256_set1_ps(3.0f)));
    return _mm256_mul_ps(_mm256_mul_ps(u, u), _mm256_mul_ps(m, u));
}

static inline __m256 tf_phys_rcube_avx2_ps(__m256 r2) {
    /* 8 r2^-3/2 (the row kernel's sums are scaled by 1/8 afterwards) */
    __m256 y = _mm256_rsqrt_ps(r2);
    __m256 u = _mm256_mul_ps(y, _mm256_fnmadd_ps(_mm256_mul_ps(r2, y), y, _mm256_set1_ps(3.0f)));
    return _mm256_mul_ps(_mm256_mul_ps(u, u), u);
}

/* f where row < j < n for the lanes j = jb + l, else 0. */
static inline __m256 tf_phys_tri_mask_avx2_ps(__m256 f, int64_t jb, int64_t row, int64_t n) {
    __m256i j = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)jb));
    __m256i ok = _mm256_and_si256(_mm256_cmpgt_epi32(j, _mm256_set1_epi32((int)row)),
                                  _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), j));
    return _mm256_and_ps(f, _mm256_castsi256_ps(ok));
}

static inline __m256d tf_phys_tri_mask_avx2_pd(__m256d f, int64_t jb, int64_t row, int64_t n) {
    __m256i j = _mm256_add_epi64(_mm256_setr_epi64x(0, 1, 2, 3), _mm256_set1_epi64x(jb));
    __m256i ok = _mm256_and_si256(_mm256_cmpgt_epi64(j, _mm256_set1_epi64x(row)),
                                  _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), j));
    return _mm256_and_pd(f, _mm256_castsi256_pd(ok));
}

static inline float tf_phys_hsum_avx2_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline double tf_phys_hsum_avx2_pd(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* The potential's row sum (see tf_phys_pot_row), four pairs at a time. */
static double tf_phys_pot_row_avx2(const double *x, const double *y, const double *z, const double *m, int64_t n,
                                   int64_t i, double eps2) {
    const __m256d xi = _mm256_set1_pd(x[i]), yi = _mm256_set1_pd(y[i]), zi = _mm256_set1_pd(z[i]);
    const __m256d veps2 = _mm256_set1_pd(eps2), zero = _mm256_setzero_pd();
    __m256d acc = zero;
    int64_t j = i + 1;
    for (; j + 4 <= n; j += 4) {
        __m256d dx = _mm256_sub_pd(_mm256_loadu_pd(x + j), xi), dy = _mm256_sub_pd(_mm256_loadu_pd(y + j), yi);
        __m256d dz = _mm256_sub_pd(_mm256_loadu_pd(z + j), zi);
        __m256d r2 = _mm256_fmadd_pd(dz, dz, _mm256_fmadd_pd(dy, dy, _mm256_fmadd_pd(dx, dx, veps2)));
        __m256d q = _mm256_div_pd(_mm256_loadu_pd(m + j), _mm256_sqrt_pd(r2));
        acc = _mm256_add_pd(acc, _mm256_and_pd(q, _mm256_cmp_pd(r2, zero, _CMP_NEQ_UQ)));
    }
    double s = tf_phys_hsum_avx2_pd(acc);
    for (; j < n; j++) {
        double dx = x[j] - x[i], dy = y[j] - y[i], dz = z[j] - z[i];
        double r2 = dx * dx + dy * dy + dz * dz + eps2;
        s += r2 == 0 ? 0.0 : m[j] / sqrt(r2);
    }
    return m[i] * s;
}

#define K_NAME tf_phys_force_avx2_f32
#define K_SYM_NAME tf_phys_rows_avx2_f32
#define K_REAL float
#define K_VEC __m256
#define K_W 8
#define K_SET1(s) _mm256_set1_ps(s)
#define K_ZERO() _mm256_setzero_ps()
#define K_LOAD(p) _mm256_load_ps(p)
#define K_STORE(p, v) _mm256_store_ps((p), (v))
#define K_SUB(a, b) _mm256_sub_ps((a), (b))
#define K_ADD(a, b) _mm256_add_ps((a), (b))
#define K_MUL(a, b) _mm256_mul_ps((a), (b))
#define K_FMADD(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define K_FNMADD(a, b, c) _mm256_fnmadd_ps((a), (b), (c))
#define K_INV3(r2, m) tf_phys_inv3_avx2_ps((r2), (m))
#define K_RCUBE(r2) tf_phys_rcube_avx2_ps(r2)
#define K_ACC_SCALE 0.125f
#define K_KEEP_NONZERO(v, d2) _mm256_and_ps((v), _mm256_cmp_ps((d2), _mm256_setzero_ps(), _CMP_NEQ_UQ))
#define K_TRI_MASK(f, jb, row, n) tf_phys_tri_mask_avx2_ps((f), (jb), (row), (n))
#define K_HSUM(v) tf_phys_hsum_avx2_ps(v)
#define K_ROW_PAIRS 0
#define K_I_VECS 1
#include "physics_simd.h"

#define K_NAME tf_phys_force_avx2_f64
#define K_SYM_NAME tf_phys_rows_avx2_f64
#define K_REAL double
#define K_VEC __m256d
#define K_W 4
#define K_SET1(s) _mm256_set1_pd(s)
#define K_ZERO() _mm256_setzero_pd()
#define K_LOAD(p) _mm256_load_pd(p)
#define K_STORE(p, v) _mm256_store_pd((p), (v))
#define K_SUB(a, b) _mm256_sub_pd((a), (b))
#define K_ADD(a, b) _mm256_add_pd((a), (b))
#define K_MUL(a, b) _mm256_mul_pd((a), (b))
#define K_FMADD(a, b, c) _mm256_fmadd_pd((a), (b), (c))
#define K_FNMADD(a, b, c) _mm256_fnmadd_pd((a), (b), (c))
#define K_INV3(r2, m) _mm256_div_pd((m), _mm256_mul_pd((r2), _mm256_sqrt_pd(r2)))
#define K_RCUBE(r2) _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_mul_pd((r2), _mm256_sqrt_pd(r2)))
#define K_ACC_SCALE 1.0
#define K_KEEP_NONZERO(v, d2) _mm256_and_pd((v), _mm256_cmp_pd((d2), _mm256_setzero_pd(), _CMP_NEQ_UQ))
#define K_TRI_MASK(f, jb, row, n) tf_phys_tri_mask_avx2_pd((f), (jb), (row), (n))
#define K_HSUM(v) tf_phys_hsum_avx2_pd(v)
#define K_ROW_PAIRS 0
#define K_I_VECS 1
#include "physics_simd.h"

#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512dq,avx512bw,avx512vl"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512dq,avx512bw,avx512vl")
#endif

static inline __m512 tf_phys_inv3_avx512_ps(__m512 r2, __m512 m) {
    /* rsqrt14 is good to 14 bits; one Newton step as in the AVX2 kernel. */
    __m512 y = _mm512_rsqrt14_ps(r2);
    __m512 u = _mm512_mul_ps(y, _mm512_fnmadd_ps(_mm512_mul_ps(r2, y), y, _mm512_set1_ps(3.0f)));
    return _mm512_mul_ps(_mm512_mul_ps(u, u), _mm512_mul_ps(m, u));
}

static inline __m512 tf_phys_rcube_avx512_ps(__m512 r2) {
    __m512 y = _mm512_rsqrt14_ps(r2);
    __m512 u = _mm512_mul_ps(y, _mm512_fnmadd_ps(_mm512_mul_ps(r2, y), y, _mm512_set1_ps(3.0f)));
    return _mm512_mul_ps(_mm512_mul_ps(u, u), u);
}

static inline __m512 tf_phys_tri_mask_avx512_ps(__m512 f, int64_t jb, int64_t row, int64_t n) {
    __m512i j = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                 _mm512_set1_epi32((int)jb));
    __mmask16 ok = _mm512_cmpgt_epi32_mask(j, _mm512_set1_epi32((int)row)) &
                   _mm512_cmpgt_epi32_mask(_mm512_set1_epi32((int)n), j);
    return _mm512_maskz_mov_ps(ok, f);
}

static inline __m512d tf_phys_tri_mask_avx512_pd(__m512d f, int64_t jb, int64_t row, int64_t n) {
    __m512i j = _mm512_add_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64(jb));
    __mmask8 ok = _mm512_cmpgt_epi64_mask(j, _mm512_set1_epi64(row)) & _mm512_cmpgt_epi64_mask(_mm512_set1_epi64(n), j);
    return _mm512_maskz_mov_pd(ok, f);
}

static double tf_phys_pot_row_avx512(const double *x, const double *y, const double *z, const double *m,
                                     int64_t n, int64_t i, double eps2) {
    const __m512d xi = _mm512_set1_pd(x[i]), yi = _mm512_set1_pd(y[i]), zi = _mm512_set1_pd(z[i]);
    const __m512d veps2 = _mm512_set1_pd(eps2), zero = _mm512_setzero_pd();
    __m512d acc = zero;
    for (int64_t j = i + 1; j < n; j += 8) {
        const __mmask8 live = n - j >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - j)) - 1);
        __m512d dx = _mm512_sub_pd(_mm512_maskz_loadu_pd(live, x + j), xi);
        __m512d dy = _mm512_sub_pd(_mm512_maskz_loadu_pd(live, y + j), yi);
        __m512d dz = _mm512_sub_pd(_mm512_maskz_loadu_pd(live, z + j), zi);
        __m512d r2 = _mm512_fmadd_pd(dz, dz, _mm512_fmadd_pd(dy, dy, _mm512_fmadd_pd(dx, dx, veps2)));
        __m512d q = _mm512_div_pd(_mm512_maskz_loadu_pd(live, m + j), _mm512_sqrt_pd(r2));
        acc = _mm512_mask_add_pd(acc, live & _mm512_cmp_pd_mask(r2, zero, _CMP_NEQ_UQ), acc, q);
    }
    return m[i] * _mm512_reduce_add_pd(acc);
}

#define K_NAME tf_phys_force_avx512_f32
#define K_SYM_NAME tf_phys_rows_avx512_f32
#define K_REAL float
#define K_VEC __m512
#define K_W 16
#define K_SET1(s) _mm512_set1_ps(s)
#define K_ZERO() _mm512_setzero_ps()
#define K_LOAD(p) _mm512_load_ps(p)
#define K_STORE(p, v) _mm512_store_ps((p), (v))
#define K_SUB(a, b) _mm512_sub_ps((a), (b))
#define K_ADD(a, b) _mm512_add_ps((a), (b))
#define K_MUL(a, b) _mm512_mul_ps((a), (b))
#define K_FMADD(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define K_FNMADD(a, b, c) _mm512_fnmadd_ps((a), (b), (c))
#define K_INV3(r2, m) tf_phys_inv3_avx512_ps((r2), (m))
#define K_RCUBE(r2) tf_phys_rcube_avx512_ps(r2)
#define K_ACC_SCALE 0.125f
#define K_KEEP_NONZERO(v, d2) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((d2), _mm512_setzero_ps(), _CMP_NEQ_UQ), (v))
#define K_TRI_MASK(f, jb, row, n) tf_phys_tri_mask_avx512_ps((f), (jb), (row), (n))
#define K_HSUM(v) _mm512_reduce_add_ps(v)
#define K_ROW_PAIRS 1
#define K_I_VECS 2
#include "physics_simd.h"

#define K_NAME tf_phys_force_avx512_f64
#define K_SYM_NAME tf_phys_rows_avx512_f64
#define K_REAL double
#define K_VEC __m512d
#define K_W 8
#define K_SET1(s) _mm512_set1_pd(s)
#define K_ZERO() _mm512_setzero_pd()
#define K_LOAD(p) _mm512_load_pd(p)
#define K_STORE(p, v) _mm512_store_pd((p), (v))
#define K_SUB(a, b) _mm512_sub_pd((a), (b))
#define K_ADD(a, b) _mm512_add_pd((a), (b))
#define K_MUL(a, b) _mm512_mul_pd((a), (b))
#define K_FMADD(a, b, c) _mm512_fmadd_pd((a), (b), (c))
#define K_FNMADD(a, b, c) _mm512_fnmadd_pd((a), (b), (c))
#define K_INV3(r2, m) _mm512_div_pd((m), _mm512_mul_pd((r2), _mm512_sqrt_pd(r2)))
#define K_RCUBE(r2) _mm512_div_pd(_mm512_set1_pd(1.0), _mm512_mul_pd((r2), _mm512_sqrt_pd(r2)))
#define K_ACC_SCALE 1.0
#define K_KEEP_NONZERO(v, d2) _mm512_maskz_mov_pd(_mm512_cmp_pd_mask((d2), _mm512_setzero_pd(), _CMP_NEQ_UQ), (v))
#define K_TRI_MASK(f, jb, row, n) tf_phys_tri_mask_avx512_pd((f), (jb), (row), (n))
#define K_HSUM(v) _mm512_reduce_add_pd(v)
#define K_ROW_PAIRS 1
#define K_I_VECS 2
#include "physics_simd.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif /* TF_PHYS_X86 */

static tf_phys_pot_row_fn tf_phys_pick_pot_row(void) {
#if TF_PHYS_X86
    switch (tf_phys_level(sizeof(double))) {
    case TF_SIMD_AVX512: return tf_phys_pot_row_avx512;
    case TF_SIMD_AVX2: return tf_phys_pot_row_avx2;
    default: break;
    }
#endif
    return tf_phys_pot_row;
}

/* ======================================================================== */
/* The entry points, once per element type                                  */
/* ======================================================================== */

#define P_REAL float
#define P_SFX f32
#define P_SQRT sqrtf
#include "physics_impl.h"

#define P_REAL double
#define P_SFX f64
#define P_SQRT sqrt
#include "physics_impl.h"
