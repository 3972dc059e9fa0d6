/*
 * cache_open.c - finding, checking and opening the cache file, with its
 * fallbacks (read-only use, else an in-memory database), moving a damaged
 * file aside, and reopening after fork().
 *
 * A cache file holds machine code that runs in the caller's GPU context, so
 * it is used only when nobody else can have written it (the trust rules
 * below, documented in docs/CACHE.md): its folder and every folder above it,
 * the file and its side files (-journal, -wal, -shm) are checked before
 * SQLite sees the path; no symbolic link is followed; a new file is created
 * exclusively. Nothing is written to a database before it is known to be a
 * dcptopk cache (application_id, user_version, tables).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache_int.h"
#include "clock.h"
#include "log.h"
#include "settings.h"
#include "trust.h"

/* At most this many moved-aside files (damaged or of another version) are
 * kept beside a cache file; older ones are deleted. */
#define DC_CACHE_KEEP_MOVED 3

const char *dc_cache_sqlite_version(void) { return sqlite3_libversion(); }

int dc_cache_sqlite_bundled(void)
{
#ifdef DC_SQLITE_BUNDLED
    return 1;
#else
    return 0;
#endif
}

static const char *const side_suffixes[] = {"-journal", "-wal", "-shm"};

/* ------------------------------------------------------------------ paths */

int dc_cache_default_path(char *buf, size_t size)
{
    const char *dir = dc_setting_text(DC_SET_CACHE_DIR);
    if (dir)
        return snprintf(buf, size, "%s/dcptopk.sqlite", dir);
    const char *xdg = dc_setting_text(DC_SET_XDG_CACHE_HOME);
    if (xdg)
        return snprintf(buf, size, "%s/dcptopk/dcptopk.sqlite", xdg);
    const char *home = dc_setting_text(DC_SET_HOME);
    if (home)
        return snprintf(buf, size, "%s/.cache/dcptopk/dcptopk.sqlite", home);
    if (buf && size)
        buf[0] = '\0';
    return -1;
}

/* The folder of `path` into dir ("." for a bare name). */
static void folder_of(const char *path, char *dir, size_t size)
{
    snprintf(dir, size, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(dir, size, ".");
}

/* mkdir -p of the folder holding `path`: 0700 (a cache holds code that gets
 * loaded), or 0770 less the umask for a shared cache. 0 or an errno. */
static int make_parent_dirs(const char *path, int shared)
{
    mode_t mode = shared ? 0770 : 0700;
    char dir[DC_CACHE_PATH_MAX];
    folder_of(path, dir, sizeof dir);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, mode) != 0 && errno != EEXIST) {
            int e = errno;
            *p = '/';
            return e;
        }
        *p = '/';
    }
    if (mkdir(dir, mode) != 0 && errno != EEXIST)
        return errno;
    struct stat st;
    if (stat(dir, &st) != 0)
        return errno;
    if (!S_ISDIR(st.st_mode))
        return ENOTDIR;
    return 0;
}

/* ------------------------------------------------------------------ trust */

static int owner_trusted(uid_t uid) { return uid == geteuid() || uid == 0; }

/* The folder holding the cache and every folder above it. The cache folder:
 * owned by us or root (shared: or by one of our groups), never writable by
 * others, and (unless shared) not by its group. A folder above it: owned by
 * us or root, and writable by group or others only when sticky (as /tmp),
 * so that nobody else can rename what lies below. 0 if trusted, else -1
 * with the reason in why. */
static int folder_trusted(const char *path, int shared, gid_t *gid, char *why,
                          size_t n)
{
    char dir[DC_CACHE_PATH_MAX], real[PATH_MAX];
    folder_of(path, dir, sizeof dir);
    if (!realpath(dir, real)) {
        dc_cache_set_err(why, n, "its folder %s cannot be resolved (%s)", dir,
                 strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(real, &st) != 0) {
        dc_cache_set_err(why, n, "folder %s: %s", real, strerror(errno));
        return -1;
    }
    *gid = st.st_gid;
    if (!owner_trusted(st.st_uid) &&
        !(shared && dc_trust_in_our_groups(st.st_gid))) {
        dc_cache_set_err(why, n,
                 "folder %s is owned by uid %u (not you or root)", real,
                 (unsigned)st.st_uid);
        return -1;
    }
    mode_t w = st.st_mode & (S_IWGRP | S_IWOTH);
    if (shared ? (st.st_mode & S_IWOTH) != 0 : w != 0) {
        dc_cache_set_err(why, n,
                 "folder %s is writable by %s (mode %04o)%s", real,
                 dc_trust_writers(st.st_mode),
                 (unsigned)(st.st_mode & 07777),
                 (st.st_mode & S_IWOTH)
                     ? "; use a private folder (mode 0700, e.g. with "
                       "DCPTOPK_CACHE_DIR): no setting allows a folder "
                       "that others can write"
                 : shared ? ""
                          : "; use a private folder (mode 0700), or set "
                            "DCPTOPK_CACHE_SHARED=1 to share a cache "
                            "with your group");
        return -1;
    }
    return dc_trust_parents(real, why, n);
}

/* One file (the cache or a side file): absent is fine; else a regular file,
 * no symbolic link, owned by us or root (shared: or by the folder's group,
 * one of ours), never writable by others and (unless shared) not by its
 * group. 0 if trusted (*exists says whether it is there, *st its lstat),
 * else -1 with the reason in why. */
static int file_trusted(const char *file, int shared, gid_t folder_gid,
                        struct stat *st, int *exists, char *why, size_t n)
{
    *exists = 0;
    if (lstat(file, st) != 0) {
        if (errno == ENOENT)
            return 0;
        dc_cache_set_err(why, n, "%s: %s", file, strerror(errno));
        return -1;
    }
    *exists = 1;
    if (S_ISLNK(st->st_mode)) {
        dc_cache_set_err(why, n, "%s is a symbolic link (not followed)", file);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        dc_cache_set_err(why, n, "%s is not a regular file", file);
        return -1;
    }
    if (!owner_trusted(st->st_uid) &&
        !(shared && st->st_gid == folder_gid &&
          dc_trust_in_our_groups(st->st_gid))) {
        dc_cache_set_err(why, n, "%s is owned by uid %u (not you or root)", file,
                 (unsigned)st->st_uid);
        return -1;
    }
    mode_t w = st->st_mode & (shared ? S_IWOTH : (S_IWGRP | S_IWOTH));
    if (w) {
        dc_cache_set_err(why, n, "%s is writable by %s (mode %04o)", file,
                 dc_trust_writers(st->st_mode),
                 (unsigned)(st->st_mode & 07777));
        return -1;
    }
    return 0;
}

/* The trust rules for c->path: its folders, the file and its side files.
 * 0 if trusted (*exists, *st about the file), else -1 with c->why set. */
static int path_trusted(dc_cache *c, struct stat *st, int *exists)
{
    gid_t gid = 0;
    char why[900];
    if (folder_trusted(c->path, c->set.shared, &gid, why, sizeof why) != 0 ||
        file_trusted(c->path, c->set.shared, gid, st, exists, why,
                     sizeof why) != 0) {
        dc_cache_set_err(c->why, sizeof c->why, "not trusted: %s", why);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        char side[DC_CACHE_PATH_MAX + 16];
        struct stat sst;
        int there = 0;
        snprintf(side, sizeof side, "%s%s", c->path, side_suffixes[i]);
        if (file_trusted(side, c->set.shared, gid, &sst, &there, why,
                         sizeof why) != 0) {
            dc_cache_set_err(c->why, sizeof c->why, "not trusted: %s", why);
            return -1;
        }
    }
    return 0;
}

void dc_cache_probe(const char *path, char *mode, size_t mode_size,
                    char *why, size_t why_size)
{
    why[0] = '\0';
    dc_cache *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(mode, mode_size, "refused");
        snprintf(why, why_size, "out of memory");
        return;
    }
    snprintf(c->path, sizeof c->path, "%s", path);
    /* The flag as an open reads it, parsed silently: a probe logs nothing
     * (an invalid value means the default, 0, there too). */
    int64_t shared = 0;
    const char *sh = dc_setting_text(DC_SET_CACHE_SHARED);
    if (sh && dc_setting_parse_int(DC_SET_CACHE_SHARED, sh, &shared) != 0)
        shared = 0;
    c->set.shared = (int)shared;
    const char *trusted = c->set.shared ? "shared" : "trusted";
    char dir[DC_CACHE_PATH_MAX];
    struct stat st;
    int exists = 0;
    folder_of(c->path, dir, sizeof dir);
    if (stat(dir, &st) != 0 && errno == ENOENT) {
        snprintf(mode, mode_size, "absent");
        snprintf(why, why_size,
                 "its folder %s does not exist yet (created, mode %s, at the "
                 "first compile)",
                 dir, c->set.shared ? "0770" : "0700");
    } else if (path_trusted(c, &st, &exists) != 0) {
        snprintf(mode, mode_size, "refused");
        snprintf(why, why_size, "%s: contexts compile into memory", c->why);
    } else if (!exists) {
        snprintf(mode, mode_size, "absent");
        snprintf(why, why_size, "created at the first compile");
    } else {
        snprintf(mode, mode_size, "%s", trusted);
        if (access(c->path, R_OK | W_OK) != 0)
            snprintf(why, why_size,
                     "not writable by this user (%s): contexts use it "
                     "read-only",
                     strerror(errno));
    }
    free(c);
}

/* Creates c->path exclusively (never through a link): 0600, or 0666 less
 * the umask for a shared cache. 0, or an errno (EEXIST: someone else made it
 * meanwhile, to be checked like any existing file). */
static int create_file(const dc_cache *c)
{
    int fd = open(c->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  c->set.shared ? 0666 : 0600);
    if (fd < 0)
        return errno;
    close(fd);
    return 0;
}

/* WAL needs shared memory between the processes of one host: it does not
 * work over network file systems ("locking protocol" on Lustre/GPFS). There
 * the default rollback journal is used. DCPTOPK_CACHE_WAL=0/1 overrides. */
static int wal_allowed(const dc_cache *c, const char *path)
{
    if (c->set.wal >= 0)
        return c->set.wal;
    char dir[DC_CACHE_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    else if (slash)
        dir[1] = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    struct statfs fs;
    if (statfs(dir, &fs) != 0)
        return 1;
    switch ((unsigned long)fs.f_type) {
    case 0x6969UL:     /* NFS       */
    case 0x517BUL:     /* SMB       */
    case 0xFF534D42UL: /* CIFS      */
    case 0xFE534D42UL: /* SMB2      */
    case 0x0BD00BD0UL: /* Lustre    */
    case 0x47504653UL: /* GPFS      */
    case 0x00C36400UL: /* Ceph      */
    case 0x01021997UL: /* 9p        */
    case 0x6B414653UL: /* AFS       */
        return 0;
    default:
        return 1;
    }
}

/* "file:<percent-encoded path>?mode=ro&immutable=1". */
static void immutable_uri(const char *path, char *out, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    n += (size_t)snprintf(out, size, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p && n + 4 < size;
         p++) {
        unsigned char ch = *p;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
            (ch >= '0' && ch <= '9') || ch == '/' || ch == '-' || ch == '_' ||
            ch == '.' || ch == '~') {
            out[n++] = (char)ch;
        } else {
            out[n++] = '%';
            out[n++] = hex[ch >> 4];
            out[n++] = hex[ch & 15];
        }
    }
    out[n < size ? n : size - 1] = '\0';
    snprintf(out + strlen(out), size - strlen(out), "?mode=ro&immutable=1");
}

/* The busy handler of every connection: retries a lock every 0.25, 0.5,
 * 1, then 2 ms until c->busy_limit_ms have passed. sqlite3_busy_timeout()
 * sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, then 100 ms per retry, and
 * SQLite's locks are not queued: under contention (processes and warmup
 * threads storing entries, counting hits) a writer that has backed off to
 * 100 ms steps can keep losing the lock to connections that retry sooner,
 * and a delayed store delays every process waiting for that entry. */
static int busy_wait(void *arg, int count)
{
    dc_cache *c = arg;
    double now = dc_now_ms();
    if (count == 0)
        c->busy_since_ms = now;
    double left = (double)c->busy_limit_ms - (now - c->busy_since_ms);
    if (left <= 0.0)
        return 0;
    long us = count < 3 ? 250L << count : 2000L;
    if ((double)us > left * 1000.0)
        us = (long)(left * 1000.0) + 1;
    dc_cache_sleep_us(us);
    return 1;
}

/* ------------------------------------------------------------------- open */

static int open_db(dc_cache *c, const char *name, int flags)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(name, &db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_close(db);
        c->db = NULL;
        return rc;
    }
    sqlite3_extended_result_codes(db, 1);
    c->busy_limit_ms = c->set.busy_ms;
    sqlite3_busy_handler(db, busy_wait, c);
    c->db = db;
    return SQLITE_OK;
}

static void close_db(dc_cache *c)
{
    sqlite3_close(c->db);
    c->db = NULL;
    c->wal = 0;
    c->immutable = 0;
}

static int open_memory(dc_cache *c)
{
    int rc =
        open_db(c, ":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    if (rc == SQLITE_OK)
        rc = dc_cache_create_schema(c->db);
    c->memory = 1;
    c->readonly = 0;
    return rc;
}

/* The fallback when the file cannot serve (c->why says why): a private
 * in-memory database, with one warning. A maintenance handle (strict)
 * gets no database: dc_cache_open reports c->why instead. When even memory
 * fails, c->db stays NULL; dc_cache_open reports it (after fork() the
 * handle just stays unusable). */
static void use_memory(dc_cache *c)
{
    close_db(c);
    if (c->strict)
        return;
    dc_log_warn("cache %s: %s: running uncached (in memory)", c->path,
                c->why);
    if (open_memory(c) != SQLITE_OK)
        close_db(c);
}

static int same_file(const char *path, dev_t dev, ino_t ino)
{
    struct stat st;
    return lstat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

/* ----------------------------------------------------------- moving aside */

typedef struct moved_file {
    char name[NAME_MAX + 1];
    long long t;
    int seq;
} moved_file;

static int moved_newest_first(const void *a, const void *b)
{
    const moved_file *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? 1 : -1;
    return y->seq - x->seq;
}

/* Deletes all but the DC_CACHE_KEEP_MOVED newest "<name>.corrupt-*" and
 * "<name>.old-*" files beside `path` (our regular files only). */
static void trim_moved_aside(const char *path)
{
    char dir[DC_CACHE_PATH_MAX];
    folder_of(path, dir, sizeof dir);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t nb = strlen(base);
    DIR *d = opendir(dir);
    if (!d)
        return;
    moved_file *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *s = e->d_name;
        if (strncmp(s, base, nb) != 0 || s[nb] != '.')
            continue;
        const char *tag = s + nb + 1, *num = NULL;
        if (strncmp(tag, "corrupt-", 8) == 0)
            num = tag + 8;
        else if (strncmp(tag, "old-", 4) == 0)
            num = tag + 4;
        if (!num)
            continue;
        char *end = NULL;
        long long t = strtoll(num, &end, 10);
        int seq = 0;
        if (end == num)
            continue;
        if (*end == '-') {
            char *end2 = NULL;
            seq = (int)strtol(end + 1, &end2, 10);
            end = end2;
        }
        if (*end != '\0') /* a side file: goes with its main file */
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            moved_file *nv = realloc(v, ncap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
            cap = ncap;
        }
        snprintf(v[n].name, sizeof v[n].name, "%s", s);
        v[n].t = t;
        v[n].seq = seq;
        n++;
    }
    closedir(d);
    if (n > DC_CACHE_KEEP_MOVED)
        qsort(v, n, sizeof *v, moved_newest_first);
    for (size_t i = DC_CACHE_KEEP_MOVED; i < n; i++) {
        char p[DC_CACHE_PATH_MAX + NAME_MAX + 16];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, v[i].name);
        if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        unlink(p);
        for (int k = 0; k < 3; k++) {
            char side[sizeof p + 16];
            snprintf(side, sizeof side, "%s%s", p, side_suffixes[k]);
            unlink(side);
        }
    }
    free(v);
}

/* Moves the file at `path` (and its side files, which must never be
 * replayed onto a new file) aside as "<path>.<tag>-<unix time>", but only
 * if `path` still names the file found bad (dev, ino). Processes that found
 * the same file bad take turns under an flock of it: the first moves it and
 * starts a new file; the others then find another file at the path and
 * leave it alone. Returns 0 (moved), ESTALE (the path names another file
 * now: nothing moved) or an errno. */
static int move_aside_same(const char *path, const char *tag, dev_t dev,
                           ino_t ino, char *moved, size_t moved_size)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? ESTALE : errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_dev != dev || st.st_ino != ino) {
        close(fd);
        return ESTALE;
    }
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    int e = 0;
    if (!same_file(path, dev, ino)) {
        e = ESTALE;
    } else {
        long long t = (long long)time(NULL);
        snprintf(moved, moved_size, "%s.%s-%lld", path, tag, t);
        struct stat ex;
        for (int i = 1; lstat(moved, &ex) == 0 && i < 1000; i++)
            snprintf(moved, moved_size, "%s.%s-%lld-%d", path, tag, t, i);
        /* The side files first, while the path still names the bad file:
         * once it is gone, a peer may start a new file at the path, and
         * its journal must not be taken away. */
        for (int i = 0; i < 3; i++) {
            char a[DC_CACHE_PATH_MAX + 16], b[DC_CACHE_PATH_MAX + 96];
            snprintf(a, sizeof a, "%s%s", path, side_suffixes[i]);
            snprintf(b, sizeof b, "%s%s", moved, side_suffixes[i]);
            if (lstat(a, &ex) == 0 && rename(a, b) != 0)
                unlink(a);
        }
        if (rename(path, moved) != 0)
            e = errno;
    }
    flock(fd, LOCK_UN);
    close(fd);
    if (e == 0)
        trim_moved_aside(path);
    return e;
}

/* ----------------------------------------------------------- read-only */

/* One read-only open of `name` into c->db; *kind says what it holds and,
 * when it is ours, a first real read is done: a WAL file may open and fail
 * only there. */
static int open_readonly_probe(dc_cache *c, const char *name, int flags,
                               dc_cache_kind *kind)
{
    int rc = open_db(c, name, flags | SQLITE_OPEN_NOFOLLOW);
    if (rc == SQLITE_OK)
        rc = dc_cache_classify(c->db, kind);
    if (rc == SQLITE_OK && *kind == DC_KIND_OURS) {
        int64_t n = 0;
        rc = dc_cache_read_int(c->db, "SELECT count(*) FROM entries", &n);
    }
    return rc;
}

/* Opens an existing (already checked) file without writing it: read-only,
 * else immutable (a WAL file whose -shm cannot be created). On success with
 * *kind == DC_KIND_OURS, c->db is open; otherwise it is closed. */
static int open_readonly_file(dc_cache *c, dc_cache_kind *kind)
{
    *kind = DC_KIND_FOREIGN;
    int rc = open_readonly_probe(c, c->path, SQLITE_OPEN_READONLY, kind);
    if (rc != SQLITE_OK && !dc_cache_is_corrupt_rc(rc)) {
        close_db(c);
        char uri[DC_CACHE_PATH_MAX * 3 + 64];
        immutable_uri(c->path, uri, sizeof uri);
        rc = open_readonly_probe(c, uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                                 kind);
        if (rc == SQLITE_OK)
            c->immutable = 1;
    }
    if (rc != SQLITE_OK || *kind != DC_KIND_OURS)
        close_db(c);
    c->readonly = 1;
    return rc;
}

static const char *kind_text(dc_cache_kind kind)
{
    switch (kind) {
    case DC_KIND_EMPTY:
        return "is empty";
    case DC_KIND_OLD:
        return "is a dcptopk cache of another file version";
    default:
        return "is not a dcptopk cache (another program's database?); left "
               "untouched";
    }
}

/* Read-only use of c->path (checked, existing) or, failing that, memory.
 * The caller has put why the file cannot be written in c->why. */
static void fall_back_readonly(dc_cache *c)
{
    struct stat st;
    int exists = 0;
    if (path_trusted(c, &st, &exists) != 0 || !exists) {
        use_memory(c);
        return;
    }
    dc_cache_kind kind;
    int rc = open_readonly_file(c, &kind);
    if (rc == SQLITE_OK && kind == DC_KIND_OURS) {
        c->dev = st.st_dev;
        c->ino = st.st_ino;
        if (!c->strict)
            dc_log_warn("cache %s: %s: using it read-only (new kernels are "
                        "compiled but not stored)",
                        c->path, c->why);
        return;
    }
    size_t n = strlen(c->why);
    if (rc == SQLITE_OK)
        snprintf(c->why + n, sizeof c->why - n, ", and it %s",
                 kind_text(kind));
    else
        snprintf(c->why + n, sizeof c->why - n,
                 ", and it cannot be read (SQLite error %d: %s)", rc,
                 sqlite3_errstr(rc));
    use_memory(c);
}

static int is_readonly_rc(int rc)
{
    int p = rc & 0xff;
    return p == SQLITE_READONLY || p == SQLITE_CANTOPEN || p == SQLITE_PERM ||
           p == SQLITE_AUTH || p == SQLITE_IOERR;
}

/* WAL where the file system allows it. Processes creating the file at once:
 * the switch can fail SQLITE_BUSY at once, without the busy handler (it
 * needs the exclusive lock while others read the header). Retried, or this
 * connection would run synchronous=FULL and fsync on every commit. Returns
 * a damaged or read-only file's code, else SQLITE_OK. */
static int set_journal(dc_cache *c)
{
    if (wal_allowed(c, c->path)) {
        double t0 = dc_now_ms();
        int wrc;
        for (;;) {
            sqlite3_stmt *st = NULL;
            wrc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode=WAL", -1, &st,
                                     NULL);
            if (wrc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
                const unsigned char *m = sqlite3_column_text(st, 0);
                c->wal = m && strcmp((const char *)m, "wal") == 0;
            } else {
                wrc = sqlite3_errcode(c->db);
            }
            sqlite3_finalize(st);
            if ((wrc & 0xff) != SQLITE_BUSY ||
                dc_now_ms() - t0 >= (double)c->set.busy_ms)
                break;
            dc_cache_sleep_us(500);
        }
        if (dc_cache_is_corrupt_rc(wrc) || is_readonly_rc(wrc))
            return wrc;
    }
    /* In WAL, NORMAL is durable across application crashes and keeps
     * commits free of fsync. */
    sqlite3_exec(c->db,
                 c->wal ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL",
                 NULL, NULL, NULL);
    return SQLITE_OK;
}

/* Moves a bad file aside (c->why already says what is wrong with it);
 * returns 1 to open the path again, 0 when done (fell back). */
static int move_bad_file(dc_cache *c, const char *tag, dev_t dev, ino_t ino)
{
    if (c->strict) {
        size_t n = strlen(c->why);
        snprintf(c->why + n, sizeof c->why - n,
                 "; left as it is (the next warmup moves it aside)");
        use_memory(c);
        return 0;
    }
    char moved[DC_CACHE_PATH_MAX + 64];
    int me = move_aside_same(c->path, tag, dev, ino, moved, sizeof moved);
    if (me == 0) {
        dc_log_warn("cache %s: %s: moved it to %s; starting a new cache",
                    c->path, c->why, moved);
        c->why[0] = '\0';
        return 1;
    }
    if (me == ESTALE) { /* another process replaced it already */
        c->why[0] = '\0';
        return 1;
    }
    size_t n = strlen(c->why);
    snprintf(c->why + n, sizeof c->why - n, ", and it cannot be moved aside (%s)",
             strerror(me));
    use_memory(c);
    return 0;
}

/* Read-write open of c->path, through the fallbacks (each warned once). */
static void open_readwrite(dc_cache *c)
{
    int e = make_parent_dirs(c->path, c->set.shared);
    if (e) {
        dc_cache_set_err(c->why, sizeof c->why, "cannot create its folder (%s)",
                 strerror(e));
        fall_back_readonly(c);
        return;
    }
    for (int attempt = 0; attempt < 16; attempt++) {
        struct stat st;
        int exists = 0;
        if (path_trusted(c, &st, &exists) != 0) {
            use_memory(c);
            return;
        }
        if (!exists) {
            int ce = create_file(c);
            if (ce == EEXIST)
                continue; /* made meanwhile: check it as any file */
            if (ce || lstat(c->path, &st) != 0) {
                dc_cache_set_err(c->why, sizeof c->why, "cannot be created (%s)",
                         strerror(ce ? ce : errno));
                use_memory(c);
                return;
            }
        }
        int rc = open_db(c, c->path,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW);
        if (rc == SQLITE_OK && sqlite3_db_readonly(c->db, "main") == 1)
            rc = SQLITE_READONLY;
        dc_cache_kind kind = DC_KIND_FOREIGN;
        /* Reads only, until the file is known to be ours: the first read
         * also tells a garbage file (SQLITE_NOTADB). */
        if (rc == SQLITE_OK)
            rc = dc_cache_classify(c->db, &kind);
        if (!same_file(c->path, st.st_dev, st.st_ino)) {
            /* A peer moved a bad file aside and started a new one while
             * this open was under way (SQLite then says READONLY_DBMOVED
             * or CANTOPEN): look again at what the path names now. */
            close_db(c);
            continue;
        }
        if (rc == SQLITE_OK && kind == DC_KIND_FOREIGN) {
            dc_cache_set_err(c->why, sizeof c->why, "%s", kind_text(kind));
            use_memory(c);
            return;
        }
        if (rc == SQLITE_OK && kind == DC_KIND_OLD) {
            close_db(c);
            dc_cache_set_err(c->why, sizeof c->why, "%s (this one reads version %d)",
                     kind_text(kind), DC_CACHE_FILE_VERSION);
            if (move_bad_file(c, "old", st.st_dev, st.st_ino))
                continue;
            return;
        }
        if (rc == SQLITE_OK)
            rc = dc_cache_check_schema(c->db, 1, &kind);
        if (rc == SQLITE_OK)
            rc = set_journal(c);
        if (rc == SQLITE_OK && kind == DC_KIND_OURS) {
            c->dev = st.st_dev;
            c->ino = st.st_ino;
            c->readonly = 0;
            return;
        }
        close_db(c);
        if (!same_file(c->path, st.st_dev, st.st_ino))
            continue; /* replaced meanwhile, as above */
        if (rc == SQLITE_OK) { /* classified anew under the lock */
            dc_cache_set_err(c->why, sizeof c->why, "%s", kind_text(kind));
            use_memory(c);
            return;
        }
        if (dc_cache_is_corrupt_rc(rc)) {
            dc_cache_set_err(c->why, sizeof c->why, "damaged (SQLite error %d: %s)",
                     rc, sqlite3_errstr(rc));
            if (move_bad_file(c, "corrupt", st.st_dev, st.st_ino))
                continue;
            return;
        }
        if (is_readonly_rc(rc)) {
            dc_cache_set_err(c->why, sizeof c->why,
                     "cannot be written (SQLite error %d: %s)", rc,
                     sqlite3_errstr(rc));
            fall_back_readonly(c);
            return;
        }
        dc_cache_set_err(c->why, sizeof c->why,
                 "cannot be opened (SQLite error %d: %s)", rc,
                 sqlite3_errstr(rc));
        use_memory(c);
        return;
    }
    dc_cache_set_err(c->why, sizeof c->why, "keeps changing while being opened");
    use_memory(c);
}

/* Read-only open of c->path (RO mode). */
static void open_readonly_mode(dc_cache *c)
{
    struct stat st;
    int exists = 0;
    c->readonly = 1;
    if (path_trusted(c, &st, &exists) != 0) {
        use_memory(c);
    } else if (!exists) {
        dc_cache_set_err(c->why, sizeof c->why,
                 "does not exist and the cache is read-only");
        use_memory(c);
    } else {
        dc_cache_kind kind;
        int rc = open_readonly_file(c, &kind);
        if (rc == SQLITE_OK && kind == DC_KIND_OURS) {
            c->dev = st.st_dev;
            c->ino = st.st_ino;
        } else {
            if (rc == SQLITE_OK)
                dc_cache_set_err(c->why, sizeof c->why, "%s", kind_text(kind));
            else
                dc_cache_set_err(c->why, sizeof c->why,
                         "cannot be read (SQLite error %d: %s)%s", rc,
                         sqlite3_errstr(rc),
                         dc_cache_is_corrupt_rc(rc) ? ": damaged" : "");
            use_memory(c);
        }
    }
    c->readonly = 1;
}

dcptopk_result dc_cache_open(const char *path, dc_cache_open_mode mode,
                             dc_cache **out, char *err, size_t err_size)
{
    if (!out) {
        dc_cache_set_err(err, err_size, "out = NULL: need somewhere to put "
                                        "the cache handle");
        return DCPTOPK_INVALID_ARGUMENT;
    }
    *out = NULL;
    int strict = (mode & DC_CACHE_STRICT) != 0;
    dc_cache_open_mode base = (dc_cache_open_mode)(mode & ~DC_CACHE_STRICT);
    if (base != DC_CACHE_RW && base != DC_CACHE_RO &&
        base != DC_CACHE_MEMORY) {
        dc_cache_set_err(err, err_size,
                         "mode = %d: expected DC_CACHE_RW (0), DC_CACHE_RO (1) "
                         "or DC_CACHE_MEMORY (2), optionally | "
                         "DC_CACHE_STRICT",
                         (int)mode);
        return DCPTOPK_INVALID_ARGUMENT;
    }
    if (path && (!*path || strlen(path) >= DC_CACHE_PATH_MAX)) {
        dc_cache_set_err(err, err_size,
                         "path = \"%.64s%s\": expected a file name of 1 to %d "
                         "bytes",
                         path, strlen(path) > 64 ? "..." : "",
                         DC_CACHE_PATH_MAX - 1);
        return DCPTOPK_INVALID_ARGUMENT;
    }
    if (sqlite3_threadsafe() == 0) {
        dc_cache_set_err(err, err_size, "the linked SQLite %s was built "
                                        "without thread support",
                         sqlite3_libversion());
        return DCPTOPK_CACHE_ERROR;
    }
    dc_cache *c = calloc(1, sizeof *c);
    if (!c) {
        dc_cache_set_err(err, err_size, "out of memory opening the cache");
        return DCPTOPK_OUT_OF_MEMORY;
    }
    dc_cache_settings_load(&c->set);
    c->mode = base;
    c->strict = strict;
    c->pid = getpid();

    if (base == DC_CACHE_MEMORY) {
        snprintf(c->path, sizeof c->path, ":memory:");
        if (open_memory(c) != SQLITE_OK) {
            dcptopk_result r = dc_cache_sql_fail(
                c->db, c->db ? sqlite3_errcode(c->db) : SQLITE_NOMEM, c->path,
                "creating an in-memory cache", err, err_size);
            dc_cache_close(c);
            return r;
        }
        *out = c;
        return DCPTOPK_SUCCESS;
    }

    if (path) {
        snprintf(c->path, sizeof c->path, "%s", path);
    } else {
        int n = dc_cache_default_path(c->path, sizeof c->path);
        if (n < 0 || (size_t)n >= sizeof c->path) {
            dc_cache_set_err(c->why, sizeof c->why,
                     "no cache folder (set DCPTOPK_CACHE_DIR, XDG_CACHE_HOME "
                     "or HOME%s)",
                     n < 0 ? "" : "; the default path is too long");
            snprintf(c->path, sizeof c->path, ":memory:");
            use_memory(c);
            goto done;
        }
    }
    if (base == DC_CACHE_RO)
        open_readonly_mode(c);
    else
        open_readwrite(c);
    if (c->db && !c->memory && !c->readonly)
        dc_cache_make_reserve(c);
done:
    if (!c->db) {
        dcptopk_result r = DCPTOPK_OUT_OF_MEMORY;
        if (strict && c->why[0]) {
            dc_cache_set_err(err, err_size, "cache %s: %s", c->path, c->why);
            r = DCPTOPK_CACHE_ERROR;
        } else {
            dc_cache_set_err(err, err_size, "cache %s: cannot open even an "
                                            "in-memory database (out of "
                                            "memory?)",
                             c->path);
        }
        dc_cache_close(c);
        return r;
    }
    *out = c;
    return DCPTOPK_SUCCESS;
}

/* ------------------------------------------------------------- reserve */

/* "<cache>-reserve": DC_CACHE_RESERVE_BYTES of zeros that a handle deletes
 * when a claim's release (or clearing stale claims) fails with SQLITE_FULL.
 * Deleting a row needs journal or WAL space; on a full disk that space is
 * taken back from here, so a claim never outlives its compile and peers do
 * not wait for a store that cannot happen. Never read; created exclusively
 * and never through a link. */
#define DC_CACHE_RESERVE_BYTES (256 * 1024)

static void reserve_path(const dc_cache *c, char *out, size_t size)
{
    snprintf(out, size, "%s-reserve", c->path);
}

void dc_cache_make_reserve(dc_cache *c)
{
    char p[DC_CACHE_PATH_MAX + 16];
    reserve_path(c, p, sizeof p);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0600);
    if (fd < 0)
        return; /* there already (or the folder is full: nothing to keep) */
    static const char zeros[16384];
    size_t done = 0;
    while (done < DC_CACHE_RESERVE_BYTES) {
        ssize_t w = write(fd, zeros, sizeof zeros);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            break;
        }
        done += (size_t)w;
    }
    /* Data on disk, not a hole: tmpfs and most file systems allocate on
     * write. A short reserve (a disk already full) is removed, so that the
     * next open tries again. */
    close(fd);
    if (done < DC_CACHE_RESERVE_BYTES)
        unlink(p);
}

int dc_cache_free_reserve(dc_cache *c)
{
    char p[DC_CACHE_PATH_MAX + 16];
    reserve_path(c, p, sizeof p);
    struct stat st;
    /* Only our own regular file (unlink never follows a link, but the
     * check keeps the rule: nothing else's is touched). */
    if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode) ||
        !owner_trusted(st.st_uid))
        return 0;
    return unlink(p) == 0;
}

void dc_cache_after_fork(dc_cache *c)
{
    if (!c || c->pid == getpid())
        return;
    c->pid = getpid();
    /* An in-memory database is private memory: the child's copy is its
     * own. A file connection is abandoned (leaked on purpose), and so is
     * the spill database's copy, which the child may keep using. */
    if (c->memory)
        return;
    c->db = NULL;
    c->wal = c->immutable = 0;
    if (c->mode == DC_CACHE_RO)
        open_readonly_mode(c);
    else if (c->readonly)
        fall_back_readonly(c);
    else
        open_readwrite(c);
}

void dc_cache_close(dc_cache *c)
{
    if (!c)
        return;
    /* A handle inherited through fork() is freed without touching the
     * parent's connection. */
    if (c->pid == getpid()) {
        if (c->db)
            sqlite3_close_v2(c->db);
        if (c->spill)
            sqlite3_close_v2(c->spill);
    }
    free(c);
}

const char *dc_cache_path(const dc_cache *c) { return c ? c->path : ""; }
int dc_cache_is_memory(const dc_cache *c) { return c ? c->memory : 0; }
int dc_cache_is_readonly(const dc_cache *c) { return c ? c->readonly : 0; }
const char *dc_cache_why(const dc_cache *c) { return c ? c->why : ""; }

int dc_cache_test_set_max_pages(dc_cache *c, int64_t pages)
{
    if (!c || !c->db)
        return SQLITE_MISUSE;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count=%lld", (long long)pages);
    return sqlite3_exec(c->db, sql, NULL, NULL, NULL);
}

int dc_cache_recover_corrupt(dc_cache *c, int rc)
{
    if (c->memory || c->readonly || c->recovered || c->strict)
        return 0;
    c->recovered = 1;
    sqlite3_close_v2(c->db);
    c->db = NULL;
    c->wal = 0;
    dc_cache_set_err(c->why, sizeof c->why, "damaged (SQLite error %d: %s)", rc,
             sqlite3_errstr(rc));
    if (move_bad_file(c, "corrupt", c->dev, c->ino))
        open_readwrite(c);
    return c->db != NULL;
}
