/* SPDX-License-Identifier: MIT */
/* runtime.c — the one thread runtime of tensorffi's kernels (signal, physics, parse).
 *
 * A kernel describes its parallel work as a *driver* that runs on the calling thread
 * (tf_rt_run) and opens *phases* of independent work units (tf_rt_phase). Units are
 * handed out one at a time from a shared counter, so a thread that shares its core
 * with someone else simply takes fewer of them; the caller works too, and a phase
 * ends when its last unit is done. Small calls (nthreads == 1) run inline: no thread,
 * no allocation, no atomics beyond a few relaxed loads.
 *
 * Progress and cancellation. Only the calling thread calls the progress callback
 * (tf_rt_report), and only at a quiescent point: it first raises `pause`, then waits
 * until no other thread is inside a unit (threads park at tf_rt_checkpoint or before
 * taking their next unit), calls the callback, and releases them. So while the
 * callback runs Python — which may resize or free a tensor that C writes — no worker
 * touches the caller's memory. A non-zero answer sets `stop` before the workers are
 * released: no unit starts afterwards, units in progress return at their next
 * checkpoint without touching caller memory, and the callback is not called again.
 * The first unit that fails (non-zero status) also stops the run; its status and
 * message (copied from the failing thread's error buffer) are the run's.
 *
 * Threads. A run's helpers come from one of two places:
 *   - the host's OpenMP runtime, when the process has one loaded (PyTorch's libgomp:
 *     torch is always imported with tensorffi), the call is not already inside a
 *     parallel region, no fork happened since it was loaded, and the run wants no more
 *     threads than the host's team size (omp_get_max_threads() of the calling thread).
 *     The run then executes inside GOMP_parallel with that team size: the helpers are
 *     torch's own intra-op threads. After every torch op those threads spin for several
 *     milliseconds waiting for more work; threads of our own would have to share cores
 *     with them (a call between torch ops lost half its speed), whereas this way the
 *     spinning threads pick our work up at once and torch's next op finds them spinning.
 *   - otherwise our own pool: workers created on demand, kept idle (asleep on a futex)
 *     between runs. Waking a sleeping worker costs ~8 us here against ~30-50 us to
 *     create a thread (benchmarks/RESULTS.md, physics section), which matters for
 *     calls of 0.1-1 ms. TENSORFFI_POOL=own forces the pool, TENSORFFI_POOL=openmp
 *     the host team wherever it is usable (tests use both).
 *
 * Process-wide state (a deliberate exception to DESIGN.md's "no global mutable state"):
 * the pool's idle list and its mutex, the host OpenMP entry points (looked up once),
 * and a flag set in a forked child. A pool is process-wide by nature: its purpose is
 * that threads outlive the calls. It stays safe because (1) everything a run shares
 * lives in the run's own heap block (reference-counted: a worker that is woken late
 * finds the run over and leaves, and the caller never waits for a worker that got no
 * work); (2) the pool is only touched under its mutex, so any number of threads may
 * start runs at once (each gets the idle workers there are, or new ones, never waits
 * for one); (3) fork: pthread_atfork holds the mutex across fork() and the child
 * starts with an empty pool (its parent's workers do not exist there) and never uses
 * the host OpenMP runtime (libgomp hangs in a child whose parent had used a team).
 */
#define _GNU_SOURCE
#define TF_INTERNAL
#include "tensorffi.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#include <dlfcn.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#define TF_RT_LINUX 1
#else
#define TF_RT_LINUX 0
#endif

#define TF_RT_MAX_THREADS 256
/* The own pool never holds more threads than this (concurrent runs beyond it get
 * fewer helpers; results never depend on how many helpers a run gets). */
#define TF_RT_POOL_MAX 512
/* Seconds a waiting thread spins before it sleeps: a phase usually opens (or ends)
 * within microseconds on an idle machine; on a busy one sleeping gives the core to a
 * thread that has work. */
#define TF_RT_SPIN_S 50e-6
/* TF_RT_OMP_SLOW_RUNS host OpenMP runs in a row whose start and end cost more than
 * TF_RT_OMP_SLOW_S plus a tenth of their work send the runs of the next
 * TF_RT_OMP_BACKOFF_S seconds to the own pool. One slow run is not enough: a helper
 * that lost its CPU for one time slice (another process's spinning thread, e.g.
 * OpenBLAS's after a NumPy call) made one 150 us n-body run end 110 us late, and the
 * second of own-pool runs that followed lost more than that (torch's team, woken by
 * every compiled step between our calls, spins where the pool's worker would run:
 * batch of 64 x 64 bodies 190-300 us a step instead of 115).
 * libgomp's waits spin for milliseconds before they sleep: when the machine is busy
 * (more runnable threads than cores), a team thread that has no core keeps the whole
 * team waiting, and one step of n-body at N = 1024 took 19 ms instead of 0.4 ms
 * (benchmarks/RESULTS.md); our own waits sleep after 50 us. */
#define TF_RT_OMP_SLOW_S 60e-6
#define TF_RT_OMP_BACKOFF_S 1.0
#define TF_RT_OMP_SLOW_RUNS 2
/* Seconds an idle pool worker spins for the next run before it sleeps. */
#define TF_RT_IDLE_SPIN_S 20e-6
/* Default seconds between progress reports. */
#define TF_RT_REPORT_S 0.1
/* The claim word: phase tag (24 bits) << 40 | next unit (40 bits). */
#define TF_RT_UNIT_BITS 40
#define TF_RT_UNIT_MASK ((INT64_C(1) << TF_RT_UNIT_BITS) - 1)
#define TF_RT_TAG_MASK ((INT64_C(1) << 23) - 1)

/* ======================================================================== */
/* Small portable pieces                                                    */
/* ======================================================================== */

static double tf_rt_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void tf_rt_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Sleep while *word == value, at most `seconds` (<= 0: no limit). Spurious wake-ups
 * are fine: callers re-check. */
static void tf_rt_sleep(_Atomic int *word, int value, double seconds) {
#if TF_RT_LINUX
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

static void tf_rt_wake(_Atomic int *word) {
#if TF_RT_LINUX
    syscall(SYS_futex, (int *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

/* Spin for up to TF_RT_SPIN_S while *word == value; returns 1 if it changed. */
static int tf_rt_spin(_Atomic int *word, int value, double spin_s) {
    double until = 0;
    for (unsigned i = 0; atomic_load_explicit(word, memory_order_acquire) == value; i++) {
        if ((i & 127) == 127) {
            double now = tf_rt_now();
            if (until == 0) until = now + spin_s;
            else if (now > until) return 0;
        }
        tf_rt_relax();
    }
    return 1;
}

/* ======================================================================== */
/* A run                                                                    */
/* ======================================================================== */

typedef struct {
    _Alignas(64) _Atomic int64_t v;
} tf_rt_line;

struct tf_rt {
    /* fixed for the run */
    int threads; /* threads that may take part, the caller included */
    int team;    /* 0: inline (the caller alone) */
    tf_progress_fn fn;
    void *handle;
    int64_t (*done_fn)(void *ctx);
    void *done_ctx;
    int64_t total;
    double interval;
    int (*driver)(tf_rt *rt, void *ctx);
    void *driver_ctx;
    void *block; /* the heap block this run lives in (team runs) */
    double t_start, t_end; /* host OpenMP runs: when the driver started and ended */
    /* the caller's own */
    double next_report;
    int64_t phase;
    int driver_status;
    /* the open phase; unit_fn and unit_ctx are read only after a successful claim */
    _Atomic(tf_rt_unit_fn) unit_fn;
    _Atomic(void *) unit_ctx;
    tf_rt_line limit;    /* tag << 40 | units */
    tf_rt_line claim;    /* tag << 40 | next unit */
    tf_rt_line finished; /* units of the open phase done */
    _Alignas(64) _Atomic int seq; /* futex word: bumped when a phase opens or the run closes */
    _Atomic int closed;
    _Atomic int sleepers;     /* workers asleep on seq */
    _Atomic int done_word;    /* futex word: bumped when a unit ends a phase (or ends after a stop) */
    _Atomic int caller_sleeps;
    /* quiescent points */
    _Alignas(64) _Atomic int running; /* futex word: workers inside a unit, not parked */
    _Atomic int pause;                /* futex word */
    _Atomic int stop;
    /* membership */
    _Alignas(64) _Atomic int joined; /* tids handed out; the caller is 0 */
    _Atomic int refs;                /* pool runs: the caller and the workers assigned */
    /* the first failure */
    _Atomic int err_lock;
    int status;
    int64_t err_unit;
    char errmsg[512];
};

/* The run the calling thread is the caller of (saved and restored around nested runs). */
static _Thread_local tf_rt *tf_rt_tls_caller;
/* Non-zero while this thread is a helper of a run: a run started from inside a unit
 * runs inline (the outer run already has the threads; more would only oversubscribe,
 * and a libgomp team started from a pool thread would create a pool of its own). */
static _Thread_local int tf_rt_tls_helper;

static int tf_rt_is_caller(const tf_rt *rt) { return tf_rt_tls_caller == rt; }

int tf_rt_threads(const tf_rt *rt) { return rt->threads; }

int tf_rt_stopped(const tf_rt *rt) { return atomic_load_explicit(&((tf_rt *)rt)->stop, memory_order_relaxed); }

/* Record a failure: the lowest failing unit's status and message win. */
static void tf_rt_fail(tf_rt *rt, int status, int64_t unit, const char *msg) {
    while (atomic_exchange_explicit(&rt->err_lock, 1, memory_order_acquire)) tf_rt_relax();
    if (rt->status == TF_OK || (unit >= 0 && rt->err_unit >= 0 && unit < rt->err_unit)) {
        rt->status = status;
        rt->err_unit = unit;
        snprintf(rt->errmsg, sizeof rt->errmsg, "%s", msg ? msg : "");
    }
    atomic_store_explicit(&rt->err_lock, 0, memory_order_release);
    atomic_store(&rt->stop, 1);
}

void tf_rt_stop(tf_rt *rt, int status) {
    tf_rt_fail(rt, status ? status : TF_EINTERRUPTED, -1, NULL);
    if (rt->team) {
        atomic_fetch_add(&rt->done_word, 1);
        tf_rt_wake(&rt->done_word);
    }
}

/* ---- quiescent points ---------------------------------------------------- */

static void tf_rt_leave_unit(tf_rt *rt) {
    atomic_fetch_sub(&rt->running, 1);
    if (atomic_load(&rt->pause)) tf_rt_wake(&rt->running);
}

/* Worker: count itself as running unless the caller is pausing; parks meanwhile. */
static void tf_rt_enter_unit(tf_rt *rt) {
    for (;;) {
        atomic_fetch_add(&rt->running, 1);
        if (!atomic_load(&rt->pause)) return;
        tf_rt_leave_unit(rt);
        while (atomic_load(&rt->pause)) tf_rt_sleep(&rt->pause, 1, 0);
    }
}

int tf_rt_checkpoint(tf_rt *rt) {
    if (rt->team && !tf_rt_is_caller(rt) && atomic_load_explicit(&rt->pause, memory_order_relaxed)) {
        tf_rt_leave_unit(rt);
        tf_rt_enter_unit(rt);
    }
    return atomic_load_explicit(&rt->stop, memory_order_relaxed);
}

static int tf_rt_report_at(tf_rt *rt, int64_t done, int force) {
    if (!rt->fn || !tf_rt_is_caller(rt)) return tf_rt_stopped(rt);
    if (tf_rt_stopped(rt)) return 1; /* never called again after a stop */
    double now = tf_rt_now();
    if (!force && now < rt->next_report) return 0;
    if (rt->team) { /* quiesce: every other thread out of its unit */
        atomic_store(&rt->pause, 1);
        int r;
        while ((r = atomic_load(&rt->running)) != 0)
            if (!tf_rt_spin(&rt->running, r, TF_RT_SPIN_S)) tf_rt_sleep(&rt->running, r, 0.01);
    }
    int answer = rt->fn(rt->handle, done, rt->total);
    if (answer != 0) tf_rt_stop(rt, TF_EINTERRUPTED); /* before the workers resume */
    if (rt->team) {
        atomic_store(&rt->pause, 0);
        tf_rt_wake(&rt->pause);
    }
    rt->next_report = tf_rt_now() + rt->interval;
    return answer != 0;
}

int tf_rt_report(tf_rt *rt, int64_t done, int force) { return tf_rt_report_at(rt, done, force); }

/* Reports the runtime makes by itself (between units, while waiting for a phase):
 * only for runs that said how to count progress (opts.done); the others report from
 * their driver, at points of their choosing. */
static void tf_rt_report_auto(tf_rt *rt) {
    if (rt->done_fn && rt->fn && tf_rt_now() >= rt->next_report) tf_rt_report_at(rt, rt->done_fn(rt->done_ctx), 1);
}

/* ---- phases -------------------------------------------------------------- */

/* Take the next unit of the open phase: 1 and *unit, or 0 if none is left. The tag
 * and the unit share one word, and the limit is read with its own tag, so a thread
 * that is late for a phase can never take a unit of it that does not exist. */
static int tf_rt_claim(tf_rt *rt, int64_t *unit) {
    for (;;) {
        int64_t lim = atomic_load_explicit(&rt->limit.v, memory_order_acquire);
        int64_t v = atomic_load_explicit(&rt->claim.v, memory_order_acquire);
        /* different tags: the caller is opening a phase right now; read again */
        while ((v >> TF_RT_UNIT_BITS) == (lim >> TF_RT_UNIT_BITS)) {
            if ((v & TF_RT_UNIT_MASK) >= (lim & TF_RT_UNIT_MASK)) return 0;
            if (atomic_compare_exchange_weak_explicit(&rt->claim.v, &v, v + 1, memory_order_acq_rel,
                                                      memory_order_acquire)) {
                *unit = v & TF_RT_UNIT_MASK;
                return 1;
            }
        }
    }
}

/* A unit is finished: the one that completes the phase (or any, after a stop) wakes
 * the caller. */
static void tf_rt_unit_done(tf_rt *rt, int64_t units) {
    int64_t f = atomic_fetch_add(&rt->finished.v, 1) + 1;
    if (f == units || atomic_load(&rt->stop)) {
        atomic_fetch_add(&rt->done_word, 1);
        if (atomic_load(&rt->caller_sleeps)) tf_rt_wake(&rt->done_word);
    }
}

/* Worker: take units of the open phase until there are none (or the run stops). */
static void tf_rt_work(tf_rt *rt, int tid) {
    for (;;) {
        tf_rt_enter_unit(rt);
        int64_t unit;
        if (atomic_load(&rt->stop) || !tf_rt_claim(rt, &unit)) {
            tf_rt_leave_unit(rt);
            return;
        }
        tf_rt_unit_fn fn = atomic_load_explicit(&rt->unit_fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&rt->unit_ctx, memory_order_relaxed);
        int64_t units = atomic_load_explicit(&rt->limit.v, memory_order_relaxed) & TF_RT_UNIT_MASK;
        tf_clear_error();
        int st = fn(ctx, unit, tid);
        if (st != TF_OK) tf_rt_fail(rt, st, unit, tf_last_error());
        tf_rt_unit_done(rt, units);
        tf_rt_leave_unit(rt);
    }
}

/* A helper's whole part in a run: join, then work every phase until the run closes. */
static void tf_rt_helper(tf_rt *rt) {
    int tid = atomic_fetch_add(&rt->joined, 1);
    if (tid >= rt->threads) return; /* the team is bigger than the run wants */
    for (;;) {
        int s = atomic_load_explicit(&rt->seq, memory_order_acquire);
        if (atomic_load(&rt->closed)) return;
        tf_rt_tls_helper++;
        tf_rt_work(rt, tid);
        tf_rt_tls_helper--;
        if (!tf_rt_spin(&rt->seq, s, TF_RT_SPIN_S)) {
            atomic_fetch_add(&rt->sleepers, 1);
            while (atomic_load(&rt->seq) == s) tf_rt_sleep(&rt->seq, s, 0);
            atomic_fetch_sub(&rt->sleepers, 1);
        }
    }
}

int tf_rt_phase(tf_rt *rt, int64_t units, tf_rt_unit_fn fn, void *ctx) {
    if (units <= 0 || tf_rt_stopped(rt)) return rt->status;
    if (!rt->team) {
        for (int64_t u = 0; u < units && !tf_rt_stopped(rt); u++) {
            int st = fn(ctx, u, 0);
            if (st != TF_OK) tf_rt_fail(rt, st, u, NULL);
            else tf_rt_report_auto(rt);
        }
        return rt->status;
    }
    if (units > TF_RT_UNIT_MASK) return tf_error(TF_EOVERFLOW, "tf_rt_phase: %lld units", (long long)units);
    /* open it (no helper is inside a unit now: the last phase's units are all done) */
    const int64_t tag = (++rt->phase & TF_RT_TAG_MASK) << TF_RT_UNIT_BITS;
    atomic_store_explicit(&rt->unit_fn, fn, memory_order_relaxed);
    atomic_store_explicit(&rt->unit_ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&rt->finished.v, 0, memory_order_relaxed);
    atomic_store_explicit(&rt->limit.v, tag | units, memory_order_release);
    atomic_store_explicit(&rt->claim.v, tag, memory_order_release);
    atomic_fetch_add(&rt->seq, 1); /* seq_cst, against the sleepers count */
    if (atomic_load(&rt->sleepers)) tf_rt_wake(&rt->seq);
    /* work here too */
    int64_t unit;
    while (!atomic_load(&rt->stop) && tf_rt_claim(rt, &unit)) {
        int st = fn(ctx, unit, 0);
        if (st != TF_OK) tf_rt_fail(rt, st, unit, tf_last_error());
        tf_rt_unit_done(rt, units);
        tf_rt_report_auto(rt);
    }
    /* wait for the units others took; after a stop, close the phase first so that no
     * unit starts any more, then wait for those already taken */
    int64_t target = units;
    int closed = 0;
    for (;;) {
        if (!closed && atomic_load(&rt->stop)) {
            int64_t v = atomic_load(&rt->claim.v);
            while ((v & TF_RT_UNIT_MASK) < units &&
                   !atomic_compare_exchange_weak(&rt->claim.v, &v, (v & ~TF_RT_UNIT_MASK) | units)) {
            }
            target = (v & TF_RT_UNIT_MASK) < units ? (v & TF_RT_UNIT_MASK) : units;
            closed = 1;
        }
        int w = atomic_load(&rt->done_word);
        if (atomic_load(&rt->finished.v) >= target) break;
        if (tf_rt_spin(&rt->done_word, w, TF_RT_SPIN_S)) continue;
        atomic_store(&rt->caller_sleeps, 1);
        if (atomic_load(&rt->finished.v) < target && !(atomic_load(&rt->stop) && !closed))
            tf_rt_sleep(&rt->done_word, w, rt->fn ? rt->interval : 0);
        atomic_store(&rt->caller_sleeps, 0);
        tf_rt_report_auto(rt);
    }
    return rt->status;
}

/* ======================================================================== */
/* Threads: the host's OpenMP runtime, or our own pool                      */
/* ======================================================================== */

typedef struct {
    void (*parallel)(void (*fn)(void *), void *data, unsigned nthreads, unsigned flags);
    int (*max_threads)(void);
    int (*in_parallel)(void);
} tf_rt_omp_api;

static tf_rt_omp_api tf_rt_omp;
static pthread_once_t tf_rt_omp_once = PTHREAD_ONCE_INIT;
static atomic_int tf_rt_forked; /* set in a forked child */
/* Until this time (CLOCK_MONOTONIC, ns) runs use the own pool: the host OpenMP team
 * was found slow to start or to finish (see tf_rt_omp_judge). A hint, never a
 * correctness matter: a stale or torn read only picks the other thread source. */
static _Atomic int64_t tf_rt_omp_slow_until;
/* Set by the first host OpenMP run, which is not judged: it may have created the team
 * (threads started, ~100 us). Judged slow, it sent the next second's runs to the own
 * pool while the new team's threads still spun on both CPUs after it, starving the
 * pool's worker: n-body (64 x 128 bodies, 4 steps) ran at one thread's speed for 1 s. */
static atomic_int tf_rt_omp_used;
/* Slow host OpenMP runs in a row (a hint, like tf_rt_omp_slow_until). */
static atomic_int tf_rt_omp_slow_streak;

static void tf_rt_omp_lookup(void) {
#if TF_RT_LINUX
    void *h = RTLD_DEFAULT;
    void *par = dlsym(h, "GOMP_parallel");
    if (!par) { /* loaded, but not into the global scope */
        h = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
        par = h ? dlsym(h, "GOMP_parallel") : NULL;
    }
    void *mt = par ? dlsym(h, "omp_get_max_threads") : NULL;
    void *ip = par ? dlsym(h, "omp_in_parallel") : NULL;
    if (par && mt && ip) {
        /* dlsym returns data pointers; the copy converts them without a cast warning */
        memcpy(&tf_rt_omp.parallel, &par, sizeof par);
        memcpy(&tf_rt_omp.max_threads, &mt, sizeof mt);
        memcpy(&tf_rt_omp.in_parallel, &ip, sizeof ip);
    }
#endif
}

/* The host OpenMP team size to run `threads` threads in, or 0 for our own pool. */
static int tf_rt_omp_team(int threads) {
    const char *pool = getenv("TENSORFFI_POOL");
    if (pool && strcmp(pool, "own") == 0) return 0;
    if (atomic_load_explicit(&tf_rt_forked, memory_order_relaxed)) return 0;
    pthread_once(&tf_rt_omp_once, tf_rt_omp_lookup);
    if (!tf_rt_omp.parallel) return 0;
    const int forced = pool && strcmp(pool, "openmp") == 0;
    if (!forced && tf_rt_now() * 1e9 < (double)atomic_load_explicit(&tf_rt_omp_slow_until, memory_order_relaxed))
        return 0;
    if (tf_rt_omp.in_parallel()) return -1; /* nested inside a parallel region: run inline */
    int m = tf_rt_omp.max_threads();
    return m >= threads ? m : 0;
}

/* ---- the pool ------------------------------------------------------------ */

typedef struct tf_rt_worker {
    _Atomic int wake;          /* futex word: bumped when a run is assigned */
    _Atomic(tf_rt *) rt;       /* the run to join */
    struct tf_rt_worker *next; /* in the idle list */
} tf_rt_worker;

static pthread_mutex_t tf_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static tf_rt_worker *tf_pool_idle;
static int tf_pool_size; /* workers alive (created and not lost to a fork) */

static void tf_rt_leave(tf_rt *rt) {
    if (atomic_fetch_sub_explicit(&rt->refs, 1, memory_order_acq_rel) == 1) free(rt->block);
}

static void *tf_pool_main(void *arg) {
    tf_rt_worker *w = (tf_rt_worker *)arg;
#if TF_RT_LINUX && defined(SCHED_BATCH)
    /* A woken worker must not preempt the thread that woke it: on a busy machine it
     * lands on the caller's core (no other is idle), takes every unit while the caller
     * waits for the core back, and two threads ran slower than one. SCHED_BATCH keeps
     * the fair share and drops the wake-up preemption (any thread may switch to it). */
    struct sched_param sp = {0};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
#endif
    for (;;) {
        tf_rt *rt = atomic_exchange(&w->rt, NULL);
        if (rt) {
            tf_rt_helper(rt);
            tf_rt_leave(rt);
        }
        int seen = atomic_load(&w->wake);
        pthread_mutex_lock(&tf_pool_lock);
        w->next = tf_pool_idle;
        tf_pool_idle = w;
        pthread_mutex_unlock(&tf_pool_lock);
        if (!tf_rt_spin(&w->wake, seen, TF_RT_IDLE_SPIN_S))
            while (atomic_load(&w->wake) == seen) tf_rt_sleep(&w->wake, seen, 0);
    }
    return NULL;
}

/* Give `want` workers to rt (rt->refs already counts them); returns how many it got. */
static int tf_pool_assign(tf_rt *rt, int want) {
    tf_rt_worker *got[TF_RT_MAX_THREADS];
    int n = 0;
    pthread_mutex_lock(&tf_pool_lock);
    while (n < want && tf_pool_idle) {
        got[n++] = tf_pool_idle;
        tf_pool_idle = tf_pool_idle->next;
    }
    pthread_mutex_unlock(&tf_pool_lock);
    for (int i = 0; i < n; i++) {
        atomic_store(&got[i]->rt, rt);
        atomic_fetch_add(&got[i]->wake, 1);
        tf_rt_wake(&got[i]->wake);
    }
    if (n == want) return n;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return n;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (; n < want; n++) {
        pthread_mutex_lock(&tf_pool_lock);
        int full = tf_pool_size >= TF_RT_POOL_MAX;
        pthread_mutex_unlock(&tf_pool_lock);
        if (full) break; /* many concurrent runs: this one makes do with fewer threads */
        tf_rt_worker *w = calloc(1, sizeof *w);
        if (!w) break;
        atomic_init(&w->rt, rt);
        pthread_t tid;
        if (pthread_create(&tid, &attr, tf_pool_main, w) != 0) {
            free(w);
            break;
        }
        pthread_mutex_lock(&tf_pool_lock);
        tf_pool_size++;
        pthread_mutex_unlock(&tf_pool_lock);
    }
    pthread_attr_destroy(&attr);
    return n;
}

static void tf_pool_prepare(void) { pthread_mutex_lock(&tf_pool_lock); }
static void tf_pool_parent(void) { pthread_mutex_unlock(&tf_pool_lock); }
static void tf_pool_child(void) {
    /* Only the forking thread exists here: the parent's workers are gone (their
     * blocks are left behind, a few bytes each). */
    pthread_mutex_init(&tf_pool_lock, NULL);
    tf_pool_idle = NULL;
    tf_pool_size = 0;
    atomic_store(&tf_rt_forked, 1);
}

__attribute__((constructor)) static void tf_rt_init(void) {
    pthread_atfork(tf_pool_prepare, tf_pool_parent, tf_pool_child);
}

int tf_runtime_pool_size(void) {
    pthread_mutex_lock(&tf_pool_lock);
    int n = tf_pool_size;
    pthread_mutex_unlock(&tf_pool_lock);
    return n;
}

/* ---- running a driver ---------------------------------------------------- */

static void tf_rt_omp_entry(void *arg) {
    tf_rt *rt = (tf_rt *)arg;
    if (tf_rt_is_caller(rt)) {
        rt->t_start = tf_rt_now();
        rt->driver_status = rt->driver(rt, rt->driver_ctx);
        rt->t_end = tf_rt_now();
        atomic_store(&rt->closed, 1);
        atomic_fetch_add(&rt->seq, 1);
        tf_rt_wake(&rt->seq);
    } else {
        tf_rt_helper(rt);
    }
}

static void tf_rt_init_run(tf_rt *rt, const tf_rt_opts *o, int threads, int team) {
    rt->threads = threads;
    rt->team = team;
    rt->fn = o->fn;
    rt->handle = o->handle;
    rt->done_fn = o->done;
    rt->done_ctx = o->done_ctx;
    rt->total = o->total;
    rt->interval = o->interval > 0 ? o->interval : TF_RT_REPORT_S;
    rt->next_report = tf_rt_now() + rt->interval;
    rt->err_unit = -1;
    atomic_init(&rt->joined, 1);
}

/* The caller's error buffer gets the run's first failure message. */
static int tf_rt_result(int driver_status, int status, const char *msg) {
    if (driver_status != TF_OK) return driver_status;
    if (status != TF_OK && msg[0]) return tf_error(status, "%s", msg);
    return status;
}

int tf_rt_run(const tf_rt_opts *o, int (*driver)(tf_rt *rt, void *ctx), void *ctx) {
    int threads = o->threads < 1 ? 1 : o->threads > TF_RT_MAX_THREADS ? TF_RT_MAX_THREADS : o->threads;
    tf_rt *saved = tf_rt_tls_caller;
    int omp = threads > 1 && !tf_rt_tls_helper ? tf_rt_omp_team(threads) : -1;
    if (threads == 1 || omp < 0) {
        tf_rt rt;
        memset(&rt, 0, sizeof rt);
        tf_rt_init_run(&rt, o, 1, 0);
        tf_rt_tls_caller = &rt;
        int st = driver(&rt, ctx);
        tf_rt_tls_caller = saved;
        return tf_rt_result(st, rt.status, rt.errmsg);
    }
    tf_rt *rt = aligned_alloc(64, (sizeof(tf_rt) + 63) / 64 * 64);
    if (!rt) return tf_error(TF_ENOMEM, "tf_rt_run: cannot allocate a run");
    memset(rt, 0, sizeof *rt);
    tf_rt_init_run(rt, o, threads, 1);
    rt->block = rt;
    rt->driver = driver;
    rt->driver_ctx = ctx;
    tf_rt_tls_caller = rt;
    if (omp > 0) {
        double t0 = tf_rt_now();
        tf_rt_omp.parallel(tf_rt_omp_entry, rt, (unsigned)omp, 0);
        double t1 = tf_rt_now(), overhead = (rt->t_start - t0) + (t1 - rt->t_end);
        if (!atomic_exchange_explicit(&tf_rt_omp_used, 1, memory_order_relaxed)) {
            /* the first run: not judged */
        } else if (overhead <= TF_RT_OMP_SLOW_S + 0.1 * (rt->t_end - rt->t_start)) {
            atomic_store_explicit(&tf_rt_omp_slow_streak, 0, memory_order_relaxed);
        } else if (atomic_fetch_add_explicit(&tf_rt_omp_slow_streak, 1, memory_order_relaxed) + 1 >=
                   TF_RT_OMP_SLOW_RUNS) {
            atomic_store_explicit(&tf_rt_omp_slow_streak, 0, memory_order_relaxed);
            atomic_store_explicit(&tf_rt_omp_slow_until, (int64_t)((t1 + TF_RT_OMP_BACKOFF_S) * 1e9),
                                  memory_order_relaxed);
        }
        tf_rt_tls_caller = saved;
        int st = tf_rt_result(rt->driver_status, rt->status, rt->errmsg);
        free(rt);
        return st;
    }
    atomic_init(&rt->refs, threads);
    int got = tf_pool_assign(rt, threads - 1);
    if (got < threads - 1) atomic_fetch_sub(&rt->refs, threads - 1 - got);
    int st = driver(rt, ctx);
    atomic_store(&rt->closed, 1);
    atomic_fetch_add(&rt->seq, 1);
    tf_rt_wake(&rt->seq);
    tf_rt_tls_caller = saved;
    st = tf_rt_result(st, rt->status, rt->errmsg);
    tf_rt_leave(rt);
    return st;
}

int tf_rt_threads_for(double work, double min_work_per_thread, int nthreads) {
    if (nthreads < 1) nthreads = 1;
    if (nthreads > TF_RT_MAX_THREADS) nthreads = TF_RT_MAX_THREADS;
    if (min_work_per_thread <= 0) return nthreads;
    double useful = work / min_work_per_thread;
    if (useful < 1) return 1;
    return useful < (double)nthreads ? (int)useful : nthreads;
}

/* ======================================================================== */
/* tf_parallel_for                                                          */
/* ======================================================================== */

typedef struct {
    tf_range_fn fn;
    void *ctx;
    int64_t n, units;
} tf_pfor;

static int tf_pfor_unit(void *arg, int64_t unit, int tid) {
    (void)tid;
    const tf_pfor *p = (const tf_pfor *)arg;
    int64_t begin = p->n * unit / p->units, end = p->n * (unit + 1) / p->units;
    return p->fn(p->ctx, begin, end);
}

static int tf_pfor_driver(tf_rt *rt, void *arg) {
    tf_pfor *p = (tf_pfor *)arg;
    return tf_rt_phase(rt, p->units, tf_pfor_unit, p);
}

int tf_parallel_for(int64_t n, int nthreads, int64_t min_per_thread, tf_range_fn fn, void *ctx) {
    if (n <= 0) return TF_OK;
    if (min_per_thread < 1) min_per_thread = 1;
    int threads = tf_rt_threads_for((double)n, (double)min_per_thread, nthreads);
    if (threads == 1) return fn(ctx, 0, n);
    /* About four units per thread: a thread that shares its core takes fewer. */
    int64_t units = (int64_t)threads * 4;
    if (units > n) units = n;
    tf_pfor p = {fn, ctx, n, units};
    tf_rt_opts o = {.threads = threads};
    return tf_rt_run(&o, tf_pfor_driver, &p);
}

/* ======================================================================== */
/* First touch of large outputs                                             */
/* ======================================================================== */

void tf_populate(void *ptr, int64_t bytes) {
#if TF_RT_LINUX
    if (!ptr || bytes < TF_POPULATE_MIN_BYTES) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), huge = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)ptr + page - 1) & ~(page - 1), hi = ((uintptr_t)ptr + (uintptr_t)bytes) & ~(page - 1);
    if (hi <= lo) return;
    /* Already there (memory reused from the heap, or written before)? Then nothing
     * to do: look at one page in the middle. */
    unsigned char in_core = 0;
    uintptr_t mid = (lo + (hi - lo) / 2) & ~(page - 1);
    if (mincore((void *)mid, page, &in_core) == 0 && (in_core & 1)) return;
    /* Fresh pages: ask for 2 MiB pages where THP is "madvise" (one fault per 2 MiB
     * instead of 512), then fault the range in here, in one system call, before the
     * threads start (threads faulting the same fresh mapping at once contend in the
     * kernel: two threads were 2-4x slower than one). */
    uintptr_t hlo = (lo + huge - 1) & ~(huge - 1), hhi = hi & ~(huge - 1);
    if (hhi > hlo) (void)madvise((void *)hlo, hhi - hlo, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
    if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) == 0) return;
#endif
    /* Linux < 5.14: one write fault per page; adding 0 keeps the contents. */
    for (uintptr_t p = lo; p < hi; p += page) __atomic_fetch_add((volatile char *)p, 0, __ATOMIC_RELAXED);
#else
    (void)ptr;
    (void)bytes;
#endif
}

/* ======================================================================== */
/* Introspection and the runtime's self-test                                */
/* ======================================================================== */

int tf_runtime_backend(int threads) {
    if (threads <= 1 || tf_rt_tls_helper) return 0;
    int omp = tf_rt_omp_team(threads > TF_RT_MAX_THREADS ? TF_RT_MAX_THREADS : threads);
    return omp < 0 ? 0 : omp > 0 ? 2 : 1;
}

typedef struct {
    int64_t *out;
    int64_t n, units, rounds, fail_from;
    int32_t *tids;
    _Atomic int64_t rounds_done;
    tf_rt *rt;
} tf_fill_test;

static int tf_fill_test_unit(void *arg, int64_t u, int tid) {
    tf_fill_test *f = (tf_fill_test *)arg;
    const int64_t b = f->n * u / f->units, e = f->n * (u + 1) / f->units;
    f->tids[u] = tid;
    if (f->fail_from >= 0 && u >= f->fail_from) return tf_error(TF_EINVAL, "unit %lld failed", (long long)u);
    for (int64_t r = 0; r < f->rounds; r++) {
        const int last = r + 1 == f->rounds;
        for (int64_t i = b; i < e; i++) f->out[i] = last ? 3 * i + 1 : -(r + 1);
        int64_t done = atomic_fetch_add(&f->rounds_done, 1) + 1;
        tf_rt_report(f->rt, done, 0);
        if (tf_rt_checkpoint(f->rt)) break;
    }
    return TF_OK;
}

static int64_t tf_fill_test_done(void *arg) { return atomic_load(&((tf_fill_test *)arg)->rounds_done); }

static int tf_fill_test_driver(tf_rt *rt, void *arg) {
    tf_fill_test *f = (tf_fill_test *)arg;
    f->rt = rt;
    int rc = tf_rt_phase(rt, f->units, tf_fill_test_unit, f);
    if (rc == TF_OK) tf_rt_report(rt, f->units * f->rounds, 1);
    return TF_OK;
}

int tf_core_parallel_fill(int64_t *out, int64_t n, int64_t units, int64_t rounds, int nthreads, int32_t *tids,
                          int64_t fail_from, int interval_ms, tf_progress_fn fn, void *handle) {
    if (n < 0 || units < 1 || rounds < 1 || nthreads < 1 || interval_ms < 0)
        return tf_error(TF_EINVAL, "tf_core_parallel_fill: need n >= 0, units >= 1, rounds >= 1, nthreads >= 1");
    tf_fill_test f = {out, n, units, rounds, fail_from, tids, 0, NULL};
    tf_rt_opts o = {.threads = nthreads, .fn = fn, .handle = handle, .done = tf_fill_test_done, .done_ctx = &f,
                    .total = units * rounds, .interval = interval_ms > 0 ? 1e-3 * interval_ms : 1e-9};
    int rc = tf_rt_run(&o, tf_fill_test_driver, &f);
    if (rc == TF_EINTERRUPTED)
        return tf_error(TF_EINTERRUPTED, "tf_core_parallel_fill: stopped after %lld of %lld rounds",
                        (long long)atomic_load(&f.rounds_done), (long long)(units * rounds));
    return rc;
}
