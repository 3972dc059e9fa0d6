/* store.c - the file store (see group_int.h): small blobs in a private
 * folder, published by rename so that a reader never sees a partial blob,
 * read by polling with a bound. It bootstraps groups that have no NCCL
 * (several processes on one GPU) and carries the launcher's NCCL unique id.
 *
 * Another local user must not be able to write into it (docs/DISTRIBUTED.md,
 * "File store"): the folder is checked to be private, files are opened
 * without following links or blocking and read only when they are regular
 * files of ours with exactly the expected size, and every name carries the
 * attempt id that the ranks agree on at open, so no attempt reads another's
 * files. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "group_int.h"
#include "trust.h"
#include "settings.h"

#define DC_STORE_MAGIC 0x32535444u /* "DTS2" */

typedef struct dc_blob_head {
    uint32_t magic;
    uint32_t pad_;
    uint64_t size;
} dc_blob_head;

/* The handshake's records (named without the attempt id, which they carry
 * or ask for). */
typedef struct dc_join_rec {
    uint64_t nonce;     /* the joining rank's, fresh per open              */
} dc_join_rec;
typedef struct dc_ack_rec {
    uint64_t nonce;     /* the join this answers                           */
    uint64_t attempt;   /* rank 0's attempt id                             */
} dc_ack_rec;

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

uint64_t dc_random64(void)
{
    uint64_t v = 0;
    uint8_t *p = (uint8_t *)&v;
    size_t got = 0;
    while (got < sizeof v) {
        ssize_t n = getrandom(p + got, sizeof v - got, 0);
        if (n > 0)
            got += (size_t)n;
        else if (n < 0 && errno != EINTR)
            break;
    }
    if (got < sizeof v) {
        /* No getrandom (old kernel, seccomp): /dev/urandom. */
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (read(fd, &v, sizeof v) != (ssize_t)sizeof v)
                v ^= (uint64_t)now_ms() * 0x9e3779b97f4a7c15ull;
            close(fd);
        }
    }
    return v ? v : 1; /* 0 means "none" */
}

/* ------------------------------------------------------------ the folder */

/* The folders above `real` (dc_trust_parents), as an error naming `arg`. */
static int parents_trusted(const dcptopk_context *ctx, const char *arg,
                           const char *real, dcptopk_result *r)
{
    char why[PATH_MAX + 128];
    if (dc_trust_parents(real, why, sizeof why) == 0)
        return 0;
    *r = dc_fail(ctx, DCPTOPK_IO_ERROR,
                 "%s = \"%s\": %s: the store is not private", arg, real, why);
    return -1;
}

/* The store folder itself (lstat of a resolved path): 1 private (or shared
 * under the opt-in), 2 a sticky folder others may write (a parent: the store
 * goes into a private subfolder), -1 refused with the error. */
static int folder_kind(const dcptopk_context *ctx, const char *arg,
                       const char *path, int shared, dcptopk_result *r)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        *r = dc_fail(ctx, DCPTOPK_IO_ERROR, "%s = \"%s\": %s", arg, path,
                     strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
        *r = dc_fail(ctx, DCPTOPK_IO_ERROR, "%s = \"%s\": not a folder%s", arg,
                     path, S_ISLNK(st.st_mode) ? " (a symbolic link)" : "");
        return -1;
    }
    const mode_t w = st.st_mode & (S_IWGRP | S_IWOTH);
    const int owner_ok = st.st_uid == geteuid() || st.st_uid == 0;
    if (w && (st.st_mode & S_ISVTX) && owner_ok)
        return 2;
    if (!owner_ok && !(shared && dc_trust_in_our_groups(st.st_gid) &&
                       !(st.st_mode & S_IWOTH))) {
        *r = dc_fail(ctx, DCPTOPK_IO_ERROR,
                     "%s = \"%s\": owned by uid %u (not you or root; mode "
                     "%04o): another user could write the store",
                     arg, path, (unsigned)st.st_uid,
                     (unsigned)(st.st_mode & 07777));
        return -1;
    }
    if ((st.st_mode & S_IWOTH) || (w && !shared)) {
        *r = dc_fail(ctx, DCPTOPK_IO_ERROR,
                     "%s = \"%s\": writable by %s and not sticky (owner uid "
                     "%u, mode %04o): another user could write the store%s",
                     arg, path, dc_trust_writers(st.st_mode),
                     (unsigned)st.st_uid,
                     (unsigned)(st.st_mode & 07777),
                     (st.st_mode & S_IWOTH)
                         ? ""
                         : "; set DCPTOPK_STORE_SHARED=1 to share a store "
                           "with your group");
        return -1;
    }
    return 1;
}

/* Resolves `dir` into s->dir: a private folder, or the private subfolder
 * dcptopk-<uid> of a sticky folder others may write (as /tmp). */
static dcptopk_result folder_open(const dcptopk_context *ctx, dc_store *s,
                                  const char *dir)
{
    const char *arg = "store_dir";
    const int shared = s->shared;
    dcptopk_result r = DCPTOPK_SUCCESS;
    if (mkdir(dir, shared ? 0770 : 0700) != 0 && errno != EEXIST)
        return dc_fail(ctx, DCPTOPK_IO_ERROR,
                       "%s = \"%s\": mkdir failed: %s", arg, dir,
                       strerror(errno));
    char real[PATH_MAX];
    if (!realpath(dir, real))
        return dc_fail(ctx, DCPTOPK_IO_ERROR, "%s = \"%s\": %s", arg, dir,
                       strerror(errno));
    int kind = folder_kind(ctx, arg, real, shared, &r);
    if (kind < 0 || parents_trusted(ctx, arg, real, &r) != 0)
        return r;
    if (kind == 2) {
        size_t n = strlen(real);
        if (n + 32 >= sizeof real)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "%s = \"%s\": too long", arg, dir);
        snprintf(real + (n > 1 ? n : 0), sizeof real - n, "/dcptopk-%u",
                 (unsigned)geteuid());
        /* Never a shared subfolder: the opt-in is for a folder made for
         * the group, not for one under /tmp. */
        if (mkdir(real, 0700) != 0 && errno != EEXIST)
            return dc_fail(ctx, DCPTOPK_IO_ERROR,
                           "%s = \"%s\": mkdir %s failed: %s", arg, dir, real,
                           strerror(errno));
        int sub = folder_kind(ctx, arg, real, 0, &r);
        if (sub < 0)
            return r;
        if (sub != 1)
            return dc_fail(ctx, DCPTOPK_IO_ERROR,
                           "%s = \"%s\": its subfolder %s is writable by "
                           "others: not private",
                           arg, dir, real);
    }
    if (strlen(real) >= sizeof s->dir - 160)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "%s = \"%.64s...\": longer than %zu bytes", arg, real,
                       sizeof s->dir - 160);
    if (access(real, W_OK | X_OK) != 0)
        return dc_fail(ctx, DCPTOPK_IO_ERROR, "%s = \"%s\": not writable: %s",
                       arg, real, strerror(errno));
    memcpy(s->dir, real, strlen(real) + 1);
    return DCPTOPK_SUCCESS;
}

/* ------------------------------------------------------------- the files */

/* `key` of this attempt ("<prefix>.<attempt>.<key>"), or without the
 * attempt id for the handshake's records. */
static int name_path(const dc_store *s, const char *key, int with_attempt,
                     char *buf, size_t size)
{
    int n = with_attempt
                ? snprintf(buf, size, "%s/%s.%016llx.%s", s->dir, s->prefix,
                           (unsigned long long)s->attempt, key)
                : snprintf(buf, size, "%s/%s.%s", s->dir, s->prefix, key);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

static dcptopk_result put_path(const dcptopk_context *ctx, const dc_store *s,
                               const char *path, const void *data,
                               size_t size)
{
    char tmp[1400];
    int fd = -1;
    /* A fresh name every time, created exclusively and never through a
     * link: names planted in the folder cannot redirect the write. */
    for (int tries = 0; tries < 8 && fd < 0; tries++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%016llx", path,
                 (unsigned long long)dc_random64());
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  s->shared ? 0640 : 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
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

dcptopk_result dc_store_put(const dcptopk_context *ctx, const dc_store *s,
                            const char *key, const void *data, size_t size)
{
    char path[1280];
    if (name_path(s, key, 1, path, sizeof path))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "store key \"%s\": the "
                       "path is too long", key);
    return put_path(ctx, s, path, data, size);
}

/* 1: read, 0: not there yet, -1: error (message in ctx). Never blocks: a
 * FIFO or device at the path is opened non-blocking and refused. */
static int try_read(const dcptopk_context *ctx, const dc_store *s,
                    const char *path, void *data, size_t size,
                    dcptopk_result *r)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        *r = dc_fail(ctx, DCPTOPK_IO_ERROR, "store: open(\"%s\") failed: %s%s",
                     path, strerror(errno),
                     errno == ELOOP ? " (a symbolic link: not followed)" : "");
        return -1;
    }
    struct stat st;
    const char *bad = NULL;
    if (fstat(fd, &st) != 0)
        bad = "cannot be examined";
    else if (!S_ISREG(st.st_mode))
        bad = "is not a regular file";
    else if (st.st_uid != geteuid() &&
             !(s->shared && dc_trust_in_our_groups(st.st_gid)))
        bad = "is owned by another user";
    else if (st.st_mode & S_IWOTH)
        bad = "is writable by others";
    if (bad) {
        close(fd);
        *r = dc_fail(ctx, DCPTOPK_IO_ERROR,
                     "store: \"%s\" %s (owner uid %u, mode %06o): not read",
                     path, bad, (unsigned)st.st_uid, (unsigned)st.st_mode);
        return -1;
    }
    if ((uint64_t)st.st_size != sizeof(dc_blob_head) + (uint64_t)size) {
        close(fd);
        *r = dc_fail(ctx, DCPTOPK_IO_ERROR,
                     "store: \"%s\" holds %llu bytes, %zu expected: a file "
                     "of another group? Use a fresh folder or another "
                     "store_prefix",
                     path,
                     (unsigned long long)(st.st_size > (off_t)sizeof(
                                                           dc_blob_head)
                                              ? (uint64_t)st.st_size -
                                                    sizeof(dc_blob_head)
                                              : 0),
                     size);
        return -1;
    }
    dc_blob_head h;
    int ok = read(fd, &h, sizeof h) == (ssize_t)sizeof h;
    if (ok && (h.magic != DC_STORE_MAGIC || h.size != size)) {
        close(fd);
        *r = dc_fail(ctx, DCPTOPK_IO_ERROR,
                     "store: \"%s\" holds %llu bytes (magic 0x%08x), %zu "
                     "expected: a file of another group? Use a fresh folder "
                     "or another store_prefix",
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

static dcptopk_result get_path(const dcptopk_context *ctx, const dc_store *s,
                               const char *path, const char *key,
                               int32_t from, void *data, size_t size,
                               int64_t timeout_ms)
{
    const int64_t t0 = now_ms();
    long nap = 20; /* us: a fast first look, then back off to 1 ms */
    for (;;) {
        dcptopk_result r = DCPTOPK_SUCCESS;
        int got = try_read(ctx, s, path, data, size, &r);
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

dcptopk_result dc_store_get(const dcptopk_context *ctx, const dc_store *s,
                            const char *key, int32_t from, void *data,
                            size_t size, int64_t timeout_ms)
{
    char path[1280];
    if (name_path(s, key, 1, path, sizeof path))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "store key \"%s\": the "
                       "path is too long", key);
    return get_path(ctx, s, path, key, from, data, size, timeout_ms);
}

/* ------------------------------------------------------- the attempt id */

/* Rank 0 picks the attempt id. Every other rank publishes a join record
 * with a fresh nonce (again while it waits) and waits for rank 0's ack that
 * names its nonce; then it publishes "hello" under the attempt id. Rank 0
 * answers every join whose nonce it has not answered yet (a stale join of
 * an old attempt gets an ack nobody reads) until every rank's hello is
 * there. All within the store's bound. */
static dcptopk_result join_rank0(const dcptopk_context *ctx, dc_store *s)
{
    uint64_t acked[DC_W_MAX] = {0};
    int done[DC_W_MAX] = {0};
    int left = s->world_size - 1;
    const int64_t t0 = now_ms();
    long nap = 20;
    while (left > 0) {
        for (int32_t p = 1; p < s->world_size; p++) {
            if (done[p])
                continue;
            char key[32], path[1280];
            dcptopk_result r = DCPTOPK_SUCCESS;
            dc_join_rec j;
            snprintf(key, sizeof key, "join.r%d", p);
            if (name_path(s, key, 0, path, sizeof path))
                return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                               "store: the path is too long");
            int got = try_read(ctx, s, path, &j, sizeof j, &r);
            if (got < 0)
                return r;
            if (got > 0 && j.nonce != acked[p]) {
                dc_ack_rec a = {j.nonce, s->attempt};
                snprintf(key, sizeof key, "ack.r%d", p);
                if (name_path(s, key, 0, path, sizeof path) ||
                    (r = put_path(ctx, s, path, &a, sizeof a)))
                    return r ? r : DCPTOPK_INVALID_ARGUMENT;
                acked[p] = j.nonce;
            }
            uint32_t one;
            snprintf(key, sizeof key, "hello.r%d", p);
            if (name_path(s, key, 1, path, sizeof path))
                return DCPTOPK_INVALID_ARGUMENT;
            if ((got = try_read(ctx, s, path, &one, sizeof one, &r)) < 0)
                return r;
            if (got > 0) {
                done[p] = 1;
                left--;
                unlink(path);
                snprintf(key, sizeof key, "ack.r%d", p);
                if (name_path(s, key, 0, path, sizeof path) == 0)
                    unlink(path);
            }
        }
        if (left == 0)
            break;
        if (now_ms() - t0 >= s->timeout_ms) {
            int32_t p = 1;
            while (p < s->world_size && done[p])
                p++;
            return dc_fail(ctx, DCPTOPK_PEER_TIMEOUT,
                           "rank 0: rank %d did not join the store (%s/%s."
                           "join.r%d) within %lld ms: is rank %d alive, with "
                           "the same store_dir and store_prefix?",
                           p, s->dir, s->prefix, p,
                           (long long)s->timeout_ms, p);
        }
        sleep_us(nap);
        if (nap < 1000)
            nap *= 2;
    }
    return DCPTOPK_SUCCESS;
}

static dcptopk_result join_other(const dcptopk_context *ctx, dc_store *s)
{
    char key[32], jpath[1280], apath[1280];
    snprintf(key, sizeof key, "join.r%d", s->rank);
    if (name_path(s, key, 0, jpath, sizeof jpath))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "store: the path is too long");
    snprintf(key, sizeof key, "ack.r%d", s->rank);
    if (name_path(s, key, 0, apath, sizeof apath))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "store: the path is too long");
    const dc_join_rec j = {dc_random64()};
    const int64_t t0 = now_ms();
    int64_t last_put = -1000000;
    long nap = 20;
    for (;;) {
        dcptopk_result r = DCPTOPK_SUCCESS;
        /* Again every 100 ms: a join removed meanwhile (an old attempt's
         * exit) is back soon. */
        if (now_ms() - last_put >= 100) {
            if ((r = put_path(ctx, s, jpath, &j, sizeof j)))
                return r;
            last_put = now_ms();
        }
        dc_ack_rec a;
        int got = try_read(ctx, s, apath, &a, sizeof a, &r);
        if (got < 0)
            return r;
        if (got > 0 && a.nonce == j.nonce && a.attempt) {
            s->attempt = a.attempt;
            unlink(jpath);
            const uint32_t one = 1;
            snprintf(key, sizeof key, "hello.r%d", s->rank);
            return dc_store_put(ctx, s, key, &one, sizeof one);
        }
        if (now_ms() - t0 >= s->timeout_ms)
            return dc_fail(ctx, DCPTOPK_PEER_TIMEOUT,
                           "rank %d: rank 0 did not answer this rank's join "
                           "(%s) within %lld ms: is rank 0 alive, with the "
                           "same store_dir and store_prefix?",
                           s->rank, apath, (long long)s->timeout_ms);
        sleep_us(nap);
        if (nap < 1000)
            nap *= 2;
    }
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
    s->shared = (int)dc_setting_int(DC_SET_STORE_SHARED);
    dcptopk_result r = folder_open(ctx, s, dir);
    if (r)
        return r;
    snprintf(s->prefix, sizeof s->prefix, "%s", prefix);
    s->rank = rank;
    s->world_size = world_size;
    s->timeout_ms = timeout_ms;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_store_join(const dcptopk_context *ctx, dc_store *s)
{
    if (s->rank == 0) {
        s->attempt = dc_random64();
        return s->world_size > 1 ? join_rank0(ctx, s) : DCPTOPK_SUCCESS;
    }
    return join_other(ctx, s);
}

/* Removes the files of this attempt: all of them (`mine_only` 0: no rank
 * reads any more), or those this rank wrote (`.r<rank>` and the handshake's
 * of this rank). Best effort. */
static void remove_attempt(const dc_store *s, int mine_only)
{
    char head[200], tail[32], tmp[40];
    int hl = snprintf(head, sizeof head, "%s.%016llx.", s->prefix,
                      (unsigned long long)s->attempt);
    int tl = snprintf(tail, sizeof tail, ".r%d", s->rank);
    snprintf(tmp, sizeof tmp, ".r%d.tmp.", s->rank);
    char mark[24];
    snprintf(mark, sizeof mark, ".%016llx.", (unsigned long long)s->attempt);
    DIR *d = opendir(s->dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        size_t len = strlen(n);
        int ours;
        if (mine_only)
            ours = strncmp(n, head, (size_t)hl) == 0 &&
                   ((len >= (size_t)tl && strcmp(n + len - tl, tail) == 0) ||
                    strstr(n, tmp) != NULL);
        else /* the group's files and its workspaces' rail stores */
            ours = strncmp(n, s->prefix, strlen(s->prefix)) == 0 &&
                   strstr(n + strlen(s->prefix), mark) != NULL;
        if (ours) {
            char path[1400];
            snprintf(path, sizeof path, "%s/%s", s->dir, n);
            unlink(path);
        }
    }
    closedir(d);
}

/* The handshake's records this rank wrote (named without the attempt). */
static void remove_handshake(const dc_store *s)
{
    char key[32], path[1280];
    for (int32_t p = s->rank > 0 ? s->rank : 1;
         p < (s->rank > 0 ? s->rank + 1 : s->world_size); p++) {
        snprintf(key, sizeof key, "%s.r%d", s->rank > 0 ? "join" : "ack", p);
        if (name_path(s, key, 0, path, sizeof path) == 0)
            unlink(path);
    }
}

void dc_store_close(dc_store *s, int failed)
{
    if (!s->dir[0])
        return;
    if (failed)
        remove_handshake(s);
    if (!s->attempt)
        return;
    if (failed) {
        remove_attempt(s, 1);
    } else {
        /* A rank's last files may still be read by a slower peer: each
         * rank says it is done, and the one that finds every rank done
         * removes the attempt's files. */
        char key[32];
        const uint32_t one = 1;
        snprintf(key, sizeof key, "bye.r%d", s->rank);
        if (dc_store_put(NULL, s, key, &one, sizeof one) == DCPTOPK_SUCCESS) {
            int all = 1;
            for (int32_t p = 0; p < s->world_size && all; p++) {
                char path[1280];
                struct stat st;
                snprintf(key, sizeof key, "bye.r%d", p);
                all = name_path(s, key, 1, path, sizeof path) == 0 &&
                      lstat(path, &st) == 0;
            }
            if (all)
                remove_attempt(s, 0);
        }
    }
    s->attempt = 0;
}

/* ---------------------------------------------------------- collectives */

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
        if (name_path(s, key, 1, path, sizeof path) == 0)
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
