/* SPDX-License-Identifier: MIT */
/* physics: particle simulation (physics.c).
 * Written once: cffi reads this file to build tensorffi._native (build_ffi.py) and
 * csrc/tensorffi.h includes it, so the C sources and Python see the same declarations. */

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
