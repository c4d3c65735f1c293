/* SPDX-License-Identifier: MIT */
/* parse_number.h — number conversion: decimal text to float64, float32, float16,
 * bfloat16, int32 and int64, correctly rounded or exact (or refused). Static functions
 * in a header, so that each unit that includes it (parse.c, parse_syntax.c and
 * parse_stream.c, after parse_internal.h) has its own copy to inline from: the field
 * loop (parse_fill.h) inlines the hot path into one body per SIMD level, as it did
 * when all this was one file. They are `static TF_MAYBE_UNUSED`, not `static inline`:
 * `inline` made gcc inline more of the cold paths into the field loop, and cost 3-7%
 * on one thread (benchmarks/RESULTS.md, "parse.c by concern").
 *
 * Number conversion. The common field ([sign] digits [. digits] [exponent], then the
 * delimiter or a line end) is read, where the CPU has AVX2, by a vector reader
 * (tf_field_avx2): one 32-byte load classifies its bytes, the field's length is the
 * first byte that is neither digit nor '.', and one shuffle plus a multiply-add chain
 * turns up to 19 digits into w, with no branch on how many digits there are (real
 * data mixes lengths value by value; each misprediction cost more than a conversion).
 * Other fields, and every field on other CPUs, take a scalar scan into w (up to 19
 * significant digits) and q, value = w * 10^q (longer numbers, inf and nan are
 * re-scanned by a cold path into a tf_num that also remembers the digits). Then, per
 * output type:
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
 */
#ifndef TF_PARSE_NUMBER_H
#define TF_PARSE_NUMBER_H

#include "parse_pow5.h"

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


#if TF_SWAR
/* The value of eight ASCII digits, first digit in the lowest byte. */
static inline uint64_t tf_eight_value(uint64_t v) {
    const uint64_t mask = 0x000000FF000000FFull;
    const uint64_t mul1 = 0x000F424000000064ull; /* 100 + (1000000 << 32) */
    const uint64_t mul2 = 0x0000271000000001ull; /* 1 + (10000 << 32) */
    v -= 0x3030303030303030ull;
    v = (v * 10) + (v >> 8);
    return (((v & mask) * mul1) + (((v >> 16) & mask) * mul2)) >> 32;
}
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
static TF_MAYBE_UNUSED const uint8_t *tf_scan_special(const uint8_t *p, const uint8_t *end, int *special) {
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
__attribute__((noinline, cold, unused)) static void tf_num_truncate(tf_num *num) {
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
static TF_MAYBE_UNUSED const uint8_t *tf_scan_number(const uint8_t *p, const uint8_t *end, tf_num *num) {
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

static TF_MAYBE_UNUSED void tf_dec_trim(tf_dec *a) {
    while (a->nd > 0 && a->d[a->nd - 1] == 0) a->nd--;
    if (a->nd == 0) a->dp = 0;
}

/* a *= 2^k, k <= 60. */
static TF_MAYBE_UNUSED void tf_dec_lshift(tf_dec *a, unsigned k) {
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
static TF_MAYBE_UNUSED void tf_dec_rshift(tf_dec *a, unsigned k) {
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

static TF_MAYBE_UNUSED void tf_dec_shift(tf_dec *a, int k) {
    if (a->nd == 0) return;
    for (; k > 60; k -= 60) tf_dec_lshift(a, 60);
    for (; k < -60; k += 60) tf_dec_rshift(a, 60);
    if (k > 0) tf_dec_lshift(a, (unsigned)k);
    else if (k < 0) tf_dec_rshift(a, (unsigned)-k);
}

static TF_MAYBE_UNUSED int tf_dec_round_up(const tf_dec *a, int nd) {
    if (nd < 0 || nd >= a->nd) return 0;
    if (a->d[nd] == 5 && nd + 1 == a->nd) { /* exactly halfway, unless truncated */
        if (a->trunc) return 1;
        return nd > 0 && (a->d[nd - 1] & 1);
    }
    return a->d[nd] >= 5;
}

static TF_MAYBE_UNUSED uint64_t tf_dec_rounded_integer(const tf_dec *a) {
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
__attribute__((noinline, cold, unused)) static uint64_t tf_exact_bits(const tf_num *num, int mb, int eb, int bias) {
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

static TF_MAYBE_UNUSED double tf_num_f64(const tf_num *num) {
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

static TF_MAYBE_UNUSED float tf_num_f32(const tf_num *num) {
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
static TF_MAYBE_UNUSED uint16_t tf_num_narrow(const tf_num *num, int mb, int eb) {
    int tie;
    uint16_t h = tf_narrow(tf_num_f64(num), mb, eb, &tie);
    if (tie && !num->special) h = (uint16_t)tf_exact_bits(num, mb, eb, -((1 << (eb - 1)) - 1));
    return h;
}


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
__attribute__((noinline, cold, unused)) static int tf_int_long(const uint8_t *p, const uint8_t *e, uint64_t *w) {
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
static TF_MAYBE_UNUSED int tf_int_x(const uint8_t *s, const uint8_t *t, int th, int dt, tf_val *v) {
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
__attribute__((noinline, cold, unused)) static tf_val tf_value_cold(const uint8_t *tok, const uint8_t *end, int dt) {
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
/* The vector readers of the common field, once per SIMD level (parse_field.h). */
#define TF_FIELD_SFX avx2
#define TF_FIELD_TARGET TF_TARGET_AVX2
#define TF_FIELD_COMPRESS 0
#include "parse_field.h"
#define TF_FIELD_SFX avx512
#define TF_FIELD_TARGET TF_TARGET_AVX512
#define TF_FIELD_COMPRESS 1
#include "parse_field.h"
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
static TF_MAYBE_UNUSED const uint8_t *tf_value_hot_any(const uint8_t *p, const uint8_t *end, int dt, tf_val *v) {
    switch (dt) {
    case TF_DT_F32: return tf_value_hot(p, end, TF_DT_F32, v);
    case TF_DT_F64: return tf_value_hot(p, end, TF_DT_F64, v);
    case TF_DT_F16: return tf_value_hot(p, end, TF_DT_F16, v);
    default: return tf_value_hot(p, end, TF_DT_BF16, v);
    }
}

/* The float types' `missing` (integers have their own: tf_int_missing). */
static TF_MAYBE_UNUSED tf_val tf_missing_value(double missing, int dt) {
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


#define TF_XBUF 1024

/* The field [s, t) under the options (and without any: between Unicode blanks): 1 and
 * *v if it is a number, 0 if it is missing (empty or an NA word), -1 if neither. With
 * a decimal mark or thousands separator, a number of more than TF_XBUF bytes is not
 * read (no real number is that long). */
__attribute__((noinline, cold, unused)) static int tf_value_x(const tf_syntax *sx, const uint8_t *s, const uint8_t *t, int dt,
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


#endif /* TF_PARSE_NUMBER_H */
