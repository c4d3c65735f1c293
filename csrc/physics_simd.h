/* SPDX-License-Identifier: MIT */
/* physics_simd.h — the vectorised force kernel, instantiated by physics.c once per
 * (element type, instruction set) under a target pragma. Not a public header.
 *
 * The including file defines:
 *   K_NAME            function name
 *   K_REAL            float or double
 *   K_VEC, K_W        vector type and its number of lanes
 *   K_SET1(s), K_ZERO(), K_LOAD(p) (64-byte aligned), K_STORE(p, v)
 *   K_SUB(a, b), K_MUL(a, b), K_FMADD(a, b, c) = a*b + c
 *   K_INV3(r2, m)     m * r2^(-3/2), possibly times a constant 2^k undone by K_ACC_SCALE
 *   K_ACC_SCALE       the factor the sums are multiplied by at the end (1 or 1/8)
 *   K_ZERO_LANE(v, l) v with lane l set to 0 (the self-interaction)
 *
 * Layout: bodies are vectorised along i (K_W lanes, two vectors per block, so a block
 * is 2*K_W bodies) and the other body j is broadcast, so there is no horizontal sum
 * and every j is loaded once per block: the block's positions and sums stay in
 * registers for the whole j loop. x, y, z, ax, ay, az are padded to a multiple of the
 * block (the pad lanes compute garbage that is never read); gm[j] = G m_j is only
 * read for j < n. The self term j == i is masked by index, so with softening 0 two
 * distinct bodies at the same place still produce inf/NaN, as the formula says.
 */

__attribute__((noinline)) static void K_NAME(const K_REAL *x, const K_REAL *y, const K_REAL *z,
                                             const K_REAL *gm, int64_t n, int64_t i0, int64_t i1,
                                             K_REAL eps2, K_REAL *ax, K_REAL *ay, K_REAL *az) {
    const int64_t block = 2 * K_W;
    const K_VEC veps2 = K_SET1(eps2);
    for (int64_t ib = i0; ib < i1; ib += block) {
        const K_VEC xi0 = K_LOAD(x + ib), xi1 = K_LOAD(x + ib + K_W);
        const K_VEC yi0 = K_LOAD(y + ib), yi1 = K_LOAD(y + ib + K_W);
        const K_VEC zi0 = K_LOAD(z + ib), zi1 = K_LOAD(z + ib + K_W);
        K_VEC ax0 = K_ZERO(), ay0 = K_ZERO(), az0 = K_ZERO();
        K_VEC ax1 = K_ZERO(), ay1 = K_ZERO(), az1 = K_ZERO();

#define K_PAIR(V, MASKED, LANE)                                                             \
    do {                                                                                    \
        K_VEC dx = K_SUB(xj, xi##V), dy = K_SUB(yj, yi##V), dz = K_SUB(zj, zi##V);          \
        K_VEC r2 = K_FMADD(dz, dz, K_FMADD(dy, dy, K_FMADD(dx, dx, veps2)));                \
        K_VEC s = K_INV3(r2, mj);                                                           \
        if (MASKED) s = K_ZERO_LANE(s, LANE);                                               \
        ax##V = K_FMADD(s, dx, ax##V);                                                      \
        ay##V = K_FMADD(s, dy, ay##V);                                                      \
        az##V = K_FMADD(s, dz, az##V);                                                      \
    } while (0)

        /* j before the block, the block itself (self term masked), j after it. */
        int64_t dlo = ib < n ? ib : n, dhi = ib + block < n ? ib + block : n;
        for (int64_t j = 0; j < dlo; j++) {
            const K_VEC xj = K_SET1(x[j]), yj = K_SET1(y[j]), zj = K_SET1(z[j]), mj = K_SET1(gm[j]);
            K_PAIR(0, 0, 0);
            K_PAIR(1, 0, 0);
        }
        for (int64_t j = dlo; j < dhi; j++) {
            const K_VEC xj = K_SET1(x[j]), yj = K_SET1(y[j]), zj = K_SET1(z[j]), mj = K_SET1(gm[j]);
            int lane = (int)(j - ib);
            if (lane < K_W) {
                K_PAIR(0, 1, lane);
                K_PAIR(1, 0, 0);
            } else {
                K_PAIR(0, 0, 0);
                K_PAIR(1, 1, lane - K_W);
            }
        }
        for (int64_t j = dhi; j < n; j++) {
            const K_VEC xj = K_SET1(x[j]), yj = K_SET1(y[j]), zj = K_SET1(z[j]), mj = K_SET1(gm[j]);
            K_PAIR(0, 0, 0);
            K_PAIR(1, 0, 0);
        }
#undef K_PAIR
        const K_VEC scale = K_SET1(K_ACC_SCALE);
        K_STORE(ax + ib, K_MUL(ax0, scale));
        K_STORE(ay + ib, K_MUL(ay0, scale));
        K_STORE(az + ib, K_MUL(az0, scale));
        K_STORE(ax + ib + K_W, K_MUL(ax1, scale));
        K_STORE(ay + ib + K_W, K_MUL(ay1, scale));
        K_STORE(az + ib + K_W, K_MUL(az1, scale));
    }
}
