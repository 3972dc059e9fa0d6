/* struct_sizes.c - prints the size of every public struct the Python binding
 * mirrors ("name size N") and the offset of each of its fields ("name.field
 * offset N"), so that test_binding.py can compare them with ctypes'. */
#include <stddef.h>
#include <stdio.h>

#include "dcptopk.h"

#define SIZE(type) printf("%s size %zu\n", #type, sizeof(type))
#define FIELD(type, f) printf("%s.%s offset %zu\n", #type, #f, offsetof(type, f))

int main(void)
{
    SIZE(dcptopk_merge_config);
    FIELD(dcptopk_merge_config, struct_size);
    FIELD(dcptopk_merge_config, version);
    FIELD(dcptopk_merge_config, kind);
    FIELD(dcptopk_merge_config, topk);
    FIELD(dcptopk_merge_config, local_topk);
    FIELD(dcptopk_merge_config, world_size);
    FIELD(dcptopk_merge_config, block_size);
    FIELD(dcptopk_merge_config, interleave);
    FIELD(dcptopk_merge_config, emit_ids);
    FIELD(dcptopk_merge_config, exact);
    SIZE(dcptopk_context_config);
    FIELD(dcptopk_context_config, struct_size);
    FIELD(dcptopk_context_config, version);
    FIELD(dcptopk_context_config, device);
    FIELD(dcptopk_context_config, arch);
    FIELD(dcptopk_context_config, cache_path);
    FIELD(dcptopk_context_config, cache_mode);
    FIELD(dcptopk_context_config, strict);
    FIELD(dcptopk_context_config, warmup_threads);
    SIZE(dcptopk_key);
    FIELD(dcptopk_key, kernel);
    FIELD(dcptopk_key, topk);
    FIELD(dcptopk_key, local_topk);
    FIELD(dcptopk_key, world_size);
    FIELD(dcptopk_key, block_size);
    FIELD(dcptopk_key, interleave);
    FIELD(dcptopk_key, emit_ids);
    FIELD(dcptopk_key, exact);
    FIELD(dcptopk_key, layout);
    FIELD(dcptopk_key, variant);
    FIELD(dcptopk_key, arch);
    SIZE(dcptopk_warmup_stats);
    FIELD(dcptopk_warmup_stats, struct_size);
    FIELD(dcptopk_warmup_stats, keys);
    FIELD(dcptopk_warmup_stats, memory_hits);
    FIELD(dcptopk_warmup_stats, cache_hits);
    FIELD(dcptopk_warmup_stats, compiled);
    FIELD(dcptopk_warmup_stats, compile_ms);
    FIELD(dcptopk_warmup_stats, load_ms);
    FIELD(dcptopk_warmup_stats, total_ms);
    SIZE(dcptopk_context_stats);
    FIELD(dcptopk_context_stats, struct_size);
    FIELD(dcptopk_context_stats, launches);
    FIELD(dcptopk_context_stats, compiles);
    FIELD(dcptopk_context_stats, cache_hits);
    FIELD(dcptopk_context_stats, modules);
    SIZE(dcptopk_rows_map);
    FIELD(dcptopk_rows_map, req_id);
    FIELD(dcptopk_rows_map, block_table);
    FIELD(dcptopk_rows_map, block_table_stride);
    FIELD(dcptopk_rows_map, block_table_cols);
    FIELD(dcptopk_rows_map, num_reqs);
    FIELD(dcptopk_rows_map, stride_rows);
    FIELD(dcptopk_rows_map, rows_out);
    FIELD(dcptopk_rows_map, rows_out_stride);
    FIELD(dcptopk_rows_map, counts_out);
    SIZE(dcptopk_pair_select_args);
    FIELD(dcptopk_pair_select_args, struct_size);
    FIELD(dcptopk_pair_select_args, candidates);
    FIELD(dcptopk_pair_select_args, layout);
    FIELD(dcptopk_pair_select_args, rows);
    FIELD(dcptopk_pair_select_args, rank_stride_rows);
    FIELD(dcptopk_pair_select_args, rank);
    FIELD(dcptopk_pair_select_args, ids_out);
    FIELD(dcptopk_pair_select_args, ids_out_stride);
    FIELD(dcptopk_pair_select_args, rows_map);
    FIELD(dcptopk_pair_select_args, stream);
    SIZE(dcptopk_pair_pack_args);
    FIELD(dcptopk_pair_pack_args, struct_size);
    FIELD(dcptopk_pair_pack_args, logits);
    FIELD(dcptopk_pair_pack_args, logits_stride);
    FIELD(dcptopk_pair_pack_args, local_ids);
    FIELD(dcptopk_pair_pack_args, local_ids_stride);
    FIELD(dcptopk_pair_pack_args, row_starts);
    FIELD(dcptopk_pair_pack_args, row_ends);
    FIELD(dcptopk_pair_pack_args, rows);
    FIELD(dcptopk_pair_pack_args, rank);
    FIELD(dcptopk_pair_pack_args, out);
    FIELD(dcptopk_pair_pack_args, stream);
    SIZE(dcptopk_pack_args);
    FIELD(dcptopk_pack_args, struct_size);
    FIELD(dcptopk_pack_args, logits);
    FIELD(dcptopk_pack_args, logits_stride);
    FIELD(dcptopk_pack_args, max_local_len);
    FIELD(dcptopk_pack_args, row_ends);
    FIELD(dcptopk_pack_args, local_ids);
    FIELD(dcptopk_pack_args, local_ids_stride);
    FIELD(dcptopk_pack_args, rows);
    FIELD(dcptopk_pack_args, out);
    FIELD(dcptopk_pack_args, stream);
    SIZE(dcptopk_select_args);
    FIELD(dcptopk_select_args, struct_size);
    FIELD(dcptopk_select_args, gathered);
    FIELD(dcptopk_select_args, rank_stride_rows);
    FIELD(dcptopk_select_args, rows);
    FIELD(dcptopk_select_args, rank);
    FIELD(dcptopk_select_args, ids_out);
    FIELD(dcptopk_select_args, ids_out_stride);
    FIELD(dcptopk_select_args, rows_map);
    FIELD(dcptopk_select_args, logits);
    FIELD(dcptopk_select_args, logits_stride);
    FIELD(dcptopk_select_args, max_local_len);
    FIELD(dcptopk_select_args, row_ends);
    FIELD(dcptopk_select_args, stream);
    SIZE(dcptopk_workspace_layout);
    FIELD(dcptopk_workspace_layout, struct_size);
    FIELD(dcptopk_workspace_layout, recv_bytes);
    FIELD(dcptopk_workspace_layout, flags_bytes);
    SIZE(dcptopk_selftest_report);
    FIELD(dcptopk_selftest_report, struct_size);
    FIELD(dcptopk_selftest_report, on_gpu);
    FIELD(dcptopk_selftest_report, rows_checked);
    FIELD(dcptopk_selftest_report, rows_rescued);
    FIELD(dcptopk_selftest_report, mismatches);
    FIELD(dcptopk_selftest_report, gpu_ms);
    FIELD(dcptopk_selftest_report, summary);
#ifdef DCPTOPK_GROUP_CONFIG_VERSION /* the distributed runtime's structs */
    SIZE(dcptopk_group_config);
    FIELD(dcptopk_group_config, struct_size);
    FIELD(dcptopk_group_config, version);
    FIELD(dcptopk_group_config, rank);
    FIELD(dcptopk_group_config, world_size);
    FIELD(dcptopk_group_config, nccl_comm);
    FIELD(dcptopk_group_config, unique_id);
    FIELD(dcptopk_group_config, store_dir);
    FIELD(dcptopk_group_config, store_prefix);
    FIELD(dcptopk_group_config, path);
    FIELD(dcptopk_group_config, timeout_ms);
    SIZE(dcptopk_group_merge_args);
    FIELD(dcptopk_group_merge_args, struct_size);
    FIELD(dcptopk_group_merge_args, rows);
    FIELD(dcptopk_group_merge_args, logits);
    FIELD(dcptopk_group_merge_args, logits_stride);
    FIELD(dcptopk_group_merge_args, max_local_len);
    FIELD(dcptopk_group_merge_args, row_ends);
    FIELD(dcptopk_group_merge_args, local_ids);
    FIELD(dcptopk_group_merge_args, local_ids_stride);
    FIELD(dcptopk_group_merge_args, candidates);
    FIELD(dcptopk_group_merge_args, pair_logits);
    FIELD(dcptopk_group_merge_args, pair_logits_stride);
    FIELD(dcptopk_group_merge_args, row_starts);
    FIELD(dcptopk_group_merge_args, ids_out);
    FIELD(dcptopk_group_merge_args, ids_out_stride);
    FIELD(dcptopk_group_merge_args, rows_map);
    FIELD(dcptopk_group_merge_args, stream);
#endif
    return 0;
}
