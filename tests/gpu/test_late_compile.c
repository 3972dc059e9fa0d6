/* test_late_compile.c - what a context says about kernels that warmup
 * missed: a launch after warmup that must load a kernel counts it in
 * late_compiles / late_loads (before any warmup nothing is late), and a
 * launch that would compile inside CUDA graph capture is refused with
 * DCPTOPK_NOT_WARMED naming the fix, unless DCPTOPK_CAPTURE_COMPILE=1. */
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "gpu_util.h"
#include "harness.h"
#include "runtime.h"

static dcptopk_merge_config pair_config(int32_t k)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.kind = DCPTOPK_MERGE_PAIR;
    c.topk = k;
    c.local_topk = k;
    c.world_size = 2;
    c.block_size = 64;
    c.interleave = 1;
    c.emit_ids = 1;
    return c;
}

/* One pair select of 4 rows over zeroed candidates (every score 0.0). */
static dcptopk_result select_once(dcptopk_context *ctx, uint64_t buf,
                                  int32_t k, void *stream)
{
    dcptopk_merge_config c = pair_config(k);
    dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    int32_t *p = (int32_t *)(uintptr_t)buf;
    a.candidates = p;
    a.rows = 4;
    a.ids_out = p + 2 * 4 * 2 * 4096; /* past [W=2, T=4, K<=4096, 2] */
    a.stream = stream;
    return dcptopk_pair_select(ctx, &c, &a);
}

static dcptopk_result warm(dcptopk_context *ctx, int32_t k)
{
    dcptopk_merge_config c = pair_config(k);
    return dcptopk_warmup(ctx, &c, NULL, NULL, NULL);
}

static dcptopk_context_stats stats_of(dcptopk_context *ctx)
{
    dcptopk_context_stats s = DCPTOPK_CONTEXT_STATS_INIT;
    if (dcptopk_context_stats_get(ctx, &s) != DCPTOPK_SUCCESS)
        memset(&s, 0xff, sizeof s); /* fails every check below */
    return s;
}

TEST(late_loads_counted_after_warmup_only)
{
    GPU_CTX(ctx);
    uint64_t buf = gpu_alloc(ctx, 1 << 20);
    CHECK(buf != 0);
    /* Before any warmup a launch may compile: nothing is late yet. */
    CHECK_OK(select_once(ctx, buf, 512, NULL));
    dcptopk_context_stats s = stats_of(ctx);
    CHECK_EQ(s.late_compiles, 0);
    CHECK_EQ(s.late_loads, 0);
    CHECK(s.compiles >= 1);

    CHECK_OK(warm(ctx, 1024));
    CHECK_OK(select_once(ctx, buf, 1024, NULL)); /* warmed: not late */
    CHECK_OK(select_once(ctx, buf, 512, NULL));  /* loaded before: not late */
    s = stats_of(ctx);
    CHECK_EQ(s.late_compiles, 0);
    CHECK_EQ(s.late_loads, 0);

    /* K = 2048 was never warmed: its first launch compiles (the cache is in
     * memory), and only the first. */
    uint64_t compiles = s.compiles;
    CHECK_OK(select_once(ctx, buf, 2048, NULL));
    CHECK_OK(select_once(ctx, buf, 2048, NULL));
    CHECK_OK(dc_stream_sync(ctx, NULL));
    s = stats_of(ctx);
    CHECK(s.late_compiles >= 1);
    CHECK_EQ(s.late_compiles, s.compiles - compiles);
    CHECK_EQ(s.late_loads, 0);
    gpu_free(ctx, buf);
    dcptopk_context_destroy(ctx);
}

TEST(compile_inside_capture_refused)
{
    GPU_CTX(ctx);
    uint64_t buf = gpu_alloc(ctx, 1 << 20);
    CHECK(buf != 0);
    void *stream = NULL, *exec = NULL;
    CHECK_OK(dc_stream_create(ctx, &stream));
    CHECK_OK(warm(ctx, 1024));
    unsetenv("DCPTOPK_CAPTURE_COMPILE");

    CHECK_OK(dc_graph_begin(ctx, stream));
    CHECK_OK(select_once(ctx, buf, 1024, stream)); /* warmed: captured */
    CHECK_EQ(select_once(ctx, buf, 512, stream), DCPTOPK_NOT_WARMED);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "capturing a CUDA graph");
    CHECK_CONTAINS(dcptopk_last_error(ctx), "DCPTOPK_CAPTURE_COMPILE=1");
    CHECK_CONTAINS(dcptopk_last_error(ctx), "pair_select(");
    /* The refusal happened before anything was enqueued: the capture holds
     * the warmed launch and still instantiates and replays. */
    CHECK_OK(dc_graph_end(ctx, stream, &exec));
    CHECK_OK(dc_graph_launch(ctx, exec, stream));
    CHECK_OK(dc_stream_sync(ctx, stream));
    dc_graph_destroy(ctx, exec);
    exec = NULL;
    dcptopk_context_stats s = stats_of(ctx);
    CHECK_EQ(s.late_compiles, 0);

    /* Opted in: the same launch compiles inside capture, and is counted. */
    setenv("DCPTOPK_CAPTURE_COMPILE", "1", 1);
    CHECK_OK(dc_graph_begin(ctx, stream));
    CHECK_OK(select_once(ctx, buf, 512, stream));
    CHECK_OK(dc_graph_end(ctx, stream, &exec));
    unsetenv("DCPTOPK_CAPTURE_COMPILE");
    CHECK_OK(dc_graph_launch(ctx, exec, stream));
    CHECK_OK(dc_stream_sync(ctx, stream));
    s = stats_of(ctx);
    CHECK(s.late_compiles >= 1);
    dc_graph_destroy(ctx, exec);
    dc_stream_destroy(ctx, stream);
    gpu_free(ctx, buf);
    dcptopk_context_destroy(ctx);
}

