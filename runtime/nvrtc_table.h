/*
 * nvrtc_table.h - NVRTC, loaded at run time (private to runtime/ and src/).
 * libnvrtc.so.13 or libnvrtc.so.12 (12.8 or newer) is dlopen'ed once into a
 * table of function pointers, so one build serves either CUDA major and a
 * host without NVRTC still loads the library (it then serves cached entries
 * only if it can name them: the key holds the NVRTC version, so without
 * NVRTC nothing can be keyed and contexts say why).
 *
 * The prototypes are declared here, not taken from nvrtc.h: the toolkit that
 * builds the library may be of another major than the NVRTC that runs it,
 * and these few calls have kept their C signatures since CUDA 11.
 */
#ifndef DCPTOPK_NVRTC_TABLE_H
#define DCPTOPK_NVRTC_TABLE_H

#include <stddef.h>

#include "base.h"

typedef int dc_nvrtc_result;            /* nvrtcResult                     */
typedef struct dc_nvrtc_prog_ *dc_nvrtc_program; /* nvrtcProgram          */
#define DC_NVRTC_SUCCESS 0
#define DC_NVRTC_ERROR_OUT_OF_MEMORY 1

/* The oldest NVRTC taken: 12.8 knows sm_100/sm_120, which the arch list
 * of a CUDA 13 host may name. */
#define DC_NVRTC_MIN_MAJOR 12
#define DC_NVRTC_MIN_MINOR 8

/* X(name, return, arguments) */
#define DC_NVRTC_FUNCTIONS(X)                                                  \
    X(nvrtcVersion, dc_nvrtc_result, (int *, int *))                           \
    X(nvrtcGetErrorString, const char *, (dc_nvrtc_result))                    \
    X(nvrtcGetNumSupportedArchs, dc_nvrtc_result, (int *))                     \
    X(nvrtcGetSupportedArchs, dc_nvrtc_result, (int *))                        \
    X(nvrtcCreateProgram, dc_nvrtc_result,                                     \
      (dc_nvrtc_program *, const char *, const char *, int,                    \
       const char *const *, const char *const *))                              \
    X(nvrtcDestroyProgram, dc_nvrtc_result, (dc_nvrtc_program *))              \
    X(nvrtcCompileProgram, dc_nvrtc_result,                                    \
      (dc_nvrtc_program, int, const char *const *))                            \
    X(nvrtcGetProgramLogSize, dc_nvrtc_result, (dc_nvrtc_program, size_t *))   \
    X(nvrtcGetProgramLog, dc_nvrtc_result, (dc_nvrtc_program, char *))         \
    X(nvrtcGetCUBINSize, dc_nvrtc_result, (dc_nvrtc_program, size_t *))        \
    X(nvrtcGetCUBIN, dc_nvrtc_result, (dc_nvrtc_program, char *))              \
    X(nvrtcGetPTXSize, dc_nvrtc_result, (dc_nvrtc_program, size_t *))          \
    X(nvrtcGetPTX, dc_nvrtc_result, (dc_nvrtc_program, char *))

typedef struct dc_nvrtc {
#define DC_NVRTC_FIELD(name, ret, args) ret(*name) args;
    DC_NVRTC_FUNCTIONS(DC_NVRTC_FIELD)
#undef DC_NVRTC_FIELD
    int major, minor;   /* nvrtcVersion of the loaded file                 */
    char path[512];     /* the file it was loaded from                     */
    char archs[512];    /* "sm_75 sm_80 ...": nvrtcGetSupportedArchs       */
} dc_nvrtc;

/* The loaded table, or NULL when no usable NVRTC was found (then *why, when
 * non-NULL, lists every file tried and its dlerror). Loads once per process
 * (pthread_once); thread-safe. Search order: $DCPTOPK_NVRTC_PATH (a file, or
 * a folder holding libnvrtc.so.13/.12), the nvidia-cuda-nvrtc wheels beside
 * this library (site-packages/nvidia/{cu13,cuda_nvrtc}/lib), $CUDA_HOME/lib64,
 * /usr/local/cuda/lib64, then the bare sonames (the loader's own path, or a
 * copy a host program loaded already). */
DC_HIDDEN const dc_nvrtc *dc_nvrtc_get(const char **why);

#endif /* DCPTOPK_NVRTC_TABLE_H */
