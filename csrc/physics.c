/* SPDX-License-Identifier: MIT */
/* physics.c — batched n-body integration (softened gravity), energy and momentum.
 *
 * One call advances b independent systems by many steps. The state is AoS as the user
 * holds it ([b][n][3]); every step the positions are also written to a padded SoA copy
 * that the force kernels read (double-buffered: a step's updates write the buffer the
 * step's forces do not read).
 *
 * Threads are started once per call (detached; their shared state is freed by the
 * last one out, so the caller never waits for a thread that got no work):
 *   - "systems" mode, many systems: a thread takes whole systems, one at a time, and
 *     runs all their steps; no synchronisation;
 *   - "shared" mode, few large systems: every step is a force phase and an update
 *     phase of small units that whoever is free takes; the thread that finishes a
 *     phase's last unit opens the next one. Waiting threads spin ~50 us, then sleep.
 * Progress and cancellation: only the calling thread (thread 0) calls the callback.
 * A stop request ends shared mode with the step whose update phase opens next, so
 * all systems stop at the same step; in systems mode each system stops at its own
 * next step boundary.
 *
 * Force kernels (physics_simd.h, AVX2+FMA and AVX-512, chosen at run time by
 * tf_simd_level(), and a portable one): an all-pairs kernel vectorised along i, and a
 * pair-once "row" kernel (Newton's third law) for systems of TF_PHYS_ROWS_MIN bodies
 * or more. The float kernels use the hardware reciprocal square root with one Newton
 * step (relative error ~1e-7), the double ones sqrt and a division.
 */
#define _GNU_SOURCE
#define TF_INTERNAL
#include "tensorffi.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define TF_PHYS_X86 1
#include <immintrin.h>
#else
#define TF_PHYS_X86 0
#endif

#define TF_PHYS_STR2(x) #x
#define TF_PHYS_STR(x) TF_PHYS_STR2(x)

/* Padding of the SoA arrays and the unit of the body split: the largest block of any
 * kernel (32 floats, AVX-512), so that thread boundaries never cut a block. */
#define TF_PHYS_PAD 32
#define TF_PHYS_MAX_THREADS 256
/* A thread is worth starting for this many pair interactions in the whole call... */
#define TF_PHYS_MIN_WORK 200000.0
/* ...and, when bodies are split, for this many per thread and step (a phase change
 * costs a few microseconds). */
#define TF_PHYS_MIN_STEP_WORK 40000.0
/* Systems of at least this many bodies use the row kernel (each pair once). */
#define TF_PHYS_ROWS_MIN 128
/* Seconds between progress reports (and Ctrl-C checks). */
#define TF_PHYS_REPORT_S 0.1
/* Seconds a waiting thread spins before it sleeps. */
#define TF_PHYS_SPIN_S 50e-6

/* ======================================================================== */
/* Threads, phases, progress                                                */
/* ======================================================================== */

typedef struct {
    _Atomic int64_t steps; /* completed by one thread: steps (shared), system-steps (systems) */
    char pad[64 - sizeof(int64_t)];
} tf_phys_slot;

/* One call's threads and their protocol. It lives in a heap block (with the
 * per-type context and jobs) freed by the last thread out, so the caller returns as
 * soon as the work is done without waiting for threads that never got any (a thread
 * that starts late on a busy machine finds no work left and just leaves). */
typedef struct {
    /* fixed before the threads are released */
    int shared, threads;
    int64_t systems, steps;
    int (*fn)(void *, int64_t, int64_t);
    void *handle;
    tf_phys_slot *done;
    void *base; /* the allocation this lives in */
    /* shared between threads */
    _Atomic int go;   /* futex word: 1 once the threads may start */
    _Atomic int refs; /* the caller plus the threads that have not left */
    /* systems mode */
    _Atomic int64_t next_system; /* the next system nobody has taken */
    _Atomic int64_t remaining;   /* systems not finished */
    _Atomic int finished;        /* futex word: 1 once remaining reached 0 */
    _Atomic int64_t stop_after;  /* -1, or >= 0 once a stop was requested */
    /* shared mode: phases of work units */
    _Atomic int64_t open_phase;  /* the phase whose units may be taken; INT64_MAX: done */
    _Atomic int open_seq;        /* futex word: bumped whenever a phase opens */
    _Atomic int64_t claim;       /* (phase & 0x7fffffff) << 32 | next unit of that phase */
    _Atomic int64_t phase_done;  /* units of the open phase finished */
    _Atomic int stop_requested;
    _Atomic int64_t steps_done;
    /* thread 0 only */
    double next_report;
    int interrupted;
    int64_t stopped_at;
} tf_phys_control;

typedef struct {
    int threads, shared;
    int64_t blocks;
} tf_phys_plan;

static double tf_phys_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void tf_phys_cpu_relax(void) {
#if TF_PHYS_X86
    __builtin_ia32_pause();
#endif
}

/* Sleep while *word == value (or until `seconds` pass, if > 0); spurious wake-ups are
 * fine, callers re-check. Without futexes: yield. */
static void tf_phys_sleep_on(_Atomic int *word, int value, double seconds) {
#if defined(__linux__)
    struct timespec ts, *timeout = NULL;
    if (seconds > 0) {
        ts.tv_sec = (time_t)seconds;
        ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
        timeout = &ts;
    }
    syscall(SYS_futex, (int *)word, FUTEX_WAIT_PRIVATE, value, timeout, NULL, 0);
#else
    (void)word;
    (void)value;
    (void)seconds;
    sched_yield();
#endif
}

static void tf_phys_wake_all(_Atomic int *word) {
#if defined(__linux__)
    syscall(SYS_futex, (int *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

/* Wait until *word != value: spin for a few microseconds (the usual case on an idle
 * machine), then sleep, so that a waiting thread gives its core to a thread that
 * was preempted (a busy machine, or torch's OpenMP threads still spinning). */
static void tf_phys_await_change(_Atomic int *word, int value) {
    double until = 0;
    for (unsigned spins = 0; atomic_load(word) == value; spins++) {
        if ((spins & 255) == 255) {
            double now = tf_phys_now();
            if (until == 0) until = now + TF_PHYS_SPIN_S;
            else if (now > until) break;
        }
        tf_phys_cpu_relax();
    }
    if (atomic_load(word) == value) {
        while (atomic_load(word) == value) tf_phys_sleep_on(word, value, 0);
    }
}

/* Shared mode: take the next of the `units` units of `phase`, or -1 if none is left
 * (or the phase is over). The phase tag and the unit are one atomic word, and the
 * limit is the caller's own count for that phase, so a thread that is late for a
 * phase can never take a unit of it that does not exist. */
static int64_t tf_phys_grab(tf_phys_control *c, int64_t phase, int64_t units) {
    const int64_t tag = (phase & 0x7fffffff) << 32;
    int64_t v = atomic_load(&c->claim);
    for (;;) {
        if ((v & ~(int64_t)0xffffffff) != tag) return -1;
        int64_t unit = v & 0xffffffff;
        if (unit >= units) return -1;
        if (atomic_compare_exchange_weak(&c->claim, &v, v + 1)) return unit;
    }
}

/* Shared mode: open `phase` (INT64_MAX: the run is over). Called
 * by the thread that finished the previous phase's last unit, so nobody else touches
 * the counters now; the release store of open_phase publishes them. */
static void tf_phys_open_phase(tf_phys_control *c, int64_t phase) {
    atomic_store(&c->phase_done, 0);
    atomic_store(&c->claim, (phase & 0x7fffffff) << 32);
    atomic_store(&c->open_phase, phase);
    atomic_fetch_add(&c->open_seq, 1);
    tf_phys_wake_all(&c->open_seq);
}

static void tf_phys_finish_one(tf_phys_control *c, int64_t count) {
    if (count > 0 && atomic_fetch_sub(&c->remaining, count) == count) {
        atomic_store(&c->finished, 1);
        tf_phys_wake_all(&c->finished);
    }
}

/* The last thread out frees the block the control lives in. */
static void tf_phys_leave(tf_phys_control *c) {
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) free(c->base);
}

/* Steps completed by every system (an estimate in systems mode, exact at the end). */
static int64_t tf_phys_min_done(tf_phys_control *c) {
    int64_t m = INT64_MAX, sum = 0;
    for (int t = 0; t < c->threads; t++) {
        int64_t d = atomic_load_explicit(&c->done[t].steps, memory_order_relaxed);
        if (d < m) m = d;
        sum += d;
    }
    if (c->shared) return atomic_load(&c->steps_done);
    (void)m;
    return sum / (c->systems > 0 ? c->systems : 1);
}

/* Called by thread 0 only. On a stop request, shared mode ends with the step whose
 * update phase opens next; in systems mode each thread stops after its current step
 * and the systems nobody has taken yet are withdrawn. */
static void tf_phys_report(tf_phys_control *c, int64_t stop_at, int force) {
    if (!c->fn || c->interrupted) return;
    double now = tf_phys_now();
    if (!force && now < c->next_report) return;
    c->next_report = now + TF_PHYS_REPORT_S;
    if (c->fn(c->handle, tf_phys_min_done(c), c->steps) != 0) {
        c->interrupted = 1;
        atomic_store(&c->stop_requested, 1);
        atomic_store(&c->stop_after, stop_at);
        if (!c->shared) {
            int64_t taken = atomic_exchange(&c->next_system, INT64_MAX / 2);
            if (taken < c->systems) tf_phys_finish_one(c, c->systems - taken);
        }
    }
}

static tf_phys_plan tf_phys_make_plan(int64_t b, int64_t n, int64_t steps, int nthreads) {
    tf_phys_plan p = {1, 0, (n + TF_PHYS_PAD - 1) / TF_PHYS_PAD};
    if (nthreads > TF_PHYS_MAX_THREADS) nthreads = TF_PHYS_MAX_THREADS;
    int64_t t = nthreads < 1 ? 1 : nthreads;
    double work = (double)b * (double)n * (double)n * ((double)steps + 1.0);
    if (work / TF_PHYS_MIN_WORK < (double)t) t = (int64_t)(work / TF_PHYS_MIN_WORK);
    if (t <= 1) return p;
    int shared_ok = p.blocks >= t && (double)n * (double)n / (double)t >= TF_PHYS_MIN_STEP_WORK;
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

static void *tf_phys_alloc(size_t bytes) {
    size_t rounded = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, rounded ? rounded : 64);
}

static void tf_phys_free(void *p) { free(p); }

/* Start up to plan->threads - 1 detached threads on `jobs` (thread t gets jobs +
 * t * job_size; the plan is updated if fewer could be started), run job 0 here, then
 * wait for the work (not the threads) to finish, reporting progress. Returns
 * TF_EINTERRUPTED if the callback asked to stop. The control is left (and maybe
 * freed) before returning; its results are copied out first. */
static int tf_phys_run(tf_phys_control *c, tf_phys_plan *plan, void *(*thread_fn)(void *), void *jobs,
                       size_t job_size, int64_t *stopped_at) {
    pthread_attr_t attr;
    int have_attr = plan->threads > 1 && pthread_attr_init(&attr) == 0 &&
                    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0;
    int started = 1;
    atomic_init(&c->go, 0);
    for (int t = 1; have_attr && t < plan->threads; t++) {
        pthread_t tid;
        if (pthread_create(&tid, &attr, thread_fn, (char *)jobs + (size_t)t * job_size) != 0) break;
        started++;
    }
    if (have_attr) pthread_attr_destroy(&attr);
    if (started < plan->threads) {
        plan->threads = started;
        if (started == 1) plan->shared = 0;
    }
    c->shared = plan->shared;
    c->threads = plan->threads;
    atomic_init(&c->refs, plan->threads);
    atomic_init(&c->next_system, 0);
    atomic_init(&c->remaining, c->shared ? 0 : c->systems);
    atomic_init(&c->finished, c->shared);
    atomic_init(&c->stop_after, -1);
    atomic_init(&c->stop_requested, 0);
    atomic_init(&c->steps_done, 0);
    atomic_init(&c->open_seq, 0);
    atomic_init(&c->phase_done, 0);
    atomic_init(&c->claim, 0);
    atomic_init(&c->open_phase, 0);
    for (int t = 0; t < plan->threads; t++) atomic_init(&c->done[t].steps, 0);
    c->interrupted = 0;
    c->next_report = tf_phys_now() + TF_PHYS_REPORT_S;

    atomic_store(&c->go, 1);
    if (started > 1) tf_phys_wake_all(&c->go);
    thread_fn(jobs); /* job 0 (shared mode: returns when the last phase is done) */
    while (!atomic_load(&c->finished)) { /* systems mode: others finish their systems */
        if (c->fn) {
            tf_phys_sleep_on(&c->finished, 0, TF_PHYS_REPORT_S);
            tf_phys_report(c, 0, 0);
        } else {
            tf_phys_await_change(&c->finished, 0);
        }
    }
    *stopped_at = tf_phys_min_done(c);
    int interrupted = c->interrupted;
    if (c->fn && !interrupted) c->fn(c->handle, c->steps, c->steps); /* the bar ends full */
    tf_phys_leave(c);
    return interrupted ? TF_EINTERRUPTED : TF_OK;
}

/* ======================================================================== */
/* Potential energy (double precision, all element types)                   */
/* ======================================================================== */

typedef struct {
    const double *soa; /* per system: x | y | z | m, each n long */
    int64_t n, rows;
    double eps2;
    double *partial;
} tf_phys_pot;

/* m_i * sum_{j > i} m_j / sqrt(r_ij^2 + eps^2). */
static double tf_phys_pot_row(const double *x, const double *y, const double *z, const double *m,
                              int64_t n, int64_t i, double eps2) {
    const double xi = x[i], yi = y[i], zi = z[i];
    double acc[4] = {0, 0, 0, 0};
    int64_t j = i + 1;
    for (; j + 4 <= n; j += 4) {
        for (int k = 0; k < 4; k++) {
            double dx = x[j + k] - xi, dy = y[j + k] - yi, dz = z[j + k] - zi;
            acc[k] += m[j + k] / sqrt(dx * dx + dy * dy + dz * dz + eps2);
        }
    }
    for (; j < n; j++) {
        double dx = x[j] - xi, dy = y[j] - yi, dz = z[j] - zi;
        acc[0] += m[j] / sqrt(dx * dx + dy * dy + dz * dz + eps2);
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
        double v = tf_phys_pot_row(x, y, z, m, n, r, p->eps2);
        if (n - 1 - r != r) v += tf_phys_pot_row(x, y, z, m, n, n - 1 - r, p->eps2);
        p->partial[item] = v;
    }
    return TF_OK;
}

static int tf_phys_potential(const double *soa, int64_t b, int64_t n, double eps2, int nthreads, double *out) {
    tf_phys_pot p = {soa, n, (n + 1) / 2, eps2, NULL};
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

static inline __m256 tf_phys_zero_lane_avx2_ps(__m256 v, int lane) {
    __m256i hit = _mm256_cmpeq_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(lane));
    return _mm256_andnot_ps(_mm256_castsi256_ps(hit), v);
}

static inline __m256d tf_phys_zero_lane_avx2_pd(__m256d v, int lane) {
    __m256i hit = _mm256_cmpeq_epi64(_mm256_setr_epi64x(0, 1, 2, 3), _mm256_set1_epi64x(lane));
    return _mm256_andnot_pd(_mm256_castsi256_pd(hit), v);
}

#define K_NAME tf_phys_force_avx2_f32
#define K_REAL float
#define K_VEC __m256
#define K_W 8
#define K_SET1(s) _mm256_set1_ps(s)
#define K_ZERO() _mm256_setzero_ps()
#define K_LOAD(p) _mm256_load_ps(p)
#define K_STORE(p, v) _mm256_store_ps((p), (v))
#define K_SUB(a, b) _mm256_sub_ps((a), (b))
#define K_MUL(a, b) _mm256_mul_ps((a), (b))
#define K_FMADD(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define K_INV3(r2, m) tf_phys_inv3_avx2_ps((r2), (m))
#define K_ACC_SCALE 0.125f
#define K_ZERO_LANE(v, l) tf_phys_zero_lane_avx2_ps((v), (l))
#define K_SYM_NAME tf_phys_rows_avx2_f32
#define K_FNMADD(a, b, c) _mm256_fnmadd_ps((a), (b), (c))
#define K_RCUBE(r2) tf_phys_rcube_avx2_ps(r2)
#define K_TRI_MASK(f, jb, row, n) tf_phys_tri_mask_avx2_ps((f), (jb), (row), (n))
#define K_HSUM(v) tf_phys_hsum_avx2_ps(v)
#include "physics_simd.h"
#undef K_NAME
#undef K_REAL
#undef K_VEC
#undef K_W
#undef K_SET1
#undef K_ZERO
#undef K_LOAD
#undef K_STORE
#undef K_SUB
#undef K_MUL
#undef K_FMADD
#undef K_INV3
#undef K_ACC_SCALE
#undef K_ZERO_LANE
#undef K_SYM_NAME
#undef K_FNMADD
#undef K_RCUBE
#undef K_TRI_MASK
#undef K_HSUM

#define K_NAME tf_phys_force_avx2_f64
#define K_REAL double
#define K_VEC __m256d
#define K_W 4
#define K_SET1(s) _mm256_set1_pd(s)
#define K_ZERO() _mm256_setzero_pd()
#define K_LOAD(p) _mm256_load_pd(p)
#define K_STORE(p, v) _mm256_store_pd((p), (v))
#define K_SUB(a, b) _mm256_sub_pd((a), (b))
#define K_MUL(a, b) _mm256_mul_pd((a), (b))
#define K_FMADD(a, b, c) _mm256_fmadd_pd((a), (b), (c))
#define K_INV3(r2, m) _mm256_div_pd((m), _mm256_mul_pd((r2), _mm256_sqrt_pd(r2)))
#define K_ACC_SCALE 1.0
#define K_ZERO_LANE(v, l) tf_phys_zero_lane_avx2_pd((v), (l))
#define K_SYM_NAME tf_phys_rows_avx2_f64
#define K_FNMADD(a, b, c) _mm256_fnmadd_pd((a), (b), (c))
#define K_RCUBE(r2) _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_mul_pd((r2), _mm256_sqrt_pd(r2)))
#define K_TRI_MASK(f, jb, row, n) tf_phys_tri_mask_avx2_pd((f), (jb), (row), (n))
#define K_HSUM(v) tf_phys_hsum_avx2_pd(v)
#include "physics_simd.h"
#undef K_NAME
#undef K_REAL
#undef K_VEC
#undef K_W
#undef K_SET1
#undef K_ZERO
#undef K_LOAD
#undef K_STORE
#undef K_SUB
#undef K_MUL
#undef K_FMADD
#undef K_INV3
#undef K_ACC_SCALE
#undef K_ZERO_LANE
#undef K_SYM_NAME
#undef K_FNMADD
#undef K_RCUBE
#undef K_TRI_MASK
#undef K_HSUM

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

#define K_NAME tf_phys_force_avx512_f32
#define K_REAL float
#define K_VEC __m512
#define K_W 16
#define K_SET1(s) _mm512_set1_ps(s)
#define K_ZERO() _mm512_setzero_ps()
#define K_LOAD(p) _mm512_load_ps(p)
#define K_STORE(p, v) _mm512_store_ps((p), (v))
#define K_SUB(a, b) _mm512_sub_ps((a), (b))
#define K_MUL(a, b) _mm512_mul_ps((a), (b))
#define K_FMADD(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define K_INV3(r2, m) tf_phys_inv3_avx512_ps((r2), (m))
#define K_ACC_SCALE 0.125f
#define K_ZERO_LANE(v, l) _mm512_maskz_mov_ps((__mmask16)~(1u << (l)), (v))
#define K_SYM_NAME tf_phys_rows_avx512_f32
#define K_FNMADD(a, b, c) _mm512_fnmadd_ps((a), (b), (c))
#define K_RCUBE(r2) tf_phys_rcube_avx512_ps(r2)
#define K_TRI_MASK(f, jb, row, n) tf_phys_tri_mask_avx512_ps((f), (jb), (row), (n))
#define K_HSUM(v) _mm512_reduce_add_ps(v)
#include "physics_simd.h"
#undef K_NAME
#undef K_REAL
#undef K_VEC
#undef K_W
#undef K_SET1
#undef K_ZERO
#undef K_LOAD
#undef K_STORE
#undef K_SUB
#undef K_MUL
#undef K_FMADD
#undef K_INV3
#undef K_ACC_SCALE
#undef K_ZERO_LANE
#undef K_SYM_NAME
#undef K_FNMADD
#undef K_RCUBE
#undef K_TRI_MASK
#undef K_HSUM

#define K_NAME tf_phys_force_avx512_f64
#define K_REAL double
#define K_VEC __m512d
#define K_W 8
#define K_SET1(s) _mm512_set1_pd(s)
#define K_ZERO() _mm512_setzero_pd()
#define K_LOAD(p) _mm512_load_pd(p)
#define K_STORE(p, v) _mm512_store_pd((p), (v))
#define K_SUB(a, b) _mm512_sub_pd((a), (b))
#define K_MUL(a, b) _mm512_mul_pd((a), (b))
#define K_FMADD(a, b, c) _mm512_fmadd_pd((a), (b), (c))
#define K_INV3(r2, m) _mm512_div_pd((m), _mm512_mul_pd((r2), _mm512_sqrt_pd(r2)))
#define K_ACC_SCALE 1.0
#define K_ZERO_LANE(v, l) _mm512_maskz_mov_pd((__mmask8)~(1u << (l)), (v))
#define K_SYM_NAME tf_phys_rows_avx512_f64
#define K_FNMADD(a, b, c) _mm512_fnmadd_pd((a), (b), (c))
#define K_RCUBE(r2) _mm512_div_pd(_mm512_set1_pd(1.0), _mm512_mul_pd((r2), _mm512_sqrt_pd(r2)))
#define K_TRI_MASK(f, jb, row, n) tf_phys_tri_mask_avx512_pd((f), (jb), (row), (n))
#define K_HSUM(v) _mm512_reduce_add_pd(v)
#include "physics_simd.h"
#undef K_NAME
#undef K_REAL
#undef K_VEC
#undef K_W
#undef K_SET1
#undef K_ZERO
#undef K_LOAD
#undef K_STORE
#undef K_SUB
#undef K_MUL
#undef K_FMADD
#undef K_INV3
#undef K_ACC_SCALE
#undef K_ZERO_LANE
#undef K_SYM_NAME
#undef K_FNMADD
#undef K_RCUBE
#undef K_TRI_MASK
#undef K_HSUM

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif /* TF_PHYS_X86 */

/* ======================================================================== */
/* The entry points, once per element type                                  */
/* ======================================================================== */

#define P_REAL float
#define P_SFX f32
#define P_SQRT sqrtf
#include "physics_impl.h"
#undef P_REAL
#undef P_SFX
#undef P_SQRT

#define P_REAL double
#define P_SFX f64
#define P_SQRT sqrt
#include "physics_impl.h"
#undef P_REAL
#undef P_SFX
#undef P_SQRT
