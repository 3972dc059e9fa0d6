/* sass_dump.c - compiles every kernel key of every named config to a cubin,
 * through the library's own renderer and NVRTC options (dc_unit_build,
 * dc_nvrtc_compile), one file per key, for bench/sass_compare.sh:
 *
 *   sass_dump OUT_DIR [ARCH (sm_90a) [FILTER]]
 *
 * A file is named after its key spec ('dcptopk keys' prints it) with the
 * characters a shell would trip on replaced: select(topk=2048,...)@sm_90a
 * becomes select.topk=2048....sm_90a.cubin. FILTER keeps the keys whose
 * file name starts with it (a template's development loop: "select."). With DCPTOPK_TEMPLATE_DIR the
 * templates come from that folder, else the embedded ones. Prints one line
 * a key; exits 1 when a key fails to render or compile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define MAX_KEYS 512

/* The distinct keys of every named config for `arch`; 0 on failure. */
static size_t all_keys(const char *arch, dcptopk_key *keys, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; dcptopk_merge_config_name(i); i++) {
        const char *name = dcptopk_merge_config_name(i);
        dcptopk_merge_config c;
        dcptopk_key list[64];
        size_t m = 0;
        if (dcptopk_merge_config_named(name, &c) ||
            dcptopk_config_keys(&c, arch, list, 64, &m) || m > 64) {
            fprintf(stderr, "sass_dump: config %s: %s\n", name, dcptopk_last_error(NULL));
            return 0;
        }
        for (size_t j = 0; j < m; j++) {
            int seen = 0;
            for (size_t q = 0; q < n && !seen; q++)
                seen = memcmp(&keys[q], &list[j], sizeof list[j]) == 0;
            if (!seen && n < cap)
                keys[n++] = list[j];
        }
    }
    return n;
}

/* The file name of a key spec: '(' ',' '@' become '.', ')' goes. */
static void file_name(const char *spec, char *out, size_t size)
{
    size_t n = 0;
    for (const char *p = spec; *p && n + 1 < size; p++) {
        if (*p == ')')
            continue;
        out[n++] = (*p == '(' || *p == ',' || *p == '@') ? '.' : *p;
    }
    out[n] = '\0';
}

static int write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    const int bad = fwrite(data, 1, size, f) != size;
    return (fclose(f) != 0 || bad) ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: sass_dump OUT_DIR [ARCH [FILTER]]\n");
        return 2;
    }
    const char *arch = argc > 2 ? argv[2] : "sm_90a";
    const char *filter = argc > 3 ? argv[3] : "";
    static dcptopk_key keys[MAX_KEYS];
    const size_t n = all_keys(arch, keys, MAX_KEYS);
    if (n == 0)
        return 1;
    char *err = malloc(DC_ERR_LEN);
    if (!err)
        return 1;
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        char spec[320], name[320], path[4096];
        dcptopk_key_format(&keys[i], spec, sizeof spec);
        file_name(spec, name, sizeof name);
        if (strncmp(name, filter, strlen(filter)) != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s.cubin", argv[1], name);
        dc_unit u;
        dc_compiled c;
        memset(&c, 0, sizeof c);
        err[0] = '\0';
        dcptopk_result r = dc_unit_build(NULL, &keys[i], &u);
        if (r)
            snprintf(err, DC_ERR_LEN, "%s", dcptopk_last_error(NULL));
        else
            r = dc_nvrtc_compile(&u, &c, err, DC_ERR_LEN);
        if (r == DCPTOPK_SUCCESS && write_file(path, c.cubin, c.cubin_size) != 0) {
            snprintf(err, DC_ERR_LEN, "cannot write %s", path);
            r = DCPTOPK_IO_ERROR;
        }
        if (r) {
            fprintf(stderr, "sass_dump: %s: %s\n", spec, err);
            failed++;
        } else {
            printf("%s\n", name);
        }
        dc_compiled_free(&c);
        dc_unit_free(&u);
    }
    free(err);
    return failed ? 1 : 0;
}
