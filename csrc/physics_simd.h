/* SPDX-License-Identifier: MIT */
/* physics_simd.h — the vectorised force kernels, instantiated by physics.c once per
 * (element type, instruction set) under a target pragma. Not a public header.
 *
 * The including file defines these, all #undef'd at the end of this file:
 *   K_NAME, K_SYM_NAME  names of the all-pairs and the pair-once kernel; each comes in
 *                     two variants, K_NAME and K_NAME##_guarded (see "zero distance")
 *   K_REAL            float or double
 *   K_VEC, K_W        vector type and its number of lanes
 *   K_SET1(s), K_ZERO(), K_LOAD(p) (64-byte aligned), K_STORE(p, v)
 *   K_SUB(a, b), K_ADD(a, b), K_MUL(a, b), K_FMADD(a, b, c) = a*b + c, K_FNMADD = c - a*b
 *   K_INV3(r2, m)     m * r2^(-3/2), possibly times a constant 2^k undone by K_ACC_SCALE
 *   K_RCUBE(r2)       r2^(-3/2), times the same constant
 *   K_ACC_SCALE       the factor the sums are multiplied by at the end (1 or 1/8)
 *   K_KEEP_NONZERO(v, d2)  v where d2 != 0 (NaN included), else 0 (also where v is inf or NaN)
 *   K_TRI_MASK(f, jb, row, n)  f in the lanes j = jb + l with row < j < n, else 0
 *   K_HSUM(v)         the sum of the lanes
 *   K_I_VECS          vectors of bodies i per block of the all-pairs kernel, 1 to 4
 *                     (AVX-512: 2, as fast as 4 at N = 64; AVX2: 1, as two spill)
 *   K_ROW_PAIRS       1: the pair-once kernel takes two rows at a time (they share the
 *                     loads of j), 0: one (fewer live registers: AVX2 has 16)
 *
 * Zero distance. The unguarded kernels add eps^2 to every r^2 and mask nothing: the
 * self term then has dx = dy = dz = 0 and a finite weight, so it adds exactly 0, and
 * so does any pair at the same place. They are used when eps^2 is comfortably above
 * the type's underflow (physics_impl.h decides). Otherwise the guarded kernels drop
 * every pair whose squared distance is 0 (the self term included), so that a pair at
 * exactly r = 0 exerts no force instead of producing inf * 0 = NaN.
 */

/* All pairs, vectorised along i: K_W lanes, K_I_VECS vectors per block, the other
 * body j broadcast, so there is no horizontal sum and every j is
 * loaded once per block. x, y, z, ax, ay, az are padded to a multiple of the block
 * (pad lanes compute values that are never read); gm[j] = G m_j is read for j < n. */
static inline __attribute__((always_inline)) void K_CAT(K_NAME, _body)(
    const K_REAL *x, const K_REAL *y, const K_REAL *z, const K_REAL *gm, int64_t n, int64_t i0, int64_t i1,
    K_REAL eps2, K_REAL *ax, K_REAL *ay, K_REAL *az, const int guard) {
    const int64_t block = K_I_VECS * K_W;
    const K_VEC veps2 = K_SET1(eps2);
    for (int64_t ib = i0; ib < i1; ib += block) {
        /* vectors 1.. exist when K_I_VECS says so (the others are never used) */
#define K_LD(p, v) (K_I_VECS > (v) ? K_LOAD((p) + ib + (v) * K_W) : K_ZERO())
        const K_VEC xi0 = K_LD(x, 0), yi0 = K_LD(y, 0), zi0 = K_LD(z, 0);
        const K_VEC xi1 = K_LD(x, 1), yi1 = K_LD(y, 1), zi1 = K_LD(z, 1);
        const K_VEC xi2 = K_LD(x, 2), yi2 = K_LD(y, 2), zi2 = K_LD(z, 2);
        const K_VEC xi3 = K_LD(x, 3), yi3 = K_LD(y, 3), zi3 = K_LD(z, 3);
#undef K_LD
        K_VEC ax0 = K_ZERO(), ay0 = K_ZERO(), az0 = K_ZERO();
        K_VEC ax1 = K_ZERO(), ay1 = K_ZERO(), az1 = K_ZERO();
        K_VEC ax2 = K_ZERO(), ay2 = K_ZERO(), az2 = K_ZERO();
        K_VEC ax3 = K_ZERO(), ay3 = K_ZERO(), az3 = K_ZERO();

#define K_PAIR(V)                                                                           \
    do {                                                                                    \
        K_VEC dx = K_SUB(xj, xi##V), dy = K_SUB(yj, yi##V), dz = K_SUB(zj, zi##V);          \
        K_VEC s;                                                                            \
        if (guard) {                                                                        \
            K_VEC d2 = K_FMADD(dz, dz, K_FMADD(dy, dy, K_MUL(dx, dx)));                     \
            s = K_KEEP_NONZERO(K_INV3(K_ADD(d2, veps2), mj), d2);                           \
        } else {                                                                            \
            s = K_INV3(K_FMADD(dz, dz, K_FMADD(dy, dy, K_FMADD(dx, dx, veps2))), mj);       \
        }                                                                                   \
        ax##V = K_FMADD(s, dx, ax##V);                                                      \
        ay##V = K_FMADD(s, dy, ay##V);                                                      \
        az##V = K_FMADD(s, dz, az##V);                                                      \
    } while (0)

        for (int64_t j = 0; j < n; j++) {
            const K_VEC xj = K_SET1(x[j]), yj = K_SET1(y[j]), zj = K_SET1(z[j]), mj = K_SET1(gm[j]);
            K_PAIR(0);
            if (K_I_VECS > 1) K_PAIR(1);
            if (K_I_VECS > 2) K_PAIR(2);
            if (K_I_VECS > 3) K_PAIR(3);
        }
#undef K_PAIR
        const K_VEC scale = K_SET1(K_ACC_SCALE);
#define K_ST(v)                                                                             \
    do {                                                                                    \
        if (K_I_VECS > (v)) {                                                               \
            K_STORE(ax + ib + (v) * K_W, K_MUL(ax##v, scale));                              \
            K_STORE(ay + ib + (v) * K_W, K_MUL(ay##v, scale));                              \
            K_STORE(az + ib + (v) * K_W, K_MUL(az##v, scale));                              \
        }                                                                                   \
    } while (0)
        K_ST(0);
        K_ST(1);
        K_ST(2);
        K_ST(3);
#undef K_ST
    }
}

__attribute__((noinline)) static void K_NAME(const K_REAL *x, const K_REAL *y, const K_REAL *z, const K_REAL *gm,
                                             int64_t n, int64_t i0, int64_t i1, K_REAL eps2, K_REAL *ax,
                                             K_REAL *ay, K_REAL *az) {
    K_CAT(K_NAME, _body)(x, y, z, gm, n, i0, i1, eps2, ax, ay, az, 0);
}

__attribute__((noinline)) static void K_CAT(K_NAME, _guarded)(const K_REAL *x, const K_REAL *y, const K_REAL *z,
                                                              const K_REAL *gm, int64_t n, int64_t i0, int64_t i1,
                                                              K_REAL eps2, K_REAL *ax, K_REAL *ay, K_REAL *az) {
    K_CAT(K_NAME, _body)(x, y, z, gm, n, i0, i1, eps2, ax, ay, az, 1);
}

/* One pair term of the pair-once kernels: body i (XI.., its weight MI, its sums SX..)
 * and the vector of bodies j at xj.., mj (their sums AJX.. take the reaction, -wj d);
 * MASK is a statement that may zero lanes of the pair's weight f. */
#define K_PAIR_TERM(XI, YI, ZI, MI, SX, SY, SZ, AJX, AJY, AJZ, MASK)                        \
    do {                                                                                    \
        K_VEC dx = K_SUB(xj, XI), dy = K_SUB(yj, YI), dz = K_SUB(zj, ZI);                   \
        K_VEC f;                                                                            \
        if (guard) {                                                                        \
            K_VEC d2 = K_FMADD(dz, dz, K_FMADD(dy, dy, K_MUL(dx, dx)));                     \
            f = K_KEEP_NONZERO(K_RCUBE(K_ADD(d2, veps2)), d2);                                  \
        } else {                                                                            \
            f = K_RCUBE(K_FMADD(dz, dz, K_FMADD(dy, dy, K_FMADD(dx, dx, veps2))));          \
        }                                                                                   \
        MASK;                                                                               \
        K_VEC wi = K_MUL(mj, f), wj = K_MUL(MI, f);                                         \
        SX = K_FMADD(wi, dx, SX);                                                           \
        SY = K_FMADD(wi, dy, SY);                                                           \
        SZ = K_FMADD(wi, dz, SZ);                                                           \
        AJX = K_FNMADD(wj, dx, AJX);                                                        \
        AJY = K_FNMADD(wj, dy, AJY);                                                        \
        AJZ = K_FNMADD(wj, dz, AJZ);                                                        \
    } while (0)

/* The same forces computed once per pair (Newton's third law), rows [r0, r1) of the
 * upper triangle: for each row i, the bodies j > i in vectors of K_W. Row i's sum is
 * reduced horizontally once per row; the reaction is written into a[j] as it goes
 * (loaded and stored per vector, which costs loads and stores, not arithmetic), so the
 * arithmetic per pair is about half of K_NAME's. With K_ROW_PAIRS, two rows share
 * every load of j (AVX-512: 32 registers); AVX2 takes one row at a time, as two spill
 * registers to the stack (measured: 1.8 vs 2.6 G pairs/s per core here).
 * Adds into ax, ay, az (npad long, zeroed by the caller) the sums times 1/K_ACC_SCALE,
 * without G (gm carries it). The first vector of a row and the last one (past n) are
 * masked by index, so the self term and the padding never count. */
static inline __attribute__((always_inline)) void K_CAT(K_SYM_NAME, _body)(
    const K_REAL *x, const K_REAL *y, const K_REAL *z, const K_REAL *gm, int64_t n, int64_t r0, int64_t r1,
    K_REAL eps2, K_REAL *ax, K_REAL *ay, K_REAL *az, const int guard) {
    const K_VEC veps2 = K_SET1(eps2);
    const int64_t npad = (n + K_W - 1) / K_W * K_W;
    if (r1 > n) r1 = n;

#define K_ROW_TERM(XI, YI, ZI, MI, ROW, SX, SY, SZ, AJX, AJY, AJZ)                          \
    K_PAIR_TERM(XI, YI, ZI, MI, SX, SY, SZ, AJX, AJY, AJZ, if (edge) f = K_TRI_MASK(f, jb, ROW, n))

    /* j in tiles whose seven arrays (x, y, z, gm, ax, ay, az) stay in L1 while every
     * row of the chunk passes over them (untiled, N = 8192 ran at half speed). In a
     * row, only its first vector (j <= i) and the last one (past n) need the mask:
     * they are peeled off the loop. */
    const int64_t tile = (int64_t)(16384 / (7 * sizeof(K_REAL))) / K_W * K_W;
    const int64_t jfull = n / K_W * K_W; /* vectors [.., jfull) lie below n */
#define K_J_PAIR(JB, EDGE)                                                                  \
    do {                                                                                    \
        const int64_t jb = (JB);                                                            \
        const int edge = (EDGE);                                                            \
        const K_VEC xj = K_LOAD(x + jb), yj = K_LOAD(y + jb), zj = K_LOAD(z + jb), mj = K_LOAD(gm + jb); \
        K_VEC ajx = K_LOAD(ax + jb), ajy = K_LOAD(ay + jb), ajz = K_LOAD(az + jb);          \
        K_ROW_TERM(xa, ya, za, ma, i, sax, say, saz, ajx, ajy, ajz);                        \
        K_ROW_TERM(xb, yb, zb, mb, i + 1, sbx, sby, sbz, ajx, ajy, ajz);                    \
        K_STORE(ax + jb, ajx);                                                              \
        K_STORE(ay + jb, ajy);                                                              \
        K_STORE(az + jb, ajz);                                                              \
    } while (0)
#define K_J_ONE(JB, EDGE)                                                                   \
    do {                                                                                    \
        const int64_t jb = (JB);                                                            \
        const int edge = (EDGE);                                                            \
        const K_VEC xj = K_LOAD(x + jb), yj = K_LOAD(y + jb), zj = K_LOAD(z + jb), mj = K_LOAD(gm + jb); \
        K_VEC ajx = K_LOAD(ax + jb), ajy = K_LOAD(ay + jb), ajz = K_LOAD(az + jb);          \
        K_ROW_TERM(xa, ya, za, ma, i, sax, say, saz, ajx, ajy, ajz);                        \
        K_STORE(ax + jb, ajx);                                                              \
        K_STORE(ay + jb, ajy);                                                              \
        K_STORE(az + jb, ajz);                                                              \
    } while (0)
/* The vectors [max(j0, J0), J1) of a row whose first vector is j0: J_STEP(jb, edge). */
#define K_J_LOOP(J_STEP)                                                                    \
    do {                                                                                    \
        int64_t jv = j0 > J0 ? j0 : J0;                                                     \
        if (jv == j0 && jv < J1) {                                                          \
            J_STEP(jv, 1);                                                                  \
            jv += K_W;                                                                      \
        }                                                                                   \
        const int64_t jend = J1 < jfull ? J1 : jfull;                                       \
        for (; jv < jend; jv += K_W) J_STEP(jv, 0);                                         \
        if (jv < J1) J_STEP(jv, 1);                                                         \
    } while (0)

    for (int64_t J0 = (r0 + 1) / K_W * K_W; J0 < npad; J0 += tile) {
        const int64_t J1 = J0 + tile < npad ? J0 + tile : npad;
        const int64_t rend = r1 < J1 - 1 ? r1 : J1 - 1; /* rows with some j >= i + 1 in the tile */
        int64_t i = r0;
        for (; K_ROW_PAIRS && i + 1 < rend; i += 2) {
            const K_VEC xa = K_SET1(x[i]), ya = K_SET1(y[i]), za = K_SET1(z[i]), ma = K_SET1(gm[i]);
            const K_VEC xb = K_SET1(x[i + 1]), yb = K_SET1(y[i + 1]), zb = K_SET1(z[i + 1]), mb = K_SET1(gm[i + 1]);
            K_VEC sax = K_ZERO(), say = K_ZERO(), saz = K_ZERO();
            K_VEC sbx = K_ZERO(), sby = K_ZERO(), sbz = K_ZERO();
            const int64_t j0 = (i + 1) / K_W * K_W;
            K_J_LOOP(K_J_PAIR);
            ax[i] += K_HSUM(sax);
            ay[i] += K_HSUM(say);
            az[i] += K_HSUM(saz);
            ax[i + 1] += K_HSUM(sbx);
            ay[i + 1] += K_HSUM(sby);
            az[i + 1] += K_HSUM(sbz);
        }
        for (; i < rend; i++) {
            const K_VEC xa = K_SET1(x[i]), ya = K_SET1(y[i]), za = K_SET1(z[i]), ma = K_SET1(gm[i]);
            K_VEC sax = K_ZERO(), say = K_ZERO(), saz = K_ZERO();
            const int64_t j0 = (i + 1) / K_W * K_W;
            K_J_LOOP(K_J_ONE);
            ax[i] += K_HSUM(sax);
            ay[i] += K_HSUM(say);
            az[i] += K_HSUM(saz);
        }
    }
#undef K_J_LOOP
#undef K_J_ONE
#undef K_J_PAIR
#undef K_ROW_TERM
}

__attribute__((noinline)) static void K_SYM_NAME(const K_REAL *x, const K_REAL *y, const K_REAL *z, const K_REAL *gm,
                                                 int64_t n, int64_t r0, int64_t r1, K_REAL eps2, K_REAL *ax,
                                                 K_REAL *ay, K_REAL *az) {
    K_CAT(K_SYM_NAME, _body)(x, y, z, gm, n, r0, r1, eps2, ax, ay, az, 0);
}

__attribute__((noinline)) static void K_CAT(K_SYM_NAME, _guarded)(const K_REAL *x, const K_REAL *y, const K_REAL *z,
                                                                  const K_REAL *gm, int64_t n, int64_t r0, int64_t r1,
                                                                  K_REAL eps2, K_REAL *ax, K_REAL *ay, K_REAL *az) {
    K_CAT(K_SYM_NAME, _body)(x, y, z, gm, n, r0, r1, eps2, ax, ay, az, 1);
}

/* Pair-once forces of K_W systems side by side, one system per lane ("lanes"
 * layout: body i of the system in lane l at [i * K_W + l]), for batches of small
 * systems. Each pair i < j is computed once for all K_W systems, with no masks, no
 * horizontal sums and no wasted lanes: about 2/3 of the all-pairs kernel's
 * arithmetic per interaction at N = 64 (where the row kernel's first and last
 * vectors of a row are mostly masked). Writes ax, ay, az (n * K_W each) times
 * 1/K_ACC_SCALE; as the other kernels, without G (gm carries it). */
static inline __attribute__((always_inline)) void K_CAT(K_NAME, _lanes_body)(
    const K_REAL *x, const K_REAL *y, const K_REAL *z, const K_REAL *gm, int64_t n, K_REAL eps2, K_REAL *ax,
    K_REAL *ay, K_REAL *az, const int guard) {
    const K_VEC veps2 = K_SET1(eps2);
    for (int64_t i = 0; i < n; i++) {
        K_STORE(ax + i * K_W, K_ZERO());
        K_STORE(ay + i * K_W, K_ZERO());
        K_STORE(az + i * K_W, K_ZERO());
    }
/* The pair (body I with XI.., its sums SX..; body J at xj.., mj), both directions. */
#define K_LANE_TERM(XI, YI, ZI, MI, SX, SY, SZ, AJX, AJY, AJZ) K_PAIR_TERM(XI, YI, ZI, MI, SX, SY, SZ, AJX, AJY, AJZ, (void)0)
#define K_LANE_J(j)                                                                         \
    const K_VEC xj = K_LOAD(x + (j) * K_W), yj = K_LOAD(y + (j) * K_W), zj = K_LOAD(z + (j) * K_W); \
    const K_VEC mj = K_LOAD(gm + (j) * K_W);                                                \
    K_VEC ajx = K_LOAD(ax + (j) * K_W), ajy = K_LOAD(ay + (j) * K_W), ajz = K_LOAD(az + (j) * K_W)
#define K_LANE_J_STORE(j)                                                                   \
    K_STORE(ax + (j) * K_W, ajx);                                                           \
    K_STORE(ay + (j) * K_W, ajy);                                                           \
    K_STORE(az + (j) * K_W, ajz)
    int64_t i = 0;
    /* With K_ROW_PAIRS, rows i and i + 1 together: they share every load and store of j. */
    for (; K_ROW_PAIRS && i + 1 < n; i += 2) {
        const K_VEC xa = K_LOAD(x + i * K_W), ya = K_LOAD(y + i * K_W), za = K_LOAD(z + i * K_W);
        const K_VEC ma = K_LOAD(gm + i * K_W);
        K_VEC sax = K_LOAD(ax + i * K_W), say = K_LOAD(ay + i * K_W), saz = K_LOAD(az + i * K_W);
        K_VEC sbx, sby, sbz;
        {
            K_LANE_J(i + 1);
            K_LANE_TERM(xa, ya, za, ma, sax, say, saz, ajx, ajy, ajz);
            sbx = ajx;
            sby = ajy;
            sbz = ajz;
        }
        const K_VEC xb = K_LOAD(x + (i + 1) * K_W), yb = K_LOAD(y + (i + 1) * K_W), zb = K_LOAD(z + (i + 1) * K_W);
        const K_VEC mb = K_LOAD(gm + (i + 1) * K_W);
        for (int64_t j = i + 2; j < n; j++) {
            K_LANE_J(j);
            K_LANE_TERM(xa, ya, za, ma, sax, say, saz, ajx, ajy, ajz);
            K_LANE_TERM(xb, yb, zb, mb, sbx, sby, sbz, ajx, ajy, ajz);
            K_LANE_J_STORE(j);
        }
        K_STORE(ax + i * K_W, sax);
        K_STORE(ay + i * K_W, say);
        K_STORE(az + i * K_W, saz);
        K_STORE(ax + (i + 1) * K_W, sbx);
        K_STORE(ay + (i + 1) * K_W, sby);
        K_STORE(az + (i + 1) * K_W, sbz);
    }
    for (; i < n; i++) {
        const K_VEC xa = K_LOAD(x + i * K_W), ya = K_LOAD(y + i * K_W), za = K_LOAD(z + i * K_W);
        const K_VEC ma = K_LOAD(gm + i * K_W);
        K_VEC sax = K_LOAD(ax + i * K_W), say = K_LOAD(ay + i * K_W), saz = K_LOAD(az + i * K_W);
        for (int64_t j = i + 1; j < n; j++) {
            K_LANE_J(j);
            K_LANE_TERM(xa, ya, za, ma, sax, say, saz, ajx, ajy, ajz);
            K_LANE_J_STORE(j);
        }
        K_STORE(ax + i * K_W, sax);
        K_STORE(ay + i * K_W, say);
        K_STORE(az + i * K_W, saz);
    }
#undef K_LANE_J_STORE
#undef K_LANE_J
#undef K_LANE_TERM
}

__attribute__((noinline)) static void K_CAT(K_NAME, _lanes)(const K_REAL *x, const K_REAL *y, const K_REAL *z,
                                                            const K_REAL *gm, int64_t n, K_REAL eps2, K_REAL *ax,
                                                            K_REAL *ay, K_REAL *az) {
    K_CAT(K_NAME, _lanes_body)(x, y, z, gm, n, eps2, ax, ay, az, 0);
}

__attribute__((noinline)) static void K_CAT(K_NAME, _lanes_guarded)(const K_REAL *x, const K_REAL *y,
                                                                    const K_REAL *z, const K_REAL *gm, int64_t n,
                                                                    K_REAL eps2, K_REAL *ax, K_REAL *ay,
                                                                    K_REAL *az) {
    K_CAT(K_NAME, _lanes_body)(x, y, z, gm, n, eps2, ax, ay, az, 1);
}

#undef K_PAIR_TERM
/* The parameters of this instantiation (the includer's target pragma stays). */
#undef K_NAME
#undef K_SYM_NAME
#undef K_REAL
#undef K_VEC
#undef K_W
#undef K_SET1
#undef K_ZERO
#undef K_LOAD
#undef K_STORE
#undef K_SUB
#undef K_ADD
#undef K_MUL
#undef K_FMADD
#undef K_FNMADD
#undef K_INV3
#undef K_RCUBE
#undef K_ACC_SCALE
#undef K_KEEP_NONZERO
#undef K_TRI_MASK
#undef K_HSUM
#undef K_ROW_PAIRS
#undef K_I_VECS
