/* test_structs.c - the versioned struct reader and writer (base/structs.c):
 * a smaller (older) struct gets defaults on input and is written only up to
 * its size on output; sizes out of range are refused with the struct named. */
#include <stddef.h>
#include <string.h>

#include "dcptopk.h"
#include "harness.h"
#include "structs.h"

typedef struct v2 {
    uint32_t struct_size;
    int32_t a;
    int32_t b; /* added in version 2 */
} v2;

TEST(older_input_gets_defaults)
{
    const v2 defaults = {sizeof(v2), 1, 2};
    v2 in = {offsetof(v2, b), 10, 99}; /* a version-1 caller: b unseen */
    v2 out;
    memset(&out, 0xee, sizeof out);
    dc_struct_read(&out, sizeof out, &defaults, &in, in.struct_size);
    CHECK_EQ(out.struct_size, (uint32_t)sizeof(v2));
    CHECK_EQ(out.a, 10);
    CHECK_EQ(out.b, 2);
}

TEST(older_output_is_written_up_to_its_size)
{
    const v2 src = {sizeof(v2), 5, 6};
    v2 dst = {offsetof(v2, b), 0, 77};
    dc_struct_write(&dst, dst.struct_size, &src, sizeof src);
    CHECK_EQ(dst.struct_size, (uint32_t)offsetof(v2, b));
    CHECK_EQ(dst.a, 5);
    CHECK_EQ(dst.b, 77);
}

TEST(sizes_out_of_range_are_refused)
{
    CHECK_OK(dc_struct_check(NULL, "cfg", sizeof(v2), offsetof(v2, b),
                             sizeof(v2), "V2_INIT"));
    CHECK_EQ(dc_struct_check(NULL, "cfg", 4, offsetof(v2, b), sizeof(v2),
                             "V2_INIT"),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL),
                   "cfg->struct_size = 4: expected 12 (initialise with "
                   "V2_INIT)");
    CHECK_EQ(dc_struct_check(NULL, "cfg", 1u << 20, offsetof(v2, b),
                             sizeof(v2), "V2_INIT"),
             DCPTOPK_INVALID_ARGUMENT);
    /* Through a public call. */
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.struct_size = 3;
    CHECK_EQ(dcptopk_merge_config_check(&c), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->struct_size = 3");
}
