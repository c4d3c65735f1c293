/* SPDX-License-Identifier: MIT */
/* parse_field.h — the vector reader of the common field, included by parse_number.h
 * once per SIMD level. Before each inclusion it defines these, all #undef'd at the end
 * (the convention of every template here, see parse_fill.h):
 *   TF_FIELD_SFX       the suffix of the functions defined here (tf_field_SFX,
 *                      tf_ivalue_SFX)
 *   TF_FIELD_TARGET    their target attribute
 *   TF_FIELD_COMPRESS  1: the digits are gathered with AVX-512 VBMI2 compress and
 *                      expand (two instructions, whatever the gaps); 0: with one AVX2
 *                      shuffle whose index counts the gaps before each digit
 * The rest (classification, length, checks, the terminator, the multiply-add chain)
 * is one text for both. */
#ifndef TF_FIELD_SFX
#error "parse_field.h is included by parse_number.h only"
#endif

#define TF_FIELD_CAT2(a, b) a##_##b
#define TF_FIELD_CAT(a, b) TF_FIELD_CAT2(a, b)
#define TF_FIELD_FN(name) TF_FIELD_CAT(name, TF_FIELD_SFX)

/* The common field, for CPUs with AVX2 (and BMI): [sign] digits [. digits] [exponent]
 * followed by the delimiter, "\n" or "\r\n". One 32-byte load classifies the field's
 * bytes; its length is the first byte that is neither a digit nor a '.' (nor a
 * leading sign), so the next field's address depends on one load and a few vector
 * operations, and the conversion of this one overlaps with the next. No branch
 * depends on how many digits a number has (real data mixes lengths from value to
 * value, and each misprediction costs more than a conversion): the digits are gathered
 * without the '.' (and separators), right-aligned in 32 lanes (TF_FIELD_COMPRESS), and
 * a multiply-add chain turns them into three eight-digit groups. Sets *w, *q, *neg and
 * *nl (the field ended its line) and returns the next field's start; NULL sends the
 * field to the general path (any other shape, more than 19 digits, or within 64 bytes
 * of the end of the input).
 * ws (a constant: TF_DELIM_WHITESPACE): the field ends with a run of spaces and tabs
 * instead of the delimiter, found in the same load (a mask and one tzcnt, no branch on
 * its length), and the next field starts after it; a run that reaches a line end ends
 * the line. Another byte after the run (a comment, a lone CR, another blank) is the
 * next field's start, for the general path to look at.
 * isint (a constant): an integer field, [sign] digits, with no decimal mark or
 * exponent (*q is 0). dec and th: the decimal mark and the thousands separator (-1:
 * none), constants ('.' and -1) on the plain path, where the separator's code folds
 * away; a separator stands between two digits before the decimal mark (as the
 * general reader tf_value_x wants) and the gather skips it as it skips the '.'. */
static inline __attribute__((always_inline)) TF_FIELD_TARGET const uint8_t *
TF_FIELD_FN(tf_field)(const uint8_t *p, const uint8_t *end, const uint8_t delim, const int ws, const int isint,
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
    /* The number's nd digits, right-aligned in 32 one-digit lanes (the others zero). */
#if TF_FIELD_COMPRESS
    /* AVX-512 VBMI2: compress the field's digit bytes to the bottom (the sign, the
     * mark and the separators drop out), expand them into the top nd lanes. */
    const __m256i dig = _mm256_maskz_expand_epi8((__mmask32)(~0u << (32 - nd)),
                                                 _mm256_maskz_compress_epi8((__mmask32)(dm & fm), t));
#else
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
#endif
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

/* The vector reader's integer field as type dt (tf_field with isint): *v, *nl and
 * the next field's start; NULL for anything else, a value out of range included (the
 * general path then says why; *nl is left alone). Without white space, at most 33
 * bytes are taken (the digits, then "\r\n"). */
static inline __attribute__((always_inline)) TF_FIELD_TARGET const uint8_t *
TF_FIELD_FN(tf_ivalue)(const uint8_t *p, const uint8_t *end, const uint8_t delim, const int ws, const int th,
                       const int dt, tf_val *v, int *nl_out) {
    uint64_t w;
    int64_t q;
    int neg, nl;
    const uint8_t *next = TF_FIELD_FN(tf_field)(p, end, delim, ws, 1, '.', th, &w, &q, &neg, &nl);
    if (__builtin_expect(next == NULL || !tf_int_value(w, neg, dt, v), 0)) return NULL;
    *nl_out = nl;
    return next;
}

#undef TF_FIELD_FN
#undef TF_FIELD_CAT
#undef TF_FIELD_CAT2
#undef TF_FIELD_SFX
#undef TF_FIELD_TARGET
#undef TF_FIELD_COMPRESS
