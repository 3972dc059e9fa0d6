/* struct_sizes.c - prints "name size offset-of-last-field" for every public
 * struct the Python binding mirrors, so test_binding.py can compare. */
#include <stddef.h>
#include <stdio.h>

#include "dcptopk.h"

#define SHOW(type, last) \
    printf("%s %zu %zu\n", #type, sizeof(type), offsetof(type, last))

int main(void)
{
    SHOW(dcptopk_merge_config, exact);
    SHOW(dcptopk_context_config, warmup_threads);
    SHOW(dcptopk_key, arch);
    SHOW(dcptopk_warmup_stats, total_ms);
    SHOW(dcptopk_rows_map, counts_out);
    SHOW(dcptopk_pair_select_args, stream);
    SHOW(dcptopk_pair_pack_args, stream);
    SHOW(dcptopk_pack_args, stream);
    SHOW(dcptopk_select_args, stream);
    SHOW(dcptopk_workspace_layout, flags_bytes);
    return 0;
}
