/* SPDX-License-Identifier: MIT */
/* parse_syntax.c — the CSV syntax, apart from numbers: the reader options, records
 * (pass 1's record ends and its vector counters, quote-aware), fields (the generic
 * tokenizer of headers, skipped columns and errors; blank and comment lines), UTF-8
 * checks, the first record (header spans, skiplines), and the error reports (line,
 * column and text of the first error, computed under the guard). */
#define _GNU_SOURCE
#define TF_INTERNAL
#include "parse_internal.h"
#include "parse_number.h"

/* Check and read the options string (see tf_xopts); the strings stay the caller's. */
int tf_xopts_init(const char *fname, tf_xopts *x, const uint8_t *opts, int64_t nopts, int delimiter,
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
/* The vector record counters' state (tf_count_simple_avx2 and _avx512): the records
 * counted, the start of the first line not counted, and what the last block carries
 * into the next (its last byte: content, blank, '\r'). */
typedef struct {
    const uint8_t *start, *line;
    int64_t rows;
    uint64_t prev_content, prev_blank, prev_cr;
} tf_count_state;

/* One 64-byte block at p, given as masks of its line feeds, carriage returns and
 * blanks (bit i: byte i), whatever the vector width that made them: counts the records
 * that end in it and moves st->line past its last terminator. 0 where the block needs
 * the scalar loop (a blank right before a line end, outside TF_DELIM_WHITESPACE). */
static inline __attribute__((always_inline)) int tf_count_block(const tf_syntax *sx, tf_count_state *st,
                                                               const uint8_t *p, uint64_t nl, uint64_t cr,
                                                               uint64_t blank) {
    uint64_t content = ~(nl | cr | blank);
    uint64_t ends = cr | (nl & ~((cr << 1) | st->prev_cr)); /* first byte of each terminator */
    uint64_t unsure = ends & ((blank << 1) | st->prev_blank);
    if (unsure) {
        if (!sx->ws) return 0;
        for (uint64_t u = unsure; u; u &= u - 1) st->rows += tf_ws_line_has_content(st->start, p + __builtin_ctzll(u));
        st->rows += __builtin_popcountll(ends & ~unsure & ((content << 1) | st->prev_content));
    } else {
        st->rows += __builtin_popcountll(ends & ((content << 1) | st->prev_content));
    }
    if (ends) {
        int last = 63 - __builtin_clzll(ends);
        const uint8_t *t = p + last;
        st->line = t + 1;
        if (*t == '\r' && st->line < sx->end && *st->line == '\n') st->line++;
    }
    st->prev_content = content >> 63;
    st->prev_blank = blank >> 63;
    st->prev_cr = cr >> 63;
    return 1;
}

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
    tf_count_state st = {p, p, 0, 0, 0, 0};
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
        if (!tf_count_block(sx, &st, p, nl, cr, blank)) break;
        p += 64;
    }
    /* Records whose terminator came after st.line are recounted by the caller. */
    *rows = st.rows;
    return st.line;
}
#endif

#if TF_X86
/* tf_count_simple_avx2 with one 64-byte register and mask compares. */
TF_TARGET_AVX512 static const uint8_t *tf_count_simple_avx512(const tf_syntax *sx, const uint8_t *p, const uint8_t *to,
                                                              int64_t *rows) {
    tf_count_state st = {p, p, 0, 0, 0, 0};
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
        if (!tf_count_block(sx, &st, p, nl, cr, blank)) break;
        p += 64;
    }
    *rows = st.rows;
    return st.line;
}
#endif

/* Count the records starting in [from, to); returns the start of the first line
 * after them (>= to, beyond it when the last record spans lines). */
const uint8_t *tf_count_records(const tf_syntax *sx, const uint8_t *p, const uint8_t *to, int64_t *rows) {
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
const uint8_t *tf_utf8_bad(const uint8_t *p, const uint8_t *e) {
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

int tf_fail(tf_perr *err, int kind, const tf_syntax *sx, const uint8_t *at, const uint8_t *tb,
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
int tf_fail_token(tf_perr *err, const tf_syntax *sx, const uint8_t *tb, const uint8_t *te, int64_t field,
                         int dt) {
    const uint8_t *bad = tf_utf8_bad(tb, te);
    if (bad) return tf_fail(err, *bad ? TF_PE_UTF8 : TF_PE_NUL, sx, bad, tb, te, 0, 0);
    if (TF_IS_INT(dt)) return tf_fail(err, tf_int_error(sx, tb, te), sx, tb, tb, te, field, dt == TF_DT_I32 ? 32 : 64);
    return tf_fail(err, TF_PE_NUMBER, sx, tb, tb, te, field, 0);
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

int tf_report(const tf_syntax *sx, const tf_perr *err, int64_t *errinfo, const char *fname) {
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


/* Tokenize the field at p (blanks skipped already). On success sets [*cb, *ce) to its
 * content, *flags, and returns the byte after the field's trailing blanks (a delimiter,
 * line end, comment or the end; under TF_DELIM_WHITESPACE, the byte after the field:
 * white space, a line end, comment or the end); on failure fills err and returns NULL.
 * tf_next_field goes on from there. */
const uint8_t *tf_field(const tf_syntax *sx, const uint8_t *p, const uint8_t **cb, const uint8_t **ce,
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
int tf_noise_line(const tf_syntax *sx, const uint8_t *p, const uint8_t **next, tf_perr *err) {
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
 * needs VBMI and VBMI2 too, keeping the first AVX-512 CPUs, whose clock drops under
 * 512-bit work, on AVX2) pass 1 counts records in 64-byte registers with mask
 * compares, about 12% faster than AVX2 on Zen 4, and pass 2's field reader is the AVX2
 * one (32-byte vectors) with its digits gathered by VBMI2 compress and expand instead
 * of a shuffle whose index counts the gaps: as fast on plain numbers, and with
 * thousands separators 0.92-0.95x of the plain path instead of 0.77-0.80x on Zen 4
 * (benchmarks/RESULTS.md). A field reader in 64-byte registers (mask compares, one
 * vpermb for the shuffle) was measured before: as fast as the AVX2 one at best, 1.7x
 * slower in the build the package ships (-fwrapv, which Python adds, changed gcc's
 * register allocation of the loop). TENSORFFI_SIMD=avx2 selects the AVX2 kernels
 * throughout. */
int tf_parse_simd(void) {
    int level = tf_simd_level();
#if TF_X86
    if (level >= TF_SIMD_AVX2 &&
        !(__builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt")))
        level = TF_SIMD_SCALAR;
    if (level == TF_SIMD_AVX512 && !(__builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2")))
        level = TF_SIMD_AVX2;
#else
    level = TF_SIMD_SCALAR;
#endif
    return level;
}

void tf_syntax_init(tf_syntax *sx, const uint8_t *data, int64_t n, int delimiter, int comment) {
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


int tf_check_syntax(const char *fname, const uint8_t *data, int64_t n, int delimiter, int comment) {
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
int tf_first_record(const tf_syntax *sx, int64_t start, int64_t skiplines, int64_t *spans, int64_t max_fields,
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
