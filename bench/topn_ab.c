/* topn_ab.c - A/B timing and phase traces of top-N + pack cubins, for
 * kernel work (bench/topn_ab.sh builds the cubins; docs/BENCHMARKS.md, runs
 * 23-48, used it). Not a benchmark of the library: it loads cubins compiled
 * from any copy of kernels/ and launches them bare, so that several
 * versions of the kernel run in one process on the same inputs.
 *
 *   topn_ab [--rows T] [--cols S] [--copies C] LABEL:CLUSTER[xTHREADS][p]:FILE.cubin ...
 *
 * For each cubin (its entry dcptopk_topn_pack, N = 384, THREADS (512) threads, CLUSTER
 * CTAs a row) and each input family (normal, normal + 100, integers 0..3,
 * half -inf at random, a causal -inf tail from a random column past S / 4),
 * it prints three medians: a call (the stream synchronised before, so the
 * host's launch gap is in it), back to back (20 launches between two events,
 * per launch, rotating over C copies of the input: by default enough that
 * they exceed the cold bound below, so that every launch reads HBM), and
 * after a memset of the cold bound queued on the stream (L2 flushed, no host
 * gap). The cold bound is bench/fixture.h's bench_cold_bytes: 4 x the
 * device's L2 (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE), at least 256 MiB; the
 * header line states it. The first cubin's outputs are the reference: every
 * other one's must be equal bit for bit ("same"), or the line says MISMATCH.
 *
 * bench/topn_empty.cu is the same entry doing nothing (nvcc -cubin -arch=sm_90a):
 * timed like the others, it shows the launch and event gap of that launch.
 * A trailing p launches that cubin with programmatic dependent launch (its
 * kernel must wait with griddepcontrol.wait before it touches memory).
 * TOPN_AB_CARVEOUT (percent) and TOPN_AB_POLICY (cluster scheduling: 0, 1
 * spread, 2 load balancing) set those launch knobs for every cubin.
 *
 * A cubin with a global `dc_trace` (bench/topn_trace.py puts one in) is also
 * traced: slot 0 and 31 of each CTA hold %globaltimer at its start and end,
 * slots 1..30 clock64 stamps; the medians over CTAs (ns since the CTA
 * started, slot 0 since the first CTA started, slot 31 the last CTA's end)
 * of 9 calls with L2 flushed are printed. */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOPN_N 384
#define TOPN_THREADS 512
/* Dynamic shared memory before the keys: at least the state any version
 * reserves for that cluster size (DC_TOPN_SHARED_BYTES: with pushes, 16 KiB
 * more a peer); more than a version needs is harmless. */
#define TOPN_STATE_BYTES(cluster) ((cluster) == 1 ? 17664u : 17664u + ((cluster) - 1u) * 16448u)
#define FAMILIES 5
#define TRACE_SLOTS 32
#define COPIES_MAX 512
/* bench/fixture.h's BENCH_COLD_MIN_BYTES and fallback L2 (this program links
 * the driver alone, not the fixture). */
#define COLD_MIN_BYTES ((size_t)256 << 20)
#define L2_FALLBACK_BYTES ((size_t)128 << 20)

static const char *const family_names[FAMILIES] = {"normal", "plus100", "integers",
                                                   "neginf", "causal"};

static void check(CUresult r, const char *call, int line)
{
    if (r == CUDA_SUCCESS)
        return;
    const char *s = NULL;
    cuGetErrorString(r, &s);
    fprintf(stderr, "topn_ab.c:%d: %s: %s\n", line, call, s ? s : "?");
    exit(1);
}
#define CK(x) check((x), #x, __LINE__)

static uint64_t rng_state = 88172645463325252ull;

static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* Rows x cols bf16 of one family. */
static void make_family(uint16_t *h, int fam, long rows, long cols)
{
    for (long t = 0; t < rows; t++) {
        const long cut = fam == 4 ? cols / 4 + (long)(urand() * (double)(cols - cols / 4)) : cols;
        for (long j = 0; j < cols; j++) {
            const double g = sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand());
            float v = (float)g;
            if (fam == 1)
                v += 100.0f;
            if (fam == 2)
                v = (float)(int)(urand() * 4.0);
            if ((fam == 3 && urand() < 0.5) || j >= cut)
                v = -INFINITY;
            h[t * cols + j] = to_bf16(v);
        }
    }
}

typedef struct run_ctx {
    long rows, cols;
    int copies;
    CUdeviceptr in[FAMILIES][COPIES_MAX];
    CUdeviceptr ends, out, flush;
    size_t flush_bytes; /* the cold bound (a multiple of 4: D32 memsets) */
    size_t out_words;
    int32_t *ref[FAMILIES], *got;
    CUstream stream;
    CUevent e0, e1;
} run_ctx;

typedef struct launch {
    CUfunction fn;
    CUlaunchConfig lc;
    CUlaunchAttribute attr[3];
    CUdeviceptr src;
    long long stride, max_len, rows;
    int chunk;
    void *params[7];
} launch;

static void launch_go(launch *l, CUdeviceptr src)
{
    l->src = src;
    CK(cuLaunchKernelEx(&l->lc, l->fn, l->params, NULL));
}

static float elapsed_us(run_ctx *r)
{
    float ms = 0.0f;
    CK(cuEventSynchronize(r->e1));
    CK(cuEventElapsedTime(&ms, r->e0, r->e1));
    return ms * 1000.0f;
}

static void trace(run_ctx *r, launch *l, CUdeviceptr tr, size_t tr_bytes, int fam, int ctas)
{
    unsigned long long *tv = malloc(sizeof *tv * (size_t)ctas * TRACE_SLOTS);
    double *per_cta = malloc(sizeof *per_cta * (size_t)ctas);
    double acc[TRACE_SLOTS][9];
    if (!tv || !per_cta) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (int rep = 0; rep < 9; rep++) {
        CK(cuMemsetD32Async(r->flush, (unsigned)rep, r->flush_bytes / 4, r->stream));
        CK(cuMemsetD8Async(tr, 0, tr_bytes, r->stream));
        launch_go(l, r->in[fam][rep % r->copies]);
        CK(cuStreamSynchronize(r->stream));
        CK(cuMemcpyDtoH(tv, tr, sizeof *tv * (size_t)ctas * TRACE_SLOTS));
        unsigned long long g0 = ~0ull;
        for (int b = 0; b < ctas; b++)
            if (tv[b * TRACE_SLOTS] && tv[b * TRACE_SLOTS] < g0)
                g0 = tv[b * TRACE_SLOTS];
        for (int p = 0; p < TRACE_SLOTS; p++) {
            double latest = 0.0;
            for (int b = 0; b < ctas; b++) {
                const unsigned long long *t = tv + (size_t)b * TRACE_SLOTS;
                /* ns per clock of this CTA, from its two timer readings */
                const double rate = t[30] > t[1] ? (double)(t[31] - t[0]) / (double)(t[30] - t[1]) : 0.0;
                double v;
                if (p == 0)
                    v = (double)(t[0] - g0);
                else if (p == TRACE_SLOTS - 1)
                    v = (double)(t[31] - g0);
                else
                    v = t[p] ? (double)(t[p] - t[1]) * rate : -1.0;
                latest = v > latest ? v : latest;
                per_cta[b] = v;
            }
            acc[p][rep] = p == TRACE_SLOTS - 1 ? latest : median(per_cta, ctas);
        }
    }
    printf("  trace ns:");
    for (int p = 0; p < TRACE_SLOTS; p++) {
        const double m = median(acc[p], 9);
        if (p == 0 || p == TRACE_SLOTS - 1 || m > 0.0)
            printf(" %d:%.0f", p, m);
    }
    printf("\n");
    free(tv);
    free(per_cta);
}

static void run_cubin(run_ctx *r, const char *label, int cluster, int threads, int pdl,
                      const char *file)
{
    CUmodule mod;
    launch l;
    memset(&l, 0, sizeof l);
    CK(cuModuleLoad(&mod, file));
    CK(cuModuleGetFunction(&l.fn, mod, "dcptopk_topn_pack"));
    CUdeviceptr tr = 0;
    size_t tr_bytes = 0;
    if (cuModuleGetGlobal(&tr, &tr_bytes, mod, "dc_trace") != CUDA_SUCCESS)
        tr = 0;
    l.chunk = (int)((r->cols + cluster - 1) / cluster + 7) / 8 * 8;
    const unsigned smem = TOPN_STATE_BYTES((unsigned)cluster) + (unsigned)l.chunk * 2u + (unsigned)l.chunk / 4u;
    CK(cuFuncSetAttribute(l.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem));
    l.stride = l.max_len = r->cols;
    l.rows = r->rows;
    void *params[7] = {&l.src, &l.stride, &l.max_len, &r->ends, &l.rows, &l.chunk, &r->out};
    memcpy(l.params, params, sizeof params);
    l.attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    l.attr[0].value.clusterDim.x = (unsigned)cluster;
    l.attr[0].value.clusterDim.y = l.attr[0].value.clusterDim.z = 1;
    /* Launch knobs under test: TOPN_AB_CARVEOUT (the function's preferred
     * shared-memory carveout, percent), TOPN_AB_POLICY (the cluster
     * scheduling policy: 0 default, 1 spread, 2 load balancing). */
    unsigned nattr = 1;
    const char *carveout = getenv("TOPN_AB_CARVEOUT"), *policy = getenv("TOPN_AB_POLICY");
    if (carveout)
        CK(cuFuncSetAttribute(l.fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, atoi(carveout)));
    if (policy) {
        l.attr[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
        l.attr[1].value.clusterSchedulingPolicyPreference = (CUclusterSchedulingPolicy)atoi(policy);
        nattr = 2;
    }
    if (pdl) {
        l.attr[nattr].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        l.attr[nattr].value.programmaticStreamSerializationAllowed = 1;
        nattr++;
    }
    l.lc.gridDimX = (unsigned)(r->rows * cluster);
    l.lc.gridDimY = l.lc.gridDimZ = 1;
    l.lc.blockDimX = (unsigned)threads;
    l.lc.blockDimY = l.lc.blockDimZ = 1;
    l.lc.sharedMemBytes = smem;
    l.lc.hStream = r->stream;
    l.lc.attrs = l.attr;
    l.lc.numAttrs = nattr;

    for (int fam = 0; fam < FAMILIES; fam++) {
        /* every output word must be written: a poisoned buffer first */
        CK(cuMemsetD32Async(r->out, 0xDEADBEEFu, r->out_words, r->stream));
        launch_go(&l, r->in[fam][0]);
        CK(cuStreamSynchronize(r->stream));
        CK(cuMemcpyDtoH(r->got, r->out, r->out_words * 4));
        const char *verdict = "ref";
        if (!r->ref[fam]) {
            r->ref[fam] = malloc(r->out_words * 4);
            if (!r->ref[fam]) {
                fprintf(stderr, "out of host memory\n");
                exit(1);
            }
            memcpy(r->ref[fam], r->got, r->out_words * 4);
        } else {
            verdict = memcmp(r->ref[fam], r->got, r->out_words * 4) ? "MISMATCH" : "same";
        }
        double call[30], b2b[10], flushed[30];
        for (int w = 0; w < 5; w++)
            launch_go(&l, r->in[fam][w % r->copies]);
        for (int i = 0; i < 30; i++) {
            CK(cuStreamSynchronize(r->stream));
            CK(cuEventRecord(r->e0, r->stream));
            launch_go(&l, r->in[fam][i % r->copies]);
            CK(cuEventRecord(r->e1, r->stream));
            call[i] = elapsed_us(r);
        }
        for (int i = 0; i < 10; i++) {
            CK(cuEventRecord(r->e0, r->stream));
            for (int j = 0; j < 20; j++)
                launch_go(&l, r->in[fam][j % r->copies]);
            CK(cuEventRecord(r->e1, r->stream));
            b2b[i] = elapsed_us(r) / 20.0;
        }
        for (int i = 0; i < 30; i++) {
            CK(cuMemsetD32Async(r->flush, (unsigned)i, r->flush_bytes / 4, r->stream));
            CK(cuEventRecord(r->e0, r->stream));
            launch_go(&l, r->in[fam][0]);
            CK(cuEventRecord(r->e1, r->stream));
            flushed[i] = elapsed_us(r);
        }
        printf("%-14s %-9s %9.2f %9.2f %9.2f  %s\n", label, family_names[fam], median(call, 30),
               median(b2b, 10), median(flushed, 30), verdict);
        if (tr)
            trace(r, &l, tr, tr_bytes, fam, (int)(r->rows * cluster));
    }
    CK(cuModuleUnload(mod));
}

static void usage(void)
{
    fprintf(stderr, "usage: topn_ab [--rows T] [--cols S] [--copies C] LABEL:CLUSTER[xTHREADS][p]:FILE.cubin ...\n"
                    "  defaults: 64 rows of 131072 columns; copies of each input (1..512): enough\n"
                    "  that the copies of one family exceed 4 x the L2 (at least 256 MiB)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    run_ctx r;
    memset(&r, 0, sizeof r);
    r.rows = 64;
    r.cols = 131072;
    r.copies = 0; /* from the L2 size, below */
    int first = 1;
    for (; first + 1 < argc && strncmp(argv[first], "--", 2) == 0; first += 2) {
        const long v = strtol(argv[first + 1], NULL, 10);
        if (strcmp(argv[first], "--rows") == 0 && v > 0)
            r.rows = v;
        else if (strcmp(argv[first], "--cols") == 0 && v >= 8 && v <= 131072)
            r.cols = v;
        else if (strcmp(argv[first], "--copies") == 0 && v >= 1 && v <= COPIES_MAX)
            r.copies = (int)v;
        else
            usage();
    }
    if (first >= argc)
        usage();

    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    const size_t elems = (size_t)r.rows * (size_t)r.cols;
    /* The flush and the back-to-back launches' copies must exceed the L2
     * with a margin, or the decode shapes' rows are read from it. */
    int l2_attr = 0;
    CK(cuDeviceGetAttribute(&l2_attr, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
    const size_t l2 = l2_attr > 0 ? (size_t)l2_attr : L2_FALLBACK_BYTES;
    if (l2_attr <= 0)
        fprintf(stderr, "topn_ab: the device's L2 size is unknown; assuming 128 MiB\n");
    r.flush_bytes = 4 * l2 > COLD_MIN_BYTES ? 4 * l2 : COLD_MIN_BYTES;
    if (r.copies == 0) {
        const size_t want = r.flush_bytes / (elems * 2) + 1;
        if (want > COPIES_MAX) {
            fprintf(stderr, "topn_ab: %zu copies of %zu bytes needed to exceed %zu bytes; "
                            "at most %d: pass --copies or more rows\n",
                    want, elems * 2, r.flush_bytes, COPIES_MAX);
            return 2;
        }
        r.copies = (int)want;
    }
    uint16_t *h = malloc(elems * 2);
    int32_t *ends = malloc(sizeof *ends * (size_t)r.rows);
    r.out_words = (size_t)r.rows * (TOPN_N + TOPN_N / 32);
    r.got = malloc(r.out_words * 4);
    if (!h || !ends || !r.got) {
        fprintf(stderr, "out of host memory\n");
        return 1;
    }
    for (int fam = 0; fam < FAMILIES; fam++)
        for (int c = 0; c < r.copies; c++) {
            make_family(h, fam, r.rows, r.cols);
            CK(cuMemAlloc(&r.in[fam][c], elems * 2));
            CK(cuMemcpyHtoD(r.in[fam][c], h, elems * 2));
        }
    for (long t = 0; t < r.rows; t++)
        ends[t] = (int32_t)r.cols;
    CK(cuMemAlloc(&r.ends, sizeof *ends * (size_t)r.rows));
    CK(cuMemcpyHtoD(r.ends, ends, sizeof *ends * (size_t)r.rows));
    CK(cuMemAlloc(&r.out, r.out_words * 4));
    CK(cuMemAlloc(&r.flush, r.flush_bytes));
    CK(cuStreamCreate(&r.stream, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&r.e0, 0));
    CK(cuEventCreate(&r.e1, 0));

    printf("%ld x %ld, N = %d, %d copies (%.1f MiB), L2 %.1f MiB%s, flush %.1f MiB: "
           "call / back to back / L2 flushed, us (medians)\n",
           r.rows, r.cols, TOPN_N, r.copies,
           (double)r.copies * (double)(elems * 2) / 1048576.0, (double)l2 / 1048576.0,
           l2_attr > 0 ? "" : " (assumed)", (double)r.flush_bytes / 1048576.0);
    printf("%-14s %-9s %9s %9s %9s  %s\n", "version", "family", "call", "b2b", "flushed", "output");
    for (int a = first; a < argc; a++) {
        char label[64], file[512];
        char shape[32];
        int cluster = 0, threads = TOPN_THREADS, n = 0, pdl = 0;
        const int parsed = sscanf(argv[a], "%63[^:]:%31[^:]:%511s", label, shape, file) == 3 &&
                           (sscanf(shape, "%dx%d%n", &cluster, &threads, &n) == 2 ||
                            sscanf(shape, "%d%n", &cluster, &n) == 1);
        if (parsed && shape[n] == 'p') {
            pdl = 1;
            n++;
        }
        if (!parsed || shape[n] != '\0' ||
            (cluster != 1 && cluster != 2 && cluster != 4 && cluster != 8) ||
            threads < 256 || threads > 1024 || threads % 32 != 0) {
            fprintf(stderr,
                    "argument %d = \"%s\": want LABEL:CLUSTER(1, 2, 4, 8)[xTHREADS(256..1024)][p]:FILE.cubin\n",
                    a, argv[a]);
            return 2;
        }
        run_cubin(&r, label, cluster, threads, pdl, file);
    }
    return 0;
}
