/* SPDX-License-Identifier: MIT */
/* parse.c — numeric CSV to tensors: correctly rounded, parallel, precise about errors.
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
 * truncated meanwhile) into TF_EIO (parse_guard.c).
 *
 * The units: parse_number.h (number conversion), parse_syntax.c (records, fields,
 * errors), parse_guard.c (inputs that shrink), parse.c (this file: the parallel
 * passes and small inputs; the field loop is parse_fill.h), parse_stream.c (iter_csv's
 * streams and CSVDataset's byte ranges); parse_internal.h holds what they share.
 */
#define _GNU_SOURCE
#define TF_INTERNAL
#include "parse_internal.h"
#include "parse_number.h"

/* ======================================================================== */
/* parallel driver                                                          */
/* ======================================================================== */

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

void tf_runner_init(tf_runner *r, int64_t nunits, int64_t total_bytes, tf_report_fn fn, void *handle) {
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
void tf_note_fault(tf_runner *r, int64_t *fault, int64_t at) {
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

/* The record at rec (`want` fields expected) has a value that is not of its column's
 * type, or too many fields: what to report, in the peers' order (pandas and NumPy
 * tokenize a record, count its fields, then convert them). Its first syntax error,
 * field by field as tf_field finds them (a quote error, a NUL byte or invalid UTF-8),
 * or one in its trailing comment; else a wrong number of fields. -1 with *err filled,
 * or 0 if neither: the caller reports the value. */
__attribute__((noinline, cold)) static int tf_fail_record(const tf_syntax *sx, const uint8_t *rec, int64_t want,
                                                          tf_perr *err) {
    const uint8_t *p = rec;
    int64_t nf = 0;
    do {
        const uint8_t *cb, *ce;
        int flags;
        p = tf_field(sx, tf_skip_blanks(sx, p), &cb, &ce, &flags, err);
        if (!p) return -1;
        nf++;
    } while (tf_next_field(sx, &p));
    if (p < sx->end && *p == sx->comment && !tf_trailing_comment(sx, p, err)) return -1;
    return nf == want ? 0 : tf_fail_fields(sx, rec, nf, want, err);
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
        if (!tf_fail_record(sx, rec, fc->ncols_in, err)) tf_fail_field(sx, fs, j, dt, err);
        return NULL;
    }
    if (r == 0) {
        if (TF_IS_INT(dt) && !fc->fill) {
            const uint8_t *t = te;
            while (t > fs && tf_blank(sx, t[-1])) t--;
            if (!tf_fail_record(sx, rec, fc->ncols_in, err)) tf_fail_missing(sx, rec, fs, t, j, dt, err);
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
        if (!tf_fail_record(sx, rec, fc->ncols_in, err)) tf_fail_missing(sx, rec, fs, close, j, dt, err);
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
                if (!tf_fail_record(sx, rec, fc->ncols_in, err)) tf_fail_token(err, sx, fs, close, j + 1, dt);
                return NULL;
            }
            if (r == 0) {
                if (TF_IS_INT(dt) && !fc->fill) {
                    if (!tf_fail_record(sx, rec, fc->ncols_in, err)) tf_fail_missing(sx, rec, fs, close, j, dt, err);
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

typedef struct {
    tf_runner *r;
    int64_t u;
    int is_caller, bad;
} tf_fill_job;

/* The field loop, compiled once per SIMD level (parse_fill.h), each with its vector
 * field reader (parse_field.h). */
#define TF_FILL_SFX base
#define TF_FILL_TARGET
#include "parse_fill.h"
#if TF_X86
#define TF_FILL_SFX avx2
#define TF_FILL_TARGET TF_TARGET_AVX2
#define TF_FILL_FIELD tf_field_avx2
#define TF_FILL_IFIELD tf_ivalue_avx2
#include "parse_fill.h"
#define TF_FILL_SFX avx512
#define TF_FILL_TARGET TF_TARGET_AVX512
#define TF_FILL_FIELD tf_field_avx512
#define TF_FILL_IFIELD tf_ivalue_avx512
#include "parse_fill.h"
#endif

int tf_fill_single(tf_runner *r, const tf_fill_ctx *fc, int dt, tf_perr *err) {
#if TF_X86
    if (fc->sx.simd >= TF_SIMD_AVX512) return tf_fill_single_avx512(r, fc, dt, err);
    if (fc->sx.simd >= TF_SIMD_AVX2) return tf_fill_single_avx2(r, fc, dt, err);
#endif
    return tf_fill_single_base(r, fc, dt, err);
}

/* `missing` as type dt: *v, and *fill = 0 if an integer type has no fill (the flag
 * `fill` is 0: a missing field is then an error). TF_EINVAL for an int32 fill out of
 * range. Floats always fill (NaN by default). */
int tf_int_missing(const char *fname, int dt, int64_t missing, int fill, tf_val *v, int *fill_out) {
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
    /* Pass 2's loop for the parser's SIMD level (tf_parse_simd), the kind of
     * delimiter, the reader options and dt. */
#define TF_WORKS(ws, sfx)                                                                                        \
    {{tf_fill_work_##ws##f32_##sfx, tf_fill_work_##ws##f64_##sfx, tf_fill_work_##ws##f16_##sfx,                   \
      tf_fill_work_##ws##bf16_##sfx, tf_fill_work_##ws##i32_##sfx, tf_fill_work_##ws##i64_##sfx},                 \
     {tf_fill_work_x_##ws##f32_##sfx, tf_fill_work_x_##ws##f64_##sfx, tf_fill_work_x_##ws##f16_##sfx,             \
      tf_fill_work_x_##ws##bf16_##sfx, tf_fill_work_x_##ws##i32_##sfx, tf_fill_work_x_##ws##i64_##sfx}}
#if TF_X86
#define TF_WORK_LEVELS(ws) {TF_WORKS(ws, base), TF_WORKS(ws, avx2), TF_WORKS(ws, avx512)}
#else
#define TF_WORK_LEVELS(ws) {TF_WORKS(ws, base), TF_WORKS(ws, base), TF_WORKS(ws, base)}
#endif
    static void (*const works[2][3][2][6])(tf_runner *, int64_t, int) = {TF_WORK_LEVELS(), TF_WORK_LEVELS(ws_)};
#undef TF_WORK_LEVELS
#undef TF_WORKS
    r.work = works[fc.sx.ws][fc.sx.simd][opts && x.general][dt];
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
    int bad = tf_fill_single(&r, fc, job->dt, &job->err);
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
