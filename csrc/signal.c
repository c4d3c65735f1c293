/* SPDX-License-Identifier: MIT */
/* signal.c — IIR filtering with cascaded second-order sections: sosfilt (with
 * streaming state), its adjoint for autograd, and zero-phase sosfiltfilt, for real
 * and complex signals and coefficients.
 *
 * Each channel's recursion is latency-bound, so channels are filtered side by
 * side, one per SIMD lane (AVX-512, AVX2+FMA, or the baseline 128-bit vectors,
 * chosen at run time), and the sections of a cascade are interleaved sample by
 * sample so the out-of-order core overlaps them. A lone channel spreads its
 * sections over the lanes instead (a wavefront). The kernels themselves are in
 * signal_simd.h, compiled once per element type and SIMD level; the block
 * transposes that feed them in signal_transpose.h, once per vector width. Groups of
 * channels are spread over `nthreads` threads. */
#define TF_INTERNAL
#include "tensorffi.h"

/* The float64 kernels reproduce SciPy's roundings operation for operation: no
 * contraction of a * b + c into an FMA. GCC does not contract in ISO C mode
 * (-std=c11, which build_ffi.py passes); clang would by default, hence the pragma.
 * tests/test_signal.py checks float64 results bitwise against SciPy. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TF_SOS_X86 1
#else
#define TF_SOS_X86 0
#endif

#define TF_SOS_CAT2(a, b) a##_##b
#define TF_SOS_CAT(a, b) TF_SOS_CAT2(a, b)

/* Samples per block moved between memory and the lane-major buffer: short blocks
 * when each lane reads its own row (a transpose), longer ones when the lanes are
 * adjacent in memory. Multiples of 16 (the widest transpose); both fit L1. */
#define TF_SOS_BLOCK_ROWS 64
#define TF_SOS_BLOCK_ADJACENT 128
#define TF_SOS_BLOCK_MAX 128
/* float32 signals are filtered in float32 arithmetic only when every pole of the
 * cascade lies within this radius; otherwise in float64 arithmetic. Measured on
 * random Butterworth/Chebyshev/elliptic designs of orders 1-12, float32 roundoff
 * then stays below ~2e-6 of the output's peak (it grows like 1/(1 - r)). */
#define TF_SOS_F32_MAX_RADIUS 0.9
/* Channels at most for which a lone channel's sections are spread over the lanes
 * (a wavefront) rather than its samples filtered one lane per channel. */
#define TF_SOS_WAVE_MAX_CHANNELS 1
/* Groups filtered together, block by block, when their lanes are adjacent. */
#define TF_SOS_BATCH 16
/* Lanes of the widest instantiation (AVX-512, float). */
#define TF_SOS_MAXLANES 16
/* Outputs of at least this many bytes are written with non-temporal stores where
 * the lanes read rows (transposes): measured on Zen 4, from ~8 MB on they no
 * longer fit the caches usefully, and skipping the read-for-ownership of their
 * lines saves 15-20 % (AVX-512) of a sosfilt. */
#define TF_SOS_NT_BYTES ((int64_t)8 << 20)
/* Work (samples x sections x lanes) below which a thread is not worth starting:
 * ~0.5-1 ms of filtering. Threads are started per call (tf_parallel_for), and on
 * a busy machine a second thread may wait milliseconds for a CPU while the call
 * waits for it: measured on a shared 2-vCPU Zen 4, a (64, 4096) float32 sosfilt
 * (0.15 ms on one thread) took 0.22 ms at best and 1.8 ms typically on two. */
#define TF_SOS_MIN_WORK ((int64_t)1 << 22)

/* How the outer*inner channels of an [outer, n, inner] signal form groups of
 * `lanes` channels: along inner when a row holds at least a full group (lanes
 * are then adjacent in memory), otherwise across rows in channel order. Complex
 * signals are seen as real ones with inner doubled; groups of an even number of
 * lanes then keep each (real, imaginary) pair in adjacent lanes. */
typedef struct {
    int64_t outer, n, inner, nch, ngroups, per_row;
    int by_row;
} tf_sos_layout;

typedef struct {
    int64_t base[TF_SOS_MAXLANES]; /* offset of the lane's sample 0 in x / y */
    int64_t zoff[TF_SOS_MAXLANES]; /* offset of the lane's state in zi / zf (section 0, k = 0) */
    int nl;                        /* live lanes */
    int contiguous;                /* all lanes live and adjacent: base[l] = base[0] + l */
    int nt;                        /* transposed stores may bypass the caches (see tf_sos_filter) */
} tf_sos_group;

/* Everything one call's threads share (read-only, except `partial`, whose
 * chunks are each written by one thread). */
typedef struct {
    tf_sos_layout lo;
    const double *sos;     /* [S, 6] reals, or [S, 12]: (re, im) pairs for complex kernels */
    int64_t S;
    const void *x, *zi, *gy, *gzf;
    void *y, *zf, *gx, *gzi;
    int64_t blk;           /* samples per block */
    int nt;                /* sosfilt: large output, rows aligned alike: non-temporal stores */
    int64_t seg;           /* backward: samples per recomputed segment */
    int64_t per_chunk;     /* backward: groups per reduction chunk */
    double *partial;       /* backward: [chunks, S, 5] gradient sums */
    int64_t edge;          /* sosfiltfilt: pad length */
    int padtype;           /* sosfiltfilt: TF_SIGNAL_PAD_* */
    /* tf_sos_run: the work items [0, items) are claimed `chunk` at a time from
     * `next` (atomically) by the threads running `fn` */
    tf_range_fn fn;
    int64_t items, chunk, next;
    void *out;             /* the output the call overwrites whole (tf_sos_run faults it in first) */
    int64_t out_bytes;
    /* cancellation (the _cb entry points): the run, NULL without a callback, so
     * that calls without one never poll; work polled so far, and its total */
    tf_rt *rt;
    int (*progress)(void *handle, int64_t done, int64_t total);
    void *handle;
    int64_t done, total;
    int64_t workers;       /* tf_sos_run: units of its phase */
} tf_sos_job;

/* Kernels add up their work (samples x sections per vector of lanes) and poll the
 * run every TF_SOS_POLL_WORK of it: ~30-100 us of filtering, so a thread reaches a
 * checkpoint soon after the caller pauses the run to report, while the poll (an
 * atomic add, a relaxed load, on the caller a clock read) costs < 0.1 % of it. The
 * callback itself is called every TF_SOS_REPORT_S (tf_rt_report's own clock). */
#define TF_SOS_POLL_WORK ((int64_t)1 << 16)
#define TF_SOS_REPORT_S 0.02

/* Poll the run: report (the calling thread, once the interval has passed) and pass
 * a checkpoint. Non-zero once the run is stopping: the kernel returns
 * TF_EINTERRUPTED without writing caller memory again. */
static int tf_sos_poll(const tf_sos_job *job, int64_t *work) {
    int64_t done = __atomic_add_fetch(&((tf_sos_job *)job)->done, *work, __ATOMIC_RELAXED);
    *work = 0;
    if (tf_rt_report(job->rt, done, 0)) return 1;
    return tf_rt_checkpoint(job->rt);
}

/* In a kernel's block loop: add `w` to the local counter `acc` and poll when it is
 * due; true once the run is stopping. One predictable branch per block without a
 * callback. */
#define TF_SOS_STOPPING(job, acc, w) ((job)->rt && ((acc) += (w)) >= TF_SOS_POLL_WORK && tf_sos_poll((job), &(acc)))

static void tf_sos_layout_init(tf_sos_layout *lo, int64_t outer, int64_t n, int64_t inner, int lanes) {
    lo->outer = outer;
    lo->n = n;
    lo->inner = inner;
    lo->nch = outer * inner;
    lo->by_row = inner >= lanes;
    if (lo->by_row) {
        lo->per_row = (inner + lanes - 1) / lanes;
        lo->ngroups = outer * lo->per_row;
    } else {
        lo->per_row = 0;
        lo->ngroups = (lo->nch + lanes - 1) / lanes;
    }
}

static void tf_sos_group_init(const tf_sos_layout *lo, int64_t g, int lanes, tf_sos_group *gr) {
    const int64_t n = lo->n, inner = lo->inner;
    if (lo->by_row) {
        int64_t o = g / lo->per_row, i0 = (g % lo->per_row) * lanes;
        int64_t nl = inner - i0 < lanes ? inner - i0 : lanes;
        gr->nl = (int)nl;
        for (int l = 0; l < gr->nl; l++) {
            gr->base[l] = o * n * inner + i0 + l;
            gr->zoff[l] = o * 2 * inner + i0 + l;
        }
    } else {
        int64_t ch0 = g * lanes;
        int64_t nl = lo->nch - ch0 < lanes ? lo->nch - ch0 : lanes;
        gr->nl = (int)nl;
        for (int l = 0; l < gr->nl; l++) {
            int64_t ch = ch0 + l, o = ch / inner, i = ch % inner;
            gr->base[l] = o * n * inner + i;
            gr->zoff[l] = o * 2 * inner + i;
        }
    }
    gr->nt = 0;
    gr->contiguous = gr->nl == lanes;
    for (int l = 1; l < gr->nl && gr->contiguous; l++)
        if (gr->base[l] != gr->base[0] + l) gr->contiguous = 0;
}

/* Scratch memory aligned for any vector type (freed with free()). */
static void *tf_sos_alloc(size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes ? bytes : 64);
}

/* Non-temporal stores (x86): a large output is written around the caches, with no
 * read-for-ownership of lines that are overwritten whole. Only where the group
 * allows it (g->nt: rows aligned alike) and the first row's address is aligned
 * for the store; the kernels end with TF_SOS_SFENCE so the stores are visible
 * to whoever reads the output next. */
#define TF_SOS_NT(g, p, align) ((g)->nt && !((uintptr_t)(const void *)(p) & ((align) - 1)))
#if defined(__x86_64__) || defined(__i386__)
#define TF_SOS_SFENCE() _mm_sfence()
#else
#define TF_SOS_SFENCE() ((void)0)
#endif

/* ------------------------------------------------------------------------ */
/* Instantiations                                                            */
/* ------------------------------------------------------------------------ */

/* Element kinds: float64 signals in float64 arithmetic, in SciPy's exact
 * operation order (f64: bitwise SciPy's results); float32 signals in float32
 * arithmetic (f32); float32 signals in float64 arithmetic (f32d, for filters
 * whose poles are too close to the unit circle for float32 roundoff; see
 * tf_signal_f32_arith). f32 and f32d use the fused state-space form. The c128,
 * c64 and c64d kinds are the same three with complex coefficients (complex
 * signals with real coefficients use the real kernels: their real and imaginary
 * parts are filtered as separate channels). */

/* Baseline: 128-bit generic vectors (SSE2 on any x86-64), no FMA. */
typedef double tf_v2d __attribute__((vector_size(16)));
typedef float tf_v4f __attribute__((vector_size(16)));

#if TF_SOS_X86
static inline tf_v2d tf_sos_shift_v2d(tf_v2d prev, double x) {
    return (tf_v2d)_mm_unpacklo_pd(_mm_set_sd(x), (__m128d)prev);
}
static inline tf_v4f tf_sos_shift_v4f(tf_v4f prev, float x) {
    __m128 t = _mm_shuffle_ps((__m128)prev, (__m128)prev, _MM_SHUFFLE(2, 1, 0, 0));
    return (tf_v4f)_mm_move_ss(t, _mm_set_ss(x));
}
static inline tf_v2d tf_sos_swap_v2d(tf_v2d v) { return (tf_v2d)_mm_shuffle_pd((__m128d)v, (__m128d)v, 1); }
static inline tf_v4f tf_sos_swap_v4f(tf_v4f v) {
    return (tf_v4f)_mm_shuffle_ps((__m128)v, (__m128)v, _MM_SHUFFLE(2, 3, 0, 1));
}
#else
static inline tf_v2d tf_sos_shift_v2d(tf_v2d prev, double x) { return (tf_v2d){x, prev[0]}; }
static inline tf_v4f tf_sos_shift_v4f(tf_v4f prev, float x) { return (tf_v4f){x, prev[0], prev[1], prev[2]}; }
static inline tf_v2d tf_sos_swap_v2d(tf_v2d v) { return (tf_v2d){v[1], v[0]}; }
static inline tf_v4f tf_sos_swap_v4f(tf_v4f v) { return (tf_v4f){v[1], v[0], v[3], v[2]}; }
#endif

#define ATTR
#define SFX f64_base
#define EXACT 1
#define IO double
#define CT double
#define VT tf_v2d
#define NL 2
#define VFMA(a, b, c) ((a) * (b) + (c))
#define WAVE_SHIFT tf_sos_shift_v2d
#include "signal_simd.h"

#define SFX f32d_base
#define IO float
#define CT double
#define VT tf_v2d
#define NL 2
#define VFMA(a, b, c) ((a) * (b) + (c))
#define WAVE_SHIFT tf_sos_shift_v2d
#include "signal_simd.h"

#define SFX f32_base
#define IO float
#define CT float
#define VT tf_v4f
#define NL 4
#define VFMA(a, b, c) ((a) * (b) + (c))
#define WAVE_SHIFT tf_sos_shift_v4f
#include "signal_simd.h"

#define SFX c128_base
#define CPLX 1
#define EXACT 1
#define NO_WAVE 1
#define NO_BACKWARD 1
#define IO double
#define CT double
#define VT tf_v2d
#define NL 2
#define VFMA(a, b, c) ((a) * (b) + (c))
#define SWAP_PAIRS tf_sos_swap_v2d
#include "signal_simd.h"

#define SFX c64d_base
#define CPLX 1
#define NO_WAVE 1
#define NO_BACKWARD 1
#define IO float
#define CT double
#define VT tf_v2d
#define NL 2
#define VFMA(a, b, c) ((a) * (b) + (c))
#define SWAP_PAIRS tf_sos_swap_v2d
#include "signal_simd.h"

#define SFX c64_base
#define CPLX 1
#define NO_WAVE 1
#define NO_BACKWARD 1
#define IO float
#define CT float
#define VT tf_v4f
#define NL 4
#define VFMA(a, b, c) ((a) * (b) + (c))
#define SWAP_PAIRS tf_sos_swap_v4f
#include "signal_simd.h"
#undef ATTR

#if TF_SOS_X86
/* ---- AVX2 + FMA ---------------------------------------------------------- */
typedef double tf_v4d __attribute__((vector_size(32)));
typedef float tf_v8f __attribute__((vector_size(32)));

#define ATTR __attribute__((target("avx2,fma")))

/* In-register transposes for the channel-major case (inner == 1): lane l reads
 * its own row, 8 (float) or 4 (double) samples at a time; and for complex rows
 * (inner == 2), a pair of lanes reads one row's (re, im) pairs. */
ATTR static inline void tf_sos_tr8_ps(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

ATTR static inline void tf_sos_tr4_pd(__m256d r[4]) {
    __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
    __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
    r[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

/* 2x2 transpose of 128-bit halves: (a.lo, b.lo), (a.hi, b.hi). */
ATTR static inline void tf_sos_tr2x128(__m256d r[2]) {
    __m256d lo = _mm256_permute2f128_pd(r[0], r[1], 0x20), hi = _mm256_permute2f128_pd(r[0], r[1], 0x31);
    r[0] = lo;
    r[1] = hi;
}

/* The block transposes (signal_transpose.h) at this width. */
#define TR_SFX avx2
#define TR_BYTES 32
#define TR_VF tf_v8f
#define TR_VD tf_v4d
#define TR_NF 8
#define TR_ND 4
#define TR_PS __m256
#define TR_PD __m256d
#define TR_LOADU_PS _mm256_loadu_ps
#define TR_STOREU_PS _mm256_storeu_ps
#define TR_STREAM_PS _mm256_stream_ps
#define TR_LOADU_PD _mm256_loadu_pd
#define TR_STOREU_PD _mm256_storeu_pd
#define TR_STREAM_PD _mm256_stream_pd
#define TR_LOADU_HPS _mm_loadu_ps
#define TR_STOREU_HPS _mm_storeu_ps
#define TR_STREAM_HPS _mm_stream_ps
#define TR_CASTPS_PD _mm256_castps_pd
#define TR_CASTPD_PS _mm256_castpd_ps
#define TR_CVTPS_PD _mm256_cvtps_pd
#define TR_CVTPD_PS _mm256_cvtpd_ps
#define TR_TRANSPOSE_PS tf_sos_tr8_ps
#define TR_TRANSPOSE_PD tf_sos_tr4_pd
#define TR_TRANSPOSE_PAIRS tf_sos_tr2x128
#include "signal_transpose.h"

/* The wavefront's step: lanes move up by one, the new sample enters lane 0. */
ATTR static inline tf_v4d tf_sos_shift_v4d(tf_v4d prev, double xk) {
    return (tf_v4d)_mm256_blend_pd(_mm256_permute4x64_pd((__m256d)prev, 0x90), _mm256_set1_pd(xk), 1);
}

ATTR static inline tf_v8f tf_sos_shift_v8f(tf_v8f prev, float xk) {
    const __m256i up = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6);
    return (tf_v8f)_mm256_blend_ps(_mm256_permutevar8x32_ps((__m256)prev, up), _mm256_set1_ps(xk), 1);
}

ATTR static inline tf_v4d tf_sos_swap_v4d(tf_v4d v) { return (tf_v4d)_mm256_permute_pd((__m256d)v, 0x5); }
ATTR static inline tf_v8f tf_sos_swap_v8f(tf_v8f v) { return (tf_v8f)_mm256_permute_ps((__m256)v, 0xB1); }

#define FMA4D(a, b, c) ((tf_v4d)_mm256_fmadd_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
#define FMA8F(a, b, c) ((tf_v8f)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))

#define SFX f64_avx2
#define EXACT 1
#define IO double
#define CT double
#define VT tf_v4d
#define NL 4
#define VFMA FMA4D
#define TRANSPOSE_LOAD tf_sos_tload_f64_avx2
#define TRANSPOSE_STORE tf_sos_tstore_f64_avx2
#define TRANSPOSE_LOAD2 tf_sos_tload2_f64_avx2
#define TRANSPOSE_STORE2 tf_sos_tstore2_f64_avx2
#define WAVE_SHIFT tf_sos_shift_v4d
#include "signal_simd.h"

#define SFX f32d_avx2
#define IO float
#define CT double
#define VT tf_v4d
#define NL 4
#define VFMA FMA4D
#define TRANSPOSE_LOAD tf_sos_tload_f32d_avx2
#define TRANSPOSE_STORE tf_sos_tstore_f32d_avx2
#define TRANSPOSE_LOAD2 tf_sos_tload2_f32d_avx2
#define TRANSPOSE_STORE2 tf_sos_tstore2_f32d_avx2
#define WAVE_SHIFT tf_sos_shift_v4d
#include "signal_simd.h"

#define SFX f32_avx2
#define IO float
#define CT float
#define VT tf_v8f
#define NL 8
#define VFMA FMA8F
#define TRANSPOSE_LOAD tf_sos_tload_f32_avx2
#define TRANSPOSE_STORE tf_sos_tstore_f32_avx2
#define TRANSPOSE_LOAD2 tf_sos_tload2_f32_avx2
#define TRANSPOSE_STORE2 tf_sos_tstore2_f32_avx2
#define WAVE_SHIFT tf_sos_shift_v8f
#include "signal_simd.h"

#define SFX c128_avx2
#define CPLX 1
#define EXACT 1
#define NO_WAVE 1
#define NO_BACKWARD 1
#define IO double
#define CT double
#define VT tf_v4d
#define NL 4
#define VFMA FMA4D
#define TRANSPOSE_LOAD2 tf_sos_tload2_f64_avx2
#define TRANSPOSE_STORE2 tf_sos_tstore2_f64_avx2
#define SWAP_PAIRS tf_sos_swap_v4d
#include "signal_simd.h"

#define SFX c64d_avx2
#define CPLX 1
#define NO_WAVE 1
#define NO_BACKWARD 1
#define IO float
#define CT double
#define VT tf_v4d
#define NL 4
#define VFMA FMA4D
#define TRANSPOSE_LOAD2 tf_sos_tload2_f32d_avx2
#define TRANSPOSE_STORE2 tf_sos_tstore2_f32d_avx2
#define SWAP_PAIRS tf_sos_swap_v4d
#include "signal_simd.h"

#define SFX c64_avx2
#define CPLX 1
#define NO_WAVE 1
#define NO_BACKWARD 1
#define IO float
#define CT float
#define VT tf_v8f
#define NL 8
#define VFMA FMA8F
#define TRANSPOSE_LOAD2 tf_sos_tload2_f32_avx2
#define TRANSPOSE_STORE2 tf_sos_tstore2_f32_avx2
#define SWAP_PAIRS tf_sos_swap_v8f
#include "signal_simd.h"
#undef ATTR

/* ---- AVX-512 F/DQ/BW/VL ----------------------------------------------------- */
typedef double tf_v8d __attribute__((vector_size(64)));
typedef float tf_v16f __attribute__((vector_size(64)));

#define ATTR __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")))

/* 4x4 transpose of 128-bit blocks: r[i].block[j] <-> r[j].block[i]. */
ATTR static inline void tf_sos_tr4x128(__m512d *a, __m512d *b, __m512d *c, __m512d *d) {
    __m512d u0 = _mm512_shuffle_f64x2(*a, *b, 0x44), u1 = _mm512_shuffle_f64x2(*a, *b, 0xEE);
    __m512d u2 = _mm512_shuffle_f64x2(*c, *d, 0x44), u3 = _mm512_shuffle_f64x2(*c, *d, 0xEE);
    *a = _mm512_shuffle_f64x2(u0, u2, 0x88);
    *b = _mm512_shuffle_f64x2(u0, u2, 0xDD);
    *c = _mm512_shuffle_f64x2(u1, u3, 0x88);
    *d = _mm512_shuffle_f64x2(u1, u3, 0xDD);
}

ATTR static inline void tf_sos_tr8_pd512(__m512d r[8]) {
    __m512d t[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm512_unpacklo_pd(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_pd(r[2 * i], r[2 * i + 1]);
    }
    /* t[2i + e].block[j] = rows (2i, 2i + 1) at column 2j + e */
    for (int e = 0; e < 2; e++) {
        tf_sos_tr4x128(&t[e], &t[2 + e], &t[4 + e], &t[6 + e]);
        for (int j = 0; j < 4; j++) r[2 * j + e] = t[2 * j + e];
    }
}

ATTR static inline void tf_sos_tr16_ps512(__m512 r[16]) {
    __m512 t[16];
    __m512d u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int q = 0; q < 4; q++) {
        /* u[4q + e].block[j] = rows 4q .. 4q + 3 at column 4j + e */
        u[4 * q + 0] = _mm512_castps_pd(_mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44));
        u[4 * q + 1] = _mm512_castps_pd(_mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE));
        u[4 * q + 2] = _mm512_castps_pd(_mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44));
        u[4 * q + 3] = _mm512_castps_pd(_mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE));
    }
    for (int e = 0; e < 4; e++) {
        tf_sos_tr4x128(&u[e], &u[4 + e], &u[8 + e], &u[12 + e]);
        for (int j = 0; j < 4; j++) r[4 * j + e] = _mm512_castpd_ps(u[4 * j + e]);
    }
}

/* 4x4 transpose of 128-bit pairs, on an array (signal_transpose.h's form). */
ATTR static inline void tf_sos_tr4x128_pd512(__m512d r[4]) { tf_sos_tr4x128(&r[0], &r[1], &r[2], &r[3]); }

/* The block transposes (signal_transpose.h) at this width. */
#define TR_SFX avx512
#define TR_BYTES 64
#define TR_VF tf_v16f
#define TR_VD tf_v8d
#define TR_NF 16
#define TR_ND 8
#define TR_PS __m512
#define TR_PD __m512d
#define TR_LOADU_PS _mm512_loadu_ps
#define TR_STOREU_PS _mm512_storeu_ps
#define TR_STREAM_PS _mm512_stream_ps
#define TR_LOADU_PD _mm512_loadu_pd
#define TR_STOREU_PD _mm512_storeu_pd
#define TR_STREAM_PD _mm512_stream_pd
#define TR_LOADU_HPS _mm256_loadu_ps
#define TR_STOREU_HPS _mm256_storeu_ps
#define TR_STREAM_HPS _mm256_stream_ps
#define TR_CASTPS_PD _mm512_castps_pd
#define TR_CASTPD_PS _mm512_castpd_ps
#define TR_CVTPS_PD _mm512_cvtps_pd
#define TR_CVTPD_PS _mm512_cvtpd_ps
#define TR_TRANSPOSE_PS tf_sos_tr16_ps512
#define TR_TRANSPOSE_PD tf_sos_tr8_pd512
#define TR_TRANSPOSE_PAIRS tf_sos_tr4x128_pd512
#include "signal_transpose.h"

ATTR static inline tf_v8d tf_sos_shift_v8d(tf_v8d prev, double xk) {
    return (tf_v8d)_mm512_castsi512_pd(
        _mm512_alignr_epi64(_mm512_castpd_si512((__m512d)prev), _mm512_castpd_si512(_mm512_set1_pd(xk)), 7));
}

ATTR static inline tf_v16f tf_sos_shift_v16f(tf_v16f prev, float xk) {
    return (tf_v16f)_mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512((__m512)prev), _mm512_castps_si512(_mm512_set1_ps(xk)), 15));
}

ATTR static inline tf_v8d tf_sos_swap_v8d(tf_v8d v) { return (tf_v8d)_mm512_permute_pd((__m512d)v, 0x55); }
ATTR static inline tf_v16f tf_sos_swap_v16f(tf_v16f v) { return (tf_v16f)_mm512_permute_ps((__m512)v, 0xB1); }

#define FMA8D(a, b, c) ((tf_v8d)_mm512_fmadd_pd((__m512d)(a), (__m512d)(b), (__m512d)(c)))
#define FMA16F(a, b, c) ((tf_v16f)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))

#define SFX f64_avx512
#define EXACT 1
#define IO double
#define CT double
#define VT tf_v8d
#define NL 8
#define VFMA FMA8D
#define TRANSPOSE_LOAD tf_sos_tload_f64_avx512
#define TRANSPOSE_STORE tf_sos_tstore_f64_avx512
#define TRANSPOSE_LOAD2 tf_sos_tload2_f64_avx512
#define TRANSPOSE_STORE2 tf_sos_tstore2_f64_avx512
#define WAVE_SHIFT tf_sos_shift_v8d
#include "signal_simd.h"

#define SFX f32d_avx512
#define IO float
#define CT double
#define VT tf_v8d
#define NL 8
#define VFMA FMA8D
#define TRANSPOSE_LOAD tf_sos_tload_f32d_avx512
#define TRANSPOSE_STORE tf_sos_tstore_f32d_avx512
#define TRANSPOSE_LOAD2 tf_sos_tload2_f32d_avx512
#define TRANSPOSE_STORE2 tf_sos_tstore2_f32d_avx512
#define WAVE_SHIFT tf_sos_shift_v8d
#include "signal_simd.h"

#define SFX f32_avx512
#define IO float
#define CT float
#define VT tf_v16f
#define NL 16
#define VFMA FMA16F
#define TRANSPOSE_LOAD tf_sos_tload_f32_avx512
#define TRANSPOSE_STORE tf_sos_tstore_f32_avx512
#define TRANSPOSE_LOAD2 tf_sos_tload2_f32_avx512
#define TRANSPOSE_STORE2 tf_sos_tstore2_f32_avx512
#define WAVE_SHIFT tf_sos_shift_v16f
#include "signal_simd.h"

#define SFX c128_avx512
#define CPLX 1
#define EXACT 1
#define NO_WAVE 1
#define NO_BACKWARD 1
#define IO double
#define CT double
#define VT tf_v8d
#define NL 8
#define VFMA FMA8D
#define TRANSPOSE_LOAD2 tf_sos_tload2_f64_avx512
#define TRANSPOSE_STORE2 tf_sos_tstore2_f64_avx512
#define SWAP_PAIRS tf_sos_swap_v8d
#include "signal_simd.h"

#define SFX c64d_avx512
#define CPLX 1
#define NO_WAVE 1
#define NO_BACKWARD 1
#define IO float
#define CT double
#define VT tf_v8d
#define NL 8
#define VFMA FMA8D
#define TRANSPOSE_LOAD2 tf_sos_tload2_f32d_avx512
#define TRANSPOSE_STORE2 tf_sos_tstore2_f32d_avx512
#define SWAP_PAIRS tf_sos_swap_v8d
#include "signal_simd.h"

#define SFX c64_avx512
#define CPLX 1
#define NO_WAVE 1
#define NO_BACKWARD 1
#define IO float
#define CT float
#define VT tf_v16f
#define NL 16
#define VFMA FMA16F
#define TRANSPOSE_LOAD2 tf_sos_tload2_f32_avx512
#define TRANSPOSE_STORE2 tf_sos_tstore2_f32_avx512
#define SWAP_PAIRS tf_sos_swap_v16f
#include "signal_simd.h"
#undef ATTR
#endif /* TF_SOS_X86 */

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct {
    int lanes;
    tf_range_fn sosfilt, backward, filtfilt;
} tf_sos_impl;

typedef struct {
    int lanes;
    tf_range_fn fn;
} tf_sos_wave;

enum { TF_SOS_F64 = 0, TF_SOS_F32 = 1, TF_SOS_F32D = 2, TF_SOS_C128 = 3, TF_SOS_C64 = 4, TF_SOS_C64D = 5 };

#define TF_SOS_IMPL(lanes, sfx) \
    (tf_sos_impl) { lanes, sosfilt_range_##sfx, backward_range_##sfx, filtfilt_range_##sfx }
#define TF_SOS_CIMPL(lanes, sfx) \
    (tf_sos_impl) { lanes, sosfilt_range_##sfx, NULL, filtfilt_range_##sfx }

/* The level signal runs at: TENSORFFI_SIMD=scalar|avx2|avx512 picks that level
 * (capped by the CPU); unset, the best the CPU has. */
int tf_signal_simd(void) { return tf_simd_level(); }

static tf_sos_impl tf_sos_pick(int kind, int level) {
#if TF_SOS_X86
    if (level >= TF_SIMD_AVX512) {
        switch (kind) {
        case TF_SOS_F32: return TF_SOS_IMPL(16, f32_avx512);
        case TF_SOS_F32D: return TF_SOS_IMPL(8, f32d_avx512);
        case TF_SOS_C128: return TF_SOS_CIMPL(8, c128_avx512);
        case TF_SOS_C64: return TF_SOS_CIMPL(16, c64_avx512);
        case TF_SOS_C64D: return TF_SOS_CIMPL(8, c64d_avx512);
        default: return TF_SOS_IMPL(8, f64_avx512);
        }
    }
    if (level >= TF_SIMD_AVX2) {
        switch (kind) {
        case TF_SOS_F32: return TF_SOS_IMPL(8, f32_avx2);
        case TF_SOS_F32D: return TF_SOS_IMPL(4, f32d_avx2);
        case TF_SOS_C128: return TF_SOS_CIMPL(4, c128_avx2);
        case TF_SOS_C64: return TF_SOS_CIMPL(8, c64_avx2);
        case TF_SOS_C64D: return TF_SOS_CIMPL(4, c64d_avx2);
        default: return TF_SOS_IMPL(4, f64_avx2);
        }
    }
#else
    (void)level;
#endif
    switch (kind) {
    case TF_SOS_F32: return TF_SOS_IMPL(4, f32_base);
    case TF_SOS_F32D: return TF_SOS_IMPL(2, f32d_base);
    case TF_SOS_C128: return TF_SOS_CIMPL(2, c128_base);
    case TF_SOS_C64: return TF_SOS_CIMPL(4, c64_base);
    case TF_SOS_C64D: return TF_SOS_CIMPL(2, c64d_base);
    default: return TF_SOS_IMPL(2, f64_base);
    }
}

/* The level of the lane kernels for `nch` channels: at the AVX-512 level, a
 * signal of no more channels than an AVX2 vector holds runs on AVX2 vectors (the
 * wider ones would only carry empty lanes, at twice the cost per operation on CPUs
 * that split 512-bit operations, Zen 4 among them, and at no gain elsewhere). */
static int tf_sos_lane_level(int kind, int level, int64_t nch) {
#if TF_SOS_X86
    if (level >= TF_SIMD_AVX512 && nch <= tf_sos_pick(kind, TF_SIMD_AVX2).lanes) return TF_SIMD_AVX2;
#else
    (void)kind, (void)nch;
#endif
    return level;
}

/* The wavefront kernel for a lone channel of S sections (real kinds only), or
 * lanes = 0 where none fits. It is latency-bound, so it uses the narrowest
 * vectors that hold the cascade: at the AVX-512 level, 256-bit vectors up to 8
 * float32 / 4 float64 sections, 512-bit ones beyond. */
static tf_sos_wave tf_sos_pick_wave(int kind, int level, int64_t S) {
    tf_sos_wave w = {0, NULL};
#if TF_SOS_X86
    if (level >= TF_SIMD_AVX512) {
        if (kind == TF_SOS_F32) w = S <= 8 ? (tf_sos_wave){8, wave_range_f32_avx2} : (tf_sos_wave){16, wave_range_f32_avx512};
        if (kind == TF_SOS_F64) w = S <= 4 ? (tf_sos_wave){4, wave_range_f64_avx2} : (tf_sos_wave){8, wave_range_f64_avx512};
        if (kind == TF_SOS_F32D) w = S <= 4 ? (tf_sos_wave){4, wave_range_f32d_avx2} : (tf_sos_wave){8, wave_range_f32d_avx512};
    } else if (level >= TF_SIMD_AVX2) {
        if (kind == TF_SOS_F32) w = (tf_sos_wave){8, wave_range_f32_avx2};
        if (kind == TF_SOS_F64) w = (tf_sos_wave){4, wave_range_f64_avx2};
        if (kind == TF_SOS_F32D) w = (tf_sos_wave){4, wave_range_f32d_avx2};
    } else
#else
    (void)level;
#endif
    {
        if (kind == TF_SOS_F32) w = (tf_sos_wave){4, wave_range_f32_base};
        if (kind == TF_SOS_F64) w = (tf_sos_wave){2, wave_range_f64_base};
        if (kind == TF_SOS_F32D) w = (tf_sos_wave){2, wave_range_f32d_base};
    }
    /* float32 data in float64 arithmetic: the passes store the signal between them
     * in float32, so only a cascade that fits one pass is filtered this way. */
    if (kind == TF_SOS_F32D && S > w.lanes) w.lanes = 0;
    return w;
}

/* Largest pole radius of the cascade (NaN if a coefficient is not finite). The
 * poles of a section are the roots of z^2 + a1 z + a2; `stride` is 6 for real
 * rows and 12 for complex ones (re, im pairs; then a1 = (r[8], r[9]), a2 =
 * (r[10], r[11])). */
static double tf_sos_max_pole_radius(const double *sos, int64_t S, int cplx) {
    double rmax = 0.0;
    for (int64_t s = 0; s < S; s++) {
        double r;
        if (!cplx) {
            const double a1 = sos[6 * s + 4], a2 = sos[6 * s + 5];
            const double disc = a1 * a1 - 4.0 * a2;
            if (disc < 0.0) {
                r = sqrt(a2); /* complex pair: |p|^2 = a2 */
            } else if (disc >= 0.0) {
                double q = sqrt(disc);
                r = fmax(fabs(-a1 + q), fabs(-a1 - q)) / 2.0;
            } else {
                return NAN;
            }
        } else {
            const double *c = sos + 12 * s;
            const double a1r = c[8], a1i = c[9], a2r = c[10], a2i = c[11];
            /* d = a1^2 - 4 a2, q = sqrt(d) (principal), poles (-a1 +- q) / 2 */
            const double dr = a1r * a1r - a1i * a1i - 4.0 * a2r, di = 2.0 * a1r * a1i - 4.0 * a2i;
            const double m = hypot(dr, di);
            const double qr = sqrt((m + dr) / 2.0), qi = copysign(sqrt(fmax((m - dr) / 2.0, 0.0)), di);
            r = fmax(hypot(-a1r + qr, -a1i + qi), hypot(-a1r - qr, -a1i - qi)) / 2.0;
        }
        if (!(r <= rmax)) rmax = r; /* also propagates NaN */
    }
    return rmax;
}

int tf_signal_f32_arith(const double *sos, int64_t n_sections) {
    if (n_sections <= 0) return 1;
    if (!sos) return 0;
    double r = tf_sos_max_pole_radius(sos, n_sections, 0);
    return r <= TF_SOS_F32_MAX_RADIUS;
}

int tf_signal_f32_arith_complex(const double *sos, int64_t n_sections) {
    if (n_sections <= 0) return 1;
    if (!sos) return 0;
    double r = tf_sos_max_pole_radius(sos, n_sections, 1);
    return r <= TF_SOS_F32_MAX_RADIUS;
}

/* is_f32: float32 data; cplx: complex coefficients. */
static int tf_sos_kind(int is_f32, int cplx, const double *sos, int64_t S) {
    if (cplx) {
        if (!is_f32) return TF_SOS_C128;
        return tf_signal_f32_arith_complex(sos, S) ? TF_SOS_C64 : TF_SOS_C64D;
    }
    if (!is_f32) return TF_SOS_F64;
    return tf_signal_f32_arith(sos, S) ? TF_SOS_F32 : TF_SOS_F32D;
}

static int tf_sos_check(const char *fn, int cplx, const double *sos, int64_t S, int64_t outer, int64_t n,
                        int64_t inner) {
    if (S < 0 || outer < 0 || n < 0 || inner < 0)
        return tf_error(TF_ESHAPE, "%s: negative size (n_sections=%lld, outer=%lld, n=%lld, inner=%lld)", fn,
                        (long long)S, (long long)outer, (long long)n, (long long)inner);
    if (cplx && inner % 2)
        return tf_error(TF_ESHAPE, "%s: inner (%lld) must be even: it counts the real and imaginary parts", fn,
                        (long long)inner);
    if (S > 0 && !sos) return tf_error(TF_EINVAL, "%s: sos is NULL", fn);
    for (int64_t s = 0; s < S; s++) {
        const double a0r = cplx ? sos[12 * s + 6] : sos[6 * s + 3], a0i = cplx ? sos[12 * s + 7] : 0.0;
        if (a0r != 1.0 || a0i != 0.0) {
            if (cplx)
                return tf_error(TF_EINVAL, "%s: sos[%lld, 3] is (%g%+gj); every section's a0 must be 1", fn,
                                (long long)s, a0r, a0i);
            return tf_error(TF_EINVAL, "%s: sos[%lld, 3] is %g; every section's a0 must be 1", fn, (long long)s, a0r);
        }
    }
    return TF_OK;
}

/* A thread of tf_sos_run: claims chunks of work items until none is left, so a
 * thread that runs (on a machine busy with other work, one of ours may wait for
 * a CPU) takes over the items another has not reached. Each item's result does
 * not depend on which thread computes it. */
static int tf_sos_worker(void *vctx, int64_t w0, int64_t w1) {
    tf_sos_job *job = (tf_sos_job *)vctx;
    (void)w0, (void)w1;
    for (;;) {
        const int64_t i0 = __atomic_fetch_add(&job->next, job->chunk, __ATOMIC_RELAXED);
        if (i0 >= job->items) return TF_OK;
        const int64_t i1 = i0 + job->chunk < job->items ? i0 + job->chunk : job->items;
        const int rc = job->fn(job, i0, i1);
        if (rc) {
            __atomic_store_n(&job->next, job->items, __ATOMIC_RELAXED); /* the others stop too */
            return rc;
        }
    }
}

static int tf_sos_unit(void *vctx, int64_t unit, int tid) {
    (void)unit, (void)tid;
    return tf_sos_worker(vctx, 0, 0);
}

static int64_t tf_sos_done(void *vctx) { return __atomic_load_n(&((tf_sos_job *)vctx)->done, __ATOMIC_RELAXED); }

/* One phase of `workers` units, each a tf_sos_worker taking chunks until none is
 * left; the kernels poll the run (job->rt) from inside their block loops. */
static int tf_sos_driver(tf_rt *rt, void *vctx) {
    tf_sos_job *job = (tf_sos_job *)vctx;
    job->rt = rt;
    return tf_rt_phase(rt, job->workers, tf_sos_unit, job);
}

/* fn over items [0, items) on up to `nthreads` threads (fewer when there is less
 * than `min_per_thread` items per thread), balanced dynamically. */
static int tf_sos_run(tf_sos_job *job, tf_range_fn fn, int64_t items, int nthreads, int64_t min_per_thread) {
    if (items <= 0) return TF_OK;
    int64_t useful = items / (min_per_thread > 0 ? min_per_thread : 1);
    if (useful < 1) useful = 1;
    const int64_t workers = nthreads < useful ? (nthreads > 0 ? nthreads : 1) : useful;
    /* A large fresh output (a new mapping: glibc maps blocks above 32 MiB afresh
     * on every call) is faulted in here, in one system call, before the threads
     * start, rather than fault by fault by the kernels' stores from two threads
     * at once (tf_populate leaves memory already in place alone).
     * Measured on a shared 2-vCPU Zen 4 (load 3-4), sosfilt (64, 65536) float64,
     * calls alternating in one process: fastest 1-thread call 9.3-9.5 ms against
     * 10.0-10.4 without, 2 threads alike in three runs of four; sosfiltfilt
     * unchanged (benchmarks/RESULTS.md, signal, Zen 4). */
    tf_populate(job->out, job->out_bytes);
    if (workers == 1 && !job->progress) return fn(job, 0, items);
    job->fn = fn;
    job->items = items;
    job->chunk = items / (4 * workers) > 0 ? items / (4 * workers) : 1;
    job->next = 0;
    job->workers = workers;
    if (!job->progress) return tf_parallel_for(workers, (int)workers, 1, tf_sos_worker, job);
    tf_rt_opts o = {.threads = (int)workers, .fn = job->progress, .handle = job->handle, .done = tf_sos_done,
                    .done_ctx = job, .total = job->total, .interval = TF_SOS_REPORT_S};
    return tf_rt_run(&o, tf_sos_driver, job);
}

/* Threads worth starting for `groups` groups of `per_group` units of work. */
static int64_t tf_sos_min_groups(int64_t per_group) {
    if (per_group < 1) per_group = 1;
    int64_t m = TF_SOS_MIN_WORK / per_group;
    return m < 1 ? 1 : m;
}

/* A run stopped by its callback: say how far it got. */
static int tf_sos_stopped(const char *fn, const tf_sos_job *job, int rc) {
    if (rc != TF_EINTERRUPTED) return rc;
    return tf_error(TF_EINTERRUPTED, "%s: stopped by the progress callback after %lld of %lld units of work", fn,
                    (long long)job->done, (long long)job->total);
}

static void tf_sos_job_init(tf_sos_job *job, const tf_sos_impl *impl, const double *sos, int64_t S, int64_t outer,
                            int64_t n, int64_t inner, int elsize) {
    memset(job, 0, sizeof *job);
    tf_sos_layout_init(&job->lo, outer, n, inner, impl->lanes);
    job->sos = sos;
    job->S = S;
    job->blk = job->lo.by_row ? TF_SOS_BLOCK_ADJACENT : TF_SOS_BLOCK_ROWS;
    /* non-temporal stores: a large output whose rows (lanes read rows) all start
     * at the same alignment */
    job->nt = !job->lo.by_row && outer * n * inner * elsize >= TF_SOS_NT_BYTES && (n * inner * elsize) % 64 == 0;
}

static int tf_sos_filter(const char *fn, int is_f32, int cplx, const double *sos, int64_t S, const void *x, void *y,
                         int64_t outer, int64_t n, int64_t inner, const void *zi, void *zf, int nthreads,
                         tf_progress_fn progress, void *handle) {
    int rc = tf_sos_check(fn, cplx, sos, S, outer, n, inner);
    if (rc) return rc;
    const int kind = tf_sos_kind(is_f32, cplx, sos, S);
    const int level = tf_signal_simd();
    tf_sos_impl impl = tf_sos_pick(kind, tf_sos_lane_level(kind, level, outer * inner));
    tf_sos_job job;
    tf_sos_job_init(&job, &impl, sos, S, outer, n, inner, is_f32 ? 4 : 8);
    job.x = x;
    job.y = y;
    job.zi = zi;
    job.zf = zf;
    job.out = y;
    job.out_bytes = outer * n * inner * (is_f32 ? 4 : 8);
    job.progress = progress;
    job.handle = handle;
    if (S > 1 && outer * inner <= TF_SOS_WAVE_MAX_CHANNELS) {
        tf_sos_wave w = tf_sos_pick_wave(kind, level, S);
        if (w.lanes) {
            job.total = outer * inner * n * ((S + w.lanes - 1) / w.lanes) * w.lanes;
            return tf_sos_stopped(fn, &job, tf_sos_run(&job, w.fn, outer * inner, nthreads, tf_sos_min_groups(n * S)));
        }
    }
    int64_t work = n * (S > 0 ? S : 1) * (int64_t)impl.lanes;
    job.total = job.lo.ngroups * n * S;
    return tf_sos_stopped(fn, &job, tf_sos_run(&job, impl.sosfilt, job.lo.ngroups, nthreads, tf_sos_min_groups(work)));
}

int tf_signal_sosfilt_f32(const double *sos, int64_t n_sections, const float *x, float *y, int64_t outer, int64_t n,
                          int64_t inner, const float *zi, float *zf, int nthreads) {
    return tf_sos_filter("tf_signal_sosfilt_f32", 1, 0, sos, n_sections, x, y, outer, n, inner, zi, zf, nthreads, NULL, NULL);
}

int tf_signal_sosfilt_cb_f32(const double *sos, int64_t n_sections, const float *x, float *y, int64_t outer, int64_t n,
                          int64_t inner, const float *zi, float *zf, int nthreads, tf_progress_fn fn, void *handle) {
    return tf_sos_filter("tf_signal_sosfilt_cb_f32", 1, 0, sos, n_sections, x, y, outer, n, inner, zi, zf, nthreads, fn, handle);
}

int tf_signal_sosfilt_f64(const double *sos, int64_t n_sections, const double *x, double *y, int64_t outer, int64_t n,
                          int64_t inner, const double *zi, double *zf, int nthreads) {
    return tf_sos_filter("tf_signal_sosfilt_f64", 0, 0, sos, n_sections, x, y, outer, n, inner, zi, zf, nthreads, NULL, NULL);
}

int tf_signal_sosfilt_cb_f64(const double *sos, int64_t n_sections, const double *x, double *y, int64_t outer, int64_t n,
                          int64_t inner, const double *zi, double *zf, int nthreads, tf_progress_fn fn, void *handle) {
    return tf_sos_filter("tf_signal_sosfilt_cb_f64", 0, 0, sos, n_sections, x, y, outer, n, inner, zi, zf, nthreads, fn, handle);
}

int tf_signal_sosfilt_c64(const double *sos, int64_t n_sections, const float *x, float *y, int64_t outer, int64_t n,
                          int64_t inner, const float *zi, float *zf, int nthreads) {
    return tf_sos_filter("tf_signal_sosfilt_c64", 1, 1, sos, n_sections, x, y, outer, n, inner, zi, zf, nthreads, NULL, NULL);
}

int tf_signal_sosfilt_cb_c64(const double *sos, int64_t n_sections, const float *x, float *y, int64_t outer, int64_t n,
                          int64_t inner, const float *zi, float *zf, int nthreads, tf_progress_fn fn, void *handle) {
    return tf_sos_filter("tf_signal_sosfilt_cb_c64", 1, 1, sos, n_sections, x, y, outer, n, inner, zi, zf, nthreads, fn, handle);
}

int tf_signal_sosfilt_c128(const double *sos, int64_t n_sections, const double *x, double *y, int64_t outer,
                           int64_t n, int64_t inner, const double *zi, double *zf, int nthreads) {
    return tf_sos_filter("tf_signal_sosfilt_c128", 0, 1, sos, n_sections, x, y, outer, n, inner, zi, zf, nthreads, NULL, NULL);
}

int tf_signal_sosfilt_cb_c128(const double *sos, int64_t n_sections, const double *x, double *y, int64_t outer,
                           int64_t n, int64_t inner, const double *zi, double *zf, int nthreads, tf_progress_fn fn, void *handle) {
    return tf_sos_filter("tf_signal_sosfilt_cb_c128", 0, 1, sos, n_sections, x, y, outer, n, inner, zi, zf, nthreads, fn, handle);
}

static int tf_sos_backward(const char *fn, int is_f32, const double *sos, int64_t S, const void *x, const void *zi,
                           const void *gy, const void *gzf, int64_t outer, int64_t n, int64_t inner, double *gsos,
                           void *gx, void *gzi, int nthreads, tf_progress_fn progress, void *handle) {
    int rc = tf_sos_check(fn, 0, sos, S, outer, n, inner);
    if (rc) return rc;
    const int kind = tf_sos_kind(is_f32, 0, sos, S);
    tf_sos_impl impl = tf_sos_pick(kind, tf_sos_lane_level(kind, tf_signal_simd(), outer * inner));
    tf_sos_job job;
    tf_sos_job_init(&job, &impl, sos, S, outer, n, inner, is_f32 ? 4 : 8);
    job.nt = 0;
    job.x = x;
    job.zi = zi;
    job.gy = gy;
    job.gzf = gzf;
    job.gx = gx;
    job.gzi = gzi;
    job.out = gx;
    job.out_bytes = outer * n * inner * (is_f32 ? 4 : 8);
    /* Segments: at least 256 samples, at most 1024 of them per channel. */
    job.seg = (n + 1023) / 1024;
    if (job.seg < 256) job.seg = 256;
    /* Reduction chunks depend on the sizes only, so the sums (and the gradient)
     * do not depend on the number of threads. */
    const int64_t ngroups = job.lo.ngroups;
    job.per_chunk = (ngroups + 1023) / 1024;
    if (job.per_chunk < 1) job.per_chunk = 1;
    const int64_t nchunks = ngroups > 0 ? (ngroups + job.per_chunk - 1) / job.per_chunk : 0;
    job.partial = (double *)calloc((size_t)(nchunks * 5 * S + 1), sizeof(double));
    if (!job.partial) return tf_error(TF_ENOMEM, "%s: out of memory", fn);
    int64_t work = 4 * n * (S > 0 ? S : 1) * (int64_t)impl.lanes * job.per_chunk;
    job.progress = progress;
    job.handle = handle;
    job.total = 4 * ngroups * n * S;
    rc = tf_sos_stopped(fn, &job, tf_sos_run(&job, impl.backward, nchunks, nthreads, tf_sos_min_groups(work)));
    if (rc == TF_OK && gsos) {
        for (int64_t s = 0; s < S; s++) {
            double sum[5] = {0, 0, 0, 0, 0};
            for (int64_t c = 0; c < nchunks; c++)
                for (int k = 0; k < 5; k++) sum[k] += job.partial[(c * S + s) * 5 + k];
            const double *r = sos + 6 * s;
            double *gr = gsos + 6 * s;
            gr[0] = sum[0];
            gr[1] = sum[1];
            gr[2] = sum[2];
            gr[4] = -sum[3];
            gr[5] = -sum[4];
            /* a0 is fixed at 1 by sosfilt; its gradient is the one of the
             * a0-normalised filter (b / a0, a / a0), as lfilter defines it. */
            gr[3] = -(r[0] * gr[0] + r[1] * gr[1] + r[2] * gr[2] + r[4] * gr[4] + r[5] * gr[5]);
        }
    }
    free(job.partial);
    return rc;
}

int tf_signal_sosfilt_backward_f32(const double *sos, int64_t n_sections, const float *x, const float *zi,
                                   const float *gy, const float *gzf, int64_t outer, int64_t n, int64_t inner,
                                   double *gsos, float *gx, float *gzi, int nthreads) {
    return tf_sos_backward("tf_signal_sosfilt_backward_f32", 1, sos, n_sections, x, zi, gy, gzf, outer, n, inner, gsos,
                           gx, gzi, nthreads, NULL, NULL);
}

int tf_signal_sosfilt_backward_cb_f32(const double *sos, int64_t n_sections, const float *x, const float *zi,
                                   const float *gy, const float *gzf, int64_t outer, int64_t n, int64_t inner,
                                   double *gsos, float *gx, float *gzi, int nthreads, tf_progress_fn fn, void *handle) {
    return tf_sos_backward("tf_signal_sosfilt_backward_cb_f32", 1, sos, n_sections, x, zi, gy, gzf, outer, n, inner, gsos,
                           gx, gzi, nthreads, fn, handle);
}

int tf_signal_sosfilt_backward_f64(const double *sos, int64_t n_sections, const double *x, const double *zi,
                                   const double *gy, const double *gzf, int64_t outer, int64_t n, int64_t inner,
                                   double *gsos, double *gx, double *gzi, int nthreads) {
    return tf_sos_backward("tf_signal_sosfilt_backward_f64", 0, sos, n_sections, x, zi, gy, gzf, outer, n, inner, gsos,
                           gx, gzi, nthreads, NULL, NULL);
}

int tf_signal_sosfilt_backward_cb_f64(const double *sos, int64_t n_sections, const double *x, const double *zi,
                                   const double *gy, const double *gzf, int64_t outer, int64_t n, int64_t inner,
                                   double *gsos, double *gx, double *gzi, int nthreads, tf_progress_fn fn, void *handle) {
    return tf_sos_backward("tf_signal_sosfilt_backward_cb_f64", 0, sos, n_sections, x, zi, gy, gzf, outer, n, inner, gsos,
                           gx, gzi, nthreads, fn, handle);
}

static int tf_sos_filtfilt(const char *fn, int is_f32, int cplx, const double *sos, int64_t S, const double *zi,
                           const void *x, void *y, int64_t outer, int64_t n, int64_t inner, int padtype,
                           int64_t padlen, int nthreads, tf_progress_fn progress, void *handle) {
    int rc = tf_sos_check(fn, cplx, sos, S, outer, n, inner);
    if (rc) return rc;
    if (padtype < TF_SIGNAL_PAD_NONE || padtype > TF_SIGNAL_PAD_CONSTANT)
        return tf_error(TF_EINVAL, "%s: unknown padtype %d", fn, padtype);
    if (padtype == TF_SIGNAL_PAD_NONE) padlen = 0;
    if (padlen < 0) return tf_error(TF_EINVAL, "%s: padlen must be >= 0, got %lld", fn, (long long)padlen);
    if (n <= padlen)
        return tf_error(TF_EINVAL, "%s: the signal length (%lld) must be greater than padlen, which is %lld", fn,
                        (long long)n, (long long)padlen);
    if (S > 0 && !zi) return tf_error(TF_EINVAL, "%s: zi is NULL", fn);
    const int kind = tf_sos_kind(is_f32, cplx, sos, S);
    tf_sos_impl impl = tf_sos_pick(kind, tf_sos_lane_level(kind, tf_signal_simd(), outer * inner));
    tf_sos_job job;
    tf_sos_job_init(&job, &impl, sos, S, outer, n, inner, is_f32 ? 4 : 8);
    job.zi = zi;
    job.x = x;
    job.y = y;
    job.edge = padlen;
    job.padtype = padtype;
    job.out = y;
    job.out_bytes = outer * n * inner * (is_f32 ? 4 : 8);
    job.progress = progress;
    job.handle = handle;
    job.total = 2 * job.lo.ngroups * n * S;
    int64_t work = 2 * (n + 2 * padlen) * (S > 0 ? S : 1) * (int64_t)impl.lanes;
    return tf_sos_stopped(fn, &job, tf_sos_run(&job, impl.filtfilt, job.lo.ngroups, nthreads, tf_sos_min_groups(work)));
}

int tf_signal_sosfiltfilt_f32(const double *sos, int64_t n_sections, const double *zi, const float *x, float *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads) {
    return tf_sos_filtfilt("tf_signal_sosfiltfilt_f32", 1, 0, sos, n_sections, zi, x, y, outer, n, inner, padtype,
                           padlen, nthreads, NULL, NULL);
}

int tf_signal_sosfiltfilt_cb_f32(const double *sos, int64_t n_sections, const double *zi, const float *x, float *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads, tf_progress_fn fn, void *handle) {
    return tf_sos_filtfilt("tf_signal_sosfiltfilt_cb_f32", 1, 0, sos, n_sections, zi, x, y, outer, n, inner, padtype,
                           padlen, nthreads, fn, handle);
}

int tf_signal_sosfiltfilt_f64(const double *sos, int64_t n_sections, const double *zi, const double *x, double *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads) {
    return tf_sos_filtfilt("tf_signal_sosfiltfilt_f64", 0, 0, sos, n_sections, zi, x, y, outer, n, inner, padtype,
                           padlen, nthreads, NULL, NULL);
}

int tf_signal_sosfiltfilt_cb_f64(const double *sos, int64_t n_sections, const double *zi, const double *x, double *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads, tf_progress_fn fn, void *handle) {
    return tf_sos_filtfilt("tf_signal_sosfiltfilt_cb_f64", 0, 0, sos, n_sections, zi, x, y, outer, n, inner, padtype,
                           padlen, nthreads, fn, handle);
}

int tf_signal_sosfiltfilt_c64(const double *sos, int64_t n_sections, const double *zi, const float *x, float *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads) {
    return tf_sos_filtfilt("tf_signal_sosfiltfilt_c64", 1, 1, sos, n_sections, zi, x, y, outer, n, inner, padtype,
                           padlen, nthreads, NULL, NULL);
}

int tf_signal_sosfiltfilt_cb_c64(const double *sos, int64_t n_sections, const double *zi, const float *x, float *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads, tf_progress_fn fn, void *handle) {
    return tf_sos_filtfilt("tf_signal_sosfiltfilt_cb_c64", 1, 1, sos, n_sections, zi, x, y, outer, n, inner, padtype,
                           padlen, nthreads, fn, handle);
}

int tf_signal_sosfiltfilt_c128(const double *sos, int64_t n_sections, const double *zi, const double *x, double *y,
                               int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads) {
    return tf_sos_filtfilt("tf_signal_sosfiltfilt_c128", 0, 1, sos, n_sections, zi, x, y, outer, n, inner, padtype,
                           padlen, nthreads, NULL, NULL);
}

int tf_signal_sosfiltfilt_cb_c128(const double *sos, int64_t n_sections, const double *zi, const double *x, double *y,
                               int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads, tf_progress_fn fn, void *handle) {
    return tf_sos_filtfilt("tf_signal_sosfiltfilt_cb_c128", 0, 1, sos, n_sections, zi, x, y, outer, n, inner, padtype,
                           padlen, nthreads, fn, handle);
}

int tf_signal_lanes(int element_size) {
    return tf_sos_pick(element_size == 4 ? TF_SOS_F32 : TF_SOS_F64, tf_signal_simd()).lanes;
}
