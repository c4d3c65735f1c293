/* SPDX-License-Identifier: MIT */
/* signal: IIR filtering (signal.c).
 * Written once: cffi reads this file to build tensorffi._native (build_ffi.py) and
 * csrc/tensorffi.h includes it, so the C sources and Python see the same declarations. */

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
