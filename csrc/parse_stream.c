/* SPDX-License-Identifier: MIT */
/* parse_stream.c — streaming CSV (tensorffi.io.iter_csv): the tokenizer and the error
 * reports of parse_syntax.c, and the single-pass field loop of parse.c (parse_fill.h).
 *
 * A tf_parse_stream is a parser that outlives the call: Python feeds it byte blocks in
 * order (tf_parse_stream_feed copies them into a buffer the stream owns), and asks for
 * rows (tf_parse_stream_next_*), which are parsed from the buffer into an output chunk
 * that Python allocated. The buffer holds the bytes not yet consumed: at most the
 * record being read plus one block, since Python feeds only when the stream has no
 * whole record left. Records are parsed exactly as tf_parse_small parses them (the
 * same single pass of the field loop), over a window of the buffer that ends where
 * whole lines end:
 *
 *   - the window ends after the last '\n' of the buffer, or after the last '\r' that
 *     is not its last byte (a final '\r' may be the first half of "\r\n"); at the end
 *     of the input, at its end. A number, a line end or a UTF-8 sequence is therefore
 *     never cut; records that span lines (quoted fields) can be, and are detected: the
 *     field loop reports the quote as never closed, and the stream keeps the rows
 *     before that record and waits for more input instead (at the end of the input the
 *     error stands). A record with too many fields is checked the same way, since the
 *     count of its fields (for the message) reads its quoted fields;
 *   - errors carry the same line, column and byte offset as read_csv on the same bytes:
 *     the stream knows the offset of its buffer in the input, and counts the line ends
 *     of what it consumes (one vector pass over bytes still in cache);
 *   - an incomplete record may not grow beyond max_record bytes: a quote that is never
 *     closed would otherwise make the stream buffer the rest of its input. Over the
 *     limit it is a TF_EPARSE at the quote (or at the start of an endless line).
 *
 * tf_parse_bounds cuts a file's data region between readers at record boundaries, the
 * way pass 1 (tf_parse_count) resolves its chunks: quote-aware, from the data start.
 */
#define _GNU_SOURCE
#define TF_INTERNAL
#include "parse_internal.h"
#include "parse_number.h"

#define TF_STREAM_MIN_CAP (64 << 10)
#define TF_STREAM_SHRINK (8 << 20) /* above this, a buffer grown for a long record shrinks back */

struct tf_parse_stream {
    uint8_t *buf;       /* owned by the stream: [0, len) held, [pos, len) not consumed */
    int64_t len, cap, pos;
    int64_t peak_cap;   /* the largest capacity so far (reported, for tests and benchmarks) */
    int64_t base;       /* offset of buf[0] in the input */
    int64_t line;       /* physical line of buf[pos] (1-based) */
    int64_t skiplines;  /* physical lines still to skip before the first record */
    int64_t max_record; /* bytes an incomplete record may take */
    int64_t *colmap;    /* owned copy (tf_parse_stream_begin); NULL before */
    int64_t ncols_in, cols;
    int delim, comment;
    int eof;      /* the last block was fed */
    int bom_done; /* the byte order mark at the start of the input is settled */
    int begun;    /* tf_parse_stream_begin was called: rows may be read */
    uint8_t *xbuf; /* owned copy of the reader options (tf_parse_stream_options); NULL: none */
    tf_xopts x;
};

/* ------------------------------------------------------------------------ */
/* line ends                                                                */
/* ------------------------------------------------------------------------ */

/* Line ends in [p, e): every '\n', and every '\r' that no '\n' follows inside [p, e)
 * (callers end ranges at line starts, never between "\r" and "\n"). */
static int64_t tf_count_lines_swar(const uint8_t *p, const uint8_t *e) {
    int64_t lines = 0;
#if TF_SWAR
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7Full;
    while (e - p >= 9) {
        uint64_t v = tf_load8(p), w = tf_load8(p + 1);
        uint64_t x = v ^ 0x0A0A0A0A0A0A0A0Aull, y = v ^ 0x0D0D0D0D0D0D0D0Dull, z = w ^ 0x0A0A0A0A0A0A0A0Aull;
        /* exact: the high bit of each byte that is zero */
        uint64_t nl = ~(((x & low7) + low7) | x | low7);
        uint64_t cr = ~(((y & low7) + low7) | y | low7);
        uint64_t nl1 = ~(((z & low7) + low7) | z | low7);
        lines += __builtin_popcountll(nl) + __builtin_popcountll(cr & ~nl1);
        p += 8;
    }
#endif
    for (; p < e; p++) lines += *p == '\n' || (*p == '\r' && !(p + 1 < e && p[1] == '\n'));
    return lines;
}

#if TF_X86
TF_TARGET_AVX2 static int64_t tf_count_lines_avx2(const uint8_t *p, const uint8_t *e) {
    int64_t lines = 0;
    const __m256i vnl = _mm256_set1_epi8('\n'), vcr = _mm256_set1_epi8('\r');
    while (e - p >= 33) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)p), w = _mm256_loadu_si256((const __m256i *)(p + 1));
        const uint32_t nl = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, vnl));
        const uint32_t cr = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, vcr));
        const uint32_t nl1 = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(w, vnl));
        lines += _mm_popcnt_u32(nl) + _mm_popcnt_u32(cr & ~nl1);
        p += 32;
    }
    return lines + tf_count_lines_swar(p, e);
}
#endif

static int64_t tf_count_lines(int simd, const uint8_t *p, const uint8_t *e) {
#if TF_X86
    if (simd >= TF_SIMD_AVX2) return tf_count_lines_avx2(p, e);
#else
    (void)simd;
#endif
    return tf_count_lines_swar(p, e);
}

/* ------------------------------------------------------------------------ */
/* the stream's buffer                                                      */
/* ------------------------------------------------------------------------ */

/* The end (buffer index) of the whole lines from pos on; see the top of this file. */
static int64_t tf_stream_window(const tf_parse_stream *s) {
    if (s->eof) return s->len;
    const uint8_t *b = s->buf + s->pos;
    const int64_t n = s->len - s->pos;
    if (n <= 0) return s->pos;
    const uint8_t *nl = memrchr(b, '\n', (size_t)n);
    int64_t w = nl ? nl - s->buf + 1 : s->pos;
    /* a '\r' ending a line after it (CR line ends), not the last byte */
    const int64_t m = s->len - 1 - w;
    if (m > 0) {
        const uint8_t *cr = memrchr(s->buf + w, '\r', (size_t)m);
        if (cr) w = cr - s->buf + 1;
    }
    return w;
}

/* The syntax of the buffer [pos, end), with positions as offsets in the whole input. */
static void tf_stream_syntax(const tf_parse_stream *s, tf_syntax *sx, int64_t end) {
    tf_syntax_init(sx, s->buf + s->pos, end - s->pos, s->delim, s->comment);
    sx->origin = s->base + s->pos;
    sx->origin_line = s->line;
    if (s->xbuf) sx->x = &s->x;
}

/* Consume the buffer up to index `to` (a line start): its line ends are counted. */
static void tf_stream_consume(tf_parse_stream *s, int simd, int64_t to) {
    if (to > s->pos) s->line += tf_count_lines(simd, s->buf + s->pos, s->buf + to);
    s->pos = to;
}

/* The byte order mark at the start of the input: skipped once it can be seen. 0 while
 * fewer than three bytes have come (and more may come). */
static int tf_stream_bom(tf_parse_stream *s) {
    if (s->bom_done) return 1;
    if (s->len < 3 && !s->eof) return 0;
    if (s->len >= 3 && s->buf[0] == 0xEF && s->buf[1] == 0xBB && s->buf[2] == 0xBF) s->pos = 3;
    s->bom_done = 1;
    return 1;
}

/* An incomplete record (more input is needed) that already takes more than max_record
 * bytes: TF_EPARSE at the quote that keeps it open (quote: its buffer index), or at the
 * start of the unfinished line (quote < 0). 0 while within the limit. */
static int tf_stream_check_long(const tf_parse_stream *s, int64_t quote, int64_t *errinfo, const char *fname) {
    if (s->len - s->pos <= s->max_record) return 0;
    tf_syntax sx;
    tf_stream_syntax(s, &sx, s->len);
    const uint8_t *at = quote >= 0 ? s->buf + quote : sx.data;
    const uint8_t *te = at + 60 < sx.end ? at + 60 : sx.end;
    tf_perr err;
    tf_fail(&err, quote >= 0 ? TF_PE_LONG_QUOTE : TF_PE_LONG_LINE, &sx, at, at, te, s->max_record, 0);
    return tf_report(&sx, &err, errinfo, fname);
}

/* Skip the physical lines still to skip (whole lines only, checked for NUL bytes and
 * UTF-8 as tf_first_record checks them). 1 when done, 0 if more input is needed, or a
 * status. */
static int tf_stream_skip(tf_parse_stream *s, int64_t *errinfo, const char *fname) {
    if (s->skiplines == 0) return 1;
    const int64_t wend = tf_stream_window(s);
    tf_syntax sx;
    tf_stream_syntax(s, &sx, wend);
    const uint8_t *p = sx.data;
    while (s->skiplines > 0 && p < sx.end) {
        const uint8_t *e = tf_find4(&sx, p, sx.end, '\n', '\r', '\n', '\n');
        const uint8_t *bad = tf_utf8_bad(p, e);
        if (bad) {
            tf_perr err;
            tf_fail(&err, *bad ? TF_PE_UTF8 : TF_PE_NUL, &sx, bad, p, e, 0, 0);
            return tf_report(&sx, &err, errinfo, fname);
        }
        p = e < sx.end ? tf_after_eol(&sx, e) : e;
        s->skiplines--;
    }
    tf_stream_consume(s, sx.simd, p - s->buf);
    if (s->skiplines == 0 || s->eof) {
        s->skiplines = 0; /* the input ended first: nothing left to skip */
        return 1;
    }
    int rc = tf_stream_check_long(s, -1, errinfo, fname);
    return rc ? rc : 0;
}

/* ------------------------------------------------------------------------ */
/* the public functions                                                     */
/* ------------------------------------------------------------------------ */

int tf_parse_stream_open(int delimiter, int comment, int64_t skiplines, int64_t origin, int64_t origin_line,
                         int64_t max_record, tf_parse_stream **out) {
    static const char fname[] = "tf_parse_stream_open";
    if (!out) return tf_error(TF_EINVAL, "%s: out is NULL", fname);
    *out = NULL;
    int rc = tf_check_syntax(fname, NULL, 0, delimiter, comment);
    if (rc) return rc;
    if (skiplines < 0 || origin < 0 || origin_line < 1 || max_record < 1)
        return tf_error(TF_EINVAL, "%s: invalid skiplines=%lld, origin=%lld, origin_line=%lld or max_record=%lld",
                        fname, (long long)skiplines, (long long)origin, (long long)origin_line,
                        (long long)max_record);
    tf_parse_stream *s = calloc(1, sizeof *s);
    if (!s) return tf_error(TF_ENOMEM, "%s: out of memory", fname);
    s->cap = s->peak_cap = TF_STREAM_MIN_CAP;
    s->buf = malloc((size_t)s->cap);
    if (!s->buf) {
        free(s);
        return tf_error(TF_ENOMEM, "%s: out of memory for %lld bytes", fname, (long long)TF_STREAM_MIN_CAP);
    }
    s->base = origin;
    s->line = origin_line;
    s->skiplines = skiplines;
    s->max_record = max_record;
    s->delim = delimiter;
    s->comment = comment;
    s->bom_done = origin > 0; /* a byte order mark only begins the whole input */
    *out = s;
    return TF_OK;
}

int tf_parse_stream_options(tf_parse_stream *s, const uint8_t *opts, int64_t nopts) {
    static const char fname[] = "tf_parse_stream_options";
    if (!s || s->xbuf || s->begun || s->len > 0)
        return tf_error(TF_EINVAL, "%s: options are set once, before the first block", fname);
    tf_xopts x;
    int rc = tf_xopts_init(fname, &x, opts, nopts, s->delim, s->comment);
    if (rc) return rc;
    s->xbuf = malloc((size_t)nopts);
    if (!s->xbuf) return tf_error(TF_ENOMEM, "%s: out of memory", fname);
    memcpy(s->xbuf, opts, (size_t)nopts);
    rc = tf_xopts_init(fname, &s->x, s->xbuf, nopts, s->delim, s->comment);
    return rc;
}

void tf_parse_stream_close(tf_parse_stream *s) {
    if (!s) return;
    free(s->xbuf);
    free(s->colmap);
    free(s->buf);
    free(s);
}

int tf_parse_stream_feed(tf_parse_stream *s, const uint8_t *data, int64_t n, int eof) {
    static const char fname[] = "tf_parse_stream_feed";
    if (!s || n < 0 || (!data && n > 0)) return tf_error(TF_EINVAL, "%s: invalid arguments (n=%lld)", fname, (long long)n);
    if (s->eof) return tf_error(TF_EINVAL, "%s: bytes fed after the end of the input", fname);
    /* Drop what is consumed: the buffer keeps the unconsumed bytes only. */
    if (s->pos > 0) {
        memmove(s->buf, s->buf + s->pos, (size_t)(s->len - s->pos));
        s->base += s->pos;
        s->len -= s->pos;
        s->pos = 0;
    }
    if (s->cap > TF_STREAM_SHRINK && s->cap / 4 > s->len + n) { /* grown for a long record: shrink */
        int64_t cap = s->len + n > TF_STREAM_MIN_CAP ? s->len + n : TF_STREAM_MIN_CAP;
        cap = (cap + 4095) & ~(int64_t)4095;
        uint8_t *buf = realloc(s->buf, (size_t)cap);
        if (buf) {
            s->buf = buf;
            s->cap = cap;
        }
    }
    if (n > s->cap - s->len) {
        if (n > INT64_MAX / 2 - s->len) return tf_error(TF_ENOMEM, "%s: %lld bytes is too many", fname, (long long)n);
        int64_t want = s->len + n, grown = s->cap + s->cap / 4;
        int64_t cap = want > grown ? want : grown;
        cap = (cap + 4095) & ~(int64_t)4095;
        uint8_t *buf = realloc(s->buf, (size_t)cap);
        if (!buf) return tf_error(TF_ENOMEM, "%s: out of memory for %lld bytes", fname, (long long)cap);
        s->buf = buf;
        s->cap = cap;
        if (cap > s->peak_cap) s->peak_cap = cap;
    }
    if (n > 0) memcpy(s->buf + s->len, data, (size_t)n);
    s->len += n;
    s->eof = eof != 0;
    return TF_OK;
}

int tf_parse_stream_first(tf_parse_stream *s, int64_t *spans, int64_t max_fields, int64_t *info, int64_t *errinfo) {
    static const char fname[] = "tf_parse_stream_first";
    if (!s || max_fields < 0) return tf_error(TF_EINVAL, "%s: invalid arguments", fname);
    if (s->begun) return tf_error(TF_EINVAL, "%s: the data has begun already", fname);
    if (!tf_stream_bom(s)) return 0;
    int rc = tf_stream_skip(s, errinfo, fname);
    if (rc <= 0) return rc;
    const int64_t wend = tf_stream_window(s);
    tf_syntax sx;
    tf_stream_syntax(s, &sx, wend);
    int64_t rec[6];
    tf_perr err;
    if (tf_first_record(&sx, 0, 0, spans, max_fields, rec, &err) < 0) {
        if (err.kind == TF_PE_UNTERMINATED && !s->eof) {
            rc = tf_stream_check_long(s, err.at + s->pos, errinfo, fname);
            return rc ? rc : 0;
        }
        return tf_report(&sx, &err, errinfo, fname);
    }
    if (rec[0] < 0 && !s->eof) { /* only blank or comment lines so far */
        rc = tf_stream_check_long(s, -1, errinfo, fname);
        return rc ? rc : 0;
    }
    /* Offsets in the whole input. */
    const int64_t nf = rec[2] < max_fields ? rec[2] : max_fields;
    for (int64_t i = 0; i < nf; i++) {
        spans[3 * i] += sx.origin;
        spans[3 * i + 1] += sx.origin;
    }
    info[0] = rec[0] >= 0 ? rec[0] + sx.origin : -1;
    info[1] = rec[1] + sx.origin;
    for (int i = 2; i < 6; i++) info[i] = rec[i];
    return 1;
}

int tf_parse_stream_begin(tf_parse_stream *s, int64_t start, const int64_t *colmap, int64_t ncols_in, int64_t cols) {
    static const char fname[] = "tf_parse_stream_begin";
    if (!s || ncols_in < 0 || cols < 0 || (!colmap && ncols_in > 0))
        return tf_error(TF_EINVAL, "%s: invalid arguments (ncols_in=%lld, cols=%lld)", fname, (long long)ncols_in,
                        (long long)cols);
    if (s->begun) return tf_error(TF_EINVAL, "%s: the data has begun already", fname);
    if (s->skiplines > 0)
        return tf_error(TF_EINVAL, "%s: the lines to skip are not read yet (call tf_parse_stream_first)", fname);
    s->bom_done = 1; /* the caller chose where the data starts */
    if (start < s->base + s->pos || start > s->base + s->len)
        return tf_error(TF_EINVAL, "%s: start=%lld is not in the buffered bytes [%lld, %lld]", fname,
                        (long long)start, (long long)(s->base + s->pos), (long long)(s->base + s->len));
    int64_t used = 0;
    for (int64_t j = 0; j < ncols_in; j++) {
        if (colmap[j] < -1 || colmap[j] >= cols)
            return tf_error(TF_EINVAL, "%s: colmap[%lld] = %lld is not in [-1, %lld)", fname, (long long)j,
                            (long long)colmap[j], (long long)cols);
        used += colmap[j] >= 0;
    }
    if (used != cols)
        return tf_error(TF_EINVAL, "%s: colmap fills %lld of the %lld output columns", fname, (long long)used,
                        (long long)cols);
    s->colmap = malloc((size_t)(ncols_in > 0 ? ncols_in : 1) * sizeof *s->colmap);
    if (!s->colmap) return tf_error(TF_ENOMEM, "%s: out of memory for %lld columns", fname, (long long)ncols_in);
    if (ncols_in > 0) memcpy(s->colmap, colmap, (size_t)ncols_in * sizeof *colmap);
    s->ncols_in = ncols_in;
    s->cols = cols;
    tf_stream_consume(s, tf_parse_simd(), start - s->base);
    s->begun = 1;
    return TF_OK;
}

/* Parse up to `rows` records from the buffer into out (see tensorffi.h). */
static int64_t tf_stream_next(const char *fname, int dt, tf_parse_stream *s, void *out, int64_t rows, int64_t cols,
                              tf_val missing, int fill, int64_t *errinfo) {
    if (!s || rows < 0 || (!out && rows > 0 && cols > 0))
        return tf_error(TF_EINVAL, "%s: invalid arguments (rows=%lld)", fname, (long long)rows);
    if (!s->begun) return tf_error(TF_EINVAL, "%s: the data has not begun (call tf_parse_stream_begin)", fname);
    if (cols != s->cols)
        return tf_error(TF_ESHAPE, "%s: out has %lld columns, the stream makes %lld", fname, (long long)cols,
                        (long long)s->cols);
    if (rows == 0) return 0;
    const int64_t wend = tf_stream_window(s);
    if (wend <= s->pos) { /* no whole line buffered */
        int rc = s->eof ? 0 : tf_stream_check_long(s, -1, errinfo, fname);
        return rc ? rc : 0;
    }
    tf_fill_ctx fc;
    memset(&fc, 0, sizeof fc);
    tf_stream_syntax(s, &fc.sx, wend);
    int64_t chunk[4] = {0, wend - s->pos, -1, 0}, found[2] = {0, 0};
    tf_perr err;
    memset(&err, 0, sizeof err);
    fc.chunks = chunk;
    fc.colmap = s->colmap;
    fc.ncols_in = s->ncols_in;
    fc.cols = cols;
    fc.out = out;
    fc.missing = missing;
    fc.fill = fill;
    fc.errs = &err;
    fc.limit = rows;
    fc.cap = rows * cols;
    fc.found = found;
    fc.fault = -1;
    tf_runner r; /* not run: tf_fill_chunk reads its cancellation state */
    tf_runner_init(&r, 1, wend - s->pos, NULL, NULL);
    r.ctx = &fc;
    int bad = tf_fill_single(&r, &fc, dt, &err);
    if (bad) {
        /* A quote open at the window's end: the record goes on in input not read yet (a
         * record's other errors are named only once it is tokenized whole without one:
         * tf_fail_record). */
        if (s->eof || err.kind != TF_PE_UNTERMINATED) return tf_report(&fc.sx, &err, errinfo, fname); /* nothing is consumed */
        const uint8_t *quote = fc.sx.data + err.at;
        /* The record at found[1] is not whole yet: keep the rows before it. */
        const int64_t qi = quote - s->buf;
        tf_stream_consume(s, fc.sx.simd, s->pos + found[1]);
        int rc = tf_stream_check_long(s, qi, errinfo, fname);
        return rc ? rc : found[0];
    }
    tf_stream_consume(s, fc.sx.simd, s->pos + found[1]);
    if (found[0] == 0 && !s->eof) { /* a record that starts but does not end in the buffer */
        int rc = tf_stream_check_long(s, -1, errinfo, fname);
        if (rc) return rc;
    }
    return found[0];
}

#define TF_STREAM_NEXT(name, dt, T)                                                                                 \
    int64_t name(tf_parse_stream *s, T *out, int64_t rows, int64_t cols, double missing, int64_t *errinfo) {         \
        return tf_stream_next(#name, dt, s, out, rows, cols, tf_missing_value(missing, dt), 1, errinfo);             \
    }
TF_STREAM_NEXT(tf_parse_stream_next_f32, TF_DT_F32, float)
TF_STREAM_NEXT(tf_parse_stream_next_f64, TF_DT_F64, double)
TF_STREAM_NEXT(tf_parse_stream_next_f16, TF_DT_F16, uint16_t)
TF_STREAM_NEXT(tf_parse_stream_next_bf16, TF_DT_BF16, uint16_t)
#undef TF_STREAM_NEXT
#define TF_STREAM_NEXT_INT(name, dt, T)                                                                             \
    int64_t name(tf_parse_stream *s, T *out, int64_t rows, int64_t cols, int64_t missing, int fill,                  \
                 int64_t *errinfo) {                                                                                 \
        tf_val v;                                                                                                     \
        int rc = tf_int_missing(#name, dt, missing, fill, &v, &fill);                                                 \
        if (rc) return rc;                                                                                            \
        return tf_stream_next(#name, dt, s, out, rows, cols, v, fill, errinfo);                                      \
    }
TF_STREAM_NEXT_INT(tf_parse_stream_next_i32, TF_DT_I32, int32_t)
TF_STREAM_NEXT_INT(tf_parse_stream_next_i64, TF_DT_I64, int64_t)
#undef TF_STREAM_NEXT_INT

int tf_parse_stream_bytes(const tf_parse_stream *s, int64_t begin, uint8_t *out, int64_t n) {
    static const char fname[] = "tf_parse_stream_bytes";
    if (!s || n < 0 || (!out && n > 0)) return tf_error(TF_EINVAL, "%s: invalid arguments (n=%lld)", fname, (long long)n);
    if (begin < s->base || n > s->base + s->len - begin)
        return tf_error(TF_EINVAL, "%s: bytes [%lld, %lld) are not in the buffer [%lld, %lld)", fname,
                        (long long)begin, (long long)(begin + n), (long long)s->base, (long long)(s->base + s->len));
    if (n > 0) memcpy(out, s->buf + (begin - s->base), (size_t)n);
    return TF_OK;
}

int tf_parse_stream_info(const tf_parse_stream *s, int64_t *info) {
    if (!s) return tf_error(TF_EINVAL, "tf_parse_stream_info: no stream");
    info[0] = s->base + s->pos;
    info[1] = s->line;
    info[2] = s->len - s->pos;
    info[3] = s->cap;
    info[4] = s->eof;
    info[5] = s->peak_cap;
    return TF_OK;
}

/* ------------------------------------------------------------------------ */
/* record boundaries for readers of file ranges                             */
/* ------------------------------------------------------------------------ */

typedef struct {
    tf_syntax sx;
    int64_t start, k;
    const int64_t *offsets;
    int64_t *bounds, *rows, *lines;
} tf_bounds_job;

static void tf_bounds_run(void *arg) {
    tf_bounds_job *job = (tf_bounds_job *)arg;
    const tf_syntax *sx = &job->sx;
    const uint8_t *p = sx->data + job->start, *counted = sx->data;
    int64_t rows = 0, lines = 1;
    for (int64_t j = 0; j < job->k; j++) {
        const uint8_t *to = sx->data + job->offsets[j];
        if (p < to) {
            int64_t r = 0;
            p = tf_count_records(sx, p, to, &r);
            rows += r;
        }
        lines += tf_count_lines(sx->simd, counted, p);
        counted = p;
        job->bounds[j] = p - sx->data;
        job->rows[j] = rows;
        job->lines[j] = lines;
    }
}

int tf_parse_bounds(const uint8_t *data, int64_t n, int64_t start, int delimiter, int comment, const int64_t *offsets,
                    int64_t k, int64_t *bounds, int64_t *rows, int64_t *lines) {
    static const char fname[] = "tf_parse_bounds";
    int rc = tf_check_syntax(fname, data, n, delimiter, comment);
    if (rc) return rc;
    if (start < 0 || start > n || k < 0) return tf_error(TF_EINVAL, "%s: invalid start=%lld or k=%lld", fname,
                                                         (long long)start, (long long)k);
    for (int64_t j = 0; j < k; j++)
        if (offsets[j] < start || offsets[j] > n || (j > 0 && offsets[j] < offsets[j - 1]))
            return tf_error(TF_EINVAL, "%s: offsets[%lld] = %lld is not in [%lld, %lld] in order", fname, (long long)j,
                            (long long)offsets[j], (long long)start, (long long)n);
    tf_bounds_job job;
    tf_syntax_init(&job.sx, data, n, delimiter, comment);
    job.start = start;
    job.k = k;
    job.offsets = offsets;
    job.bounds = bounds;
    job.rows = rows;
    job.lines = lines;
    int64_t fault = tf_guarded(data, data + n, tf_bounds_run, &job);
    if (fault >= 0) return tf_changed_error(fname, fault);
    return TF_OK;
}

