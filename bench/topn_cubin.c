/* topn_cubin.c - compiles the top-N + pack kernel of one variant to a cubin,
 * through the library's own renderer and NVRTC options (dc_unit_build,
 * dc_nvrtc_compile), for bench/topn_ab.sh:
 *
 *   DCPTOPK_TEMPLATE_DIR=DIR topn_cubin OUT.cubin VARIANT [LOCAL_TOPK (384)] [-DNAME=VALUE...]
 *
 * With DCPTOPK_TEMPLATE_DIR the templates come from DIR (an edited copy, or
 * an older commit's), else the embedded ones. The -D options go to NVRTC
 * after the library's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: topn_cubin OUT.cubin VARIANT [LOCAL_TOPK] [-DNAME=VALUE...]\n");
        return 2;
    }
    dcptopk_key key;
    memset(&key, 0, sizeof key);
    key.kernel = DCPTOPK_KERNEL_TOPN_PACK;
    key.variant = atoi(argv[2]);
    key.local_topk = 384;
    int first_opt = 3;
    if (argc > 3 && argv[3][0] != '-') {
        key.local_topk = atoi(argv[3]);
        first_opt = 4;
    }
    snprintf(key.arch, sizeof key.arch, "sm_90a");
    if (dcptopk_key_check(&key) != DCPTOPK_SUCCESS) {
        fprintf(stderr, "topn_cubin: %s\n", dcptopk_last_error(NULL));
        return 2;
    }
    dc_unit u;
    int rc = 1;
    char err[8192] = "";
    dc_compiled c;
    memset(&c, 0, sizeof c);
    if (dc_unit_build(NULL, &key, &u) != DCPTOPK_SUCCESS) {
        fprintf(stderr, "topn_cubin: %s\n", dcptopk_last_error(NULL));
        goto done;
    }
    for (int i = first_opt; i < argc; i++) {
        if (strncmp(argv[i], "-D", 2) != 0 || u.option_count == DC_MAX_OPTIONS) {
            fprintf(stderr, "topn_cubin: option %d = \"%s\": only -D options, at most %d in all\n",
                    i, argv[i], DC_MAX_OPTIONS);
            goto done;
        }
        u.options[u.option_count++] = argv[i];
    }
    if (dc_nvrtc_compile(&u, &c, err, sizeof err) != DCPTOPK_SUCCESS) {
        fprintf(stderr, "topn_cubin: %s\n", err);
        goto done;
    }
    FILE *out = fopen(argv[1], "wb");
    if (!out || fwrite(c.cubin, 1, c.cubin_size, out) != c.cubin_size) {
        fprintf(stderr, "topn_cubin: cannot write %s\n", argv[1]);
        if (out)
            fclose(out);
        goto done;
    }
    rc = fclose(out) == 0 ? 0 : 1;
done:
    dc_compiled_free(&c);
    dc_unit_free(&u);
    return rc;
}
