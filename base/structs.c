/* structs.c - versioned struct reading and writing (see structs.h). */
#include <string.h>

#include "structs.h"

/* No struct comes near it; a larger size is an uninitialised field, whose
 * "tail" must not be read. */
#define DC_STRUCT_MAX (1u << 16)

dcptopk_result dc_struct_check(const dcptopk_context *ctx, const char *what,
                               const void *s, size_t min, size_t full,
                               const char *init)
{
    if (!s)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "%s is NULL", what);
    uint32_t size;
    memcpy(&size, s, sizeof size); /* struct_size is the first field */
    if (size < min || size > DC_STRUCT_MAX)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "%s->struct_size = %u: expected %zu (initialise with "
                       "%s)",
                       what, size, full, init);
    const unsigned char *b = s;
    for (size_t i = full; i < size; i++)
        if (b[i])
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "%s->struct_size = %u: larger than the %zu "
                           "bytes this library knows, and byte %zu is "
                           "0x%02x, not 0 (a field of a newer dcptopk.h "
                           "that this library cannot honour)",
                           what, size, full, i, b[i]);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_struct_in(const dcptopk_context *ctx, const char *what,
                            const void *in, void *local, size_t full,
                            size_t min, const char *init)
{
    dcptopk_result r = dc_struct_check(ctx, what, in, min, full, init);
    if (r)
        return r;
    uint32_t size;
    memcpy(&size, in, sizeof size);
    memcpy(local, in, size < full ? size : full);
    size = (uint32_t)full;
    memcpy(local, &size, sizeof size);
    return DCPTOPK_SUCCESS;
}

void dc_struct_write(void *dst, uint32_t dst_size, const void *src,
                     size_t full)
{
    memcpy(dst, src, dst_size < full ? dst_size : full);
    memcpy(dst, &dst_size, sizeof dst_size);
}
