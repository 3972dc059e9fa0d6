/* cmd_config.c - the commands driven by a merge config: warmup, configs,
 * keys, render. A config is a named one (default: the library's first, i.e.
 * deepseek-v3.2-dcp8) with optional field overrides from the command line. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define MAX_KEYS 64

/* ------------------------------------------------------- config options */

/* The field options shared by warmup and keys; index order matters below. */
#define CONFIG_OPTS                                                            \
    {"--topk", 1, 0, NULL}, {"--local-topk", 1, 0, NULL},                      \
        {"--world-size", 1, 0, NULL}, {"--block-size", 1, 0, NULL},            \
        {"--interleave", 1, 0, NULL}, {"--pair", 0, 0, NULL},                  \
        {"--packed", 0, 0, NULL}, {"--no-ids", 0, 0, NULL},                    \
        {"--ids", 0, 0, NULL}, {"--no-exact", 0, 0, NULL},                     \
        {"--exact", 0, 0, NULL}

#define CONFIG_HELP                                                            \
    "config fields (override the named config's):\n"                         \
    "  --topk K            K, a multiple of 32 in 32..4096\n"                    \
    "  --local-topk N      N of the packed merge, a multiple of 32 below K\n"    \
    "                      (the pair merge uses N = K; set automatically)\n"     \
    "  --world-size W      ranks of the DCP group, 1..16\n"                      \
    "  --block-size B      KV block size for owned physical rows (0 = none)\n"   \
    "  --interleave S      gid = (l/S)*W*S + rank*S + l%%S (1 = classic)\n"      \
    "  --pair | --packed   the merge kind (--pair also implies --no-exact)\n"    \
    "  --no-ids | --ids    do not / do write global ids\n"                       \
    "  --no-exact | --exact  skip / run the rescue round (packed merge)\n"

static const char *kind_name(int32_t kind)
{
    return kind == DCPTOPK_MERGE_PAIR ? "pair" : "packed";
}

/* Builds the config from `name` (NULL = the default) and the field options.
 * Returns an exit code; *label receives the name used. */
static int build_config(const char *name, cli_opt *opts,
                        dcptopk_merge_config *out, const char **label)
{
    static const char *int_opts[] = {"--topk", "--local-topk", "--world-size",
                                     "--block-size", "--interleave"};
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    const char *cfg_name = name ? name : dcptopk_merge_config_name(0);
    dcptopk_result r;

    if (!cfg_name)
        return cli_error(CLI_FAILURE, "the library lists no named config");
    if ((r = dcptopk_merge_config_named(cfg_name, &c)) != DCPTOPK_SUCCESS) {
        if (r == DCPTOPK_NOT_FOUND)
            return cli_error(CLI_NOT_FOUND,
                             "config '%s': %s (see 'dcptopk configs')",
                             cfg_name, dcptopk_last_error(NULL));
        return cli_lib_error(r, "reading the named config",
                             dcptopk_last_error(NULL));
    }
    if (cli_find(opts, "--pair")->seen && cli_find(opts, "--packed")->seen)
        return cli_error(CLI_USAGE, "--pair and --packed exclude each other");
    if (cli_find(opts, "--ids")->seen && cli_find(opts, "--no-ids")->seen)
        return cli_error(CLI_USAGE, "--ids and --no-ids exclude each other");
    if (cli_find(opts, "--exact")->seen && cli_find(opts, "--no-exact")->seen)
        return cli_error(CLI_USAGE,
                         "--exact and --no-exact exclude each other");

    int32_t v[5];
    int32_t *fields[5] = {&c.topk, &c.local_topk, &c.world_size,
                          &c.block_size, &c.interleave};
    for (int i = 0; i < 5; i++) {
        cli_opt *o = cli_find(opts, int_opts[i]);
        if (!o->seen)
            continue;
        int rc = cli_parse_i32(o->name, o->value, &v[i]);
        if (rc)
            return rc;
        *fields[i] = v[i];
    }
    if (cli_find(opts, "--pair")->seen) {
        c.kind = DCPTOPK_MERGE_PAIR;
        c.exact = 0;
    }
    if (cli_find(opts, "--packed")->seen)
        c.kind = DCPTOPK_MERGE_PACKED;
    if (cli_find(opts, "--no-ids")->seen)
        c.emit_ids = 0;
    if (cli_find(opts, "--ids")->seen)
        c.emit_ids = 1;
    if (cli_find(opts, "--no-exact")->seen)
        c.exact = 0;
    if (cli_find(opts, "--exact")->seen)
        c.exact = 1;
    /* The pair merge's N is K by definition. */
    if (c.kind == DCPTOPK_MERGE_PAIR && !cli_find(opts, "--local-topk")->seen)
        c.local_topk = c.topk;

    if ((r = dcptopk_merge_config_check(&c)) != DCPTOPK_SUCCESS)
        return cli_error(cli_exit_code(r) == CLI_FAILURE ? CLI_FAILURE
                                                         : CLI_USAGE,
                         "invalid merge config: %s",
                         dcptopk_last_error(NULL));
    static const char *field_opts[] = {
        "--topk", "--local-topk", "--world-size", "--block-size", "--interleave",
        "--pair", "--packed", "--no-ids", "--ids", "--no-exact", "--exact"};
    int overridden = 0;
    for (size_t i = 0; i < sizeof field_opts / sizeof field_opts[0]; i++)
        overridden |= cli_find(opts, field_opts[i])->seen;
    *out = c;
    *label = overridden ? (name ? name : "custom") : cfg_name;
    return CLI_OK;
}

static void describe_config(const dcptopk_merge_config *c, char *buf,
                            size_t size)
{
    snprintf(buf, size, "%s K=%d N=%d W=%d B=%d S=%d%s%s", kind_name(c->kind),
             c->topk, c->local_topk, c->world_size, c->block_size,
             c->interleave, c->emit_ids ? " ids" : "",
             c->exact ? " exact" : "");
}

static void json_config_fields(FILE *f, const dcptopk_merge_config *c)
{
    fprintf(f,
            "\"kind\":\"%s\",\"topk\":%d,\"local_topk\":%d,\"world_size\":%d,"
            "\"block_size\":%d,\"interleave\":%d,\"emit_ids\":%s,"
            "\"exact\":%s",
            kind_name(c->kind), c->topk, c->local_topk, c->world_size,
            c->block_size, c->interleave, c->emit_ids ? "true" : "false",
            c->exact ? "true" : "false");
}

/* Expands a config into keys (validating arch). */
static int expand_keys(const dcptopk_merge_config *c, const char *arch,
                       dcptopk_key *keys, size_t *count)
{
    dcptopk_result r = dcptopk_config_keys(c, arch, keys, MAX_KEYS, count);
    if (r != DCPTOPK_SUCCESS)
        return cli_error(cli_exit_code(r) == CLI_FAILURE ? CLI_FAILURE
                                                         : CLI_USAGE,
                         "%s%s", arch ? "--arch: " : "",
                         dcptopk_last_error(NULL));
    if (*count > MAX_KEYS)
        return cli_error(CLI_FAILURE, "the config needs %zu keys (more than %d)",
                         *count, MAX_KEYS);
    return CLI_OK;
}

/* ----------------------------------------------------------------- warmup */

static const char *origin_name(dcptopk_origin o)
{
    switch (o) {
    case DCPTOPK_ORIGIN_MEMORY: return "memory";
    case DCPTOPK_ORIGIN_CACHE: return "cache";
    case DCPTOPK_ORIGIN_COMPILED: return "compiled";
    }
    return "unknown";
}

typedef struct warm_item {
    char spec[320];
    char hash[33];
    dcptopk_origin origin;
    double ms;
} warm_item;

typedef struct warm_state {
    FILE *progress; /* NULL = no progress lines */
    size_t done;
    size_t total;
    warm_item items[MAX_KEYS];
} warm_state;

static void warm_progress(void *user, const dcptopk_key *key,
                          dcptopk_origin origin, double ms)
{
    warm_state *s = user;
    warm_item *it = s->done < MAX_KEYS ? &s->items[s->done] : NULL;
    s->done++;
    if (!it)
        return;
    dcptopk_key_format(key, it->spec, sizeof it->spec);
    if (dcptopk_key_hash(key, it->hash) != DCPTOPK_SUCCESS)
        it->hash[0] = '\0';
    it->origin = origin;
    it->ms = ms;
    if (s->progress) {
        fprintf(s->progress, "[%zu/%zu] %-8s %9.1f ms  %s\n", s->done,
                s->total, origin_name(origin), ms, it->spec);
        fflush(s->progress);
    }
}

static void warmup_help(void)
{
    printf(
        "usage: dcptopk warmup [CONFIG] [fields] [--arch ARCH] [--device D]\n"
        "                      [--cache PATH] [--threads N] [--json] [--quiet]\n"
        "                      [--verbose]\n"
        "\n"
        "Compiles (or reads from the cache) and loads every kernel of a merge\n"
        "config, so that later launches touch neither NVRTC nor SQLite.\n"
        "CONFIG is a named config (default deepseek-v3.2-dcp8; see 'dcptopk\n"
        "configs'); field options override its fields.\n"
        "\n"
        CONFIG_HELP
        "\n"
        "options:\n"
        "  --arch ARCH     target arch (sm_90, sm_90a, sm_100a, ...). Without\n"
        "                  --device: compile and store only, no GPU needed\n"
        "  --device D      CUDA device ordinal (default 0); with --arch, compile\n"
        "                  for ARCH and load on device D\n"
        "  --cache PATH    cache file (default: see 'dcptopk cache path')\n"
        "  --threads N     threads compiling the kernels missing from the cache\n"
        "                  file, 1..64 (default: DCPTOPK_WARMUP_THREADS, else\n"
        "                  the online CPUs up to 8)\n"
        "  --json          print the summary as JSON on stdout (progress lines,\n"
        "                  if any, go to stderr)\n"
        "  --quiet         no progress lines, no text summary\n"
        "  --verbose       progress lines even when stdout is not a terminal\n"
        "\n"
        "One progress line per kernel (when stdout is a terminal or with\n"
        "--verbose): origin (memory, cache, compiled), milliseconds, key.\n"
        "Summary: keys, cache hits, compiles, compile ms, total ms.\n"
        "Without --arch and without a GPU, warmup fails with exit code 5.\n");
}

int cmd_warmup(int argc, char **argv)
{
    cli_opt opts[] = {CONFIG_OPTS,
                      {"--arch", 1, 0, NULL},
                      {"--device", 1, 0, NULL},
                      {"--cache", 1, 0, NULL},
                      {"--threads", 1, 0, NULL},
                      {"--json", 0, 0, NULL},
                      {"--quiet", 0, 0, NULL},
                      {"--verbose", 0, 0, NULL},
                      {NULL, 0, 0, NULL}};
    const char *pos[1];
    int npos, help, rc;
    if ((rc = cli_parse("warmup", argc, argv, opts, pos, 1, &npos, &help)))
        return rc;
    if (help) {
        warmup_help();
        return CLI_OK;
    }
    const char *arch = cli_find(opts, "--arch")->value;
    const char *cache_opt = cli_find(opts, "--cache")->value;
    int json = cli_find(opts, "--json")->seen;
    int quiet = cli_find(opts, "--quiet")->seen;
    int verbose = cli_find(opts, "--verbose")->seen;
    if (quiet && verbose)
        return cli_error(CLI_USAGE, "--quiet and --verbose exclude each other");
    if ((rc = cli_check_path("--cache", cache_opt)))
        return rc;
    cli_opt *threads_opt = cli_find(opts, "--threads");
    int32_t threads = 0; /* 0: the library's default */
    if (threads_opt->seen) {
        if ((rc = cli_parse_i32("--threads", threads_opt->value, &threads)))
            return rc;
        if (threads < 1 || threads > 64)
            return cli_error(CLI_USAGE, "--threads = %d: expected 1..64",
                             threads);
    }

    dcptopk_merge_config c;
    const char *label;
    if ((rc = build_config(npos ? pos[0] : NULL, opts, &c, &label)))
        return rc;

    int32_t device = 0;
    cli_opt *dev_opt = cli_find(opts, "--device");
    if (dev_opt->seen) {
        if ((rc = cli_parse_i32("--device", dev_opt->value, &device)))
            return rc;
        if (device < 0)
            return cli_error(CLI_USAGE,
                             "--device = %d: must be a device ordinal >= 0 "
                             "(use --arch without --device to compile with "
                             "no GPU)",
                             device);
    } else if (arch) {
        device = -1;
    }

    dcptopk_key keys[MAX_KEYS];
    size_t nkeys = 0;
    if ((rc = expand_keys(&c, arch, keys, &nkeys)))
        return rc;

    if (device >= 0) {
        int count = dcptopk_device_count();
        if (count == 0)
            return cli_error(CLI_NO_DEVICE,
                             "no CUDA device found (no driver or no GPU); "
                             "pass --arch ARCH (e.g. --arch sm_90a) to "
                             "compile into the cache without a GPU");
        if (device >= count)
            return cli_error(CLI_USAGE, "--device = %d: only %d device%s "
                             "(0..%d)", device, count, count == 1 ? "" : "s",
                             count - 1);
    }

    char pathbuf[4096];
    const char *cache_path = cli_cache_path(cache_opt, pathbuf, sizeof pathbuf);

    dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
    cfg.device = device;
    cfg.arch = arch;
    cfg.cache_path = cache_opt;
    cfg.warmup_threads = threads;
    dcptopk_context *ctx = NULL;
    dcptopk_result r = dcptopk_context_create(&cfg, &ctx);
    if (r != DCPTOPK_SUCCESS)
        return cli_lib_error(r, "creating the context",
                             dcptopk_last_error(NULL));

    warm_state *s = calloc(1, sizeof *s);
    if (!s) {
        dcptopk_context_destroy(ctx);
        return cli_error(CLI_FAILURE, "out of memory");
    }
    s->total = nkeys;
    if (!quiet && (verbose || cli_stdout_tty()))
        s->progress = json ? stderr : stdout;

    dcptopk_warmup_stats st = DCPTOPK_WARMUP_STATS_INIT;
    r = dcptopk_warmup(ctx, &c, warm_progress, s, &st);
    if (r != DCPTOPK_SUCCESS) {
        rc = cli_lib_error(r, "warmup", dcptopk_last_error(ctx));
        dcptopk_context_destroy(ctx);
        free(s);
        return rc;
    }
    /* Where the compiles went: the file as a maintenance handle (strict: no
     * fallback) sees it now. A file that is absent after the warmup, or
     * that such a handle refuses, was not used: the context ran in memory
     * (its warning said why). */
    int in_memory = !cache_path || access(cache_path, F_OK) != 0;
    if (!in_memory) {
        dcptopk_cache *probe = NULL;
        if (dcptopk_cache_open(cache_path, 1, &probe) != DCPTOPK_SUCCESS)
            in_memory = 1;
        dcptopk_cache_close(probe);
    }
    const char *where = in_memory ? "in memory" : cache_path;
    const char *cache_note =
        in_memory ? (cache_path ? " (the cache file was not used; see the "
                                  "warning above)"
                                : " (no cache file)")
        : access(cache_path, W_OK) != 0 ? " (read-only)"
                                        : "";
    const char *ctx_arch = dcptopk_context_arch(ctx);
    char desc[160];
    describe_config(&c, desc, sizeof desc);

    if (json) {
        printf("{\"config\":");
        cli_json_str(stdout, label);
        printf(",\"fields\":{");
        json_config_fields(stdout, &c);
        printf("},\"arch\":");
        cli_json_str(stdout, ctx_arch);
        printf(",\"device\":%d,\"cache\":", device);
        cli_json_str(stdout, cache_path);
        printf(",\"in_memory\":%s", in_memory ? "true" : "false");
        printf(",\"keys\":%u,\"memory_hits\":%u,\"cache_hits\":%u,"
               "\"compiled\":%u,\"compile_ms\":%.3f,\"load_ms\":%.3f,"
               "\"total_ms\":%.3f,\"kernels\":[",
               st.keys, st.memory_hits, st.cache_hits, st.compiled,
               st.compile_ms, st.load_ms, st.total_ms);
        size_t n = s->done < MAX_KEYS ? s->done : MAX_KEYS;
        for (size_t i = 0; i < n; i++) {
            printf("%s{\"spec\":", i ? "," : "");
            cli_json_str(stdout, s->items[i].spec);
            printf(",\"hash\":");
            cli_json_str(stdout, s->items[i].hash[0] ? s->items[i].hash : NULL);
            printf(",\"origin\":\"%s\",\"ms\":%.3f}",
                   origin_name(s->items[i].origin), s->items[i].ms);
        }
        printf("]}\n");
    } else if (!quiet) {
        printf("warmup %s (%s)\n", label, desc);
        printf("  arch:        %s\n", ctx_arch ? ctx_arch : "?");
        if (device >= 0)
            printf("  device:      %d\n", device);
        else
            printf("  device:      none (compile and store only)\n");
        printf("  cache:       %s%s\n", where, cache_note);
        printf("  keys:        %u\n", st.keys);
        printf("  in memory:   %u\n", st.memory_hits);
        printf("  cache hits:  %u\n", st.cache_hits);
        printf("  compiled:    %u\n", st.compiled);
        printf("  compile ms:  %.1f\n", st.compile_ms);
        printf("  load ms:     %.1f\n", st.load_ms);
        printf("  total ms:    %.1f\n", st.total_ms);
    }
    dcptopk_context_destroy(ctx);
    free(s);
    return CLI_OK;
}

/* ---------------------------------------------------------------- configs */

int cmd_configs(int argc, char **argv)
{
    cli_opt opts[] = {{"--json", 0, 0, NULL}, {NULL, 0, 0, NULL}};
    const char *pos[1];
    int npos, help, rc;
    if ((rc = cli_parse("configs", argc, argv, opts, pos, 0, &npos, &help)))
        return rc;
    if (help) {
        printf("usage: dcptopk configs [--json]\n"
               "\n"
               "Lists the named merge configs with their fields and the number\n"
               "of compile keys each needs. The first is the default.\n"
               "\n"
               "options:\n"
               "  --json   print a JSON array\n");
        return CLI_OK;
    }
    int json = cli_find(opts, "--json")->seen;
    if (json)
        printf("[");
    else
        printf("%-28s %-6s %5s %5s %3s %5s %3s %4s %5s %4s\n", "NAME", "KIND",
               "K", "N", "W", "BLOCK", "S", "IDS", "EXACT", "KEYS");
    for (size_t i = 0; dcptopk_merge_config_name(i); i++) {
        const char *name = dcptopk_merge_config_name(i);
        dcptopk_merge_config c;
        dcptopk_result r = dcptopk_merge_config_named(name, &c);
        if (r != DCPTOPK_SUCCESS) {
            if (json)
                printf("]\n");
            return cli_lib_error(r, name, dcptopk_last_error(NULL));
        }
        size_t nkeys = 0;
        if (dcptopk_config_keys(&c, NULL, NULL, 0, &nkeys) != DCPTOPK_SUCCESS)
            nkeys = 0;
        if (json) {
            printf("%s{\"name\":", i ? "," : "");
            cli_json_str(stdout, name);
            printf(",\"default\":%s,", i == 0 ? "true" : "false");
            json_config_fields(stdout, &c);
            printf(",\"keys\":%zu}", nkeys);
        } else {
            printf("%-28s %-6s %5d %5d %3d %5d %3d %4s %5s %4zu%s\n", name,
                   kind_name(c.kind), c.topk, c.local_topk, c.world_size,
                   c.block_size, c.interleave, c.emit_ids ? "yes" : "no",
                   c.exact ? "yes" : "no", nkeys, i == 0 ? "  (default)" : "");
        }
    }
    if (json)
        printf("]\n");
    return CLI_OK;
}

/* ------------------------------------------------------------------- keys */

int cmd_keys(int argc, char **argv)
{
    cli_opt opts[] = {CONFIG_OPTS, {"--arch", 1, 0, NULL},
                      {"--json", 0, 0, NULL}, {NULL, 0, 0, NULL}};
    const char *pos[1];
    int npos, help, rc;
    if ((rc = cli_parse("keys", argc, argv, opts, pos, 1, &npos, &help)))
        return rc;
    if (help) {
        printf("usage: dcptopk keys [CONFIG] [fields] [--arch ARCH] [--json]\n"
               "\n"
               "Prints the compile keys a config needs, one per line: the\n"
               "128-bit cache key (32 hex digits; 'dcptopk cache show' takes a\n"
               "prefix of it) and the key spec ('dcptopk render' takes it).\n"
               "\n"
               CONFIG_HELP
               "\n"
               "options:\n"
               "  --arch ARCH   target arch (default sm_90a)\n"
               "  --json        print a JSON object\n");
        return CLI_OK;
    }
    dcptopk_merge_config c;
    const char *label;
    if ((rc = build_config(npos ? pos[0] : NULL, opts, &c, &label)))
        return rc;
    const char *arch = cli_find(opts, "--arch")->value;
    dcptopk_key keys[MAX_KEYS];
    size_t n = 0;
    if ((rc = expand_keys(&c, arch, keys, &n)))
        return rc;
    char hashes[MAX_KEYS][33];
    for (size_t i = 0; i < n; i++) {
        dcptopk_result r = dcptopk_key_hash(&keys[i], hashes[i]);
        if (r != DCPTOPK_SUCCESS)
            return cli_lib_error(r, "hashing a key", dcptopk_last_error(NULL));
    }
    int json = cli_find(opts, "--json")->seen;
    char spec[320];
    if (json) {
        printf("{\"config\":");
        cli_json_str(stdout, label);
        printf(",\"fields\":{");
        json_config_fields(stdout, &c);
        printf("},\"arch\":");
        cli_json_str(stdout, n ? keys[0].arch : arch);
        printf(",\"keys\":[");
        for (size_t i = 0; i < n; i++) {
            dcptopk_key_format(&keys[i], spec, sizeof spec);
            printf("%s{\"kernel\":", i ? "," : "");
            cli_json_str(stdout, dcptopk_kernel_name(keys[i].kernel));
            printf(",\"spec\":");
            cli_json_str(stdout, spec);
            printf(",\"hash\":\"%s\"}", hashes[i]);
        }
        printf("]}\n");
        return CLI_OK;
    }
    for (size_t i = 0; i < n; i++) {
        dcptopk_key_format(&keys[i], spec, sizeof spec);
        printf("%s  %s\n", hashes[i], spec);
    }
    return CLI_OK;
}

/* ----------------------------------------------------------------- render */

/* Parses "select(topk=2048,local_topk=384,...)@sm_90a" (what `keys` and
 * dcptopk_key_format print) with the library's dcptopk_key_parse; a missing
 * "@arch" is sm_90a. */
static int parse_key_spec(const char *spec, dcptopk_key *key)
{
    char text[512];
    int n = snprintf(text, sizeof text, "%s%s", spec,
                     strchr(spec, '@') ? "" : "@sm_90a");
    if (n < 0 || (size_t)n >= sizeof text)
        return cli_error(CLI_USAGE, "KEY-SPEC = \"%.60s...\": too long", spec);
    if (dcptopk_key_parse(text, key) != DCPTOPK_SUCCESS)
        return cli_error(CLI_USAGE, "KEY-SPEC = \"%s\": %s (expected "
                         "KERNEL(field=value,...)@ARCH, as printed by "
                         "'dcptopk keys')",
                         spec, dcptopk_last_error(NULL));
    return CLI_OK;
}

int cmd_render(int argc, char **argv)
{
    cli_opt opts[] = {{"--hash", 0, 0, NULL}, {NULL, 0, 0, NULL}};
    const char *pos[1];
    int npos, help, rc;
    if ((rc = cli_parse("render", argc, argv, opts, pos, 1, &npos, &help)))
        return rc;
    if (help) {
        printf("usage: dcptopk render KEY-SPEC [--hash]\n"
               "\n"
               "Prints the CUDA C++ source that NVRTC compiles for a key.\n"
               "KEY-SPEC is what 'dcptopk keys' prints, e.g.\n"
               "  'select(topk=2048,local_topk=384,world_size=8,block_size=64,"
               "interleave=1,emit_ids=1,exact=1)@sm_90a'\n"
               "Every field the kernel specialises on must be given, once,\n"
               "in any order; any other field is refused (both errors name\n"
               "the field). A missing @ARCH is sm_90a.\n"
               "\n"
               "options:\n"
               "  --hash   print the key's 128-bit cache key instead\n");
        return CLI_OK;
    }
    if (npos != 1)
        return cli_error(CLI_USAGE, "render needs a KEY-SPEC (see 'dcptopk "
                         "keys' and 'dcptopk render --help')");
    dcptopk_key key;
    if ((rc = parse_key_spec(pos[0], &key)))
        return rc;
    if (cli_find(opts, "--hash")->seen) {
        char hex[33];
        dcptopk_result r = dcptopk_key_hash(&key, hex);
        if (r != DCPTOPK_SUCCESS)
            return cli_lib_error(r, "hashing the key", dcptopk_last_error(NULL));
        printf("%s\n", hex);
        return CLI_OK;
    }
    char *src = NULL;
    dcptopk_result r = dcptopk_key_render(&key, &src);
    if (r != DCPTOPK_SUCCESS)
        return cli_lib_error(r, "rendering the key", dcptopk_last_error(NULL));
    fputs(src, stdout);
    size_t n = strlen(src);
    if (n && src[n - 1] != '\n')
        fputc('\n', stdout);
    free(src);
    return CLI_OK;
}
