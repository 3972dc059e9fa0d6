/* test_exchange_ipc.c - the push exchange across processes on one GPU: W
 * forked processes, each with its own context and buffers, exchange CUDA IPC
 * handles (cuIpcGetMemHandle, through pipes to the parent) and open their
 * peers' gathered buffers and flags, then run consecutive calls whose rows
 * every process can recompute (a hash of rank, call and word), comparing
 * every slot each call. Also: a process that stops calling (alive, so its
 * memory stays mapped) makes the others report the timeout.
 *
 * Processes on one GPU share it by time slices, so waits are slow: the bound
 * is generous. The driver's IPC calls are looked up with dlsym (the library
 * has no IPC yet; group/ brings peer memory). Skips without a GPU. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exchange_push.h"
#include "gpu_util.h"
#include "harness.h"

#define IPC_MAX 8

typedef struct ipc_handle {
    unsigned char bytes[64]; /* CUipcMemHandle */
} ipc_handle;

typedef struct ipc_record {
    int32_t rank;
    ipc_handle gathered, flags;
} ipc_record;

typedef int (*ipc_get_fn)(ipc_handle *, unsigned long long);
typedef int (*ipc_open_fn)(unsigned long long *, ipc_handle, unsigned int);
typedef int (*ipc_close_fn)(unsigned long long);

static int32_t word_of(int32_t rank, uint64_t n, size_t i)
{
    uint64_t s = ((uint64_t)rank << 56) ^ (n << 32) ^ (uint64_t)i;
    return (int32_t)test_rand(&s);
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t k = read(fd, c, n);
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

enum { MAX_ROWS = 64, ROW_WORDS = 396 };

/* One rank's process. Exit: 0 as expected, 1 wrong, 77 no GPU. `stop`: the
 * last call this rank makes (then it waits for the parent, alive); the
 * others expect a timeout at call stop + 1 naming it. */
static int child(int32_t w, int32_t rank, int calls, int stop, int32_t stopper, int up,
                 int down)
{
    const char *why = NULL;
    int skip = 0;
    dcptopk_context *ctx = gpu_ctx_create(&why, &skip);
    if (!ctx) {
        ipc_record none;
        memset(&none, 0, sizeof none);
        none.rank = -1;
        write_all(up, &none, sizeof none);
        return skip ? 77 : 1;
    }
    void *cu = dlopen("libcuda.so.1", RTLD_NOW);
    ipc_get_fn get = cu ? (ipc_get_fn)dlsym(cu, "cuIpcGetMemHandle") : NULL;
    ipc_open_fn open_h = cu ? (ipc_open_fn)dlsym(cu, "cuIpcOpenMemHandle_v2") : NULL;
    ipc_close_fn close_h = cu ? (ipc_close_fn)dlsym(cu, "cuIpcCloseMemHandle") : NULL;
    if (!open_h && cu)
        open_h = (ipc_open_fn)dlsym(cu, "cuIpcOpenMemHandle");
    const size_t gbytes = dc_push_exchange_gathered_bytes(w, MAX_ROWS, ROW_WORDS);
    uint64_t g = gpu_alloc(ctx, gbytes), f = gpu_alloc(ctx, dc_push_exchange_flags_bytes(w));
    uint64_t ctl = gpu_alloc(ctx, sizeof(dc_exchange_ctl));
    uint64_t src = gpu_alloc(ctx, (size_t)MAX_ROWS * ROW_WORDS * 4);
    int32_t *rows_h = malloc((size_t)MAX_ROWS * ROW_WORDS * 4);
    int32_t *got = malloc(gbytes / 2);
    void *stream = NULL;
    ipc_record me;
    memset(&me, 0, sizeof me);
    me.rank = rank;
    if (!get || !open_h || !close_h || !g || !f || !ctl || !src || !rows_h || !got ||
        dc_ctx_enter(ctx) || dc_stream_create(ctx, &stream) || get(&me.gathered, g) ||
        get(&me.flags, f)) {
        fprintf(stderr, "rank %d: setup failed: %s\n", rank, dcptopk_last_error(ctx));
        me.rank = -1;
        write_all(up, &me, sizeof me);
        return 1;
    }
    if (write_all(up, &me, sizeof me))
        return 1;
    ipc_record all[IPC_MAX];
    if (read_all(down, all, sizeof(ipc_record) * (size_t)w))
        return 1;
    dc_push_exchange x;
    memset(&x, 0, sizeof x);
    x.world_size = w;
    x.rank = rank;
    x.max_rows = MAX_ROWS;
    x.row_words = ROW_WORDS;
    x.src = (const int32_t *)(uintptr_t)src;
    x.ctl = ctl;
    x.timeout_ns = 20000000000ull; /* 20 s: time slices */
    for (int32_t r = 0; r < w; r++) {
        if (r == rank) {
            x.peer_gathered[r] = g;
            x.peer_flags[r] = f;
            continue;
        }
        unsigned long long pg = 0, pf = 0;
        if (open_h(&pg, all[r].gathered, 1u) || open_h(&pf, all[r].flags, 1u)) {
            fprintf(stderr, "rank %d: cuIpcOpenMemHandle of rank %d failed\n", rank, r);
            return 1;
        }
        x.peer_gathered[r] = pg;
        x.peer_flags[r] = pf;
    }
    /* Barrier: every process has zeroed and mapped its buffers. */
    char b = 1;
    if (write_all(up, &b, 1) || read_all(down, &b, 1))
        return 1;
    if (stopper == rank)
        x.timeout_ns = 2000000000ull;
    else if (stopper >= 0)
        x.timeout_ns = 3000000000ull;
    int rc = 0;
    for (int n = 1; n <= calls && rc == 0; n++) {
        if (rank == stopper && n > stop)
            break;
        x.rows = (n * 7) % (MAX_ROWS + 1);
        const size_t words = (size_t)x.rows * ROW_WORDS;
        for (size_t i = 0; i < words; i++)
            rows_h[i] = word_of(rank, (uint64_t)n, i);
        x.expect_seq = (uint64_t)n;
        if ((words && dc_memcpy_htod(ctx, src, rows_h, words * 4)) ||
            dc_push_exchange_launch(ctx, &x, stream)) {
            fprintf(stderr, "rank %d call %d: %s\n", rank, n, dcptopk_last_error(ctx));
            rc = 1;
            break;
        }
        uint32_t code = 0;
        char msg[512];
        if (dc_push_exchange_status(ctx, ctl, rank, x.timeout_ns, stream, &code, msg,
                                    sizeof msg)) {
            rc = 1;
            break;
        }
        if (stopper >= 0 && n == stop + 1) {
            /* The stopped rank never stores call n: a timeout naming it. */
            dc_exchange_ctl c;
            if (code != DC_EXCHANGE_STATUS_TIMEOUT ||
                gpu_download(ctx, &c, ctl, sizeof c) || c.status[1] != (uint32_t)stopper) {
                fprintf(stderr, "rank %d call %d: status %u (%s), expected a timeout\n",
                        rank, n, code, msg);
                rc = 1;
            }
            break;
        }
        if (code) {
            fprintf(stderr, "rank %d call %d: %s\n", rank, n, msg);
            rc = 1;
            break;
        }
        const uint64_t par =
            dc_push_exchange_parity(g, (uint64_t)n, w, MAX_ROWS, ROW_WORDS);
        if (gpu_download(ctx, got, par, gbytes / 2)) {
            rc = 1;
            break;
        }
        for (int32_t s = 0; s < w && rc == 0; s++)
            for (size_t i = 0; i < words; i++)
                if (got[(size_t)s * MAX_ROWS * ROW_WORDS + i] != word_of(s, (uint64_t)n, i)) {
                    fprintf(stderr, "rank %d call %d: slot of rank %d, word %zu wrong\n",
                            rank, n, s, i);
                    rc = 1;
                    break;
                }
    }
    /* Done: tell the parent, and stay alive (mapped) until every rank is. */
    b = (char)rc;
    write_all(up, &b, 1);
    read_all(down, &b, 1);
    for (int32_t r = 0; r < w; r++)
        if (r != rank) {
            close_h(x.peer_gathered[r]);
            close_h(x.peer_flags[r]);
        }
    return rc;
}

/* Forks W processes and relays their handles; 0 passed, 1 failed, 77 skip. */
static int run_world(int32_t w, int calls, int stop, int32_t stopper)
{
    int up[IPC_MAX][2], down[IPC_MAX][2];
    pid_t pid[IPC_MAX];
    fflush(stdout);
    fflush(stderr);
    for (int32_t r = 0; r < w; r++) {
        if (pipe(up[r]) || pipe(down[r]))
            return 1;
        pid[r] = fork();
        if (pid[r] < 0)
            return 1;
        if (pid[r] == 0) {
            close(up[r][0]);
            close(down[r][1]);
            _exit(child(w, r, calls, stop, stopper, up[r][1], down[r][0]));
        }
        close(up[r][1]);
        close(down[r][0]);
    }
    ipc_record all[IPC_MAX];
    int broken = 0;
    for (int32_t r = 0; r < w; r++)
        if (read_all(up[r][0], &all[r], sizeof all[r]) || all[r].rank != r)
            broken = 1;
    char b = 1;
    if (!broken) {
        for (int32_t r = 0; r < w; r++)
            write_all(down[r][1], all, sizeof(ipc_record) * (size_t)w);
        for (int32_t r = 0; r < w; r++)
            if (read_all(up[r][0], &b, 1))
                broken = 1;
        for (int32_t r = 0; r < w; r++)
            write_all(down[r][1], &b, 1); /* go */
        for (int32_t r = 0; r < w; r++)
            read_all(up[r][0], &b, 1); /* done */
    }
    for (int32_t r = 0; r < w; r++) {
        close(down[r][1]); /* release: every child may exit */
        close(up[r][0]);
    }
    int skipped = 0, failed = broken;
    for (int32_t r = 0; r < w; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
            skipped++;
        else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d: exit status %d\n", r, st);
            failed = 1;
        }
    }
    if (skipped == w)
        return 77;
    return failed;
}

static void world_test(int32_t w, int calls, int stop, int32_t stopper)
{
    const int r = run_world(w, calls, stop, stopper);
    if (r == 77)
        SKIP("no CUDA device");
    CHECK_EQ(r, 0);
}

TEST(processes_w2_100_calls) { world_test(2, 100, 0, -1); }
TEST(processes_w3_100_calls) { world_test(3, 100, 0, -1); }
TEST(processes_w4_100_calls) { world_test(4, 100, 0, -1); }
TEST(processes_w8_100_calls) { world_test(8, 100, 0, -1); }
/* Rank 2 of 3 stops after call 10 (alive): ranks 0 and 1 time out at 11. */
TEST(process_that_stops_calling_times_out_the_others) { world_test(3, 20, 10, 2); }
