/* SPDX-License-Identifier: MIT */
/* parse: numeric CSV parsing (csrc/parse*.c; csrc/parse.c says which unit holds what).
 * Written once: cffi reads this file to build tensorffi._native (build_ffi.py) and
 * csrc/tensorffi.h includes it, so the C sources and Python see the same declarations. */

/* Numeric CSV to tensors. Small inputs take one call (tf_parse_small_*, below); larger
 * ones three (tensorffi/io.py drives them):
 *
 *   1. tf_parse_record tokenizes one record (the header, or the first data row) so
 *      Python can decide on the header and learn the number of columns;
 *   2. tf_parse_count splits the data region [start, n) into chunks of about
 *      chunk_bytes that begin at line starts, counts the records of each chunk on
 *      `nthreads` threads, and resolves chunks whose first line lies inside a quoted
 *      field that began in an earlier chunk. It writes, per chunk, the four int64
 *      {record start, end, rows, first row} that step 3 reads;
 *   3. tf_parse_fill_<dtype> parses the chunks in parallel into out[rows][cols],
 *      every value correctly rounded from its decimal text (Eisel-Lemire with an exact
 *      big-decimal fallback; never through a wider type where that could round twice),
 *      or, for the integer types (_i32, _i64), exact.
 *
 * Syntax: fields are separated by the byte `delimiter`; spaces and tabs around a field
 * are ignored (unless one is the delimiter); a field may be double-quoted ("" is an
 * escaped quote, and quoted fields may span lines); LF, CRLF and CR end lines; blank
 * lines are skipped; `comment` (a byte, or -1 for none) starts a comment that runs to
 * the end of the line, and a line holding only a comment is skipped. With `delimiter`
 * TF_DELIM_WHITESPACE, every run of white space separates fields instead: the blanks
 * Python's str.isspace knows, as NumPy's loadtxt splits on them (space, tab, \v, \f,
 * 0x1C-0x1F and the Unicode blanks U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028,
 * U+2029, U+202F, U+205F, U+3000), blanks at the start and end of a line are ignored,
 * a line of blanks is a blank line, and there are no empty fields; a quoted field may
 * hold blanks and must be followed by a blank, a line end, a comment or the end. Numbers:
 * [+-] digits [. digits] [(e|E) [+-] digits], also ".5" and "5.", and inf, infinity and
 * nan in any case. An empty field becomes `missing`. Integers (_i32, _i64): [+-] digits
 * (leading zeros allowed), nothing else: "1.0", "1e3" and "nan" are errors, and so is
 * a value outside the type's range (never wrapped or saturated).
 *
 * Errors are TF_EPARSE with a message naming line, column and byte offset, and
 * errinfo = {offset, line, column, text_begin, text_end} (0-based byte offset, 1-based
 * line and column; the column counts UTF-8 characters; [text_begin, text_end) is the
 * offending token or record). NUL bytes and invalid UTF-8 are errors anywhere. An
 * input that shrinks while it is read (a memory-mapped file truncated meanwhile: a
 * fault inside [data, data + n)) is TF_EIO, not a crash.
 * fn(handle, done, total) is a tf_progress_fn (spelled out because that typedef comes
 * later in the build order): progress in bytes, called on the calling thread only; a
 * non-zero return stops the parse with TF_EINTERRUPTED. fn may be NULL. */

/* The `delimiter` for fields separated by runs of white space (tensorffi.io's
 * delimiter=None; NumPy loadtxt's default, pandas' sep=r"\s+"): no byte, and when cast
 * to one (0xFE), none that valid UTF-8 holds. */
enum { TF_DELIM_WHITESPACE = -2 };

/* Tokenize the record that follows `start` after skipping `skiplines` physical lines
 * and then any blank or comment lines. spans[i] = {begin, end, flags} of field i (its
 * content, without surrounding blanks and quotes) for i < max_fields; flags: 1 quoted,
 * 2 holds an escaped quote (""), 4 is a number, 8 is empty. info = {start of the
 * record's line (-1 if the input ends first), end of the record (after its line
 * terminator), number of fields, 1 if every field is a number or empty}. */
int tf_parse_record(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter,
                    int comment, int64_t *spans, int64_t max_fields, int64_t *info, int64_t *errinfo);

/* Pass 1: chunks[nchunks][4] = {start, end, rows, first row} for the data region
 * [start, n), with nchunks = max(1, ceil((n - start) / chunk_bytes)). Counting stops
 * after max_rows records (max_rows < 0: no limit). *total_rows = rows found. */
int tf_parse_count(const uint8_t *data, int64_t n, int64_t start, int delimiter, int comment,
                   int64_t chunk_bytes, int64_t max_rows, int nthreads, int64_t *chunks, int64_t nchunks,
                   int64_t *total_rows, int (*fn)(void *handle, int64_t done, int64_t total),
                   void *handle);

/* Pass 2: parse the chunks found by tf_parse_count into out[rows][cols]. Field j of a
 * record goes to column colmap[j] (-1: skipped; a skipped field is tokenized and
 * checked for NUL bytes, UTF-8 and quoting, not parsed); every record must have
 * ncols_in fields. An empty field becomes `missing` (rounded to the output type).
 * _f16 and _bf16 write IEEE binary16 and bfloat16 bit patterns. */
int tf_parse_fill_f32(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                      int64_t nchunks, const int64_t *colmap, int64_t ncols_in, float *out, int64_t rows,
                      int64_t cols, double missing, int nthreads, int64_t *errinfo,
                      int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_parse_fill_f64(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                      int64_t nchunks, const int64_t *colmap, int64_t ncols_in, double *out, int64_t rows,
                      int64_t cols, double missing, int nthreads, int64_t *errinfo,
                      int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_parse_fill_f16(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                      int64_t nchunks, const int64_t *colmap, int64_t ncols_in, uint16_t *out, int64_t rows,
                      int64_t cols, double missing, int nthreads, int64_t *errinfo,
                      int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_parse_fill_bf16(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                       int64_t nchunks, const int64_t *colmap, int64_t ncols_in, uint16_t *out, int64_t rows,
                       int64_t cols, double missing, int nthreads, int64_t *errinfo,
                      int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
/* Integers: `missing` is an integer of the type that fills empty fields (and NA words)
 * when `fill` is 1 (TF_EINVAL if it does not fit int32); with fill 0 such a field is
 * TF_EPARSE, since integers have no NaN. */
int tf_parse_fill_i32(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                      int64_t nchunks, const int64_t *colmap, int64_t ncols_in, int32_t *out, int64_t rows,
                      int64_t cols, int64_t missing, int fill, int nthreads, int64_t *errinfo,
                      int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_parse_fill_i64(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                      int64_t nchunks, const int64_t *colmap, int64_t ncols_in, int64_t *out, int64_t rows,
                      int64_t cols, int64_t missing, int fill, int nthreads, int64_t *errinfo,
                      int (*fn)(void *handle, int64_t done, int64_t total), void *handle);

/* Small inputs in one call (tensorffi/io.py uses it below a size threshold): the
 * first record as tf_parse_record finds it becomes the header when header is 1, or
 * when header is 2 ("auto") and some field is text and none is a number; then every
 * record is parsed, in one pass on the calling thread, into out[rows][columns] with
 * all columns kept and at most max_rows rows (max_rows < 0: no limit). out holds cap
 * values: at least (n - data start + 1) suffice for any input, since every field but
 * the last ends with its own delimiter or line end. meta (nmeta >= 10 int64) holds the
 * bookkeeping, one buffer rather than three (this call is all fixed costs): meta[0..5)
 * = info {rows, columns, 1 if the first record was the header, start of the first
 * record (-1: none), start of the data}; meta[5..10) = errinfo; then the spans of the
 * first record (header or data) as tf_parse_record writes them, for up to
 * (nmeta - 10) / 3 fields. */
int tf_parse_small_f32(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter, int comment,
                       int header, int64_t max_rows, double missing, float *out, int64_t cap, int64_t *meta,
                       int64_t nmeta);
int tf_parse_small_f64(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter, int comment,
                       int header, int64_t max_rows, double missing, double *out, int64_t cap, int64_t *meta,
                       int64_t nmeta);
int tf_parse_small_f16(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter, int comment,
                       int header, int64_t max_rows, double missing, uint16_t *out, int64_t cap, int64_t *meta,
                       int64_t nmeta);
int tf_parse_small_bf16(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter, int comment,
                        int header, int64_t max_rows, double missing, uint16_t *out, int64_t cap, int64_t *meta,
                        int64_t nmeta);
int tf_parse_small_i32(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter, int comment,
                       int header, int64_t max_rows, int64_t missing, int fill, int32_t *out, int64_t cap,
                       int64_t *meta, int64_t nmeta);
int tf_parse_small_i64(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter, int comment,
                       int header, int64_t max_rows, int64_t missing, int fill, int64_t *out, int64_t cap,
                       int64_t *meta, int64_t nmeta);

/* The same with reader options (tensorffi.io's na_values, decimal, thousands): opts
 * holds nopts bytes {decimal mark, thousands separator (0: none), general (1: every
 * field through the options' reader, needed for an NA word that reads as a number),
 * then each NA word as a length byte and its bytes}. An NA word becomes `missing`,
 * like an empty field. (With or without options, a number between Unicode blanks is
 * read, as NumPy strips them.) */
int tf_parse_fill_x_f32(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                        int64_t nchunks, const int64_t *colmap, int64_t ncols_in, float *out, int64_t rows,
                        int64_t cols, double missing, int nthreads, int64_t *errinfo,
                        int (*fn)(void *handle, int64_t done, int64_t total), void *handle, const uint8_t *opts,
                        int64_t nopts);
int tf_parse_fill_x_f64(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                        int64_t nchunks, const int64_t *colmap, int64_t ncols_in, double *out, int64_t rows,
                        int64_t cols, double missing, int nthreads, int64_t *errinfo,
                        int (*fn)(void *handle, int64_t done, int64_t total), void *handle, const uint8_t *opts,
                        int64_t nopts);
int tf_parse_fill_x_f16(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                        int64_t nchunks, const int64_t *colmap, int64_t ncols_in, uint16_t *out, int64_t rows,
                        int64_t cols, double missing, int nthreads, int64_t *errinfo,
                        int (*fn)(void *handle, int64_t done, int64_t total), void *handle, const uint8_t *opts,
                        int64_t nopts);
int tf_parse_fill_x_bf16(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                        int64_t nchunks, const int64_t *colmap, int64_t ncols_in, uint16_t *out, int64_t rows,
                        int64_t cols, double missing, int nthreads, int64_t *errinfo,
                        int (*fn)(void *handle, int64_t done, int64_t total), void *handle, const uint8_t *opts,
                        int64_t nopts);
/* Integers under the options: a thousands separator is read between digits; a decimal
 * mark (of any kind) makes a field that is not an integer. */
int tf_parse_fill_x_i32(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                        int64_t nchunks, const int64_t *colmap, int64_t ncols_in, int32_t *out, int64_t rows,
                        int64_t cols, int64_t missing, int fill, int nthreads, int64_t *errinfo,
                        int (*fn)(void *handle, int64_t done, int64_t total), void *handle, const uint8_t *opts,
                        int64_t nopts);
int tf_parse_fill_x_i64(const uint8_t *data, int64_t n, int delimiter, int comment, const int64_t *chunks,
                        int64_t nchunks, const int64_t *colmap, int64_t ncols_in, int64_t *out, int64_t rows,
                        int64_t cols, int64_t missing, int fill, int nthreads, int64_t *errinfo,
                        int (*fn)(void *handle, int64_t done, int64_t total), void *handle, const uint8_t *opts,
                        int64_t nopts);
int tf_parse_small_x_f32(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter,
                         int comment, int header, int64_t max_rows, double missing, float *out, int64_t cap,
                         int64_t *meta, int64_t nmeta, const uint8_t *opts, int64_t nopts);
int tf_parse_small_x_f64(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter,
                         int comment, int header, int64_t max_rows, double missing, double *out, int64_t cap,
                         int64_t *meta, int64_t nmeta, const uint8_t *opts, int64_t nopts);
int tf_parse_small_x_f16(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter,
                         int comment, int header, int64_t max_rows, double missing, uint16_t *out, int64_t cap,
                         int64_t *meta, int64_t nmeta, const uint8_t *opts, int64_t nopts);
int tf_parse_small_x_bf16(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter,
                         int comment, int header, int64_t max_rows, double missing, uint16_t *out, int64_t cap,
                         int64_t *meta, int64_t nmeta, const uint8_t *opts, int64_t nopts);
int tf_parse_small_x_i32(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter,
                         int comment, int header, int64_t max_rows, int64_t missing, int fill, int32_t *out,
                         int64_t cap, int64_t *meta, int64_t nmeta, const uint8_t *opts, int64_t nopts);
int tf_parse_small_x_i64(const uint8_t *data, int64_t n, int64_t start, int64_t skiplines, int delimiter,
                         int comment, int header, int64_t max_rows, int64_t missing, int fill, int64_t *out,
                         int64_t cap, int64_t *meta, int64_t nmeta, const uint8_t *opts, int64_t nopts);

/* The SIMD level the parser runs at on this CPU (TF_SIMD_*), after the TENSORFFI_SIMD
 * cap and the parser's own measured preference (see parse_syntax.c). */
int tf_parse_simd(void);

/* Streams (tensorffi.io.iter_csv): a parser that outlives the call, fed with the input
 * in blocks, that keeps the record being read in a buffer of its own and writes whole
 * rows into output chunks the caller allocates. Values, and the positions in errors,
 * are those of the calls above on the whole input. Use:
 *
 *   tf_parse_stream_open; then tf_parse_stream_feed (a block; eof = 1 with the last)
 *   until tf_parse_stream_first returns 1 (the first record, as tf_parse_record gives
 *   it); tf_parse_stream_begin (where the data starts, and the columns); then
 *   tf_parse_stream_next_<dtype> for rows, feeding a block whenever it returns fewer
 *   than asked, until it does so after the last block; tf_parse_stream_close.
 *
 * One stream is used by one thread at a time; streams share nothing. */
typedef struct tf_parse_stream tf_parse_stream;

/* A stream whose input starts at byte `origin` of a larger input, on physical line
 * `origin_line` (0 and 1 for a whole input; a byte order mark is skipped only at 0).
 * `skiplines` physical lines are skipped first. A record that is not yet complete may
 * hold at most `max_record` bytes (TF_EPARSE beyond: a quote never closed would
 * otherwise buffer the rest of the input). *out = the stream (NULL on failure). */
int tf_parse_stream_open(int delimiter, int comment, int64_t skiplines, int64_t origin, int64_t origin_line,
                         int64_t max_record, tf_parse_stream **out);
/* Reader options for the stream (as for tf_parse_fill_x_*; copied), set before the
 * first block. */
int tf_parse_stream_options(tf_parse_stream *s, const uint8_t *opts, int64_t nopts);
/* Free the stream and its buffer. NULL is ignored. */
void tf_parse_stream_close(tf_parse_stream *s);
/* Append n bytes (copied); eof = 1: they are the last (n may be 0). */
int tf_parse_stream_feed(tf_parse_stream *s, const uint8_t *data, int64_t n, int eof);
/* The first record after the skipped lines and any blank or comment lines: returns 1
 * with spans[max_fields][3] and info[6] as tf_parse_record writes them, offsets in the
 * whole input (info[4] = 1 if some field is text, info[5] = 1 if some is a number;
 * info[0] = -1 if the input ends first); 0 if more input is needed; or an error. */
int tf_parse_stream_first(tf_parse_stream *s, int64_t *spans, int64_t max_fields, int64_t *info, int64_t *errinfo);
/* The data starts at input offset `start` (a line start not yet consumed: the first
 * record's, or the end of the header's); colmap as for tf_parse_fill_* (copied). */
int tf_parse_stream_begin(tf_parse_stream *s, int64_t start, const int64_t *colmap, int64_t ncols_in, int64_t cols);
/* Parse up to `rows` whole records from the buffer into out[rows][cols]; returns the
 * number written (fewer than rows: feed more, or the input has ended), or a negative
 * status. On TF_EPARSE nothing is consumed, and errinfo is as for tf_parse_fill_*. */
int64_t tf_parse_stream_next_f32(tf_parse_stream *s, float *out, int64_t rows, int64_t cols, double missing,
                                 int64_t *errinfo);
int64_t tf_parse_stream_next_f64(tf_parse_stream *s, double *out, int64_t rows, int64_t cols, double missing,
                                 int64_t *errinfo);
int64_t tf_parse_stream_next_f16(tf_parse_stream *s, uint16_t *out, int64_t rows, int64_t cols, double missing,
                                 int64_t *errinfo);
int64_t tf_parse_stream_next_bf16(tf_parse_stream *s, uint16_t *out, int64_t rows, int64_t cols, double missing,
                                  int64_t *errinfo);
int64_t tf_parse_stream_next_i32(tf_parse_stream *s, int32_t *out, int64_t rows, int64_t cols, int64_t missing,
                                 int fill, int64_t *errinfo);
int64_t tf_parse_stream_next_i64(tf_parse_stream *s, int64_t *out, int64_t rows, int64_t cols, int64_t missing,
                                 int fill, int64_t *errinfo);
/* Copy the n input bytes from offset `begin` that the buffer still holds (header names,
 * error texts) to out. */
int tf_parse_stream_bytes(const tf_parse_stream *s, int64_t begin, uint8_t *out, int64_t n);
/* info = {input offset consumed, its physical line, bytes buffered and not consumed,
 * buffer capacity, 1 after the last block, the largest capacity so far}. */
int tf_parse_stream_info(const tf_parse_stream *s, int64_t *info);

/* Record boundaries for readers of ranges of one input (DataLoader workers): for the
 * sorted offsets[k] in [start, n], bounds[j] = the first line start at or after
 * offsets[j] at which pass 1, reading from the data start `start`, is between records
 * (quote-aware: a quoted field spanning lines is never cut); rows[j] = records in
 * [start, bounds[j]); lines[j] = physical line of bounds[j]. */
int tf_parse_bounds(const uint8_t *data, int64_t n, int64_t start, int delimiter, int comment, const int64_t *offsets,
                    int64_t k, int64_t *bounds, int64_t *rows, int64_t *lines);
