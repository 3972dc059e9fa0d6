/* test_render.c - the renderer: the prelude defines exactly the kernel's key
 * fields (plus gid bits), unknown kernels are refused, the
 * DCPTOPK_TEMPLATE_DIR override replaces templates and headers, and the cache
 * key follows the template, constant bytes and the headers the template
 * includes (and no other header). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "dcptopk.h"
#include "gpu_util.h"
#include "harness.h"
#include "rt.h"
#include "templates_embed.h"

/* Distinct values per field so that a mixed-up field shows. */
static void full_key(dcptopk_key *k, int32_t kernel)
{
    const dc_kernel_info *info = dc_kernel_get(kernel);
    memset(k, 0, sizeof *k);
    k->kernel = kernel;
    snprintf(k->arch, sizeof k->arch, "sm_90a");
    uint32_t f = info ? info->fields : 0;
    if (f & DC_F_TOPK) k->topk = 2048;
    if (f & DC_F_LOCAL_TOPK) k->local_topk = 384;
    if (f & DC_F_WORLD_SIZE) k->world_size = 8;
    if (f & DC_F_BLOCK_SIZE) k->block_size = 64;
    if (f & DC_F_INTERLEAVE) k->interleave = 3;
    if (f & DC_F_EMIT_IDS) k->emit_ids = 1;
    if (f & DC_F_EXACT) k->exact = 1;
    if (f & DC_F_LAYOUT) k->layout = 1;
    if (f & DC_F_VARIANT) k->variant = 4;
}

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* A folder with a stub template for every kernel and a common.cuh. */
static int stub_dir(char *dir, size_t size)
{
    tmpdir_make(dir, size, "render");
    if (!dir[0])
        return -1;
    for (int32_t k = 0; k < DCPTOPK_KERNEL_COUNT; k++) {
        if (!dc_kernel_get(k))
            continue; /* a reserved number */
        char text[128];
        snprintf(text, sizeof text, "// stub of %s\n#include \"common.cuh\"\n",
                 dcptopk_kernel_name(k));
        if (write_file(dir, dc_kernel_get(k)->template_file, text))
            return -1;
    }
    return write_file(dir, "common.cuh", "#pragma once\n// stub common\n");
}

/* Value of `#define name V` in src, or -1 when absent; *count = how many. */
static long define_value(const char *src, const char *name, int *count)
{
    char pat[64];
    snprintf(pat, sizeof pat, "#define %s ", name);
    long v = -1;
    *count = 0;
    for (const char *p = strstr(src, pat); p; p = strstr(p + 1, pat)) {
        if (p != src && p[-1] != '\n')
            continue;
        v = strtol(p + strlen(pat), NULL, 10);
        (*count)++;
    }
    return v;
}

TEST(prelude_has_exactly_the_kernel_fields)
{
    static const struct {
        uint32_t bit;
        const char *macro;
        long value;
    } fields[] = {
        {DC_F_TOPK, "DCPTOPK_TOPK", 2048},
        {DC_F_LOCAL_TOPK, "DCPTOPK_LOCAL_TOPK", 384},
        {DC_F_WORLD_SIZE, "DCPTOPK_WORLD_SIZE", 8},
        {DC_F_BLOCK_SIZE, "DCPTOPK_BLOCK_SIZE", 64},
        {DC_F_INTERLEAVE, "DCPTOPK_INTERLEAVE", 3},
        {DC_F_EMIT_IDS, "DCPTOPK_EMIT_IDS", 1},
        {DC_F_EXACT, "DCPTOPK_EXACT", 1},
        {DC_F_LAYOUT, "DCPTOPK_LAYOUT", 1},
        {DC_F_VARIANT, "DCPTOPK_VARIANT", 4},
    };
    char dir[512];
    CHECK(stub_dir(dir, sizeof dir) == 0);
    setenv("DCPTOPK_TEMPLATE_DIR", dir, 1);
    for (int32_t kernel = 0; kernel < DCPTOPK_KERNEL_COUNT; kernel++) {
        const dc_kernel_info *info = dc_kernel_get(kernel);
        if (!info)
            continue; /* a reserved number */
        dcptopk_key k;
        full_key(&k, kernel);
        char *src = NULL;
        CHECK_OK(dcptopk_key_render(&k, &src));
        int n;
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
            long v = define_value(src, fields[i].macro, &n);
            if (info->fields & fields[i].bit) {
                CHECK_MSG(n == 1 && v == fields[i].value,
                          "%s: %s defined %d times, value %ld (want %ld)",
                          info->name, fields[i].macro, n, v, fields[i].value);
            } else {
                CHECK_MSG(n == 0, "%s: %s defined but not a field",
                          info->name, fields[i].macro);
            }
        }
        /* Threads per block are the template's (its family's ABI header),
         * not a key field. */
        define_value(src, "DCPTOPK_THREADS", &n);
        CHECK_EQ(n, 0);
        long gid_bits = define_value(src, "DCPTOPK_GID_BITS", &n);
        if (info->fields & DC_F_WORLD_SIZE) {
            CHECK_EQ(n, 1);
            CHECK_EQ(gid_bits, 20); /* 17 + ceil(log2 8), docs/CONTRACT.md */
        } else {
            CHECK_EQ(n, 0);
        }
        char want[128];
        snprintf(want, sizeof want, "// stub of %s\n", info->name);
        CHECK_CONTAINS(src, want);
        free(src);
    }
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    tmpdir_remove(dir);
}

TEST(pack_indices_renders_from_the_embedded_template)
{
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    dcptopk_key k;
    memset(&k, 0, sizeof k);
    k.kernel = DCPTOPK_KERNEL_PACK_INDICES;
    k.local_topk = 96;
    snprintf(k.arch, sizeof k.arch, "sm_90a");
    char *src = NULL;
    CHECK_OK(dcptopk_key_render(&k, &src));
    /* Written from the registry's spec: pack_indices specialises on
     * local_topk only. */
    const char *want = "#define DCPTOPK_LOCAL_TOPK 96\n"
                       "#line 1 \"/dcptopk/templates/pack_indices.cu\"\n";
    CHECK_MSG(strncmp(src, want, strlen(want)) == 0, "source starts:\n%.200s",
              src);
    CHECK_CONTAINS(src, "dcptopk_pack_indices(");
    CHECK_CONTAINS(src, "#include \"common.cuh\"");
    free(src);
}

TEST(select_prelude_literal)
{
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    char dir[512];
    CHECK(stub_dir(dir, sizeof dir) == 0);
    setenv("DCPTOPK_TEMPLATE_DIR", dir, 1);
    dcptopk_key k;
    memset(&k, 0, sizeof k);
    k.kernel = DCPTOPK_KERNEL_SELECT;
    k.topk = 1024;
    k.local_topk = 192;
    k.world_size = 16;
    k.block_size = 0;
    k.interleave = 1;
    k.emit_ids = 0;
    k.exact = 1;
    snprintf(k.arch, sizeof k.arch, "sm_90a");
    char *src = NULL;
    CHECK_OK(dcptopk_key_render(&k, &src));
    char want[512];
    snprintf(want, sizeof want, "%s",
             "#define DCPTOPK_TOPK 1024\n"
             "#define DCPTOPK_LOCAL_TOPK 192\n"
             "#define DCPTOPK_WORLD_SIZE 16\n"
             "#define DCPTOPK_BLOCK_SIZE 0\n"
             "#define DCPTOPK_INTERLEAVE 1\n"
             "#define DCPTOPK_EMIT_IDS 0\n"
             "#define DCPTOPK_EXACT 1\n"
             "#define DCPTOPK_GID_BITS 21\n"
             "#line 1 \"/dcptopk/templates/select.cu\"\n"
             "// stub of select\n");
    CHECK_MSG(strncmp(src, want, strlen(want)) == 0, "source:\n%s", src);
    free(src);
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    tmpdir_remove(dir);
}

TEST(unknown_or_bad_keys_are_refused)
{
    dcptopk_key k;
    memset(&k, 0, sizeof k);
    k.kernel = 99;
    snprintf(k.arch, sizeof k.arch, "sm_90a");
    char *src = (char *)"untouched";
    CHECK_EQ(dcptopk_key_render(&k, &src), DCPTOPK_INVALID_ARGUMENT);
    CHECK(src == NULL);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "key->kernel = 99");
    char hex[33];
    CHECK_EQ(dcptopk_key_hash(&k, hex), DCPTOPK_INVALID_ARGUMENT);
    k.kernel = -1;
    CHECK_EQ(dcptopk_key_render(&k, &src), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "key->kernel = -1");
    /* A field the kernel does not specialise on. */
    k.kernel = DCPTOPK_KERNEL_PACK_INDICES;
    k.local_topk = 384;
    k.world_size = 8;
    CHECK_EQ(dcptopk_key_render(&k, &src), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "key->world_size = 8");
    CHECK_EQ(dcptopk_key_render(NULL, &src), DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dcptopk_key_render(&k, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dcptopk_key_hash(&k, NULL), DCPTOPK_INVALID_ARGUMENT);
}

TEST(template_dir_override_and_key_follow_the_bytes)
{
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    dcptopk_key k;
    memset(&k, 0, sizeof k);
    k.kernel = DCPTOPK_KERNEL_PACK_INDICES;
    k.local_topk = 384;
    snprintf(k.arch, sizeof k.arch, "sm_90a");
    char embedded[33], again[33], other_arch[33], other_n[33];
    CHECK_OK(dcptopk_key_hash(&k, embedded));
    CHECK_EQ(strlen(embedded), 32);
    CHECK_OK(dcptopk_key_hash(&k, again));
    CHECK_STR_EQ(embedded, again);
    snprintf(k.arch, sizeof k.arch, "sm_90");
    CHECK_OK(dcptopk_key_hash(&k, other_arch));
    CHECK(strcmp(embedded, other_arch) != 0);
    snprintf(k.arch, sizeof k.arch, "sm_90a");
    k.local_topk = 416;
    CHECK_OK(dcptopk_key_hash(&k, other_n));
    CHECK(strcmp(embedded, other_n) != 0);
    k.local_topk = 384;

    char dir[512];
    tmpdir_make(dir, sizeof dir, "override");
    CHECK(dir[0]);
    CHECK(write_file(dir, "pack_indices.cu",
                     "// OVERRIDE MARKER\n#include \"common.cuh\"\n") == 0);
    CHECK(write_file(dir, "common.cuh", "#pragma once\n") == 0);
    setenv("DCPTOPK_TEMPLATE_DIR", dir, 1);
    char *src = NULL;
    CHECK_OK(dcptopk_key_render(&k, &src));
    CHECK_CONTAINS(src, "// OVERRIDE MARKER");
    CHECK(strstr(src, "dcptopk_pack_indices(") == NULL);
    free(src);
    char h1[33], h2[33], h3[33];
    CHECK_OK(dcptopk_key_hash(&k, h1));
    CHECK(strcmp(h1, embedded) != 0);
    /* An included header's edit changes the key; a header that nothing
     * includes does not, until the template includes it. */
    CHECK(write_file(dir, "common.cuh", "#pragma once\n// edited\n") == 0);
    CHECK_OK(dcptopk_key_hash(&k, h2));
    CHECK(strcmp(h1, h2) != 0);
    CHECK(write_file(dir, "zz_new.cuh", "#pragma once\n") == 0);
    CHECK_OK(dcptopk_key_hash(&k, h3));
    CHECK_STR_EQ(h2, h3);
    CHECK(write_file(dir, "pack_indices.cu",
                     "// OVERRIDE MARKER\n#include \"common.cuh\"\n"
                     "  #  include \"zz_new.cuh\"\n") == 0);
    CHECK_OK(dcptopk_key_hash(&k, h2));
    CHECK(write_file(dir, "zz_new.cuh", "#pragma once\n// edited\n") == 0);
    CHECK_OK(dcptopk_key_hash(&k, h3));
    CHECK(strcmp(h2, h3) != 0);
    /* A missing template is named. */
    k.kernel = DCPTOPK_KERNEL_SELECT;
    k.topk = 2048;
    k.world_size = 8;
    k.interleave = 1;
    CHECK_EQ(dcptopk_key_render(&k, &src), DCPTOPK_NOT_FOUND);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "select.cu");
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    tmpdir_remove(dir);
    /* Back to the embedded copy: the original key again. */
    k.kernel = DCPTOPK_KERNEL_PACK_INDICES;
    k.topk = k.world_size = k.interleave = 0;
    CHECK_OK(dcptopk_key_hash(&k, again));
    CHECK_STR_EQ(again, embedded);
}

TEST(empty_arch_defaults_to_sm_90a)
{
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    dcptopk_key k;
    memset(&k, 0, sizeof k);
    k.kernel = DCPTOPK_KERNEL_PACK_INDICES;
    k.local_topk = 384;
    char a[33], b[33];
    CHECK_OK(dcptopk_key_hash(&k, a));
    snprintf(k.arch, sizeof k.arch, "sm_90a");
    CHECK_OK(dcptopk_key_hash(&k, b));
    CHECK_STR_EQ(a, b);
}

/* The header names of `kernel`'s unit (full_key), comma-separated. */
static void unit_headers(int32_t kernel, char *out, size_t size)
{
    dcptopk_key k;
    full_key(&k, kernel);
    if (k.variant > 3)
        k.variant = 1;
    out[0] = '\0';
    dc_unit u;
    if (dc_unit_build(NULL, &k, &u) == DCPTOPK_SUCCESS) {
        size_t n = 0;
        for (size_t i = 0; i < u.header_count && n < size; i++)
            n += (size_t)snprintf(out + n, size - n, "%s%s", i ? "," : "",
                                  u.headers[i].name);
    }
    dc_unit_free(&u);
}

/* Each family's units read the shared headers and their own family's only:
 * the key of a kernel covers exactly the files its compile reads. */
TEST(units_hold_only_the_headers_they_include)
{
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    char h[1024];
    unit_headers(DCPTOPK_KERNEL_PAIR_SELECT, h, sizeof h);
    CHECK_STR_EQ(h, "common.cuh,kernel_abi.h,packed_format.h,pair_abi.h");
    unit_headers(DCPTOPK_KERNEL_PACK_INDICES, h, sizeof h);
    CHECK_STR_EQ(h, "common.cuh,kernel_abi.h,packed_abi.h,packed_format.h");
    unit_headers(DCPTOPK_KERNEL_SELECT, h, sizeof h);
    CHECK_STR_EQ(h, "common.cuh,kernel_abi.h,packed_abi.h,packed_format.h,"
                    "select_core.cuh");
    unit_headers(DCPTOPK_KERNEL_TOPN_PACK, h, sizeof h);
    CHECK_STR_EQ(h, "common.cuh,kernel_abi.h,packed_format.h,topn_abi.h,"
                    "topn_select.cuh");
}

/* Writes every embedded file to dir, the file `edit` with a comment
 * appended. */
static int copy_embedded(const char *dir, const char *edit)
{
    for (const dc_embedded_file *f = dc_embedded_files; f->name; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, f->name);
        FILE *out = fopen(path, "wb");
        if (!out)
            return -1;
        fwrite(f->data, 1, f->size, out);
        if (edit && strcmp(f->name, edit) == 0)
            fputs("// edited\n", out);
        if (fclose(out))
            return -1;
    }
    return 0;
}

/* Editing one family's files changes its keys and leaves the others'. */
TEST(editing_a_family_leaves_other_families_keys)
{
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    static const int32_t kernels[] = {
        DCPTOPK_KERNEL_PACK_INDICES, DCPTOPK_KERNEL_SELECT,
        DCPTOPK_KERNEL_RESCUE,       DCPTOPK_KERNEL_TOPN_PACK,
        DCPTOPK_KERNEL_PUSH,         DCPTOPK_KERNEL_PAIR_PACK,
        DCPTOPK_KERNEL_PAIR_SELECT};
    enum { NK = sizeof kernels / sizeof kernels[0] };
    char base[NK][33];
    dcptopk_key k[NK];
    for (int i = 0; i < NK; i++) {
        full_key(&k[i], kernels[i]);
        if (k[i].variant > 3)
            k[i].variant = 1;
        CHECK_OK(dcptopk_key_hash(&k[i], base[i]));
    }
    /* Which kernels each edit must change (bit i = kernels[i]). */
    static const struct {
        const char *file;
        unsigned changes;
    } edits[] = {
        {NULL, 0x00},              /* an unedited copy: the same keys */
        {"pair_select.cu", 0x40},
        {"pair_abi.h", 0x60},
        {"topn_select.cuh", 0x18},
        {"select_core.cuh", 0x06},
        {"packed_abi.h", 0x07},
        {"common.cuh", 0x7F},
    };
    for (size_t e = 0; e < sizeof edits / sizeof edits[0]; e++) {
        char dir[512];
        tmpdir_make(dir, sizeof dir, "family");
        CHECK(dir[0]);
        CHECK(copy_embedded(dir, edits[e].file) == 0);
        setenv("DCPTOPK_TEMPLATE_DIR", dir, 1);
        for (int i = 0; i < NK; i++) {
            char hex[33];
            CHECK_OK(dcptopk_key_hash(&k[i], hex));
            const int changed = strcmp(hex, base[i]) != 0;
            CHECK_MSG(changed == (int)((edits[e].changes >> i) & 1u),
                      "editing %s: the key of %s %s",
                      edits[e].file ? edits[e].file : "(nothing)",
                      dcptopk_kernel_name(kernels[i]),
                      changed ? "changed" : "did not change");
        }
        unsetenv("DCPTOPK_TEMPLATE_DIR");
        tmpdir_remove(dir);
    }
}

/* DCPTOPK_KERNEL_LOOPBACK is a reserved number: no registry row, no
 * template, refused as a key. */
TEST(reserved_kernel_number_is_not_a_kernel)
{
    CHECK(dc_kernel_get(DCPTOPK_KERNEL_LOOPBACK) == NULL);
    CHECK_STR_EQ(dcptopk_kernel_name(DCPTOPK_KERNEL_LOOPBACK), "unknown");
    dcptopk_key k;
    memset(&k, 0, sizeof k);
    k.kernel = DCPTOPK_KERNEL_LOOPBACK;
    k.local_topk = 384;
    k.world_size = 8;
    snprintf(k.arch, sizeof k.arch, "sm_90a");
    CHECK_EQ(dcptopk_key_check(&k), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "key->kernel = 6");
    for (int32_t i = 0; i < DCPTOPK_KERNEL_COUNT; i++)
        if (i != DCPTOPK_KERNEL_LOOPBACK)
            CHECK(dc_kernel_get(i) != NULL);
}
