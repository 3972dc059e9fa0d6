/*
 * structs.h - the one reader and writer of versioned public structs (those
 * that start with uint32_t struct_size and grow only at the end). A caller
 * built against an older header passes a smaller struct: an input gets the
 * defaults for the fields it lacks, an output is written only up to its
 * size.
 */
#ifndef DCPTOPK_STRUCTS_H
#define DCPTOPK_STRUCTS_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* Refuses a struct_size below `min` (the end of the first version's fields)
 * or above 64 KiB: "<what>->struct_size = N: expected <full> (initialise
 * with <init>)". */
DC_HIDDEN dcptopk_result dc_struct_check(const dcptopk_context *ctx,
                                         const char *what, uint32_t size,
                                         size_t min, size_t full,
                                         const char *init);
/* Input: out (full bytes) = defaults, then the caller's first in_size bytes;
 * out's struct_size becomes full. in_size has passed dc_struct_check. */
DC_HIDDEN void dc_struct_read(void *out, size_t full, const void *defaults,
                              const void *in, uint32_t in_size);
/* Output: the caller's dst gets src up to its own struct_size, which it
 * keeps. dst_size has passed dc_struct_check. */
DC_HIDDEN void dc_struct_write(void *dst, uint32_t dst_size, const void *src,
                               size_t full);

#endif /* DCPTOPK_STRUCTS_H */
