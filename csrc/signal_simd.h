/* SPDX-License-Identifier: MIT */
/*
 * signal_simd.h — the IIR kernels of signal.c, written once and compiled several
 * times: once per (I/O element type, compute type, real or complex coefficients,
 * SIMD level). signal.c includes this file with these macros defined:
 *
 *   SFX        suffix of every name defined here (e.g. f32_avx2)
 *   IO         element type of x, y, zi, zf, gy, gx... (float or double)
 *   CT         compute type of the recursion (the states live in CT)
 *   VT         a vector type of NL elements of CT (GCC/clang vector extension)
 *   NL         number of lanes
 *   ATTR       function attributes (target("avx2,fma")...), may be empty
 *   VFMA(a,b,c) a*b + c on VT (fused where the target has FMA)
 *   WAVE_SHIFT(v, x) the wavefront's lane shift: (x, v[0], ..., v[NL-2])
 *   SWAP_PAIRS(v)    (complex kernels) (v[1], v[0], v[3], v[2], ...)
 *   TRANSPOSE_LOAD/STORE   (optional) in-register transposes for rows (inner = 1)
 *   TRANSPOSE_LOAD2/STORE2 (optional) the same for pairs (inner = 2: complex rows)
 *   EXACT      (optional) SciPy's exact operation order (see SOS_STEP)
 *   CPLX       (optional) complex coefficients: a channel is two adjacent lanes
 *              (real, imaginary), the layout of interleaved complex numbers
 *   NO_WAVE, NO_BACKWARD (optional) skip those kernels in this instantiation
 *
 * All but ATTR are #undef'd at the end of this file.
 *
 * Layout (see tensorffi.h): a signal is [outer, n, inner] C-contiguous and filtered
 * along n; its states are [n_sections, outer, 2, inner]. A complex signal is seen
 * as real numbers with inner doubled (real and imaginary parts interleaved). A
 * "group" is up to NL real channels filtered together, one per lane (struct
 * tf_sos_group in signal.c). Blocks of samples are moved between memory and a
 * lane-major buffer of VT (buf[t] holds sample t of every lane), so the recursion
 * runs on whole vectors.
 *
 * Only GCC/clang vector extensions both compilers accept are used (element
 * access, arithmetic, __builtin_convertvector); shuffles are intrinsics passed in
 * by signal.c.
 */

#define FN(name) TF_SOS_CAT(name, SFX)

#ifdef CPLX
#define KC 2 /* vectors per coefficient: real part, signed imaginary part */
#else
#define KC 1
#endif
/* Vectors per section in a coefficient array (see coefs()). */
#define NCFK (7 * KC)

typedef IO FN(iovec) __attribute__((vector_size(NL * sizeof(IO)), aligned(sizeof(IO))));

static inline ATTR VT FN(splat)(CT c) {
    VT v;
    for (int l = 0; l < NL; l++) v[l] = c;
    return v;
}

/* c * v for a coefficient c given as KC vectors, and c * v + a. A complex
 * coefficient (cr, ci) is kept as (cr, cr, ...) and (-ci, ci, -ci, ci, ...), so
 * that c * v = cr v + ci' swap(v) gives (cr vr - ci vi, cr vi + ci vr) in each
 * pair of lanes: in EXACT kernels these are the products and the sum of a C
 * complex multiplication, in the same order (SciPy's complex128 results, bitwise). */
#ifdef CPLX
#define CMUL(c, v) ((c)[0] * (v) + (c)[1] * SWAP_PAIRS(v))
#define CFMA(c, v, a) VFMA((c)[0], (v), VFMA((c)[1], SWAP_PAIRS(v), (a)))
#else
#define CMUL(c, v) ((c)[0] * (v))
#define CFMA(c, v, a) VFMA((c)[0], (v), (a))
#endif

/* buf[t] = x[lanes, t0 + t] for t < T (dead lanes read as zero). */
static ATTR void FN(load)(const IO *x, const tf_sos_group *g, int64_t ts, int64_t t0, int64_t T, VT *buf) {
    if (g->contiguous) {
        const IO *p = x + g->base[0] + t0 * ts;
        for (int64_t t = 0; t < T; t++, p += ts) buf[t] = __builtin_convertvector(*(const FN(iovec) *)p, VT);
        return;
    }
#ifdef TRANSPOSE_LOAD
    if (ts == 1 && g->nl == NL) {
        TRANSPOSE_LOAD(x, g, t0, T, buf);
        return;
    }
#endif
#ifdef TRANSPOSE_LOAD2
    if (ts == 2 && g->nl == NL) {
        TRANSPOSE_LOAD2(x, g, t0, T, buf);
        return;
    }
#endif
    CT *b = (CT *)buf;
    for (int l = 0; l < NL; l++) {
        if (l < g->nl) {
            const IO *p = x + g->base[l] + t0 * ts;
            for (int64_t t = 0; t < T; t++) b[t * NL + l] = (CT)p[t * ts];
        } else {
            for (int64_t t = 0; t < T; t++) b[t * NL + l] = 0;
        }
    }
}

/* y[lanes, t0 + t] = buf[t] for t < T (dead lanes are not written). */
static ATTR void FN(store)(IO *y, const tf_sos_group *g, int64_t ts, int64_t t0, int64_t T, const VT *buf) {
    if (g->contiguous) {
        IO *p = y + g->base[0] + t0 * ts;
        for (int64_t t = 0; t < T; t++, p += ts) *(FN(iovec) *)p = __builtin_convertvector(buf[t], FN(iovec));
        return;
    }
#ifdef TRANSPOSE_STORE
    if (ts == 1 && g->nl == NL) {
        TRANSPOSE_STORE(y, g, t0, T, buf);
        return;
    }
#endif
#ifdef TRANSPOSE_STORE2
    if (ts == 2 && g->nl == NL) {
        TRANSPOSE_STORE2(y, g, t0, T, buf);
        return;
    }
#endif
    const CT *b = (const CT *)buf;
    for (int l = 0; l < g->nl; l++) {
        IO *p = y + g->base[l] + t0 * ts;
        for (int64_t t = 0; t < T; t++) p[t * ts] = (IO)b[t * NL + l];
    }
}

/* z[2 s + k] = zi[s, lane, k] (zeros where zi is NULL or the lane is dead). */
static ATTR void FN(state_load)(const IO *zi, const tf_sos_group *g, int64_t sstride, int64_t inner, int64_t S, VT *z) {
    for (int64_t s = 0; s < S; s++)
        for (int k = 0; k < 2; k++) {
            VT v = FN(splat)(0);
            if (zi)
                for (int l = 0; l < g->nl; l++) v[l] = (CT)zi[s * sstride + k * inner + g->zoff[l]];
            z[2 * s + k] = v;
        }
}

static ATTR void FN(state_store)(IO *zf, const tf_sos_group *g, int64_t sstride, int64_t inner, int64_t S, const VT *z) {
    if (!zf) return;
    for (int64_t s = 0; s < S; s++)
        for (int k = 0; k < 2; k++)
            for (int l = 0; l < g->nl; l++) zf[s * sstride + k * inner + g->zoff[l]] = (IO)z[2 * s + k][l];
}

/* A coefficient (re, im) as KC vectors: (re, re, ...) and, for complex
 * coefficients, (-im, im, -im, im, ...). */
static inline ATTR void FN(coef)(double re, double im, VT *c) {
    c[0] = FN(splat)((CT)re);
#ifdef CPLX
    for (int l = 0; l < NL; l++) c[1][l] = (CT)(l % 2 ? im : -im);
#else
    (void)im;
#endif
}

/* cf[NCFK s + KC k ...] = coefficient k of section s, k = 0..6: (b0, b1, b2, -a1,
 * -a2, b1 - a1 b0, b2 - a2 b0), each broadcast to every lane (KC vectors). sos
 * rows are 6 reals, or for complex kernels 6 (re, im) pairs. */
static ATTR void FN(coefs)(const double *sos, int64_t S, VT *cf) {
    for (int64_t s = 0; s < S; s++) {
        VT *c = cf + NCFK * s;
#ifdef CPLX
        const double *r = sos + 12 * s;
        const double b0r = r[0], b0i = r[1], b1r = r[2], b1i = r[3], b2r = r[4], b2i = r[5];
        const double a1r = r[8], a1i = r[9], a2r = r[10], a2i = r[11];
#else
        const double *r = sos + 6 * s;
        const double b0r = r[0], b0i = 0, b1r = r[1], b1i = 0, b2r = r[2], b2i = 0;
        const double a1r = r[4], a1i = 0, a2r = r[5], a2i = 0;
#endif
        FN(coef)(b0r, b0i, c + 0 * KC);
        FN(coef)(b1r, b1i, c + 1 * KC);
        FN(coef)(b2r, b2i, c + 2 * KC);
        FN(coef)(-a1r, -a1i, c + 3 * KC);
        FN(coef)(-a2r, -a2i, c + 4 * KC);
        /* b1 - a1 b0 and b2 - a2 b0 (complex products when CPLX) */
        FN(coef)(b1r - (a1r * b0r - a1i * b0i), b1i - (a1r * b0i + a1i * b0r), c + 5 * KC);
        FN(coef)(b2r - (a2r * b0r - a2i * b0i), b2i - (a2r * b0i + a2i * b0r), c + 6 * KC);
    }
}

/* One section, one sample: v -> y, states (z0, z1) updated; C is the section's
 * coefficient block (7 coefficients of KC vectors). With EXACT defined (the float64
 * kernels) it is SciPy's direct form II transposed operation for operation,
 * unfused:  y = b0 x + z0;  z0 = (b1 x - a1 y) + z1;  z1 = b2 x - a2 y,
 * so float64 results are bitwise those of scipy.signal.sosfilt. Otherwise (the
 * float32 kernels) it is the state-space form of the same recursion, fused:
 *   y = b0 x + z0;  z0' = -a1 z0 + (b1 - a1 b0) x + z1;  z1' = -a2 z0 + (b2 - a2 b0) x,
 * whose loop-carried dependency is one FMA instead of four operations, and which
 * avoids the cancellation between b1 x and a1 y of high-pass sections. */
#ifdef EXACT
#define SOS_STEP(v, y, C, z0, z1)                                           \
    do {                                                                    \
        (y) = CMUL((C) + 0 * KC, (v)) + (z0);                               \
        (z0) = (CMUL((C) + 1 * KC, (v)) + CMUL((C) + 3 * KC, (y))) + (z1);  \
        (z1) = CMUL((C) + 2 * KC, (v)) + CMUL((C) + 4 * KC, (y));           \
    } while (0)
#else
#define SOS_STEP(v, y, C, z0, z1)                                           \
    do {                                                                    \
        (y) = CFMA((C) + 0 * KC, (v), (z0));                                \
        VT nz0_ = CFMA((C) + 3 * KC, (z0), CFMA((C) + 5 * KC, (v), (z1)));  \
        (z1) = CFMA((C) + 4 * KC, (z0), CMUL((C) + 6 * KC, (v)));           \
        (z0) = nz0_;                                                        \
    } while (0)
#endif

/* Up to four sections over T samples of buf, in place, sample by sample (so the
 * out-of-order core overlaps the sections' recursions). `S` and `rev` are
 * constants after inlining: states and coefficients stay in registers. */
static inline __attribute__((always_inline)) ATTR void FN(run_k)(VT *buf, int64_t T, const VT *cf, VT *z, const int S,
                                                                 const int rev) {
    VT c[4][NCFK], z0[4], z1[4];
    for (int s = 0; s < S; s++) {
        for (int k = 0; k < NCFK; k++) c[s][k] = cf[NCFK * s + k];
        z0[s] = z[2 * s];
        z1[s] = z[2 * s + 1];
    }
    for (int64_t k = 0; k < T; k++) {
        const int64_t t = rev ? T - 1 - k : k;
        VT v = buf[t];
        for (int s = 0; s < S; s++) {
            VT y;
            SOS_STEP(v, y, c[s], z0[s], z1[s]);
            v = y;
        }
        buf[t] = v;
    }
    for (int s = 0; s < S; s++) {
        z[2 * s] = z0[s];
        z[2 * s + 1] = z1[s];
    }
}

/* All S sections over buf[0..T), forward in time (rev = 0) or backward (rev = 1). */
static ATTR void FN(run)(VT *buf, int64_t T, const VT *cf, VT *z, int64_t S, int rev) {
    for (int64_t s0 = 0; s0 < S; s0 += 4) {
        int64_t k = S - s0 < 4 ? S - s0 : 4;
        const VT *c = cf + NCFK * s0;
        VT *zz = z + 2 * s0;
        if (rev) {
            switch (k) {
            case 1: FN(run_k)(buf, T, c, zz, 1, 1); break;
            case 2: FN(run_k)(buf, T, c, zz, 2, 1); break;
            case 3: FN(run_k)(buf, T, c, zz, 3, 1); break;
            default: FN(run_k)(buf, T, c, zz, 4, 1); break;
            }
        } else {
            switch (k) {
            case 1: FN(run_k)(buf, T, c, zz, 1, 0); break;
            case 2: FN(run_k)(buf, T, c, zz, 2, 0); break;
            case 3: FN(run_k)(buf, T, c, zz, 3, 0); break;
            default: FN(run_k)(buf, T, c, zz, 4, 0); break;
            }
        }
    }
}

/* ---- sosfilt ------------------------------------------------------------- */

/* buf[b cap + t] = x[lanes of group b, t0 + t] for nb full groups that follow each
 * other along one row (group b's lanes start at base0 + b NL): read sample by
 * sample, so memory is swept in address order and the hardware prefetchers stream
 * it (group by group, each pass would touch every line of the block again). */
static ATTR void FN(load_row)(const IO *x, int64_t base0, int64_t ts, int64_t t0, int64_t T, int64_t nb, VT *buf,
                              int64_t cap) {
    const IO *p = x + base0 + t0 * ts;
    for (int64_t t = 0; t < T; t++, p += ts)
        for (int64_t b = 0; b < nb; b++) buf[b * cap + t] = __builtin_convertvector(*(const FN(iovec) *)(p + b * NL), VT);
}

static ATTR void FN(store_row)(IO *y, int64_t base0, int64_t ts, int64_t t0, int64_t T, int64_t nb, const VT *buf,
                               int64_t cap) {
    IO *p = y + base0 + t0 * ts;
    for (int64_t t = 0; t < T; t++, p += ts)
        for (int64_t b = 0; b < nb; b++) *(FN(iovec) *)(p + b * NL) = __builtin_convertvector(buf[b * cap + t], FN(iovec));
}

static ATTR int FN(sosfilt_range)(void *vctx, int64_t g0, int64_t g1) {
    const tf_sos_job *job = (const tf_sos_job *)vctx;
    const int64_t S = job->S, n = job->lo.n, inner = job->lo.inner, sstride = job->lo.outer * 2 * inner;
    /* Groups whose lanes are adjacent in memory are filtered a row's batch at a
     * time, block by block (blocks of the whole batch fit L1), so each block of a
     * row is read from memory once, in order. */
    const int by_row = job->lo.by_row;
    const int64_t batch = by_row ? TF_SOS_BATCH : 1;
    int64_t blk = job->blk;
    if (by_row) {
        const int64_t per = job->lo.per_row < batch ? job->lo.per_row : batch;
        blk = (int64_t)(32768 / ((size_t)per * sizeof(VT)));
        blk = blk < 16 ? 16 : blk > TF_SOS_BLOCK_MAX ? TF_SOS_BLOCK_MAX : blk;
    }
    const int64_t cap = TF_SOS_BLOCK_MAX;
    VT *mem = (VT *)tf_sos_alloc((size_t)(NCFK * S + batch * 2 * S + batch * cap) * sizeof(VT));
    if (!mem) return tf_error(TF_ENOMEM, "sosfilt: out of memory");
    VT *cf = mem, *z = cf + NCFK * S, *buf = z + batch * 2 * S;
    FN(coefs)(job->sos, S, cf);
    tf_sos_group g[TF_SOS_BATCH];
    int64_t polled = 0, stop = 0;
    for (int64_t gb = g0, nb; gb < g1 && !stop; gb += nb) {
        nb = g1 - gb < batch ? g1 - gb : batch;
        if (by_row && nb > job->lo.per_row - gb % job->lo.per_row) nb = job->lo.per_row - gb % job->lo.per_row;
        int64_t nfull = 0; /* the full groups come first: only a row's last group can be partial */
        for (int64_t b = 0; b < nb; b++) {
            tf_sos_group_init(&job->lo, gb + b, NL, &g[b]);
            g[b].nt = job->nt;
            if (by_row && g[b].contiguous && nfull == b) nfull++;
            FN(state_load)((const IO *)job->zi, &g[b], sstride, inner, S, z + b * 2 * S);
        }
        for (int64_t t0 = 0; t0 < n; t0 += blk) {
            int64_t T = n - t0 < blk ? n - t0 : blk;
            if (nfull > 0) {
                FN(load_row)((const IO *)job->x, g[0].base[0], inner, t0, T, nfull, buf, cap);
                for (int64_t b = 0; b < nfull; b++) FN(run)(buf + b * cap, T, cf, z + b * 2 * S, S, 0);
                FN(store_row)((IO *)job->y, g[0].base[0], inner, t0, T, nfull, buf, cap);
            }
            for (int64_t b = nfull; b < nb; b++) {
                FN(load)((const IO *)job->x, &g[b], inner, t0, T, buf);
                FN(run)(buf, T, cf, z + b * 2 * S, S, 0);
                FN(store)((IO *)job->y, &g[b], inner, t0, T, buf);
            }
            if (TF_SOS_STOPPING(job, polled, T * nb * S)) {
                stop = 1;
                break;
            }
        }
        if (stop) break; /* zf keeps what it held for the groups not finished */
        for (int64_t b = 0; b < nb; b++) FN(state_store)((IO *)job->zf, &g[b], sstride, inner, S, z + b * 2 * S);
    }
    if (job->nt) TF_SOS_SFENCE();
    free(mem);
    return stop ? TF_EINTERRUPTED : TF_OK;
}

/* ---- one channel: the sections spread over the lanes ---------------------- */

#ifndef NO_WAVE
/* A lone channel leaves the lanes of the kernels above empty, so it is filtered
 * as a wavefront instead: lane l runs section s0 + l, and at step k it filters
 * sample k - 2 l, taking its input from lane l - 1's output two steps before (a
 * skew of two steps lets two samples travel through the vector at once). A pass
 * takes up to NL sections; lanes beyond them run the identity section (exact),
 * so the output always leaves from the last lane, 2 (NL - 1) steps after its
 * input came in. y may equal x (outputs trail inputs). Same arithmetic as the
 * lane kernels (SOS_STEP), so a channel's result does not depend on its batch. */
static ATTR int FN(wave_pass)(const tf_sos_job *job, const IO *x, IO *y, int64_t ts, int64_t n, const double *sos,
                              int64_t P, CT *zs) {
    VT C[7], z0 = FN(splat)(0), z1 = z0, prev1 = z0, prev2 = z0;
    C[0] = FN(splat)(1);
    for (int k = 1; k < 7; k++) C[k] = z0;
    for (int l = 0; l < P; l++) {
        const double *r = sos + 6 * l;
        C[0][l] = (CT)r[0];
        C[1][l] = (CT)r[1];
        C[2][l] = (CT)r[2];
        C[3][l] = (CT)-r[4];
        C[4][l] = (CT)-r[5];
        C[5][l] = (CT)(r[1] - r[4] * r[0]);
        C[6][l] = (CT)(r[2] - r[5] * r[0]);
        z0[l] = zs[2 * l];
        z1[l] = zs[2 * l + 1];
    }
    const int64_t lag = 2 * (NL - 1), steps = n + lag;
    const int64_t head = lag < n ? lag : n; /* steps [0, head): the wavefront fills */
    int64_t k = 0;
    /* Filling (k < lag) and draining (k >= n): lanes without a sample keep their state. */
    for (; k < head; k++) {
        VT v = WAVE_SHIFT(prev2, (CT)x[k * ts]);
        VT yv, nz0 = z0, nz1 = z1;
        SOS_STEP(v, yv, C, nz0, nz1);
        for (int l = 0; l < NL; l++)
            if (2 * l <= k) {
                z0[l] = nz0[l];
                z1[l] = nz1[l];
            }
        prev2 = prev1;
        prev1 = yv;
    }
    const IO *xp = x + k * ts;
    IO *yp = y;
    int64_t polled = 0;
    /* in stretches of TF_SOS_POLL_WORK / NL steps, between which the run is polled */
    for (int64_t kend; k < n; k = kend) {
        kend = job->rt && n - k > TF_SOS_POLL_WORK / NL ? k + TF_SOS_POLL_WORK / NL : n;
        for (; k < kend; k++, xp += ts, yp += ts) {
            VT v = WAVE_SHIFT(prev2, (CT)*xp);
            VT yv;
            SOS_STEP(v, yv, C, z0, z1);
            prev2 = prev1;
            prev1 = yv;
            *yp = (IO)yv[NL - 1];
        }
        if (TF_SOS_STOPPING(job, polled, TF_SOS_POLL_WORK)) return 1;
    }
    for (; k < steps; k++) {
        VT v = WAVE_SHIFT(prev2, 0);
        VT yv, nz0 = z0, nz1 = z1;
        SOS_STEP(v, yv, C, nz0, nz1);
        for (int l = 0; l < NL; l++)
            if (2 * l <= k && k - 2 * l < n) {
                z0[l] = nz0[l];
                z1[l] = nz1[l];
            }
        prev2 = prev1;
        prev1 = yv;
        if (k >= lag) y[(k - lag) * ts] = (IO)yv[NL - 1];
    }
    for (int l = 0; l < P; l++) {
        zs[2 * l] = z0[l];
        zs[2 * l + 1] = z1[l];
    }
    return 0;
}

static ATTR int FN(wave_range)(void *vctx, int64_t c0, int64_t c1) {
    const tf_sos_job *job = (const tf_sos_job *)vctx;
    const int64_t S = job->S, n = job->lo.n, inner = job->lo.inner, sstride = job->lo.outer * 2 * inner;
    CT zs[2 * NL];
    for (int64_t c = c0; c < c1; c++) {
        const int64_t o = c / inner, i = c % inner, base = o * n * inner + i, zoff = o * 2 * inner + i;
        const IO *src = (const IO *)job->x + base;
        IO *dst = (IO *)job->y + base;
        for (int64_t s0 = 0; s0 < S; s0 += NL) {
            const int64_t P = S - s0 < NL ? S - s0 : NL;
            for (int64_t l = 0; l < P; l++)
                for (int k = 0; k < 2; k++)
                    zs[2 * l + k] = job->zi ? (CT)((const IO *)job->zi)[(s0 + l) * sstride + k * inner + zoff] : 0;
            if (FN(wave_pass)(job, src, dst, inner, n, job->sos + 6 * s0, P, zs)) return TF_EINTERRUPTED;
            if (job->zf)
                for (int64_t l = 0; l < P; l++)
                    for (int k = 0; k < 2; k++) ((IO *)job->zf)[(s0 + l) * sstride + k * inner + zoff] = (IO)zs[2 * l + k];
            src = dst; /* later passes filter y in place */
        }
    }
    return TF_OK;
}
#endif /* NO_WAVE */

/* ---- sosfilt backward ---------------------------------------------------- */

#ifndef NO_BACKWARD
/* Forward over sig[0..T) keeping every section's output: sig[(s + 1) cap + t] is
 * the output of section s (the input of section s + 1). */
static inline __attribute__((always_inline)) ATTR void FN(keep_k)(VT *sig, int64_t cap, int64_t T, const VT *cf, VT *z,
                                                                  const int S) {
    VT c[4][NCFK], z0[4], z1[4];
    for (int s = 0; s < S; s++) {
        for (int k = 0; k < NCFK; k++) c[s][k] = cf[NCFK * s + k];
        z0[s] = z[2 * s];
        z1[s] = z[2 * s + 1];
    }
    for (int64_t t = 0; t < T; t++) {
        VT v = sig[t];
        for (int s = 0; s < S; s++) {
            VT y;
            SOS_STEP(v, y, c[s], z0[s], z1[s]);
            sig[(s + 1) * cap + t] = y;
            v = y;
        }
    }
    for (int s = 0; s < S; s++) {
        z[2 * s] = z0[s];
        z[2 * s + 1] = z1[s];
    }
}

static ATTR void FN(keep)(VT *sig, int64_t cap, int64_t T, const VT *cf, VT *z, int64_t S) {
    for (int64_t s0 = 0; s0 < S; s0 += 4) {
        int64_t k = S - s0 < 4 ? S - s0 : 4;
        VT *sg = sig + s0 * cap;
        const VT *c = cf + NCFK * s0;
        VT *zz = z + 2 * s0;
        switch (k) {
        case 1: FN(keep_k)(sg, cap, T, c, zz, 1); break;
        case 2: FN(keep_k)(sg, cap, T, c, zz, 2); break;
        case 3: FN(keep_k)(sg, cap, T, c, zz, 3); break;
        default: FN(keep_k)(sg, cap, T, c, zz, 4); break;
        }
    }
}

/* The adjoint of one section over a segment, backward in time. On entry g[t] is
 * dL/dy_t of the section's output, mu = (mu_{T}, mu_{T+1}) carried from the next
 * segment (or dL/dzf); on return g[t] = dL/dx_t and mu = (mu_0, mu_1), where
 *   mu_t = g_t - a1 mu_{t+1} - a2 mu_{t+2},   dL/dx_t = b0 mu_t + b1 mu_{t+1} + b2 mu_{t+2}.
 * acc += (sum mu_t x_t, sum mu_{t+1} x_t, sum mu_{t+2} x_t, sum mu_{t+1} y_t,
 * sum mu_{t+2} y_t): the gradients of b0, b1, b2, -a1, -a2. */
static ATTR void FN(adjoint)(VT *g, const VT *xs, const VT *ys, int64_t T, const VT *cf, VT *mu, VT *acc) {
    const VT b0 = cf[0], b1 = cf[1], b2 = cf[2], n1 = cf[3], n2 = cf[4];
    VT m1 = mu[0], m2 = mu[1];
    VT A0 = FN(splat)(0), A1 = A0, A2 = A0, A3 = A0, A4 = A0;
    for (int64_t t = T - 1; t >= 0; t--) {
        const VT xv = xs[t], yv = ys[t];
        const VT m = VFMA(n1, m1, VFMA(n2, m2, g[t]));
        g[t] = VFMA(b0, m, VFMA(b1, m1, b2 * m2));
        A0 = VFMA(m, xv, A0);
        A1 = VFMA(m1, xv, A1);
        A2 = VFMA(m2, xv, A2);
        A3 = VFMA(m1, yv, A3);
        A4 = VFMA(m2, yv, A4);
        m2 = m1;
        m1 = m;
    }
    mu[0] = m1;
    mu[1] = m2;
    acc[0] += A0;
    acc[1] += A1;
    acc[2] += A2;
    acc[3] += A3;
    acc[4] += A4;
}

static ATTR int FN(backward_range)(void *vctx, int64_t c0, int64_t c1) {
    const tf_sos_job *job = (const tf_sos_job *)vctx;
    const int64_t S = job->S, n = job->lo.n, inner = job->lo.inner, sstride = job->lo.outer * 2 * inner;
    const int64_t cap = job->seg, nseg = n > 0 ? (n + cap - 1) / cap : 0;
    size_t count = (size_t)(NCFK * S + 2 * S + 2 * S + 5 * S + nseg * 2 * S + (S + 2) * cap);
    VT *mem = (VT *)tf_sos_alloc(count * sizeof(VT));
    double *accd = (double *)malloc((size_t)(5 * S * NL + 1) * sizeof(double));
    if (!mem || !accd) {
        free(mem);
        free(accd);
        return tf_error(TF_ENOMEM, "sosfilt backward: out of memory");
    }
    VT *cf = mem, *z = cf + NCFK * S, *mu = z + 2 * S, *acc = mu + 2 * S, *ckpt = acc + 5 * S;
    VT *sig = ckpt + nseg * 2 * S, *gbuf = sig + (S + 1) * cap;
    FN(coefs)(job->sos, S, cf);
    tf_sos_group g;
    int64_t polled = 0;
    for (int64_t c = c0; c < c1; c++) {
        double *part = job->partial + c * 5 * S;
        int64_t gend = (c + 1) * job->per_chunk < job->lo.ngroups ? (c + 1) * job->per_chunk : job->lo.ngroups;
        for (int64_t gi = c * job->per_chunk; gi < gend; gi++) {
            tf_sos_group_init(&job->lo, gi, NL, &g);
            /* Pass 1: run forward from zi, keeping the states at segment starts. */
            FN(state_load)((const IO *)job->zi, &g, sstride, inner, S, z);
            for (int64_t j = 0; j < nseg; j++) {
                int64_t t0 = j * cap, T = n - t0 < cap ? n - t0 : cap;
                memcpy(ckpt + j * 2 * S, z, (size_t)(2 * S) * sizeof(VT));
                FN(load)((const IO *)job->x, &g, inner, t0, T, sig);
                FN(run)(sig, T, cf, z, S, 0);
                if (TF_SOS_STOPPING(job, polled, T * S)) goto stopped;
            }
            /* Pass 2: segments from the last, each recomputed with every section's
             * input kept, then the adjoint of the sections from the last. */
            FN(state_load)((const IO *)job->gzf, &g, sstride, inner, S, mu);
            for (int64_t k = 0; k < 5 * S; k++) acc[k] = FN(splat)(0);
            for (int64_t k = 0; k < 5 * S * NL; k++) accd[k] = 0.0;
            for (int64_t j = nseg - 1; j >= 0; j--) {
                int64_t t0 = j * cap, T = n - t0 < cap ? n - t0 : cap;
                memcpy(z, ckpt + j * 2 * S, (size_t)(2 * S) * sizeof(VT));
                FN(load)((const IO *)job->x, &g, inner, t0, T, sig);
                FN(keep)(sig, cap, T, cf, z, S);
                FN(load)((const IO *)job->gy, &g, inner, t0, T, gbuf);
                for (int64_t s = S - 1; s >= 0; s--)
                    FN(adjoint)(gbuf, sig + s * cap, sig + (s + 1) * cap, T, cf + NCFK * s, mu + 2 * s, acc + 5 * s);
                FN(store)((IO *)job->gx, &g, inner, t0, T, gbuf);
                for (int64_t k = 0; k < 5 * S; k++) {
                    for (int l = 0; l < NL; l++) accd[k * NL + l] += (double)acc[k][l];
                    acc[k] = FN(splat)(0);
                }
                /* the recomputation, the adjoint and the gradient sums: ~3 forward passes */
                if (TF_SOS_STOPPING(job, polled, 3 * T * S)) goto stopped;
            }
            FN(state_store)((IO *)job->gzi, &g, sstride, inner, S, mu);
            for (int64_t k = 0; k < 5 * S; k++)
                for (int l = 0; l < g.nl; l++) part[k] += accd[k * NL + l];
        }
    }
    free(accd);
    free(mem);
    return TF_OK;
stopped:
    free(accd);
    free(mem);
    return TF_EINTERRUPTED;
}
#endif /* NO_BACKWARD */

/* ---- sosfiltfilt --------------------------------------------------------- */

/* pad[i] = ext(x[lanes, from + E - 1 - i]) for i < E: the reflected samples of an
 * edge, in the order the filter meets them (`edge` is x at the boundary). */
static ATTR void FN(make_pad)(const IO *x, const tf_sos_group *g, int64_t ts, int64_t from, int64_t E, int padtype,
                              VT edge, VT *pad) {
    FN(load)(x, g, ts, from, E, pad);
    for (int64_t i = 0, j = E - 1; i < j; i++, j--) {
        VT tmp = pad[i];
        pad[i] = pad[j];
        pad[j] = tmp;
    }
    if (padtype == TF_SIGNAL_PAD_ODD) {
        VT two = edge + edge;
        for (int64_t i = 0; i < E; i++) pad[i] = two - pad[i];
    } else if (padtype == TF_SIGNAL_PAD_CONSTANT) {
        for (int64_t i = 0; i < E; i++) pad[i] = edge;
    }
}

static ATTR int FN(filtfilt_range)(void *vctx, int64_t g0, int64_t g1) {
    const tf_sos_job *job = (const tf_sos_job *)vctx;
    const int64_t S = job->S, n = job->lo.n, inner = job->lo.inner, E = job->edge;
    const IO *x = (const IO *)job->x;
    IO *y = (IO *)job->y;
    const int64_t blk = job->blk;
    VT *mem = (VT *)tf_sos_alloc((size_t)(NCFK * S + 2 * KC * S + 2 * S + TF_SOS_BLOCK_MAX + E + 1) * sizeof(VT));
    if (!mem) return tf_error(TF_ENOMEM, "sosfiltfilt: out of memory");
    VT *cf = mem, *zss = cf + NCFK * S, *z = zss + 2 * KC * S, *buf = z + 2 * S, *pad = buf + TF_SOS_BLOCK_MAX;
    FN(coefs)(job->sos, S, cf);
    /* the steady state zi[s, k] as a coefficient: zi * x is SciPy's product */
    const double *zi = (const double *)job->zi;
    for (int64_t k = 0; k < 2 * S; k++) FN(coef)(zi[KC * k], KC == 2 ? zi[KC * k + KC - 1] : 0.0, zss + KC * k);
    const int64_t nblk = (n + blk - 1) / blk;
    tf_sos_group g;
    int64_t polled = 0, stop = 0;
    for (int64_t gi = g0; gi < g1 && !stop; gi++) {
        tf_sos_group_init(&job->lo, gi, NL, &g);
        VT first, last, start;
        FN(load)(x, &g, inner, 0, 1, &first);
        FN(load)(x, &g, inner, n - 1, 1, &last);
        /* forward over [left pad, x, right pad], from the steady state of ext[0] */
        if (E > 0) FN(make_pad)(x, &g, inner, 1, E, job->padtype, first, pad);
        start = E > 0 ? pad[0] : first;
        for (int64_t k = 0; k < 2 * S; k++) z[k] = CMUL(zss + KC * k, start);
        if (E > 0) FN(run)(pad, E, cf, z, S, 0);
        VT yend = first;
        for (int64_t b = 0; b < nblk; b++) {
            int64_t t0 = b * blk, T = n - t0 < blk ? n - t0 : blk;
            FN(load)(x, &g, inner, t0, T, buf);
            FN(run)(buf, T, cf, z, S, 0);
            FN(store)(y, &g, inner, t0, T, buf);
            yend = buf[T - 1];
            if (TF_SOS_STOPPING(job, polled, T * S)) {
                stop = 1;
                break;
            }
        }
        if (stop) break;
        if (E > 0) {
            FN(make_pad)(x, &g, inner, n - 1 - E, E, job->padtype, last, pad);
            FN(run)(pad, E, cf, z, S, 0);
            yend = pad[E - 1];
        }
        /* backward, from the steady state of the forward output's last sample; its
         * stores are final (the forward pass's are read back, so cached) */
        for (int64_t k = 0; k < 2 * S; k++) z[k] = CMUL(zss + KC * k, yend);
        if (E > 0) FN(run)(pad, E, cf, z, S, 1);
        g.nt = job->nt;
        for (int64_t b = nblk - 1; b >= 0; b--) {
            int64_t t0 = b * blk, T = n - t0 < blk ? n - t0 : blk;
            FN(load)(y, &g, inner, t0, T, buf);
            FN(run)(buf, T, cf, z, S, 1);
            FN(store)(y, &g, inner, t0, T, buf);
            if (TF_SOS_STOPPING(job, polled, T * S)) {
                stop = 1;
                break;
            }
        }
    }
    if (job->nt) TF_SOS_SFENCE();
    free(mem);
    return stop ? TF_EINTERRUPTED : TF_OK;
}

#undef FN
#undef KC
#undef NCFK
#undef CMUL
#undef CFMA
#undef SOS_STEP
/* The parameters of this instantiation (ATTR stays: it is shared by a SIMD level). */
#undef SFX
#undef IO
#undef CT
#undef VT
#undef NL
#undef VFMA
#undef WAVE_SHIFT
#undef SWAP_PAIRS
#undef TRANSPOSE_LOAD
#undef TRANSPOSE_STORE
#undef TRANSPOSE_LOAD2
#undef TRANSPOSE_STORE2
#undef EXACT
#undef CPLX
#undef NO_WAVE
#undef NO_BACKWARD
