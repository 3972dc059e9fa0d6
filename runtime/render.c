/* render.c - the renderer: a compile key -> the CUDA source NVRTC compiles
 * (a prelude of #defines for exactly the kernel's key fields, then the
 * template), the headers it includes, and the cache key that covers all of
 * it (and nothing else: a header no template of a kernel includes is not in
 * its key).
 *
 * Templates and headers come from the copies embedded at build time
 * (dc_embedded_files), or from $DCPTOPK_TEMPLATE_DIR when it is set (a flat
 * folder or a copy of kernels/; headers it lacks come from the embedded
 * copies), so a kernel can be edited without rebuilding the library. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nvrtc_table.h"
#include "rt.h"
#include "settings.h"
#include "templates_embed.h"

dc_hash dc_unit_hash(const dc_hash_input *in)
{
    /* Every field is length-prefixed by dc_hasher, so the order below and
     * the names are the whole format. Counts come before lists so that two
     * lists can never be confused with one longer list. */
    dc_hasher *h = dc_hasher_new();
    dc_hash out = {0, 0};
    if (!h)
        return out;
    dc_hasher_i64(h, "schema", DC_CACHE_SCHEMA_VERSION);
    dc_hasher_str(h, "kernel", in->kernel);
    dc_hasher_str(h, "entry", in->entry);
    dc_hasher_bytes(h, "template", in->template_text, in->template_size);
    dc_hasher_i64(h, "header_count", (int64_t)in->header_count);
    for (size_t i = 0; i < in->header_count; i++) {
        dc_hasher_str(h, "header_name", in->headers[i].name);
        dc_hasher_bytes(h, "header", in->headers[i].data,
                        in->headers[i].size);
    }
    dc_hasher_str(h, "prelude", in->prelude);
    dc_hasher_i64(h, "option_count", (int64_t)in->option_count);
    for (size_t i = 0; i < in->option_count; i++)
        dc_hasher_str(h, "option", in->options[i]);
    dc_hasher_i64(h, "nvrtc_major", in->nvrtc_major);
    dc_hasher_i64(h, "nvrtc_minor", in->nvrtc_minor);
    dc_hasher_str(h, "arch", in->arch);
    out = dc_hasher_digest(h);
    dc_hasher_free(h);
    return out;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* Device headers: *.cuh, and the *.h that compile both as C and under NVRTC
 * (the ABI headers the launchers share). */
static int is_header(const char *name)
{
    return ends_with(name, ".cuh") || ends_with(name, ".h");
}

static int source_cmp(const void *a, const void *b)
{
    return strcmp(((const dc_source *)a)->name, ((const dc_source *)b)->name);
}

/* Keeps `p` to be freed with the unit; returns p, or NULL (p freed) when
 * out of memory. */
static void *unit_own(dc_unit *u, void *p)
{
    if (!p)
        return NULL;
    char **list = realloc(u->owned_list, (u->owned_count + 1) * sizeof *list);
    if (!list) {
        free(p);
        return NULL;
    }
    u->owned_list = list;
    list[u->owned_count++] = p;
    return p;
}

/* Reads `path` whole (NUL-terminated) as the source `name`. */
static dcptopk_result read_file(const dcptopk_context *ctx, dc_unit *u,
                                const char *dir, const char *path,
                                const char *name, dc_source *out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return dc_fail(ctx, errno == ENOENT ? DCPTOPK_NOT_FOUND
                                            : DCPTOPK_IO_ERROR,
                       "template \"%s\" not found: cannot open %s "
                       "(DCPTOPK_TEMPLATE_DIR = \"%s\"): %s",
                       name, path, dir, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf)
        return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "reading %s", path);
    if (bad) {
        free(buf);
        return dc_fail(ctx, DCPTOPK_IO_ERROR, "reading %s failed", path);
    }
    buf[n] = '\0';
    if (!unit_own(u, buf))
        return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "reading %s", path);
    out->name = name;
    out->data = buf;
    out->size = n;
    return DCPTOPK_SUCCESS;
}

/* The files of a template folder: name -> path. */
typedef struct dir_file {
    char *name; /* owned by the unit */
    char *path; /* owned by the unit */
} dir_file;

typedef struct dir_list {
    dir_file *files;
    size_t count, cap;
} dir_list;

/* Adds the *.cu and *.cuh files of `sub` (dir itself when sub is NULL) to
 * `list`; with sub NULL, also descends once into each subfolder, so that the
 * folder may be a flat copy of the templates or a copy of kernels/ (one
 * folder per family). A name seen twice is refused: the renderer and NVRTC's
 * #include know a file by its name alone. */
static dcptopk_result list_dir(const dcptopk_context *ctx, dc_unit *u,
                               const char *dir, const char *sub,
                               dir_list *list)
{
    char folder[4096];
    if (sub)
        snprintf(folder, sizeof folder, "%s/%s", dir, sub);
    else
        snprintf(folder, sizeof folder, "%s", dir);
    DIR *d = opendir(folder);
    if (!d)
        return dc_fail(ctx, DCPTOPK_IO_ERROR,
                       "DCPTOPK_TEMPLATE_DIR = \"%s\": cannot list %s: %s", dir,
                       folder, strerror(errno));
    dcptopk_result r = DCPTOPK_SUCCESS;
    struct dirent *e;
    while (r == DCPTOPK_SUCCESS && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        int len = snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
        if (len < 0 || (size_t)len >= sizeof path) {
            r = dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                        "DCPTOPK_TEMPLATE_DIR = \"%s\": path of %s longer "
                        "than %zu bytes", dir, e->d_name, sizeof path - 1);
            break;
        }
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            if (!sub)
                r = list_dir(ctx, u, dir, e->d_name, list);
            continue;
        }
        if (!ends_with(e->d_name, ".cu") && !is_header(e->d_name))
            continue;
        for (size_t i = 0; i < list->count; i++)
            if (strcmp(list->files[i].name, e->d_name) == 0) {
                r = dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                            "DCPTOPK_TEMPLATE_DIR = \"%s\": two files named "
                            "%s (%s and %s): template names must be unique",
                            dir, e->d_name, list->files[i].path, path);
                break;
            }
        if (r)
            break;
        if (list->count == list->cap) {
            size_t ncap = list->cap ? list->cap * 2 : 16;
            dir_file *f = realloc(list->files, ncap * sizeof *f);
            if (!f) {
                r = dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "template list");
                break;
            }
            list->files = f;
            list->cap = ncap;
        }
        dir_file *f = &list->files[list->count];
        f->name = unit_own(u, strdup(e->d_name));
        f->path = f->name ? unit_own(u, strdup(path)) : NULL;
        if (!f->path) {
            r = dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "template list");
            break;
        }
        list->count++;
    }
    closedir(d);
    return r;
}

/* The name of each `#include "NAME"` line of text[0..size), in order, to
 * f(name, len, arg); stops at the first nonzero return. A line counts when
 * its first non-blank character is '#' (so a commented-out line does not);
 * an include inside a block comment or an inactive #if still counts, which
 * only hashes a header more. <...> includes are the toolkit's: never ours. */
static int each_include(const char *text, size_t size,
                        int (*f)(const char *name, size_t len, void *arg),
                        void *arg)
{
    const char *p = text, *end = text + size;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        const char *q = p;
        while (q < eol && (*q == ' ' || *q == '\t'))
            q++;
        if (q < eol && *q == '#') {
            q++;
            while (q < eol && (*q == ' ' || *q == '\t'))
                q++;
            if ((size_t)(eol - q) > 7 && memcmp(q, "include", 7) == 0) {
                q += 7;
                while (q < eol && (*q == ' ' || *q == '\t'))
                    q++;
                if (q < eol && *q == '"') {
                    const char *name = ++q;
                    while (q < eol && *q != '"')
                        q++;
                    if (q < eol && q > name) {
                        int r = f(name, (size_t)(q - name), arg);
                        if (r)
                            return r;
                    }
                }
            }
        }
        p = eol + 1;
    }
    return 0;
}

/* Where the headers of a unit come from: the files of DCPTOPK_TEMPLATE_DIR
 * (dir, when set), then the embedded copies. */
typedef struct header_search {
    const dcptopk_context *ctx;
    dc_unit *u;
    const char *dir;
    const dir_list *list; /* NULL: embedded copies only */
    size_t cap;           /* of u->headers */
    dcptopk_result r;
} header_search;

static int name_is(const char *name, const char *s, size_t len)
{
    return strlen(name) == len && memcmp(name, s, len) == 0;
}

/* Adds the header `name` (when it is one of ours and not there yet) to
 * u->headers. An unknown name is left to NVRTC, which reports it. */
static int add_include(const char *name, size_t len, void *arg)
{
    header_search *hs = arg;
    dc_unit *u = hs->u;
    if (name_is(u->tmpl.name, name, len))
        return 0;
    for (size_t i = 0; i < u->header_count; i++)
        if (name_is(u->headers[i].name, name, len))
            return 0;
    if (u->header_count == hs->cap) {
        size_t ncap = hs->cap ? hs->cap * 2 : 8;
        dc_source *h = realloc(u->headers, ncap * sizeof *h);
        if (!h) {
            hs->r = dc_fail(hs->ctx, DCPTOPK_OUT_OF_MEMORY, "header list");
            return 1;
        }
        u->headers = h;
        hs->cap = ncap;
    }
    dc_source *h = &u->headers[u->header_count];
    for (size_t i = 0; hs->list && i < hs->list->count; i++) {
        const dir_file *f = &hs->list->files[i];
        if (name_is(f->name, name, len)) {
            hs->r = read_file(hs->ctx, u, hs->dir, f->path, f->name, h);
            if (hs->r)
                return 1;
            u->header_count++;
            return 0;
        }
    }
    for (const dc_embedded_file *f = dc_embedded_files; f->name; f++) {
        if (name_is(f->name, name, len)) {
            h->name = f->name;
            h->data = (const char *)f->data;
            h->size = f->size;
            u->header_count++;
            return 0;
        }
    }
    return 0;
}

/* u->headers = the headers the template includes, directly or through
 * other headers, sorted by name: exactly what the compile reads, so that
 * editing one family's files leaves every other family's cache keys. */
static dcptopk_result find_headers(const dcptopk_context *ctx, dc_unit *u,
                                   const char *dir, const dir_list *list)
{
    header_search hs = {ctx, u, dir, list, 0, DCPTOPK_SUCCESS};
    each_include(u->tmpl.data, u->tmpl.size, add_include, &hs);
    /* Headers found along the way are scanned in turn (the list grows). */
    for (size_t i = 0; hs.r == DCPTOPK_SUCCESS && i < u->header_count; i++)
        each_include(u->headers[i].data, u->headers[i].size, add_include,
                     &hs);
    if (hs.r)
        return hs.r;
    if (u->header_count)
        qsort(u->headers, u->header_count, sizeof *u->headers, source_cmp);
    return DCPTOPK_SUCCESS;
}

/* The template from a folder (DCPTOPK_TEMPLATE_DIR), and its headers from
 * the folder or, for those it lacks, the embedded copies: a folder may hold
 * only the files being edited. */
static dcptopk_result load_from_dir(const dcptopk_context *ctx, dc_unit *u,
                                    const char *dir)
{
    dir_list list = {NULL, 0, 0};
    dcptopk_result r = list_dir(ctx, u, dir, NULL, &list);
    const dir_file *tmpl = NULL;
    for (size_t i = 0; r == DCPTOPK_SUCCESS && i < list.count; i++)
        if (strcmp(list.files[i].name, u->info->template_file) == 0)
            tmpl = &list.files[i];
    if (r == DCPTOPK_SUCCESS && !tmpl) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, u->info->template_file);
        errno = ENOENT;
        r = read_file(ctx, u, dir, path, u->info->template_file, &u->tmpl);
    } else if (r == DCPTOPK_SUCCESS) {
        r = read_file(ctx, u, dir, tmpl->path, tmpl->name, &u->tmpl);
    }
    if (r == DCPTOPK_SUCCESS)
        r = find_headers(ctx, u, dir, &list);
    free(list.files);
    return r;
}

/* The template and its headers from the embedded copies. */
static dcptopk_result load_embedded(const dcptopk_context *ctx, dc_unit *u)
{
    int found = 0;
    for (const dc_embedded_file *f = dc_embedded_files; f->name; f++) {
        if (strcmp(f->name, u->info->template_file) == 0) {
            u->tmpl.name = f->name;
            u->tmpl.data = (const char *)f->data;
            u->tmpl.size = f->size;
            found = 1;
        }
    }
    if (!found)
        return dc_fail(ctx, DCPTOPK_NOT_FOUND,
                       "kernel %s: template \"%s\" is not embedded in this "
                       "build (kernels/*/%s does not exist yet, or the library "
                       "was built before it was added)",
                       u->info->name, u->info->template_file,
                       u->info->template_file);
    return find_headers(ctx, u, NULL, NULL);
}

static dcptopk_result render_prelude(const dcptopk_context *ctx, dc_unit *u)
{
    char buf[1024];
    size_t n = 0;
    const dcptopk_key *key = &u->key;
    /* dc_key_fields order: the prelude is hashed. */
    for (size_t i = 0; i < dc_key_field_count; i++) {
        if (!(u->info->fields & dc_key_fields[i].bit))
            continue;
        n += (size_t)snprintf(buf + n, sizeof buf - n, "#define %s %d\n",
                              dc_key_fields[i].macro,
                              dc_key_field_value(key, i));
    }
    if (u->info->fields & DC_F_WORLD_SIZE)
        n += (size_t)snprintf(buf + n, sizeof buf - n,
                              "#define DCPTOPK_GID_BITS %d\n",
                              dc_gid_bits(key->world_size));
    if (n >= sizeof buf)
        return dc_fail(ctx, DCPTOPK_INTERNAL, "prelude longer than %zu bytes",
                       sizeof buf);
    u->prelude = strdup(buf);
    if (!u->prelude)
        return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "prelude");
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_unit_build(const dcptopk_context *ctx,
                             const dcptopk_key *key, dc_unit *u)
{
    memset(u, 0, sizeof *u);
    u->key = *key;
    u->info = dc_kernel_get(key->kernel);
    if (!u->info)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "key->kernel = %d: no such kernel (0..%d)", key->kernel,
                       DCPTOPK_KERNEL_COUNT - 1);
    if (!key->arch[0])
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "key->arch is empty: the renderer needs a target arch");
    const char *dir = dc_setting_text(DC_SET_TEMPLATE_DIR);
    dcptopk_result r = dir ? load_from_dir(ctx, u, dir)
                                     : load_embedded(ctx, u);
    if (r)
        return r;
    if ((r = render_prelude(ctx, u)))
        return r;

    /* The #line makes NVRTC's messages point into the template file. The
     * name is absolute (and names no real folder) because NVRTC records a
     * relative one with the working directory in the cubin's line table:
     * see dc_nvrtc_compile. */
    char line[160];
    snprintf(line, sizeof line, "#line 1 \"" DC_NVRTC_TEMPLATE_ROOT "%s\"\n",
             u->info->template_file);
    size_t np = strlen(u->prelude), nl = strlen(line);
    u->source_size = np + nl + u->tmpl.size;
    u->source = malloc(u->source_size + 1);
    if (!u->source)
        return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "source of %zu bytes",
                       u->source_size);
    memcpy(u->source, u->prelude, np);
    memcpy(u->source + np, line, nl);
    memcpy(u->source + np + nl, u->tmpl.data, u->tmpl.size);
    u->source[u->source_size] = '\0';

    /* The key holds the NVRTC version: without NVRTC no key can be named
     * (not even to read the cache). */
    const char *why = NULL;
    if (!dc_nvrtc_get(&why))
        return dc_fail(ctx, DCPTOPK_NVRTC_ERROR, "%s", why);
    dc_nvrtc_version(&u->nvrtc_major, &u->nvrtc_minor);
    snprintf(u->nvrtc_version, sizeof u->nvrtc_version, "%d.%d",
             u->nvrtc_major, u->nvrtc_minor);
    dc_nvrtc_options(u);
    dc_key_fields_string(key, u->fields, sizeof u->fields);

    dc_hash_input in = {
        .kernel = u->info->name,
        .entry = u->info->template_file,
        .template_text = u->tmpl.data,
        .template_size = u->tmpl.size,
        .headers = u->headers,
        .header_count = u->header_count,
        .prelude = u->prelude,
        .options = u->options,
        .option_count = u->option_count,
        .nvrtc_major = u->nvrtc_major,
        .nvrtc_minor = u->nvrtc_minor,
        .arch = key->arch,
    };
    u->hash = dc_unit_hash(&in);
    if (u->hash.hi == 0 && u->hash.lo == 0)
        return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "hashing the compile unit");
    return DCPTOPK_SUCCESS;
}

void dc_unit_free(dc_unit *u)
{
    if (!u)
        return;
    for (size_t i = 0; i < u->owned_count; i++)
        free(u->owned_list[i]);
    free(u->owned_list);
    free(u->headers);
    free(u->source);
    free(u->prelude);
    memset(u, 0, sizeof *u);
}

/* ----------------------------------------------------------------- public */

/* A copy of a public key with the arch defaulted and the bytes after its NUL
 * cleared; checked. */
static dcptopk_result public_key(const dcptopk_key *key, dcptopk_key *out)
{
    if (!key)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "key is NULL");
    *out = *key;
    if (!memchr(out->arch, '\0', sizeof out->arch))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->arch is not NUL-terminated within %zu bytes",
                       sizeof out->arch);
    size_t n = strlen(out->arch);
    memset(out->arch + n, 0, sizeof out->arch - n);
    if (n == 0)
        snprintf(out->arch, sizeof out->arch, "sm_90a");
    return dcptopk_key_check(out);
}

/* The rendered unit of a public key; on success the caller frees it with
 * dc_unit_free, on failure there is nothing to free. */
static dcptopk_result public_unit(const dcptopk_key *key, dc_unit *u)
{
    dcptopk_key k;
    dcptopk_result r = public_key(key, &k);
    if (r)
        return r;
    r = dc_unit_build(NULL, &k, u);
    if (r)
        dc_unit_free(u);
    return r;
}

dcptopk_result dcptopk_key_render(const dcptopk_key *key, char **out)
{
    if (!out)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    dc_unit u;
    dcptopk_result r = public_unit(key, &u);
    if (r)
        return r;
    *out = u.source;
    u.source = NULL;
    dc_unit_free(&u);
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_key_hash(const dcptopk_key *key, char hex[33])
{
    if (!hex)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "hex is NULL");
    hex[0] = '\0';
    dc_unit u;
    dcptopk_result r = public_unit(key, &u);
    if (r)
        return r;
    dc_hash_hex(u.hash, hex);
    dc_unit_free(&u);
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}
