#include "userlib.h"
#include <math.h>
#include <string.h>

void process_data(float *data, int size) { for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f; }
double sum_f64(const double *x, int64_t n) { double s = 0; for (int64_t i = 0; i < n; i++) s += x[i]; return s; }
#define ADD_ONE(name, T) void name(T *x, int64_t n) { for (int64_t i = 0; i < n; i++) x[i] = (T)(x[i] + 1); }
ADD_ONE(add_one_i8, int8_t)
ADD_ONE(add_one_u8, uint8_t)
ADD_ONE(add_one_i16, int16_t)
ADD_ONE(add_one_u16, uint16_t)
ADD_ONE(add_one_i32, int32_t)
ADD_ONE(add_one_i64, int64_t)
ADD_ONE(add_one_f32, float)
ADD_ONE(add_one_f64, double)
int64_t count_nonzero_bytes(const void *p, int64_t nbytes) {
    const unsigned char *b = p; int64_t c = 0;
    for (int64_t i = 0; i < nbytes; i++) c += b[i] != 0;
    return c;
}
void scale_into(const float *x, float *y, int64_t rows, int64_t cols, float a) {
    for (int64_t i = 0; i < rows * cols; i++) y[i] = a * x[i];
}
int safe_sqrt(double x, double *out) { if (x < 0) return -1; *out = sqrt(x); return 0; }
int32_t add_i32(int32_t a, int32_t b) { return a + b; }
uint8_t add_u8(uint8_t a, uint8_t b) { return (uint8_t)(a + b); }
const char *greet(void) { return "hello from C"; }
int64_t strlen_c(const char *s) { return (int64_t)strlen(s); }
void run_job(const job *j) { for (int64_t i = 0; i < j->n; i++) j->out[i] = j->gain * j->in[i]; }
