/*
 * settings.h - every environment variable the project reads, in one table:
 * name, kind, default, range and one line of documentation, with typed
 * getters that parse and range-check in one place. README.md's table of
 * environment variables must list exactly these names
 * (tests/cpu/test_settings.c checks it).
 *
 * A value that does not parse or is out of range is ignored with one warning
 * naming the variable and the value, and the default is used: a typo in the
 * environment never stops a job.
 */
#ifndef DCPTOPK_SETTINGS_H
#define DCPTOPK_SETTINGS_H

#include <stdint.h>

#include "base.h"

/* Parser kinds. */
typedef enum dc_setting_kind {
    DC_SETTING_TEXT,    /* a string (path, name) used as is               */
    DC_SETTING_INT,     /* a decimal integer in [min, max]                */
    DC_SETTING_SECONDS, /* a decimal number of seconds in [min, max]      */
    DC_SETTING_BYTES,   /* an integer with an optional K/M/G/T[B|iB]
                         * suffix (powers of 1024), in [min, max]         */
    DC_SETTING_FLAG,    /* 0/1, off/on, no/yes, false/true (any case);
                         * unset = default                                */
    DC_SETTING_FOREIGN  /* owned by another program: set by a launcher or
                         * the system (the library reads it as text and
                         * checks it where it is used), or read only by
                         * the Python binding, the CLI or scripts; listed
                         * so that the table is the whole list            */
} dc_setting_kind;

/* X(id, name, kind, default, min, max, doc). `default` is the value a getter
 * returns when the variable is unset, empty or invalid (for TEXT: NULL). */
#define DC_SETTINGS(X)                                                          \
    X(CACHE_DIR, "DCPTOPK_CACHE_DIR", DC_SETTING_TEXT, 0, 0, 0,                 \
      "folder of the cache file dcptopk.sqlite (first choice)")                 \
    X(XDG_CACHE_HOME, "XDG_CACHE_HOME", DC_SETTING_FOREIGN, 0, 0, 0,            \
      "else the cache is $XDG_CACHE_HOME/dcptopk/dcptopk.sqlite")               \
    X(HOME, "HOME", DC_SETTING_FOREIGN, 0, 0, 0,                                \
      "else ~/.cache/dcptopk/dcptopk.sqlite")                                   \
    X(CACHE_MAX_BYTES, "DCPTOPK_CACHE_MAX_BYTES", DC_SETTING_BYTES, 0, 0,       \
      INT64_MAX, "size cap of the cache entries (0 = none)")                    \
    X(CACHE_CLAIM_TIMEOUT, "DCPTOPK_CACHE_CLAIM_TIMEOUT", DC_SETTING_SECONDS,   \
      30, 0, 86400, "seconds before another process's compile claim is taken") \
    X(CACHE_BUSY_MS, "DCPTOPK_CACHE_BUSY_MS", DC_SETTING_INT, 10000, 0,         \
      3600000, "SQLite busy timeout of the cache, in milliseconds")             \
    X(WARMUP_THREADS, "DCPTOPK_WARMUP_THREADS", DC_SETTING_INT, 0, 1, 64,       \
      "compile threads of warmup (0 = the online CPUs, at most 8)")             \
    X(CACHE_WAL, "DCPTOPK_CACHE_WAL", DC_SETTING_FLAG, -1, 0, 1,                \
      "force the WAL journal on or off (-1 = WAL except on network FS)")        \
    X(CACHE_SHARED, "DCPTOPK_CACHE_SHARED", DC_SETTING_FLAG, 0, 0, 1,           \
      "trust a cache folder and file writable by their group")                 \
    X(CACHE_IMPORT_MAX_BYTES, "DCPTOPK_CACHE_IMPORT_MAX_BYTES",                 \
      DC_SETTING_BYTES, (int64_t)64 << 20, 1, INT64_MAX,                        \
      "largest entry cache import accepts (default 64M)")                       \
    X(TEMPLATE_DIR, "DCPTOPK_TEMPLATE_DIR", DC_SETTING_TEXT, 0, 0, 0,           \
      "read the kernel templates from this folder, not the embedded copies")   \
    X(RESCUE_TIMEOUT_MS, "DCPTOPK_RESCUE_TIMEOUT_MS", DC_SETTING_INT, 10000, 1, \
      86400000, "bound of the rescue round's wait for a peer's push, in ms")    \
    X(DISABLE_CUDA, "DCPTOPK_DISABLE_CUDA", DC_SETTING_FLAG, 0, 0, 1,           \
      "behave as if there were no CUDA driver (compile and cache only)")        \
    X(NVRTC_PATH, "DCPTOPK_NVRTC_PATH", DC_SETTING_TEXT, 0, 0, 0,               \
      "the NVRTC to load: a libnvrtc.so.13/.12 file, or a folder holding one") \
    X(LOG, "DCPTOPK_LOG", DC_SETTING_TEXT, 0, 0, 0,                             \
      "log level: quiet, error, warn (default), info, debug")                  \
    X(CAPTURE_COMPILE, "DCPTOPK_CAPTURE_COMPILE", DC_SETTING_FLAG, 0, 0, 1,     \
      "1: a launch inside CUDA graph capture may compile a kernel that "        \
      "warmup missed (default: refused with DCPTOPK_NOT_WARMED)")              \
    X(PAIR_TWO_CTAS, "DCPTOPK_PAIR_TWO_CTAS", DC_SETTING_FLAG, -1, 0, 1,       \
      "pair rows of 16384 candidates: 1 on two 512-thread CTAs an SM, 0 on "   \
      "one 1024-thread CTA (default: by the GPU's DRAM bandwidth an SM)")      \
    X(PEER_TIMEOUT_MS, "DCPTOPK_PEER_TIMEOUT_MS", DC_SETTING_INT, 10000, 1,    \
      86400000, "bound of every wait of a group, in ms (config first)")        \
    X(PEER_TIMEOUT_TRAP, "DCPTOPK_PEER_TIMEOUT_TRAP", DC_SETTING_FLAG, 0, 0, 1, \
      "1: a group step whose device wait timed out traps (kills the context)") \
    X(EXCHANGE, "DCPTOPK_EXCHANGE", DC_SETTING_TEXT, 0, 0, 0,                   \
      "force a group's path: auto, nccl, push, staged, store or loopback")     \
    X(DOMAIN_SIZE, "DCPTOPK_DOMAIN_SIZE", DC_SETTING_INT, 0, 1, 16,             \
      "cap P2P domains at blocks of this many ranks (simulates nodes)")        \
    X(NCCL, "DCPTOPK_NCCL", DC_SETTING_FLAG, 1, 0, 1,                           \
      "0: groups from the environment never create a communicator")            \
    X(NCCL_LIBRARY, "DCPTOPK_NCCL_LIBRARY", DC_SETTING_TEXT, 0, 0, 0,           \
      "the NCCL library to dlopen (default libnccl.so.2)")                      \
    X(STORE_DIR, "DCPTOPK_STORE_DIR", DC_SETTING_TEXT, 0, 0, 0,                 \
      "store folder of a group from the environment when dir is NULL")         \
    X(STORE_SHARED, "DCPTOPK_STORE_SHARED", DC_SETTING_FLAG, 0, 0, 1,           \
      "trust a group's store folder writable by its group (not others)")       \
    X(JOB_ID, "DCPTOPK_JOB_ID", DC_SETTING_TEXT, 0, 0, 0,                       \
      "names a group's store files when the launcher gives no job id")         \
    DC_SETTINGS_LAUNCHER(X)                                                     \
    X(LIBRARY, "DCPTOPK_LIBRARY", DC_SETTING_FOREIGN, 0, 0, 0,                  \
      "Python binding: path of libdcptopk.so")                                  \
    X(PYTHON_LOG, "DCPTOPK_PYTHON_LOG", DC_SETTING_FOREIGN, 0, 0, 0,            \
      "Python binding: 0 keeps the library's own log lines on stderr")         \
    X(PROGRESS, "DCPTOPK_PROGRESS", DC_SETTING_FOREIGN, 0, 0, 0,                \
      "Python binding: 0 hides the warmup progress line on a terminal")        \
    X(OPS_DISPATCH, "DCPTOPK_OPS_DISPATCH", DC_SETTING_FOREIGN, 0, 0, 0,        \
      "Python binding: 1 always calls the registered torch op")                \
    X(DIST_BACKEND, "DCPTOPK_DIST_BACKEND", DC_SETTING_FOREIGN, 0, 0, 0,        \
      "Python binding: dcptopk (default) or torch for a torch group")          \
    X(CLI, "DCPTOPK_CLI", DC_SETTING_FOREIGN, 0, 0, 0,                          \
      "python -m dcptopk: path of the dcptopk executable")                      \
    X(TMPDIR, "TMPDIR", DC_SETTING_FOREIGN, 0, 0, 0,                            \
      "dcptopk selftest --ranks: folder of its store (default /tmp)")          \
    X(CUDA_HOME, "CUDA_HOME", DC_SETTING_FOREIGN, 0, 0, 0,                      \
      "the CUDA toolkit: NVRTC is looked for in its lib64; deps.sh")

/* The launchers' variables (torchrun, Open MPI, Slurm), read by
 * dcptopk_launch_env_get and dcptopk_group_create_from_env. A bad value is
 * an error there, not a warning: a wrong rank must not run. */
#define DC_SETTINGS_LAUNCHER(X)                                                 \
    X(RANK, "RANK", DC_SETTING_FOREIGN, 0, 0, 0,                                \
      "torchrun: this process's rank")                                          \
    X(WORLD_SIZE, "WORLD_SIZE", DC_SETTING_FOREIGN, 0, 0, 0,                    \
      "torchrun: the number of ranks")                                          \
    X(LOCAL_RANK, "LOCAL_RANK", DC_SETTING_FOREIGN, 0, 0, 0,                    \
      "torchrun: the rank on this node")                                        \
    X(LOCAL_WORLD_SIZE, "LOCAL_WORLD_SIZE", DC_SETTING_FOREIGN, 0, 0, 0,        \
      "torchrun: the number of ranks on this node")                             \
    X(TORCHELASTIC_RUN_ID, "TORCHELASTIC_RUN_ID", DC_SETTING_FOREIGN, 0, 0, 0,  \
      "torchrun: the job id (names a group's store files)")                    \
    X(OMPI_RANK, "OMPI_COMM_WORLD_RANK", DC_SETTING_FOREIGN, 0, 0, 0,           \
      "Open MPI: this process's rank")                                          \
    X(OMPI_SIZE, "OMPI_COMM_WORLD_SIZE", DC_SETTING_FOREIGN, 0, 0, 0,           \
      "Open MPI: the number of ranks")                                          \
    X(OMPI_LOCAL_RANK, "OMPI_COMM_WORLD_LOCAL_RANK", DC_SETTING_FOREIGN, 0, 0,  \
      0, "Open MPI: the rank on this node")                                     \
    X(OMPI_LOCAL_SIZE, "OMPI_COMM_WORLD_LOCAL_SIZE", DC_SETTING_FOREIGN, 0, 0,  \
      0, "Open MPI: the number of ranks on this node")                          \
    X(OMPI_JOB_ID, "OMPI_MCA_ess_base_jobid", DC_SETTING_FOREIGN, 0, 0, 0,      \
      "Open MPI: the job id (names a group's store files)")                    \
    X(SLURM_PROCID, "SLURM_PROCID", DC_SETTING_FOREIGN, 0, 0, 0,                \
      "Slurm: this process's rank")                                             \
    X(SLURM_NTASKS, "SLURM_NTASKS", DC_SETTING_FOREIGN, 0, 0, 0,                \
      "Slurm: the number of ranks")                                             \
    X(SLURM_LOCALID, "SLURM_LOCALID", DC_SETTING_FOREIGN, 0, 0, 0,              \
      "Slurm: the rank on this node")                                           \
    X(SLURM_JOB_ID, "SLURM_JOB_ID", DC_SETTING_FOREIGN, 0, 0, 0,                \
      "Slurm: the job id (names a group's store files)")

typedef enum dc_setting_id {
#define DC_SETTING_ID(id, ...) DC_SET_##id,
    DC_SETTINGS(DC_SETTING_ID)
#undef DC_SETTING_ID
    DC_SETTING_COUNT
} dc_setting_id;

typedef struct dc_setting {
    const char *name;
    dc_setting_kind kind;
    double dflt;
    double min, max;
    const char *doc;
} dc_setting;

/* The table, in DC_SETTINGS order; NULL past the end. */
DC_HIDDEN const dc_setting *dc_setting_info(dc_setting_id id);

/* TEXT and FOREIGN: the value, or NULL when unset or empty. */
DC_HIDDEN const char *dc_setting_text(dc_setting_id id);
/* INT and FLAG: the value, or the default. */
DC_HIDDEN int64_t dc_setting_int(dc_setting_id id);
/* SECONDS: the value, or the default. */
DC_HIDDEN double dc_setting_seconds(dc_setting_id id);
/* BYTES: the value, or the default. */
DC_HIDDEN int64_t dc_setting_bytes(dc_setting_id id);

/* The parsers themselves (tests): 0 and *out on success, -1 when `text` is
 * not a valid value of the setting. */
DC_HIDDEN int dc_setting_parse_int(dc_setting_id id, const char *text,
                                   int64_t *out);
DC_HIDDEN int dc_setting_parse_seconds(dc_setting_id id, const char *text,
                                       double *out);
DC_HIDDEN int dc_setting_parse_bytes(dc_setting_id id, const char *text,
                                     int64_t *out);

#endif /* DCPTOPK_SETTINGS_H */
