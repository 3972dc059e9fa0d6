/* cmd_selftest.c - `dcptopk selftest` and `dcptopk devices`. The selftest
 * prints the devices and the default config, checks the CPU reference merge
 * (dcptopk_ref_packed_merge) on hard inputs with the library's own checks
 * (each rank's round-1 rows through dcptopk_ref_check_contract, and the
 * merged rows against a certificate that nothing better was left out; the
 * tool keeps no top-K of its own), then runs the library's dcptopk_selftest:
 * on a GPU the whole merge compared bit for bit with the reference, without
 * one the reference against an independent sort. Each line says what it
 * verified. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* cmd_selftest_ranks.c */
int st_as_rank(const char *cache, const dcptopk_merge_config *cfg,
               int32_t rows, int32_t steps, uint64_t seed);
int st_ranks(const char *name, const char *cache, int32_t ranks,
             int32_t rows, int32_t steps, uint64_t seed);

/* xorshift64*: deterministic inputs. */
static uint64_t st_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

enum { ST_W = 4, ST_K = 64, ST_N = 32, ST_T = 8, ST_S = 200 };

/* One case: fills the logits, runs the reference merge and checks it without
 * a second implementation of the top K: every rank's round-1 rows pass
 * dcptopk_ref_check_contract, every rank returns the same ids, -1 pads the
 * tail, the ids are distinct candidates (dcptopk_ref_global_id round trip,
 * non-NaN, below row_end), as many as min(K, candidates), and no unselected
 * candidate scores above the lowest selected one: together these say the
 * selected score multiset is the top K, and with `distinct` scores (every
 * logit of a row differs) that the id set is the unique top K. Returns an
 * exit code; prints one result line. */
static int st_case(const char *title, int distinct, int32_t interleave,
                   uint64_t seed, int verbose)
{
    static uint16_t logits[ST_W][ST_T * ST_S];
    static int32_t row_ends[ST_W][ST_T];
    static int32_t ids[ST_W][ST_T * ST_K];
    static uint8_t used[65536];
    static const uint16_t tie_values[] = {0x3F80, 0x4000, 0x7F80, 0xFF80,
                                          0x0000, 0x8000, 0x7FC0, 0xBF80};
    uint64_t rng = seed;
    static const int32_t ends[ST_T] = {ST_S, 150, 40, 33, 10, 1, 0, ST_S};

    for (int t = 0; t < ST_T; t++) {
        memset(used, 0, sizeof used);
        for (int r = 0; r < ST_W; r++) {
            row_ends[r][t] = ends[(t + r) % ST_T];
            for (int l = 0; l < ST_S; l++) {
                uint16_t b;
                if (!distinct) {
                    b = tie_values[st_rand(&rng) % 8];
                } else {
                    do {
                        b = (uint16_t)st_rand(&rng);
                        /* Row 0: rank 0 holds all the large values, so it is
                         * saturated and the rescue round runs. */
                        if (t == 0)
                            b = r == 0 ? (uint16_t)(0x7000 | (b & 0x0EFF))
                                       : (uint16_t)(b & 0x3FFF);
                    } while ((b & 0x7FFF) > 0x7F80 || used[b]);
                    used[b] = 1;
                }
                logits[r][t * ST_S + l] = b;
            }
        }
    }

    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.kind = DCPTOPK_MERGE_PACKED;
    c.topk = ST_K;
    c.local_topk = ST_N;
    c.world_size = ST_W;
    c.block_size = 0;
    c.interleave = interleave;
    c.emit_ids = 1;
    c.exact = 1;
    const uint16_t *lp[ST_W];
    const int32_t *rp[ST_W];
    int32_t *ip[ST_W];
    for (int r = 0; r < ST_W; r++) {
        lp[r] = logits[r];
        rp[r] = row_ends[r];
        ip[r] = ids[r];
    }
    int64_t rescued = 0;
    dcptopk_result res = dcptopk_ref_packed_merge(
        &c, lp, ST_S, ST_S, rp, ST_T, ip, NULL, NULL, &rescued);
    if (res != DCPTOPK_SUCCESS)
        return cli_lib_error(res, "dcptopk_ref_packed_merge",
                             dcptopk_last_error(NULL));

    /* Round 1 of every rank, checked against the contract by the library. */
    static int32_t packed[ST_T * (ST_N + ST_N / 32)];
    for (int r = 0; r < ST_W; r++) {
        dcptopk_pack_args pa = DCPTOPK_PACK_ARGS_INIT;
        pa.logits = logits[r];
        pa.logits_stride = ST_S;
        pa.max_local_len = ST_S;
        pa.row_ends = row_ends[r];
        pa.rows = ST_T;
        pa.out = packed;
        int64_t bad_row = -1;
        if ((res = dcptopk_ref_pack(&c, &pa)))
            return cli_lib_error(res, "dcptopk_ref_pack",
                                 dcptopk_last_error(NULL));
        res = dcptopk_ref_check_contract(&c, packed, logits[r], ST_S, ST_S,
                                         row_ends[r], ST_T, &bad_row);
        if (res == DCPTOPK_CONTRACT_VIOLATION) {
            printf("FAIL  %s: rank %d row %lld: round 1 breaks the contract: "
                   "%s\n",
                   title, r, (long long)bad_row, dcptopk_last_error(NULL));
            return CLI_SELFTEST_FAIL;
        }
        if (res)
            return cli_lib_error(res, "dcptopk_ref_check_contract",
                                 dcptopk_last_error(NULL));
    }

    for (int t = 0; t < ST_T; t++) {
        static uint8_t chosen[ST_W][ST_S];
        memset(chosen, 0, sizeof chosen);
        int candidates = 0;
        for (int r = 0; r < ST_W; r++)
            for (int l = 0; l < row_ends[r][t] && l < ST_S; l++)
                candidates += dcptopk_ref_ord16(logits[r][t * ST_S + l]) != 0;
        int want = candidates < ST_K ? candidates : ST_K;

        /* Every rank holds the same ids in the same order. */
        for (int r = 1; r < ST_W; r++)
            if (memcmp(ids[r] + t * ST_K, ids[0] + t * ST_K,
                       ST_K * sizeof(int32_t)) != 0) {
                printf("FAIL  %s: row %d: rank %d's ids differ from rank 0's\n",
                       title, t, r);
                return CLI_SELFTEST_FAIL;
            }
        const int32_t *got = ids[0] + t * ST_K;
        int cnt = 0;
        while (cnt < ST_K && got[cnt] >= 0)
            cnt++;
        for (int j = cnt; j < ST_K; j++)
            if (got[j] != -1) {
                printf("FAIL  %s: row %d: slot %d = %d after the -1 padding\n",
                       title, t, j, got[j]);
                return CLI_SELFTEST_FAIL;
            }
        if (cnt != want) {
            printf("FAIL  %s: row %d: %d ids selected of %d candidates, "
                   "expected %d\n",
                   title, t, cnt, candidates, want);
            return CLI_SELFTEST_FAIL;
        }
        uint32_t lowest = UINT32_MAX;
        for (int j = 0; j < cnt; j++) {
            int32_t g = got[j];
            int32_t owner = (g / interleave) % ST_W;
            int32_t l = (g / (ST_W * interleave)) * interleave + g % interleave;
            uint32_t o = l < row_ends[owner][t] && l < ST_S
                             ? dcptopk_ref_ord16(logits[owner][t * ST_S + l])
                             : 0;
            if (o == 0 ||
                dcptopk_ref_global_id(l, owner, ST_W, interleave) != g) {
                printf("FAIL  %s: row %d: id %d is not a candidate\n", title,
                       t, g);
                return CLI_SELFTEST_FAIL;
            }
            if (chosen[owner][l]) {
                printf("FAIL  %s: row %d: id %d selected twice\n", title, t,
                       g);
                return CLI_SELFTEST_FAIL;
            }
            chosen[owner][l] = 1;
            if (o < lowest)
                lowest = o;
        }
        for (int r = 0; r < ST_W; r++)
            for (int l = 0; l < row_ends[r][t] && l < ST_S; l++) {
                uint32_t o = dcptopk_ref_ord16(logits[r][t * ST_S + l]);
                if (!chosen[r][l] && o > lowest) {
                    printf("FAIL  %s: row %d: id %d (rank %d) was left out "
                           "but scores above the lowest selected\n",
                           title, t, dcptopk_ref_global_id(l, r, ST_W,
                                                           interleave),
                           r);
                    return CLI_SELFTEST_FAIL;
                }
            }
        if (verbose)
            printf("      row %d: %d selected\n", t, cnt);
    }
    printf("ok    %s: %d rows, W=%d K=%d N=%d S=%d, %lld rescued row%s; %s\n",
           title, ST_T, ST_W, ST_K, ST_N, interleave, (long long)rescued,
           rescued == 1 ? "" : "s",
           distinct ? "round 1 meets the contract, id sets are the top K" :
                      "round 1 meets the contract, score multisets are the "
                      "top K, ids distinct");
    return CLI_OK;
}

/* The library's dcptopk_selftest on one context; prints its summary. */
static int st_library(int32_t device, const char *arch, const char *cache,
                      const dcptopk_merge_config *c, const char *label,
                      int64_t rows, uint64_t seed)
{
    dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
    cfg.device = device;
    cfg.arch = arch;
    cfg.cache_path = cache;
    dcptopk_context *ctx = NULL;
    dcptopk_result r = dcptopk_context_create(&cfg, &ctx);
    if (r != DCPTOPK_SUCCESS)
        return cli_lib_error(r, "creating the context",
                             dcptopk_last_error(NULL));
    dcptopk_selftest_report rep = DCPTOPK_SELFTEST_REPORT_INIT;
    r = dcptopk_selftest(ctx, c, rows, seed, &rep);
    int rc = CLI_OK;
    if (r == DCPTOPK_SUCCESS) {
        printf("ok    %s: %s\n", label, rep.summary);
    } else if (r == DCPTOPK_INTERNAL && rep.mismatches > 0) {
        printf("FAIL  %s: %s\n", label, rep.summary);
        rc = CLI_SELFTEST_FAIL;
    } else {
        rc = cli_lib_error(r, "dcptopk_selftest", dcptopk_last_error(ctx));
    }
    dcptopk_context_destroy(ctx);
    return rc;
}

int cmd_selftest(int argc, char **argv)
{
    cli_opt opts[] = {{"--device", 1, 0, NULL}, {"--cache", 1, 0, NULL},
                      {"--rows", 1, 0, NULL},   {"--seed", 1, 0, NULL},
                      {"--no-gpu", 0, 0, NULL}, {"--verbose", 0, 0, NULL},
                      {"--ranks", 1, 0, NULL},  {"--steps", 1, 0, NULL},
                      {"--as-rank", 0, 0, NULL}, {"--node-size", 1, 0, NULL},
                      {NULL, 0, 0, NULL}};
    const char *pos[1];
    int npos, help, rc;
    if ((rc = cli_parse("selftest", argc, argv, opts, pos, 1, &npos, &help)))
        return rc;
    if (help) {
        printf(
            "usage: dcptopk selftest [CONFIG] [--rows R] [--seed S] [--device D]\n"
            "                        [--cache PATH] [--no-gpu] [--verbose]\n"
            "       dcptopk selftest [CONFIG] --ranks N [--node-size L]\n"
            "                        [--steps S] [--rows R] [--seed S]\n"
            "\n"
            "Prints the library version, the number of CUDA devices and the\n"
            "default config, then runs three checks and says what each verified:\n"
            "  1. CPU: the reference packed merge (dcptopk_ref_packed_merge,\n"
            "     exact mode, with saturated rows so the rescue round runs) on\n"
            "     distinct scores and on heavy ties (+-inf, +-0, NaN),\n"
            "     interleave 1 and 2: each rank's round 1 through\n"
            "     dcptopk_ref_check_contract, then every rank's ids equal,\n"
            "     distinct, valid, and nothing left out scores above the\n"
            "     lowest selected (the top K, with no second top K here).\n"
            "  2. The library's dcptopk_selftest for CONFIG (a packed config\n"
            "     with interleave 1; default deepseek-v3.2-dcp8), R rows\n"
            "     (default 64) of seeded random logits per rank:\n"
            "     - with a GPU (device D, default 0; unless --no-gpu): the\n"
            "       whole two-round merge runs on the GPU in a loopback world\n"
            "       and every output is compared bit for bit with the CPU\n"
            "       reference (kernels are compiled or read from the cache);\n"
            "     - without: the CPU reference against an independent sort.\n"
            "\n"
            "\n"
            "With --ranks N [--steps S]: the distributed merge instead. N\n"
            "processes (one GPU each when there are N GPUs, else all on GPU 0)\n"
            "form a group (NCCL when every rank has its own GPU, else a file\n"
            "store), print the exchange path, and run S (default 3) one-call\n"
            "merges of CONFIG with W = N, rows saturated at the maximum count\n"
            "included, each rank's outputs compared bit for bit with the\n"
            "reference.\n"
            "With --node-size L (L divides N): the ranks form N / L simulated\n"
            "nodes (DCPTOPK_DOMAIN_SIZE=L: no peer memory between nodes), so\n"
            "the exact merge runs hierarchically, checked against\n"
            "dcptopk_ref_hier_merge.\n"
            "\n"
            "Exit code 6 when a comparison fails, 1 when a library call fails.\n");
        return CLI_OK;
    }
    int32_t device = 0;
    cli_opt *d = cli_find(opts, "--device");
    if (d->seen) {
        if ((rc = cli_parse_i32("--device", d->value, &device)))
            return rc;
        if (device < 0)
            return cli_error(CLI_USAGE, "--device = %d: must be >= 0", device);
    }
    int32_t rows = 64;
    cli_opt *ro = cli_find(opts, "--rows");
    if (ro->seen) {
        if ((rc = cli_parse_i32("--rows", ro->value, &rows)))
            return rc;
        if (rows < 1 || rows > 4096)
            return cli_error(CLI_USAGE, "--rows = %d: must be in 1..4096",
                             rows);
    }
    uint64_t seed = 1;
    cli_opt *so = cli_find(opts, "--seed");
    if (so->seen && (rc = cli_parse_u64("--seed", so->value, &seed)))
        return rc;
    const char *cache = cli_find(opts, "--cache")->value;
    if ((rc = cli_check_path("--cache", cache)))
        return rc;
    int verbose = cli_find(opts, "--verbose")->seen;

    const char *name = npos ? pos[0] : dcptopk_merge_config_name(0);
    dcptopk_merge_config cfg;
    dcptopk_result r = dcptopk_merge_config_named(name ? name : "", &cfg);
    if (r == DCPTOPK_NOT_FOUND)
        return cli_error(CLI_NOT_FOUND, "config '%s': %s (see 'dcptopk "
                         "configs')", name, dcptopk_last_error(NULL));
    if (r != DCPTOPK_SUCCESS)
        return cli_lib_error(r, "reading the config", dcptopk_last_error(NULL));
    if (cfg.kind != DCPTOPK_MERGE_PACKED || cfg.interleave != 1)
        return cli_error(CLI_USAGE, "CONFIG = \"%s\": the selftest covers "
                         "packed configs with interleave 1", name);

    int32_t ranks = 0, steps = 3;
    cli_opt *rk = cli_find(opts, "--ranks"), *sp = cli_find(opts, "--steps");
    if (rk->seen && ((rc = cli_parse_i32("--ranks", rk->value, &ranks)) ||
                     ranks < 1 || ranks > 16))
        return rc ? rc : cli_error(CLI_USAGE, "--ranks = %d: must be in "
                                   "1..16", ranks);
    if (sp->seen && ((rc = cli_parse_i32("--steps", sp->value, &steps)) ||
                     steps < 1 || steps > 100000))
        return rc ? rc : cli_error(CLI_USAGE, "--steps = %d: must be in "
                                   "1..100000", steps);
    cli_opt *ns = cli_find(opts, "--node-size");
    if (ns->seen) {
        int32_t l = 0;
        if ((rc = cli_parse_i32("--node-size", ns->value, &l)))
            return rc;
        if (ranks < 1 || l < 1 || ranks % l)
            return cli_error(CLI_USAGE, "--node-size = %d: needs --ranks N "
                             "and must divide it (N = %d)", l, ranks);
        /* The children inherit it: their groups see nodes of L ranks. */
        setenv("DCPTOPK_DOMAIN_SIZE", ns->value, 1);
    }
    if (cli_find(opts, "--as-rank")->seen)
        return st_as_rank(cache, &cfg, rows, steps, seed);
    if (ranks > 0)
        return st_ranks(name, cache, ranks, rows, steps, seed);

    int ndev = dcptopk_device_count();
    int use_gpu = ndev > 0 && !cli_find(opts, "--no-gpu")->seen;
    if (use_gpu && device >= ndev)
        return cli_error(CLI_USAGE, "--device = %d: only %d device%s (0..%d)",
                         device, ndev, ndev == 1 ? "" : "s", ndev - 1);

    printf("dcptopk %s\n", dcptopk_version_string());
    printf("devices: %d%s\n", ndev, ndev ? "" : " (no CUDA driver or device)");
    dcptopk_merge_config def;
    const char *def_name = dcptopk_merge_config_name(0);
    if (def_name && dcptopk_merge_config_named(def_name, &def) == 0)
        printf("default config: %s (%s K=%d N=%d W=%d B=%d S=%d%s%s)\n",
               def_name, def.kind == DCPTOPK_MERGE_PAIR ? "pair" : "packed",
               def.topk, def.local_topk, def.world_size, def.block_size,
               def.interleave, def.emit_ids ? " ids" : "",
               def.exact ? " exact" : "");

    int fails = 0;
    printf("1. CPU reference, checked by the library's contract check and a "
           "top-K certificate:\n");
    rc = st_case("distinct scores", 1, 1, 0x9E3779B97F4A7C15ULL, verbose);
    if (rc == CLI_SELFTEST_FAIL)
        fails++;
    else if (rc)
        return rc;
    rc = st_case("heavy ties, interleave 2", 0, 2, 0xD1B54A32D192ED03ULL,
                 verbose);
    if (rc == CLI_SELFTEST_FAIL)
        fails++;
    else if (rc)
        return rc;

    char label[128];
    if (use_gpu) {
        printf("2. dcptopk_selftest on device %d, config %s:\n", device, name);
        snprintf(label, sizeof label, "GPU merge vs reference");
        rc = st_library(device, NULL, cache, &cfg, label, rows,
                        seed);
    } else {
        printf("2. dcptopk_selftest without a GPU (%s), config %s:\n",
               ndev ? "--no-gpu" : "no CUDA device", name);
        snprintf(label, sizeof label, "CPU reference vs sort");
        rc = st_library(-1, "sm_90a", cache, &cfg, label, rows,
                        seed);
        printf("      (no GPU kernel was run: GPU results were not verified)\n");
    }
    if (rc == CLI_SELFTEST_FAIL)
        fails++;
    else if (rc)
        return rc;

    if (fails) {
        printf("selftest FAILED (%d check%s)\n", fails, fails == 1 ? "" : "s");
        return CLI_SELFTEST_FAIL;
    }
    printf("selftest passed\n");
    return CLI_OK;
}

/* ---------------------------------------------------------------- devices */

int cmd_devices(int argc, char **argv)
{
    cli_opt opts[] = {{"--json", 0, 0, NULL}, {NULL, 0, 0, NULL}};
    const char *pos[1];
    int npos, help, rc;
    if ((rc = cli_parse("devices", argc, argv, opts, pos, 0, &npos, &help)))
        return rc;
    if (help) {
        printf("usage: dcptopk devices [--json]\n"
               "\n"
               "Lists the CUDA devices and the arch dcptopk compiles for on\n"
               "each (a context is created on each device to find out).\n"
               "Prints 0 devices, and exits 0, when there is no driver or GPU.\n");
        return CLI_OK;
    }
    int json = cli_find(opts, "--json")->seen;
    int n = dcptopk_device_count();
    if (json)
        printf("{\"count\":%d,\"devices\":[", n);
    else
        printf("devices: %d%s\n", n, n ? "" : " (no CUDA driver or device)");
    for (int i = 0; i < n; i++) {
        dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
        cfg.device = i;
        cfg.cache_mode = DCPTOPK_CACHE_OFF;
        dcptopk_context *ctx = NULL;
        dcptopk_result r = dcptopk_context_create(&cfg, &ctx);
        const char *arch = r == DCPTOPK_SUCCESS ? dcptopk_context_arch(ctx)
                                                : NULL;
        if (json) {
            printf("%s{\"ordinal\":%d,\"arch\":", i ? "," : "", i);
            cli_json_str(stdout, arch);
            printf(",\"error\":");
            cli_json_str(stdout, r == DCPTOPK_SUCCESS
                                     ? NULL
                                     : dcptopk_last_error(NULL));
            printf("}");
        } else if (r == DCPTOPK_SUCCESS) {
            printf("  %d: %s\n", i, arch ? arch : "?");
        } else {
            printf("  %d: unusable: %s\n", i, dcptopk_last_error(NULL));
        }
        dcptopk_context_destroy(ctx);
    }
    if (json)
        printf("]}\n");
    return CLI_OK;
}
