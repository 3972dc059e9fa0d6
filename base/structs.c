/* structs.c - versioned struct reading and writing (see structs.h). */
#include <string.h>

#include "structs.h"

dcptopk_result dc_struct_check(const dcptopk_context *ctx, const char *what,
                               uint32_t size, size_t min, size_t full,
                               const char *init)
{
    if (size < min || size > (1u << 16))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "%s->struct_size = %u: expected %zu (initialise with "
                       "%s)",
                       what, size, full, init);
    return DCPTOPK_SUCCESS;
}

void dc_struct_read(void *out, size_t full, const void *defaults,
                    const void *in, uint32_t in_size)
{
    memcpy(out, defaults, full);
    memcpy(out, in, in_size < full ? in_size : full);
    uint32_t size = (uint32_t)full;
    memcpy(out, &size, sizeof size); /* struct_size is the first field */
}

void dc_struct_write(void *dst, uint32_t dst_size, const void *src,
                     size_t full)
{
    memcpy(dst, src, dst_size < full ? dst_size : full);
    memcpy(dst, &dst_size, sizeof dst_size);
}
