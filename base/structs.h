/*
 * structs.h - the one reader and writer of versioned public structs (those
 * that start with uint32_t struct_size and grow only at the end). Every
 * entry point takes such an argument through DC_STRUCT_IN (an input) or
 * DC_STRUCT_OUT (an output), one line each, so one rule holds for all:
 *  - struct_size below the end of the struct's first version (DC_MIN_*
 *    below) or above 64 KiB: refused;
 *  - from there up to the library's size: a caller built against an older
 *    header. An input gets its _INIT defaults for the fields it lacks; an
 *    output is written only up to its struct_size;
 *  - above the library's size: a caller built against a newer header.
 *    Accepted when every byte past the library's size is zero, refused
 *    otherwise: a field a newer header added means "as before" at zero (its
 *    _INIT value), and anything else asks for what this library cannot do.
 *    An output's tail is left as it is.
 * A refusal is DCPTOPK_INVALID_ARGUMENT naming the argument and its value.
 */
#ifndef DCPTOPK_STRUCTS_H
#define DCPTOPK_STRUCTS_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* The size of `type` up to and including `field`. */
#define DC_STRUCT_END(type, field)                                             \
    (offsetof(type, field) + sizeof(((type *)0)->field))

/* The end of each struct's first version: the smallest struct_size its
 * entry points accept. Named by the middle of the struct's _INIT macro
 * (PACK_ARGS for DCPTOPK_PACK_ARGS_INIT). When a struct grows, its line here
 * stays as it is. */
#define DC_MIN_SETTING DC_STRUCT_END(dcptopk_setting, source)
#define DC_MIN_ENV_INFO DC_STRUCT_END(dcptopk_env_info, cache_why)
#define DC_MIN_CONTEXT_CONFIG DC_STRUCT_END(dcptopk_context_config, strict)
#define DC_MIN_MERGE_CONFIG DC_STRUCT_END(dcptopk_merge_config, exact)
#define DC_MIN_WARMUP_STATS DC_STRUCT_END(dcptopk_warmup_stats, total_ms)
#define DC_MIN_CONTEXT_STATS DC_STRUCT_END(dcptopk_context_stats, modules)
#define DC_MIN_PAIR_SELECT_ARGS                                                \
    DC_STRUCT_END(dcptopk_pair_select_args, stream)
#define DC_MIN_PAIR_PACK_ARGS DC_STRUCT_END(dcptopk_pair_pack_args, stream)
#define DC_MIN_PACK_ARGS DC_STRUCT_END(dcptopk_pack_args, stream)
#define DC_MIN_WORKSPACE_LAYOUT                                                \
    DC_STRUCT_END(dcptopk_workspace_layout, flags_bytes)
#define DC_MIN_SELECT_ARGS DC_STRUCT_END(dcptopk_select_args, stream)
#define DC_MIN_NODE_PAIRS_ARGS DC_STRUCT_END(dcptopk_node_pairs_args, stream)
#define DC_MIN_GROUP_CONFIG DC_STRUCT_END(dcptopk_group_config, timeout_ms)
#define DC_MIN_LAUNCH_ENV DC_STRUCT_END(dcptopk_launch_env, source)
#define DC_MIN_GROUP_MERGE_ARGS                                                \
    DC_STRUCT_END(dcptopk_group_merge_args, stream)
#define DC_MIN_SELFTEST_REPORT DC_STRUCT_END(dcptopk_selftest_report, summary)
#define DC_MIN_CACHE_STATS DC_STRUCT_END(dcptopk_cache_stats, claims)

/* Reads the caller's input struct `in` into `local`, which holds the
 * defaults (initialised with DCPTOPK_<NAME>_INIT); afterwards local's
 * struct_size is the library's. `what` names the argument ("args"). The
 * conditional only makes an `in` and `local` of different types a compile
 * error. */
#define DC_STRUCT_IN(ctx, what, in, local, NAME)                               \
    dc_struct_in((ctx), (what), (in), (local),                                 \
                 sizeof *(0 ? (in) : (local)), DC_MIN_##NAME,                  \
                 "DCPTOPK_" #NAME "_INIT")
/* Checks the caller's output struct `out` before any work; the result is
 * stored with dc_struct_write at the end. */
#define DC_STRUCT_OUT(ctx, what, out, NAME)                                    \
    dc_struct_check((ctx), (what), (out), DC_MIN_##NAME, sizeof *(out),        \
                    "DCPTOPK_" #NAME "_INIT")

/* The rule above for the struct at `s` (NULL refused as "<what> is NULL"):
 * "<what>->struct_size = N: expected <full> (initialise with <init>)". */
DC_HIDDEN dcptopk_result dc_struct_check(const dcptopk_context *ctx,
                                         const char *what, const void *s,
                                         size_t min, size_t full,
                                         const char *init);
/* dc_struct_check, then local (full bytes, the defaults) gets the caller's
 * first min(struct_size, full) bytes, and struct_size = full. */
DC_HIDDEN dcptopk_result dc_struct_in(const dcptopk_context *ctx,
                                      const char *what, const void *in,
                                      void *local, size_t full, size_t min,
                                      const char *init);
/* Output: the caller's dst gets src up to its own struct_size, which it
 * keeps. dst_size has passed dc_struct_check. */
DC_HIDDEN void dc_struct_write(void *dst, uint32_t dst_size, const void *src,
                               size_t full);

#endif /* DCPTOPK_STRUCTS_H */
