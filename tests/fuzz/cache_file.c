/* cache_file.c - fuzz target: a cache database file made of fuzz bytes, or a
 * valid cache file (generated once, through the cache's own store path) with
 * fuzz bytes spliced in, opened through dcptopk_cache_open (list, stats,
 * find, read_blob, verify, claims) and through the internal dc_cache_open +
 * dc_cache_get_or_compile with a dummy compile. Nothing may crash or hang; a
 * corrupt file is moved aside or reported. */
#include <dirent.h>
#include <unistd.h>

#include "cache.h"
#include "fuzz.h"

static char g_dir[256];
static char g_path[300];
static uint8_t *g_template;
static size_t g_template_size;
static char g_keys[3][33];

static const char g_cubin[] = "\x7f" "ELF fake cubin for the fuzzer";
static const char g_ptx[] = ".version 8.0\n.target sm_90a\n";
static const char g_source[] = "extern \"C\" __global__ void k() {}\n";

static dcptopk_result dummy_compile(void *user, dc_cache_blobs *out,
                                    char *err, size_t err_size)
{
    int fail = user ? *(const int *)user : 0;
    if (fail) {
        snprintf(err, err_size, "dummy compile refused");
        return DCPTOPK_NVRTC_ERROR;
    }
    memset(out, 0, sizeof *out);
    out->cubin = g_cubin;
    out->cubin_size = sizeof g_cubin - 1;
    out->ptx = g_ptx;
    out->ptx_size = sizeof g_ptx - 1;
    out->source = g_source;
    out->source_size = sizeof g_source - 1;
    out->compile_ms = 1.5;
    return DCPTOPK_SUCCESS;
}

/* Removes every file of the scratch directory (the database, its journal and
 * WAL files, what was moved aside). */
static void clean_dir(void)
{
    DIR *d = opendir(g_dir);
    if (!d)
        return;
    struct dirent *e;
    char p[600];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        unlink(p);
    }
    closedir(d);
}

static void at_exit(void)
{
    clean_dir();
    rmdir(g_dir);
}

static int write_file(const uint8_t *data, size_t size)
{
    FILE *f = fopen(g_path, "wb");
    if (!f)
        return -1;
    size_t w = size ? fwrite(data, 1, size, f) : 0;
    int rc = fclose(f);
    return w == size && rc == 0 ? 0 : -1;
}

static dc_hash key_of(int i)
{
    dc_hash h = {UINT64_C(0x0123456789abcdef) + (uint64_t)i * 0x1111,
                 UINT64_C(0xfedcba9876543210) ^ (uint64_t)i};
    return h;
}

static void init_once(void)
{
    if (g_template)
        return;
    setenv("DCPTOPK_LOG", "quiet", 1);
    setenv("DCPTOPK_CACHE_CLAIM_TIMEOUT", "0.05", 1);
    setenv("DCPTOPK_CACHE_BUSY_MS", "50", 1);
    setenv("DCPTOPK_CACHE_WAL", "0", 1);
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/dc_fuzz_cache.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir))
        DC_FUZZ_FAIL("mkdtemp(%s) failed", g_dir);
    atexit(at_exit);
    snprintf(g_path, sizeof g_path, "%s/c.sqlite", g_dir);
    /* The template: three entries stored the way the library stores them. */
    dc_cache *c = NULL;
    char err[1024] = "";
    if (dc_cache_open(g_path, DC_CACHE_RW, &c, err, sizeof err))
        DC_FUZZ_FAIL("template dc_cache_open: %s", err);
    static const char *kernels[] = {"select", "rescue", "pair_select"};
    for (int i = 0; i < 3; i++) {
        dc_cache_meta meta = {kernels[i], "topk=2048,local_topk=384",
                              "sm_90a", "13.0", "0.1.0"};
        dc_cache_hit hit;
        int compiled = 0;
        if (dc_cache_get_or_compile(c, key_of(i), &meta, dummy_compile, NULL,
                                    NULL, &hit, &compiled, err, sizeof err))
            DC_FUZZ_FAIL("template store: %s", err);
        dc_cache_hit_free(&hit);
        dc_hash_hex(key_of(i), g_keys[i]);
    }
    dc_cache_close(c);
    FILE *f = fopen(g_path, "rb");
    if (!f)
        DC_FUZZ_FAIL("template %s not written", g_path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    g_template = malloc(n > 0 ? (size_t)n : 1);
    if (!g_template || fread(g_template, 1, (size_t)n, f) != (size_t)n)
        DC_FUZZ_FAIL("template read");
    g_template_size = (size_t)n;
    fclose(f);
    clean_dir();
}

/* A cache API call's outcome: success, or a known code with a message. */
static void outcome(const char *call, dcptopk_cache *h, dcptopk_result r)
{
    if (r == DCPTOPK_SUCCESS)
        return;
    if (strcmp(dcptopk_result_name(r), "DCPTOPK_UNKNOWN_RESULT") == 0)
        DC_FUZZ_FAIL("%s returned unknown code %d", call, (int)r);
    const char *m = h ? dcptopk_cache_last_error(h) : dcptopk_last_error(NULL);
    if (!m || !*m)
        DC_FUZZ_FAIL("%s returned %s with an empty message", call,
                     dcptopk_result_name(r));
}

static void public_api(dc_fuzz_in *in)
{
    dcptopk_cache *h = NULL;
    int ro = fz_pick(in, 2);
    dcptopk_result r = dcptopk_cache_open(g_path, ro, &h);
    outcome("dcptopk_cache_open", NULL, r);
    if (r)
        return;
    dcptopk_cache_entry *list = NULL;
    size_t count = 0;
    outcome("dcptopk_cache_list", h, dcptopk_cache_list(h, &list, &count));
    free(list);
    dcptopk_cache_stats st = DCPTOPK_CACHE_STATS_INIT;
    outcome("dcptopk_cache_stats_get", h, dcptopk_cache_stats_get(h, &st));
    char prefix[40];
    unsigned m = fz_pick(in, 4);
    if (m < 3) {
        size_t len = 4 + fz_pick(in, 29);
        snprintf(prefix, sizeof prefix, "%.*s", (int)len, g_keys[m]);
    } else {
        size_t len = fz_pick(in, sizeof prefix);
        for (size_t i = 0; i < len; i++)
            prefix[i] = (char)(fz_u8(in) | 1); /* no NUL inside */
        prefix[len] = '\0';
    }
    dcptopk_cache_entry e;
    outcome("dcptopk_cache_find", h, dcptopk_cache_find(h, prefix, &e));
    void *blob = NULL;
    size_t size = 0;
    int32_t which = (int32_t)fz_pick(in, 4);
    outcome("dcptopk_cache_read_blob", h,
            dcptopk_cache_read_blob(h, prefix, which, &blob, &size));
    free(blob);
    int64_t checked = 0, bad = 0;
    outcome("dcptopk_cache_verify", h, dcptopk_cache_verify(h, &checked, &bad));
    dcptopk_cache_claim *claims = NULL;
    size_t nclaims = 0;
    outcome("dcptopk_cache_claims", h,
            dcptopk_cache_claims(h, &claims, &nclaims));
    free(claims);
    if (!ro && fz_pick(in, 2) == 0) {
        int64_t cleared = 0;
        outcome("dcptopk_cache_clear_stale_claims", h,
                dcptopk_cache_clear_stale_claims(h, &cleared));
    }
    if (fz_pick(in, 4) == 0) {
        int64_t removed = 0;
        outcome("dcptopk_cache_prune", h,
                dcptopk_cache_prune(h, fz_i64(in, 4096), &removed));
    }
    dcptopk_cache_close(h);
}

static void internal_api(dc_fuzz_in *in)
{
    dc_cache *c = NULL;
    char err[1024] = "";
    dc_cache_open_mode mode = fz_pick(in, 2) ? DC_CACHE_RW : DC_CACHE_RO;
    dcptopk_result r = dc_cache_open(g_path, mode, &c, err, sizeof err);
    if (r) {
        if (!err[0])
            DC_FUZZ_FAIL("dc_cache_open: %s without a message",
                         dcptopk_result_name(r));
        return;
    }
    for (int i = 0, n = 1 + fz_pick(in, 3); i < n; i++) {
        unsigned m = fz_pick(in, 5);
        dc_hash key = m < 3 ? key_of((int)m) : (dc_hash){fz_bytes(in, 8),
                                                          fz_bytes(in, 8)};
        dc_cache_meta meta = {"select", "topk=64", "sm_90a", "13.0", "0.1.0"};
        dc_cache_hit hit;
        memset(&hit, 0, sizeof hit);
        int compiled = 0, fail = fz_pick(in, 8) == 0;
        err[0] = '\0';
        r = dc_cache_get_or_compile(c, key, &meta, dummy_compile, NULL, &fail,
                                    &hit, &compiled, err, sizeof err);
        if (r == DCPTOPK_SUCCESS) {
            if (hit.cubin_size != sizeof g_cubin - 1 ||
                memcmp(hit.cubin, g_cubin, hit.cubin_size) != 0)
                DC_FUZZ_FAIL("dc_cache_get_or_compile: a hit of %zu bytes "
                             "that is not the stored cubin",
                             hit.cubin_size);
            dc_cache_hit_free(&hit);
        } else if (!err[0]) {
            DC_FUZZ_FAIL("dc_cache_get_or_compile: %s without a message",
                         dcptopk_result_name(r));
        }
    }
    dc_cache_close(c);
}

int dc_fuzz_cache_file(const uint8_t *data, size_t size)
{
    init_once();
    dc_fuzz_in in = {data, size};
    unsigned mode = fz_pick(&in, 4), api = fz_pick(&in, 2);
    uint8_t *file = NULL;
    size_t file_size = 0;
    if (mode == 0) {
        file = malloc(in.n ? in.n : 1);
        if (!file)
            return 0;
        memcpy(file, in.p, in.n);
        file_size = in.n;
        in.n = 0;
    } else {
        /* The template with up to 4 patches (offset, length, bytes), maybe
         * truncated. */
        file_size = g_template_size;
        file = malloc(file_size);
        if (!file)
            return 0;
        memcpy(file, g_template, file_size);
        for (int p = 0, np = 1 + fz_pick(&in, 4); p < np && in.n; p++) {
            size_t off = (size_t)fz_bytes(&in, 3) % file_size;
            size_t len = 1 + fz_pick(&in, 16);
            for (size_t i = 0; i < len && off + i < file_size; i++)
                file[off + i] = fz_u8(&in);
        }
        if (mode == 3)
            file_size = (size_t)fz_bytes(&in, 3) % (file_size + 1);
    }
    if (write_file(file, file_size) == 0) {
        if (api)
            public_api(&in);
        else
            internal_api(&in);
    }
    free(file);
    clean_dir();
    return 0;
}

DC_FUZZ_ENTRY(cache_file)
