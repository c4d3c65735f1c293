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
 * s * 3 * npad, acc holds ax | ay | az likewise, and gm holds G m at s * npad. With
 * the row kernel, each thread also has 3 * npad of sums per system it works on at
 * once (bufs: all systems in shared mode, one in systems mode). */
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
} P(tf_phys_ctx);

typedef struct {
    P(tf_phys_ctx) *ctx;
    int tid;
    int64_t i0, i1; /* bodies this thread integrates in each of its systems */
    int64_t r0, r1; /* rows of the pair triangle it computes (row kernel) */
} P(tf_phys_job);

/* Positions of bodies [i0, i1) of system s into buffer `which` (and the pad lanes,
 * by the thread that owns the last body). */
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

/* This thread's buffer of sums for system s. */
static P_REAL *P(tf_phys_buf)(P(tf_phys_ctx) *c, int tid, int64_t s) {
    int64_t slot = c->ctl.shared ? (int64_t)tid * c->systems + s : tid;
    return c->bufs + slot * 3 * c->npad;
}

/* Forces of system s from buffer `which`, first phase: the pair kernel writes the
 * accelerations of this thread's bodies; the row kernel adds this thread's rows into
 * its buffer (complete only after the gather). */
static void P(tf_phys_forces)(P(tf_phys_ctx) *c, const P(tf_phys_job) *job, int which, int64_t s) {
    const P_REAL *x = c->soa[which] + s * 3 * c->npad;
    const int64_t np = c->npad;
    if (!c->use_rows) {
        P_REAL *a = c->acc + s * 3 * np;
        c->k.pairs(x, x + np, x + 2 * np, c->gm + s * np, c->n, job->i0, job->i1, c->eps2, a, a + np, a + 2 * np);
        return;
    }
    P_REAL *b = P(tf_phys_buf)(c, job->tid, s);
    memset(b, 0, (size_t)(3 * np) * sizeof(P_REAL));
    c->k.rows(x, x + np, x + 2 * np, c->gm + s * np, c->n, job->r0, job->r1, c->eps2, b, b + np, b + 2 * np);
}

/* Second phase (after a barrier in shared mode): the accelerations of this thread's
 * bodies are the scaled sum of every thread's buffer, in thread order. */
static void P(tf_phys_gather)(P(tf_phys_ctx) *c, const P(tf_phys_job) *job, int64_t s) {
    if (!c->use_rows) return;
    const int64_t np = c->npad, i0 = job->i0, i1 = job->i1;
    const int threads = c->ctl.shared ? c->ctl.threads : 1;
    const int first = c->ctl.shared ? 0 : job->tid;
    P_REAL *a = c->acc + s * 3 * np;
    const P_REAL scale = c->k.rows_scale;
    for (int64_t q = 0; q < 3 * np; q += np) {
        const P_REAL *b0 = P(tf_phys_buf)(c, first, s) + q;
        for (int64_t i = i0; i < i1; i++) a[q + i] = b0[i];
        for (int t = 1; t < threads; t++) {
            const P_REAL *b = P(tf_phys_buf)(c, t, s) + q;
            for (int64_t i = i0; i < i1; i++) a[q + i] += b[i];
        }
        for (int64_t i = i0; i < i1; i++) a[q + i] *= scale;
    }
}

static void P(tf_phys_record)(P(tf_phys_ctx) *c, int64_t s, int64_t frame, int64_t i0, int64_t i1) {
    const int64_t n = c->n;
    memcpy(c->traj + ((s * c->frames + frame) * n + i0) * 3, c->pos + (s * n + i0) * 3,
           (size_t)(i1 - i0) * 3 * sizeof(P_REAL));
}

/* Steps of systems [s0, s1) by one thread (its bodies and rows are in `job`). Leapfrog
 * is run as half kick, drift, then (force, full kick, drift) per step with the last
 * kick halved, so each step costs one force evaluation and the state is synchronised
 * at the end. Shared mode: every thread runs all systems, with a barrier before each
 * force evaluation (the positions are complete) and, with the row kernel, one after
 * it (the buffers are complete); the progress slot counts steps. Systems mode: one
 * system, no barrier; the slot counts system-steps. Returns 1 if stopped early. */
static int P(tf_phys_steps)(P(tf_phys_ctx) *c, const P(tf_phys_job) *job, int64_t s0, int64_t s1, int *sense) {
    tf_phys_control *ctl = &c->ctl;
    const int shared = ctl->shared, tid = job->tid;
    const int two_phase = shared && c->use_rows;
    const int64_t rec = c->rec, i0 = job->i0, i1 = job->i1;
    for (int64_t s = s0; s < s1; s++) {
        const P_REAL *m = c->mass + s * c->n;
        P_REAL *gm = c->gm + s * c->npad;
        for (int64_t i = i0; i < i1; i++) gm[i] = c->G * m[i];
        if (i1 == c->n)
            for (int64_t i = c->n; i < c->npad; i++) gm[i] = 0;
        P(tf_phys_scatter)(c, 0, s, i0, i1);
    }
    int cur = 0;
    if (c->leapfrog) {
        if (shared) tf_phys_barrier(ctl, sense);
        for (int64_t s = s0; s < s1; s++) P(tf_phys_forces)(c, job, 0, s);
        if (two_phase) tf_phys_barrier(ctl, sense);
        for (int64_t s = s0; s < s1; s++) {
            P(tf_phys_gather)(c, job, s);
            P(tf_phys_update)(c, s, i0, i1, c->half_dt, 1, 1);
        }
        cur = 1;
    }
    for (int64_t k = 0; k < c->steps; k++) {
        if (tid == 0) tf_phys_report(ctl, k, 0);
        if (shared) tf_phys_barrier(ctl, sense);
        int64_t stop = atomic_load_explicit(&ctl->stop_after, memory_order_acquire);
        /* Shared mode: all threads read the same decision after the same barrier.
         * Systems mode: stop at once, at this system's step boundary. */
        const int stopping = stop >= 0 && (!shared || stop <= k);
        const int last = k == c->steps - 1 || stopping;
        const int record = rec > 0 && (k + 1) % rec == 0;
        for (int64_t s = s0; s < s1; s++) P(tf_phys_forces)(c, job, cur, s);
        if (two_phase) tf_phys_barrier(ctl, sense);
        for (int64_t s = s0; s < s1; s++) {
            P(tf_phys_gather)(c, job, s);
            if (c->leapfrog) {
                if (record) P(tf_phys_record)(c, s, (k + 1) / rec - 1, i0, i1);
                if (last) P(tf_phys_update)(c, s, i0, i1, c->half_dt, 0, -1);
                else P(tf_phys_update)(c, s, i0, i1, c->dt, 1, cur ^ 1);
            } else {
                P(tf_phys_update)(c, s, i0, i1, c->dt, 1, last ? -1 : cur ^ 1);
                if (record) P(tf_phys_record)(c, s, (k + 1) / rec - 1, i0, i1);
            }
        }
        cur ^= 1;
        _Atomic int64_t *slot = &ctl->done[tid].steps;
        atomic_store_explicit(slot, shared ? k + 1 : atomic_load_explicit(slot, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        if (last) return stopping;
    }
    return 0;
}

/* One thread's work. Systems mode hands out whole systems one at a time, so a thread
 * that starts late or is preempted (a busy machine) leaves its share to the others. */
static void P(tf_phys_work)(P(tf_phys_job) *job) {
    P(tf_phys_ctx) *c = job->ctx;
    tf_phys_control *ctl = &c->ctl;
    int sense = 0;
    if (ctl->shared) {
        P(tf_phys_steps)(c, job, 0, ctl->systems, &sense);
        if (job->tid != 0) tf_phys_finish_one(ctl, 1);
        return;
    }
    for (;;) {
        int64_t s = atomic_fetch_add(&ctl->next_system, 1);
        if (s >= ctl->systems) break;
        int stopped = P(tf_phys_steps)(c, job, s, s + 1, &sense);
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
    tf_phys_await_change(&ctl->go, 0, NULL);
    P(tf_phys_work)(job);
    tf_phys_leave(ctl);
    return NULL;
}

static void P(tf_phys_split_job)(void *arg, const tf_phys_plan *plan, int t) {
    P(tf_phys_job) *job = (P(tf_phys_job) *)arg;
    const int64_t n = job->ctx->n;
    if (plan->shared) {
        tf_phys_split(plan, n, t, &job->i0, &job->i1);
        tf_phys_split_rows(plan, n, t, &job->r0, &job->r1);
    } else {
        job->i0 = job->r0 = 0;
        job->i1 = job->r1 = n;
    }
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
    c->leapfrog = params->method == TF_PHYSICS_LEAPFROG;
    c->dt = (P_REAL)params->dt;
    c->half_dt = (P_REAL)(0.5 * params->dt);
    c->eps2 = (P_REAL)(params->softening * params->softening);
    c->G = (P_REAL)params->G;
    c->systems = b;
    c->k = P(tf_phys_pick_kernels)();
    c->use_rows = c->k.rows != NULL && n >= TF_PHYS_ROWS_MIN && n < INT32_MAX / 2;
    for (int t = 0; t < plan.threads; t++) {
        jobs[t].ctx = c;
        jobs[t].tid = t; /* read by each thread as it starts, before `go` */
    }

    /* Scratch: two position buffers, the accelerations (3 npad each) and G m (npad)
     * per system, and the row kernel's per-thread sums. */
    size_t nbufs = c->use_rows ? (size_t)plan.threads * (plan.shared ? (size_t)b : 1) : 0;
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
    rc = tf_phys_run(&c->ctl, &plan, P(tf_phys_thread), P(tf_phys_split_job), jobs, sizeof jobs[0], &stopped_at);
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
