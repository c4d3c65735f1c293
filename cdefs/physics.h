/* SPDX-License-Identifier: MIT */
/* physics: declarations mirrored from csrc/tensorffi.h (section "physics"). */

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

/* Advance b systems of n bodies by params->steps steps, in place. pos, vel: [b][n][3];
 * mass: [b][n]; traj: [b][frames][n][3], frames = steps / record_every (0 and
 * untouched without recording). fn(handle, done, total) is a tf_progress_fn called
 * from the calling thread (non-zero return: stop, TF_EINTERRUPTED). */
int tf_physics_nbody_f32(float *pos, float *vel, const float *mass, int64_t b, int64_t n,
                         const tf_physics_params *params, float *traj, int64_t frames,
                         int nthreads, int (*fn)(void *handle, int64_t done, int64_t total),
                         void *handle);
int tf_physics_nbody_f64(double *pos, double *vel, const double *mass, int64_t b, int64_t n,
                         const tf_physics_params *params, double *traj, int64_t frames,
                         int nthreads, int (*fn)(void *handle, int64_t done, int64_t total),
                         void *handle);

/* Total energy of each system: kinetic - sum_{i<j} G m_i m_j / sqrt(r^2 + eps^2). */
int tf_physics_energy_f32(const float *pos, const float *vel, const float *mass, int64_t b,
                          int64_t n, double G, double softening, int nthreads, float *out);
int tf_physics_energy_f64(const double *pos, const double *vel, const double *mass, int64_t b,
                          int64_t n, double G, double softening, int nthreads, double *out);

/* The SIMD level (TF_SIMD_*) the physics kernels run at (after the TENSORFFI_SIMD cap). */
int tf_physics_simd(void);

/* Total momentum of each system: out[s][k] = sum_i m_i v_i[k]. */
int tf_physics_momentum_f32(const float *vel, const float *mass, int64_t b, int64_t n, float *out);
int tf_physics_momentum_f64(const double *vel, const double *mass, int64_t b, int64_t n, double *out);
