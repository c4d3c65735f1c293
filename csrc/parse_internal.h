/* SPDX-License-Identifier: MIT */
/* parse_internal.h — what the CSV parser's units share (parse_syntax.c, parse_guard.c,
 * parse.c, parse_stream.c), and nothing Python sees: the syntax of one input
 * (tf_syntax) and the reader options (tf_xopts), the byte scanners every pass inlines
 * (line ends, blanks, the next field), the error record (tf_perr), the parallel
 * runner and pass 2's context, and the functions one unit defines for another
 * (hidden: TF_LOCAL). The number conversion each field needs is parse_number.h.
 *
 * Each unit defines _GNU_SOURCE and TF_INTERNAL, then includes this header first. */
#ifndef TF_PARSE_INTERNAL_H
#define TF_PARSE_INTERNAL_H

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


/* A function one unit of the parser defines for another: not exported. */
#define TF_LOCAL __attribute__((visibility("hidden")))
/* A static function of a header that some units do not call (no -Wunused-function). */
#define TF_MAYBE_UNUSED __attribute__((unused))

typedef int (*tf_report_fn)(void *handle, int64_t done, int64_t total);

static inline int tf_is_digit(uint8_t c) { return (uint8_t)(c - '0') < 10; }

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TF_SWAR 1
static inline uint64_t tf_load8(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
#else
#define TF_SWAR 0
#endif

#if TF_X86
#define TF_TARGET_AVX2 __attribute__((target("avx2,bmi,bmi2,popcnt")))
#define TF_TARGET_AVX512 \
    __attribute__((target("avx2,bmi,bmi2,popcnt,avx512f,avx512vl,avx512bw,avx512vbmi,avx512vbmi2")))
#endif

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


/* The byte length of the blank at s (the white space Python's str.isspace knows, as
 * NumPy strips it around numbers: ASCII, U+0085, U+00A0, U+1680, U+2000-U+200A,
 * U+2028, U+2029, U+202F, U+205F, U+3000), or 0. */
static TF_MAYBE_UNUSED int tf_uspace_at(const uint8_t *s, const uint8_t *t) {
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
static TF_MAYBE_UNUSED int tf_uspace_before(const uint8_t *s, const uint8_t *t) {
    for (int k = 1; k <= 3 && t - k >= s; k++)
        if (tf_uspace_at(t - k, t) == k) return k;
    return 0;
}

static TF_MAYBE_UNUSED int tf_na_word(const tf_xopts *x, const uint8_t *s, const uint8_t *t) {
    const int64_t len = t - s;
    for (int64_t i = 0; i < x->nwords; i += 1 + x->words[i])
        if (x->words[i] == len && memcmp(x->words + i + 1, s, (size_t)len) == 0) return 1;
    return 0;
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
__attribute__((noinline, cold, unused)) static const uint8_t *tf_skip_ws_unicode(const tf_syntax *sx, const uint8_t *p) {
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


static inline uint64_t tf_has_byte(uint64_t v, uint8_t b) {
    uint64_t x = v ^ (0x0101010101010101ull * b);
    return (x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull;
}

/* First byte in [p, e) equal to a, b, c or d (or e). */
static TF_MAYBE_UNUSED const uint8_t *tf_find4_swar(const uint8_t *p, const uint8_t *e, uint8_t a, uint8_t b, uint8_t c,
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
static TF_MAYBE_UNUSED const uint8_t *tf_line_start_from(const tf_syntax *sx, const uint8_t *p) {
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


/* Under TF_DELIM_WHITESPACE, the end of an unquoted token at p: the next white space,
 * line end, comment or end (a byte loop: tokens are short, and this is the path of
 * headers, skipped columns and errors). */
static TF_MAYBE_UNUSED const uint8_t *tf_token_end_ws(const tf_syntax *sx, const uint8_t *p) {
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


enum { TF_F_QUOTED = 1, TF_F_ESCAPE = 2, TF_F_NUMBER = 4, TF_F_EMPTY = 8 }; /* tf_field's flags */

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


/* ---- defined in one unit, used in another ---------------------------------- */
/* parse_syntax.c */
TF_LOCAL int tf_xopts_init(const char *fname, tf_xopts *x, const uint8_t *opts, int64_t nopts, int delimiter,
                           int comment);
TF_LOCAL const uint8_t *tf_count_records(const tf_syntax *sx, const uint8_t *p, const uint8_t *to, int64_t *rows);
TF_LOCAL const uint8_t *tf_utf8_bad(const uint8_t *p, const uint8_t *e);
TF_LOCAL int tf_fail(tf_perr *err, int kind, const tf_syntax *sx, const uint8_t *at, const uint8_t *tb,
                     const uint8_t *te, int64_t a, int64_t b);
TF_LOCAL int tf_fail_token(tf_perr *err, const tf_syntax *sx, const uint8_t *tb, const uint8_t *te, int64_t field,
                           int dt);
TF_LOCAL int tf_report(const tf_syntax *sx, const tf_perr *err, int64_t *errinfo, const char *fname);
TF_LOCAL const uint8_t *tf_field(const tf_syntax *sx, const uint8_t *p, const uint8_t **cb, const uint8_t **ce,
                                 int *flags, tf_perr *err);
TF_LOCAL int tf_noise_line(const tf_syntax *sx, const uint8_t *p, const uint8_t **next, tf_perr *err);
TF_LOCAL void tf_syntax_init(tf_syntax *sx, const uint8_t *data, int64_t n, int delimiter, int comment);
TF_LOCAL int tf_check_syntax(const char *fname, const uint8_t *data, int64_t n, int delimiter, int comment);
TF_LOCAL int tf_first_record(const tf_syntax *sx, int64_t start, int64_t skiplines, int64_t *spans,
                             int64_t max_fields, int64_t *info, tf_perr *err);
/* parse_guard.c */
TF_LOCAL int64_t tf_guarded(const uint8_t *lo, const uint8_t *hi, void (*fn)(void *), void *arg);
TF_LOCAL int tf_changed_error(const char *fname, int64_t at);
/* parse.c */
TF_LOCAL void tf_runner_init(tf_runner *r, int64_t nunits, int64_t total_bytes, tf_report_fn fn, void *handle);
TF_LOCAL void tf_note_fault(tf_runner *r, int64_t *fault, int64_t at);
TF_LOCAL int tf_int_missing(const char *fname, int dt, int64_t missing, int fill, tf_val *v, int *fill_out);
/* One chunk's field loop on the caller's thread, at the parser's SIMD level. */
TF_LOCAL int tf_fill_single(tf_runner *r, const tf_fill_ctx *fc, int dt, tf_perr *err);

#endif /* TF_PARSE_INTERNAL_H */
