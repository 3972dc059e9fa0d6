/* test_cli.c - the `dcptopk` command-line tool, run as a separate process
 * (fork + exec of the binary that DC_TEST_CLI names), each test in its own
 * cache directory: every subcommand once, --help of each, JSON output shape,
 * exit codes, and bad arguments named in the error message.
 *
 * Warmups compile real kernels with NVRTC (--arch sm_90, no GPU needed), so
 * the tests that need cache entries warm one small config once:
 * K=512, N=96, W=2, no rescue (topn_pack variants, pack_indices, select).
 *
 * DCPTOPK_TEST_CLI in the environment overrides the binary (to test another
 * build of the tool). */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "dcptopk.h"
#include "harness.h"

/* ---------------------------------------------------------------- helpers */

typedef struct cli_result {
    int status; /* exit code, or 128 + signal */
    char out[1 << 20];
    char err[1 << 14];
} cli_result;

static cli_result res; /* one at a time; large, so not on the stack */

static const char *cli_path(void)
{
    const char *p = getenv("DCPTOPK_TEST_CLI");
    return p && p[0] ? p : DC_TEST_CLI;
}

/* A fresh directory for a test: under the ctest-provided DCPTOPK_CACHE_DIR
 * when set (so leftovers stay in the build tree), else under /tmp. */
static int make_dir(char *buf, size_t size)
{
    const char *base = getenv("DCPTOPK_CACHE_DIR");
    if (base && base[0]) {
        mkdir(base, 0777); /* may exist */
        snprintf(buf, size, "%s/cli-XXXXXX", base);
    } else {
        snprintf(buf, size, "/tmp/dcptopk-test-cli-XXXXXX");
    }
    return mkdtemp(buf) ? 0 : -1;
}

static void remove_dir(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static void read_file_into(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Runs the CLI with DCPTOPK_CACHE_DIR=dir, stdin from /dev/null, stdout and
 * stderr captured into res. argv is NULL-terminated. Returns the status. */
static int run_argv(const char *dir, const char *const *args)
{
    char out_path[4200], err_path[4200];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", dir);
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)cli_path();
    for (; args[n - 1] && n < 63; n++)
        argv[n] = (char *)args[n - 1];
    argv[n] = NULL;

    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        res.status = -1;
        return -1;
    }
    if (pid == 0) {
        setenv("DCPTOPK_CACHE_DIR", dir, 1);
        unsetenv("XDG_CACHE_HOME");
        int in = open("/dev/null", O_RDONLY);
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || err < 0)
            _exit(126);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    res.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    read_file_into(out_path, res.out, sizeof res.out);
    read_file_into(err_path, res.err, sizeof res.err);
    return res.status;
}

#define RUN(dir, ...) run_argv(dir, (const char *const[]){__VA_ARGS__, NULL})

/* Prints what the CLI said when a check fails. */
#define CHECK_RUN(expr, code)                                                  \
    do {                                                                       \
        int dc_st_ = (expr);                                                   \
        if (dc_st_ != (code)) {                                                \
            DC_FAIL_AT("%s: exit %d, expected %d\nstdout: %s\nstderr: %s",     \
                       #expr, dc_st_, (code), res.out, res.err);               \
            return;                                                            \
        }                                                                      \
    } while (0)

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static int count_substr(const char *s, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = strstr(s, needle); p; p = strstr(p + len, needle))
        n++;
    return n;
}

/* Structural JSON check: starts with `open`, ends with the matching closer
 * (then a newline), brackets balance outside strings. */
static int json_shape_ok(const char *s, char open)
{
    char close = open == '{' ? '}' : ']';
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
        n--;
    if (n < 2 || s[0] != open || s[n - 1] != close)
        return 0;
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
            else if ((unsigned char)c < 0x20)
                return 0;
            continue;
        }
        if (c == '"')
            in_str = 1;
        else if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']') {
            if (--depth < 0)
                return 0;
        }
    }
    return depth == 0 && !in_str;
}

static int is_hex32(const char *s)
{
    for (int i = 0; i < 32; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return 0;
    return 1;
}

/* The value of the first "key":"<32 hex>" in JSON text. */
static int first_json_key(const char *json, char out[33])
{
    const char *p = strstr(json, "\"key\":\"");
    if (!p)
        return -1;
    p += 7;
    if (!is_hex32(p))
        return -1;
    memcpy(out, p, 32);
    out[32] = '\0';
    return 0;
}

#define WARM_FIELDS                                                            \
    "--topk", "512", "--local-topk", "96", "--world-size", "2", "--no-exact", \
        "--arch", "sm_90"

/* Number of keys of the WARM_FIELDS config, from the library (the count
 * follows the kernel registry, e.g. how many topn_pack variants exist). */
static int warm_keys(void)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = 512;
    c.local_topk = 96;
    c.world_size = 2;
    c.exact = 0;
    size_t n = 0;
    if (dcptopk_config_keys(&c, "sm_90", NULL, 0, &n) != DCPTOPK_SUCCESS)
        return -1;
    return (int)n;
}

/* "<prefix><n><suffix>" in a static buffer (four in rotation). */
static const char *fmt_n(const char *prefix, int n, const char *suffix)
{
    static char buf[4][128];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "%s%d%s", prefix, n, suffix);
    return b;
}

/* ------------------------------------------------------------------ tests */

TEST(version_and_top_level_help)
{
    char dir[4096], want[64];
    CHECK(make_dir(dir, sizeof dir) == 0);
    CHECK_RUN(RUN(dir, "--version"), 0);
    snprintf(want, sizeof want, "dcptopk %d.%d.%d", DCPTOPK_VERSION_MAJOR,
             DCPTOPK_VERSION_MINOR, DCPTOPK_VERSION_PATCH);
    CHECK_CONTAINS(res.out, want);
    CHECK_RUN(RUN(dir, "--help"), 0);
    CHECK_CONTAINS(res.out, "usage: dcptopk");
    CHECK_CONTAINS(res.out, "exit codes");
    CHECK_CONTAINS(res.out, "warmup");
    CHECK_CONTAINS(res.out, "selftest");
    CHECK_RUN(RUN(dir, "-h"), 0);
    CHECK_CONTAINS(res.out, "exit codes");
    /* No command: usage on stderr, exit 2. */
    CHECK_RUN(run_argv(dir, (const char *const[]){NULL}), 2);
    CHECK_CONTAINS(res.err, "dcptopk: error: ");
    remove_dir(dir);
}

TEST(every_subcommand_has_help)
{
    static const char *const cmds[][2] = {
        {"warmup", NULL},   {"configs", NULL},  {"keys", NULL},
        {"render", NULL},   {"cache", NULL},    {"selftest", NULL},
        {"devices", NULL},  {"env", NULL},
        {"cache", "path"},  {"cache", "ls"},    {"cache", "show"},
        {"cache", "stats"}, {"cache", "verify"}, {"cache", "prune"},
        {"cache", "rm"},    {"cache", "clear"}, {"cache", "export"},
        {"cache", "import"},
    };
    char dir[4096];
    CHECK(make_dir(dir, sizeof dir) == 0);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        for (int h = 0; h < 2; h++) {
            const char *flag = h ? "-h" : "--help";
            if (cmds[i][1])
                RUN(dir, cmds[i][0], cmds[i][1], flag);
            else
                RUN(dir, cmds[i][0], flag);
            CHECK_MSG(res.status == 0, "%s %s %s: exit %d: %s", cmds[i][0],
                      cmds[i][1] ? cmds[i][1] : "", flag, res.status, res.err);
            CHECK_MSG(strstr(res.out, "usage: dcptopk") != NULL,
                      "%s %s %s: no usage line: %s", cmds[i][0],
                      cmds[i][1] ? cmds[i][1] : "", flag, res.out);
        }
    }
    /* Help never touches the cache. */
    char db[4200];
    snprintf(db, sizeof db, "%s/dcptopk.sqlite", dir);
    CHECK(access(db, F_OK) != 0);
    remove_dir(dir);
}

TEST(bad_arguments_are_named)
{
    static const struct {
        const char *args[10];
        int code;
        const char *needle; /* must appear in stderr */
    } cases[] = {
        {{"frobnicate"}, 2, "frobnicate"},
        {{"--frob"}, 2, "--frob"},
        {{"warmup", "--bogus"}, 2, "--bogus"},
        {{"warmup", "--topk"}, 2, "--topk"},
        {{"warmup", "--topk", "--arch", "sm_90"}, 2, "--topk"},
        {{"warmup", "--topk", "abc", "--arch", "sm_90"}, 2, "abc"},
        {{"warmup", "--topk=12x", "--arch", "sm_90"}, 2, "12x"},
        {{"warmup", "--topk", "100", "--arch", "sm_90"}, 2, "topk = 100"},
        {{"warmup", "--world-size", "17", "--arch", "sm_90"}, 2,
         "world_size = 17"},
        {{"warmup", "--arch", "sm90"}, 2, "sm90"},
        {{"warmup", "--device", "x"}, 2, "x"},
        {{"warmup", "--threads", "0", "--arch", "sm_90"}, 2, "--threads = 0"},
        {{"warmup", "--threads", "65", "--arch", "sm_90"}, 2, "--threads = 65"},
        {{"warmup", "--threads", "two", "--arch", "sm_90"}, 2, "two"},
        {{"warmup", "--device", "-3"}, 2, "-3"},
        {{"warmup", "--pair", "--packed", "--arch", "sm_90"}, 2, "--pair"},
        {{"warmup", "--quiet=1"}, 2, "--quiet"},
        {{"warmup", "a", "b"}, 2, "'b'"},
        {{"warmup", "no-such-config", "--arch", "sm_90"}, 4,
         "no-such-config"},
        {{"keys", "--topk", "99999999999"}, 2, "99999999999"},
        /* One strict parser: spaces, '+' and base prefixes are refused like
         * trailing letters, naming the option and the value. */
        {{"keys", "--topk", " 64"}, 2, "--topk = \" 64\""},
        {{"keys", "--topk", "64 "}, 2, "--topk = \"64 \""},
        {{"keys", "--topk", "+64"}, 2, "--topk = \"+64\""},
        {{"keys", "--topk", "0x40"}, 2, "--topk = \"0x40\""},
        {{"warmup", "--threads", " 2", "--arch", "sm_90"}, 2, "--threads"},
        {{"warmup", "--device", "+0"}, 2, "--device = \"+0\""},
        {{"selftest", "--seed", " 5"}, 2, "--seed = \" 5\""},
        {{"selftest", "--seed", "0x10"}, 2, "--seed = \"0x10\""},
        {{"selftest", "--rows", "-"}, 2, "--rows = \"-\""},
        {{"keys", "--arch", "sm_9x"}, 2, "sm_9x"},
        {{"keys", "--arch", "sm_80"}, 2, "sm_90 or later"},
        {{"warmup", "--arch", "sm_86"}, 2, "arch = \"sm_86\""},
        {{"configs", "extra"}, 2, "extra"},
        {{"configs", "--json", "--yaml"}, 2, "--yaml"},
        {{"render"}, 2, "KEY-SPEC"},
        {{"render", "nokernel(topk=32)"}, 2, "nokernel"},
        {{"render", "select(topk=abc)"}, 2, "abc"},
        {{"render", "pack_indices(bogus=1)@sm_90"}, 2, "bogus"},
        {{"selftest", "--device", "zz"}, 2, "zz"},
        {{"selftest", "--seed", "-1"}, 2, "--seed"},
        {{"selftest", "--ranks", "4", "--node-size", "3"}, 2, "--node-size = 3"},
        {{"selftest", "--node-size", "2"}, 2, "needs --ranks"},
        {{"selftest", "--ranks", "4", "--node-size", "x"}, 2, "x"},
        {{"cache"}, 2, "subcommand"},
        {{"cache", "frob"}, 2, "frob"},
        {{"cache", "ls", "--json=1"}, 2, "--json"},
        {{"cache", "ls", "--cache"}, 2, "--cache"},
        {{"cache", "prune"}, 2, "--max-bytes"},
        {{"cache", "prune", "--max-bytes", "12X"}, 2, "12X"},
        {{"cache", "prune", "--max-bytes", "-5"}, 2, "-5"},
        {{"cache", "prune", "--max-bytes", "99999999999999999999"}, 2,
         "99999999999999999999"},
        {{"cache", "show"}, 2, "KEYPREFIX"},
        {{"cache", "show", "zz"}, 2, "zz"},
        {{"cache", "show", "abc"}, 2, "abc"},
        {{"cache", "rm", "xyz123"}, 2, "xyz123"},
        {{"cache", "rm", "abcd", "extra"}, 2, "extra"},
        {{"cache", "clear"}, 2, "--yes"},
        {{"cache", "export"}, 2, "FILE"},
        {{"cache", "import"}, 2, "FILE"},
    };
    char dir[4096];
    CHECK(make_dir(dir, sizeof dir) == 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[12];
        size_t n = 0;
        for (; n < 10 && cases[i].args[n]; n++)
            args[n] = cases[i].args[n];
        args[n] = NULL;
        run_argv(dir, args);
        CHECK_MSG(res.status == cases[i].code,
                  "case %zu (%s %s ...): exit %d, expected %d; stderr: %s", i,
                  args[0], n > 1 ? args[1] : "", res.status, cases[i].code,
                  res.err);
        CHECK_MSG(strstr(res.err, "dcptopk: error: ") != NULL,
                  "case %zu: no error prefix: %s", i, res.err);
        CHECK_MSG(strstr(res.err, cases[i].needle) != NULL,
                  "case %zu (%s %s ...): stderr does not name '%s': %s", i,
                  args[0], n > 1 ? args[1] : "", cases[i].needle, res.err);
    }
    /* None of them created a cache file. */
    char db[4200];
    snprintf(db, sizeof db, "%s/dcptopk.sqlite", dir);
    CHECK(access(db, F_OK) != 0);
    remove_dir(dir);
}

TEST(configs_lists_named_configs)
{
    char dir[4096];
    CHECK(make_dir(dir, sizeof dir) == 0);
    CHECK_RUN(RUN(dir, "configs"), 0);
    CHECK_CONTAINS(res.out, "deepseek-v3.2-dcp8");
    CHECK_CONTAINS(res.out, "(default)");
    int names = 0;
    for (size_t i = 0; dcptopk_merge_config_name(i); i++, names++)
        CHECK_CONTAINS(res.out, dcptopk_merge_config_name(i));
    CHECK(names >= 2);
    CHECK_EQ(count_lines(res.out), names + 1); /* header + one per config */

    CHECK_RUN(RUN(dir, "configs", "--json"), 0);
    CHECK_MSG(json_shape_ok(res.out, '['), "not a JSON array: %s", res.out);
    /* The default of the header: packed, K=2048, N=384, W=8, block 64. */
    CHECK_CONTAINS(res.out,
                   "{\"name\":\"deepseek-v3.2-dcp8\",\"default\":true,"
                   "\"kind\":\"packed\",\"topk\":2048,\"local_topk\":384,"
                   "\"world_size\":8,\"block_size\":64");
    CHECK_EQ(count_substr(res.out, "\"name\":"), names);
    CHECK_EQ(count_substr(res.out, "\"default\":true"), 1);
    remove_dir(dir);
}

TEST(keys_prints_hash_and_spec)
{
    char dir[4096];
    CHECK(make_dir(dir, sizeof dir) == 0);
    int nk = warm_keys();
    CHECK(nk >= 3);
    CHECK_RUN(RUN(dir, "keys", WARM_FIELDS), 0);
    /* A packed config without rescue: topn_pack, pack_indices, select. */
    CHECK_EQ(count_lines(res.out), nk);
    CHECK_CONTAINS(res.out, "  topn_pack(local_topk=96");
    CHECK(strstr(res.out, "rescue(") == NULL);
    const char *line = res.out;
    for (int i = 0; i < nk; i++) {
        CHECK_MSG(is_hex32(line) && line[32] == ' ' && line[33] == ' ',
                  "line %d: %s", i, line);
        const char *nl = strchr(line, '\n');
        CHECK(nl && nl - line > 40);
        CHECK_MSG(strncmp(nl - 6, "@sm_90", 6) == 0, "line %d: %s", i, line);
        line = nl + 1;
    }
    CHECK_CONTAINS(res.out, "  select(topk=512,local_topk=96,world_size=2,");
    CHECK_CONTAINS(res.out, "  pack_indices(local_topk=96)@sm_90\n");

    /* The printed hash is the library's (dcptopk_key_hash). */
    dcptopk_key key;
    memset(&key, 0, sizeof key);
    key.kernel = DCPTOPK_KERNEL_PACK_INDICES;
    key.local_topk = 96;
    strcpy(key.arch, "sm_90");
    char hex[33], want[80];
    CHECK_OK(dcptopk_key_hash(&key, hex));
    snprintf(want, sizeof want, "%s  pack_indices(local_topk=96)@sm_90", hex);
    CHECK_CONTAINS(res.out, want);

    /* Another arch gives other hashes. */
    char first[33];
    memcpy(first, res.out, 32);
    first[32] = '\0';
    CHECK_RUN(RUN(dir, "keys", "--topk", "512", "--local-topk", "96",
                  "--world-size", "2", "--no-exact", "--arch", "sm_90a"),
              0);
    CHECK(strstr(res.out, first) == NULL);

    CHECK_RUN(RUN(dir, "keys", WARM_FIELDS, "--json"), 0);
    CHECK_MSG(json_shape_ok(res.out, '{'), "not a JSON object: %s", res.out);
    CHECK_CONTAINS(res.out, "\"arch\":\"sm_90\"");
    CHECK_CONTAINS(res.out, "\"keys\":[");
    CHECK_EQ(count_substr(res.out, "\"hash\":\""), nk);
    CHECK_CONTAINS(res.out, "\"topk\":512");

    /* The pair merge sets N = K by itself. */
    CHECK_RUN(RUN(dir, "keys", "--pair", "--topk", "512", "--world-size", "4",
                  "--arch", "sm_90", "--json"),
              0);
    CHECK_CONTAINS(res.out, "\"kind\":\"pair\",\"topk\":512,\"local_topk\":512");
    remove_dir(dir);
}

TEST(render_prints_source_and_hash)
{
    char dir[4096];
    CHECK(make_dir(dir, sizeof dir) == 0);
    CHECK_RUN(RUN(dir, "render", "pack_indices(local_topk=96)@sm_90"), 0);
    CHECK_CONTAINS(res.out, "#define DCPTOPK_LOCAL_TOPK 96");
    CHECK_CONTAINS(res.out, "__global__");
    CHECK_RUN(RUN(dir, "render", "pack_indices(local_topk=96)@sm_90", "--hash"),
              0);
    dcptopk_key key;
    memset(&key, 0, sizeof key);
    key.kernel = DCPTOPK_KERNEL_PACK_INDICES;
    key.local_topk = 96;
    strcpy(key.arch, "sm_90");
    char hex[33];
    CHECK_OK(dcptopk_key_hash(&key, hex));
    CHECK_CONTAINS(res.out, hex);
    /* A key whose field the kernel does not use is refused by key_check. */
    CHECK_RUN(RUN(dir, "render", "pack_indices(local_topk=96,topk=64)@sm_90"),
              2);
    CHECK_CONTAINS(res.err, "topk = 64");
    remove_dir(dir);
}

TEST(cache_path_follows_env_and_option)
{
    char dir[4096], want[4200];
    CHECK(make_dir(dir, sizeof dir) == 0);
    CHECK_RUN(RUN(dir, "cache", "path"), 0);
    snprintf(want, sizeof want, "%s/dcptopk.sqlite\n", dir);
    CHECK_STR_EQ(res.out, want);
    CHECK_RUN(RUN(dir, "cache", "path", "--cache", "/nowhere/x.sqlite"), 0);
    CHECK_STR_EQ(res.out, "/nowhere/x.sqlite\n");
    CHECK_RUN(RUN(dir, "cache", "path", "--cache=/a/b.sqlite"), 0);
    CHECK_STR_EQ(res.out, "/a/b.sqlite\n");
    remove_dir(dir);
}

TEST(empty_cache_inspection)
{
    char dir[4096];
    CHECK(make_dir(dir, sizeof dir) == 0);
    CHECK_RUN(RUN(dir, "cache", "ls"), 0);
    CHECK_CONTAINS(res.out, "0 entries");
    CHECK_RUN(RUN(dir, "cache", "ls", "--json"), 0);
    CHECK_MSG(json_shape_ok(res.out, '['), "%s", res.out);
    CHECK_RUN(RUN(dir, "cache", "stats", "--json"), 0);
    CHECK_MSG(json_shape_ok(res.out, '{'), "%s", res.out);
    CHECK_CONTAINS(res.out, "\"entries\":0");
    CHECK_RUN(RUN(dir, "cache", "verify"), 0);
    CHECK_RUN(RUN(dir, "cache", "show", "abcd"), 4);
    CHECK_CONTAINS(res.err, "abcd");
    CHECK_RUN(RUN(dir, "cache", "rm", "abcd"), 4);
    CHECK_CONTAINS(res.err, "abcd");
    remove_dir(dir);
}

TEST(warmup_then_inspect_cache)
{
    char dir[4096];
    int nk = warm_keys();
    CHECK(nk >= 3);
    CHECK(make_dir(dir, sizeof dir) == 0);

    /* First warmup: everything compiled. */
    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS, "--json"), 0);
    CHECK_MSG(json_shape_ok(res.out, '{'), "not a JSON object: %s", res.out);
    CHECK_CONTAINS(res.out, fmt_n("\"keys\":", nk, ","));
    CHECK_CONTAINS(res.out, fmt_n("\"compiled\":", nk, ","));
    CHECK_CONTAINS(res.out, "\"cache_hits\":0,");
    CHECK_CONTAINS(res.out, "\"arch\":\"sm_90\"");
    CHECK_CONTAINS(res.out, "\"device\":-1");
    CHECK_EQ(count_substr(res.out, "\"origin\":\"compiled\""), nk);
    CHECK_CONTAINS(res.out, "\"compile_ms\":");
    CHECK_CONTAINS(res.out, "\"total_ms\":");
    CHECK_EQ(count_substr(res.out, "\"hash\":\""), nk);
    CHECK_CONTAINS(res.out, "\"spec\":\"select(topk=512,local_topk=96,");
    char key[33];

    /* Second warmup in a new process: every key is a cache hit; progress
     * lines with --verbose. */
    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS, "--verbose"), 0);
    CHECK_CONTAINS(res.out, fmt_n("[1/", nk, "] cache"));
    {
        char last[64];
        snprintf(last, sizeof last, "[%d/%d] cache", nk, nk);
        CHECK_CONTAINS(res.out, last);
    }
    CHECK_CONTAINS(res.out, fmt_n("cache hits:  ", nk, "\n"));
    CHECK_CONTAINS(res.out, "compiled:    0\n");
    CHECK_CONTAINS(res.out, fmt_n("keys:        ", nk, "\n"));
    /* Without --verbose and with stdout not a terminal: no progress lines. */
    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS), 0);
    CHECK(strstr(res.out, "[1/") == NULL);
    CHECK_CONTAINS(res.out, "total ms:");
    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS, "--quiet"), 0);
    CHECK_STR_EQ(res.out, "");

    CHECK_RUN(RUN(dir, "cache", "ls"), 0);
    CHECK_CONTAINS(res.out, fmt_n("\n", nk, " entries"));
    CHECK_CONTAINS(res.out, "select");
    CHECK_CONTAINS(res.out, "topn_pack");
    CHECK_CONTAINS(res.out, "pack_indices");
    CHECK_CONTAINS(res.out, "sm_90");
    CHECK_EQ(count_lines(res.out), nk + 2); /* header, entries, total */

    CHECK_RUN(RUN(dir, "cache", "ls", "--json"), 0);
    CHECK_MSG(json_shape_ok(res.out, '['), "not a JSON array: %s", res.out);
    CHECK_EQ(count_substr(res.out, "\"key\":\""), nk);
    CHECK_CONTAINS(res.out, "\"kernel\":\"select\"");
    CHECK_CONTAINS(res.out, "\"cubin_bytes\":");
    CHECK_CONTAINS(res.out, "\"last_used\":");
    CHECK_EQ(first_json_key(res.out, key), 0);

    /* The listed keys are the hashes that `keys` prints. */
    static char ls_json[sizeof res.out];
    memcpy(ls_json, res.out, sizeof ls_json);
    CHECK_RUN(RUN(dir, "keys", WARM_FIELDS), 0);
    const char *line = res.out;
    for (int i = 0; i < nk; i++) {
        char h[40];
        snprintf(h, sizeof h, "\"%.32s\"", line);
        CHECK_CONTAINS(ls_json, h);
        line = strchr(line, '\n') + 1;
    }

    CHECK_RUN(RUN(dir, "cache", "stats"), 0);
    CHECK_CONTAINS(res.out, fmt_n("entries:       ", nk, "\n"));
    CHECK_RUN(RUN(dir, "cache", "stats", "--json"), 0);
    CHECK_MSG(json_shape_ok(res.out, '{'), "%s", res.out);
    CHECK_CONTAINS(res.out, fmt_n("\"entries\":", nk, ","));
    CHECK_CONTAINS(res.out, "\"hits\":");

    char prefix[13];
    memcpy(prefix, key, 12);
    prefix[12] = '\0';
    CHECK_RUN(RUN(dir, "cache", "show", prefix), 0);
    CHECK_CONTAINS(res.out, key);
    CHECK_CONTAINS(res.out, "kernel:");
    CHECK_CONTAINS(res.out, "arch:          sm_90\n");
    CHECK_RUN(RUN(dir, "cache", "show", prefix, "--json"), 0);
    CHECK_MSG(json_shape_ok(res.out, '{'), "%s", res.out);
    CHECK_CONTAINS(res.out, key);
    CHECK_RUN(RUN(dir, "cache", "show", prefix, "--source"), 0);
    CHECK_CONTAINS(res.out, "__global__");
    CHECK(strstr(res.out, "kernel:") == NULL); /* only the source */
    CHECK_RUN(RUN(dir, "cache", "show", prefix, "--ptx"), 0);
    CHECK_CONTAINS(res.out, ".target sm_90");
    CHECK_RUN(RUN(dir, "cache", "show", prefix, "--json", "--source", "--ptx"),
              0);
    CHECK_MSG(json_shape_ok(res.out, '{'), "%s", res.out);
    CHECK_CONTAINS(res.out, "\"source\":\"");
    CHECK_CONTAINS(res.out, "\"ptx\":\"");

    CHECK_RUN(RUN(dir, "cache", "verify"), 0);
    CHECK_CONTAINS(res.out, fmt_n("checked ", nk, " entries"));
    CHECK_CONTAINS(res.out, "0 bad");
    CHECK_RUN(RUN(dir, "cache", "verify", "--json"), 0);
    CHECK_MSG(json_shape_ok(res.out, '{'), "%s", res.out);
    CHECK_CONTAINS(res.out, fmt_n("\"checked\":", nk, ",\"bad\":0"));
    remove_dir(dir);
}

TEST(cache_maintenance_roundtrip)
{
    char dir[4096], exp_path[4200], key[33], prefix[13];
    int nk = warm_keys();
    CHECK(nk >= 3);
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(exp_path, sizeof exp_path, "%s/exported.sqlite", dir);

    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS, "--quiet"), 0);
    CHECK_RUN(RUN(dir, "cache", "export", exp_path), 0);
    CHECK_CONTAINS(res.out, fmt_n("exported ", nk, " entries"));
    CHECK(access(exp_path, F_OK) == 0);
    /* The export is a cache file of its own. */
    CHECK_RUN(RUN(dir, "cache", "ls", "--json", "--cache", exp_path), 0);
    CHECK_EQ(count_substr(res.out, "\"key\":\""), nk);

    CHECK_RUN(RUN(dir, "cache", "ls", "--json"), 0);
    CHECK_EQ(first_json_key(res.out, key), 0);
    memcpy(prefix, key, 12);
    prefix[12] = '\0';
    CHECK_RUN(RUN(dir, "cache", "rm", prefix), 0);
    CHECK_CONTAINS(res.out, key);
    CHECK_RUN(RUN(dir, "cache", "ls", "--json"), 0);
    CHECK_EQ(count_substr(res.out, "\"key\":\""), nk - 1);
    CHECK(strstr(res.out, key) == NULL);
    CHECK_RUN(RUN(dir, "cache", "rm", prefix), 4); /* gone */
    CHECK_CONTAINS(res.err, prefix);

    CHECK_RUN(RUN(dir, "cache", "import", exp_path), 0);
    CHECK_CONTAINS(res.out, "imported");
    CHECK_RUN(RUN(dir, "cache", "ls", "--json"), 0);
    CHECK_EQ(count_substr(res.out, "\"key\":\""), nk);
    CHECK_CONTAINS(res.out, key);

    /* Prune to a budget that holds nothing. */
    CHECK_RUN(RUN(dir, "cache", "prune", "--max-bytes", "1K"), 0);
    CHECK_CONTAINS(res.out, "removed");
    CHECK_RUN(RUN(dir, "cache", "stats", "--json"), 0);
    CHECK_CONTAINS(res.out, "\"entries\":0,");
    /* A budget that holds everything removes nothing. */
    CHECK_RUN(RUN(dir, "cache", "import", exp_path), 0);
    CHECK_RUN(RUN(dir, "cache", "prune", "--max-bytes", "1G"), 0);
    CHECK_CONTAINS(res.out, "removed 0 entries");
    CHECK_RUN(RUN(dir, "cache", "stats", "--json"), 0);
    CHECK_CONTAINS(res.out, fmt_n("\"entries\":", nk, ","));

    CHECK_RUN(RUN(dir, "cache", "clear"), 2);
    CHECK_CONTAINS(res.err, "--yes");
    CHECK_RUN(RUN(dir, "cache", "stats", "--json"), 0);
    CHECK_CONTAINS(res.out, fmt_n("\"entries\":", nk, ","));
    CHECK_RUN(RUN(dir, "cache", "clear", "--yes"), 0);
    CHECK_CONTAINS(res.out, fmt_n("removed ", nk, " entries"));
    CHECK_RUN(RUN(dir, "cache", "ls"), 0);
    CHECK_CONTAINS(res.out, "0 entries");
    CHECK_RUN(RUN(dir, "cache", "import", "/nonexistent/file.sqlite"), 1);
    CHECK_CONTAINS(res.err, "/nonexistent/file.sqlite");
    remove_dir(dir);
}

TEST(verify_reports_corrupt_entries)
{
    char dir[4096], db[4200];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(db, sizeof db, "%s/dcptopk.sqlite", dir);
    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS, "--quiet"), 0);

    /* Damage one entry's source blob behind the cache's back. */
    sqlite3 *h = NULL;
    CHECK_EQ(sqlite3_open(db, &h), SQLITE_OK);
    char *err = NULL;
    int rc = sqlite3_exec(h,
                          "UPDATE entries SET source = X'00' WHERE key = "
                          "(SELECT key FROM entries LIMIT 1)",
                          NULL, NULL, &err);
    CHECK_MSG(rc == SQLITE_OK && sqlite3_changes(h) == 1,
              "corrupting the cache: %s", err ? err : "no row changed");
    sqlite3_close(h);

    CHECK_RUN(RUN(dir, "cache", "verify"), 3);
    CHECK_CONTAINS(res.out, "1 bad");
    CHECK_CONTAINS(res.err, "dcptopk: error: ");
    /* The bad row was removed: verify is clean now. */
    CHECK_RUN(RUN(dir, "cache", "verify", "--json"), 0);
    CHECK_CONTAINS(res.out,
                   fmt_n("\"checked\":", warm_keys() - 1, ",\"bad\":0"));
    remove_dir(dir);
}

TEST(warmup_without_gpu_needs_arch)
{
    if (dcptopk_device_count() > 0)
        SKIP("a CUDA device is present");
    char dir[4096];
    CHECK(make_dir(dir, sizeof dir) == 0);
    CHECK_RUN(RUN(dir, "warmup"), 5);
    CHECK_CONTAINS(res.err, "dcptopk: error: ");
    CHECK_CONTAINS(res.err, "no CUDA device");
    CHECK_CONTAINS(res.err, "--arch");
    CHECK_RUN(RUN(dir, "warmup", "--device", "0", "--topk", "512",
                  "--local-topk", "96"),
              5);
    remove_dir(dir);
}

TEST(devices_counts_the_library_devices)
{
    char dir[4096];
    CHECK(make_dir(dir, sizeof dir) == 0);
    int n = dcptopk_device_count();
    CHECK_RUN(RUN(dir, "devices"), 0);
    CHECK_CONTAINS(res.out, fmt_n("devices: ", n, ""));
    CHECK_RUN(RUN(dir, "devices", "--json"), 0);
    CHECK_MSG(json_shape_ok(res.out, '{'), "%s", res.out);
    CHECK_CONTAINS(res.out, fmt_n("{\"count\":", n, ",\"devices\":["));
    CHECK_EQ(count_substr(res.out, "\"ordinal\":"), n);
    CHECK_RUN(RUN(dir, "devices", "--all"), 2);
    CHECK_CONTAINS(res.err, "--all");
    remove_dir(dir);
}

TEST(env_lists_versions_cache_and_every_setting)
{
    char dir[4096];
    CHECK(make_dir(dir, sizeof dir) == 0);
    /* One valid and one invalid value: their sources must say so. */
    setenv("DCPTOPK_CACHE_BUSY_MS", "1234", 1);
    setenv("DCPTOPK_PEER_TIMEOUT_MS", "soon", 1);
    unsetenv("DCPTOPK_WARMUP_THREADS");
    CHECK_RUN(RUN(dir, "env", "--json"), 0);
    CHECK_MSG(json_shape_ok(res.out, '{'), "%s", res.out);
    CHECK_CONTAINS(res.out, "{\"library\":{\"version\":\"");
    CHECK_CONTAINS(res.out, dcptopk_version_string());
    CHECK_CONTAINS(res.out, "\"nvrtc\":{\"version\":\"");
    CHECK_CONTAINS(res.out, "\"driver\":{\"version\":");
    CHECK_CONTAINS(res.out, "\"cache\":{\"path\":");
    /* The ctest cache folder is ours: absent (nothing compiled yet). */
    CHECK_CONTAINS(res.out, "\"mode\":\"absent\"");
    CHECK_CONTAINS(res.out, dir);
    CHECK_EQ(count_substr(res.out, "\"ordinal\":"), dcptopk_device_count());
    /* Every setting of the table, once, in table order. */
    dcptopk_setting s = DCPTOPK_SETTING_INIT;
    size_t n = 0;
    const char *at = res.out;
    char want[256];
    for (; dcptopk_setting_get(n, &s) == DCPTOPK_SUCCESS; n++) {
        snprintf(want, sizeof want, "{\"name\":\"%s\",\"kind\":\"%s\"",
                 s.name, s.kind);
        const char *p = strstr(at, want);
        CHECK_MSG(p != NULL, "setting %s missing or out of order", s.name);
        if (p)
            at = p;
    }
    CHECK(n > 20);
    CHECK_EQ(count_substr(res.out, "{\"name\":"), (int)n);
    CHECK_EQ(dcptopk_setting_get(n, &s), DCPTOPK_NOT_FOUND);
    CHECK_CONTAINS(res.out, "{\"name\":\"DCPTOPK_CACHE_BUSY_MS\",\"kind\":"
                            "\"int\",\"value\":\"1234\",\"env\":\"1234\","
                            "\"source\":\"environment\"");
    CHECK_CONTAINS(res.out, "{\"name\":\"DCPTOPK_PEER_TIMEOUT_MS\",\"kind\":"
                            "\"int\",\"value\":\"10000\",\"env\":\"soon\","
                            "\"source\":\"ignored\"");
    CHECK_CONTAINS(res.out, "{\"name\":\"DCPTOPK_WARMUP_THREADS\",\"kind\":"
                            "\"int\",\"value\":\"0\",\"env\":null,"
                            "\"source\":\"default\"");
    /* The same through the library call. */
    CHECK_EQ(dcptopk_setting_get(0, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "out is NULL");
    dcptopk_setting small = DCPTOPK_SETTING_INIT;
    small.struct_size = 8;
    CHECK_EQ(dcptopk_setting_get(0, &small), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "struct_size = 8");
    /* Text: the same facts, and no warning for the invalid value (env
     * reports, it does not read). */
    CHECK_RUN(RUN(dir, "env"), 0);
    CHECK_CONTAINS(res.out, "DCPTOPK_CACHE_BUSY_MS");
    CHECK_CONTAINS(res.out, "1234 (environment)");
    CHECK_CONTAINS(res.out, "10000 (ignored \"soon\": invalid)");
    CHECK_CONTAINS(res.out, "driver:");
    CHECK(strstr(res.err, "ignoring") == NULL);
    /* No GPU is a fact, not a failure. */
    setenv("DCPTOPK_DISABLE_CUDA", "1", 1);
    CHECK_RUN(RUN(dir, "env"), 0);
    CHECK_CONTAINS(res.out, "driver:   none: the CUDA driver is disabled by "
                            "DCPTOPK_DISABLE_CUDA=1");
    CHECK_CONTAINS(res.out, "devices:  0");
    unsetenv("DCPTOPK_DISABLE_CUDA");
    /* An untrusted cache folder is reported as refused, with the reason. */
    char bad[4200];
    snprintf(bad, sizeof bad, "%s/open", dir);
    CHECK(mkdir(bad, 0777) == 0 && chmod(bad, 0777) == 0);
    setenv("DCPTOPK_CACHE_DIR", bad, 1);
    CHECK_EQ(dcptopk_env_info_get(NULL), DCPTOPK_INVALID_ARGUMENT);
    dcptopk_env_info e = DCPTOPK_ENV_INFO_INIT;
    CHECK_EQ(dcptopk_env_info_get(&e), DCPTOPK_SUCCESS);
    CHECK_MSG(strcmp(e.cache_mode, "refused") == 0, "mode %s", e.cache_mode);
    CHECK_CONTAINS(e.cache_why, "writable by its group and others");
    CHECK_EQ(e.device_count, dcptopk_device_count());
    CHECK(e.nvrtc_major >= 11);
    CHECK_CONTAINS(e.nvrtc_path, "nvrtc");
    CHECK_RUN(RUN(dir, "env", "--bogus"), 2);
    CHECK_CONTAINS(res.err, "--bogus");
    unsetenv("DCPTOPK_CACHE_BUSY_MS");
    unsetenv("DCPTOPK_PEER_TIMEOUT_MS");
    remove_dir(dir);
}

TEST(selftest_checks_the_reference)
{
    char dir[4096];
    CHECK(make_dir(dir, sizeof dir) == 0);
    CHECK_RUN(RUN(dir, "selftest", "--no-gpu"), 0);
    CHECK_CONTAINS(res.out, "devices: ");
    CHECK_CONTAINS(res.out, "default config: deepseek-v3.2-dcp8");
    CHECK_CONTAINS(res.out, "ok    distinct scores");
    CHECK_CONTAINS(res.out, "ok    heavy ties");
    CHECK_CONTAINS(res.out, "dcptopk_selftest without a GPU");
    CHECK_CONTAINS(res.out, "ok    CPU reference vs sort");
    CHECK_CONTAINS(res.out, "GPU results were not verified");
    CHECK_CONTAINS(res.out, "selftest passed");
    CHECK_RUN(RUN(dir, "selftest", "deepseek-v3.2-dcp8-pair"), 2);
    CHECK_CONTAINS(res.err, "deepseek-v3.2-dcp8-pair");
    CHECK_RUN(RUN(dir, "selftest", "nope"), 4);
    CHECK_CONTAINS(res.err, "nope");
    CHECK_RUN(RUN(dir, "selftest", "--rows", "0"), 2);
    CHECK_CONTAINS(res.err, "--rows = 0");
    CHECK_RUN(RUN(dir, "selftest", "--no-gpu", "topk512-dcp8", "--rows", "8"),
              0);
    CHECK_CONTAINS(res.out, "config topk512-dcp8");
    /* The first case has saturated rows: the rescue round ran. */
    const char *line = strstr(res.out, "ok    distinct scores");
    const char *end = strchr(line, '\n');
    const char *resc = strstr(line, " rescued row");
    CHECK(resc && resc < end);
    CHECK_MSG(strncmp(resc - 2, " 0", 2) != 0, "no rescued row: %.*s",
              (int)(end - line), line);
    remove_dir(dir);
}

/* A new, empty cache file at `path`, made by the library. */
static int new_cache_file(const char *path)
{
    dcptopk_cache *h = NULL;
    if (dcptopk_cache_open(path, 0, &h) != DCPTOPK_SUCCESS)
        return -1;
    dcptopk_cache_close(h);
    return 0;
}

static int sql_run(const char *path, const char *sql)
{
    sqlite3 *h = NULL;
    int rc = sqlite3_open(path, &h);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
    sqlite3_close(h);
    return rc;
}

TEST(cache_commands_fail_when_they_cannot_reach_the_file)
{
    char dir[4096], bad[4200], app[4200], out[4200], side[4300];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(bad, sizeof bad, "%s/bad.sqlite", dir);
    snprintf(app, sizeof app, "%s/app.db", dir);
    snprintf(out, sizeof out, "%s/out.sqlite", dir);

    /* Not a regular file: refused, and no /dev/null-journal. */
    struct stat st;
    int had_journal = lstat("/dev/null-journal", &st) == 0;
    CHECK_RUN(RUN(dir, "cache", "ls", "--json", "--cache", "/dev/null"), 1);
    CHECK_CONTAINS(res.out, "\"error\":{\"exit_code\":1,");
    CHECK_CONTAINS(res.out, "not a regular file");
    CHECK_RUN(RUN(dir, "cache", "verify", "--cache", "/dev/null"), 1);
    if (!had_journal)
        CHECK(lstat("/dev/null-journal", &st) != 0);

    /* A damaged file: every command says so and exits 1; nothing moves,
     * no empty export is written. */
    FILE *f = fopen(bad, "w");
    CHECK(f != NULL);
    fputs("this is not a database, it only sits where one should be\n", f);
    fclose(f);
    CHECK_RUN(RUN(dir, "cache", "stats", "--cache", bad), 1);
    CHECK_CONTAINS(res.err, "damaged");
    CHECK_RUN(RUN(dir, "cache", "stats", "--json", "--cache", bad), 1);
    CHECK_CONTAINS(res.out, "\"error\"");
    CHECK_RUN(RUN(dir, "cache", "ls", "--cache", bad), 1);
    CHECK_RUN(RUN(dir, "cache", "export", out, "--cache", bad), 1);
    CHECK(access(out, F_OK) != 0);
    CHECK_RUN(RUN(dir, "cache", "verify", "--cache", bad), 1);
    CHECK(access(bad, F_OK) == 0);
    CHECK_EQ(count_substr(res.err, ".corrupt-"), 0);

    /* Another program's database: refused, not switched to WAL, not
     * renamed. */
    CHECK_EQ(sql_run(app, "CREATE TABLE accounts(id INTEGER)"), SQLITE_OK);
    CHECK_RUN(RUN(dir, "cache", "verify", "--cache", app), 1);
    CHECK_CONTAINS(res.err, "not a dcptopk cache");
    snprintf(side, sizeof side, "%s-wal", app);
    CHECK(access(side, F_OK) != 0);
    CHECK(access(app, F_OK) == 0);
    CHECK_RUN(RUN(dir, "cache", "prune", "--max-bytes", "1K", "--cache", app),
              1);

    /* An unwritable place (even root cannot create files in /proc): the
     * import fails instead of "importing" into memory. */
    CHECK_RUN(RUN(dir, "cache", "import", bad, "--cache",
                  "/proc/dcptopk-test.sqlite"),
              1);
    CHECK(strstr(res.out, "imported") == NULL);
    remove_dir(dir);
}

TEST(cache_claims_lists_and_clears_stale_claims)
{
    char dir[4096], db[4200], sql[512];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(db, sizeof db, "%s/dcptopk.sqlite", dir);
    CHECK_EQ(new_cache_file(db), 0);
    long long now = (long long)time(NULL) * 1000;
    /* One live (another host, just started), one dated an hour ahead. */
    snprintf(sql, sizeof sql,
             "INSERT INTO claims VALUES('%032d', 1, 'host-a', 5, %lld);"
             "INSERT INTO claims VALUES('%031d1', 1, 'host-b', 6, %lld)",
             0, now, 0, now + 3600 * 1000);
    CHECK_EQ(sql_run(db, sql), SQLITE_OK);
    CHECK_RUN(RUN(dir, "cache", "claims", "--json"), 0);
    CHECK_EQ(count_substr(res.out, "\"key\":"), 2);
    CHECK_EQ(count_substr(res.out, "\"stale\":true"), 1);
    CHECK_RUN(RUN(dir, "cache", "claims"), 0);
    CHECK_CONTAINS(res.out, "stale");
    CHECK_CONTAINS(res.out, "2 claims");
    CHECK_RUN(RUN(dir, "cache", "claims", "--clear-stale"), 0);
    CHECK_CONTAINS(res.out, "removed 1 stale claim");
    CHECK_CONTAINS(res.out, "1 claim in");
    CHECK_RUN(RUN(dir, "cache", "stats", "--json"), 0);
    CHECK_CONTAINS(res.out, "\"claims\":1");
    remove_dir(dir);
}

TEST(cache_rm_removes_a_malformed_key_and_json_errors_go_to_stdout)
{
    char dir[4096], db[4200];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(db, sizeof db, "%s/dcptopk.sqlite", dir);
    CHECK_EQ(new_cache_file(db), 0);
    CHECK_EQ(sql_run(db, "INSERT INTO entries VALUES('weird key!', 'select',"
                         " '', 'sm_90a', '13.0', '0.1.0', 'x', 0, 1, 0, 0, "
                         "0, X'00', NULL, NULL)"),
             SQLITE_OK);
    CHECK_RUN(RUN(dir, "cache", "verify", "--json"), 3);
    CHECK_CONTAINS(res.out, "\"bad\":1");
    CHECK_EQ(sql_run(db, "INSERT INTO entries VALUES('weird key!', 'select',"
                         " '', 'sm_90a', '13.0', '0.1.0', 'x', 0, 1, 0, 0, "
                         "0, X'00', NULL, NULL)"),
             SQLITE_OK);
    CHECK_RUN(RUN(dir, "cache", "rm", "weird key!"), 2); /* not hex */
    CHECK_RUN(RUN(dir, "cache", "rm", "--exact", "weird key!"), 0);
    CHECK_RUN(RUN(dir, "cache", "stats", "--json"), 0);
    CHECK_CONTAINS(res.out, "\"entries\":0,");
    /* --json errors are JSON on stdout too. */
    CHECK_RUN(RUN(dir, "cache", "show", "abcd1234", "--json"), 4);
    CHECK_CONTAINS(res.out, "{\"error\":{\"exit_code\":4,\"message\":");
    CHECK_CONTAINS(res.err, "abcd1234");
    remove_dir(dir);
}

/* A path of 5000 characters: one check, the same exit code (2) and message
 * for every command that takes one. */
TEST(every_command_refuses_a_path_that_is_too_long)
{
    char dir[4096];
    CHECK(make_dir(dir, sizeof dir) == 0);
    static char longp[5001];
    longp[0] = '/';
    memset(longp + 1, 'a', sizeof longp - 2);
    longp[sizeof longp - 1] = '\0';
    const char *subs[] = {"ls", "stats", "verify", "claims", "path", "show"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        if (strcmp(subs[i], "show") == 0)
            RUN(dir, "cache", "show", "abcd", "--cache", longp);
        else
            RUN(dir, "cache", subs[i], "--cache", longp);
        CHECK_MSG(res.status == 2, "cache %s: exit %d; stderr: %s", subs[i],
                  res.status, res.err);
        CHECK_CONTAINS(res.err, "--cache");
        CHECK_CONTAINS(res.err, "too long");
    }
    CHECK_RUN(RUN(dir, "cache", "import", longp), 2);
    CHECK_CONTAINS(res.err, "FILE");
    CHECK_CONTAINS(res.err, "too long");
    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS, "--cache", longp), 2);
    CHECK_CONTAINS(res.err, "too long");
    CHECK_RUN(RUN(dir, "selftest", "--no-gpu", "--cache", longp), 2);
    CHECK_CONTAINS(res.err, "too long");
    remove_dir(dir);
}

/* A file that is not a database: the error ends with SQLite's reason, not
 * with ": not an error", and no empty destination is left behind. */
TEST(failed_import_says_why_and_leaves_no_file)
{
    char dir[4096], junk[4200], dst[4200], side[4300];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(junk, sizeof junk, "%s/junk.bin", dir);
    snprintf(dst, sizeof dst, "%s/new.sqlite", dir);
    FILE *f = fopen(junk, "w");
    CHECK(f != NULL);
    for (int i = 0; i < 200; i++)
        fputs("not a database at all, only text ", f);
    fclose(f);
    CHECK_RUN(RUN(dir, "cache", "import", junk, "--cache", dst), 1);
    CHECK_CONTAINS(res.err, "junk.bin");
    CHECK_MSG(strstr(res.err, "not an error") == NULL, "stderr: %s", res.err);
    CHECK(access(dst, F_OK) != 0);
    static const char *const sides[] = {"-wal", "-shm", "-journal",
                                        "-reserve"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(side, sizeof side, "%s%s", dst, sides[i]);
        CHECK_MSG(access(side, F_OK) != 0, "%s left behind", side);
    }
    remove_dir(dir);
}

/* A forged entry (a real entry under another key): the import prints the
 * rejected count, exits 3, and leaves no empty new destination. */
TEST(import_of_a_forged_entry_reports_one_rejected)
{
    char dir[4096], exp_path[4200], dst[4200], sql[512];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(exp_path, sizeof exp_path, "%s/forged.sqlite", dir);
    snprintf(dst, sizeof dst, "%s/dst.sqlite", dir);
    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS, "--quiet"), 0);
    CHECK_RUN(RUN(dir, "cache", "export", exp_path), 0);
    /* One row left, then moved under a key that is not its hash. */
    snprintf(sql, sizeof sql,
             "DELETE FROM entries WHERE key <> (SELECT min(key) FROM "
             "entries); UPDATE entries SET key='%s'",
             "00112233445566778899aabbccddeeff");
    CHECK_EQ(sql_run(exp_path, sql), SQLITE_OK);
    CHECK_RUN(RUN(dir, "cache", "import", exp_path, "--cache", dst), 3);
    CHECK_CONTAINS(res.out, "imported 0 entries");
    CHECK_CONTAINS(res.out, "; 1 rejected");
    CHECK_CONTAINS(res.err, "1 entry of");
    CHECK(access(dst, F_OK) != 0);
    remove_dir(dir);
}

/* Warmup into a folder that everybody can write (1777): it runs in memory
 * and says so in the summary; the warning names what would work (a private
 * folder), not DCPTOPK_CACHE_SHARED, which never allows such a folder. */
TEST(warmup_in_a_world_writable_folder_says_in_memory)
{
    char dir[4096], pub[4200], db[4300];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(pub, sizeof pub, "%s/public", dir);
    CHECK_EQ(mkdir(pub, 0700), 0);
    CHECK_EQ(chmod(pub, 01777), 0);
    snprintf(db, sizeof db, "%s/c.sqlite", pub);
    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS, "--cache", db), 0);
    CHECK_CONTAINS(res.out, "cache:       in memory");
    CHECK_CONTAINS(res.err, "private folder");
    CHECK_MSG(strstr(res.err, "DCPTOPK_CACHE_SHARED=1") == NULL,
              "stderr: %s", res.err);
    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS, "--cache", db, "--json"), 0);
    CHECK_CONTAINS(res.out, "\"in_memory\":true");
    /* Into its own folder: the path, not "in memory". */
    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS, "--json"), 0);
    CHECK_CONTAINS(res.out, "\"in_memory\":false");
    CHECK_RUN(RUN(dir, "warmup", WARM_FIELDS), 0);
    CHECK(strstr(res.out, "in memory (") == NULL);
    remove_dir(dir);
}

/* A claim of a process that is gone (same host) is not a compile in
 * progress: stats does not count it, claims --clear-stale removes it. */
TEST(stats_does_not_count_a_dead_holders_claim)
{
    char dir[4096], db[4200], sql[512], host[256];
    CHECK(make_dir(dir, sizeof dir) == 0);
    snprintf(db, sizeof db, "%s/dcptopk.sqlite", dir);
    CHECK_EQ(new_cache_file(db), 0);
    CHECK_EQ(gethostname(host, sizeof host), 0);
    host[sizeof host - 1] = '\0';
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0)
        _exit(0);
    int st = 0;
    CHECK(waitpid(child, &st, 0) == child);
    long long now = (long long)time(NULL) * 1000;
    snprintf(sql, sizeof sql,
             "INSERT INTO claims VALUES('%032d', %d, '%s', 7, %lld)", 0,
             (int)child, host, now);
    CHECK_EQ(sql_run(db, sql), SQLITE_OK);
    CHECK_RUN(RUN(dir, "cache", "stats", "--json"), 0);
    CHECK_CONTAINS(res.out, "\"claims\":0");
    CHECK_RUN(RUN(dir, "cache", "claims", "--clear-stale"), 0);
    CHECK_CONTAINS(res.out, "removed 1 stale claim");
    remove_dir(dir);
}
