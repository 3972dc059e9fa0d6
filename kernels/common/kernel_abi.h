/*
 * kernel_abi.h - the ground rules of the ABI headers that the C launchers and
 * the NVRTC templates share (kernels/<family>/<family>_abi.h). It compiles as
 * C11 and as CUDA C++ under NVRTC (the renderer embeds it with the
 * templates): the fixed-width integer types (the templates include no
 * toolkit header, so NVRTC gets them here), DC_RESTRICT, and the macros that
 * turn one parameter list into both sides of a launch.
 *
 * A family header lists each kernel's parameters once, in order:
 *
 *     #define DC_PACK_INDICES_PARAMS(X)              \
 *         X(const uint16_t *DC_RESTRICT, logits)     \
 *         X(long long, logits_stride) ...
 *     DC_ABI_ARGS(dc_pack_indices_args, DC_PACK_INDICES_PARAMS)
 *
 * The template declares the kernel with DC_KERNEL_PARAMS(LIST), which
 * expands to the list as scalar parameters ("const uint16_t *__restrict__
 * logits, long long logits_stride, ..."). In C, DC_ABI_ARGS defines the
 * struct the launcher fills (one field a parameter, same names and types)
 * and dc_..._args_argv(), the field addresses in parameter order that
 * cuLaunchKernel copies the parameters from.
 *
 * Why not one struct parameter: the compiler turns loads through a
 * __restrict__ const kernel parameter into read-only loads (LDG.E.CONSTANT)
 * and may reorder them across stores; the same pointer as a member of a
 * struct parameter loses both, and the kernels' machine code would change.
 */
#ifndef DCPTOPK_KERNEL_ABI_H
#define DCPTOPK_KERNEL_ABI_H

#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stddef.h>
#include <stdint.h>
#endif

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define DC_ABI_DEVICE 1
#define DC_RESTRICT __restrict__
#else
#define DC_ABI_DEVICE 0
#define DC_RESTRICT
#endif

#include "packed_format.h"

/* The kernel's parameter list: "T0 n0, T1 n1, ..." (each X emits ", T n";
 * the first comma is dropped). */
#define DC_ABI_PARAM_(type, name) , type name
#define DC_ABI_DROP_FIRST_(first, ...) __VA_ARGS__
#define DC_ABI_DROP_FIRST(...) DC_ABI_DROP_FIRST_(__VA_ARGS__)
#define DC_KERNEL_PARAMS(LIST) DC_ABI_DROP_FIRST(LIST(DC_ABI_PARAM_))

/* Most parameters of one kernel (the size of dc_abi_argv). */
#define DC_ABI_MAX_PARAMS 24

#if !DC_ABI_DEVICE
/* cuLaunchKernel's kernelParams of one launch: p[i] = the address of the
 * i-th parameter's value. */
typedef struct dc_abi_argv {
    void *p[DC_ABI_MAX_PARAMS];
} dc_abi_argv;

#define DC_ABI_FIELD_(type, name) type name;
#define DC_ABI_ADDR_(type, name) argv.p[n++] = (void *)&dc_abi_a_->name;
#define DC_ABI_COUNT_(type, name) +1

/* typedef struct NAME { one field a parameter } NAME; and
 * dc_abi_argv NAME_argv(NAME *a): the launch's kernelParams, which point
 * into *a (keep it alive until the launch returns). */
#define DC_ABI_ARGS(NAME, LIST)                                                \
    typedef struct NAME {                                                      \
        LIST(DC_ABI_FIELD_)                                                    \
    } NAME;                                                                    \
    _Static_assert((0 LIST(DC_ABI_COUNT_)) <= DC_ABI_MAX_PARAMS,               \
                   #NAME ": more parameters than DC_ABI_MAX_PARAMS");          \
    static inline dc_abi_argv NAME##_argv(NAME *dc_abi_a_)                     \
    {                                                                          \
        dc_abi_argv argv;                                                      \
        int n = 0;                                                             \
        LIST(DC_ABI_ADDR_)                                                     \
        for (int i = n; i < DC_ABI_MAX_PARAMS; i++)                            \
            argv.p[i] = NULL;                                                  \
        return argv;                                                           \
    }
#else
#define DC_ABI_ARGS(NAME, LIST)
#endif

/* The owned rows' CSR offsets (indptr [T + 1] = the exclusive prefix sum
 * of counts [T]): an entry dcptopk_indptr in the module of the kernel that
 * wrote the counts last (select.cu, pair_select.cu), launched after it on
 * the same stream as one CTA. Its key is that kernel's, so a warmup that
 * loads the select loads it too. */
#define DC_INDPTR_THREADS 1024
#define DC_INDPTR_PARAMS(X)                                                    \
    X(const int32_t *DC_RESTRICT, counts)                                      \
    X(long long, rows)                                                         \
    X(int32_t *DC_RESTRICT, indptr)
DC_ABI_ARGS(dc_indptr_args, DC_INDPTR_PARAMS)

#endif /* DCPTOPK_KERNEL_ABI_H */
