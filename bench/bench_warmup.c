/* bench_warmup.c - what warmup costs: (1) the cold compile of every kernel
 * of a config (cache off), (2) a warm start (cache file populated: create a
 * fresh context and load every module; goal < 10 ms), (3) 8 processes
 * warming one config into one empty cache at once: the sum of their
 * compiles must equal the number of distinct keys.
 * Usage: bench_warmup [config-name]   (default deepseek-v3.2-dcp8)
 * Prints a table and one `JSON {...}` line per result. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcptopk.h"
#include "fixture.h"

#define NPROC 8

static double now_ms(void)
{
    return bench_now_us() / 1e3;
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

static dcptopk_context *make_ctx(int device, const char *path, int mode)
{
    dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
    cfg.device = device;
    cfg.arch = device < 0 ? "sm_90a" : NULL;
    cfg.cache_path = path;
    cfg.cache_mode = mode;
    dcptopk_context *ctx = NULL;
    if (dcptopk_context_create(&cfg, &ctx)) {
        fprintf(stderr, "bench_warmup: context: %s\n",
                dcptopk_last_error(NULL));
        return NULL;
    }
    return ctx;
}

typedef struct cold_row {
    char key[200];
    double ms;
} cold_row;

typedef struct cold_log {
    cold_row rows[64];
    int n;
} cold_log;

static void on_cold(void *user, const dcptopk_key *key, dcptopk_origin origin,
                    double ms)
{
    cold_log *log = user;
    (void)origin;
    if (log->n < 64) {
        dcptopk_key_format(key, log->rows[log->n].key,
                           sizeof log->rows[log->n].key);
        log->rows[log->n++].ms = ms;
    }
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "deepseek-v3.2-dcp8";
    dcptopk_merge_config cfg;
    if (dcptopk_merge_config_named(name, &cfg)) {
        fprintf(stderr, "bench_warmup: %s\n", dcptopk_last_error(NULL));
        return 2;
    }
    size_t nkeys = 0;
    dcptopk_config_keys(&cfg, "sm_90a", NULL, 0, &nkeys);
    int fails = 0;
    char dir[] = "/tmp/dcptopk-bench-warmup-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }

    /* (3) first, before this process touches CUDA: the children fork from
     * a CUDA-free parent and compile and store only (device -1). */
    char shared[600];
    snprintf(shared, sizeof shared, "%s/shared.db", dir);
    int pipes[NPROC][2];
    pid_t pids[NPROC];
    double t0 = now_ms();
    for (int i = 0; i < NPROC; i++) {
        if (pipe(pipes[i]) != 0) {
            perror("pipe");
            return 2;
        }
        pids[i] = fork();
        if (pids[i] == 0) {
            close(pipes[i][0]);
            unsigned compiled = 9999;
            dcptopk_context *ctx = make_ctx(-1, shared,
                                            DCPTOPK_CACHE_READWRITE);
            dcptopk_warmup_stats st = DCPTOPK_WARMUP_STATS_INIT;
            if (ctx && dcptopk_warmup(ctx, &cfg, NULL, NULL, &st) == 0)
                compiled = st.compiled;
            else if (ctx)
                fprintf(stderr, "child %d: %s\n", i, dcptopk_last_error(ctx));
            dcptopk_context_destroy(ctx);
            if (write(pipes[i][1], &compiled, sizeof compiled) < 0)
                _exit(3);
            _exit(compiled == 9999 ? 1 : 0);
        }
        close(pipes[i][1]);
    }
    unsigned total = 0;
    int child_fail = 0;
    for (int i = 0; i < NPROC; i++) {
        unsigned c = 9999;
        if (read(pipes[i][0], &c, sizeof c) != (ssize_t)sizeof c)
            c = 9999;
        close(pipes[i][0]);
        int status = 0;
        waitpid(pids[i], &status, 0);
        if (c == 9999 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            child_fail = 1;
        else
            total += c;
    }
    double concurrent_ms = now_ms() - t0;
    int concurrent_ok = !child_fail && total == nkeys;
    fails += !concurrent_ok;

    /* (1) cold compile per kernel, cache off. */
    int device = dcptopk_device_count() > 0 ? 0 : -1;
    cold_log cold = {.n = 0};
    dcptopk_context *ctx = make_ctx(device, NULL, DCPTOPK_CACHE_OFF);
    if (!ctx)
        return 2;
    dcptopk_warmup_stats cst = DCPTOPK_WARMUP_STATS_INIT;
    if (dcptopk_warmup(ctx, &cfg, on_cold, &cold, &cst)) {
        fprintf(stderr, "cold warmup: %s\n", dcptopk_last_error(ctx));
        return 1;
    }
    char arch[16];
    snprintf(arch, sizeof arch, "%s", dcptopk_context_arch(ctx));
    dcptopk_context_destroy(ctx);

    /* (2) warm start: populate a cache file, then time fresh contexts. A
     * holder context keeps the CUDA primary context alive, so "steady"
     * measures the library (cache reads + module loads); "first" includes
     * creating the CUDA context itself. */
    char path[600];
    snprintf(path, sizeof path, "%s/warm.db", dir);
    ctx = make_ctx(device, path, DCPTOPK_CACHE_READWRITE);
    if (!ctx || dcptopk_warmup(ctx, &cfg, NULL, NULL, NULL))
        return 1;
    dcptopk_context_destroy(ctx);
    double first_ms = 0.0, runs[15];
    int nruns = 15;
    dcptopk_context *holder = NULL;
    unsigned warm_hits = 0;
    for (int i = 0; i < nruns + 1; i++) {
        double s = now_ms();
        dcptopk_context *c = make_ctx(device, path, DCPTOPK_CACHE_READWRITE);
        dcptopk_warmup_stats st = DCPTOPK_WARMUP_STATS_INIT;
        if (!c || dcptopk_warmup(c, &cfg, NULL, NULL, &st))
            return 1;
        double ms = now_ms() - s;
        warm_hits = st.cache_hits;
        if (st.compiled)
            fails++;
        if (i == 0) {
            first_ms = ms;
            holder = c; /* keep the CUDA context alive from here on */
        } else {
            runs[i - 1] = ms;
            dcptopk_context_destroy(c);
        }
    }
    dcptopk_context_destroy(holder);
    qsort(runs, (size_t)nruns, sizeof runs[0], bench_cmp_double);
    double warm_med = runs[nruns / 2], warm_min = runs[0];
    fails += !(warm_med < 10.0);

    printf("bench_warmup: config %s, %zu keys, arch %s, %s\n\n", name, nkeys,
           arch, device >= 0 ? "device 0" : "no device (compile only)");
    printf("%-96s %10s\n", "cold compile (cache off)", "ms");
    double cold_total = 0.0;
    for (int i = 0; i < cold.n; i++) {
        printf("%-96s %10.1f\n", cold.rows[i].key, cold.rows[i].ms);
        cold_total += cold.rows[i].ms;
    }
    printf("%-96s %10.1f\n\n", "total", cold_total);
    printf("%-60s %10.2f ms\n", "warm start, first context (incl. CUDA ctx)",
           first_ms);
    printf("%-60s %10.2f ms (min %.2f, goal < 10) %s\n",
           "warm start, fresh context + load all (median)", warm_med,
           warm_min, warm_med < 10.0 ? "OK" : "OVER");
    printf("%-60s %10.1f ms, compiles %u of %zu keys %s\n\n",
           "8 processes into one empty cache", concurrent_ms, total, nkeys,
           concurrent_ok ? "OK" : "MISMATCH");

    for (int i = 0; i < cold.n; i++)
        printf("JSON {\"bench\":\"warmup\",\"stage\":\"cold_compile\","
               "\"config\":\"%s\",\"arch\":\"%s\",\"key\":\"%s\",\"ms\":%.3f}\n",
               name, arch, cold.rows[i].key, cold.rows[i].ms);
    printf("JSON {\"bench\":\"warmup\",\"stage\":\"cold_total\",\"config\":"
           "\"%s\",\"keys\":%d,\"ms\":%.3f}\n",
           name, cold.n, cold_total);
    printf("JSON {\"bench\":\"warmup\",\"stage\":\"warm_start\",\"config\":"
           "\"%s\",\"device\":%d,\"keys\":%zu,\"cache_hits\":%u,"
           "\"first_ms\":%.3f,\"median_ms\":%.3f,\"min_ms\":%.3f,"
           "\"goal_ms\":10,\"ok\":%s}\n",
           name, device, nkeys, warm_hits, first_ms, warm_med, warm_min,
           warm_med < 10.0 ? "true" : "false");
    printf("JSON {\"bench\":\"warmup\",\"stage\":\"concurrent\",\"config\":"
           "\"%s\",\"processes\":%d,\"distinct_keys\":%zu,"
           "\"total_compiles\":%u,\"wall_ms\":%.3f,\"ok\":%s}\n",
           name, NPROC, nkeys, total, concurrent_ms,
           concurrent_ok ? "true" : "false");
    rm_dir(dir);
    return fails ? 1 : 0;
}
