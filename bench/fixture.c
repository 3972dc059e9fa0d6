/* fixture.c - the benchmark programs' shared pieces (see fixture.h). */
#include "fixture.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime.h"

void bench_die(dcptopk_context *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %s\n", dcptopk_last_error(ctx));
    exit(1);
}

uint64_t bench_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double bench_uniform(uint64_t *state)
{
    return (double)(bench_rand(state) >> 11) * (1.0 / 9007199254740992.0);
}

uint16_t bench_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

uint16_t bench_normal_bf16(uint64_t *state)
{
    /* Irwin-Hall: 4 uniforms have mean 2 and variance 1/3. */
    float s = 0;
    for (int i = 0; i < 4; i++)
        s += (float)(bench_rand(state) >> 40) / (float)(1ull << 24);
    return bench_bf16((s - 2.0f) * 1.7320508f);
}

int bench_cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int bench_gpu_open(bench_gpu *g, const dcptopk_context_config *cfg,
                   const char *no_device)
{
    memset(g, 0, sizeof *g);
    if (dcptopk_device_count() == 0) {
        printf("%s\n", no_device);
        return 0;
    }
    dcptopk_context_config defaults = DCPTOPK_CONTEXT_CONFIG_INIT;
    dcptopk_context *ctx = NULL;
    if (dcptopk_context_create(cfg ? cfg : &defaults, &ctx))
        DIE("context");
    if (dc_stream_create(ctx, &g->stream))
        DIE("stream");
    g->ctx = ctx;
    return 1;
}

void bench_gpu_close(bench_gpu *g)
{
    if (g->ctx) {
        dc_stream_destroy(g->ctx, g->stream);
        dcptopk_context_destroy(g->ctx);
    }
    memset(g, 0, sizeof *g);
}

size_t bench_l2_bytes(const bench_gpu *g)
{
    static int said; /* the fallback is reported once a process */
    const int32_t l2 = dc_ctx_l2_bytes(g->ctx);
    if (l2 > 0)
        return (size_t)l2;
    if (!said) {
        fprintf(stderr, "bench: the device's L2 size is unknown; assuming "
                        "128 MiB\n");
        said = 1;
    }
    return (size_t)128 << 20;
}

size_t bench_cold_bytes(const bench_gpu *g)
{
    const size_t four = 4 * bench_l2_bytes(g);
    return four > BENCH_COLD_MIN_BYTES ? four : BENCH_COLD_MIN_BYTES;
}

int bench_cold_copies(const bench_gpu *g, size_t copy_bytes, int min, int max,
                      const char *what)
{
    dcptopk_context *ctx = g->ctx;
    assert(copy_bytes > 0 && min <= max);
    const size_t n = bench_cold_bytes(g) / copy_bytes + 1;
    if (n > (size_t)max)
        DIE("%s: %zu copies of %zu bytes needed to exceed the L2 bound (%zu "
            "bytes); at most %d fit", what, n, copy_bytes, bench_cold_bytes(g), max);
    return n < (size_t)min ? min : (int)n;
}

void bench_print_cold(const bench_gpu *g, const char *program)
{
    const size_t l2 = bench_l2_bytes(g), cold = bench_cold_bytes(g);
    const int known = dc_ctx_l2_bytes(g->ctx) > 0;
    printf("%s: L2 %.1f MiB%s; cold inputs: flushes write %.1f MiB, "
           "rotations span more\n",
           program, (double)l2 / 1048576.0, known ? "" : " (assumed)",
           (double)cold / 1048576.0);
    printf("JSON {\"bench\": \"cold_inputs\", \"program\": \"%s\", "
           "\"l2_bytes\": %zu, \"l2_known\": %s, \"cold_bytes\": %zu}\n",
           program, l2, known ? "true" : "false", cold);
    fflush(stdout);
}

void bench_time_calls(const bench_gpu *g, bench_fn fn, void *user,
                      bench_fn prep, void *prep_user, int warmup, int n,
                      double *us)
{
    dcptopk_context *ctx = g->ctx;
    void *e0 = NULL, *e1 = NULL;
    if (dc_event_create(ctx, &e0) || dc_event_create(ctx, &e1))
        DIE("events");
    for (int i = 0; i < warmup + n; i++) {
        float ms = 0;
        if (prep && prep(prep_user, i))
            DIE("before call %d", i);
        if (dc_event_record(ctx, e0, g->stream) || fn(user, i) ||
            dc_event_record(ctx, e1, g->stream) ||
            dc_stream_sync(ctx, g->stream) ||
            dc_event_elapsed_ms(ctx, e0, e1, &ms))
            DIE("call %d", i);
        if (i >= warmup)
            us[i - warmup] = 1000.0 * (double)ms;
    }
    dc_event_destroy(ctx, e0);
    dc_event_destroy(ctx, e1);
    qsort(us, (size_t)n, sizeof *us, bench_cmp_double);
}

dcptopk_result bench_batch_run(void *batch, int iter)
{
    const bench_batch *b = batch;
    dcptopk_result r = DCPTOPK_SUCCESS;
    for (int j = 0; j < b->batch && !r; j++)
        r = b->fn(b->user, iter * b->batch + j);
    return r;
}

double bench_b2b_us(const bench_gpu *g, bench_fn fn, void *user, int batch,
                    int warmup, int batches)
{
    double us[64];
    bench_batch b = {fn, user, batch};
    if (batches > 64)
        batches = 64;
    bench_time_calls(g, bench_batch_run, &b, NULL, NULL, warmup, batches, us);
    return us[batches / 2] / batch;
}

void bench_b2b_pdl_us(const bench_gpu *g, bench_fn fn, void *user, double us[2])
{
    for (int off = 0; off < 2; off++) {
        dc_ctx_set_pdl(g->ctx, !off);
        us[off] = bench_b2b_us(g, fn, user, 20, 1, 9);
    }
    dc_ctx_set_pdl(g->ctx, 1);
}
