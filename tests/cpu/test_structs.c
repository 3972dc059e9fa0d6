/* test_structs.c - the versioned struct reader and writer (base/structs.c):
 * a smaller (older) struct gets defaults on input and is written only up to
 * its size on output; sizes out of range are refused with the struct named;
 * a larger (newer) struct is read when its unknown tail is zero. */
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
    v2 in = {offsetof(v2, b), 10, 99}; /* a version-1 caller: b unseen */
    v2 out = {sizeof(v2), 1, 2};       /* the defaults */
    CHECK_OK(dc_struct_in(NULL, "cfg", &in, &out, sizeof out,
                          offsetof(v2, b), "V2_INIT"));
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
    v2 s = {sizeof(v2), 0, 0};
    CHECK_OK(dc_struct_check(NULL, "cfg", &s, offsetof(v2, b), sizeof(v2),
                             "V2_INIT"));
    s.struct_size = 4;
    CHECK_EQ(dc_struct_check(NULL, "cfg", &s, offsetof(v2, b), sizeof(v2),
                             "V2_INIT"),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL),
                   "cfg->struct_size = 4: expected 12 (initialise with "
                   "V2_INIT)");
    s.struct_size = 1u << 20;
    CHECK_EQ(dc_struct_check(NULL, "cfg", &s, offsetof(v2, b), sizeof(v2),
                             "V2_INIT"),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dc_struct_check(NULL, "cfg", NULL, offsetof(v2, b), sizeof(v2),
                             "V2_INIT"),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "cfg is NULL");
    /* Through a public call. */
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.struct_size = 3;
    CHECK_EQ(dcptopk_merge_config_check(&c), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->struct_size = 3");
}

/* A version-3 caller of a version-2 library: its field c is unknown here. */
TEST(newer_struct_needs_a_zero_tail)
{
    struct v3 {
        uint32_t struct_size;
        int32_t a, b, c;
    } in = {sizeof in, 10, 20, 0};
    v2 out = {sizeof(v2), 1, 2};
    CHECK_OK(dc_struct_in(NULL, "cfg", &in, &out, sizeof out,
                          offsetof(v2, b), "V2_INIT"));
    CHECK_EQ(out.struct_size, (uint32_t)sizeof(v2));
    CHECK_EQ(out.a, 10);
    CHECK_EQ(out.b, 20);
    in.c = 1;
    CHECK_EQ(dc_struct_in(NULL, "cfg", &in, &out, sizeof out,
                          offsetof(v2, b), "V2_INIT"),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL),
                   "cfg->struct_size = 16: larger than the 12 bytes this "
                   "library knows, and byte 12 is 0x01, not 0");
}
