/* Functions driven by tests/test_fuzz_bridge.py; see fuzzlib.h. */
#include "fuzzlib.h"
#include <math.h>
#include <string.h>

#define FZ_ID(S, T) T fz_id_##S(T v) { return v; }
FZ_ID(i8, int8_t)
FZ_ID(u8, uint8_t)
FZ_ID(i16, int16_t)
FZ_ID(u16, uint16_t)
FZ_ID(i32, int32_t)
FZ_ID(u32, uint32_t)
FZ_ID(i64, int64_t)
FZ_ID(u64, uint64_t)
FZ_ID(schar, signed char)
FZ_ID(uchar, unsigned char)
FZ_ID(short, short)
FZ_ID(int, int)
FZ_ID(uint, unsigned int)
FZ_ID(long, long)
FZ_ID(ulong, unsigned long)
FZ_ID(llong, long long)
FZ_ID(size, size_t)
FZ_ID(intptr, intptr_t)
FZ_ID(uintptr, uintptr_t)
FZ_ID(ptrdiff, ptrdiff_t)
FZ_ID(bool, bool)
FZ_ID(float, float)
FZ_ID(double, double)

double fz_mix(int8_t a, uint32_t b, int64_t c, double d, size_t e) {
    double s = (double)a;
    s += (double)b;
    s += (double)c;
    s += d;
    s += (double)e;
    return s;
}

#define FNV_OFFSET 1469598103934665603ULL
#define FNV_PRIME 1099511628211ULL

/* Integers are incremented in unsigned arithmetic (wraps; no signed overflow). */
#define FZ_INC_INT(T) (T)((uint64_t)x[i] + 1u)
#define FZ_INC_FLT(T) (T)(x[i] + 1)

#define FZ_ARRAY(S, T, INC)                                                  \
    static uint64_t hash_##S(const T *x, int64_t n) {                        \
        uint64_t h = FNV_OFFSET;                                             \
        for (int64_t i = 0; i < n; i++) {                                    \
            uint64_t e = 0;                                                  \
            memcpy(&e, &x[i], sizeof(T));                                   \
            h = (h ^ e) * FNV_PRIME;                                         \
        }                                                                    \
        return h;                                                            \
    }                                                                        \
    uint64_t fz_hash_##S(const T *x, int64_t n) { return hash_##S(x, n); }  \
    uint64_t fz_chash_##S(const T *x, int64_t n) { return hash_##S(x, n); } \
    void fz_inc_##S(T *x, int64_t n) {                                       \
        for (int64_t i = 0; i < n; i++) x[i] = INC(T);                       \
    }                                                                        \
    void fz_cinc_##S(T *x, int64_t n) {                                      \
        for (int64_t i = 0; i < n; i++) x[i] = INC(T);                       \
    }                                                                        \
    void fz_copy_##S(const T *x, T *y, int64_t n) {                          \
        for (int64_t i = 0; i < n; i++) y[i] = x[i];                         \
    }

FZ_ARRAY(i8, int8_t, FZ_INC_INT)
FZ_ARRAY(u8, uint8_t, FZ_INC_INT)
FZ_ARRAY(i16, int16_t, FZ_INC_INT)
FZ_ARRAY(u16, uint16_t, FZ_INC_INT)
FZ_ARRAY(i32, int32_t, FZ_INC_INT)
FZ_ARRAY(u32, uint32_t, FZ_INC_INT)
FZ_ARRAY(i64, int64_t, FZ_INC_INT)
FZ_ARRAY(u64, uint64_t, FZ_INC_INT)
FZ_ARRAY(f32, float, FZ_INC_FLT)
FZ_ARRAY(f64, double, FZ_INC_FLT)
FZ_ARRAY(b8, bool, FZ_INC_INT)

uint64_t fz_bytes(const void *p, int64_t nbytes) {
    const unsigned char *b = p;
    uint64_t h = FNV_OFFSET;
    for (int64_t i = 0; i < nbytes; i++) h = (h ^ b[i]) * FNV_PRIME;
    return h;
}

uint64_t fz_strided_hash(const double *x, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    uint64_t h = FNV_OFFSET;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            uint64_t e;
            memcpy(&e, &x[i * rs + j * cs], sizeof e);
            h = (h ^ e) * FNV_PRIME;
        }
    return h;
}

void fz_strided_inc(double *x, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) x[i * rs + j * cs] += 1;
}

void fz_scale2d(const double *x, double *y, int64_t rows, int64_t cols, double a) {
    for (int64_t i = 0; i < rows * cols; i++) y[i] = a * x[i];
}

void fz_add_f32(const float *a, const float *b, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void fz_dup(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[2 * i] = y[2 * i + 1] = x[i];
}

void fz_pairsum(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[2 * i] + x[2 * i + 1];
}

void fz_outer(const double *a, const double *b, double *c, int64_t m, int64_t k) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < k; j++) c[i * k + j] = a[i] * b[j];
}

void fz_iota(int64_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = i;
}

void fz_iota32(int32_t *y, int32_t n) {
    for (int32_t i = 0; i < n; i++) y[i] = i;
}

void fz_fill(double *y, int64_t count, double v) {
    for (int64_t i = 0; i < count; i++) y[i] = v;
}

uint64_t fz_hash2d(const double *x, int64_t count) { return hash_f64(x, count); }

void fz_axpy(const double *x, double *y, int64_t n, double a) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

double fz_wsum(const double *x, const double *w, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += w ? w[i] * x[i] : x[i];
    return s;
}

int fz_sqrt(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!(x[i] >= 0)) return -1; /* nothing written */
    for (int64_t i = 0; i < n; i++) y[i] = sqrt(x[i]);
    return 0;
}

void fz_norm3(const double *v, double *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double a = v[i], b = v[n + i], c = v[2 * n + i];
        out[i] = sqrt(a * a + b * b + c * c);
    }
}
