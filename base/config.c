/* config.c - merge configs and compile keys: named configs, reading a config
 * through its struct_size, the packed-format arithmetic, the key field table,
 * key formatting and validation. (Expansion of a config into keys needs the
 * kernel families: src/config_keys.c.) */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "packed_format.h"
#include "structs.h"

_Static_assert(DC_LOCAL_INDEX_BITS == DCPTOPK_LOCAL_INDEX_BITS,
               "packed_format.h and the public header agree on the local id bits");

typedef struct dc_named_config {
    const char *name;
    dcptopk_merge_config config;
} dc_named_config;

#define DC_CFG(kind, k, n, w, b, ids, exact)                                   \
    { sizeof(dcptopk_merge_config), DCPTOPK_MERGE_CONFIG_VERSION, kind, k, n,  \
      w, b, 1, ids, exact }

/* N = 1.5 K / W rounded up to a multiple of 32 for the packed configs (the
 * published choice for DeepSeek-V3.2 on DCP8: K=2048, N=384). K of a model's
 * configs is its indexer's index_topk; docs/INTEGRATION.md ("Named configs")
 * names the public model config each K comes from. The first entry is the
 * default. */
static const dc_named_config named[] = {
    {"deepseek-v3.2-dcp8", DC_CFG(DCPTOPK_MERGE_PACKED, 2048, 384, 8, 64, 1, 1)},
    {"deepseek-v3.2-dcp2", DC_CFG(DCPTOPK_MERGE_PACKED, 2048, 1536, 2, 64, 1, 1)},
    {"deepseek-v3.2-dcp4", DC_CFG(DCPTOPK_MERGE_PACKED, 2048, 768, 4, 64, 1, 1)},
    {"deepseek-v3.2-dcp16", DC_CFG(DCPTOPK_MERGE_PACKED, 2048, 192, 16, 64, 1, 1)},
    {"deepseek-v3.2-dcp8-pair", DC_CFG(DCPTOPK_MERGE_PAIR, 2048, 2048, 8, 64, 1, 0)},
    {"deepseek-v3.2-dcp4-pair", DC_CFG(DCPTOPK_MERGE_PAIR, 2048, 2048, 4, 64, 1, 0)},
    {"glm-5-dcp8", DC_CFG(DCPTOPK_MERGE_PACKED, 2048, 384, 8, 64, 1, 1)},
    {"glm-5-dcp4", DC_CFG(DCPTOPK_MERGE_PACKED, 2048, 768, 4, 64, 1, 1)},
    {"glm-5-dcp8-pair", DC_CFG(DCPTOPK_MERGE_PAIR, 2048, 2048, 8, 64, 1, 0)},
    {"deepseek-v4-flash-dcp8", DC_CFG(DCPTOPK_MERGE_PACKED, 512, 96, 8, 64, 1, 1)},
    {"deepseek-v4-flash-dcp4", DC_CFG(DCPTOPK_MERGE_PACKED, 512, 192, 4, 64, 1, 1)},
    {"deepseek-v4-flash-dcp8-pair", DC_CFG(DCPTOPK_MERGE_PAIR, 512, 512, 8, 64, 1, 0)},
    {"deepseek-v4-pro-dcp8", DC_CFG(DCPTOPK_MERGE_PACKED, 1024, 192, 8, 64, 1, 1)},
    {"deepseek-v4-pro-dcp4", DC_CFG(DCPTOPK_MERGE_PACKED, 1024, 384, 4, 64, 1, 1)},
    {"deepseek-v4-pro-dcp8-pair", DC_CFG(DCPTOPK_MERGE_PAIR, 1024, 1024, 8, 64, 1, 0)},
    {"topk1024-dcp8", DC_CFG(DCPTOPK_MERGE_PACKED, 1024, 192, 8, 64, 1, 1)},
    {"topk512-dcp8", DC_CFG(DCPTOPK_MERGE_PACKED, 512, 96, 8, 64, 1, 1)},
    {"topk1024-dcp8-pair", DC_CFG(DCPTOPK_MERGE_PAIR, 1024, 1024, 8, 64, 1, 0)},
    {"topk512-dcp8-pair", DC_CFG(DCPTOPK_MERGE_PAIR, 512, 512, 8, 64, 1, 0)},
};

const char *dcptopk_merge_config_name(size_t i)
{
    return i < sizeof named / sizeof named[0] ? named[i].name : NULL;
}

dcptopk_result dcptopk_merge_config_named(const char *name,
                                          dcptopk_merge_config *out)
{
    if (!out)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    if (!name)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "name is NULL");
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        if (strcmp(named[i].name, name) == 0) {
            *out = named[i].config;
            dc_clear(NULL);
            return DCPTOPK_SUCCESS;
        }
    }
    char list[1024] = "";
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, named[i].name, sizeof list - strlen(list) - 1);
    }
    return dc_fail(NULL, DCPTOPK_NOT_FOUND,
                   "name = \"%s\": no such config (known: %s)", name, list);
}

dcptopk_result dc_config_read(const dcptopk_context *ctx,
                              const dcptopk_merge_config *in,
                              dcptopk_merge_config *out)
{
    *out = (dcptopk_merge_config)DCPTOPK_MERGE_CONFIG_INIT;
    return DC_STRUCT_IN(ctx, "config", in, out, MERGE_CONFIG);
}

int32_t dcptopk_packed_row_words(int32_t n) { return DC_PACKED_ROW_WORDS(n); }

int32_t dcptopk_rescue_slots(int32_t k, int32_t n)
{
    return n > 0 && k > n ? DC_RESCUE_SLOTS(k, n) : 0;
}

int32_t dc_gid_bits(int32_t world_size) { return DC_GID_BITS(world_size); }

/* ------------------------------------------------------------------ keys */

int dc_arch_valid(const char *arch)
{
    if (!arch || strncmp(arch, "sm_", 3) != 0)
        return 0;
    const char *p = arch + 3;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        p++;
        digits++;
    }
    if (digits < 2 || digits > 3)
        return 0;
    if (*p == 'a' || *p == 'f')
        p++;
    return *p == '\0';
}

int dc_arch_number(const char *arch)
{
    if (!dc_arch_valid(arch))
        return -1;
    return atoi(arch + 3);
}

dcptopk_result dc_arch_check_merge(const dcptopk_context *ctx, const char *name,
                                   const char *arch)
{
    if (!dc_arch_valid(arch))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "%s = \"%.40s\": expected sm_XY[a|f], e.g. sm_90a", name,
                       arch ? arch : "(null)");
    /* The kernels use Hopper's packed 16-bit SIMD, bulk copies, mbarriers
     * and clusters: an older target fails in ptxas with a page of log. */
    if (dc_arch_number(arch) < DC_ARCH_MIN)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "%s = \"%s\": the merge kernels need sm_%d or later "
                       "(Hopper, Blackwell: e.g. sm_90a, sm_100a)",
                       name, arch, DC_ARCH_MIN);
    return DCPTOPK_SUCCESS;
}

#define DC_KEY_FIELD(bit, field, macro)                                        \
    { bit, #field, macro, offsetof(dcptopk_key, field) }

const dc_key_field dc_key_fields[] = {
    DC_KEY_FIELD(DC_F_TOPK, topk, "DCPTOPK_TOPK"),
    DC_KEY_FIELD(DC_F_LOCAL_TOPK, local_topk, "DCPTOPK_LOCAL_TOPK"),
    DC_KEY_FIELD(DC_F_WORLD_SIZE, world_size, "DCPTOPK_WORLD_SIZE"),
    DC_KEY_FIELD(DC_F_BLOCK_SIZE, block_size, "DCPTOPK_BLOCK_SIZE"),
    DC_KEY_FIELD(DC_F_INTERLEAVE, interleave, "DCPTOPK_INTERLEAVE"),
    DC_KEY_FIELD(DC_F_EMIT_IDS, emit_ids, "DCPTOPK_EMIT_IDS"),
    DC_KEY_FIELD(DC_F_EXACT, exact, "DCPTOPK_EXACT"),
    DC_KEY_FIELD(DC_F_LAYOUT, layout, "DCPTOPK_LAYOUT"),
    DC_KEY_FIELD(DC_F_VARIANT, variant, "DCPTOPK_VARIANT"),
};
const size_t dc_key_field_count =
    sizeof dc_key_fields / sizeof dc_key_fields[0];

int32_t dc_key_field_value(const dcptopk_key *key, size_t i)
{
    int32_t v;
    memcpy(&v, (const char *)key + dc_key_fields[i].offset, sizeof v);
    return v;
}

void dc_key_init(dcptopk_key *k, int32_t kernel, const char *arch)
{
    memset(k, 0, sizeof *k);
    k->kernel = kernel;
    if (arch)
        snprintf(k->arch, sizeof k->arch, "%s", arch);
}

dcptopk_key *dc_key_next(dc_key_list *l)
{
    dcptopk_key *k = l->n < l->cap ? &l->keys[l->n] : &l->spill;
    l->n++;
    return k;
}

/* "topk=2048,local_topk=384,..." : the fields the kernel specialises on. */
int dc_key_fields_string(const dcptopk_key *key, char *buf, size_t size)
{
    const dc_kernel_info *k = dc_kernel_get(key->kernel);
    int n = 0;
    if (size)
        buf[0] = '\0';
    if (!k)
        return 0;
    for (size_t i = 0; i < dc_key_field_count; i++) {
        if (!(k->fields & dc_key_fields[i].bit))
            continue;
        char none[1];
        const int room = buf && n < (int)size;
        int m = snprintf(room ? buf + n : none, room ? size - (size_t)n : 0,
                         "%s%s=%d", n ? "," : "", dc_key_fields[i].name,
                         dc_key_field_value(key, i));
        n += m;
    }
    return n;
}

int dcptopk_key_format(const dcptopk_key *key, char *buf, size_t size)
{
    if (!key)
        return snprintf(buf, size, "(null)");
    char fields[256];
    dc_key_fields_string(key, fields, sizeof fields);
    /* key->arch may lack its NUL (dcptopk_key_check refuses such a key, but
     * a key is formatted to report it): never read past the array. */
    return snprintf(buf, size, "%s(%s)@%.*s", dcptopk_kernel_name(key->kernel),
                    fields, key->arch[0] ? (int)sizeof key->arch : 1,
                    key->arch[0] ? key->arch : "?");
}

/* Parses one decimal int32 at *p (advancing it); -1 when there is none or
 * it overflows. */
static int parse_i32(const char **p, int32_t *out)
{
    const char *s = *p;
    int neg = *s == '-';
    if (neg)
        s++;
    if (*s < '0' || *s > '9')
        return -1;
    int64_t v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s++ - '0');
        if (v > (int64_t)INT32_MAX + 1)
            return -1;
    }
    v = neg ? -v : v;
    if (v > INT32_MAX || v < INT32_MIN)
        return -1;
    *out = (int32_t)v;
    *p = s;
    return 0;
}

dcptopk_result dcptopk_key_parse(const char *text, dcptopk_key *out)
{
    if (!text)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "text is NULL");
    if (!out)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    dcptopk_key k;
    memset(&k, 0, sizeof k);
    const char *open = strchr(text, '(');
    if (!open)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key \"%.200s\": expected kernel(field=value,...)@arch",
                       text);
    size_t name_len = (size_t)(open - text);
    const dc_kernel_info *info = NULL;
    for (int32_t i = 0; i < DCPTOPK_KERNEL_COUNT; i++) {
        const dc_kernel_info *ki = dc_kernel_get(i);
        if (ki && strlen(ki->name) == name_len &&
            strncmp(ki->name, text, name_len) == 0)
            info = ki;
    }
    if (!info)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key \"%.200s\": unknown kernel \"%.*s\"", text,
                       (int)(name_len > 64 ? 64 : name_len), text);
    k.kernel = info->kernel;
    const char *p = open + 1;
    uint32_t seen = 0;
    while (*p != ')') {
        if (seen && *p++ != ',')
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "key \"%.200s\": expected ',' or ')' at offset %d",
                           text, (int)(p - 1 - text));
        const char *eq = strchr(p, '=');
        size_t flen = eq ? (size_t)(eq - p) : 0;
        size_t f = dc_key_field_count;
        for (size_t i = 0; eq && i < dc_key_field_count; i++)
            if (strlen(dc_key_fields[i].name) == flen &&
                strncmp(dc_key_fields[i].name, p, flen) == 0)
                f = i;
        if (f == dc_key_field_count)
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "key \"%.200s\": unknown field \"%.*s\" at offset "
                           "%d (expected name=value)",
                           text, (int)strcspn(p, ",)=@"), p, (int)(p - text));
        const dc_key_field *kf = &dc_key_fields[f];
        p = eq + 1;
        int32_t v;
        if (parse_i32(&p, &v))
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "key \"%.200s\": %s = \"%.*s\": expected a 32-bit "
                           "integer",
                           text, kf->name, (int)strcspn(eq + 1, ",)@"),
                           eq + 1);
        if (!(info->fields & kf->bit))
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "key \"%.200s\": %s = %d: kernel %s does not "
                           "specialise on it",
                           text, kf->name, v, info->name);
        if (seen & kf->bit)
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "key \"%.200s\": field %s given twice", text,
                           kf->name);
        memcpy((char *)&k + kf->offset, &v, sizeof v);
        seen |= kf->bit;
    }
    if (seen != info->fields) {
        for (size_t i = 0; i < dc_key_field_count; i++)
            if ((info->fields & dc_key_fields[i].bit) &&
                !(seen & dc_key_fields[i].bit))
                return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                               "key \"%.200s\": field %s of kernel %s is "
                               "missing",
                               text, dc_key_fields[i].name, info->name);
    }
    p++;
    if (*p != '@')
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key \"%.200s\": expected '@arch' after ')'", text);
    p++;
    if (strlen(p) >= sizeof k.arch || !dc_arch_valid(p))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key \"%.200s\": arch \"%.40s\": expected "
                       "sm_XY[a|f]",
                       text, p);
    memcpy(k.arch, p, strlen(p) + 1);
    dcptopk_result r = dcptopk_key_check(&k);
    if (r)
        return r; /* its message names the field and value */
    *out = k;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_key_check(const dcptopk_key *key)
{
    if (!key)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "key is NULL");
    const dc_kernel_info *k = dc_kernel_get(key->kernel);
    if (!k)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->kernel = %d: no such kernel (0..%d)", key->kernel,
                       DCPTOPK_KERNEL_COUNT - 1);
    if (memchr(key->arch, '\0', sizeof key->arch) == NULL ||
        !dc_arch_valid(key->arch))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->arch = \"%.*s\": expected sm_XY[a|f]",
                       (int)sizeof key->arch, key->arch);
    for (size_t i = 0; i < dc_key_field_count; i++) {
        int32_t v = dc_key_field_value(key, i);
        if (!(k->fields & dc_key_fields[i].bit) && v != 0)
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "key->%s = %d: kernel %s does not specialise on "
                           "it (must be 0)",
                           dc_key_fields[i].name, v, k->name);
    }
    if ((k->fields & DC_F_TOPK) &&
        (key->topk < 32 || key->topk > DCPTOPK_MAX_TOPK || key->topk % 32))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->topk = %d: must be a multiple of 32 in 32..%d",
                       key->topk, DCPTOPK_MAX_TOPK);
    if ((k->fields & DC_F_LOCAL_TOPK) &&
        (key->local_topk < 32 || key->local_topk > DCPTOPK_MAX_TOPK ||
         key->local_topk % 32))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->local_topk = %d: must be a multiple of 32 in "
                       "32..%d",
                       key->local_topk, DCPTOPK_MAX_TOPK);
    if ((k->fields & DC_F_WORLD_SIZE) &&
        (key->world_size < 1 || key->world_size > DCPTOPK_MAX_WORLD_SIZE))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->world_size = %d: must be in 1..%d",
                       key->world_size, DCPTOPK_MAX_WORLD_SIZE);
    if ((k->fields & DC_F_BLOCK_SIZE) &&
        (key->block_size < 0 || key->block_size > (1 << 20)))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->block_size = %d: must be in 0..%d",
                       key->block_size, 1 << 20);
    if ((k->fields & DC_F_INTERLEAVE) &&
        (key->interleave < 1 || key->interleave > (1 << 17)))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->interleave = %d: must be in 1..%d",
                       key->interleave, 1 << 17);
    if ((k->fields & DC_F_EMIT_IDS) && (key->emit_ids < 0 || key->emit_ids > 1))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->emit_ids = %d: must be 0 or 1", key->emit_ids);
    if ((k->fields & DC_F_EXACT) && (key->exact < 0 || key->exact > 1))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->exact = %d: must be 0 or 1", key->exact);
    if ((k->fields & DC_F_LAYOUT) && (key->layout < 0 || key->layout > 3))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->layout = %d: must be 0 (rank-major), 1 "
                       "(row-major), 2 or 3 (the same with float ids)",
                       key->layout);
    if (key->kernel == DCPTOPK_KERNEL_PAIR_SELECT) {
        /* The pair select's variant: segments | log2(CTAs a row) << 5 |
         * the two-CTA shape << 7 (DC_PAIR_VARIANT in
         * kernels/pair/pair_abi.h, whose limits these are: at most 4 CTAs,
         * rows of at most 32768 candidates, at least 2048 a CTA; the shape
         * bit only on a one-CTA row of 16384). */
        const int32_t seg = key->variant & 31, split = (key->variant >> 5) & 3;
        const int32_t two = key->variant >> 7;
        const int64_t cands =
            (int64_t)(seg ? seg : key->world_size) * key->topk;
        if (key->variant < 0 || split > 2 || two > 1)
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "key->variant = %d: a pair select's is segments "
                           "+ 32 * log2(CTAs a row), with 1, 2 or 4 CTAs, "
                           "+ 128 for a row of 16384's two-CTA shape",
                           key->variant);
        if (seg != 0 && (seg > key->world_size || key->world_size % seg))
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "key->variant = %d: a pair select's segment count "
                           "(variant %% 32 = %d) must divide world_size = %d "
                           "(0 = world_size)",
                           key->variant, seg, key->world_size);
        if (split > 0 && (cands > 32768 || (cands >> split) < 2048))
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "key->variant = %d: a row of %lld candidates does "
                           "not split over %d CTAs (at most 32768 a row, at "
                           "least 2048 a CTA)",
                           key->variant, (long long)cands, 1 << split);
        if (two && (split > 0 || cands != 16384))
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "key->variant = %d: the two-CTA shape (+128) is "
                           "for a one-CTA row of 16384 candidates, not %lld "
                           "on %d CTAs",
                           key->variant, (long long)cands, 1 << split);
    } else if ((k->fields & DC_F_VARIANT) &&
               (key->variant < 0 || key->variant > 64)) {
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "key->variant = %d: must be in 0..64", key->variant);
    }
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}
