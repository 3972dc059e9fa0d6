/*
 * pair.h - the pair merge's room (kernels/pair/): what the top floor needs
 * from its launchers beyond the public entry points they define.
 */
#ifndef DCPTOPK_PAIR_H
#define DCPTOPK_PAIR_H

#include "base.h"
#include "pair_abi.h"

/* The pair merge's argument checks (pair_check.c), for its entry points
 * and the CPU reference. */
DC_HIDDEN dcptopk_result dc_check_pair_config(const dcptopk_context *ctx,
                                              const dcptopk_merge_config *c);
DC_HIDDEN dcptopk_result dc_check_pair_select_args(
    const dcptopk_context *ctx, const dcptopk_merge_config *c,
    const dcptopk_pair_select_args *a);
DC_HIDDEN dcptopk_result dc_check_pair_pack_args(
    const dcptopk_context *ctx, const dcptopk_merge_config *c,
    const dcptopk_pair_pack_args *a);

/* The shapes a one-CTA row of 16384 candidates may take on ctx's device
 * (pair_abi.h, DC_PAIR_TWO_CTAS_PAY): one of them with a device, both
 * without one (ctx NULL or device -1: the arch does not say which GPU will
 * run the keys), and the one DCPTOPK_PAIR_TWO_CTAS names when it is set.
 * A context's are fixed when it is created (ctx->pair_shapes), so that a
 * setting changed later cannot make a launch miss its warmed key. */
enum { DC_PAIR_SHAPE_ONE = 1, DC_PAIR_SHAPE_TWO = 2 };
DC_HIDDEN int32_t dc_pair_row_shapes(const dcptopk_context *ctx);

/* Appends the pair merge's keys of config c (checked) for `arch` and the
 * row shapes `shapes` (dc_pair_row_shapes). */
DC_HIDDEN void dc_pair_keys(const dcptopk_merge_config *c, const char *arch,
                            int32_t shapes, dc_key_list *l);

/* Appends the keys dcptopk_pair_select_nodes launches for `nodes` segments
 * (0 = world_size) and `layout`: one CTA a row, a key a shape in `shapes`
 * where the row has 16384 candidates. */
DC_HIDDEN void dc_pair_select_nodes_key(dc_key_list *l,
                                        const dcptopk_merge_config *c,
                                        int32_t nodes, int32_t layout,
                                        int32_t shapes, const char *arch);

/* The select kernel's arguments for a call's (checked) config c and args:
 * the launcher's mapping, which tests/emu's run of the kernel uses too. */
DC_HIDDEN dc_pair_select_args dc_pair_kernel_args(const dcptopk_merge_config *c,
                                                  const dcptopk_pair_select_args *args);

/* dcptopk_pair_select_nodes (nodes = 0: the flat merge) with each row split
 * over 2^split CTAs of a cluster; split = -1 is the entry points' choice
 * (one CTA), a larger split than the shape allows is refused. For the
 * benchmark and the tests that compare splits. */
DC_HIDDEN dcptopk_result dc_pair_select_split(
    dcptopk_context *ctx, const dcptopk_merge_config *config, int32_t nodes,
    int32_t split, const dcptopk_pair_select_args *args);

#endif /* DCPTOPK_PAIR_H */
