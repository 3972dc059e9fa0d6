/*
 * fixture.h - what the benchmark programs (bench/bench_*.c) share: seeded
 * inputs, bf16 rounding, the clock, the context and stream of a GPU run, and
 * the loop that times calls between two CUDA events.
 *
 * Each program keeps its own seed and its own median (the upper middle, or
 * the mean of the two middle values), so its numbers stay comparable with
 * its earlier runs.
 */
#ifndef DC_BENCH_FIXTURE_H
#define DC_BENCH_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "dcptopk.h"

/* Prints "<what>: <the last error of ctx>" (ctx may be NULL: the thread's
 * last error) to stderr and exits 1. */
void bench_die(dcptopk_context *ctx, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));
/* bench_die with the `ctx` in scope, as every program names its context. */
#define DIE(...) bench_die(ctx, __VA_ARGS__)
#define DIE_IF(cond, ...)                                                      \
    do {                                                                       \
        if (cond)                                                              \
            DIE(__VA_ARGS__);                                                  \
    } while (0)

/* splitmix64: the next number of the stream `*state`. */
uint64_t bench_rand(uint64_t *state);
/* Uniform in [0, 1), 53 bits. */
double bench_uniform(uint64_t *state);
/* f32 to bf16 bits, rounded to nearest even (no NaN comes in). */
uint16_t bench_bf16(float f);
/* About N(0,1) as bf16 bits: the sum of 4 uniforms, centred and scaled
 * (cheap enough for hundreds of millions of values). */
uint16_t bench_normal_bf16(uint64_t *state);

/* qsort comparisons, ascending. */
int bench_cmp_float(const void *a, const void *b);
int bench_cmp_double(const void *a, const void *b);

/* The monotonic clock, in microseconds. */
double bench_now_us(void);

/* The context of a GPU benchmark and the stream its calls run on. */
typedef struct bench_gpu {
    dcptopk_context *ctx;
    void *stream;
} bench_gpu;

/* Without a CUDA device prints `no_device` (one line, to stdout) and
 * returns 0: nothing to measure. Else creates the context (cfg NULL: the
 * defaults) and a stream, and returns 1; exits saying why when either
 * fails. */
int bench_gpu_open(bench_gpu *g, const dcptopk_context_config *cfg,
                   const char *no_device);
void bench_gpu_close(bench_gpu *g);

/* Cold inputs. A timed call reads cold data when, before it, either a
 * flush wrote bench_cold_bytes or the inputs rotated over copies spanning
 * more than that. Both are sized from the device's L2, so that a larger L2
 * (a B200's) is not left holding the inputs. */
#define BENCH_COLD_MIN_BYTES ((size_t)256 << 20)

/* The device's L2 in bytes (dc_ctx_l2_bytes); 128 MiB, said once on
 * stderr, when the runtime cannot tell: too large errs on the cold side. */
size_t bench_l2_bytes(const bench_gpu *g);
/* 4 x the L2 (a margin: its replacement policy is not documented, so one
 * L2's worth of other data need not evict all of it), never below
 * BENCH_COLD_MIN_BYTES, the flush that the H100 and H200 figures were
 * measured with. */
size_t bench_cold_bytes(const bench_gpu *g);
/* How many copies of copy_bytes (> 0) to rotate over: enough to exceed
 * bench_cold_bytes together, at least `min`; exits naming `what` when that
 * is more than `max` (the caller's arrays). */
int bench_cold_copies(const bench_gpu *g, size_t copy_bytes, int min, int max,
                      const char *what);
/* Prints the L2 size and the cold bound a program uses, as a line of text
 * and a `JSON {"bench": "cold_inputs", ...}` record naming `program`. */
void bench_print_cold(const bench_gpu *g, const char *program);

/* One unit of work enqueued on the stream: call number `iter` (0 for the
 * first warm-up). */
typedef dcptopk_result (*bench_fn)(void *user, int iter);

/* Runs warmup + n calls of fn(user, i), each between two events on g's
 * stream and waited for. prep(prep_user, i), when given, comes first,
 * outside the timed span (an L2 flush, a counter reset). The device times
 * of the last n calls, in microseconds and sorted ascending, go to
 * us[0 .. n). Exits saying which call failed when one does. */
void bench_time_calls(const bench_gpu *g, bench_fn fn, void *user,
                      bench_fn prep, void *prep_user, int warmup, int n,
                      double *us);

/* `batch` calls of fn as one unit of work: bench_batch_run(&b, i) makes
 * calls fn(user, i * batch + j), j < batch, stopping at a failure. */
typedef struct bench_batch {
    bench_fn fn;
    void *user;
    int batch;
} bench_batch;
dcptopk_result bench_batch_run(void *batch, int iter);

/* Per-call time, in microseconds, of fn's calls `batch` at a time between
 * two events (back to back: no host gap between launches, what a CUDA graph
 * or a busy stream sees): the median of `batches` batches (at most 64)
 * after `warmup` untimed ones. Call i of batch b is fn(user, b * batch + i),
 * warm-up batches counted first. */
double bench_b2b_us(const bench_gpu *g, bench_fn fn, void *user, int batch,
                    int warmup, int batches);

/* The A/B of programmatic dependent launch: bench_b2b_us of 20 calls a
 * batch (the median of 9, one warm-up batch) with the context's dependent
 * launches on (us[0]) and off, in plain stream order (us[1]); leaves them
 * on. */
void bench_b2b_pdl_us(const bench_gpu *g, bench_fn fn, void *user, double us[2]);

#endif /* DC_BENCH_FIXTURE_H */
