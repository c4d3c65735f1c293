/* SPDX-License-Identifier: MIT */
/*
 * signal_transpose.h — the block transposes of signal.c, written once over the vector
 * width: where each lane of a group reads its own row (inner = 1) or a pair of lanes
 * one complex row (inner = 2), a block of samples is moved between the rows and the
 * lane-major buffer (buf[t] = sample t of every lane) with in-register transposes.
 * signal.c includes this file once per x86 SIMD level, under that level's ATTR, with
 * these defined, all #undef'd at the end of this file (ATTR stays: it is the level's):
 *
 *   TR_SFX          suffix of the functions defined here (avx2, avx512)
 *   TR_BYTES        bytes per vector (32, 64): the alignment a streamed store needs
 *   TR_VF, TR_VD    the kernels' float and double vector types (tf_v8f, tf_v4d...)
 *   TR_NF, TR_ND    their lanes (8 and 4, 16 and 8)
 *   TR_PS, TR_PD    the intrinsic types of a vector of float and of double
 *   TR_LOADU_PS(p), TR_STOREU_PS(p, v), TR_STREAM_PS(p, v), the same for _PD and for
 *                   _HPS: TR_ND floats, the half vector that widens to one TR_PD
 *   TR_CASTPS_PD(v), TR_CASTPD_PS(v)   reinterpretations
 *   TR_CVTPS_PD(h), TR_CVTPD_PS(v)     widening and narrowing conversions
 *   TR_TRANSPOSE_PS(r)  transpose TR_NF vectors of TR_NF floats in place
 *   TR_TRANSPOSE_PD(r)  transpose TR_ND vectors of TR_ND doubles in place
 *   TR_TRANSPOSE_PAIRS(r)  transpose TR_ND / 2 vectors of TR_ND / 2 128-bit pairs
 *
 * Defined here, for each element kind (f32: float rows in float lanes; f64: double
 * in double; f32d: float rows widened to double lanes), tf_sos_tload_<kind>_<sfx>
 * and tf_sos_tstore_<kind>_<sfx> for rows, tf_sos_tload2_... and tf_sos_tstore2_...
 * for complex rows (lanes 2r and 2r + 1 hold row r's real and imaginary parts; a
 * complex number moves as one element of twice the width). The stores bypass the
 * caches where the group allows it (TF_SOS_NT); samples past the last whole block
 * are moved one by one.
 */

#define TR_FN2(name, sfx) name##_##sfx
#define TR_FN1(name, sfx) TR_FN2(name, sfx)
#define TR_FN(name) TR_FN1(name, TR_SFX)
#define TR_NP (TR_ND / 2) /* complex128 (or widened complex64) rows per vector */

/* The rows' sample t0 + t of lane l (inner = 1), and of pair lane l (inner = 2). */
#define TR_ROW(p, l) ((p) + g->base[l] + t0 + t)
#define TR_ROW2(p, l) ((p) + g->base[2 * (l)] + 2 * (t0 + t))

ATTR static void TR_FN(tf_sos_tload_f32)(const float *x, const tf_sos_group *g, int64_t t0, int64_t T,
                                         TR_VF *buf) {
    int64_t t = 0;
    for (; t + TR_NF <= T; t += TR_NF) {
        TR_PS r[TR_NF];
        for (int l = 0; l < TR_NF; l++) r[l] = TR_LOADU_PS(TR_ROW(x, l));
        TR_TRANSPOSE_PS(r);
        for (int k = 0; k < TR_NF; k++) buf[t + k] = (TR_VF)r[k];
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_NF; l++) buf[t][l] = x[g->base[l] + t0 + t];
}

ATTR static void TR_FN(tf_sos_tstore_f32)(float *y, const tf_sos_group *g, int64_t t0, int64_t T,
                                          const TR_VF *buf) {
    int64_t t = 0;
    for (; t + TR_NF <= T; t += TR_NF) {
        TR_PS r[TR_NF];
        for (int k = 0; k < TR_NF; k++) r[k] = (TR_PS)buf[t + k];
        TR_TRANSPOSE_PS(r);
        if (TF_SOS_NT(g, TR_ROW(y, 0), TR_BYTES))
            for (int l = 0; l < TR_NF; l++) TR_STREAM_PS(TR_ROW(y, l), r[l]);
        else
            for (int l = 0; l < TR_NF; l++) TR_STOREU_PS(TR_ROW(y, l), r[l]);
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_NF; l++) y[g->base[l] + t0 + t] = buf[t][l];
}

/* complex64 rows: a complex64 moves as one 64-bit element. */
ATTR static void TR_FN(tf_sos_tload2_f32)(const float *x, const tf_sos_group *g, int64_t t0, int64_t T,
                                          TR_VF *buf) {
    int64_t t = 0;
    for (; t + TR_ND <= T; t += TR_ND) {
        TR_PD r[TR_ND];
        for (int l = 0; l < TR_ND; l++) r[l] = TR_CASTPS_PD(TR_LOADU_PS(TR_ROW2(x, l)));
        TR_TRANSPOSE_PD(r);
        for (int k = 0; k < TR_ND; k++) buf[t + k] = (TR_VF)TR_CASTPD_PS(r[k]);
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_NF; l++) buf[t][l] = x[g->base[l] + 2 * (t0 + t)];
}

ATTR static void TR_FN(tf_sos_tstore2_f32)(float *y, const tf_sos_group *g, int64_t t0, int64_t T,
                                           const TR_VF *buf) {
    int64_t t = 0;
    for (; t + TR_ND <= T; t += TR_ND) {
        TR_PD r[TR_ND];
        for (int k = 0; k < TR_ND; k++) r[k] = TR_CASTPS_PD((TR_PS)buf[t + k]);
        TR_TRANSPOSE_PD(r);
        if (TF_SOS_NT(g, TR_ROW2(y, 0), TR_BYTES))
            for (int l = 0; l < TR_ND; l++) TR_STREAM_PS(TR_ROW2(y, l), TR_CASTPD_PS(r[l]));
        else
            for (int l = 0; l < TR_ND; l++) TR_STOREU_PS(TR_ROW2(y, l), TR_CASTPD_PS(r[l]));
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_NF; l++) y[g->base[l] + 2 * (t0 + t)] = buf[t][l];
}

ATTR static void TR_FN(tf_sos_tload_f64)(const double *x, const tf_sos_group *g, int64_t t0, int64_t T,
                                         TR_VD *buf) {
    int64_t t = 0;
    for (; t + TR_ND <= T; t += TR_ND) {
        TR_PD r[TR_ND];
        for (int l = 0; l < TR_ND; l++) r[l] = TR_LOADU_PD(TR_ROW(x, l));
        TR_TRANSPOSE_PD(r);
        for (int k = 0; k < TR_ND; k++) buf[t + k] = (TR_VD)r[k];
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_ND; l++) buf[t][l] = x[g->base[l] + t0 + t];
}

ATTR static void TR_FN(tf_sos_tstore_f64)(double *y, const tf_sos_group *g, int64_t t0, int64_t T,
                                          const TR_VD *buf) {
    int64_t t = 0;
    for (; t + TR_ND <= T; t += TR_ND) {
        TR_PD r[TR_ND];
        for (int k = 0; k < TR_ND; k++) r[k] = (TR_PD)buf[t + k];
        TR_TRANSPOSE_PD(r);
        if (TF_SOS_NT(g, TR_ROW(y, 0), TR_BYTES))
            for (int l = 0; l < TR_ND; l++) TR_STREAM_PD(TR_ROW(y, l), r[l]);
        else
            for (int l = 0; l < TR_ND; l++) TR_STOREU_PD(TR_ROW(y, l), r[l]);
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_ND; l++) y[g->base[l] + t0 + t] = buf[t][l];
}

/* complex128 rows: one 128-bit complex per row and pair of lanes. */
ATTR static void TR_FN(tf_sos_tload2_f64)(const double *x, const tf_sos_group *g, int64_t t0, int64_t T,
                                          TR_VD *buf) {
    int64_t t = 0;
    for (; t + TR_NP <= T; t += TR_NP) {
        TR_PD r[TR_NP];
        for (int l = 0; l < TR_NP; l++) r[l] = TR_LOADU_PD(TR_ROW2(x, l));
        TR_TRANSPOSE_PAIRS(r);
        for (int k = 0; k < TR_NP; k++) buf[t + k] = (TR_VD)r[k];
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_ND; l++) buf[t][l] = x[g->base[l] + 2 * (t0 + t)];
}

ATTR static void TR_FN(tf_sos_tstore2_f64)(double *y, const tf_sos_group *g, int64_t t0, int64_t T,
                                           const TR_VD *buf) {
    int64_t t = 0;
    for (; t + TR_NP <= T; t += TR_NP) {
        TR_PD r[TR_NP];
        for (int k = 0; k < TR_NP; k++) r[k] = (TR_PD)buf[t + k];
        TR_TRANSPOSE_PAIRS(r);
        if (TF_SOS_NT(g, TR_ROW2(y, 0), TR_BYTES))
            for (int l = 0; l < TR_NP; l++) TR_STREAM_PD(TR_ROW2(y, l), r[l]);
        else
            for (int l = 0; l < TR_NP; l++) TR_STOREU_PD(TR_ROW2(y, l), r[l]);
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_ND; l++) y[g->base[l] + 2 * (t0 + t)] = buf[t][l];
}

/* float32 rows, float64 lanes: widen TR_ND samples of each row, then transpose (the
 * narrowed stores are half a vector wide, so half its alignment streams). */
ATTR static void TR_FN(tf_sos_tload_f32d)(const float *x, const tf_sos_group *g, int64_t t0, int64_t T,
                                          TR_VD *buf) {
    int64_t t = 0;
    for (; t + TR_ND <= T; t += TR_ND) {
        TR_PD r[TR_ND];
        for (int l = 0; l < TR_ND; l++) r[l] = TR_CVTPS_PD(TR_LOADU_HPS(TR_ROW(x, l)));
        TR_TRANSPOSE_PD(r);
        for (int k = 0; k < TR_ND; k++) buf[t + k] = (TR_VD)r[k];
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_ND; l++) buf[t][l] = x[g->base[l] + t0 + t];
}

ATTR static void TR_FN(tf_sos_tstore_f32d)(float *y, const tf_sos_group *g, int64_t t0, int64_t T,
                                           const TR_VD *buf) {
    int64_t t = 0;
    for (; t + TR_ND <= T; t += TR_ND) {
        TR_PD r[TR_ND];
        for (int k = 0; k < TR_ND; k++) r[k] = (TR_PD)buf[t + k];
        TR_TRANSPOSE_PD(r);
        if (TF_SOS_NT(g, TR_ROW(y, 0), TR_BYTES / 2))
            for (int l = 0; l < TR_ND; l++) TR_STREAM_HPS(TR_ROW(y, l), TR_CVTPD_PS(r[l]));
        else
            for (int l = 0; l < TR_ND; l++) TR_STOREU_HPS(TR_ROW(y, l), TR_CVTPD_PS(r[l]));
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_ND; l++) y[g->base[l] + t0 + t] = (float)buf[t][l];
}

ATTR static void TR_FN(tf_sos_tload2_f32d)(const float *x, const tf_sos_group *g, int64_t t0, int64_t T,
                                           TR_VD *buf) {
    int64_t t = 0;
    for (; t + TR_NP <= T; t += TR_NP) {
        TR_PD r[TR_NP];
        for (int l = 0; l < TR_NP; l++) r[l] = TR_CVTPS_PD(TR_LOADU_HPS(TR_ROW2(x, l)));
        TR_TRANSPOSE_PAIRS(r);
        for (int k = 0; k < TR_NP; k++) buf[t + k] = (TR_VD)r[k];
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_ND; l++) buf[t][l] = x[g->base[l] + 2 * (t0 + t)];
}

ATTR static void TR_FN(tf_sos_tstore2_f32d)(float *y, const tf_sos_group *g, int64_t t0, int64_t T,
                                            const TR_VD *buf) {
    int64_t t = 0;
    for (; t + TR_NP <= T; t += TR_NP) {
        TR_PD r[TR_NP];
        for (int k = 0; k < TR_NP; k++) r[k] = (TR_PD)buf[t + k];
        TR_TRANSPOSE_PAIRS(r);
        if (TF_SOS_NT(g, TR_ROW2(y, 0), TR_BYTES / 2))
            for (int l = 0; l < TR_NP; l++) TR_STREAM_HPS(TR_ROW2(y, l), TR_CVTPD_PS(r[l]));
        else
            for (int l = 0; l < TR_NP; l++) TR_STOREU_HPS(TR_ROW2(y, l), TR_CVTPD_PS(r[l]));
    }
    for (; t < T; t++)
        for (int l = 0; l < TR_ND; l++) y[g->base[l] + 2 * (t0 + t)] = (float)buf[t][l];
}

#undef TR_FN2
#undef TR_FN1
#undef TR_FN
#undef TR_NP
#undef TR_ROW
#undef TR_ROW2
/* The parameters of this instantiation (ATTR stays: it is the SIMD level's). */
#undef TR_SFX
#undef TR_BYTES
#undef TR_VF
#undef TR_VD
#undef TR_NF
#undef TR_ND
#undef TR_PS
#undef TR_PD
#undef TR_LOADU_PS
#undef TR_STOREU_PS
#undef TR_STREAM_PS
#undef TR_LOADU_PD
#undef TR_STOREU_PD
#undef TR_STREAM_PD
#undef TR_LOADU_HPS
#undef TR_STOREU_HPS
#undef TR_STREAM_HPS
#undef TR_CASTPS_PD
#undef TR_CASTPD_PS
#undef TR_CVTPS_PD
#undef TR_CVTPD_PS
#undef TR_TRANSPOSE_PS
#undef TR_TRANSPOSE_PD
#undef TR_TRANSPOSE_PAIRS
