/* SPDX-License-Identifier: MIT */
/*
 * tensorffi.h — the one public header of tensorffi's native library.
 *
 * Conventions (see DESIGN.md):
 *   - names tf_<module>_<verb>[_f32|_f64]; error codes TF_E<NAME>;
 *   - every fallible function returns int (0 = ok, negative = TF_E*) and writes
 *     results through its arguments; the message is kept in a thread-local buffer
 *     read by tf_last_error();
 *   - lengths and strides are int64_t; C never allocates memory Python owns;
 *   - no global mutable state: every function is reentrant and thread-safe.
 *
 * The files in cdefs/ mirror this header (trimmed); the build compiles the cffi module with
 * -Werror, so a mismatch between the two is a build error.
 */
#ifndef TENSORFFI_H
#define TENSORFFI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* core                                                                     */
/* ======================================================================== */

enum {
    TF_OK = 0,
    TF_EINVAL = -1,       /* an argument is invalid */
    TF_ESHAPE = -2,       /* sizes do not agree */
    TF_ETYPE = -3,        /* unsupported element type */
    TF_ENOMEM = -4,       /* a C-side allocation failed */
    TF_EPARSE = -5,       /* malformed input text */
    TF_EOVERFLOW = -6,    /* a value does not fit its type */
    TF_EINTERRUPTED = -7, /* stopped by a callback (Ctrl-C, cancellation) */
    TF_ECALLBACK = -8,    /* a Python callback raised; the exception is re-raised */
    TF_EIO = -9,          /* an operating-system I/O call failed */
    TF_EINTERNAL = -10    /* a bug in tensorffi: please report it */
};

/* SIMD levels reported by tf_simd_level(). */
enum {
    TF_SIMD_SCALAR = 0,
    TF_SIMD_AVX2 = 1,   /* AVX2 + FMA */
    TF_SIMD_AVX512 = 2  /* AVX-512 F/DQ/BW/VL */
};

/* Message of the last error raised on the calling thread ("" if none). */
const char *tf_last_error(void);
/* Clear the calling thread's error message. */
void tf_clear_error(void);

/* Package version compiled into the module (checked at import). */
const char *tf_version(void);
/* Compiler and flags the module was built with. */
const char *tf_build_compiler(void);
const char *tf_build_flags(void);
/* 1 if built with TENSORFFI_NATIVE=1 (-march=native), else 0. */
int tf_build_native(void);

/* Best SIMD level this CPU supports (capped by TENSORFFI_SIMD=scalar|avx2|avx512). */
int tf_simd_level(void);
const char *tf_simd_name(int level);
/* Number of CPUs this process may run on (its CPU affinity; all online CPUs where
 * the system has no affinity call). */
int tf_cpu_count(void);

/* The thread runtime (runtime.c): where a run of `threads` threads started on the
 * calling thread now would get its threads: 0 none (inline: threads == 1, or inside
 * a parallel region already), 1 tensorffi's own pool, 2 the host OpenMP runtime's
 * team (PyTorch's intra-op threads). */
int tf_runtime_backend(int threads);
/* Threads in tensorffi's own pool (created on demand and kept; 0 in a fresh fork). */
int tf_runtime_pool_size(void);

/* The bridge's native call path (bridge_call.c, the one file that uses the CPython
 * API): adds the NativeCall type and its configuration functions to the Python module
 * named `module` (tensorffi._native). Called once, at import. */
int tf_bridge_install(const char *module);

/* Bridge self-test kernels: small, real functions used by the tests, the demo and
 * the call-overhead benchmark. */
/* x[i] *= a for i < n. */
void tf_core_scale_f32(float *x, int64_t n, float a);
/* y[i] += a * x[i] for i < n. */
void tf_core_axpy_f64(const double *x, double *y, int64_t n, double a);
/* out[r] = sum_c a[r * lda + c] for r < rows, c < cols (a BLAS-style strided read). */
int tf_core_rowsum_f64(const double *a, int64_t rows, int64_t cols, int64_t lda, double *out);
/* Fails with TF_EINVAL and a message when n < 0; otherwise fills x[i] = i. */
int tf_core_iota_i64(int64_t *x, int64_t n);
/* Busy-waits for `ms` milliseconds without touching Python (GIL-release test). */
void tf_core_spin_ms(int ms);
/* y[i] = a * x[i] for i < n, split over up to `nthreads` threads (tf_parallel_for): an
 * out-of-place, differentiable example for the operator layer, and the multi-threaded
 * kernel of the fork-safety tests. TF_EINVAL if n < 0 or nthreads < 1. */
int tf_core_scaled_f32(const float *x, float *y, int64_t n, float a, int nthreads);

/* Waits (spinning, GIL released) until *flag != 0; TF_EINTERRUPTED after timeout_ms.
 * Another Python thread can only set the flag if this call released the GIL. */
int tf_core_wait_flag(const int32_t *flag, int timeout_ms);

/* A struct that carries pointers: proves that the bridge keeps tensors placed in a
 * struct alive for as long as the struct lives. */
typedef struct tf_core_span {
    const float *data;
    int64_t n;
} tf_core_span;
/* *out = sum of span->data[0 .. span->n). */
int tf_core_span_sum(const tf_core_span *span, double *out);

/* ======================================================================== */
/* signal: IIR filtering (signal.c) */
/* ======================================================================== */

/* Padding of sosfiltfilt's extended signal (SciPy's padtype). */
enum {
    TF_SIGNAL_PAD_NONE = 0,    /* padtype=None: no extension */
    TF_SIGNAL_PAD_ODD = 1,     /* 2 x[0] - x[k]: point reflection at the ends */
    TF_SIGNAL_PAD_EVEN = 2,    /* x[k]: mirror reflection */
    TF_SIGNAL_PAD_CONSTANT = 3 /* x[0] / x[n-1] repeated */
};

/* Layout shared by the functions below. A signal x is [outer, n, inner]
 * C-contiguous and is filtered along its middle axis: each of the outer*inner
 * channels independently (any axis of a C-contiguous N-d array is the middle one
 * of such a view; inner = 1 is the last axis). sos is [n_sections, 6] float64,
 * rows (b0, b1, b2, a0, a1, a2) with a0 == 1 (TF_EINVAL otherwise). Filter states
 * are [n_sections, outer, 2, inner]: SciPy's zi layout, (n_sections, ..., 2, ...).
 * The sections are direct form II transposed, as scipy.signal.sosfilt. Channels
 * are spread over `nthreads` threads; each is filtered in SIMD lanes chosen by
 * tf_signal_simd(). */

/* y = sosfilt(sos, x) starting from states zi (NULL: zeros); the final states go to
 * zf (NULL: not written). Filtering a signal in pieces, passing each call's zf as
 * the next zi, gives the same result as one call. */
int tf_signal_sosfilt_f32(const double *sos, int64_t n_sections, const float *x, float *y, int64_t outer, int64_t n,
                          int64_t inner, const float *zi, float *zf, int nthreads);
int tf_signal_sosfilt_f64(const double *sos, int64_t n_sections, const double *x, double *y, int64_t outer, int64_t n,
                          int64_t inner, const double *zi, double *zf, int nthreads);

/* Complex signals with complex coefficients (complex signals with real
 * coefficients use the functions above on their real view: real and imaginary
 * parts are then separate channels). x, y, zi and zf hold interleaved (re, im)
 * pairs, so `inner` counts reals and must be even; sos is [n_sections, 12]: each
 * coefficient of a row as a (re, im) pair, a0 == 1 + 0j. complex128 runs SciPy's
 * complex operations in SciPy's order (bitwise equal); complex64 follows the
 * float32 rule below (float32 arithmetic only for poles within radius 0.9). */
int tf_signal_sosfilt_c64(const double *sos, int64_t n_sections, const float *x, float *y, int64_t outer, int64_t n,
                          int64_t inner, const float *zi, float *zf, int nthreads);
int tf_signal_sosfilt_c128(const double *sos, int64_t n_sections, const double *x, double *y, int64_t outer,
                           int64_t n, int64_t inner, const double *zi, double *zf, int nthreads);

/* The adjoint of tf_signal_sosfilt_*: given dL/dy (gy) and dL/dzf (gzf, NULL:
 * zeros) of the call sosfilt(sos, x, zi), writes dL/dx (gx, [outer, n, inner]),
 * dL/dzi (gzi, [n_sections, outer, 2, inner]) and dL/dsos (gsos, [n_sections, 6],
 * float64, summed over channels in an order that does not depend on nthreads;
 * the a0 column gets the gradient of the a0-normalised filter). The forward pass
 * is recomputed from checkpoints, so y is not needed. */
int tf_signal_sosfilt_backward_f32(const double *sos, int64_t n_sections, const float *x, const float *zi,
                                   const float *gy, const float *gzf, int64_t outer, int64_t n, int64_t inner,
                                   double *gsos, float *gx, float *gzi, int nthreads);
int tf_signal_sosfilt_backward_f64(const double *sos, int64_t n_sections, const double *x, const double *zi,
                                   const double *gy, const double *gzf, int64_t outer, int64_t n, int64_t inner,
                                   double *gsos, double *gx, double *gzi, int nthreads);

/* Zero-phase filtering, SciPy's sosfiltfilt: x is extended by `padlen` samples
 * at each end (padtype TF_SIGNAL_PAD_*; NONE ignores padlen), filtered forward
 * from zi * ext[0], then backward from zi * (last forward output), and the middle
 * is written to y. zi is [n_sections, 2] float64, the steady state of the step
 * response (sosfilt_zi). Needs n > padlen. */
int tf_signal_sosfiltfilt_f32(const double *sos, int64_t n_sections, const double *zi, const float *x, float *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads);
int tf_signal_sosfiltfilt_f64(const double *sos, int64_t n_sections, const double *zi, const double *x, double *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads);

/* sosfiltfilt with complex coefficients: zi is [n_sections, 4], the complex
 * steady states as (re, im) pairs; x and y as in tf_signal_sosfilt_c64/c128. */
int tf_signal_sosfiltfilt_c64(const double *sos, int64_t n_sections, const double *zi, const float *x, float *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads);
int tf_signal_sosfiltfilt_c128(const double *sos, int64_t n_sections, const double *zi, const double *x, double *y,
                               int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads);

/* The functions above with a progress callback, for long calls: fn(handle, done,
 * total) is called from the calling thread about every 20 ms (done and total in
 * units of work: samples x sections per vector of lanes), at a point where no other
 * thread touches the caller's memory; a non-zero return stops the call within
 * ~0.1 ms of filtering with TF_EINTERRUPTED. A stopped call leaves its outputs
 * partly written (y up to a block boundary in each channel; zf, gx, gzi and gsos
 * undefined). fn is a tf_progress_fn, spelled out because that typedef comes later
 * in the build order. */
int tf_signal_sosfilt_cb_f32(const double *sos, int64_t n_sections, const float *x, float *y, int64_t outer, int64_t n,
                          int64_t inner, const float *zi, float *zf, int nthreads,
    int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_signal_sosfilt_cb_f64(const double *sos, int64_t n_sections, const double *x, double *y, int64_t outer, int64_t n,
                          int64_t inner, const double *zi, double *zf, int nthreads,
    int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_signal_sosfilt_cb_c64(const double *sos, int64_t n_sections, const float *x, float *y, int64_t outer, int64_t n,
                          int64_t inner, const float *zi, float *zf, int nthreads,
    int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_signal_sosfilt_cb_c128(const double *sos, int64_t n_sections, const double *x, double *y, int64_t outer,
                           int64_t n, int64_t inner, const double *zi, double *zf, int nthreads,
    int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_signal_sosfilt_backward_cb_f32(const double *sos, int64_t n_sections, const float *x, const float *zi,
                                   const float *gy, const float *gzf, int64_t outer, int64_t n, int64_t inner,
                                   double *gsos, float *gx, float *gzi, int nthreads,
    int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_signal_sosfilt_backward_cb_f64(const double *sos, int64_t n_sections, const double *x, const double *zi,
                                   const double *gy, const double *gzf, int64_t outer, int64_t n, int64_t inner,
                                   double *gsos, double *gx, double *gzi, int nthreads,
    int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_signal_sosfiltfilt_cb_f32(const double *sos, int64_t n_sections, const double *zi, const float *x, float *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads,
    int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_signal_sosfiltfilt_cb_f64(const double *sos, int64_t n_sections, const double *zi, const double *x, double *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads,
    int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_signal_sosfiltfilt_cb_c64(const double *sos, int64_t n_sections, const double *zi, const float *x, float *y,
                              int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads,
    int (*fn)(void *handle, int64_t done, int64_t total), void *handle);
int tf_signal_sosfiltfilt_cb_c128(const double *sos, int64_t n_sections, const double *zi, const double *x, double *y,
                               int64_t outer, int64_t n, int64_t inner, int padtype, int64_t padlen, int nthreads,
    int (*fn)(void *handle, int64_t done, int64_t total), void *handle);

/* 1 if float32 signals filtered with this sos are computed in float32
 * arithmetic, 0 if in float64 arithmetic (float32 in and out). float32 is used
 * only when every pole lies within radius 0.9, where its roundoff stays near
 * 1e-6 of the output's scale; poles nearer the unit circle (low cutoffs, narrow
 * bands: most audio and physiological filters) would amplify it to 1e-4..1e-2. */
int tf_signal_f32_arith(const double *sos, int64_t n_sections);

/* tf_signal_f32_arith for complex coefficients ([n_sections, 12], (re, im) pairs). */
int tf_signal_f32_arith_complex(const double *sos, int64_t n_sections);

/* The SIMD level (TF_SIMD_*) signal's kernels run at: TENSORFFI_SIMD=scalar|avx2|avx512
 * selects a level (capped by what the CPU has); unset, the level this module
 * prefers on this CPU (see signal.c). */
int tf_signal_simd(void);

/* SIMD lanes (channels filtered at once) for elements of `element_size` bytes
 * (4: float32, 8: float64) at the level tf_signal_simd() reports. */
int tf_signal_lanes(int element_size);

/* ======================================================================== */
/* physics: particle simulation (physics.c) */
/* ======================================================================== */

/* Integration methods of tf_physics_params.method. */
enum {
    TF_PHYSICS_LEAPFROG = 0,         /* kick-drift-kick, second order, symplectic */
    TF_PHYSICS_SYMPLECTIC_EULER = 1  /* v += a(x) dt, then x += v dt; first order */
};

/* Integration parameters of tf_physics_nbody_*: they cross into C as one struct. */
typedef struct tf_physics_params {
    double dt;            /* time step: finite, non-zero (negative integrates backwards) */
    double G;             /* gravitational constant: finite */
    double softening;     /* Plummer softening length epsilon: finite, >= 0 */
    int64_t steps;        /* number of steps: >= 0 */
    int64_t record_every; /* 0: no trajectory; k > 0: one frame of positions every k steps */
    int method;           /* TF_PHYSICS_LEAPFROG or TF_PHYSICS_SYMPLECTIC_EULER */
} tf_physics_params;

/* Advance b independent systems of n bodies by params->steps steps of softened
 * gravity, in place: the acceleration of body i is
 *   sum_{j != i} G m_j (r_j - r_i) / (|r_j - r_i|^2 + eps^2)^(3/2).
 * pos and vel are [b][n][3], mass is [b][n], all C-contiguous. With
 * params->record_every = k > 0, traj ([b][frames][n][3], frames = steps / k) receives
 * the positions after steps k, 2k, ..., frames*k; with k = 0, frames must be 0 and
 * traj is not touched (it may be NULL). Work is spread over up to `nthreads`
 * threads (bodies of one system, or whole systems). `fn(handle, done, total)` is
 * called from the calling thread every ~0.1 s with done/total in steps; a non-zero
 * return stops the run at a step boundary with TF_EINTERRUPTED. `fn` is a
 * tf_progress_fn, spelled out because that typedef comes later in the build order
 * (cdefs/callbacks.h is read last, and cffi refuses a repeated typedef). */
int tf_physics_nbody_f32(float *pos, float *vel, const float *mass, int64_t b, int64_t n,
                         const tf_physics_params *params, float *traj, int64_t frames,
                         int nthreads, int (*fn)(void *handle, int64_t done, int64_t total),
                         void *handle);
int tf_physics_nbody_f64(double *pos, double *vel, const double *mass, int64_t b, int64_t n,
                         const tf_physics_params *params, double *traj, int64_t frames,
                         int nthreads, int (*fn)(void *handle, int64_t done, int64_t total),
                         void *handle);

/* Total energy of each of b systems, out[s] = sum_i m_i |v_i|^2 / 2
 * - sum_{i<j} G m_i m_j / sqrt(|r_j - r_i|^2 + eps^2), accumulated in double. */
int tf_physics_energy_f32(const float *pos, const float *vel, const float *mass, int64_t b,
                          int64_t n, double G, double softening, int nthreads, float *out);
int tf_physics_energy_f64(const double *pos, const double *vel, const double *mass, int64_t b,
                          int64_t n, double G, double softening, int nthreads, double *out);

/* The SIMD level (TF_SIMD_*) the physics kernels run at on this CPU, after the
 * TENSORFFI_SIMD cap and the module's measured preference. */
int tf_physics_simd(void);

/* Total momentum of each of b systems, out[s][k] = sum_i m_i v_i[k] (double accumulation). */
int tf_physics_momentum_f32(const float *vel, const float *mass, int64_t b, int64_t n, float *out);
int tf_physics_momentum_f64(const double *vel, const double *mass, int64_t b, int64_t n, double *out);

/* ======================================================================== */
/* parse: numeric CSV parsing (parse.c) */
/* ======================================================================== */

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

/* The SIMD level the parser runs at on this CPU (TF_SIMD_*), after the TENSORFFI_SIMD
 * cap and the parser's own measured preference (see parse.c). */
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


/* ======================================================================== */
/* callbacks: C -> Python callbacks (progress, cancellation) */
/* ======================================================================== */

/* Progress and cancellation: a long-running kernel calls `fn(handle, done, total)`
 * from the thread that called it, every so often. A non-zero return asks the
 * kernel to stop: it then returns TF_EINTERRUPTED as soon as it can, leaving its
 * outputs partially written. `fn` may be NULL (no reporting). On the Python side
 * `fn` is the extern "Python" function tf_py_progress (cdefs/callbacks.h), and
 * `handle` a cffi handle to the Python object that receives the reports. */
typedef int (*tf_progress_fn)(void *handle, int64_t done, int64_t total);

/* Self-test of the callback path: counts to `total` in `steps` steps, reporting each
 * step; returns TF_EINTERRUPTED if the callback asks to stop, and writes the last
 * count reached to *reached. */
int tf_core_count(int64_t total, int64_t steps, tf_progress_fn fn, void *handle, int64_t *reached);

/* Self-test of the thread runtime: out[i] = 3 i + 1 for i < n, written in `units`
 * units (contiguous slices) on up to `nthreads` threads. Each unit writes its slice
 * `rounds` times (round r < rounds - 1 writes -(r + 1)), with a checkpoint after each
 * round; tids[u] receives the index of the thread that ran unit u (0: the caller).
 * Units u >= fail_from (if fail_from >= 0) fail with TF_EINVAL and the message "unit
 * <u> failed" (written on the thread that ran it): the lowest such unit's is the
 * call's. Progress (in rounds of units) goes to fn from the calling thread, every
 * `interval_ms` (0: at every checkpoint of the caller); a non-zero answer stops the
 * run with TF_EINTERRUPTED. */
int tf_core_parallel_fill(int64_t *out, int64_t n, int64_t units, int64_t rounds, int nthreads, int32_t *tids,
                          int64_t fail_from, int interval_ms, tf_progress_fn fn, void *handle);

/* ---- internal helpers (not declared in cdefs/) ------------------------- */
#ifdef TF_INTERNAL
/* Set the thread-local message and return `code`. printf-style. */
int tf_error(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- the thread runtime (runtime.c) ------------------------------------
 * One parallel call is a *run*: a driver function on the calling thread that opens
 * phases of independent units; idle threads (the host OpenMP runtime's, or our
 * pool's) take units one at a time and the caller works too. See runtime.c. */
typedef struct tf_rt tf_rt;
/* A unit of work; tid is the thread's index in the run (0 = the caller, < threads).
 * A non-zero return stops the run with that status (the lowest failing unit wins;
 * its tf_error message is carried to the caller's thread). */
typedef int (*tf_rt_unit_fn)(void *ctx, int64_t unit, int tid);
typedef struct {
    int threads;                  /* threads that may take part (1: inline, no thread) */
    tf_progress_fn fn;            /* progress callback, called on the caller only (NULL: none) */
    void *handle;
    int64_t (*done)(void *ctx);   /* progress so far, for the runtime's own reports (NULL: the
                                     driver reports alone, with tf_rt_report) */
    void *done_ctx;
    int64_t total;                /* progress total passed to fn */
    double interval;              /* seconds between reports (<= 0: 0.1) */
} tf_rt_opts;
/* Run driver(rt, ctx) on the calling thread, with up to opts->threads threads for its
 * phases. Returns the driver's status if non-zero, else the run's first failure (a
 * unit's status, or TF_EINTERRUPTED after a stop), else 0. */
int tf_rt_run(const tf_rt_opts *opts, int (*driver)(tf_rt *rt, void *ctx), void *ctx);
/* Driver only: run fn over units [0, units) on the run's threads and return when all
 * are done (or, after a stop, when those already started are): the run's status. */
int tf_rt_phase(tf_rt *rt, int64_t units, tf_rt_unit_fn fn, void *ctx);
/* Inside a unit, at a point where the thread may pause (it touches no caller memory
 * while paused): parks while the caller reports progress. Returns non-zero once the
 * run is stopping: return from the unit without touching caller memory again. */
int tf_rt_checkpoint(tf_rt *rt);
/* Caller thread only (a no-op elsewhere): call the progress callback with `done` if
 * the interval has passed (or `force`), once every other thread is out of its unit.
 * Returns non-zero once the run is stopping (the callback is then never called again). */
int tf_rt_report(tf_rt *rt, int64_t done, int force);
int tf_rt_stopped(const tf_rt *rt);
/* Stop the run with `status` (TF_EINTERRUPTED if 0): no unit starts afterwards. */
void tf_rt_stop(tf_rt *rt, int status);
/* Threads that may take part in the run (per-thread buffers: tid < this). */
int tf_rt_threads(const tf_rt *rt);
/* Threads worth using for `work`: at most nthreads, and one per min_work_per_thread. */
int tf_rt_threads_for(double work, double min_work_per_thread, int nthreads);

/* Run fn(ctx, begin, end) over [0, n) on up to nthreads threads, at most one thread
 * per min_per_thread items (fewer items: fn(ctx, 0, n) on the calling thread). The
 * range is cut into about four contiguous blocks per thread, taken on demand.
 * Returns the first non-zero status returned by fn, or 0. */
typedef int (*tf_range_fn)(void *ctx, int64_t begin, int64_t end);
int tf_parallel_for(int64_t n, int nthreads, int64_t min_per_thread, tf_range_fn fn, void *ctx);

/* Fault in the pages of a large output before threads write it: C calls this on a
 * buffer it is about to overwrite entirely, before its parallel phase. Fresh pages
 * (a new mapping, as malloc gives for blocks of 32 MiB and more) are asked for as
 * 2 MiB pages where transparent huge pages are on "madvise", and faulted in with one
 * MADV_POPULATE_WRITE call (Linux >= 5.14; else one write per page, keeping the
 * contents). Buffers under TF_POPULATE_MIN_BYTES, and buffers already in memory,
 * are left alone. */
#define TF_POPULATE_MIN_BYTES ((int64_t)1 << 22)
void tf_populate(void *ptr, int64_t bytes);
#endif

#ifdef __cplusplus
}
#endif
#endif /* TENSORFFI_H */
