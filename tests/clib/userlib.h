/* A small "user" C library used by the bring-your-own-C and bridge tests. */
#include <stdint.h>

void process_data(float *data, int size);
double sum_f64(const double *x, int64_t n);
void add_one_i8(int8_t *x, int64_t n);
void add_one_u8(uint8_t *x, int64_t n);
void add_one_i16(int16_t *x, int64_t n);
void add_one_u16(uint16_t *x, int64_t n);
void add_one_i32(int32_t *x, int64_t n);
void add_one_i64(int64_t *x, int64_t n);
void add_one_f32(float *x, int64_t n);
void add_one_f64(double *x, int64_t n);
int64_t count_nonzero_bytes(const void *p, int64_t nbytes);
void scale_into(const float *x, float *y, int64_t rows, int64_t cols, float a);
int safe_sqrt(double x, double *out);
int32_t add_i32(int32_t a, int32_t b);
uint8_t add_u8(uint8_t a, uint8_t b);
const char *greet(void);
int64_t strlen_c(const char *s);

typedef struct job {
    const float *in;
    float *out;
    int64_t n;
    float gain;
} job;
void run_job(const job *j);
