/* SPDX-License-Identifier: MIT */
/* parse_fill.h — pass 2's field loop, included by parse.c once per SIMD level.
 *
 * Before each inclusion parse.c defines these, all #undef'd at the end of this file
 * (the convention of every template here: parse_fill.h, parse_field.h, signal_simd.h,
 * signal_transpose.h, physics_simd.h, physics_impl.h):
 *   TF_FILL_SFX      the suffix of the functions defined here
 *   TF_FILL_TARGET   their target attribute, or nothing
 *   TF_FILL_FIELD, TF_FILL_IFIELD  (optional) vector readers of the common float and
 *                    integer field, tried first
 * A header rather than a run-time switch: a function compiled for AVX2 can only inline
 * AVX2 helpers into a caller compiled for AVX2, and the hot loop must be one inlined
 * body. */
#ifndef TF_FILL_SFX
#error "parse_fill.h is included by parse.c only"
#endif

#define TF_FN_CAT2(a, b) a##_##b
#define TF_FN_CAT(a, b) TF_FN_CAT2(a, b)
#define TF_FN(name) TF_FN_CAT(name, TF_FILL_SFX)
#define TF_BLANK(c) (((c) == ' ' || (c) == '\t') && (c) != delim)

#ifdef TF_FILL_FIELD
/* The vector reader's field as type dt (a constant): *v, *nl and the next field's
 * start, or NULL (the general path reads the field; *nl is then left alone). dec and
 * th: the decimal mark and the thousands separator (-1: none), the constants '.' and
 * -1 on the plain path; with other options a field the vector reader cannot convert
 * exactly goes to the general path (the cold converter knows neither). */
static inline __attribute__((always_inline)) TF_FILL_TARGET const uint8_t *
TF_FN(tf_fill_vector)(const uint8_t *p, const uint8_t *E, const uint8_t delim, const int ws, const uint8_t dec,
                      const int th, const int dt, tf_val *v, int *nl) {
    if (TF_IS_INT(dt)) return TF_FILL_IFIELD(p, E, delim, ws, th, dt, v, nl);
    uint64_t w;
    int64_t q;
    int neg, n;
    const uint8_t *next = TF_FILL_FIELD(p, E, delim, ws, 0, dec, th, &w, &q, &neg, &n);
    if (__builtin_expect(next == NULL, 0)) return NULL;
    if (__builtin_expect(!tf_convert_simple(w, q, neg, dt, v), 0)) {
        if (dec != '.' || th >= 0) return NULL;
        *v = tf_value_cold(p, E, dt);
    }
    *nl = n;
    return next;
}
#endif

/* Parse the rows of one chunk. Returns 0, or -1 with *err filled. xo (a constant): the
 * reader options' general reader takes every field (tf_xopts); 0 is the plain loop.
 * ws (a constant): fields are separated by runs of white space (TF_DELIM_WHITESPACE):
 * then a field ends at white space, a line end or a comment; the white space after it
 * is skipped where the next field (or the end of the record) is looked for, at the top
 * of the field loop; there are no empty fields. */
static inline __attribute__((always_inline)) TF_FILL_TARGET int TF_FN(tf_fill_chunk)(tf_runner *r, const tf_fill_ctx *fc, int64_t u,
                                                              int is_caller, const int dt, const int xo,
                                                              const int ws, tf_perr *err) {
    const tf_syntax *sx = &fc->sx;
    const uint8_t *const E = sx->end;
    const int64_t *ch = fc->chunks + 4 * u;
    const uint8_t *const chunk_start = sx->data + ch[0];
    const uint8_t *p = chunk_start;
    const int64_t rows = ch[2], row0 = ch[3], ncols_in = fc->ncols_in, cols = fc->cols;
    const int64_t *const colmap = fc->colmap;
    const int delim = sx->delim, comment = sx->comment;
    void *const out = fc->out;
    const tf_val missing = fc->missing;
    const uint8_t *last_report = p;
    /* the general reader's fast field (xo): no NA word may look like a number */
    const uint8_t xdec = xo ? sx->x->decimal : (uint8_t)'.';
    const int xth = xo ? sx->x->thousands : -1, xfast = xo && !sx->x->numeric;
#ifdef TF_FILL_FIELD
    /* Where every field is kept in place (no usecols), colmap[j] == j. */
    int identity = 1;
    for (int64_t j = 0; j < ncols_in; j++) identity &= colmap[j] == j;
    /* The vector reader looks at most 64 bytes ahead. */
    const uint8_t *const safe_end = E - sx->data >= 64 ? E - 64 : sx->data;
    /* Integers: a field the vector reader takes is at most 33 bytes, so a record that
     * starts before int_end is read to its end without a check against safe_end per
     * field (with that check in it, gcc's integer loop was 20-40% slower, and slower
     * than the float loop on the same text: benchmarks/RESULTS.md). */
    const int64_t int_span = 33 * ncols_in;
    const uint8_t *const int_end = safe_end - sx->data >= int_span ? safe_end - int_span : sx->data;
#endif
    for (int64_t ri = 0; rows < 0 || ri < rows; ri++) {
        if (rows < 0) { /* single pass (tf_parse_small, streams): rows are found as they come */
            fc->found[0] = ri;
            fc->found[1] = p - sx->data;
            if (ri == fc->limit) break;
        }
        if ((ri & 1023) == 1023) {
            if (tf_runner_stopped(r, u)) return 0;
            if (is_caller && p - last_report > (1 << 20)) {
                tf_runner_report(r, p - chunk_start, 0);
                last_report = p;
            }
        }
        /* blank and comment lines before the record (usually none); under ws, the
         * blanks that begin a line (space-aligned columns) are skipped here first */
        if (ws) {
            const uint8_t *q = p < E && (*p == ' ' || *p == '\t') ? tf_skip_sp_tab(p, E) : p;
            if (__builtin_expect(q < E && *q > ' ' && *q < 0x80 && *q != comment, 1)) p = q;
        }
        if (__builtin_expect(p >= E || (ws ? *p <= ' ' || *p >= 0x80 : TF_BLANK(*p)) || *p == '\n' || *p == '\r' ||
                             *p == comment, 0)) {
            const uint8_t *q;
            int k;
            while ((k = tf_noise_line(sx, p, &q, err)) == 1) p = q;
            if (k == 2 && rows < 0) { /* the end of the input: all rows found */
                fc->found[0] = ri;
                fc->found[1] = q - sx->data;
                return 0;
            }
            if (k != 0) return k < 0 ? -1 : tf_fail(err, TF_PE_INTERNAL, sx, p, p, p, 0, 0);
            p = q;
        }
        /* A record starts here (checked only now: the end of the input may follow the
         * last record, whose row then must not be asked to fit). */
        if (rows < 0 && (row0 + ri + 1) * cols > fc->cap) return tf_fail(err, TF_PE_INTERNAL, sx, p, p, p, 0, 0);
        const uint8_t *const rec = p;
        const int64_t base = (row0 + ri) * cols;
        int64_t j = 0;
#ifdef TF_FILL_FIELD
        if (identity && (!xo || xfast) && (!TF_IS_INT(dt) || ws || p < int_end)) { /* the whole record with the vector reader, while it can */
            int nl = 0;
            while (j < ncols_in && ((TF_IS_INT(dt) && !ws) || p < safe_end)) {
                tf_val v;
                const uint8_t *next = TF_FN(tf_fill_vector)(p, E, (uint8_t)delim, ws, xdec, xth, dt, &v, &nl);
                if (__builtin_expect(next == NULL, 0)) break;
                tf_store(out, base + j, dt, v);
                p = next;
                j++;
                if (nl) break;
            }
            if (nl) {
                if (__builtin_expect(j != ncols_in, 0)) return tf_fail_fields(sx, rec, j, ncols_in, err);
                continue;
            }
        }
#endif
        for (;;) { /* one field */
            if (ws) { /* white space, then a field or the end of the record */
                if (__builtin_expect(!(p < E && *p > ' ' && *p < 0x80 && *p != comment), 0)) {
                    p = tf_skip_blanks(sx, p);
                    if (p == E) break;
                    const uint8_t c = *p;
                    if (c == '\n') {
                        p++;
                        break;
                    }
                    if (c == '\r') {
                        p = tf_after_eol(sx, p);
                        break;
                    }
                    if (c == comment) {
                        p = tf_trailing_comment(sx, p, err);
                        if (!p) return -1;
                        break;
                    }
                }
            }
#ifdef TF_FILL_FIELD
            if ((!xo || xfast) && __builtin_expect(E - p >= 64 && j < ncols_in, 1) && (identity || colmap[j] >= 0)) {
                tf_val v;
                int nl;
                const uint8_t *next = TF_FN(tf_fill_vector)(p, E, (uint8_t)delim, ws, xdec, xth, dt, &v, &nl);
                if (__builtin_expect(next != NULL, 1)) {
                    tf_store(out, base + (identity ? j : colmap[j]), dt, v);
                    p = next;
                    j++;
                    if (nl) break;
                    continue;
                }
            }
#endif
            if (!ws)
                while (p < E && TF_BLANK(*p)) p++;
            if (__builtin_expect(j >= ncols_in, 0)) /* too many fields, or a syntax error before that */
                return tf_fail_record(sx, rec, ncols_in, err) ? -1 : tf_fail(err, TF_PE_INTERNAL, sx, p, p, p, 0, 0);
            const int64_t col = colmap[j];
            if (xfast && col >= 0 && (p >= E || *p != '"')) {
                tf_val v;
                const uint8_t *e = tf_value_xfast(p, E, xdec, xth, dt, &v);
                if (e && (ws ? tf_field_ends_at(sx, e)
                             : e == E || *e == delim || *e == '\n' || *e == '\r' || *e == comment)) {
                    tf_store(out, base + col, dt, v);
                    p = e;
                    j++;
                    goto after_field;
                }
            }
            if (__builtin_expect(xo || col < 0 || (p < E && *p == '"'), 0)) {
                p = tf_fill_field_slow(fc, rec, p, j, col, base + col, dt, err);
                if (!p) return -1;
            } else {
                tf_val v;
                const uint8_t *e = tf_value_hot(p, E, dt, &v);
                if (__builtin_expect(e != NULL, 1)) {
                    p = e;
                    if (ws) {
                        if (__builtin_expect(p < E && (*p == ' ' || *p == '\t'), 1)) { /* the common case */
                            tf_store(out, base + col, dt, v);
                            p = p + 1 < E && (p[1] == ' ' || p[1] == '\t') ? tf_skip_sp_tab(p + 1, E) : p + 1;
                            j++;
                            continue;
                        }
                    } else if (__builtin_expect(p < E && *p == delim, 1)) { /* the common case */
                        tf_store(out, base + col, dt, v);
                        p++;
                        j++;
                        continue;
                    } else {
                        while (p < E && TF_BLANK(*p)) p++;
                    }
                } else if (!ws && (p == E || *p == delim || *p == '\n' || *p == '\r' || *p == comment)) {
                    if (TF_IS_INT(dt) && !fc->fill)
                        return tf_fail_record(sx, rec, ncols_in, err) ? -1 : tf_fail_missing(sx, rec, p, p, j, dt, err);
                    v = missing; /* an empty field (under ws there are none: p is at a token) */
                } else { /* not a number: an NA word, Unicode blanks, or an error */
                    p = tf_rescue(fc, rec, p, j, dt, &v, err);
                    if (!p) return -1;
                }
                tf_store(out, base + col, dt, v);
            }
            j++;
        after_field:
            if (__builtin_expect(p == E, 0)) break;
            const uint8_t c = *p;
            if (ws) {
                if (__builtin_expect(c == ' ' || c == '\t', 1)) continue; /* the top of the loop skips it */
            } else if (__builtin_expect(c == delim, 1)) {
                p++;
                continue;
            }
            if (c == '\n') {
                p++;
                break;
            }
            if (c == '\r') {
                p = tf_after_eol(sx, p);
                break;
            }
            if (c == comment) {
                p = tf_trailing_comment(sx, p, err);
                if (!p) return -1;
                break;
            }
            if (ws && tf_ws_at(sx, p)) continue; /* \v, \f, 0x1C-0x1F or a Unicode blank */
            /* text after a number: back to the start of the field for the message */
            const uint8_t *fs = p;
            if (ws) {
                while (fs > rec && !tf_ws_before(rec, fs)) fs--;
            } else {
                while (fs > rec && fs[-1] != delim) fs--;
                while (fs < p && TF_BLANK(*fs)) fs++;
            }
            if (col >= 0) { /* "1.#IND", a number before a Unicode blank...: read again */
                tf_val v;
                p = tf_rescue(fc, rec, fs, j - 1, dt, &v, err);
                if (!p) return -1;
                tf_store(out, base + col, dt, v);
                goto after_field;
            }
            return tf_fail_record(sx, rec, ncols_in, err) ? -1 : tf_fail_field(sx, fs, j - 1, dt, err);
        }
        if (__builtin_expect(j != ncols_in, 0)) return tf_fail_fields(sx, rec, j, ncols_in, err);
    }
    if (rows < 0) /* single pass, max_rows reached (found is set): nothing after them is read */
        return 0;
    if (ch[1] < 0) return 0; /* max_rows reached in this chunk */
    /* Blank and comment lines up to the next chunk belong to this one. */
    const uint8_t *chunk_end = sx->data + ch[1];
    while (p < chunk_end) {
        const uint8_t *q;
        int k = tf_noise_line(sx, p, &q, err);
        if (k < 0) return -1;
        if (k != 1) break;
        p = q;
    }
    if (p != chunk_end) return tf_fail(err, TF_PE_INTERNAL, sx, p, p, p, 0, 0);
    return 0;
}

/* A unit of pass 2, run under the guard against inputs that shrink (parse_guard.c). */
#define TF_FILL_WORK(name, dt, xo, ws)                                                                    \
    static TF_FILL_TARGET void TF_FN(name##_unit)(void *arg) {                                            \
        tf_fill_job *job = (tf_fill_job *)arg;                                                            \
        tf_runner *r = job->r;                                                                            \
        tf_fill_ctx *fc = (tf_fill_ctx *)r->ctx;                                                          \
        job->bad = TF_FN(tf_fill_chunk)(r, fc, job->u, job->is_caller, dt, xo, ws, &fc->errs[job->u]) != 0; \
    }                                                                                                     \
    static TF_FILL_TARGET void TF_FN(name)(tf_runner * r, int64_t u, int is_caller) {                           \
        tf_fill_ctx *fc = (tf_fill_ctx *)r->ctx;                                                          \
        const int64_t *ch = fc->chunks + 4 * u;                                                           \
        tf_fill_job job = {r, u, is_caller, 0};                                                           \
        int64_t fault = tf_guarded(fc->sx.data, fc->sx.end, TF_FN(name##_unit), &job);                    \
        if (fault >= 0) tf_note_fault(r, &fc->fault, fault);                                              \
        else if (job.bad) tf_runner_lower_stop(r, u);                                                     \
        int64_t bytes = (ch[1] >= 0 ? ch[1] : ch[0]) - ch[0];                                             \
        __atomic_fetch_add(&r->done_bytes, bytes > 0 ? bytes : 0, __ATOMIC_RELAXED);                      \
    }
/* Every dtype's unit, named pre_f32 ... pre_i64. */
#define TF_FILL_WORKS(pre, xo, ws)                  \
    TF_FILL_WORK(pre##_f32, TF_DT_F32, xo, ws)     \
    TF_FILL_WORK(pre##_f64, TF_DT_F64, xo, ws)     \
    TF_FILL_WORK(pre##_f16, TF_DT_F16, xo, ws)     \
    TF_FILL_WORK(pre##_bf16, TF_DT_BF16, xo, ws)   \
    TF_FILL_WORK(pre##_i32, TF_DT_I32, xo, ws)     \
    TF_FILL_WORK(pre##_i64, TF_DT_I64, xo, ws)
/* _x_: the reader options' general reader (tf_xopts); _ws_: runs of white space
 * separate fields (TF_DELIM_WHITESPACE) */
TF_FILL_WORKS(tf_fill_work, 0, 0)
TF_FILL_WORKS(tf_fill_work_ws, 0, 1)
TF_FILL_WORKS(tf_fill_work_x, 1, 0)
TF_FILL_WORKS(tf_fill_work_x_ws, 1, 1)

/* tf_parse_small's single pass: chunk 0 on the calling thread, the loop compiled for
 * the constant dt (the switch below), xo and ws. */
#define TF_FILL_SINGLE(xo, ws)                                                               \
    switch (dt) {                                                                            \
    case TF_DT_F32: return TF_FN(tf_fill_chunk)(r, fc, 0, 1, TF_DT_F32, xo, ws, err);       \
    case TF_DT_F64: return TF_FN(tf_fill_chunk)(r, fc, 0, 1, TF_DT_F64, xo, ws, err);       \
    case TF_DT_F16: return TF_FN(tf_fill_chunk)(r, fc, 0, 1, TF_DT_F16, xo, ws, err);       \
    case TF_DT_I32: return TF_FN(tf_fill_chunk)(r, fc, 0, 1, TF_DT_I32, xo, ws, err);       \
    case TF_DT_I64: return TF_FN(tf_fill_chunk)(r, fc, 0, 1, TF_DT_I64, xo, ws, err);       \
    default: return TF_FN(tf_fill_chunk)(r, fc, 0, 1, TF_DT_BF16, xo, ws, err);             \
    }

static TF_FILL_TARGET int TF_FN(tf_fill_single_ws)(tf_runner *r, const tf_fill_ctx *fc, int dt, tf_perr *err) {
    if (fc->sx.x && fc->sx.x->general) TF_FILL_SINGLE(1, 1)
    TF_FILL_SINGLE(0, 1)
}

static TF_FILL_TARGET int TF_FN(tf_fill_single)(tf_runner *r, const tf_fill_ctx *fc, int dt, tf_perr *err) {
    if (fc->sx.ws) return TF_FN(tf_fill_single_ws)(r, fc, dt, err);
    if (fc->sx.x && fc->sx.x->general) TF_FILL_SINGLE(1, 0)
    TF_FILL_SINGLE(0, 0)
}

#undef TF_FILL_WORK
#undef TF_FILL_WORKS
#undef TF_FILL_SINGLE
#undef TF_BLANK
#undef TF_FN
#undef TF_FN_CAT
#undef TF_FN_CAT2
#undef TF_FILL_SFX
#undef TF_FILL_TARGET
#undef TF_FILL_FIELD
#undef TF_FILL_IFIELD
