/* cmd_env.c - `dcptopk env`: what a bug report needs to know about this
 * process's dcptopk: the library, NVRTC and driver versions, the arch of each
 * device, the default cache file and whether contexts will use it, and every
 * setting of the library's table with the value in effect and its source. It
 * changes nothing and always exits 0 (a machine with no GPU is a fact to
 * report, not a failure). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char *source_name(int32_t s)
{
    switch (s) {
    case DCPTOPK_SETTING_DEFAULT: return "default";
    case DCPTOPK_SETTING_ENVIRONMENT: return "environment";
    case DCPTOPK_SETTING_IGNORED: return "ignored";
    }
    return "unknown";
}

/* "13.0" from 13000. */
static void driver_text(int32_t v, char *buf, size_t size)
{
    snprintf(buf, size, "%d.%d", v / 1000, v % 1000 / 10);
}

/* The arch a context compiles for on device i, or NULL with the reason in
 * dcptopk_last_error(NULL). */
static const char *device_arch(int i, char *buf, size_t size)
{
    dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
    cfg.device = i;
    cfg.cache_mode = DCPTOPK_CACHE_OFF;
    dcptopk_context *ctx = NULL;
    if (dcptopk_context_create(&cfg, &ctx) != DCPTOPK_SUCCESS)
        return NULL;
    snprintf(buf, size, "%s", dcptopk_context_arch(ctx));
    dcptopk_context_destroy(ctx);
    return buf;
}

static void print_json(const dcptopk_env_info *e)
{
    char buf[64];
    printf("{\"library\":{\"version\":");
    cli_json_str(stdout, dcptopk_version_string());
    printf(",\"version_number\":%u,\"build\":", dcptopk_version_number());
    cli_json_str(stdout, e->build);
    printf("},\"nvrtc\":{\"version\":");
    snprintf(buf, sizeof buf, "%d.%d", e->nvrtc_major, e->nvrtc_minor);
    cli_json_str(stdout, e->nvrtc_major >= 0 ? buf : NULL);
    printf(",\"path\":");
    cli_json_str(stdout, e->nvrtc_path[0] ? e->nvrtc_path : NULL);
    printf(",\"archs\":");
    cli_json_str(stdout, e->nvrtc_major >= 0 ? e->nvrtc_archs : NULL);
    printf(",\"error\":");
    cli_json_str(stdout, e->nvrtc_error[0] ? e->nvrtc_error : NULL);
    printf("},\"driver\":{\"version\":");
    driver_text(e->driver_version, buf, sizeof buf);
    cli_json_str(stdout, e->driver_version ? buf : NULL);
    printf(",\"version_number\":%d,\"error\":", e->driver_version);
    cli_json_str(stdout, e->no_device[0] ? e->no_device : NULL);
    printf("},\"devices\":[");
    for (int i = 0; i < e->device_count; i++) {
        const char *arch = device_arch(i, buf, sizeof buf);
        printf("%s{\"ordinal\":%d,\"arch\":", i ? "," : "", i);
        cli_json_str(stdout, arch);
        printf(",\"error\":");
        cli_json_str(stdout, arch ? NULL : dcptopk_last_error(NULL));
        printf("}");
    }
    printf("],\"cache\":{\"path\":");
    cli_json_str(stdout, e->cache_path[0] ? e->cache_path : NULL);
    printf(",\"mode\":");
    cli_json_str(stdout, e->cache_mode);
    printf(",\"why\":");
    cli_json_str(stdout, e->cache_why[0] ? e->cache_why : NULL);
    printf("},\"settings\":[");
    dcptopk_setting s = DCPTOPK_SETTING_INIT;
    for (size_t i = 0; dcptopk_setting_get(i, &s) == DCPTOPK_SUCCESS; i++) {
        printf("%s{\"name\":", i ? "," : "");
        cli_json_str(stdout, s.name);
        printf(",\"kind\":");
        cli_json_str(stdout, s.kind);
        printf(",\"value\":");
        cli_json_str(stdout, s.value[0] ? s.value : s.env);
        printf(",\"env\":");
        cli_json_str(stdout, s.env);
        printf(",\"source\":");
        cli_json_str(stdout, source_name(s.source));
        printf(",\"doc\":");
        cli_json_str(stdout, s.doc);
        printf("}");
    }
    printf("]}\n");
}

static void print_text(const dcptopk_env_info *e)
{
    char buf[64];
    printf("library:  dcptopk %s (%s)\n", dcptopk_version_string(), e->build);
    if (e->nvrtc_major >= 0)
        printf("nvrtc:    %d.%d (%s)\n          archs: %s\n", e->nvrtc_major,
               e->nvrtc_minor, e->nvrtc_path[0] ? e->nvrtc_path : "file unknown",
               e->nvrtc_archs);
    else
        printf("nvrtc:    none: %s\n", e->nvrtc_error);
    driver_text(e->driver_version, buf, sizeof buf);
    if (e->driver_version && !e->no_device[0])
        printf("driver:   CUDA %s\n", buf);
    else if (e->driver_version)
        printf("driver:   CUDA %s, no usable device: %s\n", buf, e->no_device);
    else
        printf("driver:   none: %s\n", e->no_device);
    printf("devices:  %d%s\n", e->device_count,
           e->device_count ? "" : " (compile and cache only: pass --arch)");
    for (int i = 0; i < e->device_count; i++) {
        const char *arch = device_arch(i, buf, sizeof buf);
        if (arch)
            printf("  %d: %s\n", i, arch);
        else
            printf("  %d: unusable: %s\n", i, dcptopk_last_error(NULL));
    }
    printf("cache:    %s (%s)\n", e->cache_path[0] ? e->cache_path : "-",
           e->cache_mode);
    if (e->cache_why[0])
        printf("          %s\n", e->cache_why);
    printf("settings (value in effect, source):\n");
    dcptopk_setting s = DCPTOPK_SETTING_INIT;
    for (size_t i = 0; dcptopk_setting_get(i, &s) == DCPTOPK_SUCCESS; i++) {
        const char *v = s.value[0] ? s.value : s.env;
        if (s.source == DCPTOPK_SETTING_IGNORED)
            printf("  %-30s %s (ignored \"%s\": invalid)\n", s.name, v,
                   s.env);
        else
            printf("  %-30s %s (%s)\n", s.name, v ? v : "-",
                   source_name(s.source));
    }
}

int cmd_env(int argc, char **argv)
{
    cli_opt opts[] = {{"--json", 0, 0, NULL}, {NULL, 0, 0, NULL}};
    const char *pos[1];
    int npos, help, rc;
    if ((rc = cli_parse("env", argc, argv, opts, pos, 0, &npos, &help)))
        return rc;
    if (help) {
        printf("usage: dcptopk env [--json]\n"
               "\n"
               "Prints what a bug report needs: the library version and\n"
               "build, the NVRTC version and the file it was loaded from, the\n"
               "CUDA driver version (or why there is none), the arch of each\n"
               "device, the default cache file and whether contexts use it\n"
               "(trusted, shared, absent, refused and why), and every setting\n"
               "of the library's table with the value in effect and its\n"
               "source (default, environment, or ignored when invalid).\n"
               "Changes nothing; exits 0, also without a driver or GPU.\n");
        return CLI_OK;
    }
    dcptopk_env_info e = DCPTOPK_ENV_INFO_INIT;
    dcptopk_result r = dcptopk_env_info_get(&e);
    if (r != DCPTOPK_SUCCESS)
        return cli_lib_error(r, "dcptopk_env_info_get",
                             dcptopk_last_error(NULL));
    if (cli_find(opts, "--json")->seen)
        print_json(&e);
    else
        print_text(&e);
    return CLI_OK;
}
