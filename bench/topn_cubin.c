/* topn_cubin.c - compiles one rendered kernel source to a cubin with NVRTC,
 * with the library's options (runtime/nvrtc.c), for bench/topn_ab.sh:
 *
 *   topn_cubin SOURCE.cu INCLUDE_DIR OUT.cubin [ARCH (sm_90a)] [OPTION...]
 *
 * INCLUDE_DIR holds the headers the source includes (a copy of templates/).
 * Extra options (e.g. -DDC_TOPN_REFINE=0) go to NVRTC as they are. */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
        s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 36) {
        fprintf(stderr, "usage: topn_cubin SOURCE.cu INCLUDE_DIR OUT.cubin [ARCH] [OPTION...]\n");
        return 2;
    }
    char *src = read_all(argv[1]);
    if (!src) {
        fprintf(stderr, "topn_cubin: cannot read %s\n", argv[1]);
        return 1;
    }
    char arch[64], inc[1024];
    snprintf(arch, sizeof arch, "--gpu-architecture=%s", argc > 4 ? argv[4] : "sm_90a");
    snprintf(inc, sizeof inc, "-I%s", argv[2]);
    const char *opts[40] = {arch, "-std=c++17", "-default-device", "--minimal", "-lineinfo", inc};
    int nopts = 6;
    for (int i = 5; i < argc; i++)
        opts[nopts++] = argv[i];
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, src, "topn.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
        return 1;
    const nvrtcResult rc = nvrtcCompileProgram(prog, nopts, opts);
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    if (log_size > 1) {
        char *log = malloc(log_size);
        if (log && nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS)
            fprintf(stderr, "%s\n", log);
        free(log);
    }
    if (rc != NVRTC_SUCCESS) {
        fprintf(stderr, "topn_cubin: %s: %s\n", argv[1], nvrtcGetErrorString(rc));
        return 1;
    }
    size_t size = 0;
    nvrtcGetCUBINSize(prog, &size);
    char *cubin = malloc(size);
    FILE *out = fopen(argv[3], "wb");
    if (!cubin || !out || nvrtcGetCUBIN(prog, cubin) != NVRTC_SUCCESS ||
        fwrite(cubin, 1, size, out) != size) {
        fprintf(stderr, "topn_cubin: cannot write %s\n", argv[3]);
        return 1;
    }
    fclose(out);
    free(cubin);
    free(src);
    nvrtcDestroyProgram(&prog);
    return 0;
}
