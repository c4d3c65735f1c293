/* Functions driven by tests/test_fuzz_bridge.py (property-based tests of the bridge).
   Every result is exact (a hash of the element bits, integer arithmetic) or a float64
   computation the test repeats element for element in NumPy. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Scalars: the identity for each C integer and floating type. */
int8_t fz_id_i8(int8_t v);
uint8_t fz_id_u8(uint8_t v);
int16_t fz_id_i16(int16_t v);
uint16_t fz_id_u16(uint16_t v);
int32_t fz_id_i32(int32_t v);
uint32_t fz_id_u32(uint32_t v);
int64_t fz_id_i64(int64_t v);
uint64_t fz_id_u64(uint64_t v);
signed char fz_id_schar(signed char v);
unsigned char fz_id_uchar(unsigned char v);
short fz_id_short(short v);
int fz_id_int(int v);
unsigned int fz_id_uint(unsigned int v);
long fz_id_long(long v);
unsigned long fz_id_ulong(unsigned long v);
long long fz_id_llong(long long v);
size_t fz_id_size(size_t v);
intptr_t fz_id_intptr(intptr_t v);
uintptr_t fz_id_uintptr(uintptr_t v);
ptrdiff_t fz_id_ptrdiff(ptrdiff_t v);
bool fz_id_bool(bool v);
float fz_id_float(float v);
double fz_id_double(double v);
/* Several scalars at once: ((((a + b) + c) + d) + e) in double. */
double fz_mix(int8_t a, uint32_t b, int64_t c, double d, size_t e);

/* Per element type (S = i8 u8 i16 u16 i32 u32 i64 u64 f32 f64 b8):
   fz_hash_S / fz_chash_S: FNV-1a over the zero-extended bits of x[0..n) (chash: contract x: [n]);
   fz_inc_S / fz_cinc_S: x[i] = x[i] + 1 in place (cinc: contract x: [n]);
   fz_copy_S: y = x (contract x: [n]; y: out [n]). */
uint64_t fz_hash_i8(const int8_t *x, int64_t n);
uint64_t fz_chash_i8(const int8_t *x, int64_t n);
void fz_inc_i8(int8_t *x, int64_t n);
void fz_cinc_i8(int8_t *x, int64_t n);
void fz_copy_i8(const int8_t *x, int8_t *y, int64_t n);
uint64_t fz_hash_u8(const uint8_t *x, int64_t n);
uint64_t fz_chash_u8(const uint8_t *x, int64_t n);
void fz_inc_u8(uint8_t *x, int64_t n);
void fz_cinc_u8(uint8_t *x, int64_t n);
void fz_copy_u8(const uint8_t *x, uint8_t *y, int64_t n);
uint64_t fz_hash_i16(const int16_t *x, int64_t n);
uint64_t fz_chash_i16(const int16_t *x, int64_t n);
void fz_inc_i16(int16_t *x, int64_t n);
void fz_cinc_i16(int16_t *x, int64_t n);
void fz_copy_i16(const int16_t *x, int16_t *y, int64_t n);
uint64_t fz_hash_u16(const uint16_t *x, int64_t n);
uint64_t fz_chash_u16(const uint16_t *x, int64_t n);
void fz_inc_u16(uint16_t *x, int64_t n);
void fz_cinc_u16(uint16_t *x, int64_t n);
void fz_copy_u16(const uint16_t *x, uint16_t *y, int64_t n);
uint64_t fz_hash_i32(const int32_t *x, int64_t n);
uint64_t fz_chash_i32(const int32_t *x, int64_t n);
void fz_inc_i32(int32_t *x, int64_t n);
void fz_cinc_i32(int32_t *x, int64_t n);
void fz_copy_i32(const int32_t *x, int32_t *y, int64_t n);
uint64_t fz_hash_u32(const uint32_t *x, int64_t n);
uint64_t fz_chash_u32(const uint32_t *x, int64_t n);
void fz_inc_u32(uint32_t *x, int64_t n);
void fz_cinc_u32(uint32_t *x, int64_t n);
void fz_copy_u32(const uint32_t *x, uint32_t *y, int64_t n);
uint64_t fz_hash_i64(const int64_t *x, int64_t n);
uint64_t fz_chash_i64(const int64_t *x, int64_t n);
void fz_inc_i64(int64_t *x, int64_t n);
void fz_cinc_i64(int64_t *x, int64_t n);
void fz_copy_i64(const int64_t *x, int64_t *y, int64_t n);
uint64_t fz_hash_u64(const uint64_t *x, int64_t n);
uint64_t fz_chash_u64(const uint64_t *x, int64_t n);
void fz_inc_u64(uint64_t *x, int64_t n);
void fz_cinc_u64(uint64_t *x, int64_t n);
void fz_copy_u64(const uint64_t *x, uint64_t *y, int64_t n);
uint64_t fz_hash_f32(const float *x, int64_t n);
uint64_t fz_chash_f32(const float *x, int64_t n);
void fz_inc_f32(float *x, int64_t n);
void fz_cinc_f32(float *x, int64_t n);
void fz_copy_f32(const float *x, float *y, int64_t n);
uint64_t fz_hash_f64(const double *x, int64_t n);
uint64_t fz_chash_f64(const double *x, int64_t n);
void fz_inc_f64(double *x, int64_t n);
void fz_cinc_f64(double *x, int64_t n);
void fz_copy_f64(const double *x, double *y, int64_t n);
uint64_t fz_hash_b8(const bool *x, int64_t n);
uint64_t fz_chash_b8(const bool *x, int64_t n);
void fz_inc_b8(bool *x, int64_t n);
void fz_cinc_b8(bool *x, int64_t n);
void fz_copy_b8(const bool *x, bool *y, int64_t n);

/* Any element type: FNV-1a over nbytes bytes. */
uint64_t fz_bytes(const void *p, int64_t nbytes);

/* Strided 2-D access: C walks the strides (in elements) it is given. */
uint64_t fz_strided_hash(const double *x, int64_t rows, int64_t cols, int64_t rs, int64_t cs);
void fz_strided_inc(double *x, int64_t rows, int64_t cols, int64_t rs, int64_t cs);

/* Contracts (see CONTRACTS in the test). */
void fz_scale2d(const double *x, double *y, int64_t rows, int64_t cols, double a);
void fz_add_f32(const float *a, const float *b, float *out, int64_t n);
void fz_dup(const double *x, double *y, int64_t n);
void fz_pairsum(const double *x, double *y, int64_t n);
void fz_outer(const double *a, const double *b, double *c, int64_t m, int64_t k);
void fz_iota(int64_t *y, int64_t n);
void fz_iota32(int32_t *y, int32_t n);
void fz_fill(double *y, int64_t count, double v);
uint64_t fz_hash2d(const double *x, int64_t count);
void fz_axpy(const double *x, double *y, int64_t n, double a);
double fz_wsum(const double *x, const double *w, int64_t n);
int fz_sqrt(const double *x, double *y, int64_t n);
void fz_norm3(const double *v, double *out, int64_t n);
