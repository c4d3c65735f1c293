/* SPDX-License-Identifier: MIT */
/* parse.c — numeric CSV to tensors: correctly rounded, parallel, precise about errors.
 *
 * Number conversion. The common field ([sign] digits [. digits] [exponent], then the
 * delimiter or a line end) is read, where the CPU has AVX2, by a vector reader
 * (tf_field_avx2): one 32-byte load classifies its
 * bytes, the field's length is the first byte that is neither digit nor '.', and one
 * shuffle plus a multiply-add chain turns up to 19 digits into w, with no branch on
 * how many digits there are (real data mixes lengths value by value; each
 * misprediction cost more than a conversion). Other fields, and every field on other
 * CPUs, take a scalar scan into w (up to 19 significant digits) and q, value =
 * w * 10^q (longer numbers, inf and nan are re-scanned by a cold path into a tf_num
 * that also remembers the digits). Then, per output type:
 *   - Clinger's fast path when w and 10^|q| are exact doubles (one IEEE operation: a
 *     single rounding); for float32, that double is rounded to float32, which is
 *     exact unless the double is itself a float32 midpoint (then Eisel-Lemire);
 *   - otherwise Eisel-Lemire (as in fast_float: a 64x128-bit product with a truncated
 *     power of five), for float32 directly in float32's format;
 *   - when the input had more than 19 significant digits, Eisel-Lemire on w and w+1:
 *     if both round alike the result is exact, otherwise (and in the never-observed
 *     case where the product is not precise enough) an exact big-decimal conversion
 *     (the "simple decimal conversion" of Go's strconv and Wuffs: 800 digits plus a
 *     sticky "more non-zero digits" flag, enough for any binary64 halfway point).
 *   - float16 and bfloat16: the exact float64 d is rounded once more, which is correct
 *     unless d lies exactly halfway between two targets; then the big-decimal
 *     conversion decides in the target's own format.
 *
 * CSV. Pass 1 (tf_parse_count) cuts the data into chunks at line starts and counts
 * records per chunk in parallel; a chunk whose first line is really inside a quoted
 * field (found out while resolving chunks in order) is recounted from the true
 * record start. Pass 2 (tf_parse_fill_*) parses chunks in parallel into the rows the
 * counts assign them. Chunks are handed out dynamically; the calling thread works
 * too and is the only one that reports progress. Each chunk records its first error;
 * the error of the lowest chunk is the first in the file and is the one reported.
 * Small inputs take one pass on the calling thread (tf_parse_small_*). Every read of
 * the input runs under a guard that turns a fault inside it (a memory-mapped file
 * truncated meanwhile) into TF_EIO (see "input that shrinks while it is read").
 */
#define _GNU_SOURCE
#define TF_INTERNAL
#include "tensorffi.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TF_X86 1
#else
#define TF_X86 0
#endif

#include "parse_pow5.h"

typedef int (*tf_report_fn)(void *handle, int64_t done, int64_t total);

/* ======================================================================== */
/* number syntax                                                            */
/* ======================================================================== */

/* Saturation of explicit exponents: far beyond every format's range, and small enough
 * that exponent arithmetic on int64 cannot overflow for any input length. */
#define TF_EXP_SAT 100000000000000000LL /* 1e17 */

typedef struct {
    uint64_t w;              /* the first (up to) 19 significant digits */
    int64_t q;               /* value = w * 10^q (exactly unless `many`) */
    const uint8_t *ib, *fb;  /* integer and fraction digits */
    int64_t il, fl;
    int64_t e;               /* the explicit exponent, saturated */
    int neg;
    int many;                /* non-zero digits beyond the 19 kept in w */
    int special;             /* 0 finite, 1 infinity, 2 nan */
} tf_num;

static inline int tf_is_digit(uint8_t c) { return (uint8_t)(c - '0') < 10; }

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TF_SWAR 1
static inline uint64_t tf_load8(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
/* The value of eight ASCII digits, first digit in the lowest byte. */
static inline uint64_t tf_eight_value(uint64_t v) {
    const uint64_t mask = 0x000000FF000000FFull;
    const uint64_t mul1 = 0x000F424000000064ull; /* 100 + (1000000 << 32) */
    const uint64_t mul2 = 0x0000271000000001ull; /* 1 + (10000 << 32) */
    v -= 0x3030303030303030ull;
    v = (v * 10) + (v >> 8);
    return (((v & mask) * mul1) + (((v >> 16) & mask) * mul2)) >> 32;
}
#else
#define TF_SWAR 0
#endif

/* Accumulate the digits at p into *w (wrapping: only exact when few) and return the
 * first non-digit. */
static inline const uint8_t *tf_scan_digits(const uint8_t *p, const uint8_t *end, uint64_t *w) {
    uint64_t x = *w;
#if TF_SWAR
    static const uint64_t p10[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
    while (end - p >= 8) {
        uint64_t v = tf_load8(p);
        /* Byte i of nd is zero iff byte i of v is a digit (a carry out of a byte >= 0xFA
         * can only disturb later bytes, which do not matter once one is not a digit). */
        uint64_t nd = ((v & 0xF0F0F0F0F0F0F0F0ull) | (((v + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) >> 4)) ^
                      0x3333333333333333ull;
        if (nd == 0) {
            x = x * 100000000u + tf_eight_value(v);
            p += 8;
            continue;
        }
        int k = __builtin_ctzll(nd) >> 3; /* leading digits, 0..7 */
        if (k) {
            /* Move the k digits to the top and fill the bottom with '0's. */
            v = (v << (64 - 8 * k)) | (0x3030303030303030ull >> (8 * k));
            x = x * p10[k] + tf_eight_value(v);
            p += k;
        }
        *w = x;
        return p;
    }
#endif
    while (p < end && tf_is_digit(*p)) {
        x = x * 10 + (uint64_t)(*p - '0');
        p++;
    }
    *w = x;
    return p;
}

/* "inf", "infinity" or "nan" in any case at p; returns the end or NULL. */
static const uint8_t *tf_scan_special(const uint8_t *p, const uint8_t *end, int *special) {
    if (end - p < 3) return NULL;
    uint8_t a = p[0] | 0x20, b = p[1] | 0x20, c = p[2] | 0x20;
    if (a == 'i' && b == 'n' && c == 'f') {
        p += 3;
        static const char rest[] = "inity";
        if (end - p >= 5) {
            int k = 0;
            while (k < 5 && (p[k] | 0x20) == rest[k]) k++;
            if (k == 5) p += 5;
        }
        *special = 1;
        return p;
    }
    if (a == 'n' && b == 'a' && c == 'n') {
        *special = 2;
        return p + 3;
    }
    return NULL;
}

/* More than 19 digits were read: keep the first 19 significant ones in w, note whether
 * a non-zero digit was dropped. Cold: long inputs only. */
__attribute__((noinline, cold)) static void tf_num_truncate(tf_num *num) {
    const uint8_t *p = num->ib, *pe = num->ib + num->il;
    int in_frac = 0;
    int64_t lz = 0;
    while (p < pe && *p == '0') p++, lz++;
    if (p == pe) {
        in_frac = 1;
        p = num->fb;
        pe = num->fb + num->fl;
        while (p < pe && *p == '0') p++, lz++;
    }
    int64_t sig = num->il + num->fl - lz;
    if (sig <= 19) return; /* w accumulated no more than 19 digits: exact */
    uint64_t w = 0;
    int taken = 0, nonzero = 0;
    for (;;) {
        if (p == pe) {
            if (in_frac) break;
            in_frac = 1;
            p = num->fb;
            pe = num->fb + num->fl;
            continue;
        }
        if (taken < 19) {
            w = w * 10 + (uint64_t)(*p - '0');
            taken++;
        } else if (*p != '0') {
            nonzero = 1;
            break;
        }
        p++;
    }
    num->w = w;
    num->q = num->e - num->fl + (sig - 19);
    num->many = nonzero;
}

/* Scan a number at p (no leading blanks) completely. Returns the byte after it, or NULL
 * if p does not start a number (or starts a malformed one, such as "1e"). The hot path
 * uses tf_scan_fast below and comes here only for long or special numbers. */
static const uint8_t *tf_scan_number(const uint8_t *p, const uint8_t *end, tf_num *num) {
    num->neg = 0;
    num->special = 0;
    num->many = 0;
    if (p < end && (*p == '-' || *p == '+')) {
        num->neg = *p == '-';
        p++;
    }
    uint64_t w = 0;
    const uint8_t *ib = p;
    p = tf_scan_digits(p, end, &w);
    int64_t il = p - ib;
    const uint8_t *fb = p;
    int64_t fl = 0;
    if (p < end && *p == '.') {
        fb = ++p;
        p = tf_scan_digits(p, end, &w);
        fl = p - fb;
    }
    if (il + fl == 0) return fb == ib ? tf_scan_special(ib, end, &num->special) : NULL;
    int64_t e = 0;
    if (p < end && (*p | 0x20) == 'e') {
        const uint8_t *s = p + 1;
        int eneg = 0;
        if (s < end && (*s == '-' || *s == '+')) {
            eneg = *s == '-';
            s++;
        }
        if (s >= end || !tf_is_digit(*s)) return NULL;
        while (s < end && tf_is_digit(*s)) {
            if (e < TF_EXP_SAT) e = e * 10 + (*s - '0');
            s++;
        }
        e = eneg ? -e : e;
        p = s;
    }
    num->ib = ib;
    num->il = il;
    num->fb = fb;
    num->fl = fl;
    num->e = e;
    num->w = w;
    num->q = e - fl;
    if (il + fl > 19) tf_num_truncate(num);
    return p;
}

/* ======================================================================== */
/* Eisel-Lemire (after fast_float, Apache-2.0/MIT/BSL)                     */
/* ======================================================================== */

/* The 128-bit product a * b as (*hi, return value = low half). */
static inline uint64_t tf_mul128(uint64_t a, uint64_t b, uint64_t *hi) {
#if defined(__SIZEOF_INT128__)
    __extension__ unsigned __int128 r = (unsigned __int128)a * b;
    *hi = (uint64_t)(r >> 64);
    return (uint64_t)r;
#else
    uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
    *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    return (mid << 32) | (uint32_t)p00;
#endif
}

typedef struct {
    uint64_t m;  /* mantissa bits (implicit bit cleared) */
    int32_t p2;  /* biased exponent; -1: cannot decide, use the exact path */
} tf_am;

static inline __attribute__((always_inline)) tf_am tf_eisel_lemire(int64_t q, uint64_t w, const int mb,
                                                                 const int min_exp, const int inf_pow,
                                                                 const int sp10, const int lp10,
                                                                 const int min_rte, const int max_rte) {
    tf_am a;
    if (w == 0 || q < sp10) {
        a.m = 0;
        a.p2 = 0;
        return a;
    }
    if (q > lp10) {
        a.m = 0;
        a.p2 = inf_pow;
        return a;
    }
    int lz = __builtin_clzll(w);
    w <<= lz;
    const uint64_t *pw = &tf_pow5_128[2 * (q - TF_POW5_MIN)];
    uint64_t hi, lo = tf_mul128(w, pw[0], &hi);
    const uint64_t precision_mask = UINT64_MAX >> (mb + 3);
    if ((hi & precision_mask) == precision_mask) {
        uint64_t shi;
        (void)tf_mul128(w, pw[1], &shi);
        lo += shi;
        if (shi > lo) hi++;
    }
    /* Mushtak & Lemire (2023) prove the product above always suffices; the classic
     * guard costs nothing and sends the case to the exact path if it ever occurred. */
    if (lo == UINT64_MAX && (q < -27 || q > 55)) {
        a.m = 0;
        a.p2 = -1;
        return a;
    }
    int upper = (int)(hi >> 63);
    int shift = upper + 64 - mb - 3;
    a.m = hi >> shift;
    a.p2 = (int32_t)(((((152170 + 65536) * (int32_t)q) >> 16) + 63) + upper - lz - min_exp);
    if (a.p2 <= 0) { /* subnormal (or zero) */
        if (-a.p2 + 1 >= 64) {
            a.m = 0;
            a.p2 = 0;
            return a;
        }
        a.m >>= -a.p2 + 1;
        a.m += a.m & 1;
        a.m >>= 1;
        a.p2 = a.m < ((uint64_t)1 << mb) ? 0 : 1;
        return a;
    }
    /* Exactly halfway (only possible for small |q|): round to even. */
    if (lo <= 1 && q >= min_rte && q <= max_rte && (a.m & 3) == 1 && (a.m << shift) == hi)
        a.m &= ~(uint64_t)1;
    a.m += a.m & 1;
    a.m >>= 1;
    if (a.m >= ((uint64_t)2 << mb)) {
        a.m = (uint64_t)1 << mb;
        a.p2++;
    }
    a.m &= ~((uint64_t)1 << mb);
    if (a.p2 >= inf_pow) {
        a.p2 = inf_pow;
        a.m = 0;
    }
    return a;
}

#define TF_EL64(q, w) tf_eisel_lemire((q), (w), 52, -1023, 0x7FF, -342, 308, -4, 23)
#define TF_EL32(q, w) tf_eisel_lemire((q), (w), 23, -127, 0xFF, -64, 38, -17, 10)

/* ======================================================================== */
/* exact conversion through a big decimal (Go's strconv/decimal.go, Wuffs)  */
/* ======================================================================== */

#define TF_DEC_DIGITS 800
#define TF_DEC_CAP (TF_DEC_DIGITS + 32)

typedef struct {
    int nd;     /* digits used */
    int dp;     /* decimal point: value = 0.d[0]d[1]... * 10^dp */
    int trunc;  /* non-zero digits were dropped beyond d[nd-1] */
    uint8_t d[TF_DEC_CAP];
} tf_dec;

static void tf_dec_trim(tf_dec *a) {
    while (a->nd > 0 && a->d[a->nd - 1] == 0) a->nd--;
    if (a->nd == 0) a->dp = 0;
}

/* a *= 2^k, k <= 60. */
static void tf_dec_lshift(tf_dec *a, unsigned k) {
    int delta = (int)(k / 3) + 1; /* >= the number of digits of 2^k */
    int w = a->nd + delta;
    uint64_t n = 0;
    for (int r = a->nd - 1; r >= 0; r--) {
        n += (uint64_t)a->d[r] << k;
        uint64_t quo = n / 10;
        a->d[--w] = (uint8_t)(n - 10 * quo);
        n = quo;
    }
    while (n > 0) {
        uint64_t quo = n / 10;
        a->d[--w] = (uint8_t)(n - 10 * quo);
        n = quo;
    }
    int nd = a->nd + delta - w;
    memmove(a->d, a->d + w, (size_t)nd);
    a->dp += delta - w;
    if (nd > TF_DEC_DIGITS) {
        for (int i = TF_DEC_DIGITS; i < nd; i++)
            if (a->d[i]) a->trunc = 1;
        nd = TF_DEC_DIGITS;
    }
    a->nd = nd;
    tf_dec_trim(a);
}

/* a /= 2^k, k <= 60. */
static void tf_dec_rshift(tf_dec *a, unsigned k) {
    int r = 0, w = 0;
    uint64_t n = 0;
    for (; (n >> k) == 0; r++) {
        if (r >= a->nd) {
            if (n == 0) {
                a->nd = 0;
                return;
            }
            while ((n >> k) == 0) {
                n *= 10;
                r++;
            }
            break;
        }
        n = n * 10 + a->d[r];
    }
    a->dp -= r - 1;
    uint64_t mask = ((uint64_t)1 << k) - 1;
    for (; r < a->nd; r++) {
        uint64_t c = a->d[r];
        a->d[w++] = (uint8_t)(n >> k);
        n = (n & mask) * 10 + c;
    }
    while (n > 0) {
        uint64_t dig = n >> k;
        n &= mask;
        if (w < TF_DEC_DIGITS) a->d[w++] = (uint8_t)dig;
        else if (dig > 0) a->trunc = 1;
        n *= 10;
    }
    a->nd = w;
    tf_dec_trim(a);
}

static void tf_dec_shift(tf_dec *a, int k) {
    if (a->nd == 0) return;
    for (; k > 60; k -= 60) tf_dec_lshift(a, 60);
    for (; k < -60; k += 60) tf_dec_rshift(a, 60);
    if (k > 0) tf_dec_lshift(a, (unsigned)k);
    else if (k < 0) tf_dec_rshift(a, (unsigned)-k);
}

static int tf_dec_round_up(const tf_dec *a, int nd) {
    if (nd < 0 || nd >= a->nd) return 0;
    if (a->d[nd] == 5 && nd + 1 == a->nd) { /* exactly halfway, unless truncated */
        if (a->trunc) return 1;
        return nd > 0 && (a->d[nd - 1] & 1);
    }
    return a->d[nd] >= 5;
}

static uint64_t tf_dec_rounded_integer(const tf_dec *a) {
    if (a->dp > 20) return UINT64_MAX;
    uint64_t n = 0;
    int i = 0;
    for (; i < a->dp && i < a->nd; i++) n = n * 10 + a->d[i];
    for (; i < a->dp; i++) n *= 10;
    return n + (uint64_t)tf_dec_round_up(a, a->dp);
}

/* The bits of the binary format with mb mantissa bits and eb exponent bits nearest to
 * the decimal in `num` (ties to even). `bias` is Go's floatInfo.bias: minus the IEEE
 * exponent bias (-1023 for float64, -127 for float32). Exact for any input length. */
__attribute__((noinline, cold)) static uint64_t tf_exact_bits(const tf_num *num, int mb, int eb, int bias) {
    static const int powtab[9] = {1, 3, 6, 9, 13, 16, 19, 23, 26};
    tf_dec dd, *d = &dd;
    d->nd = 0;
    d->trunc = 0;
    int64_t lz = 0;
    int seen = 0;
    for (int part = 0; part < 2; part++) {
        const uint8_t *p = part ? num->fb : num->ib;
        int64_t len = part ? num->fl : num->il;
        for (int64_t i = 0; i < len; i++) {
            uint8_t c = (uint8_t)(p[i] - '0');
            if (!seen && c == 0) {
                lz++;
                continue;
            }
            seen = 1;
            if (d->nd < TF_DEC_DIGITS) d->d[d->nd++] = c;
            else if (c) d->trunc = 1;
        }
    }
    int64_t dp = num->il - lz + num->e;
    uint64_t mant;
    int exp;
    d->dp = 0;
    tf_dec_trim(d);
    if (d->nd == 0 || dp < -330) {
        mant = 0;
        exp = bias;
        goto out;
    }
    if (dp > 310) goto overflow;
    d->dp = (int)dp;
    exp = 0;
    while (d->dp > 0) {
        int k = d->dp >= 9 ? 27 : powtab[d->dp];
        tf_dec_shift(d, -k);
        exp += k;
    }
    while (d->dp < 0 || (d->dp == 0 && d->d[0] < 5)) {
        int k = -d->dp >= 9 ? 27 : powtab[-d->dp];
        tf_dec_shift(d, k);
        exp -= k;
    }
    exp--; /* now the value is in [1, 2) * 2^exp */
    if (exp < bias + 1) {
        int k = bias + 1 - exp;
        tf_dec_shift(d, -k);
        exp += k;
    }
    if (exp - bias >= (1 << eb) - 1) goto overflow;
    tf_dec_shift(d, 1 + mb);
    mant = tf_dec_rounded_integer(d);
    if (mant == ((uint64_t)2 << mb)) {
        mant >>= 1;
        exp++;
        if (exp - bias >= (1 << eb) - 1) goto overflow;
    }
    if ((mant & ((uint64_t)1 << mb)) == 0) exp = bias; /* subnormal */
    goto out;
overflow:
    mant = 0;
    exp = (1 << eb) - 1 + bias;
out:;
    uint64_t bits = mant & (((uint64_t)1 << mb) - 1);
    bits |= (uint64_t)((exp - bias) & ((1 << eb) - 1)) << mb;
    if (num->neg) bits |= (uint64_t)1 << (mb + eb);
    return bits;
}

/* ======================================================================== */
/* conversion to each output type                                           */
/* ======================================================================== */

static const double tf_p10_f64[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                      1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static inline double tf_bits_f64(uint64_t b) {
    double d;
    memcpy(&d, &b, 8);
    return d;
}
static inline uint64_t tf_f64_bits(double d) {
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
}
static inline uint32_t tf_f32_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}
static inline float tf_bits_f32(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* value = w * 10^q, w exact: the float64 nearest to it, or 0 if the exact path must
 * decide (Eisel-Lemire could not, which Mushtak & Lemire show never happens). */
static inline __attribute__((always_inline)) int tf_f64_simple(uint64_t w, int64_t q, int neg, double *out) {
    if (q >= -22 && q <= 22 && w <= ((uint64_t)1 << 53)) {
        double d = (double)w; /* exact, and so is 10^|q|: one rounding */
        d = q < 0 ? d / tf_p10_f64[-q] : d * tf_p10_f64[q];
        *out = tf_bits_f64(tf_f64_bits(d) | ((uint64_t)neg << 63)); /* no branch on the sign */
        return 1;
    }
    tf_am a = TF_EL64(q, w);
    if (__builtin_expect(a.p2 < 0, 0)) return 0;
    *out = tf_bits_f64(a.m | ((uint64_t)a.p2 << 52) | ((uint64_t)neg << 63));
    return 1;
}

/* The same for float32, rounded once. When w and 10^|q| are exact doubles, d = w * 10^q
 * rounded to float64 is the float64 nearest to the value x; rounding d to float32 then
 * gives the float32 nearest to x unless d is exactly a float32 midpoint (every float32
 * and every float32 midpoint is a float64, and rounding to float64 is monotonic, so x
 * and d lie between the same two midpoints). d stays far inside float32's normal range
 * here (1e-22 <= |d| <= 2^53 * 1e22), so the midpoint test is one mask of d's bits.
 * Midpoints (and larger exponents) go to Eisel-Lemire in float32's own format. */
static inline __attribute__((always_inline)) int tf_f32_simple(uint64_t w, int64_t q, int neg, float *out) {
    if (q >= -22 && q <= 22 && w <= ((uint64_t)1 << 53)) {
        double d = (double)w;
        d = q < 0 ? d / tf_p10_f64[-q] : d * tf_p10_f64[q];
        if (__builtin_expect((tf_f64_bits(d) & 0x1FFFFFFFull) != 0x10000000ull, 1)) {
            *out = tf_bits_f32(tf_f32_bits((float)d) | ((uint32_t)neg << 31));
            return 1;
        }
    }
    tf_am a = TF_EL32(q, w);
    if (__builtin_expect(a.p2 < 0, 0)) return 0;
    *out = tf_bits_f32((uint32_t)(a.m | ((uint64_t)a.p2 << 23) | ((uint64_t)neg << 31)));
    return 1;
}

static double tf_num_f64(const tf_num *num) {
    if (num->special) {
        uint64_t b = num->special == 1 ? 0x7FF0000000000000ull : 0x7FF8000000000000ull;
        return tf_bits_f64(b | ((uint64_t)num->neg << 63));
    }
    double d;
    if (!num->many) {
        if (tf_f64_simple(num->w, num->q, num->neg, &d)) return d;
    } else {
        tf_am a = TF_EL64(num->q, num->w), b = TF_EL64(num->q, num->w + 1);
        if (a.p2 >= 0 && a.m == b.m && a.p2 == b.p2) /* all w..w+1 round alike */
            return tf_bits_f64(a.m | ((uint64_t)a.p2 << 52) | ((uint64_t)num->neg << 63));
    }
    return tf_bits_f64(tf_exact_bits(num, 52, 11, -1023));
}

static float tf_num_f32(const tf_num *num) {
    if (num->special) {
        uint32_t b = num->special == 1 ? 0x7F800000u : 0x7FC00000u;
        return tf_bits_f32(b | ((uint32_t)num->neg << 31));
    }
    float f;
    if (!num->many) {
        if (tf_f32_simple(num->w, num->q, num->neg, &f)) return f;
    } else {
        tf_am a = TF_EL32(num->q, num->w), b = TF_EL32(num->q, num->w + 1);
        if (a.p2 >= 0 && a.m == b.m && a.p2 == b.p2)
            return tf_bits_f32((uint32_t)(a.m | ((uint64_t)a.p2 << 23) | ((uint64_t)num->neg << 31)));
    }
    return tf_bits_f32((uint32_t)tf_exact_bits(num, 23, 8, -127));
}

/* Round a double to a binary format with mb mantissa and eb exponent bits (float16:
 * 10, 5; bfloat16: 7, 8), to nearest, ties to even. *tie is set when d lies exactly
 * halfway between two values of the format. NaN and infinity map to themselves. */
static inline uint16_t tf_narrow(double d, int mb, int eb, int *tie) {
    uint64_t b;
    memcpy(&b, &d, 8);
    uint16_t sign = (uint16_t)((b >> 63) << (mb + eb));
    uint16_t inf = (uint16_t)(((1u << eb) - 1) << mb);
    b &= ~((uint64_t)1 << 63);
    *tie = 0;
    if (b >= 0x7FF0000000000000ull)
        return sign | inf | (b > 0x7FF0000000000000ull ? (uint16_t)(1u << (mb - 1)) : 0);
    int e = (int)(b >> 52);
    if (e == 0) return sign; /* a float64 subnormal is far below every narrow format */
    uint64_t m = (b & ((1ull << 52) - 1)) | (1ull << 52);
    int E = e - 1023; /* d = m * 2^(E - 52) */
    int tbias = (1 << (eb - 1)) - 1, emin = 1 - tbias;
    int eff = E >= emin ? E : emin;
    int rs = 52 - mb + (eff - E); /* drop this many low bits of m */
    if (rs > 54) return sign;      /* below a quarter of the smallest subnormal */
    uint64_t kept = m >> rs, rem = m & ((1ull << rs) - 1), half = 1ull << (rs - 1);
    *tie = rem == half;
    if (rem > half || (rem == half && (kept & 1))) kept++;
    int64_t bits = ((int64_t)(eff + tbias - 1) << mb) + (int64_t)kept;
    if (bits >= inf) return sign | inf;
    return sign | (uint16_t)bits;
}

/* float16/bfloat16: the float64 d nearest to the text is rounded once more. That is
 * the correct rounding unless d is exactly halfway between two narrow values (any
 * other narrow-format midpoint is a float64 too, so it cannot lie between the text's
 * value and d); then the exact path decides in the narrow format itself. */
static uint16_t tf_num_narrow(const tf_num *num, int mb, int eb) {
    int tie;
    uint16_t h = tf_narrow(tf_num_f64(num), mb, eb, &tie);
    if (tie && !num->special) h = (uint16_t)tf_exact_bits(num, mb, eb, -((1 << (eb - 1)) - 1));
    return h;
}

enum { TF_DT_F32 = 0, TF_DT_F64 = 1, TF_DT_F16 = 2, TF_DT_BF16 = 3, TF_DT_I32 = 4, TF_DT_I64 = 5 };
#define TF_IS_INT(dt) ((dt) >= TF_DT_I32)

typedef union {
    float f;
    double d;
    uint16_t h;
    int32_t i32;
    int64_t i64;
} tf_val;

/* ======================================================================== */
/* integers (int32, int64)                                                  */
/* ======================================================================== */

/* Integers are exact or an error, never wrapped or saturated: the grammar is [+-]
 * digits (leading zeros allowed), as NumPy's loadtxt(dtype=int) reads it: no '.', no
 * exponent, no nan. The magnitude is accumulated in a uint64 (exact for up to 19
 * digits: 10^19 - 1 < 2^64; longer runs are exact only after leading zeros) and
 * checked against the type's bound before it becomes signed, so no signed arithmetic
 * can overflow. A field that is not read (not an integer, or out of range) goes to the
 * error path, which says which of the two it is (tf_int_error). */

/* The magnitude w with sign neg as integer type dt in *v; 0 if it is out of range. */
static inline __attribute__((always_inline)) int tf_int_value(uint64_t w, int neg, const int dt, tf_val *v) {
    const uint64_t max = dt == TF_DT_I32 ? (uint64_t)INT32_MAX : (uint64_t)INT64_MAX;
    if (__builtin_expect(w > max + (uint64_t)neg, 0)) return 0;
    /* -w in two's complement, without a branch on the sign; written through the
     * representation (a uint64 above INT64_MAX converted to int64_t is
     * implementation-defined; exact-width types are two's complement without padding) */
    const uint64_t u = (w ^ (0 - (uint64_t)neg)) + (uint64_t)neg;
    if (dt == TF_DT_I32) {
        const uint32_t u32 = (uint32_t)u;
        memcpy(&v->i32, &u32, sizeof u32);
    } else {
        memcpy(&v->i64, &u, sizeof u);
    }
    return 1;
}

/* More than 19 digits in [p, e): their value in *w if at most 19 are significant
 * (the rest are leading zeros), else 0 (out of every integer type's range). */
__attribute__((noinline, cold)) static int tf_int_long(const uint8_t *p, const uint8_t *e, uint64_t *w) {
    while (p < e && *p == '0') p++;
    if (e - p > 19) return 0;
    uint64_t x = 0;
    for (; p < e; p++) x = x * 10 + (uint64_t)(*p - '0');
    *w = x;
    return 1;
}

/* The integer at p ([+-] digits) as type dt in *v: returns its end, or NULL if p does
 * not start one or it is out of range. */
static inline __attribute__((always_inline)) const uint8_t *tf_int_hot(const uint8_t *p, const uint8_t *end,
                                                                     const int dt, tf_val *v) {
    int neg = 0;
    if (__builtin_expect(p < end, 1)) { /* branch-free, as in tf_scan_fast */
        uint8_t c = *p;
        neg = c == '-';
        p += neg | (c == '+');
    }
    uint64_t w = 0;
    const uint8_t *ib = p;
    while (p < end && tf_is_digit(*p) && p - ib < 8) w = w * 10 + (uint64_t)(*p++ - '0');
    if (p - ib == 8) p = tf_scan_digits(p, end, &w); /* wraps beyond 19 digits: checked below */
    const int64_t nd = p - ib;
    if (__builtin_expect(nd == 0, 0)) return NULL;
    if (__builtin_expect(nd > 19, 0) && !tf_int_long(ib, p, &w)) return NULL;
    return tf_int_value(w, neg, dt, v) ? p : NULL;
}

/* An integer filling [s, t) exactly, with the thousands separator th (-1: none)
 * allowed between two digits: 1 and *v, or -1 (not an integer, or out of range). No
 * length limit: leading zeros are skipped as they come. */
static int tf_int_x(const uint8_t *s, const uint8_t *t, int th, int dt, tf_val *v) {
    int neg = 0;
    if (s < t && (*s == '-' || *s == '+')) {
        neg = *s == '-';
        s++;
    }
    if (s == t || !tf_is_digit(*s)) return -1;
    uint64_t w = 0;
    int sig = 0;
    for (const uint8_t *p = s; p < t; p++) {
        const uint8_t c = *p;
        if (tf_is_digit(c)) {
            if (sig == 0 && c == '0') continue;
            if (++sig > 19) return -1;
            w = w * 10 + (uint64_t)(c - '0');
        } else if (!((int)c == th && tf_is_digit(p[-1]) && p + 1 < t && tf_is_digit(p[1]))) {
            return -1;
        }
    }
    return tf_int_value(w, neg, dt, v) ? 1 : -1;
}

/* The value of the number at tok, the slow way (long digit strings, inf, nan, ties). */
__attribute__((noinline, cold)) static tf_val tf_value_cold(const uint8_t *tok, const uint8_t *end, int dt) {
    tf_num num;
    tf_val v;
    tf_scan_number(tok, end, &num); /* the hot scan accepted it: so does this one */
    switch (dt) {
    case TF_DT_F32: v.f = tf_num_f32(&num); break;
    case TF_DT_F64: v.d = tf_num_f64(&num); break;
    case TF_DT_F16: v.h = tf_num_narrow(&num, 10, 5); break;
    default: v.h = tf_num_narrow(&num, 7, 8); break;
    }
    return v;
}

/* The explicit exponent at s (just past the 'e'): returns its end or NULL. */
static inline const uint8_t *tf_scan_exponent(const uint8_t *s, const uint8_t *end, int64_t *e_out) {
    int eneg = 0;
    if (s < end && (*s == '-' || *s == '+')) {
        eneg = *s == '-';
        s++;
    }
    if (s >= end || !tf_is_digit(*s)) return NULL;
    int64_t e = 0;
    while (s < end && tf_is_digit(*s)) {
        if (e < TF_EXP_SAT) e = e * 10 + (*s - '0');
        s++;
    }
    *e_out = eneg ? -e : e;
    return s;
}

/* The hot scan: like tf_scan_number, but keeps only w, q and the sign (in registers).
 * *simple is 0 for inputs the cold path must handle (more than 19 digits, inf, nan).
 * tf_field_avx2 reads the common fields faster where the CPU has AVX2. */
static inline __attribute__((always_inline)) const uint8_t *tf_scan_fast(const uint8_t *p, const uint8_t *end,
                                                                       uint64_t *w_out, int64_t *q_out, int *neg_out,
                                                                       int *simple) {
    int neg = 0;
    if (__builtin_expect(p < end, 1)) { /* branch-free: signs are unpredictable in real data */
        uint8_t c = *p;
        neg = c == '-';
        p += neg | (c == '+');
    }
    uint64_t w = 0;
    const uint8_t *ib = p;
    /* Integer parts are usually short: a byte loop beats the eight-byte trick there. */
    while (p < end && tf_is_digit(*p) && p - ib < 8) w = w * 10 + (uint64_t)(*p++ - '0');
    if (p - ib == 8) p = tf_scan_digits(p, end, &w);
    int64_t nd = p - ib, fl = 0, e = 0;
    if (p < end && *p == '.') {
        const uint8_t *fb = ++p;
        p = tf_scan_digits(p, end, &w);
        fl = p - fb;
        nd += fl;
        if (nd == 0) return NULL; /* "." */
    } else if (nd == 0) {
        int special;
        *simple = 0;
        return tf_scan_special(ib, end, &special);
    }
    if (p < end && (*p | 0x20) == 'e') {
        p = tf_scan_exponent(p + 1, end, &e);
        if (!p) return NULL;
    }
    *simple = nd <= 19;
    *w_out = w;
    *q_out = e - fl;
    *neg_out = neg;
    return p;
}

#if TF_X86
#define TF_TARGET_AVX2 __attribute__((target("avx2,bmi,bmi2,popcnt")))
#define TF_TARGET_AVX512 __attribute__((target("avx2,bmi,bmi2,popcnt,avx512f,avx512vl,avx512bw,avx512vbmi")))

/* The common field, for CPUs with AVX2 (and BMI): [sign] digits [. digits] [exponent]
 * followed by the delimiter, "\n" or "\r\n". One 32-byte load classifies the field's
 * bytes; its length is the first byte that is neither a digit nor a '.' (nor a
 * leading sign), so the next field's address depends on one load and a few vector
 * operations, and the conversion of this one overlaps with the next. No branch
 * depends on how many digits a number has (real data mixes lengths from value to
 * value, and each misprediction costs more than a conversion): one shuffle removes the
 * '.' and right-aligns up to 24 digit positions, and a multiply-add chain turns them
 * into three eight-digit groups. Sets *w, *q, *neg and *nl (the field ended its line)
 * and returns the next field's start; NULL sends the field to the general path (any
 * other shape, more than 19 digits, or within 64 bytes of the end of the input).
 * ws (a constant: TF_DELIM_WHITESPACE): the field ends with a run of spaces and tabs
 * instead of the delimiter, found in the same load (a mask and one tzcnt, no branch on
 * its length), and the next field starts after it; a run that reaches a line end ends
 * the line. Another byte after the run (a comment, a lone CR, another blank) is the
 * next field's start, for the general path to look at.
 * isint (a constant): an integer field, [sign] digits, with no decimal mark or
 * exponent (*q is 0). dec and th: the decimal mark and the thousands separator (-1:
 * none), constants ('.' and -1) on the plain path, where the separator's code folds
 * away; a separator stands between two digits before the decimal mark (as the
 * general reader tf_value_x wants) and the shuffle skips it as it skips the '.'. */
static inline __attribute__((always_inline)) TF_TARGET_AVX2 const uint8_t *
tf_field_avx2(const uint8_t *p, const uint8_t *end, const uint8_t delim, const int ws, const int isint,
              const uint8_t dec, const int th, uint64_t *w_out, int64_t *q_out, int *neg_out, int *nl_out) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    const __m256i t = _mm256_sub_epi8(v, _mm256_set1_epi8('0')); /* digit values, where digits */
    const __m256i isdig = _mm256_cmpeq_epi8(_mm256_min_epu8(t, _mm256_set1_epi8(9)), t);
    const uint64_t dm = (uint32_t)_mm256_movemask_epi8(isdig);
    const uint64_t dotm = isint ? 0 : (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8((char)dec)));
    const uint64_t sm = th < 0 ? 0 : (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8((char)th)));
    const uint8_t c0 = *p;
    const unsigned minus = c0 == '-', s = minus | (c0 == '+');
    const unsigned len = (unsigned)_tzcnt_u64(~(dm | dotm | sm | s)); /* 0..32 */
    const uint64_t fm = (1ull << len) - 1;                             /* the field's bytes */
    unsigned il, dot, nd;
    if (th < 0) {
        il = (unsigned)_tzcnt_u64(~(dm >> s)); /* integer digits */
        dot = (unsigned)(dotm >> (s + il)) & 1;
        nd = len - s - dot; /* digits, if [s + il + dot, len) are digits */
        /* Exactly one shape is accepted: at most one '.' and only digits after it. */
        if (__builtin_expect(len >= 32 || nd == 0 || nd > 19 || _mm_popcnt_u64(dotm & fm) > dot, 0)) return NULL;
    } else {
        /* [s, len) holds digits, marks and separators only: counts from positions */
        const uint64_t dmf = dm & fm, dotf = dotm & fm, smf = sm & fm;
        dot = dotf != 0;
        nd = (unsigned)_mm_popcnt_u64(dmf);
        il = (unsigned)_mm_popcnt_u64(dmf & (dotf - 1)); /* digits before the mark (for q) */
        /* at most one mark; each separator between two digits, before the mark */
        if (__builtin_expect(len >= 32 || nd == 0 || nd > 19 || (dotf & (dotf - 1)) != 0 ||
                                 (smf & ~((dmf << 1) & (dmf >> 1) & (dotf - 1))) != 0,
                             0))
            return NULL;
    }
    const unsigned fl = nd - il; /* fraction digits */
    const uint8_t *next, *x = p + len;
    int64_t e = 0;
    if (ws) {
        if (__builtin_expect(((x[0] == ' ') | (x[0] == '\t')) & (x[1] > ' '), 1)) {
            /* one blank, then the next field (or a byte the next call looks at): its
             * address depends on len alone, as after a delimiter (x + 1 is inside the
             * load: len < 32) */
            next = x + 1;
            *nl_out = 0;
        } else {
            const uint64_t bm = (uint32_t)_mm256_movemask_epi8(_mm256_or_si256(
                _mm256_cmpeq_epi8(v, _mm256_set1_epi8(' ')), _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\t'))));
            const uint8_t *y;
            if ((bm >> len) & 1) {
                y = x + _tzcnt_u64(~(bm >> len)); /* the run's end, at most the end of the load */
            } else {
                if (!isint && (*x | 0x20) == 'e') {
                    x = tf_scan_exponent(x + 1, end, &e);
                    if (!x) return NULL;
                }
                if (x >= end) return NULL;
                y = x + 1;
                if (*x == '\n' || (*x == '\r' && y < end && *y == '\n')) {
                    y = NULL; /* the number ends its line */
                } else if (*x != ' ' && *x != '\t') {
                    return NULL;
                }
            }
            if (y) {
                while (y < end && (*y == ' ' || *y == '\t')) y++; /* a run longer than the load */
                x = y;
            }
            if (x < end && *x == '\n') {
                next = x + 1;
                *nl_out = 1;
            } else if (x < end && *x == '\r' && x + 1 < end && x[1] == '\n') {
                next = x + 2;
                *nl_out = 1;
            } else {
                next = x;
                *nl_out = 0;
            }
        }
    } else if (__builtin_expect(*x == delim, 1)) {
        next = x + 1;
        *nl_out = 0;
    } else {
        if (!isint && (*x | 0x20) == 'e') {
            x = tf_scan_exponent(x + 1, end, &e);
            if (!x) return NULL;
        }
        if (x < end && *x == delim) {
            next = x + 1;
            *nl_out = 0;
        } else if (x < end && *x == '\n') {
            next = x + 1;
            *nl_out = 1;
        } else if (x < end && *x == '\r' && x + 1 < end && x[1] == '\n') {
            next = x + 2;
            *nl_out = 1;
        } else {
            return NULL;
        }
    }
    /* Output lane j (0..31) takes digit k = j - (32 - nd) of the number (k < 0: none),
     * found at byte s + k plus the number of gaps before it (the '.' for k >= il, a
     * separator for k >= the number of digits before it). */
    const __m256i iota = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                                          21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    const __m256i k = _mm256_add_epi8(iota, _mm256_set1_epi8((char)((int)nd - 32)));
    __m256i src = _mm256_add_epi8(k, _mm256_set1_epi8((char)s));
    if (!isint && th < 0) src = _mm256_sub_epi8(src, _mm256_cmpgt_epi8(k, _mm256_set1_epi8((char)((int)il - 1))));
    if (th >= 0) { /* the gaps (separators, then the mark): the i-th (from 0) follows r = its position - s - i
                    * digits; two without a branch on their count (1,234.5), then a loop */
        const uint64_t g = dotm | sm, g2 = _blsr_u64(g); /* gaps past the field: r >= nd, no lane */
        const int r1 = (int)_tzcnt_u64(g) - (int)s, r2 = (int)_tzcnt_u64(g2) - (int)s - 1; /* 63, 64: none */
        src = _mm256_sub_epi8(src, _mm256_cmpgt_epi8(k, _mm256_set1_epi8((char)(r1 - 1))));
        src = _mm256_sub_epi8(src, _mm256_cmpgt_epi8(k, _mm256_set1_epi8((char)(r2 - 1))));
        int i = 2;
        for (uint64_t m = _blsr_u64(g2) & fm; __builtin_expect(m != 0, 0); m = _blsr_u64(m), i++) {
            const int r = (int)_tzcnt_u64(m) - (int)s - i;
            src = _mm256_sub_epi8(src, _mm256_cmpgt_epi8(k, _mm256_set1_epi8((char)(r - 1))));
        }
    }
    src = _mm256_or_si256(src, _mm256_cmpgt_epi8(_mm256_setzero_si256(), k)); /* k < 0: zero */
    /* src in 0..15 comes from t's low half, 16..31 from its high half (pshufb stays
     * within 128-bit lanes: shuffle both halves, broadcast to both lanes, and pick). */
    const __m256i tlo = _mm256_permute2x128_si256(t, t, 0x00), thi = _mm256_permute2x128_si256(t, t, 0x11);
    const __m256i dig = _mm256_blendv_epi8(_mm256_shuffle_epi8(tlo, src),
                                           _mm256_shuffle_epi8(thi, _mm256_sub_epi8(src, _mm256_set1_epi8(16))),
                                           _mm256_cmpgt_epi8(src, _mm256_set1_epi8(15)));
    /* 32 one-digit lanes -> 16 two-digit -> 8 four-digit -> eight-digit groups:
     * 32-bit element 1 holds digits 8-15, elements 4 and 5 digits 16-23 and 24-31
     * (digits 0-7 are zero: nd <= 19). */
    const __m256i d2 = _mm256_maddubs_epi16(dig, _mm256_set1_epi16(0x010A));
    const __m256i d4 = _mm256_madd_epi16(d2, _mm256_set1_epi32(0x00010064));
    const __m256i d8 = _mm256_madd_epi16(_mm256_packus_epi32(d4, d4), _mm256_set1_epi32(0x00012710));
    const uint64_t g0 = (uint32_t)_mm256_extract_epi32(d8, 1);
    const uint64_t g1 = (uint32_t)_mm256_extract_epi32(d8, 4), g2 = (uint32_t)_mm256_extract_epi32(d8, 5);
    *w_out = (g0 * 100000000u + g1) * 100000000u + g2;
    *q_out = e - (int64_t)fl;
    *neg_out = (int)minus;
    return next;
}

/* The vector reader's integer field as type dt (tf_field_avx2 with isint): *v, *nl and
 * the next field's start; NULL for anything else, a value out of range included (the
 * general path then says why; *nl is left alone). Without white space, at most 33
 * bytes are taken (the digits, then "\r\n"). */
static inline __attribute__((always_inline)) TF_TARGET_AVX2 const uint8_t *
tf_ivalue_avx2(const uint8_t *p, const uint8_t *end, const uint8_t delim, const int ws, const int th, const int dt,
               tf_val *v, int *nl_out) {
    uint64_t w;
    int64_t q;
    int neg, nl;
    const uint8_t *next = tf_field_avx2(p, end, delim, ws, 1, '.', th, &w, &q, &neg, &nl);
    if (__builtin_expect(next == NULL || !tf_int_value(w, neg, dt, v), 0)) return NULL;
    *nl_out = nl;
    return next;
}
#endif

/* w * 10^q (w exact, at most 19 digits) converted to type dt, rounded once; 0 if the
 * cold path must decide (a float16/bfloat16 tie, or what Eisel-Lemire cannot). */
static inline __attribute__((always_inline)) int tf_convert_simple(uint64_t w, int64_t q, int neg, const int dt,
                                                                  tf_val *v) {
    switch (dt) {
    case TF_DT_F32: return tf_f32_simple(w, q, neg, &v->f);
    case TF_DT_F64: return tf_f64_simple(w, q, neg, &v->d);
    default: {
        double d;
        int tie;
        if (!tf_f64_simple(w, q, neg, &d)) return 0;
        v->h = dt == TF_DT_F16 ? tf_narrow(d, 10, 5, &tie) : tf_narrow(d, 7, 8, &tie);
        return !tie;
    }
    }
}

/* Parse the number at p into *v; returns its end, or NULL if p does not start one. */
static inline __attribute__((always_inline)) const uint8_t *tf_value_hot(const uint8_t *p, const uint8_t *end,
                                                                       const int dt, tf_val *v) {
    if (TF_IS_INT(dt)) return tf_int_hot(p, end, dt, v);
    uint64_t w;
    int64_t q;
    int neg, simple;
    const uint8_t *e = tf_scan_fast(p, end, &w, &q, &neg, &simple);
    if (__builtin_expect(e == NULL, 0)) return NULL;
    if (__builtin_expect(simple, 1) && tf_convert_simple(w, q, neg, dt, v)) return e;
    *v = tf_value_cold(p, end, dt); /* by value: v stays in a register on the hot path */
    return e;
}

/* The general reader's common field: [sign] digits (a thousands separator `th` allowed
 * between two of them) [`dec` digits] [exponent], at most 19 digits, converted like
 * the plain path's; NULL for anything else (tf_value_x decides). */
static inline __attribute__((always_inline)) const uint8_t *tf_value_xfast(const uint8_t *p, const uint8_t *end,
                                                                         uint8_t dec, int th, const int dt,
                                                                         tf_val *v) {
    int neg = 0;
    if (p < end && (*p == '-' || *p == '+')) {
        neg = *p == '-';
        p++;
    }
    uint64_t w = 0;
    int64_t nd = 0, fl = 0;
    const uint8_t *ib = p;
    while (p < end) {
        const uint8_t c = *p;
        if (tf_is_digit(c)) {
            w = w * 10 + (uint64_t)(c - '0');
            nd++;
            p++;
        } else if ((int)c == th && p > ib && tf_is_digit(p[-1]) && p + 1 < end && tf_is_digit(p[1])) {
            p++;
        } else {
            break;
        }
    }
    if (TF_IS_INT(dt)) /* a decimal mark or an exponent after the digits: the caller sees it */
        return nd == 0 || nd > 19 || !tf_int_value(w, neg, dt, v) ? NULL : p;
    if (p < end && *p == dec) {
        p++;
        while (p < end && tf_is_digit(*p)) {
            w = w * 10 + (uint64_t)(*p++ - '0');
            nd++;
            fl++;
        }
    }
    if (nd == 0 || nd > 19) return NULL;
    int64_t e = 0;
    if (p < end && (*p | 0x20) == 'e') {
        p = tf_scan_exponent(p + 1, end, &e);
        if (!p) return NULL;
    }
    return tf_convert_simple(w, e - fl, neg, dt, v) ? p : NULL;
}

/* tf_value_hot for a run-time dt (the options' reader). */
static const uint8_t *tf_value_hot_any(const uint8_t *p, const uint8_t *end, int dt, tf_val *v) {
    switch (dt) {
    case TF_DT_F32: return tf_value_hot(p, end, TF_DT_F32, v);
    case TF_DT_F64: return tf_value_hot(p, end, TF_DT_F64, v);
    case TF_DT_F16: return tf_value_hot(p, end, TF_DT_F16, v);
    default: return tf_value_hot(p, end, TF_DT_BF16, v);
    }
}

/* The float types' `missing` (integers have their own: tf_int_missing). */
static tf_val tf_missing_value(double missing, int dt) {
    tf_val v;
    int tie;
    switch (dt) {
    case TF_DT_F32: v.f = (float)missing; break;
    case TF_DT_F64: v.d = missing; break;
    case TF_DT_F16: v.h = tf_narrow(missing, 10, 5, &tie); break;
    default: v.h = tf_narrow(missing, 7, 8, &tie); break;
    }
    return v;
}

static inline __attribute__((always_inline)) void tf_store(void *out, int64_t i, const int dt, tf_val v) {
    switch (dt) {
    case TF_DT_F32: ((float *)out)[i] = v.f; break;
    case TF_DT_F64: ((double *)out)[i] = v.d; break;
    case TF_DT_I32: ((int32_t *)out)[i] = v.i32; break;
    case TF_DT_I64: ((int64_t *)out)[i] = v.i64; break;
    default: ((uint16_t *)out)[i] = v.h; break;
    }
}

/* ======================================================================== */
/* byte scanning                                                            */
/* ======================================================================== */

typedef struct {
    const uint8_t *data; /* the whole input */
    const uint8_t *end;  /* data + n */
    int delim;    /* the delimiter byte, or TF_DELIM_WHITESPACE */
    int ws;       /* delim is TF_DELIM_WHITESPACE: runs of white space separate fields */
    int comment;  /* -1: none */
    uint8_t cm;   /* comment byte, or '\n' when there is none (searching for it is free) */
    int simd;
    /* Where data[0] lies in the whole input, for error reports: its byte offset and its
     * physical line (0 and 1, except for streams, whose buffer holds a window of it). */
    int64_t origin, origin_line;
    const struct tf_xopts *x; /* the reader options (tf_parse_*_x), or NULL */
} tf_syntax;

/* Reader options (na_values, decimal, thousands): a byte string from Python,
 * {decimal, thousands (0: none), general, then each NA word as a length byte and its
 * bytes}. Without `general` the plain field loop runs unchanged and only a field it
 * cannot read is looked at again (tf_value_x: an NA word, or a number between Unicode
 * blanks), so the options cost nothing on the fields that are numbers. `general`
 * (a decimal mark other than '.', a thousands separator, or an NA word that reads as
 * a number) sends every field through tf_value_x. */
typedef struct tf_xopts {
    uint8_t decimal;
    int thousands; /* -1: none */
    int general;
    int numeric;          /* some NA word reads as a number: every field is compared with the words */
    const uint8_t *words; /* the NA words, as above */
    int64_t nwords;       /* their bytes */
} tf_xopts;

/* Check and read the options string (see tf_xopts); the strings stay the caller's. */
static int tf_xopts_init(const char *fname, tf_xopts *x, const uint8_t *opts, int64_t nopts, int delimiter,
                         int comment) {
    if (!opts || nopts < 3) return tf_error(TF_EINVAL, "%s: invalid options (%lld bytes)", fname, (long long)nopts);
    int dec = opts[0], th = opts[1];
    if (dec < 33 || dec > 126 || tf_is_digit((uint8_t)dec) || dec == '"' || dec == '+' || dec == '-' ||
        (dec | 0x20) == 'e' || dec == delimiter || dec == comment)
        return tf_error(TF_EINVAL, "%s: invalid decimal byte %d", fname, dec);
    if (th != 0 && (th < 32 || th > 126 || tf_is_digit((uint8_t)th) || th == '"' || th == '+' || th == '-' ||
                    (th | 0x20) == 'e' || th == dec || th == delimiter || th == comment ||
                    (th == ' ' && delimiter == TF_DELIM_WHITESPACE)))
        return tf_error(TF_EINVAL, "%s: invalid thousands byte %d", fname, th);
    for (int64_t i = 3; i < nopts; i += 1 + opts[i])
        if (i + 1 + opts[i] > nopts) return tf_error(TF_EINVAL, "%s: the NA words run past the options", fname);
    x->decimal = (uint8_t)dec;
    x->thousands = th ? th : -1;
    x->general = opts[2] != 0 || dec != '.' || th != 0;
    x->numeric = opts[2] != 0;
    x->words = opts + 3;
    x->nwords = nopts - 3;
    return TF_OK;
}

/* The byte length of the blank at s (the white space Python's str.isspace knows, as
 * NumPy strips it around numbers: ASCII, U+0085, U+00A0, U+1680, U+2000-U+200A,
 * U+2028, U+2029, U+202F, U+205F, U+3000), or 0. */
static int tf_uspace_at(const uint8_t *s, const uint8_t *t) {
    if (s >= t) return 0;
    uint8_t c = *s;
    if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F)) return 1; /* \n and \r: quoted */
    if (c == 0xC2 && t - s >= 2 && (s[1] == 0x85 || s[1] == 0xA0)) return 2;
    if (t - s < 3) return 0;
    if (c == 0xE1 && s[1] == 0x9A && s[2] == 0x80) return 3;
    if (c == 0xE2 && s[1] == 0x80 && (s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF)) return 3;
    if (c == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) return 3;
    if (c == 0xE3 && s[1] == 0x80 && s[2] == 0x80) return 3;
    return 0;
}

/* The byte length of the blank that ends at t, or 0. */
static int tf_uspace_before(const uint8_t *s, const uint8_t *t) {
    for (int k = 1; k <= 3 && t - k >= s; k++)
        if (tf_uspace_at(t - k, t) == k) return k;
    return 0;
}

static int tf_na_word(const tf_xopts *x, const uint8_t *s, const uint8_t *t) {
    const int64_t len = t - s;
    for (int64_t i = 0; i < x->nwords; i += 1 + x->words[i])
        if (x->words[i] == len && memcmp(x->words + i + 1, s, (size_t)len) == 0) return 1;
    return 0;
}

#define TF_XBUF 1024

/* The field [s, t) under the options (and without any: between Unicode blanks): 1 and
 * *v if it is a number, 0 if it is missing (empty or an NA word), -1 if neither. With
 * a decimal mark or thousands separator, a number of more than TF_XBUF bytes is not
 * read (no real number is that long). */
__attribute__((noinline, cold)) static int tf_value_x(const tf_syntax *sx, const uint8_t *s, const uint8_t *t, int dt,
                                                      tf_val *v) {
    int k;
    while ((k = tf_uspace_at(s, t)) > 0) s += k;
    while ((k = tf_uspace_before(s, t)) > 0) t -= k;
    if (s == t) return 0;
    const tf_xopts *x = sx->x;
    if (x && tf_na_word(x, s, t)) return 0;
    if (TF_IS_INT(dt)) return tf_int_x(s, t, x ? x->thousands : -1, dt, v); /* any decimal mark: not an integer */
    if (!x || (x->decimal == '.' && x->thousands < 0)) return tf_value_hot_any(s, t, dt, v) == t ? 1 : -1;
    if (t - s > TF_XBUF) return -1;
    uint8_t buf[TF_XBUF];
    int64_t m = 0;
    int mantissa = 1; /* before the decimal mark and the exponent: separators allowed */
    for (const uint8_t *p = s; p < t; p++) {
        uint8_t c = *p;
        if (c == x->decimal) {
            c = '.';
            mantissa = 0;
        } else if ((int)c == x->thousands) {
            if (!mantissa || m == 0 || !tf_is_digit(buf[m - 1]) || p + 1 >= t || !tf_is_digit(p[1])) return -1;
            continue;
        } else if (c == '.') {
            return -1; /* a '.' is not the decimal mark here */
        } else if ((c | 0x20) == 'e') {
            mantissa = 0;
        }
        buf[m++] = c;
    }
    return tf_value_hot_any(buf, buf + m, dt, v) == buf + m ? 1 : -1;
}

/* The ASCII white space that separates fields under TF_DELIM_WHITESPACE: what
 * Python's str.isspace knows in ASCII (as NumPy's loadtxt splits), less the line ends. */
static inline int tf_ws_ascii(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\v' || c == '\f' || (c >= 0x1C && c <= 0x1F);
}

/* A blank around a field: a space or tab that is not the delimiter; under
 * TF_DELIM_WHITESPACE, any ASCII white space but a line end (tf_ws_at adds Unicode's). */
static inline int tf_blank(const tf_syntax *sx, uint8_t c) {
    if (sx->ws) return tf_ws_ascii(c);
    return (c == ' ' || c == '\t') && c != sx->delim;
}

/* Under TF_DELIM_WHITESPACE: the byte length of the white space at p (ASCII or
 * Unicode, not a line end), or 0. */
static inline int tf_ws_at(const tf_syntax *sx, const uint8_t *p) {
    if (p >= sx->end) return 0;
    if (tf_ws_ascii(*p)) return 1;
    return *p >= 0x80 ? tf_uspace_at(p, sx->end) : 0;
}

/* Under TF_DELIM_WHITESPACE: the byte length of the white space that ends at t (not
 * before s), or 0. */
static inline int tf_ws_before(const uint8_t *s, const uint8_t *t) {
    if (t <= s) return 0;
    if (tf_ws_ascii(t[-1])) return 1;
    return t[-1] >= 0x80 ? tf_uspace_before(s, t) : 0;
}

/* Past the Unicode blanks (and the ASCII ones between them) at p. Cold: blanks beyond
 * ASCII are rare. */
__attribute__((noinline, cold)) static const uint8_t *tf_skip_ws_unicode(const tf_syntax *sx, const uint8_t *p) {
    int k;
    while ((k = tf_ws_at(sx, p)) > 0) p += k;
    return p;
}

static inline const uint8_t *tf_skip_blanks(const tf_syntax *sx, const uint8_t *p) {
    while (p < sx->end && tf_blank(sx, *p)) p++;
    if (sx->ws && p < sx->end && *p >= 0x80) return tf_skip_ws_unicode(sx, p);
    return p;
}

/* Past the spaces and tabs at p, eight bytes at a time (the runs of space-aligned
 * columns vary in length from field to field: a byte loop mispredicts its exit on
 * nearly every one). */
static inline __attribute__((always_inline)) const uint8_t *tf_skip_sp_tab(const uint8_t *p, const uint8_t *e) {
#if TF_SWAR
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7Full;
    while (e - p >= 8) {
        const uint64_t v = tf_load8(p), x = v ^ 0x2020202020202020ull, y = v ^ 0x0909090909090909ull;
        /* exact: the high bit of each byte that is a space, or a tab */
        const uint64_t sp = ~(((x & low7) + low7) | x | low7), tab = ~(((y & low7) + low7) | y | low7);
        const uint64_t other = ~(sp | tab) & 0x8080808080808080ull;
        if (other) return p + (__builtin_ctzll(other) >> 3);
        p += 8;
    }
#endif
    while (p < e && (*p == ' ' || *p == '\t')) p++;
    return p;
}

/* Under TF_DELIM_WHITESPACE: is there a byte other than white space on the line that
 * ends at t (at its terminator), after the line start `start` (at or before that
 * line's start)? Pass 1's vector counters ask it for lines that end in a blank. */
static int tf_ws_line_has_content(const uint8_t *start, const uint8_t *t) {
    while (t > start) {
        const uint8_t c = t[-1];
        if (c == '\n' || c == '\r') return 0;
        const int k = tf_ws_before(start, t);
        if (!k) return 1;
        t -= k;
    }
    return 0;
}

static inline uint64_t tf_has_byte(uint64_t v, uint8_t b) {
    uint64_t x = v ^ (0x0101010101010101ull * b);
    return (x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull;
}

/* First byte in [p, e) equal to a, b, c or d (or e). */
static const uint8_t *tf_find4_swar(const uint8_t *p, const uint8_t *e, uint8_t a, uint8_t b, uint8_t c,
                                    uint8_t d) {
#if TF_SWAR
    while (e - p >= 8) {
        uint64_t v = tf_load8(p);
        if (tf_has_byte(v, a) | tf_has_byte(v, b) | tf_has_byte(v, c) | tf_has_byte(v, d)) break;
        p += 8;
    }
#endif
    while (p < e && *p != a && *p != b && *p != c && *p != d) p++;
    return p;
}

#if TF_X86
__attribute__((target("avx2"))) static const uint8_t *tf_find4_avx2(const uint8_t *p, const uint8_t *e, uint8_t a,
                                                                    uint8_t b, uint8_t c, uint8_t d) {
    const __m256i va = _mm256_set1_epi8((char)a), vb = _mm256_set1_epi8((char)b);
    const __m256i vc = _mm256_set1_epi8((char)c), vd = _mm256_set1_epi8((char)d);
    while (e - p >= 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)p);
        __m256i m = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(v, va), _mm256_cmpeq_epi8(v, vb)),
                                    _mm256_or_si256(_mm256_cmpeq_epi8(v, vc), _mm256_cmpeq_epi8(v, vd)));
        unsigned mask = (unsigned)_mm256_movemask_epi8(m);
        if (mask) return p + __builtin_ctz(mask);
        p += 32;
    }
    return tf_find4_swar(p, e, a, b, c, d);
}
#endif

static inline const uint8_t *tf_find4(const tf_syntax *sx, const uint8_t *p, const uint8_t *e, uint8_t a, uint8_t b,
                                      uint8_t c, uint8_t d) {
#if TF_X86
    if (sx->simd >= TF_SIMD_AVX2) return tf_find4_avx2(p, e, a, b, c, d);
#else
    (void)sx;
#endif
    return tf_find4_swar(p, e, a, b, c, d);
}

/* Just past the line terminator at p ('\n', '\r' or "\r\n"). */
static inline const uint8_t *tf_after_eol(const tf_syntax *sx, const uint8_t *p) {
    if (*p == '\r' && p + 1 < sx->end && p[1] == '\n') return p + 2;
    return p + 1;
}

/* The start of the line after the one containing p (or the end of the input). */
static inline const uint8_t *tf_next_line(const tf_syntax *sx, const uint8_t *p) {
    p = tf_find4(sx, p, sx->end, '\n', '\r', '\n', '\n');
    return p < sx->end ? tf_after_eol(sx, p) : p;
}

/* The first line start at or after p (p itself if it is one). */
static const uint8_t *tf_line_start_from(const tf_syntax *sx, const uint8_t *p) {
    if (p <= sx->data) return sx->data;
    if (p >= sx->end) return sx->end;
    if (p[-1] == '\n' || (p[-1] == '\r' && *p != '\n')) return p;
    return tf_next_line(sx, p);
}

/* Past the closing quote of a quoted field whose content starts at p, or NULL if the
 * input ends first. */
static inline const uint8_t *tf_quote_close(const tf_syntax *sx, const uint8_t *p) {
    for (;;) {
        const uint8_t *q = memchr(p, '"', (size_t)(sx->end - p));
        if (!q) return NULL;
        if (q + 1 < sx->end && q[1] == '"') {
            p = q + 2;
            continue;
        }
        return q + 1;
    }
}

/* Pass 1's view of a record starting at p: the start of the next record's line.
 * Quotes open and close quoted fields wherever they are (pass 2 rejects a quote that
 * is not at a field start before the two views could part). */
static const uint8_t *tf_record_end(const tf_syntax *sx, const uint8_t *p) {
    for (;;) {
        p = tf_find4(sx, p, sx->end, '\n', '\r', '"', sx->cm);
        if (p == sx->end) return p;
        uint8_t c = *p;
        if (c == '"') {
            p = tf_quote_close(sx, p + 1);
            if (!p) return sx->end;
            continue;
        }
        if (c == '\n' || c == '\r') return tf_after_eol(sx, p);
        return tf_next_line(sx, p); /* a comment runs to the end of the line */
    }
}

#if TF_X86
/* Bit i set where byte i of the 64 at p equals c. */
__attribute__((target("avx2"))) static inline uint64_t tf_eq64(__m256i lo, __m256i hi, uint8_t c) {
    const __m256i v = _mm256_set1_epi8((char)c);
    uint64_t a = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, v));
    uint64_t b = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, v));
    return a | (b << 32);
}

/* Count whole lines in [p, to) 64 bytes at a time, as long as the bytes are simple: no
 * quote, no comment byte, and no blank right before a line end (so a line is a record
 * exactly when the byte before its terminator is neither a terminator nor blank).
 * Under TF_DELIM_WHITESPACE, where trailing blanks are common, a line that ends in a
 * blank is looked at from its end instead (tf_ws_line_has_content), and "blank" is
 * wider (every control byte but the line ends, and every byte >= 0x80, which may end a
 * Unicode blank): the look back decides exactly. Returns the start of the first line
 * not counted (the scalar loop goes on from there); *rows gets the records counted. p
 * must be a line start. */
__attribute__((target("avx2"))) static const uint8_t *tf_count_simple_avx2(const tf_syntax *sx, const uint8_t *p,
                                                                           const uint8_t *to, int64_t *rows) {
    const uint8_t *const start = p;
    const uint8_t *line = p;
    int64_t r = 0;
    uint64_t prev_content = 0, prev_blank = 0, prev_cr = 0; /* carried from the block before */
    const int blank_tab = sx->delim != '\t', blank_space = sx->delim != ' ';
    while (to - p >= 64) {
        __m256i lo = _mm256_loadu_si256((const __m256i *)p), hi = _mm256_loadu_si256((const __m256i *)(p + 32));
        uint64_t nl = tf_eq64(lo, hi, '\n'), cr = tf_eq64(lo, hi, '\r');
        uint64_t special = tf_eq64(lo, hi, '"') | tf_eq64(lo, hi, sx->cm);
        uint64_t blank = (blank_space ? tf_eq64(lo, hi, ' ') : 0) | (blank_tab ? tf_eq64(lo, hi, '\t') : 0);
        if (sx->cm == '\n') special &= ~nl; /* no comment byte: cm is a stand-in */
        if (special) break;
        if (sx->ws) {
            const __m256i c1f = _mm256_set1_epi8(0x1F);
            uint64_t ctl = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(lo, c1f), lo)) |
                           ((uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(hi, c1f), hi))
                            << 32);
            uint64_t high = (uint32_t)_mm256_movemask_epi8(lo) | ((uint64_t)(uint32_t)_mm256_movemask_epi8(hi) << 32);
            blank |= (ctl & ~(nl | cr)) | high;
        }
        uint64_t content = ~(nl | cr | blank);
        uint64_t ends = cr | (nl & ~((cr << 1) | prev_cr)); /* first byte of each terminator */
        uint64_t unsure = ends & ((blank << 1) | prev_blank);
        if (unsure) {
            if (!sx->ws) break;
            for (uint64_t u = unsure; u; u &= u - 1) r += tf_ws_line_has_content(start, p + __builtin_ctzll(u));
            r += __builtin_popcountll(ends & ~unsure & ((content << 1) | prev_content));
        } else {
            r += __builtin_popcountll(ends & ((content << 1) | prev_content));
        }
        if (ends) {
            int last = 63 - __builtin_clzll(ends);
            const uint8_t *t = p + last;
            line = t + 1;
            if (*t == '\r' && line < sx->end && *line == '\n') line++;
        }
        prev_content = content >> 63;
        prev_blank = blank >> 63;
        prev_cr = cr >> 63;
        p += 64;
    }
    /* Records whose terminator came after `line` are recounted by the caller. */
    *rows = r;
    return line;
}
#endif

#if TF_X86
/* tf_count_simple_avx2 with one 64-byte register and mask compares. */
TF_TARGET_AVX512 static const uint8_t *tf_count_simple_avx512(const tf_syntax *sx, const uint8_t *p, const uint8_t *to,
                                                              int64_t *rows) {
    const uint8_t *const start = p;
    const uint8_t *line = p;
    int64_t r = 0;
    uint64_t prev_content = 0, prev_blank = 0, prev_cr = 0; /* carried from the block before */
    const __m512i vnl = _mm512_set1_epi8('\n'), vcr = _mm512_set1_epi8('\r'), vq = _mm512_set1_epi8('"');
    const __m512i vcm = _mm512_set1_epi8((char)sx->cm), vsp = _mm512_set1_epi8(' '), vtab = _mm512_set1_epi8('\t');
    const uint64_t blank_tab = sx->delim != '\t' ? ~0ull : 0, blank_space = sx->delim != ' ' ? ~0ull : 0;
    while (to - p >= 64) {
        const __m512i v = _mm512_loadu_si512((const void *)p);
        uint64_t nl = _mm512_cmpeq_epi8_mask(v, vnl), cr = _mm512_cmpeq_epi8_mask(v, vcr);
        uint64_t special = _mm512_cmpeq_epi8_mask(v, vq) | _mm512_cmpeq_epi8_mask(v, vcm);
        uint64_t blank = (blank_space & _mm512_cmpeq_epi8_mask(v, vsp)) | (blank_tab & _mm512_cmpeq_epi8_mask(v, vtab));
        if (sx->cm == '\n') special &= ~nl; /* no comment byte: cm is a stand-in */
        if (special) break;
        if (sx->ws) /* as in tf_count_simple_avx2 */
            blank |= (_mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20)) & ~(nl | cr)) | _mm512_movepi8_mask(v);
        uint64_t content = ~(nl | cr | blank);
        uint64_t ends = cr | (nl & ~((cr << 1) | prev_cr)); /* first byte of each terminator */
        uint64_t unsure = ends & ((blank << 1) | prev_blank);
        if (unsure) {
            if (!sx->ws) break;
            for (uint64_t u = unsure; u; u &= u - 1) r += tf_ws_line_has_content(start, p + __builtin_ctzll(u));
            r += __builtin_popcountll(ends & ~unsure & ((content << 1) | prev_content));
        } else {
            r += __builtin_popcountll(ends & ((content << 1) | prev_content));
        }
        if (ends) {
            int last = 63 - __builtin_clzll(ends);
            const uint8_t *t = p + last;
            line = t + 1;
            if (*t == '\r' && line < sx->end && *line == '\n') line++;
        }
        prev_content = content >> 63;
        prev_blank = blank >> 63;
        prev_cr = cr >> 63;
        p += 64;
    }
    *rows = r;
    return line;
}
#endif

/* Count the records starting in [from, to); returns the start of the first line
 * after them (>= to, beyond it when the last record spans lines). */
static const uint8_t *tf_count_records(const tf_syntax *sx, const uint8_t *p, const uint8_t *to, int64_t *rows) {
    int64_t r = 0;
#if TF_X86
    if (sx->simd >= TF_SIMD_AVX512 && to - p >= 256) p = tf_count_simple_avx512(sx, p, to, &r);
    else if (sx->simd >= TF_SIMD_AVX2 && to - p >= 256) p = tf_count_simple_avx2(sx, p, to, &r);
#endif
    while (p < to) {
        const uint8_t *q = tf_skip_blanks(sx, p);
        if (q == sx->end) {
            p = q;
            break;
        }
        uint8_t c = *q;
        if (c == '\n' || c == '\r') {
            p = tf_after_eol(sx, q);
            continue;
        }
        if (c == sx->comment) {
            p = tf_next_line(sx, q);
            continue;
        }
        r++;
        p = tf_record_end(sx, q);
    }
    *rows = r;
    return p;
}

/* First NUL byte or byte that is not part of valid UTF-8 in [p, e), or NULL. */
static const uint8_t *tf_utf8_bad(const uint8_t *p, const uint8_t *e) {
    while (p < e) {
#if TF_SWAR
        if (e - p >= 8) {
            uint64_t v = tf_load8(p);
            if (!(v & 0x8080808080808080ull) && !tf_has_byte(v, 0)) {
                p += 8;
                continue;
            }
        }
#endif
        uint8_t c = *p;
        if (c < 0x80) {
            if (c == 0) return p;
            p++;
            continue;
        }
        int len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
        else return p;
        if (e - p < len) return p;
        for (int i = 1; i < len; i++) {
            if ((p[i] & 0xC0) != 0x80) return p;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return p;
        p += len;
    }
    return NULL;
}

/* ======================================================================== */
/* input that shrinks while it is read                                     */
/* ======================================================================== */

/* A memory-mapped file truncated by another process (or thread) while it is parsed
 * turns reads past its new end into SIGBUS; a source tensor whose storage is freed or
 * reallocated under the parse (from a progress callback or another thread) can turn
 * them into SIGSEGV. Either used to kill the process. Every read of the input runs
 * under a guard: a fault whose address lies inside the input, on a thread that is
 * inside a guarded region, jumps back to the guard (siglongjmp), and the call fails
 * with TF_EIO ("the input changed while it was read"); any other fault goes to the
 * handler that was installed before ours (Python's faulthandler, say), or to the
 * default action, exactly as before.
 *
 * Why a guard rather than pread into owned buffers: the guard costs one sigsetjmp per
 * chunk (no signal mask is saved: a few nanoseconds per megabyte) and keeps the
 * zero-copy, memory-mapped design (no second copy of a large file, no extra pass over
 * memory); reading with pread would cost a copy of the whole input (about 10% of the
 * parse at 1 GB/s per core) and a rewrite of the chunking, and still leave memory-
 * mapped inputs that Python hands us (mmap objects, tensors) unprotected.
 *
 * Global state, justified: the previous handlers (written once, under pthread_once,
 * before our handler is installed, and only read afterwards) and one thread-local
 * pointer to the innermost guard of each thread (a signal handler has no other way to
 * find it; faults are delivered to the thread that faulted). The handler is installed
 * with SA_NODEFER, so jumping out of it leaves the signal unblocked (sigsetjmp does not
 * save the mask). The jump leaves code that holds no locks and no allocations: guarded
 * regions only read the input and write the caller's buffers. */
typedef struct tf_guard {
    sigjmp_buf env;
    uintptr_t lo, hi;   /* the input: faults outside it are not ours */
    uintptr_t addr;     /* where the fault was */
    struct tf_guard *prev;
} tf_guard;

static _Thread_local tf_guard *tf_guard_top;
static struct sigaction tf_prev_bus, tf_prev_segv;
static pthread_once_t tf_guard_once = PTHREAD_ONCE_INIT;

static void tf_guard_handler(int sig, siginfo_t *si, void *uc) {
    tf_guard *g = tf_guard_top;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (g && si->si_code > 0 && a >= g->lo && a < g->hi) {
        g->addr = a;
        siglongjmp(g->env, 1);
    }
    const struct sigaction *prev = sig == SIGBUS ? &tf_prev_bus : &tf_prev_segv;
    if (prev->sa_flags & SA_SIGINFO) {
        prev->sa_sigaction(sig, si, uc);
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
        prev->sa_handler(sig);
    } else {
        /* Back to the default action: a faulting access runs again and ends the process
         * as it would have without us; a signal that was sent is sent again. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        if (si->si_code <= 0) raise(sig);
    }
}

static void tf_guard_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = tf_guard_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &tf_prev_bus);
    sigaction(SIGSEGV, &sa, &tf_prev_segv);
}

/* Run fn(arg) with faults on [lo, hi) caught: returns -1, or the offset from lo of the
 * faulting address (fn was abandoned there). */
static int64_t tf_guarded(const uint8_t *lo, const uint8_t *hi, void (*fn)(void *), void *arg) {
    pthread_once(&tf_guard_once, tf_guard_install);
    tf_guard g;
    g.lo = (uintptr_t)lo;
    g.hi = (uintptr_t)hi;
    g.addr = 0;
    g.prev = tf_guard_top;
    tf_guard_top = &g;
    if (sigsetjmp(g.env, 0) != 0) {
        tf_guard_top = g.prev;
        return (int64_t)(g.addr - g.lo);
    }
    fn(arg);
    tf_guard_top = g.prev;
    return -1;
}

static int tf_changed_error(const char *fname, int64_t at) {
    return tf_error(TF_EIO,
                    "%s: the input changed while it was read: byte %lld could not be read (a memory-mapped file "
                    "truncated, or a source tensor's storage resized or freed, during the call)",
                    fname, (long long)at);
}

/* ======================================================================== */
/* errors                                                                   */
/* ======================================================================== */

enum {
    TF_PE_NONE = 0,
    TF_PE_NUMBER,       /* a = field number (1-based) */
    TF_PE_FIELDS,       /* a = fields found, b = fields expected */
    TF_PE_UNTERMINATED, /* quoted field never closed */
    TF_PE_AFTER_QUOTE,  /* text between a closing quote and the delimiter */
    TF_PE_QUOTE_INSIDE, /* a quote inside an unquoted field */
    TF_PE_NUL,
    TF_PE_UTF8,
    TF_PE_LONG_QUOTE,   /* streams: a quoted field open for more than a = max bytes */
    TF_PE_LONG_LINE,    /* streams: a line of more than a = max bytes without an end */
    TF_PE_INTEGER,      /* a = field number, b = bits: an integer column's field is not an integer */
    TF_PE_RANGE,        /* a = field number, b = bits: an integer out of the type's range */
    TF_PE_MISSING,      /* a = field number, b = bits: empty or an NA word, and no integer fill */
    TF_PE_INTERNAL      /* pass 2 disagrees with pass 1 (input changed meanwhile?) */
};

typedef struct {
    int kind;
    int64_t at;                   /* byte offset of the error */
    int64_t text_begin, text_end; /* the offending text */
    int64_t a, b;
} tf_perr;

static int tf_fail(tf_perr *err, int kind, const tf_syntax *sx, const uint8_t *at, const uint8_t *tb,
                   const uint8_t *te, int64_t a, int64_t b) {
    err->kind = kind;
    err->at = at - sx->data;
    err->text_begin = tb - sx->data;
    err->text_end = te - sx->data;
    err->a = a;
    err->b = b;
    return -1;
}

/* Why the token [s, t) of an integer column was not read: TF_PE_RANGE if it is an
 * integer (in quotes or not, blanks around, [+-] digits, thousands separators between
 * digits), which then is out of range; else TF_PE_INTEGER. */
static int tf_int_error(const tf_syntax *sx, const uint8_t *s, const uint8_t *t) {
    int k;
    if (t - s >= 2 && *s == '"' && t[-1] == '"') s++, t--;
    while ((k = tf_uspace_at(s, t)) > 0) s += k;
    while ((k = tf_uspace_before(s, t)) > 0) t -= k;
    if (s < t && (*s == '-' || *s == '+')) s++;
    if (s == t || !tf_is_digit(*s) || !tf_is_digit(t[-1])) return TF_PE_INTEGER;
    const int th = sx->x ? sx->x->thousands : -1;
    for (const uint8_t *p = s; p < t; p++)
        if (!tf_is_digit(*p) && !((int)*p == th && tf_is_digit(p[-1]) && tf_is_digit(p[1]))) return TF_PE_INTEGER;
    return TF_PE_RANGE;
}

/* A malformed token [tb, te) of a column of type dt: a NUL byte or bad UTF-8 inside it
 * is named as such; in an integer column, an integer out of range too. */
static int tf_fail_token(tf_perr *err, const tf_syntax *sx, const uint8_t *tb, const uint8_t *te, int64_t field,
                         int dt) {
    const uint8_t *bad = tf_utf8_bad(tb, te);
    if (bad) return tf_fail(err, *bad ? TF_PE_UTF8 : TF_PE_NUL, sx, bad, tb, te, 0, 0);
    if (TF_IS_INT(dt)) return tf_fail(err, tf_int_error(sx, tb, te), sx, tb, tb, te, field, dt == TF_DT_I32 ? 32 : 64);
    return tf_fail(err, TF_PE_NUMBER, sx, tb, tb, te, field, 0);
}

/* Under TF_DELIM_WHITESPACE, the end of an unquoted token at p: the next white space,
 * line end, comment or end (a byte loop: tokens are short, and this is the path of
 * headers, skipped columns and errors). */
static const uint8_t *tf_token_end_ws(const tf_syntax *sx, const uint8_t *p) {
    const uint8_t *const e = sx->end;
    for (; p < e; p++) {
        const uint8_t c = *p;
        if (c == sx->cm || c == '\n' || c == '\r' || tf_ws_ascii(c)) return p;
        if (c >= 0x80 && tf_uspace_at(p, e)) return p;
    }
    return p;
}

/* End of an unquoted token at p: the next delimiter, line end, comment or end. */
static inline const uint8_t *tf_token_end(const tf_syntax *sx, const uint8_t *p) {
    if (sx->ws) return tf_token_end_ws(sx, p);
    return tf_find4(sx, p, sx->end, (uint8_t)sx->delim, '\n', '\r', sx->cm);
}

/* After a field that tf_field (or the field loop) ended at p: 1 if the record goes on,
 * with *pp at the next field's start (past the delimiter; under TF_DELIM_WHITESPACE,
 * past the white space); else 0, with *pp at the line end, comment or end. */
static inline int tf_next_field(const tf_syntax *sx, const uint8_t **pp) {
    const uint8_t *p = *pp;
    if (sx->ws) {
        p = tf_skip_blanks(sx, p);
        *pp = p;
        return p < sx->end && *p != '\n' && *p != '\r' && *p != sx->comment;
    }
    if (p < sx->end && *p == sx->delim) {
        *pp = p + 1;
        return 1;
    }
    return 0;
}

/* Can a field end at p: the delimiter (under TF_DELIM_WHITESPACE, white space), a
 * line end, the comment byte or the end? */
static inline int tf_field_ends_at(const tf_syntax *sx, const uint8_t *p) {
    if (p >= sx->end || *p == '\n' || *p == '\r' || *p == sx->comment) return 1;
    return sx->ws ? tf_ws_at(sx, p) > 0 : *p == sx->delim;
}

/* Write the error to errinfo and the thread-local message; returns TF_EPARSE (or
 * TF_EINTERNAL). Computes the line and column by scanning from the start. */
typedef struct {
    const tf_syntax *sx;
    const tf_perr *err;
    int64_t line, column;
    char text[256];
    int cut;
} tf_report_job;

/* The line and column of the error, and its text escaped and cut to 60 bytes. */
static void tf_report_read(void *arg) {
    tf_report_job *job = (tf_report_job *)arg;
    const tf_syntax *sx = job->sx;
    const tf_perr *err = job->err;
    const uint8_t *data = sx->data, *at = data + err->at;
    int64_t line = sx->origin_line;
    const uint8_t *ls = data;
    for (const uint8_t *p = data; p < at; p++) {
        if (*p == '\n' || (*p == '\r' && !(p + 1 < sx->end && p[1] == '\n'))) {
            line++;
            ls = p + 1;
        }
    }
    if (ls == data && sx->origin == 0 && sx->end - data >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF && at >= data + 3)
        ls = data + 3; /* the byte order mark is not a column */
    int64_t column = 1;
    for (const uint8_t *p = ls; p < at; p++)
        if ((*p & 0xC0) != 0x80) column++;
    job->line = line;
    job->column = column;
    char *text = job->text;
    size_t k = 0;
    const uint8_t *tb = data + err->text_begin, *te = data + err->text_end;
    int cut = te - tb > 60;
    if (cut) te = tb + 60;
    for (const uint8_t *p = tb; p < te && k < sizeof job->text - 8; p++) {
        uint8_t c = *p;
        if (c == '\\' || c == '"') k += (size_t)snprintf(text + k, sizeof job->text - k, "\\%c", c);
        else if (c == '\n') k += (size_t)snprintf(text + k, sizeof job->text - k, "\\n");
        else if (c == '\r') k += (size_t)snprintf(text + k, sizeof job->text - k, "\\r");
        else if (c == '\t') k += (size_t)snprintf(text + k, sizeof job->text - k, "\\t");
        else if (c < 0x20 || c == 0x7F || c >= 0x80) k += (size_t)snprintf(text + k, sizeof job->text - k, "\\x%02x", c);
        else text[k++] = (char)c;
    }
    text[k] = '\0';
    job->cut = cut;
}

static int tf_report(const tf_syntax *sx, const tf_perr *err, int64_t *errinfo, const char *fname) {
    tf_report_job job;
    job.sx = sx;
    job.err = err;
    int64_t fault = tf_guarded(sx->data, sx->end, tf_report_read, &job);
    if (fault >= 0) return tf_changed_error(fname, fault);
    int64_t line = job.line, column = job.column;
    const char *text = job.text;
    int cut = job.cut;
    const int64_t at = sx->origin + err->at;
    if (errinfo) {
        errinfo[0] = at;
        errinfo[1] = line;
        errinfo[2] = column;
        errinfo[3] = sx->origin + err->text_begin;
        errinfo[4] = sx->origin + err->text_end;
    }
    char what[256];
    int code = TF_EPARSE;
    switch (err->kind) {
    case TF_PE_NUMBER: snprintf(what, sizeof what, "field %lld is not a number", (long long)err->a); break;
    case TF_PE_FIELDS:
        snprintf(what, sizeof what, "record has %lld field%s, expected %lld", (long long)err->a, err->a == 1 ? "" : "s",
                 (long long)err->b);
        break;
    case TF_PE_UNTERMINATED: snprintf(what, sizeof what, "quoted field is never closed (opened here)"); break;
    case TF_PE_AFTER_QUOTE: snprintf(what, sizeof what, "unexpected text after a closing quote"); break;
    case TF_PE_QUOTE_INSIDE: snprintf(what, sizeof what, "quote inside an unquoted field"); break;
    case TF_PE_NUL: snprintf(what, sizeof what, "NUL byte"); break;
    case TF_PE_UTF8: snprintf(what, sizeof what, "invalid UTF-8"); break;
    case TF_PE_LONG_QUOTE:
        snprintf(what, sizeof what, "quoted field is not closed within %lld bytes (opened here)", (long long)err->a);
        break;
    case TF_PE_LONG_LINE: snprintf(what, sizeof what, "line is longer than %lld bytes", (long long)err->a); break;
    case TF_PE_INTEGER: snprintf(what, sizeof what, "field %lld is not an integer", (long long)err->a); break;
    case TF_PE_RANGE:
        snprintf(what, sizeof what, "field %lld is out of range for int%lld [%s, %s]", (long long)err->a,
                 (long long)err->b, err->b == 32 ? "-2147483648" : "-9223372036854775808",
                 err->b == 32 ? "2147483647" : "9223372036854775807");
        break;
    case TF_PE_MISSING:
        snprintf(what, sizeof what,
                 "field %lld is missing (empty or an NA word), and int%lld has no NaN (an integer `missing` fills "
                 "such fields)",
                 (long long)err->a, (long long)err->b);
        break;
    default:
        snprintf(what, sizeof what, "internal error: the two passes disagree (did the input change while it was read?)");
        code = TF_EINTERNAL;
        break;
    }
    return tf_error(code, "%s: line %lld, column %lld (byte offset %lld): %s: \"%s\"%s", fname, (long long)line,
                    (long long)column, (long long)at, what, text, cut ? "..." : "");
}

/* ======================================================================== */
/* generic field tokenizer (header, skipped columns)                        */
/* ======================================================================== */

enum { TF_F_QUOTED = 1, TF_F_ESCAPE = 2, TF_F_NUMBER = 4, TF_F_EMPTY = 8 };

/* Tokenize the field at p (blanks skipped already). On success sets [*cb, *ce) to its
 * content, *flags, and returns the byte after the field's trailing blanks (a delimiter,
 * line end, comment or the end; under TF_DELIM_WHITESPACE, the byte after the field:
 * white space, a line end, comment or the end); on failure fills err and returns NULL.
 * tf_next_field goes on from there. */
static const uint8_t *tf_field(const tf_syntax *sx, const uint8_t *p, const uint8_t **cb, const uint8_t **ce,
                               int *flags, tf_perr *err) {
    const uint8_t *fs = p;
    int fl = 0;
    if (p < sx->end && *p == '"') {
        fl |= TF_F_QUOTED;
        const uint8_t *close = tf_quote_close(sx, p + 1);
        if (!close) {
            tf_fail(err, TF_PE_UNTERMINATED, sx, fs, fs, sx->end, 0, 0);
            return NULL;
        }
        *cb = p + 1;
        *ce = close - 1;
        if (memchr(*cb, '"', (size_t)(*ce - *cb))) fl |= TF_F_ESCAPE;
        const uint8_t *bad = tf_utf8_bad(*cb, *ce);
        if (bad) {
            tf_fail(err, *bad ? TF_PE_UTF8 : TF_PE_NUL, sx, bad, fs, close, 0, 0);
            return NULL;
        }
        p = sx->ws ? close : tf_skip_blanks(sx, close);
        if (!tf_field_ends_at(sx, p)) {
            tf_fail(err, TF_PE_AFTER_QUOTE, sx, p, fs, tf_token_end(sx, p), 0, 0);
            return NULL;
        }
    } else {
        const uint8_t *e = tf_token_end(sx, p);
        const uint8_t *quote = memchr(p, '"', (size_t)(e - p));
        if (quote) {
            tf_fail(err, TF_PE_QUOTE_INSIDE, sx, quote, fs, e, 0, 0);
            return NULL;
        }
        const uint8_t *bad = tf_utf8_bad(p, e);
        if (bad) {
            tf_fail(err, *bad ? TF_PE_UTF8 : TF_PE_NUL, sx, bad, fs, e, 0, 0);
            return NULL;
        }
        *cb = p;
        const uint8_t *t = e;
        while (t > p && tf_blank(sx, t[-1])) t--;
        *ce = t;
        p = e;
    }
    /* Is the content a number (blanks around it allowed inside quotes)? */
    const uint8_t *s = *cb, *t = *ce;
    while (s < t && tf_blank(sx, *s)) s++;
    while (t > s && tf_blank(sx, t[-1])) t--;
    if (s == t) fl |= TF_F_EMPTY;
    else if (!(fl & TF_F_ESCAPE)) {
        tf_num num;
        const uint8_t *q = tf_scan_number(s, t, &num);
        if (q == t && !(sx->x && sx->x->general)) fl |= TF_F_NUMBER;
        else if (sx->x || *s >= 0x80 || t[-1] >= 0x80 || *s == '\v' || *s == '\f' || t[-1] == '\v' || t[-1] == '\f') {
            tf_val v; /* under the options, or between Unicode blanks: an NA word is neither text nor a number */
            int r = tf_value_x(sx, s, t, TF_DT_F64, &v);
            fl |= r > 0 ? TF_F_NUMBER : r == 0 ? TF_F_EMPTY : 0;
        }
    }
    *flags = fl;
    return p;
}

/* Look at the line starting at p: 2 if the input ends there; 1 if the line is blank
 * or a comment (checked for NUL bytes and UTF-8), *next = the next line's start; 0 if
 * a record starts on it, *next = its first non-blank byte; -1 on error. */
static int tf_noise_line(const tf_syntax *sx, const uint8_t *p, const uint8_t **next, tf_perr *err) {
    if (p >= sx->end) {
        *next = sx->end;
        return 2;
    }
    const uint8_t *q = tf_skip_blanks(sx, p);
    if (q == sx->end) {
        *next = q;
        return 1;
    }
    uint8_t c = *q;
    if (c == '\n' || c == '\r') {
        *next = tf_after_eol(sx, q);
        return 1;
    }
    if (c == sx->comment) {
        const uint8_t *e = tf_find4(sx, q, sx->end, '\n', '\r', '\n', '\n');
        const uint8_t *bad = tf_utf8_bad(q, e);
        if (bad) return tf_fail(err, *bad ? TF_PE_UTF8 : TF_PE_NUL, sx, bad, q, e, 0, 0);
        *next = e < sx->end ? tf_after_eol(sx, e) : e;
        return 1;
    }
    *next = q;
    return 0;
}

/* The parser's SIMD level: tf_simd_level() (the CPU, capped by TENSORFFI_SIMD), less
 * what the parser's own kernels need. The AVX2 kernels also use BMI1/BMI2 and POPCNT
 * (every AVX2 CPU has them, but a virtual machine may hide them). At AVX512 (which
 * needs VBMI too, keeping the first AVX-512 CPUs, whose clock drops under 512-bit
 * work, on AVX2) pass 1 counts records in 64-byte registers with mask compares, about
 * 12% faster than AVX2 on Zen 4; pass 2 keeps the AVX2 field reader. An AVX-512 field
 * reader (mask compares, one vpermb for the shuffle) was measured too: as fast as the
 * AVX2 one at best, 1.7x slower in the build the package ships (-fwrapv, which Python
 * adds, changed gcc's register allocation of the loop), so it did not earn its place
 * (benchmarks/RESULTS.md). TENSORFFI_SIMD=avx2 selects the AVX2 kernels throughout. */
int tf_parse_simd(void) {
    int level = tf_simd_level();
#if TF_X86
    if (level >= TF_SIMD_AVX2 &&
        !(__builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt")))
        level = TF_SIMD_SCALAR;
    if (level == TF_SIMD_AVX512 && !__builtin_cpu_supports("avx512vbmi")) level = TF_SIMD_AVX2;
#else
    level = TF_SIMD_SCALAR;
#endif
    return level;
}

static void tf_syntax_init(tf_syntax *sx, const uint8_t *data, int64_t n, int delimiter, int comment) {
    sx->data = data;
    sx->end = data + n;
    sx->delim = delimiter;
    sx->ws = delimiter == TF_DELIM_WHITESPACE;
    sx->comment = comment;
    sx->cm = comment >= 0 ? (uint8_t)comment : (uint8_t)'\n';
    sx->simd = tf_parse_simd();
    sx->origin = 0;
    sx->origin_line = 1;
    sx->x = NULL;
}


static int tf_check_syntax(const char *fname, const uint8_t *data, int64_t n, int delimiter, int comment) {
    if (n < 0 || (!data && n > 0)) return tf_error(TF_EINVAL, "%s: no data (n=%lld)", fname, (long long)n);
    const int ws = delimiter == TF_DELIM_WHITESPACE;
    if (!ws && (delimiter < 1 || delimiter > 127 || delimiter == '"' || delimiter == '\n' || delimiter == '\r'))
        return tf_error(TF_EINVAL, "%s: invalid delimiter byte %d", fname, delimiter);
    if (comment != -1 && (comment < 1 || comment > 127 || comment == '"' || comment == '\n' || comment == '\r' ||
                          comment == ' ' || comment == '\t' || comment == delimiter ||
                          (ws && tf_ws_ascii((uint8_t)comment))))
        return tf_error(TF_EINVAL, "%s: invalid comment byte %d", fname, comment);
    return TF_OK;
}

/* The first record after `start`, `skiplines` physical lines and any blank or comment
 * lines: spans and info as tf_parse_record describes; info[4] = 1 if some field is
 * text (neither a number nor empty), info[5] = 1 if some field is a number. Returns 0,
 * or -1 with *err filled. */
static int tf_first_record(const tf_syntax *sx, int64_t start, int64_t skiplines, int64_t *spans, int64_t max_fields,
                           int64_t *info, tf_perr *err) {
    const uint8_t *data = sx->data;
    const uint8_t *p = data + start;
    for (int64_t i = 0; i < skiplines && p < sx->end; i++) {
        const uint8_t *e = tf_find4(sx, p, sx->end, '\n', '\r', '\n', '\n');
        const uint8_t *bad = tf_utf8_bad(p, e);
        if (bad) return tf_fail(err, *bad ? TF_PE_UTF8 : TF_PE_NUL, sx, bad, p, e, 0, 0);
        p = e < sx->end ? tf_after_eol(sx, e) : e;
    }
    const uint8_t *q;
    int k;
    while ((k = tf_noise_line(sx, p, &q, err)) == 1) p = q;
    if (k < 0) return -1;
    info[0] = -1;
    info[1] = p - data;
    info[2] = 0;
    info[3] = 1;
    info[4] = info[5] = 0;
    if (k == 2) return 0;
    info[0] = p - data;
    p = q;
    int64_t nf = 0;
    int numeric = 1, text = 0, number = 0;
    for (;;) {
        p = tf_skip_blanks(sx, p);
        const uint8_t *cb, *ce;
        int flags;
        p = tf_field(sx, p, &cb, &ce, &flags, err);
        if (!p) return -1;
        if (nf < max_fields) {
            spans[3 * nf] = cb - data;
            spans[3 * nf + 1] = ce - data;
            spans[3 * nf + 2] = flags;
        }
        if (!(flags & (TF_F_NUMBER | TF_F_EMPTY))) numeric = 0, text = 1;
        if (flags & TF_F_NUMBER) number = 1;
        nf++;
        if (tf_next_field(sx, &p)) continue;
        break;
    }
    if (p < sx->end) {
        if (*p == sx->comment) {
            const uint8_t *e = tf_find4(sx, p, sx->end, '\n', '\r', '\n', '\n');
            const uint8_t *bad = tf_utf8_bad(p, e);
            if (bad) return tf_fail(err, *bad ? TF_PE_UTF8 : TF_PE_NUL, sx, bad, p, e, 0, 0);
            p = e;
        }
        if (p < sx->end) p = tf_after_eol(sx, p);
    }
    info[1] = p - data;
    info[2] = nf;
    info[3] = numeric;
    info[4] = text;
    info[5] = number;
    return 0;
}

typedef struct {
    tf_syntax sx;
    int64_t start, skiplines, max_fields;
    int64_t *spans;
    int64_t info[6];
    tf_perr err;
    int rc;
} tf_record_job;

static void tf_record_run(void *arg) {
    tf_record_job *job = (tf_record_job *)arg;
    job->rc = tf_first_record(&job->sx, job->start, job->skiplines, job->spans, job->max_fields, job->info, &job->err);
}

int tf_parse_record(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter, int comment,
                    int64_t *spans, int64_t max_fields, int64_t *info, int64_t *errinfo) {
    static const char fname[] = "tf_parse_record";
    int rc = tf_check_syntax(fname, data, n, delimiter, comment);
    if (rc) return rc;
    if (start < 0 || start > n || skiplines < 0 || max_fields < 0)
        return tf_error(TF_EINVAL, "%s: invalid start=%lld, skiplines=%lld or max_fields=%lld", fname,
                        (long long)start, (long long)skiplines, (long long)max_fields);
    tf_record_job job;
    tf_syntax_init(&job.sx, data, n, delimiter, comment);
    job.start = start;
    job.skiplines = skiplines;
    job.spans = spans;
    job.max_fields = max_fields;
    int64_t fault = tf_guarded(data, data + n, tf_record_run, &job);
    if (fault >= 0) return tf_changed_error(fname, fault);
    if (job.rc < 0) return tf_report(&job.sx, &job.err, errinfo, fname);
    memcpy(info, job.info, 4 * sizeof *info);
    return TF_OK;
}

/* ======================================================================== */
/* parallel driver                                                          */
/* ======================================================================== */

#define TF_REPORT_S 0.03 /* report progress at most every 30 ms */

/* Units (chunks) run on the thread runtime (runtime.c): handed out on demand, the
 * calling thread works too and is the only one that reports progress; while it
 * reports, the other threads wait at their next tf_runner_stopped() or unit. */
typedef struct tf_runner tf_runner;
struct tf_runner {
    int64_t nunits;
    int64_t stop_after; /* atomic: units above this index are not started */
    int64_t done_bytes; /* atomic */
    int64_t total_bytes;
    int cancel; /* atomic */
    tf_report_fn fn;
    void *handle;
    tf_rt *rt; /* the run, while units run */
    void (*work)(tf_runner *r, int64_t unit, int is_caller);
    void (*after)(tf_runner *r); /* run on the calling thread after each of its units */
    void *ctx;
};

/* Calling thread only: report progress (rate-limited unless forced); a non-zero
 * answer cancels the run. After the run only a forced report is made. */
static void tf_runner_report(tf_runner *r, int64_t extra, int force) {
    if (!r->fn) return;
    int64_t done = __atomic_load_n(&r->done_bytes, __ATOMIC_RELAXED) + extra;
    if (done > r->total_bytes) done = r->total_bytes;
    int stop = r->rt ? tf_rt_report(r->rt, done, force) : force && r->fn(r->handle, done, r->total_bytes) != 0;
    if (stop) __atomic_store_n(&r->cancel, 1, __ATOMIC_RELAXED);
}

/* Also a quiescent point: a thread waits here while the caller reports. */
static inline int tf_runner_stopped(tf_runner *r, int64_t unit) {
    return __atomic_load_n(&r->cancel, __ATOMIC_RELAXED) || (r->rt && tf_rt_checkpoint(r->rt)) ||
           unit > __atomic_load_n(&r->stop_after, __ATOMIC_RELAXED);
}

static void tf_runner_lower_stop(tf_runner *r, int64_t unit) {
    int64_t cur = __atomic_load_n(&r->stop_after, __ATOMIC_RELAXED);
    while (unit < cur &&
           !__atomic_compare_exchange_n(&r->stop_after, &cur, unit, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

static int tf_runner_unit(void *arg, int64_t u, int tid) {
    tf_runner *r = (tf_runner *)arg;
    if (__atomic_load_n(&r->cancel, __ATOMIC_RELAXED) || u > __atomic_load_n(&r->stop_after, __ATOMIC_RELAXED))
        return TF_OK;
    r->work(r, u, tid == 0);
    if (tid == 0) {
        if (r->after) r->after(r);
        tf_runner_report(r, 0, 0);
    }
    return TF_OK;
}

static int64_t tf_runner_done(void *arg) {
    tf_runner *r = (tf_runner *)arg;
    int64_t done = __atomic_load_n(&r->done_bytes, __ATOMIC_RELAXED);
    return done > r->total_bytes ? r->total_bytes : done;
}

static int tf_runner_driver(tf_rt *rt, void *arg) {
    tf_runner *r = (tf_runner *)arg;
    r->rt = rt;
    int rc = tf_rt_phase(rt, r->nunits, tf_runner_unit, r);
    r->rt = NULL;
    return rc;
}

/* Run r->work over all units on up to nthreads threads (the calling thread is one). */
static void tf_runner_run(tf_runner *r, int nthreads) {
    if ((int64_t)nthreads > r->nunits) nthreads = (int)r->nunits;
    if (nthreads < 1) nthreads = 1;
    tf_rt_opts o = {.threads = nthreads, .fn = r->fn, .handle = r->handle, .done = tf_runner_done,
                    .done_ctx = r, .total = r->total_bytes, .interval = TF_REPORT_S};
    if (tf_rt_run(&o, tf_runner_driver, r) == TF_EINTERRUPTED) __atomic_store_n(&r->cancel, 1, __ATOMIC_RELAXED);
}

static void tf_runner_init(tf_runner *r, int64_t nunits, int64_t total_bytes, tf_report_fn fn, void *handle) {
    memset(r, 0, sizeof *r);
    r->nunits = nunits;
    r->stop_after = INT64_MAX;
    r->total_bytes = total_bytes;
    r->fn = fn;
    r->handle = handle;
}

/* ======================================================================== */
/* pass 1: count                                                            */
/* ======================================================================== */

typedef struct {
    tf_syntax sx;
    int64_t start, chunk_bytes, max_rows;
    int64_t *chunks; /* [nunits][4] */
    uint8_t *ready;  /* atomic per unit: 1 when the speculative count is written */
    int64_t cursor;  /* resolution (calling thread only): next unit to resolve */
    int64_t at;      /* resolved start of unit `cursor` */
    int64_t rows;    /* rows resolved so far */
    int stopped;     /* max_rows reached */
    int64_t fault;   /* atomic: offset of a fault in the input (the file shrank), or -1 */
} tf_count_ctx;

static int64_t tf_unit_from(const tf_count_ctx *c, int64_t u) {
    if (u == 0) return c->start;
    int64_t nominal = c->start + u * c->chunk_bytes;
    return tf_line_start_from(&c->sx, c->sx.data + nominal) - c->sx.data;
}

/* Fault in the pages of [p, p + n) in one system call instead of one trap per page
 * (memory-mapped files; a no-op for memory that is already mapped, and ignored where
 * the kernel does not know MADV_POPULATE_READ, Linux < 5.14). */
static void tf_prefault(const uint8_t *p, int64_t n) {
#if defined(__linux__) && defined(MADV_POPULATE_READ)
    if (n < (1 << 16)) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(page - 1);
    (void)madvise((void *)a, (size_t)((uintptr_t)(p + n) - a), MADV_POPULATE_READ);
#else
    (void)p;
    (void)n;
#endif
}

typedef struct {
    tf_runner *r;
    int64_t u;
} tf_unit_job;

/* A fault in the input stops every unit; the call then fails with TF_EIO. */
static void tf_note_fault(tf_runner *r, int64_t *fault, int64_t at) {
    int64_t cur = __atomic_load_n(fault, __ATOMIC_RELAXED);
    while ((cur < 0 || at < cur) && !__atomic_compare_exchange_n(fault, &cur, at, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    tf_runner_lower_stop(r, -1);
}

static void tf_count_unit(void *arg);

static void tf_count_work(tf_runner *r, int64_t u, int is_caller) {
    (void)is_caller;
    tf_count_ctx *c = (tf_count_ctx *)r->ctx;
    tf_unit_job job = {r, u};
    int64_t fault = tf_guarded(c->sx.data, c->sx.end, tf_count_unit, &job);
    if (fault >= 0) tf_note_fault(r, &c->fault, fault);
    __atomic_store_n(&c->ready[u], 1, __ATOMIC_RELEASE);
}

static void tf_count_unit(void *arg) {
    tf_runner *r = ((tf_unit_job *)arg)->r;
    int64_t u = ((tf_unit_job *)arg)->u;
    tf_count_ctx *c = (tf_count_ctx *)r->ctx;
    int64_t nominal = c->start + u * c->chunk_bytes, region_end = (int64_t)(c->sx.end - c->sx.data);
    tf_prefault(c->sx.data + nominal, (nominal + c->chunk_bytes < region_end ? nominal + c->chunk_bytes : region_end) - nominal);
    int64_t from = tf_unit_from(c, u);
    int64_t to = u + 1 < r->nunits ? tf_unit_from(c, u + 1) : region_end;
    int64_t rows = 0, next = from;
    if (from < to) next = tf_count_records(&c->sx, c->sx.data + from, c->sx.data + to, &rows) - c->sx.data;
    int64_t *ch = c->chunks + 4 * u;
    ch[0] = from;
    ch[1] = to;
    ch[2] = rows;
    ch[3] = next;
    __atomic_fetch_add(&r->done_bytes, to - from, __ATOMIC_RELAXED);
}

/* Turn the speculative count of unit `cursor` into {start, end, rows, first row}.
 * Calling thread only, in unit order. */
static void tf_count_resolve_one(tf_runner *r, tf_count_ctx *c) {
    int64_t u = c->cursor++;
    int64_t *ch = c->chunks + 4 * u;
    if (c->stopped) {
        ch[0] = ch[1] = c->at;
        ch[2] = 0;
        ch[3] = c->rows;
        return;
    }
    int64_t from = ch[0], to = ch[1], rows, next;
    if (c->at == from) {
        rows = ch[2];
        next = ch[3];
    } else if (c->at >= to) { /* the unit lies inside a record that began earlier */
        rows = 0;
        next = c->at;
    } else { /* its first line is inside a quoted field: recount from the real start */
        next = tf_count_records(&c->sx, c->sx.data + c->at, c->sx.data + to, &rows) - c->sx.data;
    }
    int64_t end = next;
    if (c->max_rows >= 0 && c->rows + rows >= c->max_rows) {
        rows = c->max_rows - c->rows;
        end = -1; /* pass 2 stops after its rows: nothing after them is read */
        c->stopped = 1;
        tf_runner_lower_stop(r, u);
    }
    ch[0] = c->at;
    ch[1] = end;
    ch[2] = rows;
    ch[3] = c->rows;
    c->rows += rows;
    c->at = next;
}

static void tf_count_resolve_ready(void *arg) {
    tf_runner *r = (tf_runner *)arg;
    tf_count_ctx *c = (tf_count_ctx *)r->ctx;
    while (c->cursor < r->nunits && __atomic_load_n(&c->ready[c->cursor], __ATOMIC_ACQUIRE))
        tf_count_resolve_one(r, c);
}

/* After the run: every unit left (those not started after max_rows are empty). */
static void tf_count_resolve_rest(void *arg) {
    tf_runner *r = (tf_runner *)arg;
    tf_count_ctx *c = (tf_count_ctx *)r->ctx;
    while (c->cursor < r->nunits) tf_count_resolve_one(r, c);
}

static void tf_count_after(tf_runner *r) {
    tf_count_ctx *c = (tf_count_ctx *)r->ctx;
    if (__atomic_load_n(&c->fault, __ATOMIC_RELAXED) >= 0) return;
    int64_t fault = tf_guarded(c->sx.data, c->sx.end, tf_count_resolve_ready, r);
    if (fault >= 0) tf_note_fault(r, &c->fault, fault);
}

int tf_parse_count(const uint8_t *data, int64_t n, int64_t start, int delimiter, int comment, int64_t chunk_bytes,
                   int64_t max_rows, int nthreads, int64_t *chunks, int64_t nchunks, int64_t *total_rows,
                   int (*fn)(void *handle, int64_t done, int64_t total), void *handle) {
    static const char fname[] = "tf_parse_count";
    int rc = tf_check_syntax(fname, data, n, delimiter, comment);
    if (rc) return rc;
    if (start < 0 || start > n || chunk_bytes < 1)
        return tf_error(TF_EINVAL, "%s: invalid start=%lld or chunk_bytes=%lld", fname, (long long)start,
                        (long long)chunk_bytes);
    int64_t region = n - start;
    int64_t want = region > 0 ? (region - 1) / chunk_bytes + 1 : 1;
    if (nchunks != want)
        return tf_error(TF_ESHAPE, "%s: nchunks=%lld, but %lld bytes in chunks of %lld make %lld", fname,
                        (long long)nchunks, (long long)region, (long long)chunk_bytes, (long long)want);
    tf_count_ctx c;
    memset(&c, 0, sizeof c);
    tf_syntax_init(&c.sx, data, n, delimiter, comment);
    c.start = start;
    c.chunk_bytes = chunk_bytes;
    c.max_rows = max_rows;
    c.chunks = chunks;
    c.at = start;
    c.fault = -1;
    c.ready = calloc((size_t)nchunks, 1);
    if (!c.ready) return tf_error(TF_ENOMEM, "%s: out of memory for %lld chunks", fname, (long long)nchunks);
    tf_runner r;
    tf_runner_init(&r, nchunks, region, fn, handle);
    r.work = tf_count_work;
    r.after = tf_count_after;
    r.ctx = &c;
    if (max_rows == 0) {
        c.stopped = 1;
        r.stop_after = -1;
    }
    tf_runner_run(&r, nthreads);
    int cancelled = __atomic_load_n(&r.cancel, __ATOMIC_RELAXED);
    if (!cancelled && c.fault < 0) {
        for (int64_t u = c.cursor; u < nchunks; u++) {
            if (!c.stopped && !__atomic_load_n(&c.ready[u], __ATOMIC_ACQUIRE)) {
                free(c.ready);
                return tf_error(TF_EINTERNAL, "%s: chunk %lld was never counted", fname, (long long)u);
            }
        }
        int64_t fault = tf_guarded(data, data + n, tf_count_resolve_rest, &r);
        if (fault >= 0) c.fault = fault;
    }
    free(c.ready);
    if (c.fault >= 0) return tf_changed_error(fname, c.fault);
    if (cancelled) return tf_error(TF_EINTERRUPTED, "%s: interrupted", fname);
    *total_rows = c.rows;
    return TF_OK;
}

/* ======================================================================== */
/* pass 2: fill                                                             */
/* ======================================================================== */

typedef struct {
    tf_syntax sx;
    const int64_t *chunks;
    const int64_t *colmap;
    int64_t ncols_in, cols;
    void *out;
    tf_val missing;
    int fill;      /* 0: a missing field is an error (an integer type without a `missing` fill) */
    tf_perr *errs; /* one per chunk */
    /* Single pass (one chunk whose row count is -1: tf_parse_small, streams): stop
     * after `limit` rows (-1: none), never write more than `cap` values. found[0] =
     * rows written, found[1] = where the next record's line starts (relative to
     * data); after an error, the failing row and the start of its record's line. */
    int64_t limit, cap;
    int64_t *found;
    int64_t fault; /* atomic: offset of a fault in the input (the file shrank), or -1 */
} tf_fill_ctx;

/* Count the fields of the record whose field `nf` starts at p (for the error message). */
static int64_t tf_count_fields(const tf_syntax *sx, const uint8_t *p, int64_t nf) {
    tf_perr ignore;
    for (;;) {
        const uint8_t *cb, *ce;
        int flags;
        p = tf_field(sx, tf_skip_blanks(sx, p), &cb, &ce, &flags, &ignore);
        nf++;
        if (!p || !tf_next_field(sx, &p)) return nf;
    }
}

/* The error for the token at fs (field j, 0-based) that is not a number of type dt. */
__attribute__((noinline, cold)) static int tf_fail_field(const tf_syntax *sx, const uint8_t *fs, int64_t j, int dt,
                                                         tf_perr *err) {
    const uint8_t *te = tf_token_end(sx, fs);
    const uint8_t *quote = memchr(fs, '"', (size_t)(te - fs));
    if (quote) return tf_fail(err, TF_PE_QUOTE_INSIDE, sx, quote, fs, te, 0, 0);
    while (te > fs && tf_blank(sx, te[-1])) te--;
    return tf_fail_token(err, sx, fs, te, j + 1, dt);
}

/* The error for a missing field j (0-based) of the record at rec, in an integer
 * column without a fill: [tb, te) is its NA word, or empty (then the error is at the
 * field's start, before its blanks). */
__attribute__((noinline, cold)) static int tf_fail_missing(const tf_syntax *sx, const uint8_t *rec,
                                                           const uint8_t *tb, const uint8_t *te, int64_t j, int dt,
                                                           tf_perr *err) {
    const uint8_t *at = tb;
    if (tb == te)
        while (at > rec && at[-1] != (uint8_t)sx->delim) at--;
    return tf_fail(err, TF_PE_MISSING, sx, at, tb, te, j + 1, dt == TF_DT_I32 ? 32 : 64);
}

/* The error for a record (starting at rec) with `found` fields instead of `want`. */
__attribute__((noinline, cold)) static int tf_fail_fields(const tf_syntax *sx, const uint8_t *rec, int64_t found,
                                                          int64_t want, tf_perr *err) {
    const uint8_t *re;
    if (sx->ws) { /* the line, to its end or comment, less its trailing blanks */
        re = tf_find4(sx, rec, sx->end, '\n', '\r', sx->cm, '\n');
        int k;
        while ((k = tf_ws_before(rec, re)) > 0) re -= k;
    } else {
        re = tf_token_end(sx, rec);
        while (re < sx->end && *re == sx->delim) re = tf_token_end(sx, re + 1);
    }
    return tf_fail(err, TF_PE_FIELDS, sx, rec, rec, re, found, want);
}

/* The field at fs (field j, 0-based, of the record at rec) that the plain reader could not read: under the
 * options (an NA word, a decimal comma...) or between Unicode blanks, its value (or
 * `missing`) in *v and the byte after it (a delimiter, line end, comment or the
 * end); else the error, and NULL. */
__attribute__((noinline, cold)) static const uint8_t *tf_rescue(const tf_fill_ctx *fc, const uint8_t *rec,
                                                                const uint8_t *fs, int64_t j, int dt, tf_val *v,
                                                                tf_perr *err) {
    const tf_syntax *sx = &fc->sx;
    const uint8_t *te = tf_token_end(sx, fs);
    int r = memchr(fs, '"', (size_t)(te - fs)) ? -1 : tf_value_x(sx, fs, te, dt, v);
    if (r < 0) {
        /* a record (starting at rec) with the wrong number of fields says so first */
        int64_t nf = tf_utf8_bad(fs, te) ? fc->ncols_in : tf_count_fields(sx, rec, 0);
        if (nf != fc->ncols_in) tf_fail_fields(sx, rec, nf, fc->ncols_in, err);
        else tf_fail_field(sx, fs, j, dt, err);
        return NULL;
    }
    if (r == 0) {
        if (TF_IS_INT(dt) && !fc->fill) {
            const uint8_t *t = te;
            while (t > fs && tf_blank(sx, t[-1])) t--;
            tf_fail_missing(sx, rec, fs, t, j, dt, err);
            return NULL;
        }
        *v = fc->missing;
    }
    return te;
}

/* The unusual fields: skipped columns (col < 0) and quoted fields. Stores the value of
 * a quoted number. Returns the byte after the field's trailing blanks, NULL on error. */
__attribute__((noinline)) static const uint8_t *tf_fill_field_slow(const tf_fill_ctx *fc, const uint8_t *rec,
                                                                   const uint8_t *p, int64_t j,
                                                                   int64_t col, int64_t index, int dt, tf_perr *err) {
    const tf_syntax *sx = &fc->sx;
    if (col < 0) {
        const uint8_t *cb, *ce;
        int flags;
        return tf_field(sx, p, &cb, &ce, &flags, err);
    }
    if (p >= sx->end || *p != '"') { /* the options' general reader: every field */
        tf_val v;
        p = tf_rescue(fc, rec, p, j, dt, &v, err);
        if (p) tf_store(fc->out, index, dt, v);
        return p;
    }
    const uint8_t *fs = p;
    const uint8_t *close = tf_quote_close(sx, p + 1);
    if (!close) {
        tf_fail(err, TF_PE_UNTERMINATED, sx, fs, fs, sx->end, 0, 0);
        return NULL;
    }
    const uint8_t *s = tf_skip_blanks(sx, p + 1), *t = close - 1;
    while (t > s && tf_blank(sx, t[-1])) t--;
    tf_val v = fc->missing;
    if (s == t && TF_IS_INT(dt) && !fc->fill) {
        tf_fail_missing(sx, rec, fs, close, j, dt, err);
        return NULL;
    }
    if (s != t) {
        tf_num num;
        if (!sx->x && !TF_IS_INT(dt) && tf_scan_number(s, t, &num) == t) {
            switch (dt) {
            case TF_DT_F32: v.f = tf_num_f32(&num); break;
            case TF_DT_F64: v.d = tf_num_f64(&num); break;
            case TF_DT_F16: v.h = tf_num_narrow(&num, 10, 5); break;
            default: v.h = tf_num_narrow(&num, 7, 8); break;
            }
        } else {
            int r = tf_value_x(sx, s, t, dt, &v);
            if (r < 0) {
                tf_fail_token(err, sx, fs, close, j + 1, dt);
                return NULL;
            }
            if (r == 0) {
                if (TF_IS_INT(dt) && !fc->fill) {
                    tf_fail_missing(sx, rec, fs, close, j, dt, err);
                    return NULL;
                }
                v = fc->missing;
            }
        }
    }
    tf_store(fc->out, index, dt, v);
    p = sx->ws ? close : tf_skip_blanks(sx, close);
    if (!tf_field_ends_at(sx, p)) {
        tf_fail(err, TF_PE_AFTER_QUOTE, sx, p, fs, tf_token_end(sx, p), 0, 0);
        return NULL;
    }
    return p;
}

/* A comment after the last field at p: check it; returns the next line's start. */
__attribute__((noinline, cold)) static const uint8_t *tf_trailing_comment(const tf_syntax *sx, const uint8_t *p,
                                                                          tf_perr *err) {
    const uint8_t *e = tf_find4(sx, p, sx->end, '\n', '\r', '\n', '\n');
    const uint8_t *bad = tf_utf8_bad(p, e);
    if (bad) {
        tf_fail(err, *bad ? TF_PE_UTF8 : TF_PE_NUL, sx, bad, p, e, 0, 0);
        return NULL;
    }
    return e < sx->end ? tf_after_eol(sx, e) : e;
}

typedef struct {
    tf_runner *r;
    int64_t u;
    int is_caller, bad;
} tf_fill_job;

/* The field loop, compiled once per SIMD level (parse_fill.h). */
#define TF_FILL_SFX base
#define TF_FILL_TARGET
#include "parse_fill.h"
#if TF_X86
#define TF_FILL_SFX avx2
#define TF_FILL_TARGET TF_TARGET_AVX2
#define TF_FILL_FIELD tf_field_avx2
#define TF_FILL_IFIELD tf_ivalue_avx2
#include "parse_fill.h"
#endif

/* `missing` as type dt: *v, and *fill = 0 if an integer type has no fill (the flag
 * `fill` is 0: a missing field is then an error). TF_EINVAL for an int32 fill out of
 * range. Floats always fill (NaN by default). */
static int tf_int_missing(const char *fname, int dt, int64_t missing, int fill, tf_val *v, int *fill_out) {
    memset(v, 0, sizeof *v);
    *fill_out = fill != 0;
    if (!fill) return TF_OK;
    if (dt == TF_DT_I32) {
        if (missing < INT32_MIN || missing > INT32_MAX)
            return tf_error(TF_EINVAL, "%s: missing=%lld is out of range for int32", fname, (long long)missing);
        v->i32 = (int32_t)missing;
    } else {
        v->i64 = missing;
    }
    return TF_OK;
}

static int tf_fill(const char *fname, int dt, const uint8_t *data, int64_t n, int delimiter, int comment,
                   const int64_t *chunks, int64_t nchunks, const int64_t *colmap, int64_t ncols_in, void *out,
                   int64_t rows, int64_t cols, tf_val missing, int fill, int nthreads, int64_t *errinfo,
                   tf_report_fn fn, void *handle, const uint8_t *opts, int64_t nopts) {
    int rc = tf_check_syntax(fname, data, n, delimiter, comment);
    if (rc) return rc;
    tf_xopts x;
    if (opts && (rc = tf_xopts_init(fname, &x, opts, nopts, delimiter, comment))) return rc;
    if (nchunks < 1 || ncols_in < 0 || rows < 0 || cols < 0)
        return tf_error(TF_EINVAL, "%s: invalid sizes (nchunks=%lld, ncols_in=%lld, rows=%lld, cols=%lld)", fname,
                        (long long)nchunks, (long long)ncols_in, (long long)rows, (long long)cols);
    /* Chunks come from tf_parse_count; check them anyway, C trusts no one with memory. */
    int64_t next_row = 0, prev_end = 0, total = 0;
    for (int64_t u = 0; u < nchunks; u++) {
        const int64_t *ch = chunks + 4 * u;
        if (ch[0] < prev_end || ch[0] > n || ch[1] > n || (ch[1] >= 0 && ch[1] < ch[0]) || ch[2] < 0 ||
            ch[3] != next_row)
            return tf_error(TF_EINVAL, "%s: chunk %lld {%lld, %lld, %lld, %lld} is inconsistent", fname, (long long)u,
                            (long long)ch[0], (long long)ch[1], (long long)ch[2], (long long)ch[3]);
        next_row += ch[2];
        prev_end = ch[1] >= 0 ? ch[1] : ch[0];
        total += (ch[1] >= 0 ? ch[1] : ch[0]) - ch[0];
    }
    if (next_row != rows)
        return tf_error(TF_ESHAPE, "%s: the chunks hold %lld rows, out has %lld", fname, (long long)next_row,
                        (long long)rows);
    int64_t used = 0;
    for (int64_t j = 0; j < ncols_in; j++) {
        if (colmap[j] < -1 || colmap[j] >= cols)
            return tf_error(TF_EINVAL, "%s: colmap[%lld] = %lld is not in [-1, %lld)", fname, (long long)j,
                            (long long)colmap[j], (long long)cols);
        used += colmap[j] >= 0;
    }
    if (used != cols && rows > 0)
        return tf_error(TF_EINVAL, "%s: colmap fills %lld of the %lld output columns", fname, (long long)used,
                        (long long)cols);
    tf_fill_ctx fc;
    memset(&fc, 0, sizeof fc);
    tf_syntax_init(&fc.sx, data, n, delimiter, comment);
    if (opts) fc.sx.x = &x;
    fc.chunks = chunks;
    fc.colmap = colmap;
    fc.ncols_in = ncols_in;
    fc.cols = cols;
    fc.out = out;
    fc.missing = missing;
    fc.fill = fill;
    fc.fault = -1;
    fc.errs = calloc((size_t)nchunks, sizeof *fc.errs);
    if (!fc.errs) return tf_error(TF_ENOMEM, "%s: out of memory for %lld chunks", fname, (long long)nchunks);
    tf_runner r;
    tf_runner_init(&r, nchunks, total, fn, handle);
    /* Pass 2 runs the AVX2 field reader at AVX2 and above (see tf_parse_simd). */
#define TF_WORKS(ws, sfx)                                                                                        \
    {{tf_fill_work_##ws##f32_##sfx, tf_fill_work_##ws##f64_##sfx, tf_fill_work_##ws##f16_##sfx,                   \
      tf_fill_work_##ws##bf16_##sfx, tf_fill_work_##ws##i32_##sfx, tf_fill_work_##ws##i64_##sfx},                 \
     {tf_fill_work_x_##ws##f32_##sfx, tf_fill_work_x_##ws##f64_##sfx, tf_fill_work_x_##ws##f16_##sfx,             \
      tf_fill_work_x_##ws##bf16_##sfx, tf_fill_work_x_##ws##i32_##sfx, tf_fill_work_x_##ws##i64_##sfx}}
    static void (*const works[2][2][6])(tf_runner *, int64_t, int) = {
        TF_WORKS(, base),
#if TF_X86
        TF_WORKS(, avx2),
#else
        TF_WORKS(, base),
#endif
    };
    /* The same, fields separated by runs of white space (TF_DELIM_WHITESPACE). */
    static void (*const works_ws[2][2][6])(tf_runner *, int64_t, int) = {
        TF_WORKS(ws_, base),
#if TF_X86
        TF_WORKS(ws_, avx2),
#else
        TF_WORKS(ws_, base),
#endif
    };
#undef TF_WORKS
    r.work = (fc.sx.ws ? works_ws : works)[fc.sx.simd >= TF_SIMD_AVX2][opts && x.general][dt];
    r.ctx = &fc;
    tf_runner_run(&r, nthreads);
    int64_t bad = __atomic_load_n(&r.stop_after, __ATOMIC_RELAXED);
    if (fc.fault >= 0) rc = tf_changed_error(fname, fc.fault);
    else if (__atomic_load_n(&r.cancel, __ATOMIC_RELAXED)) rc = tf_error(TF_EINTERRUPTED, "%s: interrupted", fname);
    else if (bad < nchunks) rc = tf_report(&fc.sx, &fc.errs[bad], errinfo, fname);
    else {
        tf_runner_report(&r, 0, 1);
        rc = TF_OK;
    }
    free(fc.errs);
    return rc;
}

#define TF_FILL_API(name, xname, dt, T)                                                                             \
    int name(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks, int64_t nchunks,      \
             const int64_t *colmap, int64_t ncols_in, T *out, int64_t rows, int64_t cols, double missing,           \
             int nthreads, int64_t *errinfo, int (*fn)(void *handle, int64_t done, int64_t total), void *handle) {  \
        return tf_fill(#name, dt, data, n, delimiter, comment, chunks, nchunks, colmap, ncols_in, out, rows, cols,   \
                       tf_missing_value(missing, dt), 1, nthreads, errinfo, fn, handle, NULL, 0);                    \
    }                                                                                                                 \
    int xname(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks, int64_t nchunks,     \
              const int64_t *colmap, int64_t ncols_in, T *out, int64_t rows, int64_t cols, double missing,          \
              int nthreads, int64_t *errinfo, int (*fn)(void *handle, int64_t done, int64_t total), void *handle, \
              const uint8_t *opts, int64_t nopts) {                                                                  \
        if (!opts) return tf_error(TF_EINVAL, "%s: opts is NULL", #xname);                                          \
        return tf_fill(#xname, dt, data, n, delimiter, comment, chunks, nchunks, colmap, ncols_in, out, rows, cols,  \
                       tf_missing_value(missing, dt), 1, nthreads, errinfo, fn, handle, opts, nopts);                \
    }
TF_FILL_API(tf_parse_fill_f32, tf_parse_fill_x_f32, TF_DT_F32, float)
TF_FILL_API(tf_parse_fill_f64, tf_parse_fill_x_f64, TF_DT_F64, double)
TF_FILL_API(tf_parse_fill_f16, tf_parse_fill_x_f16, TF_DT_F16, uint16_t)
TF_FILL_API(tf_parse_fill_bf16, tf_parse_fill_x_bf16, TF_DT_BF16, uint16_t)

/* The integer kernels: `missing` is an integer of the type, used where `fill` is 1. */
#define TF_FILL_API_INT(name, xname, dt, T)                                                                         \
    int name(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks, int64_t nchunks,      \
             const int64_t *colmap, int64_t ncols_in, T *out, int64_t rows, int64_t cols, int64_t missing, int fill, \
             int nthreads, int64_t *errinfo, int (*fn)(void *handle, int64_t done, int64_t total), void *handle) {  \
        tf_val v;                                                                                                     \
        int rc = tf_int_missing(#name, dt, missing, fill, &v, &fill);                                                 \
        if (rc) return rc;                                                                                            \
        return tf_fill(#name, dt, data, n, delimiter, comment, chunks, nchunks, colmap, ncols_in, out, rows, cols,   \
                       v, fill, nthreads, errinfo, fn, handle, NULL, 0);                                             \
    }                                                                                                                 \
    int xname(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks, int64_t nchunks,     \
              const int64_t *colmap, int64_t ncols_in, T *out, int64_t rows, int64_t cols, int64_t missing,         \
              int fill, int nthreads, int64_t *errinfo, int (*fn)(void *handle, int64_t done, int64_t total),      \
              void *handle, const uint8_t *opts, int64_t nopts) {                                                    \
        if (!opts) return tf_error(TF_EINVAL, "%s: opts is NULL", #xname);                                          \
        tf_val v;                                                                                                     \
        int rc = tf_int_missing(#xname, dt, missing, fill, &v, &fill);                                                \
        if (rc) return rc;                                                                                            \
        return tf_fill(#xname, dt, data, n, delimiter, comment, chunks, nchunks, colmap, ncols_in, out, rows, cols,  \
                       v, fill, nthreads, errinfo, fn, handle, opts, nopts);                                         \
    }
TF_FILL_API_INT(tf_parse_fill_i32, tf_parse_fill_x_i32, TF_DT_I32, int32_t)
TF_FILL_API_INT(tf_parse_fill_i64, tf_parse_fill_x_i64, TF_DT_I64, int64_t)

/* ======================================================================== */
/* small inputs: one call                                                   */
/* ======================================================================== */

typedef struct {
    tf_fill_ctx fc;
    int dt, header, fill;
    int64_t start, skiplines, max_rows, cap, max_fields;
    tf_val missing;
    void *out;
    int64_t *spans, *info, *colmap;
    tf_perr err;
    int rc; /* 0 ok, 1 parse error in err, 2 out too small, 3 out of memory */
} tf_small_job;

static void tf_small_run(void *arg) {
    tf_small_job *job = (tf_small_job *)arg;
    tf_fill_ctx *fc = &job->fc;
    int64_t *info = job->info, rec[6];
    const int64_t n = fc->sx.end - fc->sx.data;
    if (tf_first_record(&fc->sx, job->start, job->skiplines, job->spans, job->max_fields, rec, &job->err) < 0) {
        job->rc = 1;
        return;
    }
    int64_t nf = rec[2];
    int is_header = rec[0] >= 0 && (job->header == 1 || (job->header == 2 && rec[4] && !rec[5]));
    info[0] = 0;         /* rows */
    info[1] = nf;        /* columns */
    info[2] = is_header; /* the first record was the header */
    info[3] = rec[0];    /* start of the first record (-1: none) */
    info[4] = is_header ? rec[1] : rec[0] >= 0 ? rec[0] : n; /* start of the data */
    if (rec[0] < 0) return;
    /* Each field but the last is followed by its own delimiter or line end: no more
     * fields than bytes + 1, so Python sizes `out` at (n - data start + 1) values. */
    int64_t region = n - info[4];
    if (job->cap < region + 1 && !(job->max_rows >= 0 && job->cap >= job->max_rows * nf)) {
        job->rc = 2;
        return;
    }
    job->colmap = malloc((size_t)(nf > 0 ? nf : 1) * sizeof *job->colmap);
    if (!job->colmap) {
        job->rc = 3;
        return;
    }
    for (int64_t j = 0; j < nf; j++) job->colmap[j] = j;
    int64_t chunk[4] = {info[4], n, -1, 0}, found[2] = {0, 0};
    fc->chunks = chunk;
    fc->colmap = job->colmap;
    fc->ncols_in = fc->cols = nf;
    fc->out = job->out;
    fc->missing = job->missing;
    fc->fill = job->fill;
    fc->errs = &job->err;
    fc->limit = job->max_rows;
    fc->cap = job->cap;
    fc->found = found;
    fc->fault = -1;
    tf_runner r; /* not run: tf_fill_chunk reads its cancellation state */
    tf_runner_init(&r, 1, region, NULL, NULL);
    r.ctx = fc;
#if TF_X86
    int bad = fc->sx.simd >= TF_SIMD_AVX2 ? tf_fill_single_avx2(&r, fc, job->dt, &job->err)
                                          : tf_fill_single_base(&r, fc, job->dt, &job->err);
#else
    int bad = tf_fill_single_base(&r, fc, job->dt, &job->err);
#endif
    if (bad) {
        job->rc = 1;
        return;
    }
    info[0] = found[0];
}

static int tf_small(const char *fname, int dt, const uint8_t *data, int64_t n, int64_t start, int64_t skiplines,
                    int delimiter, int comment, int header, int64_t max_rows, tf_val missing, int fill, void *out,
                    int64_t cap, int64_t *meta, int64_t nmeta, const uint8_t *opts, int64_t nopts) {
    int rc = tf_check_syntax(fname, data, n, delimiter, comment);
    if (rc) return rc;
    tf_xopts x;
    if (opts && (rc = tf_xopts_init(fname, &x, opts, nopts, delimiter, comment))) return rc;
    if (start < 0 || start > n || skiplines < 0 || nmeta < 10 || header < 0 || header > 2 || cap < 0)
        return tf_error(TF_EINVAL, "%s: invalid start=%lld, skiplines=%lld, nmeta=%lld, header=%d or cap=%lld", fname,
                        (long long)start, (long long)skiplines, (long long)nmeta, header, (long long)cap);
    int64_t *info = meta, *errinfo = meta + 5, *spans = meta + 10, max_fields = (nmeta - 10) / 3;
    tf_small_job job;
    memset(&job, 0, sizeof job);
    tf_syntax_init(&job.fc.sx, data, n, delimiter, comment);
    if (opts) job.fc.sx.x = &x;
    job.dt = dt;
    job.start = start;
    job.skiplines = skiplines;
    job.header = header;
    job.max_rows = max_rows;
    job.missing = missing;
    job.fill = fill;
    job.out = out;
    job.cap = cap;
    job.spans = spans;
    job.max_fields = max_fields;
    job.info = info;
    int64_t fault = tf_guarded(data, data + n, tf_small_run, &job);
    free(job.colmap);
    if (fault >= 0) return tf_changed_error(fname, fault);
    if (job.rc == 1) return tf_report(&job.fc.sx, &job.err, errinfo, fname);
    if (job.rc == 2)
        return tf_error(TF_ESHAPE, "%s: out holds %lld values, %lld bytes of data need %lld", fname, (long long)cap,
                        (long long)(n - info[4]), (long long)(n - info[4] + 1));
    if (job.rc == 3) return tf_error(TF_ENOMEM, "%s: out of memory for %lld columns", fname, (long long)info[1]);
    return TF_OK;
}

#define TF_SMALL(name, xname, dt, T)                                                                                  \
    int name(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter, int comment, int header, \
             int64_t max_rows, double missing, T *out, int64_t cap, int64_t *meta, int64_t nmeta) {                   \
        return tf_small(#name, dt, data, n, start, skiplines, delimiter, comment, header, max_rows,                   \
                        tf_missing_value(missing, dt), 1, out, cap, meta, nmeta, NULL, 0);                            \
    }                                                                                                                  \
    int xname(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter, int comment,            \
              int header, int64_t max_rows, double missing, T *out, int64_t cap, int64_t *meta, int64_t nmeta,         \
              const uint8_t *opts, int64_t nopts) {                                                                    \
        if (!opts) return tf_error(TF_EINVAL, "%s: opts is NULL", #xname);                                           \
        return tf_small(#xname, dt, data, n, start, skiplines, delimiter, comment, header, max_rows,                  \
                        tf_missing_value(missing, dt), 1, out, cap, meta, nmeta, opts, nopts);                        \
    }
TF_SMALL(tf_parse_small_f32, tf_parse_small_x_f32, TF_DT_F32, float)
TF_SMALL(tf_parse_small_f64, tf_parse_small_x_f64, TF_DT_F64, double)
TF_SMALL(tf_parse_small_f16, tf_parse_small_x_f16, TF_DT_F16, uint16_t)
TF_SMALL(tf_parse_small_bf16, tf_parse_small_x_bf16, TF_DT_BF16, uint16_t)

#define TF_SMALL_INT(name, xname, dt, T)                                                                              \
    int name(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter, int comment, int header, \
             int64_t max_rows, int64_t missing, int fill, T *out, int64_t cap, int64_t *meta, int64_t nmeta) {        \
        tf_val v;                                                                                                      \
        int rc = tf_int_missing(#name, dt, missing, fill, &v, &fill);                                                  \
        if (rc) return rc;                                                                                             \
        return tf_small(#name, dt, data, n, start, skiplines, delimiter, comment, header, max_rows, v, fill, out, cap, \
                        meta, nmeta, NULL, 0);                                                                        \
    }                                                                                                                  \
    int xname(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter, int comment,            \
              int header, int64_t max_rows, int64_t missing, int fill, T *out, int64_t cap, int64_t *meta,             \
              int64_t nmeta, const uint8_t *opts, int64_t nopts) {                                                     \
        if (!opts) return tf_error(TF_EINVAL, "%s: opts is NULL", #xname);                                           \
        tf_val v;                                                                                                      \
        int rc = tf_int_missing(#xname, dt, missing, fill, &v, &fill);                                                 \
        if (rc) return rc;                                                                                             \
        return tf_small(#xname, dt, data, n, start, skiplines, delimiter, comment, header, max_rows, v, fill, out,     \
                        cap, meta, nmeta, opts, nopts);                                                               \
    }
TF_SMALL_INT(tf_parse_small_i32, tf_parse_small_x_i32, TF_DT_I32, int32_t)
TF_SMALL_INT(tf_parse_small_i64, tf_parse_small_x_i64, TF_DT_I64, int64_t)

/* Streams (tensorffi.io.iter_csv) and record boundaries for readers of file ranges. */
#include "parse_stream.h"
