/* fake_blobs.c - deterministic fake compile output for the cache tests. */
#include "fake_blobs.h"

#include <stdint.h>
#include <stdlib.h>

void dc_test_blob(const char *tag, int which, size_t size, unsigned char *out)
{
    /* FNV-1a of the tag and blob index seeds an xorshift stream. */
    uint64_t x = 1469598103934665603ull ^ (uint64_t)which;
    for (const char *p = tag; *p; p++)
        x = (x ^ (unsigned char)*p) * 1099511628211ull;
    for (size_t i = 0; i < size; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out[i] = (unsigned char)x;
    }
}

void dc_test_blobs_make(const char *tag, const size_t sizes[3],
                        unsigned char *bufs[3], dc_cache_blobs *out)
{
    for (int i = 0; i < 3; i++) {
        bufs[i] = malloc(sizes[i]);
        if (!bufs[i])
            abort();
        dc_test_blob(tag, i, sizes[i], bufs[i]);
    }
    out->cubin = bufs[0];
    out->cubin_size = sizes[0];
    out->ptx = bufs[1];
    out->ptx_size = sizes[1];
    out->source = (const char *)bufs[2];
    out->source_size = sizes[2];
}

void dc_test_blobs_free(unsigned char *bufs[3])
{
    for (int i = 0; i < 3; i++) {
        free(bufs[i]);
        bufs[i] = NULL;
    }
}
