/* SPDX-License-Identifier: MIT */
/* read_csv_cpu.c — CPU time of the parser's two passes, without Python: where the time
 * goes, steadier than wall time on a shared machine.
 *
 *   gcc -O3 -fwrapv -fno-strict-aliasing -std=c11 -pthread -Icsrc \
 *       -DTF_VERSION_STR='"bench"' -DTF_COMPILER_STR='"gcc"' -DTF_FLAGS_STR='""' -DTF_NATIVE_BUILD=0 \
 *       benchmarks/read_csv_cpu.c csrc/parse*.c csrc/core.c csrc/runtime.c csrc/error.c -o /tmp/read_csv_cpu -lm
 *   TENSORFFI_SIMD=avx2 /tmp/read_csv_cpu benchmarks/_work/g9_1000000x8.csv [repeats] [f32|f64|i32|i64] [threads] [ws]
 *
 * ws: fields separated by runs of white space (TF_DELIM_WHITESPACE: read_csv's
 * delimiter=None; benchmarks/read_csv.py --whitespace writes g9ws_*.txt), else ','.
 *
 * (-fwrapv and -fno-strict-aliasing: the flags the package is built with.) Prints the
 * minimum, over the repeats, of the process CPU time of tf_parse_count and of
 * tf_parse_fill_<dtype> on the whole file (read into memory first). */
#define _GNU_SOURCE
#include "tensorffi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s file.csv [repeats] [f32|f64|i32|i64] [threads] [ws]\n", argv[0]);
        return 2;
    }
    const char *dt = argc > 3 ? argv[3] : "f32";
    int reps = argc > 2 ? atoi(argv[2]) : 5, f64 = strcmp(dt, "f64") == 0 || strcmp(dt, "i64") == 0;
    int threads = argc > 4 ? atoi(argv[4]) : 1;
    const int delim = argc > 5 && strcmp(argv[5], "ws") == 0 ? TF_DELIM_WHITESPACE : ',';
    FILE *f = fopen(argv[1], "rb");
    if (!f) return perror(argv[1]), 1;
    fseek(f, 0, SEEK_END);
    int64_t n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc((size_t)n);
    if (!data || fread(data, 1, (size_t)n, f) != (size_t)n) return fprintf(stderr, "read failed\n"), 1;
    fclose(f);
    int64_t spans[3 * 256], info[4], err[5], colmap[256];
    if (tf_parse_record(data, n, 0, 0, delim, -1, spans, 256, info, err)) return fprintf(stderr, "%s\n", tf_last_error()), 1;
    int64_t cols = info[2] < 256 ? info[2] : 256;
    for (int64_t j = 0; j < cols; j++) colmap[j] = j;
    int64_t chunk = 8 << 20, nchunks = (n - 1) / chunk + 1, rows = 0;
    int64_t *chunks = malloc((size_t)nchunks * 4 * sizeof *chunks);
    double best_count = INFINITY, best_fill = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_s();
        if (tf_parse_count(data, n, 0, delim, -1, chunk, -1, threads, chunks, nchunks, &rows, NULL, NULL))
            return fprintf(stderr, "%s\n", tf_last_error()), 1;
        double t1 = cpu_s();
        void *out = malloc((size_t)(rows * cols) * (f64 ? 8 : 4));
        memset(out, 0, (size_t)(rows * cols) * (f64 ? 8 : 4)); /* page faults outside the timing */
        double t2 = cpu_s();
        int rc;
        if (strcmp(dt, "i64") == 0)
            rc = tf_parse_fill_i64(data, n, delim, -1, chunks, nchunks, colmap, cols, out, rows, cols, 0, 0, threads,
                                   err, NULL, NULL);
        else if (strcmp(dt, "i32") == 0)
            rc = tf_parse_fill_i32(data, n, delim, -1, chunks, nchunks, colmap, cols, out, rows, cols, 0, 0, threads,
                                   err, NULL, NULL);
        else if (f64)
            rc = tf_parse_fill_f64(data, n, delim, -1, chunks, nchunks, colmap, cols, out, rows, cols, NAN, threads,
                                   err, NULL, NULL);
        else
            rc = tf_parse_fill_f32(data, n, delim, -1, chunks, nchunks, colmap, cols, out, rows, cols, NAN, threads,
                                   err, NULL, NULL);
        double t3 = cpu_s();
        free(out);
        if (rc) return fprintf(stderr, "%s\n", tf_last_error()), 1;
        if (t1 - t0 < best_count) best_count = t1 - t0;
        if (t3 - t2 < best_fill) best_fill = t3 - t2;
    }
    printf("%s (%lld rows x %lld, %s, parser SIMD level %d, %d thread%s): count %.1f ms (%.0f MB/s), "
           "fill %.1f ms (%.0f MB/s, %.2f ns/value), both %.0f MB/s of CPU time\n",
           argv[1], (long long)rows, (long long)cols, dt, tf_parse_simd(), threads,
           threads == 1 ? "" : "s", best_count * 1e3, (double)n / best_count / 1e6, best_fill * 1e3,
           (double)n / best_fill / 1e6, best_fill * 1e9 / (double)(rows * cols),
           (double)n / (best_count + best_fill) / 1e6);
    free(chunks);
    free(data);
    return 0;
}
