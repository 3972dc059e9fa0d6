/* dcptopk.c - the `dcptopk` command-line tool: entry point, subcommand
 * dispatch, top-level help and version. The subcommands live in
 * tools/cmd_*.c; everything goes through the public header only. */
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: dcptopk COMMAND [ARGS...]\n"
        "\n"
        "The distributed top-K merge of the DSA sparse indexer: kernel warmup\n"
        "and compile-cache maintenance.\n"
        "\n"
        "commands:\n"
        "  warmup [CONFIG] [fields]  compile (or find in the cache) and load every\n"
        "                            kernel of a merge config\n"
        "  configs                   list the named merge configs and their fields\n"
        "  keys [CONFIG] [fields]    list a config's compile keys and cache hashes\n"
        "  render KEY-SPEC           print the CUDA source NVRTC compiles for a key\n"
        "  cache SUBCOMMAND          inspect and maintain the compile cache (path, ls,\n"
        "                            show, stats, verify, prune, rm, clear, export,\n"
        "                            import)\n"
        "  selftest [CONFIG]         check the merge: CPU reference vs brute force,\n"
        "                            and on a GPU the GPU merge vs the reference\n"
        "  devices                   list the CUDA devices and their target arch\n"
        "  env                       versions, devices, cache and settings in\n"
        "                            effect (for bug reports)\n"
        "\n"
        "options:\n"
        "  -h, --help                this help ('dcptopk COMMAND --help' for a command)\n"
        "  --version                 print the library version\n"
        "\n"
        "environment:\n"
        "  DCPTOPK_CACHE_DIR         directory of the default cache file\n"
        "                            (dcptopk.sqlite); else $XDG_CACHE_HOME/dcptopk,\n"
        "                            else ~/.cache/dcptopk\n"
        "  ('dcptopk env' lists every variable, its value and its source)\n"
        "\n"
        "exit codes:\n"
        "  0  success\n"
        "  1  runtime failure (a CUDA, NVRTC, cache or I/O call failed)\n"
        "  2  usage error (unknown command or option, missing or bad value,\n"
        "     invalid config field)\n"
        "  3  cache verify found bad entries (and removed them)\n"
        "  4  not found (no such named config or cache entry)\n"
        "  5  no CUDA device (warmup without --arch on a machine with no GPU)\n"
        "  6  selftest found a mismatch\n"
        "\n"
        "Errors go to stderr, prefixed 'dcptopk: error: '. See docs/CLI.md.\n");
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } commands[] = {
        {"warmup", cmd_warmup}, {"configs", cmd_configs},
        {"keys", cmd_keys},     {"render", cmd_render},
        {"cache", cmd_cache},   {"selftest", cmd_selftest},
        {"devices", cmd_devices}, {"env", cmd_env},
    };

    if (argc < 2) {
        usage(stderr);
        return cli_error(CLI_USAGE, "no command given");
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 ||
        strcmp(cmd, "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("dcptopk %s\n", dcptopk_version_string());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0) {
            int rc = commands[i].fn(argc - 2, argv + 2);
            if (fflush(stdout) != 0 && rc == CLI_OK)
                rc = cli_error(CLI_FAILURE, "writing to stdout failed");
            return rc;
        }
    if (cmd[0] == '-')
        return cli_error(CLI_USAGE,
                         "unknown option '%s' (options go after the command; "
                         "see 'dcptopk --help')",
                         cmd);
    return cli_error(CLI_USAGE,
                     "unknown command '%s' (commands: warmup, configs, keys, "
                     "render, cache, selftest, devices, env; see 'dcptopk --help')",
                     cmd);
}
