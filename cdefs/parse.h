/* SPDX-License-Identifier: MIT */
/* parse: numeric CSV parsing. Mirrored from csrc/tensorffi.h (section "parse"). */

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
 *      big-decimal fallback; never through a wider type where that could round twice).
 *
 * Syntax: fields are separated by the byte `delimiter`; spaces and tabs around a field
 * are ignored (unless one is the delimiter); a field may be double-quoted ("" is an
 * escaped quote, and quoted fields may span lines); LF, CRLF and CR end lines; blank
 * lines are skipped; `comment` (a byte, or -1 for none) starts a comment that runs to
 * the end of the line, and a line holding only a comment is skipped. Numbers:
 * [+-] digits [. digits] [(e|E) [+-] digits], also ".5" and "5.", and inf, infinity and
 * nan in any case. An empty field becomes `missing`.
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

/* The SIMD level the parser runs at on this CPU (TF_SIMD_*), after the TENSORFFI_SIMD
 * cap and the parser's own measured preference (see parse.c). */
int tf_parse_simd(void);
