/* SPDX-License-Identifier: MIT */
/* physics_impl.h — the part of physics.c written once per element type. physics.c
 * includes it with P_REAL (float or double), P_SFX (f32 or f64) and P_SQRT defined.
 * Not a public header. */

#define P_CAT2(a, b) a##_##b
#define P_CAT(a, b) P_CAT2(a, b)
#define P(name) P_CAT(name, P_SFX)

typedef void (*P(tf_phys_force_fn))(const P_REAL *x, const P_REAL *y, const P_REAL *z,
                                      const P_REAL *gm, int64_t n, int64_t i0, int64_t i1,
                                      P_REAL eps2, P_REAL *ax, P_REAL *ay, P_REAL *az);

/* Portable force kernel (also the reference for the vectorised ones). */
static void P(tf_phys_force_scalar)(const P_REAL *x, const P_REAL *y, const P_REAL *z,
                                    const P_REAL *gm, int64_t n, int64_t i0, int64_t i1,
                                    P_REAL eps2, P_REAL *ax, P_REAL *ay, P_REAL *az) {
    if (i1 > n) i1 = n;
    for (int64_t i = i0; i < i1; i++) {
        const P_REAL xi = x[i], yi = y[i], zi = z[i];
        P_REAL sx = 0, sy = 0, sz = 0;
        for (int64_t j = 0; j < n; j++) {
            if (j == i) continue;
            P_REAL dx = x[j] - xi, dy = y[j] - yi, dz = z[j] - zi;
            P_REAL r2 = dx * dx + dy * dy + dz * dz + eps2;
            P_REAL s = gm[j] / (r2 * P_SQRT(r2));
            sx += s * dx;
            sy += s * dy;
            sz += s * dz;
        }
        ax[i] = sx;
        ay[i] = sy;
        az[i] = sz;
    }
}

/* The kernels of one SIMD level: `pairs` computes each body's sum over all others
 * (any range of bodies, complete sums); `rows` each pair once (see physics_simd.h),
 * into per-thread buffers summed afterwards and scaled by rows_scale. */
typedef struct {
    P(tf_phys_force_fn) pairs, rows;
    P_REAL rows_scale;
} P(tf_phys_kernels);

static P(tf_phys_kernels) P(tf_phys_pick_kernels)(void) {
    P(tf_phys_kernels) k = {P(tf_phys_force_scalar), NULL, 1};
#if TF_PHYS_X86
    int level = tf_simd_level();
    const P_REAL scale = sizeof(P_REAL) == sizeof(float) ? (P_REAL)0.125 : (P_REAL)1;
    if (level >= TF_SIMD_AVX512) k = (P(tf_phys_kernels)){P(tf_phys_force_avx512), P(tf_phys_rows_avx512), scale};
    else if (level >= TF_SIMD_AVX2) k = (P(tf_phys_kernels)){P(tf_phys_force_avx2), P(tf_phys_rows_avx2), scale};
#endif
    return k;
}

/* One call's shared state. Per system s, soa[k] holds x | y | z (each npad long) at
 * s * 3 * npad, acc holds ax | ay | az likewise, and gm holds G m at s * npad. The
 * row kernel adds into buffers of 3 * npad: one per thread in systems mode, one per
 * (system, chunk of rows) in shared mode. */
typedef struct {
    tf_phys_control ctl;
    P_REAL *pos, *vel, *traj;
    const P_REAL *mass;
    int64_t n, npad, frames, steps, rec, systems;
    int leapfrog;
    P_REAL dt, half_dt, eps2, G;
    P_REAL *soa[2], *acc, *gm, *bufs;
    P(tf_phys_kernels) k;
    int use_rows;
    /* shared mode: bodies in blocks of `blk` (nblk of them), forces in nforce units:
     * chunks of rows with equal numbers of pairs (row kernel) or body blocks */
    int64_t blk, nblk, nforce;
    int stage_last; /* the update phase now open ends the run (written by its opener) */
} P(tf_phys_ctx);

typedef struct {
    P(tf_phys_ctx) *ctx;
    int tid;
} P(tf_phys_job);

/* Positions of bodies [i0, i1) of system s into buffer `which` (and the pad lanes,
 * with the last body). */
static void P(tf_phys_scatter)(P(tf_phys_ctx) *c, int which, int64_t s, int64_t i0, int64_t i1) {
    P_REAL *x = c->soa[which] + s * 3 * c->npad, *y = x + c->npad, *z = y + c->npad;
    const P_REAL *p = c->pos + s * c->n * 3;
    for (int64_t i = i0; i < i1; i++) {
        x[i] = p[3 * i];
        y[i] = p[3 * i + 1];
        z[i] = p[3 * i + 2];
    }
    if (i1 == c->n)
        for (int64_t i = c->n; i < c->npad; i++) x[i] = y[i] = z[i] = 0;
}

/* G m of bodies [i0, i1) of system s, and their positions into buffer 0. */
static void P(tf_phys_init)(P(tf_phys_ctx) *c, int64_t s, int64_t i0, int64_t i1) {
    const P_REAL *m = c->mass + s * c->n;
    P_REAL *gm = c->gm + s * c->npad;
    for (int64_t i = i0; i < i1; i++) gm[i] = c->G * m[i];
    if (i1 == c->n)
        for (int64_t i = c->n; i < c->npad; i++) gm[i] = 0;
    P(tf_phys_scatter)(c, 0, s, i0, i1);
}

/* Velocities += a * kick; if drift != 0, positions += v * drift, also into buffer `next`. */
static void P(tf_phys_update)(P(tf_phys_ctx) *c, int64_t s, int64_t i0, int64_t i1, P_REAL kick,
                              int drift, int next) {
    const P_REAL *ax = c->acc + s * 3 * c->npad, *ay = ax + c->npad, *az = ay + c->npad;
    P_REAL *p = c->pos + s * c->n * 3, *v = c->vel + s * c->n * 3;
    for (int64_t i = i0; i < i1; i++) {
        v[3 * i] += ax[i] * kick;
        v[3 * i + 1] += ay[i] * kick;
        v[3 * i + 2] += az[i] * kick;
    }
    if (!drift) return;
    const P_REAL dt = c->dt;
    for (int64_t i = i0; i < i1; i++) {
        p[3 * i] += v[3 * i] * dt;
        p[3 * i + 1] += v[3 * i + 1] * dt;
        p[3 * i + 2] += v[3 * i + 2] * dt;
    }
    if (next >= 0) P(tf_phys_scatter)(c, next, s, i0, i1);
}

static void P(tf_phys_record)(P(tf_phys_ctx) *c, int64_t s, int64_t frame, int64_t i0, int64_t i1) {
    const int64_t n = c->n;
    memcpy(c->traj + ((s * c->frames + frame) * n + i0) * 3, c->pos + (s * n + i0) * 3,
           (size_t)(i1 - i0) * 3 * sizeof(P_REAL));
}

/* The update that ends step k (k = -1: leapfrog's first half kick and drift) for
 * bodies [i0, i1) of system s, whose accelerations are in acc. */
static void P(tf_phys_end_step)(P(tf_phys_ctx) *c, int64_t s, int64_t k, int last, int cur, int64_t i0, int64_t i1) {
    const int64_t rec = c->rec;
    if (k < 0) {
        P(tf_phys_update)(c, s, i0, i1, c->half_dt, 1, 1);
        return;
    }
    const int record = rec > 0 && (k + 1) % rec == 0;
    if (c->leapfrog) {
        if (record) P(tf_phys_record)(c, s, (k + 1) / rec - 1, i0, i1);
        if (last) P(tf_phys_update)(c, s, i0, i1, c->half_dt, 0, -1);
        else P(tf_phys_update)(c, s, i0, i1, c->dt, 1, cur ^ 1);
    } else {
        P(tf_phys_update)(c, s, i0, i1, c->dt, 1, last ? -1 : cur ^ 1);
        if (record) P(tf_phys_record)(c, s, (k + 1) / rec - 1, i0, i1);
    }
}

/* ---- systems mode: one thread runs one system from start to end ------------ */

/* All steps of system s on this thread (its row-kernel buffer is bufs[tid]). Leapfrog
 * is run as half kick, drift, then (force, full kick, drift) per step with the last
 * kick halved, so each step costs one force evaluation and the state is synchronised
 * at the end. Returns 1 if stopped early. */
static int P(tf_phys_run_system)(P(tf_phys_ctx) *c, int tid, int64_t s) {
    tf_phys_control *ctl = &c->ctl;
    const int64_t n = c->n, np = c->npad;
    P_REAL *a = c->acc + s * 3 * np, *buf = c->bufs + (int64_t)tid * 3 * np;
    P(tf_phys_init)(c, s, 0, n);
    int cur = 0;
    for (int64_t k = c->leapfrog ? -1 : 0; k < c->steps; k++) {
        int last = 0, stopping = 0;
        if (k >= 0) {
            if (tid == 0) tf_phys_report(ctl, k, 0);
            stopping = atomic_load_explicit(&ctl->stop_after, memory_order_acquire) >= 0;
            last = k == c->steps - 1 || stopping;
        }
        const P_REAL *x = c->soa[cur] + s * 3 * np;
        if (c->use_rows) {
            memset(buf, 0, (size_t)(3 * np) * sizeof(P_REAL));
            c->k.rows(x, x + np, x + 2 * np, c->gm + s * np, n, 0, n, c->eps2, buf, buf + np, buf + 2 * np);
            for (int64_t i = 0; i < 3 * np; i++) a[i] = buf[i] * c->k.rows_scale;
        } else {
            c->k.pairs(x, x + np, x + 2 * np, c->gm + s * np, n, 0, n, c->eps2, a, a + np, a + 2 * np);
        }
        P(tf_phys_end_step)(c, s, k, last, cur, 0, n);
        cur ^= 1;
        if (k >= 0) {
            _Atomic int64_t *slot = &ctl->done[tid].steps;
            atomic_store_explicit(slot, atomic_load_explicit(slot, memory_order_relaxed) + 1, memory_order_relaxed);
        }
        if (last) return stopping;
    }
    return 0;
}

/* ---- shared mode: phases of small work units, taken by whoever is free ------ *
 * Phase 0 initialises; then each stage is a force phase and an update phase. Stage q
 * reads positions buffer q & 1 and its update writes buffer (q + 1) & 1; with
 * leapfrog, stage 0 is the first half kick and drift and stage q >= 1 ends step q - 1.
 * A thread that starts late, or is preempted between units, only does less: nobody
 * waits for a thread, only for units already taken. The row kernel's sums go to one
 * buffer per (system, chunk), added in chunk order, so a run is deterministic for a
 * given thread count whichever thread took which unit. */

static int64_t P(tf_phys_units)(P(tf_phys_ctx) *c, int64_t phase) {
    return c->systems * (phase > 0 && (phase - 1) % 2 == 0 ? c->nforce : c->nblk);
}

/* Rows of chunk q of nforce (equal numbers of pairs; row i has n - 1 - i), even. */
static void P(tf_phys_chunk_rows)(P(tf_phys_ctx) *c, int64_t q, int64_t *r0, int64_t *r1) {
    const double n = (double)c->n, C = (double)c->nforce;
    *r0 = q == 0 ? 0 : ((int64_t)(n * (1.0 - sqrt(1.0 - (double)q / C)) + 0.5) & ~(int64_t)1);
    *r1 = q + 1 == c->nforce ? c->n : ((int64_t)(n * (1.0 - sqrt(1.0 - (double)(q + 1) / C)) + 0.5) & ~(int64_t)1);
    if (*r0 > c->n) *r0 = c->n;
    if (*r1 > c->n) *r1 = c->n;
}

static void P(tf_phys_do_unit)(P(tf_phys_ctx) *c, int64_t phase, int64_t unit) {
    const int64_t np = c->npad, n = c->n;
    if (phase == 0) {
        int64_t s = unit / c->nblk, i0 = unit % c->nblk * c->blk, i1 = i0 + c->blk < n ? i0 + c->blk : n;
        P(tf_phys_init)(c, s, i0, i1);
        return;
    }
    const int64_t stage = (phase - 1) / 2;
    const int cur = (int)(stage & 1);
    if ((phase - 1) % 2 == 0) { /* forces */
        int64_t s = unit / c->nforce, q = unit % c->nforce;
        const P_REAL *x = c->soa[cur] + s * 3 * np;
        if (c->use_rows) {
            int64_t r0, r1;
            P(tf_phys_chunk_rows)(c, q, &r0, &r1);
            P_REAL *b = c->bufs + (s * c->nforce + q) * 3 * np;
            int64_t z = r0 / c->blk * c->blk;
            for (int64_t k = 0; k < 3; k++) memset(b + k * np + z, 0, (size_t)(np - z) * sizeof(P_REAL));
            c->k.rows(x, x + np, x + 2 * np, c->gm + s * np, n, r0, r1, c->eps2, b, b + np, b + 2 * np);
        } else {
            int64_t i0 = q * c->blk, i1 = i0 + c->blk < n ? i0 + c->blk : n;
            P_REAL *a = c->acc + s * 3 * np;
            c->k.pairs(x, x + np, x + 2 * np, c->gm + s * np, n, i0, i1, c->eps2, a, a + np, a + 2 * np);
        }
        return;
    }
    /* update: gather the chunks that reach this block (a chunk writes only from the
     * block of its first row on), then end the step */
    int64_t s = unit / c->nblk, i0 = unit % c->nblk * c->blk, i1 = i0 + c->blk < n ? i0 + c->blk : n;
    if (c->use_rows) {
        P_REAL *a = c->acc + s * 3 * np;
        for (int64_t k = 0; k < 3; k++)
            for (int64_t i = i0; i < i1; i++) a[k * np + i] = 0;
        for (int64_t q = 0; q < c->nforce; q++) {
            int64_t r0, r1;
            P(tf_phys_chunk_rows)(c, q, &r0, &r1);
            if (r0 / c->blk * c->blk > i0) break; /* chunks start further down from here on */
            const P_REAL *b = c->bufs + (s * c->nforce + q) * 3 * np;
            for (int64_t k = 0; k < 3; k++)
                for (int64_t i = i0; i < i1; i++) a[k * np + i] += b[k * np + i];
        }
        for (int64_t k = 0; k < 3; k++)
            for (int64_t i = i0; i < i1; i++) a[k * np + i] *= c->k.rows_scale;
    }
    const int64_t step = c->leapfrog ? stage - 1 : stage;
    P(tf_phys_end_step)(c, s, step, c->stage_last, cur, i0, i1);
}

/* Called by whoever finishes the last unit of `phase`: decide and open the next. */
static void P(tf_phys_open_next)(P(tf_phys_ctx) *c, int64_t phase) {
    tf_phys_control *ctl = &c->ctl;
    const int64_t pre = c->leapfrog ? 1 : 0;
    if (phase > 0 && (phase - 1) % 2 == 1) { /* an update phase ended */
        int64_t step = (phase - 1) / 2 - pre;
        if (step >= 0) atomic_store(&ctl->steps_done, step + 1);
        if (step >= 0 && c->stage_last) {
            tf_phys_open_phase(ctl, INT64_MAX);
            return;
        }
    }
    if (phase + 1 > 0 && (phase + 1 - 1) % 2 == 1) { /* an update phase opens */
        int64_t step = phase / 2 - pre;
        c->stage_last = step >= 0 && (step == c->steps - 1 || atomic_load(&ctl->stop_requested));
    }
    tf_phys_open_phase(ctl, phase + 1);
}

static void P(tf_phys_shared_work)(P(tf_phys_ctx) *c, int tid) {
    tf_phys_control *ctl = &c->ctl;
    int64_t phase = 0;
    for (;;) {
        int seq = atomic_load(&ctl->open_seq);
        int64_t open = atomic_load(&ctl->open_phase);
        if (open == INT64_MAX) return;
        if (open < phase) { /* phase not open yet: others finish the last units */
            if (tid == 0) {
                tf_phys_sleep_on(&ctl->open_seq, seq, TF_PHYS_REPORT_S);
                tf_phys_report(ctl, 0, 0);
            } else {
                tf_phys_await_change(&ctl->open_seq, seq);
            }
            continue;
        }
        phase = open;
        const int64_t units = P(tf_phys_units)(c, phase);
        int64_t unit;
        while ((unit = tf_phys_grab(ctl, phase, units)) >= 0) {
            P(tf_phys_do_unit)(c, phase, unit);
            if (tid == 0) tf_phys_report(ctl, 0, 0);
            if (atomic_fetch_add(&ctl->phase_done, 1) + 1 == units) P(tf_phys_open_next)(c, phase);
        }
        phase++;
    }
}

/* ---- threads ------------------------------------------------------------------ */

/* One thread's work. Systems mode hands out whole systems one at a time. */
static void P(tf_phys_work)(P(tf_phys_job) *job) {
    P(tf_phys_ctx) *c = job->ctx;
    tf_phys_control *ctl = &c->ctl;
    if (ctl->shared) {
        P(tf_phys_shared_work)(c, job->tid);
        return;
    }
    for (;;) {
        int64_t s = atomic_fetch_add(&ctl->next_system, 1);
        if (s >= ctl->systems) break;
        int stopped = P(tf_phys_run_system)(c, job->tid, s);
        tf_phys_finish_one(ctl, 1);
        if (stopped || atomic_load(&ctl->stop_after) >= 0) break;
    }
}

static void *P(tf_phys_thread)(void *arg) {
    P(tf_phys_job) *job = (P(tf_phys_job) *)arg;
    tf_phys_control *ctl = &job->ctx->ctl;
    if (job->tid == 0) {
        P(tf_phys_work)(job);
        return NULL;
    }
    tf_phys_await_change(&ctl->go, 0);
    P(tf_phys_work)(job);
    tf_phys_leave(ctl);
    return NULL;
}

static int P(tf_phys_check)(const char *fname, const P_REAL *pos, const P_REAL *vel,
                            const P_REAL *mass, int64_t b, int64_t n,
                            const tf_physics_params *params, const P_REAL *traj, int64_t frames) {
    if (!params) return tf_error(TF_EINVAL, "%s: params is NULL", fname);
    if (b < 0 || n < 0)
        return tf_error(TF_ESHAPE, "%s: negative size (b=%lld, n=%lld)", fname, (long long)b, (long long)n);
    if (n > 0 && b > INT64_MAX / 64 / n)
        return tf_error(TF_EOVERFLOW, "%s: b*n is too large", fname);
    const double dt = params->dt;
    if (!isfinite(dt) || dt == 0.0)
        return tf_error(TF_EINVAL, "%s: dt must be finite and non-zero, got %g", fname, dt);
    if (!isfinite(params->G)) return tf_error(TF_EINVAL, "%s: G must be finite, got %g", fname, params->G);
    if (!isfinite(params->softening) || params->softening < 0)
        return tf_error(TF_EINVAL, "%s: softening must be finite and >= 0, got %g", fname,
                        params->softening);
    if (params->steps < 0)
        return tf_error(TF_EINVAL, "%s: steps must be >= 0, got %lld", fname, (long long)params->steps);
    if (params->record_every < 0)
        return tf_error(TF_EINVAL, "%s: record_every must be >= 0, got %lld", fname,
                        (long long)params->record_every);
    if (params->method != TF_PHYSICS_LEAPFROG && params->method != TF_PHYSICS_SYMPLECTIC_EULER)
        return tf_error(TF_EINVAL, "%s: unknown method %d", fname, params->method);
    int64_t want = params->record_every > 0 ? params->steps / params->record_every : 0;
    if (frames != want)
        return tf_error(TF_ESHAPE, "%s: frames=%lld, but steps/record_every = %lld", fname,
                        (long long)frames, (long long)want);
    if (n > 0 && frames > INT64_MAX / 3 / n / (b > 0 ? b : 1))
        return tf_error(TF_EOVERFLOW, "%s: the trajectory is too large", fname);
    if (b > 0 && n > 0) {
        if (!pos || !vel || !mass) return tf_error(TF_EINVAL, "%s: pos, vel or mass is NULL", fname);
        if (frames > 0 && !traj) return tf_error(TF_EINVAL, "%s: traj is NULL", fname);
    }
    return TF_OK;
}

int P(tf_physics_nbody)(P_REAL *pos, P_REAL *vel, const P_REAL *mass, int64_t b, int64_t n,
                        const tf_physics_params *params, P_REAL *traj, int64_t frames,
                        int nthreads, int (*fn)(void *handle, int64_t done, int64_t total),
                        void *handle) {
    const char *fname = TF_PHYS_STR(P(tf_physics_nbody));
    int rc = P(tf_phys_check)(fname, pos, vel, mass, b, n, params, traj, frames);
    if (rc != TF_OK) return rc;
    if (b == 0 || n == 0 || params->steps == 0) return TF_OK;

    /* One block: the context (with the thread control), the jobs, the progress slots.
     * Freed by the last thread out (see tf_phys_run). */
    tf_phys_plan plan = tf_phys_make_plan(b, n, params->steps, nthreads);
    size_t head = (sizeof(P(tf_phys_ctx)) + 63) / 64 * 64;
    size_t jobs_size = ((size_t)plan.threads * sizeof(P(tf_phys_job)) + 63) / 64 * 64;
    char *block = tf_phys_alloc(head + jobs_size + (size_t)plan.threads * sizeof(tf_phys_slot));
    if (!block) return tf_error(TF_ENOMEM, "%s: cannot allocate the thread state", fname);
    memset(block, 0, head + jobs_size);
    P(tf_phys_ctx) *c = (P(tf_phys_ctx) *)block;
    P(tf_phys_job) *jobs = (P(tf_phys_job) *)(block + head);
    c->ctl.base = block;
    c->ctl.done = (tf_phys_slot *)(block + head + jobs_size);
    c->ctl.systems = b;
    c->ctl.steps = params->steps;
    c->ctl.fn = fn;
    c->ctl.handle = handle;
    c->pos = pos;
    c->vel = vel;
    c->mass = mass;
    c->traj = traj;
    c->n = n;
    c->npad = (n + TF_PHYS_PAD - 1) / TF_PHYS_PAD * TF_PHYS_PAD;
    c->frames = frames;
    c->steps = params->steps;
    c->rec = params->record_every;
    c->systems = b;
    c->leapfrog = params->method == TF_PHYSICS_LEAPFROG;
    c->dt = (P_REAL)params->dt;
    c->half_dt = (P_REAL)(0.5 * params->dt);
    c->eps2 = (P_REAL)(params->softening * params->softening);
    c->G = (P_REAL)params->G;
    c->k = P(tf_phys_pick_kernels)();
    c->use_rows = c->k.rows != NULL && n >= TF_PHYS_ROWS_MIN && n < INT32_MAX / 2;
    /* Shared mode units: ~4 per thread and phase, at least a padding block each. */
    c->blk = (n + 4 * plan.threads - 1) / (4 * plan.threads);
    c->blk = (c->blk + TF_PHYS_PAD - 1) / TF_PHYS_PAD * TF_PHYS_PAD;
    c->nblk = (n + c->blk - 1) / c->blk;
    c->nforce = c->use_rows ? (4 * plan.threads < n / 16 ? 4 * plan.threads : (n / 16 > 0 ? n / 16 : 1)) : c->nblk;
    for (int t = 0; t < plan.threads; t++) {
        jobs[t].ctx = c;
        jobs[t].tid = t; /* read by each thread as it starts, before `go` */
    }

    /* Scratch: two position buffers, the accelerations (3 npad each) and G m (npad)
     * per system, and the row kernel's buffers (3 npad each). */
    size_t nbufs = !c->use_rows ? 0 : plan.shared ? (size_t)b * (size_t)c->nforce : (size_t)plan.threads;
    P_REAL *scratch = tf_phys_alloc(((size_t)b * 10 + nbufs * 3) * (size_t)c->npad * sizeof(P_REAL));
    if (!scratch) {
        free(block);
        return tf_error(TF_ENOMEM, "%s: cannot allocate scratch for %lld x %lld bodies", fname, (long long)b,
                        (long long)n);
    }
    c->soa[0] = scratch;
    c->soa[1] = scratch + (size_t)b * 3 * c->npad;
    c->acc = scratch + (size_t)b * 6 * c->npad;
    c->gm = scratch + (size_t)b * 9 * c->npad;
    c->bufs = scratch + (size_t)b * 10 * c->npad;

    int64_t stopped_at = 0;
    rc = tf_phys_run(&c->ctl, &plan, P(tf_phys_thread), jobs, sizeof jobs[0], &stopped_at);
    /* c may be gone now; late threads touch only the control, never the scratch. */
    tf_phys_free(scratch);
    if (rc == TF_EINTERRUPTED)
        return tf_error(TF_EINTERRUPTED, "%s: stopped after %lld of %lld steps", fname, (long long)stopped_at,
                        (long long)params->steps);
    return rc;
}

/* ---- energy and momentum ---------------------------------------------- */

int P(tf_physics_energy)(const P_REAL *pos, const P_REAL *vel, const P_REAL *mass, int64_t b,
                         int64_t n, double G, double softening, int nthreads, P_REAL *out) {
    const char *fname = TF_PHYS_STR(P(tf_physics_energy));
    if (b < 0 || n < 0)
        return tf_error(TF_ESHAPE, "%s: negative size (b=%lld, n=%lld)", fname, (long long)b, (long long)n);
    if (!isfinite(G)) return tf_error(TF_EINVAL, "%s: G must be finite, got %g", fname, G);
    if (!isfinite(softening) || softening < 0)
        return tf_error(TF_EINVAL, "%s: softening must be finite and >= 0, got %g", fname, softening);
    if (b == 0) return TF_OK;
    if (n == 0) {
        for (int64_t s = 0; s < b; s++) out[s] = 0;
        return TF_OK;
    }
    if (b > INT64_MAX / 8 / n) return tf_error(TF_EOVERFLOW, "%s: b*n is too large", fname);
    double *soa = tf_phys_alloc((size_t)(b * n) * 4 * sizeof(double));
    if (!soa) return tf_error(TF_ENOMEM, "%s: cannot allocate scratch", fname);
    double *kinetic = malloc((size_t)b * sizeof(double));
    if (!kinetic) {
        tf_phys_free(soa);
        return tf_error(TF_ENOMEM, "%s: cannot allocate scratch", fname);
    }
    for (int64_t s = 0; s < b; s++) {
        double *x = soa + s * 4 * n, *y = x + n, *z = y + n, *m = z + n, k = 0;
        for (int64_t i = 0; i < n; i++) {
            const P_REAL *p = pos + (s * n + i) * 3, *v = vel + (s * n + i) * 3;
            x[i] = p[0];
            y[i] = p[1];
            z[i] = p[2];
            m[i] = mass[s * n + i];
            k += 0.5 * m[i] * ((double)v[0] * v[0] + (double)v[1] * v[1] + (double)v[2] * v[2]);
        }
        kinetic[s] = k;
    }
    double *potential = malloc((size_t)b * sizeof(double));
    int rc = potential ? tf_phys_potential(soa, b, n, softening * softening, nthreads, potential)
                       : TF_ENOMEM;
    if (rc == TF_OK)
        for (int64_t s = 0; s < b; s++) out[s] = (P_REAL)(kinetic[s] - G * potential[s]);
    free(potential);
    free(kinetic);
    tf_phys_free(soa);
    if (rc == TF_ENOMEM) return tf_error(TF_ENOMEM, "%s: cannot allocate scratch", fname);
    return rc;
}

int P(tf_physics_momentum)(const P_REAL *vel, const P_REAL *mass, int64_t b, int64_t n, P_REAL *out) {
    if (b < 0 || n < 0)
        return tf_error(TF_ESHAPE, "%s: negative size (b=%lld, n=%lld)", TF_PHYS_STR(P(tf_physics_momentum)),
                        (long long)b, (long long)n);
    for (int64_t s = 0; s < b; s++) {
        double px = 0, py = 0, pz = 0;
        for (int64_t i = 0; i < n; i++) {
            const P_REAL *v = vel + (s * n + i) * 3;
            const double m = mass[s * n + i];
            px += m * v[0];
            py += m * v[1];
            pz += m * v[2];
        }
        out[3 * s] = (P_REAL)px;
        out[3 * s + 1] = (P_REAL)py;
        out[3 * s + 2] = (P_REAL)pz;
    }
    return TF_OK;
}

#undef P
#undef P_CAT
#undef P_CAT2
