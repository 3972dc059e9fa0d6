/* store.c - the file store (see group_int.h): small blobs in a shared folder,
 * published by rename so that a reader never sees a partial blob, read by
 * polling with a bound. It bootstraps groups that have no NCCL (several
 * processes on one GPU) and carries the launcher's NCCL unique id. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "group_int.h"

#define DC_STORE_MAGIC 0x31535444u /* "DTS1" */

typedef struct dc_blob_head {
    uint32_t magic;
    uint32_t pad_;
    uint64_t size;
} dc_blob_head;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int key_path(const dc_store *s, const char *key, char *buf,
                    size_t size)
{
    int n = snprintf(buf, size, "%s/%s.%s", s->dir, s->prefix, key);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

dcptopk_result dc_store_open(const dcptopk_context *ctx, dc_store *s,
                             const char *dir, const char *prefix,
                             int32_t rank, int32_t world_size,
                             int64_t timeout_ms)
{
    memset(s, 0, sizeof *s);
    if (!dir || !*dir)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "store_dir is empty: the file store needs a folder "
                       "shared by the ranks");
    if (strlen(dir) >= sizeof s->dir - 160)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "store_dir = \"%.64s...\": longer than %zu bytes", dir,
                       sizeof s->dir - 160);
    if (!prefix)
        prefix = "dcptopk";
    size_t pl = strlen(prefix);
    if (pl == 0 || pl >= sizeof s->prefix || strchr(prefix, '/'))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "store_prefix = \"%s\": must be 1..%zu characters "
                       "without '/'",
                       prefix, sizeof s->prefix - 1);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return dc_fail(ctx, DCPTOPK_IO_ERROR,
                       "store_dir = \"%s\": mkdir failed: %s", dir,
                       strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return dc_fail(ctx, DCPTOPK_IO_ERROR,
                       "store_dir = \"%s\": not a folder", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return dc_fail(ctx, DCPTOPK_IO_ERROR,
                       "store_dir = \"%s\": not writable: %s", dir,
                       strerror(errno));
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(s->prefix, sizeof s->prefix, "%s", prefix);
    s->rank = rank;
    s->world_size = world_size;
    s->timeout_ms = timeout_ms;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_store_put(const dcptopk_context *ctx, const dc_store *s,
                            const char *key, const void *data, size_t size)
{
    char path[1280], tmp[1344];
    if (key_path(s, key, path, sizeof path))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "store key \"%s\": the "
                       "path is too long", key);
    /* A name of its own per writer: two ranks never share a temporary. */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%d", path, (long)getpid(), s->rank);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0)
        return dc_fail(ctx, DCPTOPK_IO_ERROR, "store: open(\"%s\") failed: %s",
                       tmp, strerror(errno));
    dc_blob_head h = {DC_STORE_MAGIC, 0, (uint64_t)size};
    int ok = write(fd, &h, sizeof h) == (ssize_t)sizeof h;
    const char *p = data;
    size_t left = size;
    while (ok && left > 0) {
        ssize_t n = write(fd, p, left);
        if (n <= 0) {
            ok = 0;
            break;
        }
        p += n;
        left -= (size_t)n;
    }
    int saved = errno;
    if (close(fd) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        if (ok)
            saved = errno;
        unlink(tmp);
        return dc_fail(ctx, DCPTOPK_IO_ERROR,
                       "store: writing \"%s\" failed: %s", path,
                       strerror(saved));
    }
    return DCPTOPK_SUCCESS;
}

/* 1: read, 0: not there yet, -1: error (message in ctx). */
static int try_read(const dcptopk_context *ctx, const char *path, void *data,
                    size_t size, dcptopk_result *r)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        *r = dc_fail(ctx, DCPTOPK_IO_ERROR, "store: open(\"%s\") failed: %s",
                     path, strerror(errno));
        return -1;
    }
    dc_blob_head h;
    int ok = read(fd, &h, sizeof h) == (ssize_t)sizeof h;
    if (ok && (h.magic != DC_STORE_MAGIC || h.size != size)) {
        close(fd);
        *r = dc_fail(ctx, DCPTOPK_IO_ERROR,
                     "store: \"%s\" holds %llu bytes (magic 0x%08x), %zu "
                     "expected: a stale file of another group? Use a fresh "
                     "folder or another store_prefix",
                     path, (unsigned long long)h.size, h.magic, size);
        return -1;
    }
    char *p = data;
    size_t left = size;
    while (ok && left > 0) {
        ssize_t n = read(fd, p, left);
        if (n <= 0)
            ok = 0;
        else {
            p += n;
            left -= (size_t)n;
        }
    }
    close(fd);
    if (!ok) {
        *r = dc_fail(ctx, DCPTOPK_IO_ERROR, "store: \"%s\" is truncated",
                     path);
        return -1;
    }
    return 1;
}

dcptopk_result dc_store_get(const dcptopk_context *ctx, const dc_store *s,
                            const char *key, int32_t from, void *data,
                            size_t size, int64_t timeout_ms)
{
    char path[1280];
    if (key_path(s, key, path, sizeof path))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "store key \"%s\": the "
                       "path is too long", key);
    const int64_t t0 = now_ms();
    long nap = 20; /* us: a fast first look, then back off to 1 ms */
    for (;;) {
        dcptopk_result r = DCPTOPK_SUCCESS;
        int got = try_read(ctx, path, data, size, &r);
        if (got > 0)
            return DCPTOPK_SUCCESS;
        if (got < 0)
            return r;
        int64_t waited = now_ms() - t0;
        if (waited >= timeout_ms)
            return dc_fail(ctx, DCPTOPK_PEER_TIMEOUT,
                           "rank %d: rank %d did not publish \"%s\" in the "
                           "store within %lld ms (file %s): is rank %d alive "
                           "and making the same group calls?",
                           s->rank, from, key,
                           (long long)(timeout_ms < s->timeout_ms
                                           ? s->timeout_ms
                                           : timeout_ms),
                           path, from);
        sleep_us(nap);
        if (nap < 1000)
            nap *= 2;
    }
}

static dcptopk_result store_op(const dcptopk_context *ctx, dc_store *s,
                               const void *mine, size_t size, void *all)
{
    const uint64_t op = ++s->op;
    char key[64];
    snprintf(key, sizeof key, "op%llu.r%d", (unsigned long long)op, s->rank);
    dcptopk_result r = dc_store_put(ctx, s, key, mine, size);
    /* One bound for the whole operation, not one per peer. */
    const int64_t deadline = now_ms() + s->timeout_ms;
    for (int32_t p = 0; p < s->world_size && !r; p++) {
        char *dst = (char *)all + (size_t)p * size;
        if (p == s->rank) {
            memcpy(dst, mine, size);
            continue;
        }
        snprintf(key, sizeof key, "op%llu.r%d", (unsigned long long)op, p);
        int64_t left = deadline - now_ms();
        r = dc_store_get(ctx, s, key, p, dst, size, left > 0 ? left : 0);
    }
    if (r)
        return r;
    /* Every peer has published op, so each has read all of op - 1: this
     * rank's file of op - 1 is no longer needed. */
    if (op > 1) {
        char path[1280];
        snprintf(key, sizeof key, "op%llu.r%d", (unsigned long long)(op - 1),
                 s->rank);
        if (key_path(s, key, path, sizeof path) == 0)
            unlink(path);
    }
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_store_allgather(const dcptopk_context *ctx, dc_store *s,
                                  const void *mine, size_t size, void *all)
{
    return store_op(ctx, s, mine, size, all);
}

dcptopk_result dc_store_barrier(const dcptopk_context *ctx, dc_store *s)
{
    uint32_t one = 1, all[DC_W_MAX];
    return store_op(ctx, s, &one, sizeof one, all);
}
