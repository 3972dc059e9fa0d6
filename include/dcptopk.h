/*
 * dcptopk.h - the whole public contract of dcptopk.
 *
 * dcptopk performs the distributed top-K merge of the DSA sparse indexer under
 * decode context parallelism (DCP), exactly, with CUDA kernels that it renders
 * from templates, compiles with NVRTC, caches in SQLite and launches through
 * the CUDA Driver API.
 *
 * Conventions (read once, they hold for every call below):
 *  - Every call returns a dcptopk_result. DCPTOPK_SUCCESS is 0.
 *  - Calls that take a context store a detailed message in it on failure
 *    (dcptopk_last_error(ctx)); calls without a context store it in a
 *    thread-local slot read with dcptopk_last_error(NULL). Messages name the
 *    offending argument and its value and keep native CUDA / NVRTC / SQLite
 *    error codes and the NVRTC log.
 *  - No CUDA type appears here: device pointers travel as plain pointers or
 *    uint64_t, streams as void * (a CUstream / cudaStream_t; NULL = legacy
 *    default stream). The GPU calls (pack, select, pair, node pairs, group
 *    merge) check every pointer argument before they launch, with one
 *    cuPointerGetAttributes each: host memory (pageable or page-locked), or
 *    memory of another device or CUDA context, is DCPTOPK_INVALID_ARGUMENT
 *    naming the argument, not a fault in a kernel. Managed memory passes.
 *  - Structs that may grow carry `struct_size` first and have an _INIT macro.
 *    Always initialise them with the macro, then set the fields you need.
 *    They grow only at the end, so a library reads a caller's older,
 *    smaller struct (the fields it lacks take their _INIT values; an output
 *    is written only up to its struct_size) and a newer, larger one whose
 *    bytes past the library's size are all zero. Any other struct_size is
 *    DCPTOPK_INVALID_ARGUMENT naming the argument and its size.
 *  - Handles are created through out-parameters and destroyed by a function
 *    that accepts NULL.
 *  - Thread safety: a context may be used from several host threads at once
 *    (its module table is locked); a cache handle may not.
 */
#ifndef DCPTOPK_H
#define DCPTOPK_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define DCPTOPK_API
#elif defined(__GNUC__)
#define DCPTOPK_API __attribute__((visibility("default")))
#else
#define DCPTOPK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ versions */

#define DCPTOPK_VERSION_MAJOR 0
#define DCPTOPK_VERSION_MINOR 1
#define DCPTOPK_VERSION_PATCH 0
#define DCPTOPK_VERSION_NUMBER                                                \
    (DCPTOPK_VERSION_MAJOR * 10000 + DCPTOPK_VERSION_MINOR * 100 +            \
     DCPTOPK_VERSION_PATCH)

/* The version of the library actually linked (compare with the macro). */
DCPTOPK_API unsigned dcptopk_version_number(void);
DCPTOPK_API const char *dcptopk_version_string(void);

/* ------------------------------------------------------------------- results */

/* One list generates the enum, the names and the messages. Numbers are pinned:
 * never renumber, only append. */
#define DCPTOPK_RESULT_LIST(X)                                                 \
    X(SUCCESS, 0, "success")                                                   \
    X(INVALID_ARGUMENT, 1, "an argument is invalid")                           \
    X(UNSUPPORTED, 2, "the requested combination is not supported")            \
    X(OUT_OF_MEMORY, 3, "a host or device allocation failed")                  \
    X(NO_DEVICE, 4, "no CUDA driver or device is available")                   \
    X(CUDA_ERROR, 5, "a CUDA driver call failed")                              \
    X(NVRTC_ERROR, 6, "NVRTC failed to compile a kernel")                      \
    X(CACHE_ERROR, 7, "the compile cache failed")                              \
    X(NCCL_ERROR, 8, "an NCCL call failed")                                    \
    X(NOT_WARMED, 9, "strict mode: a kernel was needed that warmup did not load") \
    X(RESCUE_TIMEOUT, 10, "the rescue round timed out waiting for a peer")    \
    X(NOT_FOUND, 11, "no such entry")                                          \
    X(IO_ERROR, 12, "a file could not be read or written")                     \
    X(CONTRACT_VIOLATION, 13, "packed rows break the merge contract")          \
    X(INTERNAL, 14, "internal error (a bug in dcptopk)")                     \
    X(PEER_TIMEOUT, 15, "a peer rank did not answer within the group's bound") \
    X(GROUP_BROKEN, 16, "the group failed earlier and must be rebuilt")

typedef enum dcptopk_result {
#define DCPTOPK_X_ENUM(name, num, msg) DCPTOPK_##name = num,
    DCPTOPK_RESULT_LIST(DCPTOPK_X_ENUM)
#undef DCPTOPK_X_ENUM
} dcptopk_result;

/* "DCPTOPK_INVALID_ARGUMENT", or "DCPTOPK_UNKNOWN_RESULT". Never NULL. */
DCPTOPK_API const char *dcptopk_result_name(dcptopk_result r);
/* The one-line generic message of a code. Never NULL. */
DCPTOPK_API const char *dcptopk_result_message(dcptopk_result r);

/* ---------------------------------------------------------------------- log */

/* Levels of the library's messages (warnings: a cache fallback, a cubin that
 * failed to load and was recompiled, an ignored environment value). */
typedef enum dcptopk_log_level {
    DCPTOPK_LOG_QUIET = 0, /* nothing                                       */
    DCPTOPK_LOG_ERROR = 1,
    DCPTOPK_LOG_WARN = 2,  /* the default                                   */
    DCPTOPK_LOG_INFO = 3,
    DCPTOPK_LOG_DEBUG = 4
} dcptopk_log_level;

/* Receives one whole message: `line` has no "dcptopk: level: " prefix and no
 * newline; it is valid during the call only. Called on the thread that logs,
 * possibly several threads at once. */
typedef void (*dcptopk_log_fn)(void *user, dcptopk_log_level level,
                               const char *line);

/* Routes the library's messages to fn (NULL: back to stderr, where each line
 * is written with one write() so lines of threads and processes never
 * interleave). Thread-safe; process-wide. */
DCPTOPK_API void dcptopk_log_set_callback(dcptopk_log_fn fn, void *user);
/* The most verbose level written; initially from DCPTOPK_LOG (quiet, error,
 * warn, info, debug; default warn). Thread-safe; process-wide. A level
 * outside 0..4 is clamped. */
DCPTOPK_API void dcptopk_log_set_level(dcptopk_log_level level);
DCPTOPK_API dcptopk_log_level dcptopk_log_get_level(void);

/* -------------------------------------------------------------- environment */

/* What `dcptopk env` reports: the settings in effect and the run-time
 * environment. Neither call changes anything (no file is created, no warning
 * is logged). */

/* Where the value in effect of a setting comes from. */
typedef enum dcptopk_setting_source {
    DCPTOPK_SETTING_DEFAULT = 0,     /* unset or empty: the default            */
    DCPTOPK_SETTING_ENVIRONMENT = 1, /* the environment's value                */
    DCPTOPK_SETTING_IGNORED = 2      /* set but invalid: the default is used
                                        (reading it logs a warning)            */
} dcptopk_setting_source;

typedef struct dcptopk_setting {
    uint32_t struct_size;
    const char *name;  /* "DCPTOPK_PEER_TIMEOUT_MS" (static)                  */
    const char *kind;  /* "text", "int", "seconds", "bytes", "flag" or
                          "foreign" (read by a launcher, the CLI or the
                          Python binding; listed so the table is complete)    */
    const char *doc;   /* one line (static)                                   */
    const char *env;   /* the environment's text, NULL when unset or empty
                          (getenv's string: valid until the environment
                          changes)                                            */
    char value[32];    /* the value in effect of an int, seconds, bytes or
                          flag setting ("10000"); "" for text and foreign
                          ones, whose value is `env`                          */
    int32_t source;    /* dcptopk_setting_source                              */
} dcptopk_setting;
#define DCPTOPK_SETTING_INIT                                                   \
    { sizeof(dcptopk_setting), NULL, NULL, NULL, NULL, { 0 }, 0 }

/* The i-th environment variable of the library's one settings table (every
 * variable the library, its CLI and its Python binding read); NOT_FOUND past
 * the end. Thread-safe unless another thread changes the environment. */
DCPTOPK_API dcptopk_result dcptopk_setting_get(size_t i,
                                               dcptopk_setting *out);

typedef struct dcptopk_env_info {
    uint32_t struct_size;
    char build[128];          /* SQLite in use, assertions, compiler          */
    int32_t nvrtc_major;      /* nvrtcVersion; -1 when no NVRTC loaded        */
    int32_t nvrtc_minor;
    char nvrtc_path[512];     /* the file NVRTC was loaded from; "" unknown   */
    int32_t driver_version;   /* cuDriverGetVersion (13000 = 13.0); 0: none   */
    int32_t device_count;     /* as dcptopk_device_count                      */
    char no_device[512];      /* why no device is usable; "" when one is      */
    /* The default cache file and what a context makes of it (docs/CACHE.md):
     * "trusted" (used), "shared" (trusted under DCPTOPK_CACHE_SHARED's group
     * rule), "absent" (created at the first compile), "refused" (untrusted:
     * contexts compile into memory) or "none" (no folder known); cache_why
     * says why when it is not plainly "trusted". */
    char cache_path[4096];
    char cache_mode[16];
    char cache_why[1024];
    /* The archs the loaded NVRTC compiles for (nvrtcGetSupportedArchs),
     * "sm_75 sm_80 ..."; "" without NVRTC. */
    char nvrtc_archs[512];
    /* Without a usable NVRTC (nvrtc_major -1): every file tried and why it
     * failed; "" when one loaded. */
    char nvrtc_error[2048];
} dcptopk_env_info;
#define DCPTOPK_ENV_INFO_INIT                                                  \
    { sizeof(dcptopk_env_info), { 0 }, 0, 0, { 0 }, 0, 0, { 0 }, { 0 },      \
      { 0 }, { 0 }, { 0 }, { 0 } }

/* Fills *out (loads the CUDA driver once, as every call that needs it). */
DCPTOPK_API dcptopk_result dcptopk_env_info_get(dcptopk_env_info *out);

/* ------------------------------------------------------------------ context */

typedef struct dcptopk_context dcptopk_context;

/* How a context uses the on-disk compile cache. */
typedef enum dcptopk_cache_mode {
    DCPTOPK_CACHE_READWRITE = 0, /* default: read hits, store compiles      */
    DCPTOPK_CACHE_READONLY = 1,  /* read hits, never write the file         */
    DCPTOPK_CACHE_OFF = 2        /* compile everything, keep it in memory   */
} dcptopk_cache_mode;

#define DCPTOPK_CONTEXT_CONFIG_VERSION 1
typedef struct dcptopk_context_config {
    uint32_t struct_size; /* sizeof(dcptopk_context_config)                   */
    uint32_t version;     /* DCPTOPK_CONTEXT_CONFIG_VERSION                   */
    /* CUDA device ordinal; -1 = no device: compile and cache only (then
     * `arch` is required). */
    int32_t device;
    /* Target architecture such as "sm_90", "sm_90a", "sm_100a"; NULL = the
     * device's own (sm_XY, plus "a" on cc 9.0 / 10.x). Copied. */
    const char *arch;
    /* Cache database file; NULL = the default (see dcptopk_cache_default_path).
     * Copied. */
    const char *cache_path;
    int32_t cache_mode; /* dcptopk_cache_mode                                */
    /* Non-zero: once dcptopk_context_seal() ran (dcptopk_warmup seals when
     * `strict` is set), a launch whose kernel is not loaded fails with
     * DCPTOPK_NOT_WARMED instead of compiling. */
    int32_t strict;
    /* Threads of dcptopk_warmup's compile phase (keys missing from a
     * writable cache file): 1..64, 1 = one key after another; 0 =
     * $DCPTOPK_WARMUP_THREADS, else the online CPUs, at most 8. (Added after
     * `strict`: a caller built with an older, smaller struct gets 0.) */
    int32_t warmup_threads;
} dcptopk_context_config;

#define DCPTOPK_CONTEXT_CONFIG_INIT                                            \
    { sizeof(dcptopk_context_config), DCPTOPK_CONTEXT_CONFIG_VERSION, 0, NULL, \
      NULL, DCPTOPK_CACHE_READWRITE, 0, 0 }

/* Creates a context on `config->device` (config NULL = all defaults). The
 * context retains the device's primary CUDA context; calls made with it run
 * in that CUDA context. */
DCPTOPK_API dcptopk_result dcptopk_context_create(
    const dcptopk_context_config *config, dcptopk_context **out);
/* Unloads every module and releases the CUDA context. Accepts NULL. The caller
 * guarantees no launch of this context is still running. */
DCPTOPK_API void dcptopk_context_destroy(dcptopk_context *ctx);
/* The last error message of `ctx`, or of the calling thread when ctx is NULL.
 * Never NULL. The text belongs to the calling thread and stays valid until
 * its next dcptopk call. With threads sharing a context, the context's
 * message is the latest failure of any of them; dcptopk_last_error(NULL)
 * after a failed context call is the calling thread's own. */
DCPTOPK_API const char *dcptopk_last_error(const dcptopk_context *ctx);
/* The target arch the context compiles for, e.g. "sm_90a". */
DCPTOPK_API const char *dcptopk_context_arch(const dcptopk_context *ctx);
/* From now on a launch of a kernel that is not loaded is DCPTOPK_NOT_WARMED
 * (only when the context was created with strict set). */
DCPTOPK_API dcptopk_result dcptopk_context_seal(dcptopk_context *ctx);
/* Number of CUDA devices, 0 when there is no driver or no device. */
DCPTOPK_API int dcptopk_device_count(void);

/* ----------------------------------------------------------- merge configs */

typedef enum dcptopk_merge_kind {
    DCPTOPK_MERGE_PACKED = 0, /* 4-byte candidates + bit plane, N < K        */
    DCPTOPK_MERGE_PAIR = 1    /* 8-byte (fp32 score, int32 gid) candidates   */
} dcptopk_merge_kind;

/* Limits shared by every entry point. */
#define DCPTOPK_MAX_WORLD_SIZE 16
#define DCPTOPK_MAX_TOPK 4096
#define DCPTOPK_LOCAL_INDEX_BITS 17 /* local ids of the packed merge < 2^17  */

#define DCPTOPK_MERGE_CONFIG_VERSION 1
typedef struct dcptopk_merge_config {
    uint32_t struct_size;
    uint32_t version;
    int32_t kind;        /* dcptopk_merge_kind                                */
    int32_t topk;        /* K: multiple of 32, 32..4096                       */
    int32_t local_topk;  /* N (packed merge): multiple of 32, < K; pair: = K  */
    int32_t world_size;  /* W: 1..16                                          */
    int32_t block_size;  /* KV block size for owned physical rows; 0 = none   */
    int32_t interleave;  /* S: gid = (l/S)*W*S + rank*S + l%S; 1 = classic    */
    int32_t emit_ids;    /* non-zero: write global ids [T, K]                 */
    int32_t exact;       /* packed merge: run the rescue round                */
} dcptopk_merge_config;

#define DCPTOPK_MERGE_CONFIG_INIT                                              \
    { sizeof(dcptopk_merge_config), DCPTOPK_MERGE_CONFIG_VERSION,              \
      DCPTOPK_MERGE_PACKED, 2048, 384, 8, 64, 1, 1, 1 }

/* Fills *out with a named config: "deepseek-v3.2-dcp8" (the default: packed,
 * K=2048, N=384, W=8, block 64, ids, exact), and the others listed by
 * dcptopk_merge_config_name(). Unknown name: DCPTOPK_NOT_FOUND. */
DCPTOPK_API dcptopk_result dcptopk_merge_config_named(
    const char *name, dcptopk_merge_config *out);
/* The i-th named config, NULL past the end. */
DCPTOPK_API const char *dcptopk_merge_config_name(size_t i);
/* Validates every field; the error names the field and its value. */
DCPTOPK_API dcptopk_result dcptopk_merge_config_check(
    const dcptopk_merge_config *config);

/* Arithmetic of the packed format, in one place. */
DCPTOPK_API int32_t dcptopk_packed_row_words(int32_t n); /* n + n/32          */
DCPTOPK_API int32_t dcptopk_rescue_slots(int32_t k, int32_t n); /* (k-1)/n    */

/* ------------------------------------------------------------ compile keys */

/* Every kernel of the library. A key = kernel + the fields it specialises on +
 * the target arch; fields a kernel does not use are 0 in its keys. */
#define DCPTOPK_KERNEL_LIST(X)                                                 \
    X(PACK_INDICES, 0, "pack_indices")   /* given local ids -> packed rows  */ \
    X(TOPN_PACK, 1, "topn_pack")         /* fused local top-N + pack        */ \
    X(SELECT, 2, "select")               /* packed select (+ push)          */ \
    X(RESCUE, 3, "rescue")               /* rescue round                    */ \
    X(PAIR_PACK, 4, "pair_pack")         /* local top-K -> 8-byte pairs     */ \
    X(PAIR_SELECT, 5, "pair_select")     /* pair merge select               */ \
    X(LOOPBACK, 6, "loopback")           /* reserved: no such kernel; the   */ \
                                         /* number stays taken (keys pin it)*/ \
    X(PUSH, 7, "push")                   /* saturated rank: local top-K push */ \
    X(EXCHANGE, 8, "exchange")           /* device-side push all-gather     */ \
    X(EXCHANGE_SETTLE, 9, "exchange_settle") /* captured push: parity copy */ \
    X(NODE_PAIRS, 10, "node_pairs")      /* node top K -> pair candidates   */

typedef enum dcptopk_kernel {
#define DCPTOPK_X_KERNEL(name, num, str) DCPTOPK_KERNEL_##name = num,
    DCPTOPK_KERNEL_LIST(DCPTOPK_X_KERNEL)
#undef DCPTOPK_X_KERNEL
    DCPTOPK_KERNEL_COUNT
} dcptopk_kernel;

/* "select", ...; "unknown" for a number that is not a kernel (also for a
 * reserved one such as DCPTOPK_KERNEL_LOOPBACK). */
DCPTOPK_API const char *dcptopk_kernel_name(int32_t kernel);

typedef struct dcptopk_key {
    int32_t kernel;     /* dcptopk_kernel                                     */
    int32_t topk;
    int32_t local_topk;
    int32_t world_size;
    int32_t block_size;
    int32_t interleave;
    int32_t emit_ids;
    int32_t exact;
    int32_t layout;     /* pair select: dcptopk_pair_layout                   */
    int32_t variant;    /* kernel-specific code-path choice (e.g. split rows) */
    char arch[16];      /* "sm_90a"                                           */
} dcptopk_key;

/* Expands a config into the keys it needs for `arch` (NULL = "sm_90a"):
 * every key a GPU of that arch may launch for it (a pair row of 16384 has
 * two shapes, one a GPU, so both are listed; warmup on a device loads only
 * its own). Writes at most `cap` keys, sets *count to the number needed. */
DCPTOPK_API dcptopk_result dcptopk_config_keys(
    const dcptopk_merge_config *config, const char *arch, dcptopk_key *keys,
    size_t cap, size_t *count);
/* The keys of the hierarchical merge of an exact packed config over `nodes`
 * nodes of W / nodes ranks (dcptopk_node_pairs): the node merge's keys
 * (world_size W / nodes), node_pairs, and the pair select over the nodes.
 * nodes = 1 is dcptopk_config_keys. */
DCPTOPK_API dcptopk_result dcptopk_config_keys_nodes(
    const dcptopk_merge_config *config, int32_t nodes, const char *arch,
    dcptopk_key *keys, size_t cap, size_t *count);
/* "select(topk=2048,local_topk=384,world_size=8,...)@sm_90a"; returns the
 * length it needs (like snprintf). */
/* The inverse of dcptopk_key_format: parses "kernel(field=value,...)@arch"
 * (the fields its kernel specialises on, each once, any order; "()" when it
 * has none) into *out and checks it as dcptopk_key_check does. On error *out
 * is left unchanged and dcptopk_last_error(NULL) names the bad part. */
DCPTOPK_API dcptopk_result dcptopk_key_parse(const char *text,
                                             dcptopk_key *out);
DCPTOPK_API int dcptopk_key_format(const dcptopk_key *key, char *buf,
                                   size_t size);
/* Validates a key's fields for its kernel. */
DCPTOPK_API dcptopk_result dcptopk_key_check(const dcptopk_key *key);
/* The rendered CUDA source of a key (what NVRTC compiles). *out is malloc'd,
 * NUL-terminated, freed by the caller with free(). */
DCPTOPK_API dcptopk_result dcptopk_key_render(const dcptopk_key *key,
                                              char **out);
/* The 128-bit cache key of `key` as 32 lowercase hex digits + NUL. Depends on
 * the template bytes, constants, NVRTC options and version, arch and the cache
 * schema version. */
DCPTOPK_API dcptopk_result dcptopk_key_hash(const dcptopk_key *key,
                                            char hex[33]);

/* ------------------------------------------------------------------ warmup */

typedef enum dcptopk_origin {
    DCPTOPK_ORIGIN_MEMORY = 0,   /* already loaded in this context            */
    DCPTOPK_ORIGIN_CACHE = 1,    /* read from the cache file                  */
    DCPTOPK_ORIGIN_COMPILED = 2  /* compiled now (and stored)                 */
} dcptopk_origin;

typedef struct dcptopk_warmup_stats {
    uint32_t struct_size;
    uint32_t keys;        /* keys of the config                               */
    uint32_t memory_hits; /* already loaded                                   */
    uint32_t cache_hits;  /* found in the cache file                          */
    uint32_t compiled;    /* compiled by this call                            */
    double compile_ms;    /* NVRTC time spent by this call                    */
    double load_ms;       /* module load time                                 */
    double total_ms;
} dcptopk_warmup_stats;

#define DCPTOPK_WARMUP_STATS_INIT                                              \
    { sizeof(dcptopk_warmup_stats), 0, 0, 0, 0, 0.0, 0.0, 0.0 }

/* Called once per key, after it is ready. `ms` = its compile or load time. */
typedef void (*dcptopk_progress_fn)(void *user, const dcptopk_key *key,
                                    dcptopk_origin origin, double ms);

/* Compiles (or finds in the cache) and loads every key of `config`. Without a
 * device (context device -1) it compiles and stores only. With strict set on
 * the context, the context is sealed afterwards. `progress`, `stats` may be
 * NULL. With a writable cache file, the keys missing from it are first
 * compiled side by side on the context's warmup_threads threads (default:
 * $DCPTOPK_WARMUP_THREADS, else the online CPUs, at most 8), each once, then loaded in order; `progress` is
 * called in key order either way. */
DCPTOPK_API dcptopk_result dcptopk_warmup(dcptopk_context *ctx,
                                          const dcptopk_merge_config *config,
                                          dcptopk_progress_fn progress,
                                          void *user,
                                          dcptopk_warmup_stats *stats);
/* The same for explicit keys. */
DCPTOPK_API dcptopk_result dcptopk_warmup_keys(dcptopk_context *ctx,
                                               const dcptopk_key *keys,
                                               size_t count,
                                               dcptopk_progress_fn progress,
                                               void *user,
                                               dcptopk_warmup_stats *stats);

/* Counters of a context since its creation. */
typedef struct dcptopk_context_stats {
    uint32_t struct_size;
    uint64_t launches;
    uint64_t compiles;     /* NVRTC compiles                                  */
    uint64_t cache_hits;   /* modules read from the cache file                */
    uint64_t modules;      /* modules loaded now                              */
    /* Kernels that a launch had to compile, or load from the cache file,
     * after the context's first completed warmup (or its seal): each one is
     * a config missing from the warmup, and is also logged at warn level.
     * An engine's JIT monitor checks these stay 0 after model load. (Added
     * after `modules`: a caller with the older, smaller struct does not get
     * them.) */
    uint64_t late_compiles;
    uint64_t late_loads;
} dcptopk_context_stats;
#define DCPTOPK_CONTEXT_STATS_INIT                                             \
    { sizeof(dcptopk_context_stats), 0, 0, 0, 0, 0, 0 }
DCPTOPK_API dcptopk_result dcptopk_context_stats_get(
    const dcptopk_context *ctx, dcptopk_context_stats *out);

/* --------------------------------------------------- owned physical rows */

/* Maps selected global ids to this rank's physical KV rows:
 * row = block_table[req_id[t] * block_table_stride + l / block_size]
 *       * stride_rows + l % block_size,  l = the local id of the gid.
 * A block index >= block_table_cols is dropped; a req_id outside
 * [0, num_reqs) owns nothing. All pointers on the same side (host for ref_*,
 * device for the GPU calls). */
typedef struct dcptopk_rows_map {
    const int32_t *req_id;      /* [T]                                        */
    const int32_t *block_table; /* [num_reqs, block_table_stride]            */
    int64_t block_table_stride; /* elements between two requests' tables     */
    int32_t block_table_cols;   /* valid block indices per request           */
    int32_t num_reqs;
    int32_t stride_rows;        /* physical rows per block-table entry        */
    int32_t *rows_out;          /* [T, rows_out_stride >= K], -1 after count  */
    int64_t rows_out_stride;
    int32_t *counts_out;        /* [T]                                        */
} dcptopk_rows_map;

/* ------------------------------------------------------- the pair merge */

typedef enum dcptopk_pair_layout {
    DCPTOPK_LAYOUT_RANK_MAJOR = 0, /* [W, T_alloc, K, 2]: the all-gather output */
    DCPTOPK_LAYOUT_ROW_MAJOR = 1,  /* [T, W*K, 2]                               */
    /* The same two layouts of float32 pairs whose id is a float value
     * (vLLM's pair candidates), read in place: the id f is valid when
     * 0 <= f < 2^31 and gives gid (int32_t)f (truncated); NaN, negative or
     * larger ids are invalid slots. Ids are exact below 2^24. Bit 0 of a
     * layout is row-major, bit 1 float ids. */
    DCPTOPK_LAYOUT_RANK_MAJOR_FLOAT_IDS = 2,
    DCPTOPK_LAYOUT_ROW_MAJOR_FLOAT_IDS = 3
} dcptopk_pair_layout;

/* The gid of a candidate id word under `layout` (-1: an invalid slot):
 * the word itself, or its float value as DCPTOPK_LAYOUT_*_FLOAT_IDS say. */
DCPTOPK_API int32_t dcptopk_pair_gid(int32_t layout, int32_t id_word);

/* Candidates: int32 pairs (fp32 score bits, int32 global id); gid < 0 is an
 * invalid slot, below every valid candidate (-inf included); a NaN score is
 * never selected (treated as invalid). Output order: candidates in gathered
 * position order (rank, then slot), the same on every rank and run. */
typedef struct dcptopk_pair_select_args {
    uint32_t struct_size;
    const int32_t *candidates; /* layout below                                */
    int32_t layout;            /* dcptopk_pair_layout                         */
    int64_t rows;              /* T                                           */
    int64_t rank_stride_rows;  /* rank-major: rows between ranks (T_alloc >= T); 0 = T */
    int32_t rank;              /* this rank (for the rows map)                */
    int32_t *ids_out;          /* [T, ids_out_stride >= K] or NULL            */
    int64_t ids_out_stride;    /* 0 = K                                       */
    dcptopk_rows_map rows_map; /* rows_out NULL = no physical rows            */
    void *stream;
    /* [T + 1] or NULL: the owned rows as CSR offsets, indptr[0] = 0 and
     * indptr[t + 1] = counts_out[0] + ... + counts_out[t], written on
     * `stream` after the counts (needs rows_map.rows_out; T * K < 2^31).
     * Added after `stream`: an older, smaller struct reads it as NULL. */
    int32_t *indptr_out;
} dcptopk_pair_select_args;
#define DCPTOPK_PAIR_SELECT_ARGS_INIT                                          \
    { sizeof(dcptopk_pair_select_args), NULL, 0, 0, 0, 0, NULL, 0,             \
      { NULL, NULL, 0, 0, 0, 0, NULL, 0, NULL }, NULL, NULL }

/* Local top-K ids + fp32 logits -> [T, K, 2] candidates of this rank. */
typedef struct dcptopk_pair_pack_args {
    uint32_t struct_size;
    const float *logits;       /* [T, logits_stride] fp32                     */
    int64_t logits_stride;
    const int32_t *local_ids;  /* [T, K]; < 0 = empty slot                    */
    int64_t local_ids_stride;  /* 0 = K                                       */
    const int32_t *row_starts; /* [T] or NULL: score column = local id + start */
    const int32_t *row_ends;   /* [T] or NULL: ids >= row_end are empty        */
    int64_t rows;
    int32_t rank;
    int32_t *out;              /* [T, K, 2]                                   */
    void *stream;
} dcptopk_pair_pack_args;
#define DCPTOPK_PAIR_PACK_ARGS_INIT                                            \
    { sizeof(dcptopk_pair_pack_args), NULL, 0, NULL, 0, NULL, NULL, 0, 0,      \
      NULL, NULL }

DCPTOPK_API dcptopk_result dcptopk_pair_select(
    dcptopk_context *ctx, const dcptopk_merge_config *config,
    const dcptopk_pair_select_args *args);
DCPTOPK_API dcptopk_result dcptopk_pair_pack(
    dcptopk_context *ctx, const dcptopk_merge_config *config,
    const dcptopk_pair_pack_args *args);

/* ---------------------------------------------------- the packed merge */

/* Fused local top-N + pack: bf16 logits -> packed rows [T, N + N/32]. */
typedef struct dcptopk_pack_args {
    uint32_t struct_size;
    const uint16_t *logits;    /* bf16 bits [>= T, logits_stride]             */
    int64_t logits_stride;     /* elements, multiple of 8                     */
    int64_t max_local_len;     /* S: columns considered, <= 2^17              */
    const int32_t *row_ends;   /* [T]: columns >= row_end are ignored         */
    const int32_t *local_ids;  /* pack_indices only: [T, local_ids_stride]    */
    int64_t local_ids_stride;  /* 0 = N                                       */
    int64_t rows;              /* T                                           */
    int32_t *out;              /* [T, N + N/32] int32                         */
    void *stream;
} dcptopk_pack_args;
#define DCPTOPK_PACK_ARGS_INIT                                                 \
    { sizeof(dcptopk_pack_args), NULL, 0, 0, NULL, NULL, 0, 0, NULL, NULL }

DCPTOPK_API dcptopk_result dcptopk_pack(dcptopk_context *ctx,
                                        const dcptopk_merge_config *config,
                                        const dcptopk_pack_args *args);
DCPTOPK_API dcptopk_result dcptopk_pack_indices(
    dcptopk_context *ctx, const dcptopk_merge_config *config,
    const dcptopk_pack_args *args);

/* Rescue workspace of one rank: receive slots [T_max, slots, K + K/32],
 * flags [W, T_max], sequence and saturation words [T_max], an error status.
 * Peer tables hold, for every rank r, the device address of rank r's receive
 * slots and flags as mapped on this device (peer memory or the same GPU). */
typedef struct dcptopk_workspace dcptopk_workspace;

typedef struct dcptopk_workspace_layout {
    uint32_t struct_size;
    uint64_t recv_bytes;  /* bytes of the receive slots                       */
    uint64_t flags_bytes; /* bytes of the flags                               */
} dcptopk_workspace_layout;
#define DCPTOPK_WORKSPACE_LAYOUT_INIT { sizeof(dcptopk_workspace_layout), 0, 0 }

/* The sizes a rank must allocate (in peer-shareable memory) for max_rows. */
DCPTOPK_API dcptopk_result dcptopk_workspace_layout_get(
    const dcptopk_merge_config *config, int64_t max_rows,
    dcptopk_workspace_layout *out);
/* Creates the workspace of `rank` from the peer tables (world_size entries
 * each; entry `rank` is this rank's own buffers, zeroed by this call). The
 * workspace allocates its own sequence, saturation and status words. */
DCPTOPK_API dcptopk_result dcptopk_workspace_create(
    dcptopk_context *ctx, const dcptopk_merge_config *config, int64_t max_rows,
    int32_t rank, const uint64_t *peer_recv, const uint64_t *peer_flags,
    dcptopk_workspace **out);
DCPTOPK_API void dcptopk_workspace_destroy(dcptopk_workspace *ws);
/* Device address of the saturation words [max_rows] (uint32). */
DCPTOPK_API uint64_t dcptopk_workspace_saturation(const dcptopk_workspace *ws);
/* Reads and clears the device error status after the stream finished (a
 * rescue wait that timed out gives DCPTOPK_RESCUE_TIMEOUT). Synchronises
 * `stream`, so call it outside graph capture: e.g. once per step, or when the
 * engine checks health. After a timeout and until this call, later rescues of
 * the workspace give up waiting at once (their rows keep the round-1 result),
 * and the flags and sequence words of the ranks are out of step: recreate
 * every rank's workspace. */
DCPTOPK_API dcptopk_result dcptopk_workspace_check(dcptopk_workspace *ws,
                                                   void *stream);

/* Select (+ push) on gathered rows; in exact mode followed by the rescue. */
typedef struct dcptopk_select_args {
    uint32_t struct_size;
    const int32_t *gathered;   /* [W, rank_stride_rows, N + N/32] int32       */
    int64_t rank_stride_rows;  /* 0 = T                                       */
    int64_t rows;              /* T                                           */
    int32_t rank;
    int32_t *ids_out;          /* [T, ids_out_stride >= K] or NULL            */
    int64_t ids_out_stride;    /* 0 = K                                       */
    dcptopk_rows_map rows_map;
    /* exact mode: this rank's logits, for the push of a saturated row */
    const uint16_t *logits;
    int64_t logits_stride;
    int64_t max_local_len;
    const int32_t *row_ends;
    void *stream;
    /* [T + 1] or NULL: the owned rows' CSR offsets (as
     * dcptopk_pair_select_args), after the rescue in exact mode. */
    int32_t *indptr_out;
} dcptopk_select_args;
#define DCPTOPK_SELECT_ARGS_INIT                                               \
    { sizeof(dcptopk_select_args), NULL, 0, 0, 0, NULL, 0,                     \
      { NULL, NULL, 0, 0, 0, 0, NULL, 0, NULL }, NULL, 0, 0, NULL, NULL, NULL }

/* Select and, in exact mode, push + rescue (both launched on args->stream).
 * ws may be NULL when config->exact is 0. */
DCPTOPK_API dcptopk_result dcptopk_select(dcptopk_context *ctx,
                                          const dcptopk_merge_config *config,
                                          dcptopk_workspace *ws,
                                          const dcptopk_select_args *args);

/* The hierarchical merge (docs/DISTRIBUTED.md, "Across nodes"): ranks
 * [first_rank, first_rank + L) of a node run the exact packed merge among
 * themselves (a config with world_size = L), which gives every rank of the
 * node the node's exact top K; dcptopk_node_pairs turns those ids into pair
 * candidates (fp32 score bits of the bf16 logit, global gid of the W-rank
 * merge) in the node's output order; the nodes' candidates gathered
 * node-major [D, T, K, 2] then go through dcptopk_pair_select_nodes with the
 * global pair config (world_size W, D = W / L nodes). The result is the flat
 * exact merge's, bit for bit: ids, owned rows and counts. */
typedef struct dcptopk_node_pairs_args {
    uint32_t struct_size;
    const int32_t *gathered;   /* the node merge's [L, rank_stride_rows, N + N/32] */
    int64_t rank_stride_rows;  /* 0 = T                                       */
    int64_t rows;              /* T                                           */
    const int32_t *ids;        /* [T, ids_stride]: the node merge's ids       */
    int64_t ids_stride;        /* 0 = K                                       */
    int32_t sorted;            /* 1: every rank packed with dcptopk_pack (ascending
                                  local ids); 0: with dcptopk_pack_indices     */
    int32_t first_rank;        /* global rank of the node's first rank        */
    int32_t world_size;        /* W of the whole merge, a multiple of L       */
    int32_t *pairs_out;        /* [T, K, 2] int32, 8-byte aligned              */
    void *stream;
} dcptopk_node_pairs_args;
#define DCPTOPK_NODE_PAIRS_ARGS_INIT                                           \
    { sizeof(dcptopk_node_pairs_args), NULL, 0, 0, NULL, 0, 1, 0, 0, NULL, NULL }

/* After dcptopk_select of the node config on `ws` (its saturation words and
 * receive slots), on the same stream and before the rank's next merge. */
DCPTOPK_API dcptopk_result dcptopk_node_pairs(
    dcptopk_context *ctx, const dcptopk_merge_config *node_config,
    dcptopk_workspace *ws, const dcptopk_node_pairs_args *args);
/* dcptopk_pair_select over `nodes` segments of K candidates a row (rank-major:
 * rank_stride_rows rows between two nodes' segments; row-major: [T, nodes*K,
 * 2]) of a pair config whose world_size W is the whole merge's: gids and
 * owned rows decode with W, args->rank is the global rank. nodes divides W;
 * nodes = W is dcptopk_pair_select. */
DCPTOPK_API dcptopk_result dcptopk_pair_select_nodes(
    dcptopk_context *ctx, const dcptopk_merge_config *config, int32_t nodes,
    const dcptopk_pair_select_args *args);

/* A loopback world: W virtual ranks on one GPU, each with its own workspace;
 * the all-gather is a device copy. For tests and benchmarks. */
typedef struct dcptopk_loopback dcptopk_loopback;
DCPTOPK_API dcptopk_result dcptopk_loopback_create(
    dcptopk_context *ctx, const dcptopk_merge_config *config, int64_t max_rows,
    int64_t max_local_len, dcptopk_loopback **out);
DCPTOPK_API void dcptopk_loopback_destroy(dcptopk_loopback *lb);
/* Runs the whole two-round merge for all W ranks. logits[r], ids_out[r] and
 * the rows maps are per rank (device pointers); rows_maps may be NULL. */
DCPTOPK_API dcptopk_result dcptopk_loopback_merge(
    dcptopk_loopback *lb, const uint16_t *const *logits, int64_t logits_stride,
    const int32_t *const *row_ends, int64_t rows, int32_t *const *ids_out,
    const dcptopk_rows_map *rows_maps, void *stream);
/* Device addresses of rank r's gathered buffer and saturation words. */
DCPTOPK_API uint64_t dcptopk_loopback_gathered(const dcptopk_loopback *lb,
                                               int32_t rank);
DCPTOPK_API uint64_t dcptopk_loopback_saturation(const dcptopk_loopback *lb,
                                                 int32_t rank);
DCPTOPK_API dcptopk_result dcptopk_loopback_check(dcptopk_loopback *lb,
                                                  void *stream);
/* Rank r's rescue workspace (exact configs), NULL otherwise: what
 * dcptopk_node_pairs reads after a loopback merge of a node. */
DCPTOPK_API dcptopk_workspace *dcptopk_loopback_workspace(
    const dcptopk_loopback *lb, int32_t rank);

/* ------------------------------------------------------- groups of ranks */

/* The merge across ranks (docs/DISTRIBUTED.md). A group is what one rank
 * holds: who the other ranks are, how it talks to them (an NCCL communicator,
 * a file store, or both) and which exchange path the merge takes. A group
 * workspace adds the peer memory of one merge config, and
 * dcptopk_group_merge runs a whole merge step with one call.
 *
 * Collective calls (marked so) must be made by every rank of the group, in
 * the same order, with the same config. Every wait is bounded by the group's
 * timeout: a peer that dies or stops calling gives DCPTOPK_PEER_TIMEOUT
 * (from a host wait at once; from a device wait, every output of that step
 * and of every later one is poisoned: ids -1, physical rows -1, counts 0,
 * and the first call on the group after the step finished on the device
 * returns DCPTOPK_PEER_TIMEOUT: the next dcptopk_group_merge,
 * dcptopk_group_status or dcptopk_group_check), after which every call on
 * the group gives DCPTOPK_GROUP_BROKEN until every rank destroys it and
 * creates a new one. DCPTOPK_PEER_TIMEOUT_TRAP=1 traps instead (the CUDA
 * context dies). docs/DISTRIBUTED.md, "Failure semantics". A group is not
 * thread-safe: one host thread at a time. */
typedef struct dcptopk_group dcptopk_group;

/* How the gathered rows reach every rank. */
typedef enum dcptopk_path {
    DCPTOPK_PATH_AUTO = 0,     /* a request only: the group chooses          */
    DCPTOPK_PATH_NCCL = 1,     /* ncclAllGather on the caller's stream: works
                                  everywhere (needs one GPU per rank)          */
    DCPTOPK_PATH_PUSH = 2,     /* device push into every peer's buffer inside
                                  one P2P domain: no host, graph capturable    */
    DCPTOPK_PATH_LOOPBACK = 3, /* one rank: its own rows are the gathered rows */
    DCPTOPK_PATH_STAGED = 4,   /* device copies into every peer's buffer, then
                                  a host barrier through the store: blocks the
                                  host, not capturable (tests, fallback)       */
    DCPTOPK_PATH_STORE = 5     /* device -> host -> the file store -> host ->
                                  device: needs only the store's shared
                                  folder (no NCCL, no peer memory); blocks the
                                  host, not capturable                       */
} dcptopk_path;

/* "nccl", "push", "loopback", "staged", "store", "auto"; "unknown"
 * otherwise. */
DCPTOPK_API const char *dcptopk_path_name(int32_t path);

#define DCPTOPK_GROUP_UNIQUE_ID_BYTES 128

#define DCPTOPK_GROUP_CONFIG_VERSION 1
typedef struct dcptopk_group_config {
    uint32_t struct_size;    /* sizeof(dcptopk_group_config)                  */
    uint32_t version;        /* DCPTOPK_GROUP_CONFIG_VERSION                  */
    /* This rank and the number of ranks (1..16). With nccl_comm set, -1 takes
     * them from the communicator (other values must agree with it). */
    int32_t rank;
    int32_t world_size;
    /* Bootstrap, one of (checked in this order):
     *  - nccl_comm: an engine's ncclComm_t (as void *), borrowed: used, never
     *    destroyed or aborted by dcptopk; it must outlive the group;
     *  - unique_id: DCPTOPK_GROUP_UNIQUE_ID_BYTES bytes from
     *    dcptopk_group_unique_id on one rank, distributed by the caller; the
     *    group creates (and owns) an NCCL communicator with ncclCommInitRank;
     *  - store_dir: a folder shared by the ranks (same host, or a shared file
     *    system); no NCCL at all (e.g. several processes on one GPU, which
     *    NCCL refuses). It must be private: owned by the user or root, not
     *    writable by group or others (group-writable with
     *    DCPTOPK_STORE_SHARED=1), created 0700 when missing; a sticky folder
     *    others may write (as /tmp) means its private subfolder
     *    dcptopk-<uid>. Anything else is DCPTOPK_IO_ERROR naming the path,
     *    owner and mode. Each creation is an attempt with a random id in
     *    every file name (the ranks agree on it first), so files of an
     *    earlier attempt are never read; a group removes its files when
     *    destroyed or when its creation fails (docs/DISTRIBUTED.md, "File
     *    store"). The folder must not hold files of another live group with
     *    the same store_prefix;
     *  - none of them with world_size 1: a group of one rank.
     * store_dir may be given with nccl_comm or unique_id too: the store then
     * also serves host barriers. */
    void *nccl_comm;
    const uint8_t *unique_id;
    const char *store_dir;     /* copied                                     */
    const char *store_prefix;  /* names this group's files; NULL = "dcptopk".
                                  Ranks of one live group share it; a restart
                                  may reuse it (the attempt id keeps the old
                                  files apart), two live groups in one folder
                                  may not (dcptopk_group_create_from_env adds
                                  a generation number itself).               */
    int32_t path;              /* dcptopk_path: AUTO, or a path to force
                                  (refused when it cannot work). Environment:
                                  DCPTOPK_EXCHANGE=nccl|push|staged|store     */
    /* Bound of every wait, host and device, in ms; 0 = $DCPTOPK_PEER_TIMEOUT_MS
     * or 10000 (processes time-sliced on one GPU wait 10-20 ms routinely). */
    int32_t timeout_ms;
} dcptopk_group_config;

#define DCPTOPK_GROUP_CONFIG_INIT                                              \
    { sizeof(dcptopk_group_config), DCPTOPK_GROUP_CONFIG_VERSION, -1, -1,      \
      NULL, NULL, NULL, NULL, DCPTOPK_PATH_AUTO, 0 }

/* A new NCCL unique id (ncclGetUniqueId) for dcptopk_group_config.unique_id.
 * Call on one rank and send the bytes to the others. DCPTOPK_NCCL_ERROR when
 * NCCL is absent (the message names libnccl.so.2 and the dlopen error). */
DCPTOPK_API dcptopk_result dcptopk_group_unique_id(
    uint8_t out[DCPTOPK_GROUP_UNIQUE_ID_BYTES]);

/* Collective. Creates this rank's group on ctx's device: bootstraps, learns
 * every rank's host (hostname + boot id) and device (UUID, PCI bus id),
 * decides which ranks reach each other's memory (same host, and the same
 * device or peer access), forms the P2P domains and chooses the exchange
 * path. Errors: INVALID_ARGUMENT (named field), NCCL_ERROR (with NCCL's
 * message), PEER_TIMEOUT (naming the rank that did not arrive), UNSUPPORTED
 * (a forced path that cannot work, and why). */
DCPTOPK_API dcptopk_result dcptopk_group_create(
    dcptopk_context *ctx, const dcptopk_group_config *config,
    dcptopk_group **out);
/* Not collective. Accepts NULL. A communicator the group created is
 * destroyed (ncclCommDestroy), or aborted (ncclCommAbort) when the group is
 * broken; an adopted one is left alone. The group's workspaces may be
 * destroyed before or after it (after: a merge on them is refused by name);
 * with a broken group destroy the group first: its abort ends a collective
 * stuck on a dead peer, which freeing memory would otherwise wait for. */
DCPTOPK_API void dcptopk_group_destroy(dcptopk_group *group);

/* The launcher's view of this process, from the usual variables: RANK,
 * WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (torchrun), else OMPI_COMM_WORLD_*
 * (Open MPI), else SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID. */
typedef struct dcptopk_launch_env {
    uint32_t struct_size;
    int32_t rank;
    int32_t world_size;
    int32_t local_rank;        /* -1 when the launcher does not say          */
    int32_t local_world_size;  /* -1 when the launcher does not say          */
    char source[32];           /* "torchrun", "openmpi", "slurm"              */
} dcptopk_launch_env;
#define DCPTOPK_LAUNCH_ENV_INIT                                                \
    { sizeof(dcptopk_launch_env), -1, -1, -1, -1, { 0 } }
/* NOT_FOUND when no launcher variable is set; INVALID_ARGUMENT (naming the
 * variable and its value) when one is malformed. */
DCPTOPK_API dcptopk_result dcptopk_launch_env_get(dcptopk_launch_env *out);

/* Collective. dcptopk_group_create for scripts and tests: rank and world size
 * from dcptopk_launch_env_get, a file store in `dir` (NULL =
 * $DCPTOPK_STORE_DIR), the ranks' devices exchanged through it, and, when
 * NCCL loads and every rank has its own GPU, an NCCL communicator from a
 * unique id that rank 0 writes into `dir` (write + rename; the others poll
 * within the timeout). `dir` follows store_dir's rules (private, or a sticky
 * folder such as /tmp whose private subfolder dcptopk-<uid> is used);
 * errors name `dir` or DCPTOPK_STORE_DIR. Store files are named after
 * store_prefix, the launcher's job id when there is one, and a count of the
 * groups this process created from the environment (so the ranks rebuild in
 * the same folder). `base` (may be NULL) supplies path, timeout_ms and
 * store_prefix. */
DCPTOPK_API dcptopk_result dcptopk_group_create_from_env(
    dcptopk_context *ctx, const char *dir, const dcptopk_group_config *base,
    dcptopk_group **out);

DCPTOPK_API int32_t dcptopk_group_rank(const dcptopk_group *group);
DCPTOPK_API int32_t dcptopk_group_world_size(const dcptopk_group *group);
/* The nodes an exact packed merge of this group runs over: 1 when every
 * rank is in one P2P domain (the flat merge), D > 1 when the group runs the
 * hierarchical merge over D P2P domains of W / D consecutive ranks (its
 * results are dcptopk_ref_hier_merge's), 0 when it can run neither (the
 * path's reason says why). */
DCPTOPK_API int32_t dcptopk_group_nodes(const dcptopk_group *group);
/* The exchange path the group chose (dcptopk_path) and why, e.g. "push: all
 * 4 ranks share one P2P domain (host h1, 1 device)". reason may be NULL. */
DCPTOPK_API dcptopk_result dcptopk_group_path(const dcptopk_group *group,
                                              int32_t *path, char *reason,
                                              size_t size);
/* Collective. A host barrier (store or NCCL), bounded by the timeout. */
DCPTOPK_API dcptopk_result dcptopk_group_barrier(dcptopk_group *group);
/* Synchronises `stream` and reads the device status words of every workspace
 * of the group, and NCCL's asynchronous error: a device wait that timed out
 * gives DCPTOPK_PEER_TIMEOUT naming the peer (the group is then broken), an
 * NCCL failure DCPTOPK_NCCL_ERROR. Outside graph capture (e.g. once per step,
 * or when the engine checks health). */
DCPTOPK_API dcptopk_result dcptopk_group_check(dcptopk_group *group,
                                               void *stream);
/* The cheap per-step check, for eager steps and CUDA graph replays alike:
 * no driver call, no synchronisation; it reads the host-mapped status words
 * that each step's last kernel writes on a failure. DCPTOPK_SUCCESS: no step
 * that has finished on the device failed (a step still running is not
 * covered: call it once the engine knows the step finished, e.g. after it
 * read the sampled tokens). DCPTOPK_PEER_TIMEOUT (or DCPTOPK_GROUP_BROKEN
 * for a protocol error) the first time a failure is seen, naming the peer;
 * the group is then broken and every later call gives
 * DCPTOPK_GROUP_BROKEN. Legal during stream capture. */
DCPTOPK_API dcptopk_result dcptopk_group_status(dcptopk_group *group);
/* The last error message of calls on this group. Never NULL. */
DCPTOPK_API const char *dcptopk_group_last_error(const dcptopk_group *group);

/* The peer memory and buffers of one merge config: the double-buffered
 * gathered rows [2, W, max_rows, row words] and exchange flags of every
 * rank, and for the exact packed merge the rescue workspace (receive slots
 * and flags, dcptopk_workspace_layout_get), allocated by each rank and mapped
 * into every peer of its P2P domain (CUDA IPC handles between processes,
 * plain pointers within one), exchanged once, then a barrier. */
typedef struct dcptopk_group_workspace dcptopk_group_workspace;

/* Collective. config->world_size must be the group's. Across P2P domains
 * (dcptopk_group_nodes > 1) an exact packed config runs the hierarchical
 * merge: peer memory only inside each node (domain), the node top Ks over
 * NCCL send/receive (or the store) between the ranks of equal node rank,
 * and the results of dcptopk_ref_hier_merge; UNSUPPORTED when the domains
 * are not blocks of consecutive ranks of equal size. max_rows: the most
 * rows of one call. */
DCPTOPK_API dcptopk_result dcptopk_group_workspace_create(
    dcptopk_group *group, const dcptopk_merge_config *config,
    int64_t max_rows, dcptopk_group_workspace **out);
/* Collective while its group is healthy: closes this rank's mappings of the
 * peers' memory, waits until every peer closed its own (a host barrier:
 * CUDA leaves freeing memory a peer still maps undefined), then frees this
 * rank's memory. Call it after the rank's last step finished on its stream.
 * With a broken or destroyed group it is local (no wait). Accepts NULL. */
DCPTOPK_API void dcptopk_group_workspace_destroy(dcptopk_group_workspace *gw);
/* Not collective. Compiles (or reads from the cache) and loads every kernel
 * a step of this workspace runs: the config's keys (dcptopk_warmup) and the
 * exchange's (the push kernel on the push path). Call it on every rank
 * before the first step: a step that compiles holds its peers' waits, and a
 * long compile can exceed the group's bound. progress and stats may be
 * NULL (as for dcptopk_warmup). */
DCPTOPK_API dcptopk_result dcptopk_group_warmup(
    dcptopk_group_workspace *gw, dcptopk_progress_fn progress, void *user,
    dcptopk_warmup_stats *stats);
/* Device address of this rank's saturation words [max_rows] (exact packed
 * merge), 0 otherwise. */
DCPTOPK_API uint64_t dcptopk_group_workspace_saturation(
    const dcptopk_group_workspace *gw);

/* One merge step of this rank. */
typedef struct dcptopk_group_merge_args {
    uint32_t struct_size;
    int64_t rows;                /* T <= max_rows                              */
    /* Packed merge: this rank's bf16 logits (as dcptopk_pack_args). With
     * local_ids set, those ids are packed (dcptopk_pack_indices) instead of
     * the fused local top-N. */
    const uint16_t *logits;
    int64_t logits_stride;
    int64_t max_local_len;
    const int32_t *row_ends;     /* [T]; pair merge: optional (as pair pack)  */
    const int32_t *local_ids;    /* packed: optional; pair: [T, K] for the pack */
    int64_t local_ids_stride;    /* 0 = N (packed) or K (pair)                */
    /* Pair merge: this rank's candidates [T, K, 2] (fp32 score bits, gid), or
     * NULL to pair-pack them from pair_logits + local_ids (+ row_starts,
     * row_ends) into the gathered buffer directly. */
    const int32_t *candidates;
    const float *pair_logits;
    int64_t pair_logits_stride;
    const int32_t *row_starts;
    /* Outputs, as dcptopk_select / dcptopk_pair_select. */
    int32_t *ids_out;            /* [T, ids_out_stride >= K] or NULL          */
    int64_t ids_out_stride;      /* 0 = K                                     */
    dcptopk_rows_map rows_map;
    void *stream;
    /* Packed merge: this rank's rows already packed by the caller's own
     * producer ([T, packed_stride] int32, the first N + N/32 words of a row
     * in the packed layout), sent instead of the fused local top-N. The
     * producer's contract (dcptopk_ref_check_contract): per row min(N, v)
     * words (v = the non-NaN tokens below row_end) of distinct local ids
     * below row_end, each word's score the logit's bf16 bits, no unsent
     * non-NaN token above the lowest sent one; logits and row_ends are still
     * required (a saturated rank re-reads its row for the rescue round) and
     * must not change until the step ran. Exclusive with local_ids. Across
     * P2P domains every rank of a node must pass packed rows or none. (Added
     * after `stream`: an older, smaller struct reads as packed = NULL.) */
    const int32_t *packed;
    int64_t packed_stride;       /* int32 words between rows; 0 = N + N/32   */
    /* [T + 1] or NULL: the owned rows' CSR offsets (as
     * dcptopk_pair_select_args), all 0 in a poisoned step. */
    int32_t *indptr_out;
} dcptopk_group_merge_args;
#define DCPTOPK_GROUP_MERGE_ARGS_INIT                                          \
    { sizeof(dcptopk_group_merge_args), 0, NULL, 0, 0, NULL, NULL, 0, NULL,    \
      NULL, 0, NULL, NULL, 0,                                                  \
      { NULL, NULL, 0, 0, 0, 0, NULL, 0, NULL }, NULL, NULL, 0, NULL }

/* One call per step, on args->stream, for the workspace's config kind:
 *  packed: local top-N + pack (or a copy of the caller's args->packed rows)
 *          into this rank's slot of the gathered buffer
 *          -> exchange -> select (+ push + rescue when exact);
 *  pair:   pair pack (or a copy of the caller's candidates) into this rank's
 *          slot -> exchange -> pair select.
 * No allocation; no host synchronisation except on the staged path; CUDA
 * graph capturable after one eager call (the warmup) on the NCCL and push
 * paths. Host cost: argument checks (one cuPointerGetAttributes per pointer
 * argument: host memory or another device's is INVALID_ARGUMENT naming the
 * argument) + the launches. Device waits are bounded; a step whose wait
 * gave up has poisoned outputs (every id and row -1, every count 0), and
 * the first call after it finished returns DCPTOPK_PEER_TIMEOUT (see
 * dcptopk_group_status). */
DCPTOPK_API dcptopk_result dcptopk_group_merge(
    dcptopk_group_workspace *gw, const dcptopk_group_merge_args *args);

/* ---------------------------------------------------------------- selftest */

typedef struct dcptopk_selftest_report {
    uint32_t struct_size;
    int32_t on_gpu;          /* 1: the GPU merge ran and was compared          */
    int64_t rows_checked;    /* rows compared, over all ranks                  */
    int64_t rows_rescued;    /* rows that needed the rescue round              */
    int64_t mismatches;      /* rows whose output differed from the reference */
    double gpu_ms;           /* wall time of the GPU merge (first call)        */
    char summary[512];       /* one human-readable line                        */
} dcptopk_selftest_report;
#define DCPTOPK_SELFTEST_REPORT_INIT                                           \
    { sizeof(dcptopk_selftest_report), 0, 0, 0, 0, 0.0, { 0 } }

/* Verifies a deployment: generates `rows` rows of seeded random logits per
 * rank (with a share of saturated rows), runs the whole merge of `config` on
 * the context's GPU (packed: the loopback world; pair: pack + select) and
 * compares every output bit for bit with the CPU reference. Without a device
 * (context device -1) it runs the reference alone and checks it against an
 * independent sort. Returns DCPTOPK_INTERNAL when an output differs. */
DCPTOPK_API dcptopk_result dcptopk_selftest(dcptopk_context *ctx,
                                            const dcptopk_merge_config *config,
                                            int64_t rows, uint64_t seed,
                                            dcptopk_selftest_report *out);

/* Collective: one rank's part of the distributed deployment check (what
 * `dcptopk selftest --ranks N` runs in each of its processes). Every rank
 * generates the same seeded inputs of all W ranks, with rows saturated at the
 * maximum count (min(W, (K-1)/N) ranks hold all of their local top N inside
 * the global top K), runs `steps` consecutive one-call merges
 * (dcptopk_group_merge) through a group workspace and compares its own ids,
 * physical rows, counts and saturation words bit for bit with
 * dcptopk_ref_packed_merge (dcptopk_ref_hier_merge when the group runs the
 * hierarchical merge, dcptopk_group_nodes > 1). The summary names the
 * exchange path. Returns
 * DCPTOPK_INTERNAL when an output differs. Packed configs, interleave 1. */
DCPTOPK_API dcptopk_result dcptopk_selftest_group(
    dcptopk_group *group, const dcptopk_merge_config *config, int64_t rows,
    int32_t steps, uint64_t seed, dcptopk_selftest_report *out);

/* ------------------------------------------- the CPU reference (the oracle) */

/* Everything below runs on the host, on host pointers, needs no CUDA, and is
 * the bit-exact model of the kernels. Arguments use the same structs and the
 * same validation (same codes, same messages) as the GPU calls. */

DCPTOPK_API uint32_t dcptopk_ref_ord16(uint16_t bf16_bits); /* 0 for NaN     */
DCPTOPK_API uint32_t dcptopk_ref_ord32(uint32_t f32_bits);  /* 0 for NaN     */

/* Decoded candidate of a packed row. */
typedef struct dcptopk_ref_candidate {
    uint32_t ord16;    /* 0 = empty slot                                      */
    int32_t local_id;
    int32_t global_id;
} dcptopk_ref_candidate;
/* Decodes slot j of a packed row sent by `owner`. */
DCPTOPK_API dcptopk_ref_candidate dcptopk_ref_decode(
    const int32_t *packed_row, int32_t n, int32_t j, int32_t owner,
    int32_t world_size, int32_t interleave);
/* Global id of local id l on `owner`. */
DCPTOPK_API int32_t dcptopk_ref_global_id(int32_t l, int32_t owner,
                                          int32_t world_size,
                                          int32_t interleave);

/* Local top-N + pack; and pack of given local ids (args->local_ids). */
DCPTOPK_API dcptopk_result dcptopk_ref_pack(const dcptopk_merge_config *config,
                                            const dcptopk_pack_args *args);
DCPTOPK_API dcptopk_result dcptopk_ref_pack_indices(
    const dcptopk_merge_config *config, const dcptopk_pack_args *args);
/* Round-1 select of one rank: ids/rows + saturation words (sat_out [T] may be
 * NULL; written only when config->exact). */
DCPTOPK_API dcptopk_result dcptopk_ref_select(
    const dcptopk_merge_config *config, const dcptopk_select_args *args,
    uint32_t *sat_out);
/* The push list of `rank` for row t: its local top K (same tie rule) packed,
 * K + K/32 words. */
DCPTOPK_API dcptopk_result dcptopk_ref_push_list(
    const dcptopk_merge_config *config, const uint16_t *logits_row,
    int64_t max_local_len, int32_t row_end, int32_t *out);
/* Rescue of one row: re-select from the round-1 words of the unsaturated
 * ranks with ord16 >= tau16 plus the pushed lists (push[s] = list of the s-th
 * saturated rank), into ids_row / rows (rows_map row t). */
DCPTOPK_API dcptopk_result dcptopk_ref_rescue_row(
    const dcptopk_merge_config *config, const dcptopk_select_args *args,
    int64_t t, uint32_t sat_word, const int32_t *const *push);
/* The whole two-round packed merge for W simulated ranks. logits[r] is rank
 * r's [T, logits_stride] bf16 and row_ends[r] its [T]; outputs per rank:
 * ids_out[r] [T, K] (may be NULL), rows_maps[r] (NULL = none), sat_out[r]
 * [T] (may be NULL). rescued_rows (may be NULL) counts rows with mask != 0. */
DCPTOPK_API dcptopk_result dcptopk_ref_packed_merge(
    const dcptopk_merge_config *config, const uint16_t *const *logits,
    int64_t logits_stride, int64_t max_local_len,
    const int32_t *const *row_ends, int64_t rows, int32_t *const *ids_out,
    const dcptopk_rows_map *rows_maps, uint32_t *const *sat_out,
    int64_t *rescued_rows);
/* The hierarchical merge of an exact packed config over `nodes` nodes of
 * L = W / nodes consecutive ranks (docs/CONTRACT.md, "Hierarchical merge"):
 * each node's packed merge (world_size L), its node pairs, then the pair
 * select over the nodes with the global W. Arguments and outputs as
 * dcptopk_ref_packed_merge; sat_out[r] gets rank r's node merge's words.
 * nodes = 1 is dcptopk_ref_packed_merge. */
DCPTOPK_API dcptopk_result dcptopk_ref_hier_merge(
    const dcptopk_merge_config *config, int32_t nodes,
    const uint16_t *const *logits, int64_t logits_stride,
    int64_t max_local_len, const int32_t *const *row_ends, int64_t rows,
    int32_t *const *ids_out, const dcptopk_rows_map *rows_maps,
    uint32_t *const *sat_out, int64_t *rescued_rows);
/* The pair merge. */
DCPTOPK_API dcptopk_result dcptopk_ref_pair_select(
    const dcptopk_merge_config *config, const dcptopk_pair_select_args *args);
DCPTOPK_API dcptopk_result dcptopk_ref_pair_pack(
    const dcptopk_merge_config *config, const dcptopk_pair_pack_args *args);

/* Checks packed rows produced elsewhere against the contract: count =
 * min(N, v), distinct ids below row_end, each word's score bit-equal to its
 * logit, no unsent non-NaN token above the lowest sent one. On a violation
 * returns DCPTOPK_CONTRACT_VIOLATION, *bad_row = the row, and the reason in
 * dcptopk_last_error(NULL). */
DCPTOPK_API dcptopk_result dcptopk_ref_check_contract(
    const dcptopk_merge_config *config, const int32_t *packed,
    const uint16_t *logits, int64_t logits_stride, int64_t max_local_len,
    const int32_t *row_ends, int64_t rows, int64_t *bad_row);

/* ------------------------------------------------ the compile cache file */

/* Inspection and maintenance of a cache file (what `dcptopk cache` does). A
 * cache handle is not thread-safe. */
typedef struct dcptopk_cache dcptopk_cache;

/* The default cache file: $DCPTOPK_CACHE_DIR/dcptopk.sqlite, else
 * $XDG_CACHE_HOME/dcptopk/dcptopk.sqlite, else ~/.cache/dcptopk/dcptopk.sqlite.
 * Returns the length written (like snprintf). */
DCPTOPK_API int dcptopk_cache_default_path(char *buf, size_t size);

/* Opens a cache file for inspection and maintenance. Unlike a context, it
 * never falls back: a file that is untrusted (see docs/CACHE.md), damaged,
 * of another program or version, or missing (readonly = 1) fails with
 * DCPTOPK_CACHE_ERROR (or NOT_FOUND) saying why. A file that cannot be
 * written opens read-only (dcptopk_cache_readonly). */
DCPTOPK_API dcptopk_result dcptopk_cache_open(const char *path, int readonly,
                                              dcptopk_cache **out);
/* 1 when the handle cannot write its file (opened read-only, or the file is
 * not writable); the calls that write then fail with DCPTOPK_CACHE_ERROR. */
DCPTOPK_API int dcptopk_cache_readonly(const dcptopk_cache *cache);
DCPTOPK_API void dcptopk_cache_close(dcptopk_cache *cache);
DCPTOPK_API const char *dcptopk_cache_path(const dcptopk_cache *cache);
DCPTOPK_API const char *dcptopk_cache_last_error(const dcptopk_cache *cache);

typedef struct dcptopk_cache_entry {
    char key[33];          /* XXH3-128, hex                                   */
    char kernel[32];       /* kernel name                                     */
    char fields[256];      /* "topk=2048,local_topk=384,..."                  */
    char arch[16];
    char nvrtc_version[16];
    char lib_version[16];
    int64_t cubin_bytes;
    int64_t ptx_bytes;
    int64_t source_bytes;
    double compile_ms;
    int64_t created;       /* unix seconds                                    */
    int64_t last_used;
    int64_t hits;
} dcptopk_cache_entry;

typedef struct dcptopk_cache_stats {
    uint32_t struct_size;
    int64_t entries;
    int64_t bytes;         /* cubin + ptx + source bytes                      */
    int64_t file_bytes;    /* database file size                              */
    int64_t hits;          /* sum of entries' hits                            */
    double compile_ms;     /* sum of entries' compile times                   */
    int64_t claims;        /* compiles in progress (live claims; stale ones,
                              e.g. of a dead holder, are not counted)          */
} dcptopk_cache_stats;
#define DCPTOPK_CACHE_STATS_INIT { sizeof(dcptopk_cache_stats), 0, 0, 0, 0, 0.0, 0 }

/* All entries, most recently used first. *out is malloc'd (free()). */
DCPTOPK_API dcptopk_result dcptopk_cache_list(dcptopk_cache *cache,
                                              dcptopk_cache_entry **out,
                                              size_t *count);
/* One entry by key prefix (>= 4 hex digits, must be unambiguous). */
DCPTOPK_API dcptopk_result dcptopk_cache_find(dcptopk_cache *cache,
                                              const char *key_prefix,
                                              dcptopk_cache_entry *out);
typedef enum dcptopk_blob {
    DCPTOPK_BLOB_CUBIN = 0,
    DCPTOPK_BLOB_PTX = 1,
    DCPTOPK_BLOB_SOURCE = 2
} dcptopk_blob;
/* A blob of an entry, checksum verified. *data malloc'd (free()). */
DCPTOPK_API dcptopk_result dcptopk_cache_read_blob(dcptopk_cache *cache,
                                                   const char *key_prefix,
                                                   int32_t blob, void **data,
                                                   size_t *size);
DCPTOPK_API dcptopk_result dcptopk_cache_stats_get(dcptopk_cache *cache,
                                                   dcptopk_cache_stats *out);
/* Verifies every checksum; deletes bad rows (unless readonly). *bad = count. */
DCPTOPK_API dcptopk_result dcptopk_cache_verify(dcptopk_cache *cache,
                                                int64_t *checked, int64_t *bad);
/* Least-recently-used entries are removed until the total is <= max_bytes. */
DCPTOPK_API dcptopk_result dcptopk_cache_prune(dcptopk_cache *cache,
                                               int64_t max_bytes,
                                               int64_t *removed);
DCPTOPK_API dcptopk_result dcptopk_cache_remove(dcptopk_cache *cache,
                                                const char *key_prefix);
DCPTOPK_API dcptopk_result dcptopk_cache_clear(dcptopk_cache *cache,
                                               int64_t *removed);
/* Copies every entry into a new file (created exclusively, mode 0600;
 * checksums verified). */
DCPTOPK_API dcptopk_result dcptopk_cache_export(dcptopk_cache *cache,
                                                const char *path,
                                                int64_t *count);
/* Merges the entries of a cache file (existing keys kept), verified: each
 * entry's key must be the hash of its stored fields, and compiling those
 * fields here must give the same bytes (cubins are reproducible); entries
 * larger than DCPTOPK_CACHE_IMPORT_MAX_BYTES (default 64 MiB) or failing
 * their checksum are rejected too, each with a warning. The rejected count
 * is not reported here: dcptopk_cache_import_ex gives it. */
DCPTOPK_API dcptopk_result dcptopk_cache_import(dcptopk_cache *cache,
                                                const char *path,
                                                int64_t *count);
/* Trusts the entries' keys and code (only checksums and the size limit are
 * checked), as imports did before verification: for an operator's own
 * files only. */
#define DCPTOPK_CACHE_IMPORT_TRUST 1u
/* dcptopk_cache_import with flags; *rejected = entries refused (may be
 * NULL). */
DCPTOPK_API dcptopk_result dcptopk_cache_import_ex(dcptopk_cache *cache,
                                                   const char *path,
                                                   uint32_t flags,
                                                   int64_t *count,
                                                   int64_t *rejected);

/* A compile in progress (or left behind by a process that died). */
typedef struct dcptopk_cache_claim {
    char key[33];
    int64_t pid;
    char host[64];
    int64_t started;       /* unix milliseconds                               */
    int32_t stale;         /* owner dead, too old, or dated in the future     */
} dcptopk_cache_claim;
/* Every claim, oldest first. *out is malloc'd (free()). */
DCPTOPK_API dcptopk_result dcptopk_cache_claims(dcptopk_cache *cache,
                                                dcptopk_cache_claim **out,
                                                size_t *count);
/* Deletes the stale claims. On a full disk the handle gives up the file's
 * reserve (docs/CACHE.md, Full disk) so that the delete can be written. */
DCPTOPK_API dcptopk_result dcptopk_cache_clear_stale_claims(
    dcptopk_cache *cache, int64_t *removed);

#ifdef __cplusplus
}
#endif

#endif /* DCPTOPK_H */
