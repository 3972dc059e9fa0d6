/*
 * packed_format.h - the arithmetic of the packed candidate format, written
 * once for the C library and the kernel templates: it compiles as C11 and as
 * CUDA C++ under NVRTC (the renderer embeds it with the templates), so it
 * holds macros only, which both languages evaluate as constant expressions
 * (also in #if).
 *
 * A packed row of N candidates is N words (ord16 << 16 | 0xFFFF - (l &
 * 0xFFFF)) followed by N/32 plane words (bit 16 of each local id): the layout
 * is docs/CONTRACT.md's "Local top-N + pack".
 */
#ifndef DCPTOPK_PACKED_FORMAT_H
#define DCPTOPK_PACKED_FORMAT_H

/* Bits of a local id (column) of a packed candidate: 16 in the word, one in
 * the plane. Equals DCPTOPK_LOCAL_INDEX_BITS of the public header. */
#define DC_LOCAL_INDEX_BITS 17

/* int32 words of a packed row of n candidates (n a multiple of 32). */
#define DC_PACKED_ROW_WORDS(n) ((n) + (n) / 32)

/* Receive slots a rank's workspace keeps per row for the pushed top-K lists
 * of saturated ranks: (k - 1) / n, the most ranks that can be saturated (each
 * holds n of the top k), at least one. */
#define DC_RESCUE_SLOTS(k, n) ((k) - 1 >= (n) ? ((k) - 1) / (n) : 1)

/* Bits of a global id of a W-rank packed merge: 2^17 * W ids, W rounded up
 * to a power of two (1..16). */
#define DC_GID_BITS(w)                                                         \
    (DC_LOCAL_INDEX_BITS +                                                     \
     ((w) <= 1 ? 0 : (w) <= 2 ? 1 : (w) <= 4 ? 2 : (w) <= 8 ? 3 : 4))

#endif /* DCPTOPK_PACKED_FORMAT_H */
