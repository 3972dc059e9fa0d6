/*
 * base.h - the ground floor (base/): what every part of the library shares
 * and no user sees: the context struct, the error helpers, the compile-key
 * field table and the kernel registry. No CUDA headers; nothing here calls
 * up into cache/, runtime/, kernels/ or src/.
 */
#ifndef DCPTOPK_BASE_H
#define DCPTOPK_BASE_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "dcptopk.h"

#define DC_HIDDEN __attribute__((visibility("hidden")))
#define DC_ERR_LEN 8192

/* -------------------------------------------------------------- errors */

/* The last error of a context or of a thread. */
typedef struct dc_err {
    dcptopk_result code;
    char msg[DC_ERR_LEN];
} dc_err;

/* Records `code` with a printf-style message in ctx (NULL: the thread's slot)
 * and returns `code`, so that checks read `return dc_fail(ctx, ...)`. The
 * message should name the argument and its value. */
DC_HIDDEN dcptopk_result dc_fail(const dcptopk_context *ctx,
                                 dcptopk_result code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
DC_HIDDEN dcptopk_result dc_vfail(const dcptopk_context *ctx,
                                  dcptopk_result code, const char *fmt,
                                  va_list ap);
/* Appends to the current message (e.g. an NVRTC log) without changing the
 * code. */
DC_HIDDEN void dc_fail_append(const dcptopk_context *ctx, const char *text);
/* Clears the error slot (success). */
DC_HIDDEN void dc_clear(const dcptopk_context *ctx);
/* The error slot of ctx or of the calling thread. */
DC_HIDDEN dc_err *dc_err_slot(const dcptopk_context *ctx);

/* Warnings and other messages: base/log.h. */

/* ------------------------------------------------------------- context */

struct dc_runtime; /* runtime/: CUDA context, module table, cache handle */

struct dcptopk_context {
    dc_err err;                  /* first: dc_err_slot() relies on nothing else */
    pthread_mutex_t err_lock;    /* guards err: threads share a context        */
    dcptopk_context_config config;
    char arch[16];
    char cache_path[4096];
    int32_t device;              /* -1 = none                                  */
    struct dc_runtime *rt;       /* owned by runtime/                          */
    int32_t pair_shapes;         /* dc_pair_row_shapes, fixed at creation      */
};

/* ----------------------------------------------------- kernel registry */

/* Key fields, as a bit mask: what a kernel specialises on. */
enum {
    DC_F_TOPK = 1u << 0,
    DC_F_LOCAL_TOPK = 1u << 1,
    DC_F_WORLD_SIZE = 1u << 2,
    DC_F_BLOCK_SIZE = 1u << 3,
    DC_F_INTERLEAVE = 1u << 4,
    DC_F_EMIT_IDS = 1u << 5,
    DC_F_EXACT = 1u << 6,
    DC_F_LAYOUT = 1u << 7,
    DC_F_VARIANT = 1u << 8
};

/* One int32_t field of dcptopk_key that a kernel may specialise on. The
 * table (base/config.c) is the one list of them: key strings and key checks
 * use `name`, the renderer's prelude `macro`, in table order (the prelude is
 * hashed, so the order is part of the cache key). */
typedef struct dc_key_field {
    uint32_t bit;       /* DC_F_*                        */
    const char *name;   /* "topk"                        */
    const char *macro;  /* "DCPTOPK_TOPK"                */
    size_t offset;      /* of the field in dcptopk_key   */
} dc_key_field;

DC_HIDDEN extern const dc_key_field dc_key_fields[];
DC_HIDDEN extern const size_t dc_key_field_count;
/* The value of dc_key_fields[i] in `key`. */
DC_HIDDEN int32_t dc_key_field_value(const dcptopk_key *key, size_t i);

/* A zeroed key of `kernel` for `arch` (NULL: none yet): each family's key
 * builder starts from it and sets the fields its kernel specialises on. */
DC_HIDDEN void dc_key_init(dcptopk_key *k, int32_t kernel, const char *arch);

/* The compile keys of a config being put together (src/config_keys.c): the
 * families append theirs; n counts every key, those past cap too (they go
 * to `spill`), so the caller learns the size it needs. */
typedef struct dc_key_list {
    dcptopk_key *keys;
    size_t cap;
    size_t n;
    dcptopk_key spill;
} dc_key_list;

/* The list's next slot (past cap: the spill slot), counted, for a
 * family's key builder to fill. */
DC_HIDDEN dcptopk_key *dc_key_next(dc_key_list *l);

typedef struct dc_kernel_info {
    int32_t kernel;          /* dcptopk_kernel                               */
    const char *name;        /* "select"                                     */
    const char *template_file; /* "select.cu" under kernels/<family>/       */
    uint32_t fields;         /* DC_F_* it specialises on                     */
} dc_kernel_info;

/* NULL for an unknown or reserved kernel number: every loop over the kernel
 * numbers skips those. */
DC_HIDDEN const dc_kernel_info *dc_kernel_get(int32_t kernel);

/* Reads a config through its struct_size (a caller built against an older,
 * smaller struct gets defaults for the newer fields). */
DC_HIDDEN dcptopk_result dc_config_read(const dcptopk_context *ctx,
                                        const dcptopk_merge_config *in,
                                        dcptopk_merge_config *out);

/* "topk=2048,local_topk=384": the key fields of its kernel; returns the
 * length needed (snprintf-like). */
DC_HIDDEN int dc_key_fields_string(const dcptopk_key *key, char *buf,
                                   size_t size);

/* Whether `arch` names a target NVRTC takes: sm_XY or sm_XYZ, optionally
 * followed by 'a' or 'f' (base/config.c; NULL is not valid). */
DC_HIDDEN int dc_arch_valid(const char *arch);
/* The XY (or XYZ) of a valid arch, -1 for an invalid one. */
DC_HIDDEN int dc_arch_number(const char *arch);
/* The oldest target the merge kernels compile for (sm_90). */
#define DC_ARCH_MIN 90
/* INVALID_ARGUMENT for an invalid arch, UNSUPPORTED for one older than
 * DC_ARCH_MIN; the message names the argument `name`. */
DC_HIDDEN dcptopk_result dc_arch_check_merge(const dcptopk_context *ctx,
                                             const char *name,
                                             const char *arch);

/* Number of bits of a packed-merge global id for W = 1..16 ranks (2^17 * W
 * ids, W rounded up to a power of two): DC_GID_BITS of packed_format.h. */
DC_HIDDEN int32_t dc_gid_bits(int32_t world_size);

#endif /* DCPTOPK_BASE_H */
