/*
 * fake_blobs.h - deterministic stand-ins for compiled kernels, for the cache
 * tests: a fake compile callback stores these blobs, and a test knows the
 * bytes it must read back by recomputing them, never from the cache itself.
 */
#ifndef DC_FAKE_BLOBS_H
#define DC_FAKE_BLOBS_H

#include <stddef.h>

#include "cache.h"

/* Bytes of blob `which` (0 cubin, 1 ptx, 2 source) of `tag`. */
void dc_test_blob(const char *tag, int which, size_t size, unsigned char *out);
/* Allocates bufs[0..2] of sizes[0..2], fills them with dc_test_blob and
 * points *out at them (compile_ms left to the caller). Aborts on OOM. */
void dc_test_blobs_make(const char *tag, const size_t sizes[3],
                        unsigned char *bufs[3], dc_cache_blobs *out);
/* Frees bufs[0..2] and sets them to NULL. */
void dc_test_blobs_free(unsigned char *bufs[3]);

#endif /* DC_FAKE_BLOBS_H */
