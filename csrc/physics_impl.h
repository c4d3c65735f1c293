/* SPDX-License-Identifier: MIT */
/* physics_impl.h — the part of physics.c written once per element type. physics.c
 * includes it with P_REAL (float or double), P_SFX (f32 or f64) and P_SQRT defined,
 * all #undef'd at the end of this file. Not a public header. */

#define P_CAT2(a, b) a##_##b
#define P_CAT(a, b) P_CAT2(a, b)
#define P(name) P_CAT(name, P_SFX)

typedef void (*P(tf_phys_force_fn))(const P_REAL *x, const P_REAL *y, const P_REAL *z,
                                      const P_REAL *gm, int64_t n, int64_t i0, int64_t i1,
                                      P_REAL eps2, P_REAL *ax, P_REAL *ay, P_REAL *az);

/* The lanes kernel: forces of lw systems side by side (see physics_simd.h). */
typedef void (*P(tf_phys_lanes_fn))(const P_REAL *x, const P_REAL *y, const P_REAL *z, const P_REAL *gm,
                                      int64_t n, P_REAL eps2, P_REAL *ax, P_REAL *ay, P_REAL *az);

/* Portable force kernel (also the reference for the vectorised ones). A pair at
 * exactly zero distance (the body itself, or two bodies at the same place) adds
 * nothing: with softening its term is 0 anyway; without, it would be inf * 0. */
static void P(tf_phys_force_scalar)(const P_REAL *x, const P_REAL *y, const P_REAL *z,
                                    const P_REAL *gm, int64_t n, int64_t i0, int64_t i1,
                                    P_REAL eps2, P_REAL *ax, P_REAL *ay, P_REAL *az) {
    if (i1 > n) i1 = n;
    for (int64_t i = i0; i < i1; i++) {
        const P_REAL xi = x[i], yi = y[i], zi = z[i];
        P_REAL sx = 0, sy = 0, sz = 0;
        for (int64_t j = 0; j < n; j++) {
            P_REAL dx = x[j] - xi, dy = y[j] - yi, dz = z[j] - zi;
            P_REAL d2 = dx * dx + dy * dy + dz * dz;
            if (d2 == 0) continue;
            P_REAL r2 = d2 + eps2;
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
 * into buffers summed afterwards and scaled by rows_scale. */
typedef struct {
    P(tf_phys_force_fn) pairs, rows;
    P_REAL rows_scale;
    P(tf_phys_lanes_fn) lanes; /* NULL: no lanes kernel at this level */
    int lanes_w;               /* its systems per vector */
} P(tf_phys_kernels);

/* eps^2 below which the guarded kernels run (the unguarded ones rely on the self
 * term's weight m eps^-3 being finite: see physics_simd.h). */
#define P_GUARD_EPS2 (sizeof(P_REAL) == sizeof(float) ? (P_REAL)1e-18 : (P_REAL)1e-200)

static P(tf_phys_kernels) P(tf_phys_pick_kernels)(int guarded) {
    P(tf_phys_kernels) k = {P(tf_phys_force_scalar), NULL, 1, NULL, 0};
#if TF_PHYS_X86
    const P_REAL scale = sizeof(P_REAL) == sizeof(float) ? (P_REAL)0.125 : (P_REAL)1;
    switch (tf_phys_level(sizeof(P_REAL))) {
    case TF_SIMD_AVX512:
        k = guarded ? (P(tf_phys_kernels)){P_CAT(P(tf_phys_force_avx512), guarded), P_CAT(P(tf_phys_rows_avx512), guarded), scale,
                                            P_CAT(P(tf_phys_force_avx512), lanes_guarded), 64 / (int)sizeof(P_REAL)}
                    : (P(tf_phys_kernels)){P(tf_phys_force_avx512), P(tf_phys_rows_avx512), scale,
                                            P_CAT(P(tf_phys_force_avx512), lanes), 64 / (int)sizeof(P_REAL)};
        break;
    case TF_SIMD_AVX2:
        k = guarded ? (P(tf_phys_kernels)){P_CAT(P(tf_phys_force_avx2), guarded), P_CAT(P(tf_phys_rows_avx2), guarded), scale,
                                            P_CAT(P(tf_phys_force_avx2), lanes_guarded), 32 / (int)sizeof(P_REAL)}
                    : (P(tf_phys_kernels)){P(tf_phys_force_avx2), P(tf_phys_rows_avx2), scale,
                                            P_CAT(P(tf_phys_force_avx2), lanes), 32 / (int)sizeof(P_REAL)};
        break;
    default: break;
    }
#else
    (void)guarded;
#endif
    return k;
}

/* One call's shared state. Per system s: xs (positions, SoA: x | y | z, each npad
 * long), acc (accelerations) and vh (leapfrog's half-step velocities) at s * 3 *
 * npad, gm (G m) at s * npad. The row kernel adds into buffers of 3 * npad: one per
 * thread in systems mode, one per (system, chunk of rows) in shared mode.
 *
 * The state lives in this scratch during a step; the caller's pos and vel are written
 * once per step, when the step is complete. So at any moment they hold the state after
 * a whole number of steps: what a progress callback sees, and what is left when a run
 * stops. */
typedef struct {
    P_REAL *pos, *vel, *traj;
    const P_REAL *mass;
    int64_t b, n, npad, frames, steps, rec;
    int leapfrog, use_rows, shared, threads;
    P_REAL dt, half_dt, eps2, G;
    P_REAL *xs, *acc, *vh, *gm, *bufs;
    P(tf_phys_kernels) k;
    /* shared mode: force units are chunks of rows with equal numbers of pairs (row
     * kernel) or blocks of blk bodies; nforce of them per system */
    int64_t blk, nforce;
    int64_t steps_done; /* shared mode (the caller's) */
    tf_phys_slot *slots; /* systems mode: system-steps done, per thread */
    /* systems mode, small systems: units [0, groups) are groups of lw systems run side
     * by side by the lanes kernel (lanebufs: 13 n lw reals per thread); the rest are
     * single systems */
    int64_t groups, lw;
    int64_t first; /* groups * lw: xs, acc, vh and gm hold systems [first, b) */
    P_REAL *lanebufs;
    tf_rt *rt;
} P(tf_phys_ctx);

/* G m and positions (SoA, pad lanes 0) of system s. */
static void P(tf_phys_init)(P(tf_phys_ctx) *c, int64_t s) {
    const int64_t n = c->n, np = c->npad;
    const P_REAL *m = c->mass + s * n, *p = c->pos + s * n * 3;
    P_REAL *gm = c->gm + (s - c->first) * np, *x = c->xs + (s - c->first) * 3 * np, *y = x + np, *z = y + np;
    for (int64_t i = 0; i < n; i++) {
        gm[i] = c->G * m[i];
        x[i] = p[3 * i];
        y[i] = p[3 * i + 1];
        z[i] = p[3 * i + 2];
    }
    for (int64_t i = n; i < np; i++) gm[i] = x[i] = y[i] = z[i] = 0;
}

/* Leapfrog's first half: vh = v + a dt/2, x += vh dt (scratch only). */
static void P(tf_phys_kick_drift)(P(tf_phys_ctx) *c, int64_t s) {
    const int64_t n = c->n, np = c->npad;
    const P_REAL *v = c->vel + s * n * 3, *a = c->acc + (s - c->first) * 3 * np, h = c->half_dt, dt = c->dt;
    P_REAL *vh = c->vh + (s - c->first) * 3 * np, *x = c->xs + (s - c->first) * 3 * np;
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < n; i++) {
            vh[k * np + i] = v[3 * i + k] + a[k * np + i] * h;
            x[k * np + i] += vh[k * np + i] * dt;
        }
}

/* The end of step `step` of system s: the caller's pos and vel get the new state. */
static void P(tf_phys_end_step)(P(tf_phys_ctx) *c, int64_t s, int64_t step) {
    const int64_t n = c->n, np = c->npad;
    const P_REAL *a = c->acc + (s - c->first) * 3 * np;
    P_REAL *x = c->xs + (s - c->first) * 3 * np, *p = c->pos + s * n * 3, *v = c->vel + s * n * 3;
    if (c->leapfrog) {
        const P_REAL *vh = c->vh + (s - c->first) * 3 * np, h = c->half_dt;
        for (int k = 0; k < 3; k++)
            for (int64_t i = 0; i < n; i++) {
                v[3 * i + k] = vh[k * np + i] + a[k * np + i] * h;
                p[3 * i + k] = x[k * np + i];
            }
    } else {
        const P_REAL dt = c->dt;
        for (int k = 0; k < 3; k++)
            for (int64_t i = 0; i < n; i++) {
                P_REAL vn = v[3 * i + k] + a[k * np + i] * dt;
                v[3 * i + k] = vn;
                x[k * np + i] += vn * dt;
                p[3 * i + k] = x[k * np + i];
            }
    }
    if (c->rec > 0 && (step + 1) % c->rec == 0)
        memcpy(c->traj + (s * c->frames + (step + 1) / c->rec - 1) * n * 3, p, (size_t)(n * 3) * sizeof(P_REAL));
}

/* ---- systems mode: one thread runs one system from start to end ------------ */

/* Forces of system s, all bodies, on one thread (buf: its row-kernel buffer). */
static void P(tf_phys_forces)(P(tf_phys_ctx) *c, int64_t s, P_REAL *buf) {
    const int64_t n = c->n, np = c->npad;
    const P_REAL *x = c->xs + (s - c->first) * 3 * np;
    P_REAL *a = c->acc + (s - c->first) * 3 * np;
    if (c->use_rows) {
        memset(buf, 0, (size_t)(3 * np) * sizeof(P_REAL));
        c->k.rows(x, x + np, x + 2 * np, c->gm + (s - c->first) * np, n, 0, n, c->eps2, buf, buf + np, buf + 2 * np);
        for (int64_t i = 0; i < 3 * np; i++) a[i] = buf[i] * c->k.rows_scale;
    } else {
        c->k.pairs(x, x + np, x + 2 * np, c->gm + (s - c->first) * np, n, 0, n, c->eps2, a, a + np, a + 2 * np);
    }
}

/* Unit g < groups: all steps of the lw systems of group g, side by side in the lanes
 * layout (body i of the group's system l at [i * lw + l]). The thread's buffer holds
 * positions (x | y | z), G m, accelerations, velocities and half-step velocities: 13 n
 * lw reals. The arithmetic is tf_phys_kick_drift's and tf_phys_end_step's, element
 * for element (the kernel's scale, a power of 2, is folded into the step sizes), and
 * the caller's pos and vel are written once per step, as there. */
static int P(tf_phys_group_unit)(P(tf_phys_ctx) *c, int64_t g, int tid) {
    const int64_t n = c->n, w = c->lw, nw = n * w, s0 = g * w;
    P_REAL *x = c->lanebufs + (int64_t)tid * 13 * nw, *gm = x + 3 * nw, *a = gm + nw, *v = a + 3 * nw, *vh = v + 3 * nw;
    const P_REAL *mass = c->mass + s0 * n;
    P_REAL *pos = c->pos + s0 * n * 3, *vel = c->vel + s0 * n * 3;
    const P_REAL dt = c->dt, hs = c->half_dt * c->k.rows_scale, dts = c->dt * c->k.rows_scale;
    _Atomic int64_t *slot = &c->slots[tid].steps;
    const int64_t every = n >= 64 ? 1 : 16;
    for (int64_t l = 0; l < w; l++)
        for (int64_t i = 0; i < n; i++) {
            gm[i * w + l] = c->G * mass[l * n + i];
            for (int64_t k = 0; k < 3; k++) {
                x[k * nw + i * w + l] = pos[(l * n + i) * 3 + k];
                v[k * nw + i * w + l] = vel[(l * n + i) * 3 + k];
            }
        }
    if (c->leapfrog) c->k.lanes(x, x + nw, x + 2 * nw, gm, n, c->eps2, a, a + nw, a + 2 * nw);
    for (int64_t step = 0; step < c->steps; step++) {
        if (c->leapfrog)
            for (int64_t q = 0; q < 3 * nw; q++) {
                vh[q] = v[q] + a[q] * hs;
                x[q] += vh[q] * dt;
            }
        c->k.lanes(x, x + nw, x + 2 * nw, gm, n, c->eps2, a, a + nw, a + 2 * nw);
        if (c->leapfrog) {
            for (int64_t q = 0; q < 3 * nw; q++) v[q] = vh[q] + a[q] * hs;
        } else {
            for (int64_t q = 0; q < 3 * nw; q++) {
                v[q] = v[q] + a[q] * dts;
                x[q] += v[q] * dt;
            }
        }
        for (int64_t l = 0; l < w; l++) {
            for (int64_t i = 0; i < n; i++)
                for (int64_t k = 0; k < 3; k++) {
                    pos[(l * n + i) * 3 + k] = x[k * nw + i * w + l];
                    vel[(l * n + i) * 3 + k] = v[k * nw + i * w + l];
                }
            if (c->rec > 0 && (step + 1) % c->rec == 0)
                memcpy(c->traj + ((s0 + l) * c->frames + (step + 1) / c->rec - 1) * n * 3, pos + l * n * 3,
                       (size_t)(n * 3) * sizeof(P_REAL));
        }
        atomic_store_explicit(slot, atomic_load_explicit(slot, memory_order_relaxed) + w, memory_order_relaxed);
        if ((step + 1) % every == 0) tf_rt_report(c->rt, tf_phys_done_systems(c->slots, c->threads, c->b), 0);
        if (tf_rt_checkpoint(c->rt)) break;
    }
    return TF_OK;
}

/* Unit s: all steps of system s (after the groups: see tf_phys_ctx). A run that stops
 * leaves it after its last whole step. */
static int P(tf_phys_system_unit)(void *arg, int64_t s, int tid) {
    P(tf_phys_ctx) *c = (P(tf_phys_ctx) *)arg;
    if (s < c->groups) return P(tf_phys_group_unit)(c, s, tid);
    s = c->groups * c->lw + (s - c->groups);
    P_REAL *buf = c->bufs + (int64_t)tid * 3 * c->npad;
    _Atomic int64_t *slot = &c->slots[tid].steps;
    /* the caller reports between steps; for tiny systems not after every one */
    const int64_t every = c->n >= 64 ? 1 : 16;
    P(tf_phys_init)(c, s);
    if (c->leapfrog) P(tf_phys_forces)(c, s, buf);
    for (int64_t k = 0; k < c->steps; k++) {
        if (c->leapfrog) P(tf_phys_kick_drift)(c, s);
        P(tf_phys_forces)(c, s, buf);
        P(tf_phys_end_step)(c, s, k);
        atomic_store_explicit(slot, atomic_load_explicit(slot, memory_order_relaxed) + 1, memory_order_relaxed);
        if ((k + 1) % every == 0) tf_rt_report(c->rt, tf_phys_done_systems(c->slots, c->threads, c->b), 0);
        if (tf_rt_checkpoint(c->rt)) break;
    }
    return TF_OK;
}

/* ---- shared mode: every step's forces are split into units --------------------- */

/* Rows of chunk q of nforce (equal numbers of pairs; row i has n - 1 - i), even. */
static void P(tf_phys_chunk_rows)(P(tf_phys_ctx) *c, int64_t q, int64_t *r0, int64_t *r1) {
    const double n = (double)c->n, C = (double)c->nforce;
    *r0 = q == 0 ? 0 : ((int64_t)(n * (1.0 - sqrt(1.0 - (double)q / C)) + 0.5) & ~(int64_t)1);
    *r1 = q + 1 == c->nforce ? c->n : ((int64_t)(n * (1.0 - sqrt(1.0 - (double)(q + 1) / C)) + 0.5) & ~(int64_t)1);
    if (*r0 > c->n) *r0 = c->n;
    if (*r1 > c->n) *r1 = c->n;
}

static int P(tf_phys_force_unit)(void *arg, int64_t unit, int tid) {
    (void)tid;
    P(tf_phys_ctx) *c = (P(tf_phys_ctx) *)arg;
    const int64_t np = c->npad, n = c->n, s = unit / c->nforce, q = unit % c->nforce;
    const P_REAL *x = c->xs + (s - c->first) * 3 * np;
    if (c->use_rows) {
        int64_t r0, r1;
        P(tf_phys_chunk_rows)(c, q, &r0, &r1);
        P_REAL *b = c->bufs + unit * 3 * np;
        const int64_t z = r0 / TF_PHYS_PAD * TF_PHYS_PAD; /* the chunk writes from here on */
        for (int64_t k = 0; k < 3; k++) memset(b + k * np + z, 0, (size_t)(np - z) * sizeof(P_REAL));
        c->k.rows(x, x + np, x + 2 * np, c->gm + (s - c->first) * np, n, r0, r1, c->eps2, b, b + np, b + 2 * np);
    } else {
        int64_t i0 = q * c->blk, i1 = i0 + c->blk < n ? i0 + c->blk : n;
        P_REAL *a = c->acc + (s - c->first) * 3 * np;
        c->k.pairs(x, x + np, x + 2 * np, c->gm + (s - c->first) * np, n, i0, i1, c->eps2, a, a + np, a + 2 * np);
    }
    return TF_OK;
}

/* One force evaluation of every system, split into units; the row kernel's chunk
 * sums are then added in chunk order (the same order whichever thread took which
 * unit: a run is deterministic for a given thread count). */
static int P(tf_phys_force_phase)(P(tf_phys_ctx) *c) {
    int rc = tf_rt_phase(c->rt, c->b * c->nforce, P(tf_phys_force_unit), c);
    if (rc != TF_OK || !c->use_rows) return rc;
    const int64_t np = c->npad, n = c->n;
    for (int64_t s = 0; s < c->b; s++) {
        P_REAL *a = c->acc + (s - c->first) * 3 * np;
        memset(a, 0, (size_t)(3 * np) * sizeof(P_REAL));
        for (int64_t q = 0; q < c->nforce; q++) {
            int64_t r0, r1;
            P(tf_phys_chunk_rows)(c, q, &r0, &r1);
            const int64_t z = r0 / TF_PHYS_PAD * TF_PHYS_PAD;
            const P_REAL *b = c->bufs + (s * c->nforce + q) * 3 * np;
            for (int64_t k = 0; k < 3; k++)
                for (int64_t i = z; i < n; i++) a[k * np + i] += b[k * np + i];
        }
        for (int64_t i = 0; i < 3 * np; i++) a[i] *= c->k.rows_scale;
    }
    return TF_OK;
}

static int64_t P(tf_phys_done)(void *arg) {
    P(tf_phys_ctx) *c = (P(tf_phys_ctx) *)arg;
    return c->shared ? c->steps_done : tf_phys_done_systems(c->slots, c->threads, c->b);
}

static int P(tf_phys_driver)(tf_rt *rt, void *arg) {
    P(tf_phys_ctx) *c = (P(tf_phys_ctx) *)arg;
    c->rt = rt;
    if (!c->shared) {
        int rc = tf_rt_phase(rt, c->groups + (c->b - c->groups * c->lw), P(tf_phys_system_unit), c);
        if (rc == TF_OK) tf_rt_report(rt, c->steps, 1); /* the bar ends full */
        return TF_OK;
    }
    /* Shared mode: the O(n) work between force phases is the caller's. */
    for (int64_t s = 0; s < c->b; s++) P(tf_phys_init)(c, s);
    if (c->leapfrog && P(tf_phys_force_phase)(c) != TF_OK) return TF_OK;
    for (int64_t k = 0; k < c->steps; k++) {
        if (c->leapfrog)
            for (int64_t s = 0; s < c->b; s++) P(tf_phys_kick_drift)(c, s);
        if (P(tf_phys_force_phase)(c) != TF_OK) break; /* stopped: pos, vel hold step k */
        for (int64_t s = 0; s < c->b; s++) P(tf_phys_end_step)(c, s, k);
        c->steps_done = k + 1;
        if (tf_rt_report(rt, k + 1, k + 1 == c->steps)) break;
    }
    return TF_OK;
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

    tf_phys_plan plan = tf_phys_make_plan(b, n, params->steps, nthreads);
    P(tf_phys_ctx) c;
    memset(&c, 0, sizeof c);
    c.pos = pos;
    c.vel = vel;
    c.mass = mass;
    c.traj = traj;
    c.b = b;
    c.n = n;
    c.npad = (n + TF_PHYS_PAD - 1) / TF_PHYS_PAD * TF_PHYS_PAD;
    c.frames = frames;
    c.steps = params->steps;
    c.rec = params->record_every;
    c.leapfrog = params->method == TF_PHYSICS_LEAPFROG;
    c.shared = plan.shared;
    c.threads = plan.threads;
    c.dt = (P_REAL)params->dt;
    c.half_dt = (P_REAL)(0.5 * params->dt);
    c.eps2 = (P_REAL)(params->softening * params->softening);
    c.G = (P_REAL)params->G;
    c.k = P(tf_phys_pick_kernels)(!(c.eps2 >= P_GUARD_EPS2));
    c.use_rows = c.k.rows != NULL && n >= TF_PHYS_ROWS_MIN && n < INT32_MAX / 2;
    /* Shared mode units: ~4 per thread and system, at least a padding block each. */
    c.blk = (n + 4 * plan.threads - 1) / (4 * plan.threads);
    c.blk = (c.blk + TF_PHYS_PAD - 1) / TF_PHYS_PAD * TF_PHYS_PAD;
    const int64_t nblk = (n + c.blk - 1) / c.blk;
    c.nforce = c.use_rows ? (4 * plan.threads < n / 16 ? 4 * plan.threads : (n / 16 > 0 ? n / 16 : 1)) : nblk;

    /* Scratch: positions, accelerations, half-step velocities (3 npad each) and G m
     * (npad) per system; the row kernel's buffers (3 npad each); progress slots. */
    const size_t nbufs = !c.use_rows ? 0 : plan.shared ? (size_t)b * (size_t)c.nforce : (size_t)plan.threads;
    /* Batches of systems: groups of lw systems side by side, when there are enough
     * groups for every thread (the rest of the systems: one at a time). */
    if (!plan.shared && c.k.lanes && n >= 2 && n <= TF_PHYS_LANES_MAX) {
        c.lw = c.k.lanes_w;
        c.groups = b / c.lw >= plan.threads ? b / c.lw : 0;
    }
    c.first = c.groups * c.lw;
    const size_t singles = (size_t)(b - c.first); /* systems with scratch of their own */
    const size_t lane_reals = c.groups ? (size_t)plan.threads * 13 * (size_t)(n * c.lw) : 0;
    const size_t reals = (singles * 10 + nbufs * 3) * (size_t)c.npad + lane_reals;
    const size_t slots_at = (reals * sizeof(P_REAL) + 63) / 64 * 64;
    char *scratch = tf_phys_alloc(slots_at + (size_t)plan.threads * sizeof(tf_phys_slot));
    if (!scratch)
        return tf_error(TF_ENOMEM, "%s: cannot allocate scratch for %lld x %lld bodies", fname, (long long)b,
                        (long long)n);
    P_REAL *r = (P_REAL *)scratch;
    c.xs = r;
    c.acc = r + singles * 3 * c.npad;
    c.vh = r + singles * 6 * c.npad;
    c.gm = r + singles * 9 * c.npad;
    c.bufs = r + singles * 10 * c.npad;
    c.lanebufs = c.bufs + nbufs * 3 * (size_t)c.npad;
    c.slots = (tf_phys_slot *)(scratch + slots_at);
    for (int t = 0; t < plan.threads; t++) atomic_init(&c.slots[t].steps, 0);
    /* Large fresh buffers are faulted in here, before the threads write them. */
    tf_populate(scratch, (int64_t)slots_at);
    if (frames > 0) tf_populate(traj, b * frames * n * 3 * (int64_t)sizeof(P_REAL));

    tf_rt_opts o = {.threads = plan.threads, .fn = fn, .handle = handle, .done = P(tf_phys_done),
                    .done_ctx = &c, .total = params->steps, .interval = TF_PHYS_REPORT_S};
    rc = tf_rt_run(&o, P(tf_phys_driver), &c);
    int64_t stopped_at = P(tf_phys_done)(&c);
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
/* The parameters of this instantiation. */
#undef P_REAL
#undef P_SFX
#undef P_SQRT
