// test_rescue.cpp - the whole round-2 kernel of the exact packed merge,
// dcptopk_rescue (kernels/packed/rescue.cu), run by the SIMT emulator
// (simt.h) as a grid of a few blocks, against the library's CPU reference:
// every word of its outputs (ids, owned rows, counts, their padding and the
// rows it must leave alone), seq and the status words, bit for bit.
//
// Built once a key (tests/CMakeLists.txt, KEYS): the key's constants are
// the renderer's own #defines (`dcptopk render`, at build time, included as
// DC_EMU_PRELUDE; TEST(prelude) checks them against dcptopk_key_render), so
// the test runs the template as NVRTC compiles it, inline PTX aside (the
// wrappers' DC_EMU sides). The keys cover the three stores of a row's keys
// (rescue.cu's STORE: words in shared memory, keys in registers, keys
// decoded again from global memory).
//
// Inputs are built as the merge builds them: W ranks' logits (gen.h's
// families, ties.h's one-answer rows, rows whose K-th score is shared by a
// few keys or by hundreds) -> dcptopk_ref_pack per rank into the rank-major
// gathered buffer -> dcptopk_ref_select (the saturation words) -> each
// saturated rank's dcptopk_ref_push_list in receive slot popcount(mask &
// ((1 << r) - 1)) of row t, as push.cu stores it, with its flag
// flags[r * max_rows + t] = seq[t] + 1. The oracle is dcptopk_ref_rescue_row
// for every saturated row; on the merge-built worlds it must also equal
// dcptopk_ref_packed_merge's outputs for the rank. Every receive slot, flag,
// padding word and row the kernel must not use holds junk or a sentinel that
// must survive. Also: rows packed from given ids with duplicates, random
// words and saturation words (the kernel's whole input domain), several row
// batches a block and one row a block, a flag that lands during the wait,
// and flags that never do (DCPTOPK_RESCUE_TIMEOUT in status).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

extern "C" {
#include "dcptopk.h"
#include "gen.h"
#include "ties.h"
}

#include "emu_kernel.h"
#include "rescue.cu"
extern "C" {
#include "packed.h"
}
#undef _Static_assert

// A bool helper's call of another: a failure (already reported) returns.
#define TRY(cond)                                                              \
    do {                                                                       \
        if (!(cond))                                                           \
            return false;                                                      \
    } while (0)

namespace rt {

static_assert(THREADS == DC_RESCUE_THREADS, "the launcher's block size");
static_assert(dcsel::GID_BITS == DC_GID_BITS(WORLD), "the renderer's gid bits are the format's");

// What an output word holds before the launch; the rows the rescue must not
// touch keep it. (No id, -1 or count is this; a physical row only by a
// 2^-32 chance.)
constexpr int32_t SENTINEL = (int32_t)0x8000A5A5u;
const char *const STORE_NAME = STORE == Store::smem ? "words in shared memory"
                               : STORE == Store::reg ? "keys in registers"
                                                     : "keys re-read from global memory";

dcptopk_merge_config config()
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.kind = DCPTOPK_MERGE_PACKED;
    c.topk = TOPK;
    c.local_topk = LTOPK;
    c.world_size = WORLD;
    c.block_size = BLOCK;
    c.interleave = ILV;
    c.emit_ids = EMIT_IDS ? 1 : 0;
    c.exact = 1;
    return c;
}

// One rank's launch of the rescue: its workspace (sat, seq, receive slots,
// flags, status), the gathered round-1 rows, and its outputs, as
// dc_packed_rescue_launch passes them.
struct Launch {
    int64_t rows = 0;
    int64_t stride_rows = 0; // rank_stride_rows
    int64_t max_rows = 0;    // the workspace's
    int32_t rank = 0;
    int blocks = 3;
    uint64_t timeout_ns = 50000000; // 50 ms of the emulator's clock
    std::vector<int32_t> gathered;  // [W][stride_rows][WORDS]
    std::vector<uint32_t> sat;      // [max_rows]
    std::vector<uint32_t> seq;      // [max_rows]
    std::vector<int32_t> recv;      // [max_rows][SLOTS][PUSH_WORDS]
    std::vector<uint32_t> flags;    // [W][max_rows]
    uint32_t status[4] = {0, 0, 0, 0};
    // Outputs: ids [rows, ids_stride] and/or owned rows [rows, rows_stride]
    // + counts [rows] through the rows map.
    bool want_ids = false, want_rows = false;
    int64_t ids_stride = TOPK, rows_stride = TOPK;
    std::vector<int32_t> ids, prow, counts;
    std::vector<int32_t> req_id, block_table;
    int64_t bt_stride = 0;
    int32_t bt_cols = 0, num_reqs = 0, stride_rows_phys = 64;
    // The rank's logits: the exact select's argument check reads them.
    const uint16_t *logits = nullptr;
    int64_t logits_stride = 0, max_local_len = 0;
    const int32_t *row_ends = nullptr;
    std::vector<uint16_t> dummy_logits;
    std::vector<int32_t> dummy_ends;
    // Rows whose push never lands (timeout) or lands during the wait.
    std::vector<std::pair<int64_t, int>> stale; // (row, rank), in emulated order
    std::vector<std::pair<int64_t, int>> late;
};

uint32_t row_mask(const Launch &L, int64_t t)
{
    return (L.sat[(size_t)t] >> 16) & ((1u << WORLD) - 1u);
}

// Rows the kernel rescues: a non-empty mask of at most NSAT_MAX ranks (the
// reference refuses more; the select never writes one).
bool rescued(const Launch &L, int64_t t)
{
    const uint32_t m = row_mask(L, t);
    return m != 0u && __builtin_popcount(m) <= NSAT_MAX;
}

const int32_t *push_slot(const Launch &L, int64_t t, int s)
{
    return L.recv.data() + ((size_t)t * SLOTS + (size_t)s) * PUSH_WORDS;
}

int32_t *push_slot(Launch &L, int64_t t, int s)
{
    return L.recv.data() + ((size_t)t * SLOTS + (size_t)s) * PUSH_WORDS;
}

const int32_t *gathered_row(const Launch &L, int r, int64_t t)
{
    return L.gathered.data() + ((size_t)r * (size_t)L.stride_rows + (size_t)t) * WORDS;
}

// The buffers, junk where the kernel must not look, the outputs SENTINEL.
void alloc(Launch &L, Rng &rng, int64_t rows)
{
    L.rows = rows;
    L.stride_rows = rows + rng.range(0, 3);
    L.max_rows = rows + rng.range(0, 5);
    L.gathered.resize((size_t)WORLD * (size_t)L.stride_rows * WORDS);
    for (int32_t &x : L.gathered)
        x = (int32_t)rng.next();
    L.sat.resize((size_t)L.max_rows);
    for (uint32_t &x : L.sat)
        x = (uint32_t)rng.next();
    L.seq.resize((size_t)L.max_rows);
    for (size_t t = 0; t < L.seq.size(); ++t) // mostly 0, some later calls, one wrap
        L.seq[t] = t % 5 == 2 ? rng.below(1000) : t % 97 == 41 ? 0xFFFFFFFFu : 0u;
    L.recv.resize((size_t)L.max_rows * SLOTS * PUSH_WORDS);
    for (int32_t &x : L.recv)
        x = (int32_t)rng.next();
    L.flags.resize((size_t)WORLD * (size_t)L.max_rows);
    for (size_t i = 0; i < L.flags.size(); ++i) // stale (seq[t]) or junk
        L.flags[i] = rng.chance(0.5) ? L.seq[i % (size_t)L.max_rows] : (uint32_t)rng.next();
    L.ids_stride = TOPK + (rng.chance(0.5) ? 32 : 0);
    L.rows_stride = TOPK + (rng.chance(0.5) ? 0 : 16);
    L.ids.assign((size_t)(rows * L.ids_stride), SENTINEL);
    L.prow.assign((size_t)(rows * L.rows_stride), SENTINEL);
    L.counts.assign((size_t)rows, SENTINEL);
}

// The owned rows' map: a few requests, some rows with an invalid request,
// a table that stops before the row's last columns (those keys own no row),
// entries whose product with stride_rows wraps.
void rows_map(Launch &L, Rng &rng, int64_t max_local)
{
    L.num_reqs = rng.range(1, 4);
    L.req_id.resize((size_t)L.rows);
    for (int32_t &r : L.req_id)
        r = rng.chance(0.1) ? (rng.chance(0.5) ? -1 : L.num_reqs)
                            : (int32_t)rng.below((uint32_t)L.num_reqs);
    const int32_t blocks = (int32_t)((max_local + BLOCK - 1) / BLOCK);
    L.bt_cols = std::max(1, blocks - blocks / 5);
    L.bt_stride = L.bt_cols + rng.range(0, 3);
    L.block_table.resize((size_t)(L.num_reqs * L.bt_stride));
    for (int32_t &e : L.block_table)
        e = (int32_t)rng.below(1u << 24);
    L.stride_rows_phys = rng.chance(0.5) ? BLOCK : 0x01000193;
}

// The reference's arguments of this rank, with the given outputs.
dcptopk_select_args select_args(const Launch &L, int32_t *ids, int32_t *prow, int32_t *counts)
{
    dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
    a.gathered = L.gathered.data();
    a.rank_stride_rows = L.stride_rows;
    a.rows = L.rows;
    a.rank = L.rank;
    a.ids_out = ids;
    a.ids_out_stride = L.ids_stride;
    if (prow) {
        a.rows_map.req_id = L.req_id.data();
        a.rows_map.block_table = L.block_table.data();
        a.rows_map.block_table_stride = L.bt_stride;
        a.rows_map.block_table_cols = L.bt_cols;
        a.rows_map.num_reqs = L.num_reqs;
        a.rows_map.stride_rows = L.stride_rows_phys;
        a.rows_map.rows_out = prow;
        a.rows_map.rows_out_stride = L.rows_stride;
        a.rows_map.counts_out = counts;
    }
    a.logits = L.logits;
    a.logits_stride = L.logits_stride;
    a.max_local_len = L.max_local_len;
    a.row_ends = L.row_ends;
    return a;
}

// Logits the select's argument check accepts, for rows built from words.
void dummy_logits(Launch &L)
{
    L.dummy_logits.assign((size_t)L.rows * 8, 0);
    L.dummy_ends.assign((size_t)L.rows, 0);
    L.logits = L.dummy_logits.data();
    L.logits_stride = 8;
    L.max_local_len = 8;
    L.row_ends = L.dummy_ends.data();
}

// The flags of row t's saturated ranks: set (the push landed), except the
// rows listed stale or late.
void set_flags(Launch &L, int64_t t)
{
    const uint32_t m = row_mask(L, t);
    for (int r = 0; r < WORLD; ++r)
        if ((m >> r) & 1u)
            L.flags[(size_t)r * (size_t)L.max_rows + (size_t)t] = L.seq[(size_t)t] + 1u;
}

// ------------------------------------------------------------- statistics

// How the word path (rescue_words) takes the row: every candidate, a clean
// cut at the K-th ord16, tied keys at it ranked by comparison (at most
// TIE_MAX) or by the 64-bit radix select.
enum Path { P_ALL, P_CUT, P_TIES, P_RADIX, P_COUNT };
const char *const PATH_NAME[P_COUNT] = {"every candidate", "a clean cut", "ties by comparison",
                                        "ties by the radix select"};

struct Stats {
    int launches = 0, blocks = 0;
    long rows = 0, rescued = 0, untouched = 0;
    long path[P_COUNT] = {0, 0, 0, 0};
    long nsat[17] = {0};
    long cross = 0; // rescued rows also checked against dcptopk_ref_packed_merge
    int timeouts = 0, late = 0;
    void print(const char *what) const
    {
        printf("%s (%s): %d launches of %d blocks in all, %ld rows, %ld rescued (by saturated "
               "ranks:", what, STORE_NAME, launches, blocks, rows, rescued);
        for (int k = 1; k <= WORLD; ++k)
            if (nsat[k])
                printf(" %ldx%d", nsat[k], k);
        printf("), %ld left alone; boundary: ", untouched);
        for (int p = 0; p < P_COUNT; ++p)
            printf("%s%ld %s", p ? ", " : "", path[p], PATH_NAME[p]);
        printf("; %ld rows also equal dcptopk_ref_packed_merge's", cross);
        if (timeouts || late)
            printf("; %d timeouts, %d late pushes", timeouts, late);
        printf("\n");
    }
};

Path classify(const Launch &L, int64_t t)
{
    const uint32_t m = row_mask(L, t), tau = L.sat[(size_t)t] & 0xFFFFu;
    std::vector<uint32_t> v;
    for (int r = 0; r < WORLD; ++r) {
        if ((m >> r) & 1u) {
            const int32_t *list = push_slot(L, t, __builtin_popcount(m & ((1u << r) - 1u)));
            for (int j = 0; j < TOPK; ++j)
                if (list[j] != 0)
                    v.push_back((uint32_t)list[j] >> 16);
        } else {
            const int32_t *row = gathered_row(L, r, t);
            for (int j = 0; j < LTOPK; ++j)
                if (row[j] != 0 && ((uint32_t)row[j] >> 16) >= tau)
                    v.push_back((uint32_t)row[j] >> 16);
        }
    }
    if ((int)v.size() <= TOPK)
        return P_ALL;
    std::nth_element(v.begin(), v.begin() + (TOPK - 1), v.end(), std::greater<uint32_t>());
    const uint32_t P = v[TOPK - 1];
    long above = 0, eq = 0;
    for (uint32_t x : v) {
        above += x > P;
        eq += x == P;
    }
    const long need = TOPK - above;
    return eq <= need ? P_CUT : eq > TIE_MAX ? P_RADIX : P_TIES;
}

// ---------------------------------------------------------- the expectation

struct Want {
    std::vector<int32_t> ids, prow, counts;
    std::vector<uint32_t> seq;
    uint32_t status[4] = {0, 0, 0, 0};
};

bool is_listed(const std::vector<std::pair<int64_t, int>> &l, int64_t t)
{
    for (const auto &p : l)
        if (p.first == t)
            return true;
    return false;
}

// Every rescued row through dcptopk_ref_rescue_row, but the stale ones (the
// timeout leaves them, and seq, as they were); the first stale row in the
// emulator's order (block 0 first, a block's rows ascending) is the one the
// status names, with its first stale rank.
bool expect(const Launch &L, Want &E)
{
    E.ids = L.ids;
    E.prow = L.prow;
    E.counts = L.counts;
    E.seq = L.seq;
    const dcptopk_merge_config c = config();
    const dcptopk_select_args a = select_args(L, L.want_ids ? E.ids.data() : nullptr,
                                              L.want_rows ? E.prow.data() : nullptr,
                                              L.want_rows ? E.counts.data() : nullptr);
    for (int64_t t = 0; t < L.rows; ++t) {
        if (!rescued(L, t) || is_listed(L.stale, t))
            continue;
        const uint32_t m = row_mask(L, t);
        const int32_t *lists[16];
        for (int s = 0; s < __builtin_popcount(m); ++s)
            lists[s] = push_slot(L, t, s);
        const dcptopk_result r = dcptopk_ref_rescue_row(&c, &a, t, L.sat[(size_t)t], lists);
        EXPECT(r == DCPTOPK_SUCCESS, "dcptopk_ref_rescue_row(row %lld): %s", (long long)t,
               dcptopk_last_error(NULL));
        E.seq[(size_t)t] += 1u;
    }
    if (!L.stale.empty()) {
        E.status[0] = DC_RESCUE_STATUS_TIMEOUT;
        E.status[1] = (uint32_t)L.stale[0].first;
        E.status[2] = (uint32_t)L.stale[0].second;
        E.status[3] = L.seq[(size_t)L.stale[0].first] + 1u;
    }
    return true;
}

// ----------------------------------------------------------------- a launch

// What a failure names: the case, the row, its saturation word and (for
// ties.h's rows) what the row is.
std::string row_name(const Launch &L, int64_t t, const char *(*name_of)(int64_t))
{
    char buf[256];
    const uint32_t m = row_mask(L, t);
    snprintf(buf, sizeof buf, "row %lld (sat 0x%08x: %d saturated ranks, tau16 0x%04x; %s%s%s)",
             (long long)t, L.sat[(size_t)t], __builtin_popcount(m), L.sat[(size_t)t] & 0xFFFFu,
             !rescued(L, t) ? "not rescued" : PATH_NAME[classify(L, t)], name_of ? ": " : "",
             name_of ? name_of(t) : "");
    return buf;
}

bool check_buffer(const char *what, const char *buf, const Launch &L, const std::vector<int32_t> &got,
                  const std::vector<int32_t> &want, int64_t stride,
                  const char *(*name_of)(int64_t))
{
    for (size_t i = 0; i < got.size(); ++i)
        EXPECT(got[i] == want[i], "%s: %s[%lld] of %s: %d (0x%08x), want %d (0x%08x)%s", what, buf,
               (long long)((int64_t)i % stride), row_name(L, (int64_t)i / stride, name_of).c_str(),
               got[i], (uint32_t)got[i], want[i], (uint32_t)want[i],
               want[i] == SENTINEL ? " (left alone)" : got[i] == SENTINEL ? " (not written)" : "");
    return true;
}

// Runs the kernel on L and compares everything it may write with E.
bool launch_and_check(Launch &L, const Want &E, const char *what, Stats &st,
                      const char *(*name_of)(int64_t) = nullptr)
{
    // The launcher's own mapping of a call's outputs (packed.c).
    const dcptopk_merge_config c = config();
    const dcptopk_select_args a = select_args(L, L.want_ids ? L.ids.data() : nullptr,
                                              L.want_rows ? L.prow.data() : nullptr,
                                              L.want_rows ? L.counts.data() : nullptr);
    const dc_select_out o = dc_packed_out_param(&c, &a);
    // The late pushes land while their row waits: the emulator's clock
    // passes `at` during a nanosleep.
    std::vector<std::pair<uint32_t *, uint32_t>> land;
    for (const auto &p : L.late)
        land.emplace_back(&L.flags[(size_t)p.second * (size_t)L.max_rows + (size_t)p.first],
                          L.seq[(size_t)p.first] + 1u);
    dc_emu::g.clock_ns = 0;
    const uint64_t at = L.timeout_ns / 4; // the first waits start near 0
    int landed = 0;
    dc_emu::g.on_sleep = [&] {
        if (landed < (int)land.size() && dc_emu::g.clock_ns >= at) {
            for (auto &f : land)
                *f.first = f.second;
            landed = (int)land.size();
        }
    };
    const std::string err =
        dc_emu::run_grid(L.blocks, THREADS, DC_RESCUE_SMEM_BYTES(TOPK, LTOPK, WORLD), [&] {
            dcptopk_rescue(L.gathered.data(), L.stride_rows, L.rows, o, L.sat.data(), L.seq.data(),
                           L.recv.data(), L.flags.data(), L.max_rows, L.status, L.timeout_ns);
        });
    dc_emu::g.on_sleep = nullptr;
    EXPECT(err.empty(), "%s: %s", what, err.c_str());
    EXPECT(landed == (int)land.size(), "%s: %d late pushes never landed (no wait slept)", what,
           (int)land.size() - landed);
    if (L.want_ids)
        TRY(check_buffer(what, "ids", L, L.ids, E.ids, L.ids_stride, name_of));
    if (L.want_rows) {
        TRY(check_buffer(what, "rows", L, L.prow, E.prow, L.rows_stride, name_of));
        TRY(check_buffer(what, "counts", L, L.counts, E.counts, 1, name_of));
    }
    for (int64_t t = 0; t < L.max_rows; ++t)
        EXPECT(L.seq[(size_t)t] == E.seq[(size_t)t], "%s: seq[%lld] = %u, want %u (%s)", what,
               (long long)t, L.seq[(size_t)t], E.seq[(size_t)t],
               t < L.rows ? row_name(L, t, name_of).c_str() : "past the rows");
    for (int i = 0; i < 4; ++i)
        EXPECT(L.status[i] == E.status[i], "%s: status[%d] = %u, want %u", what, i, L.status[i],
               E.status[i]);
    ++st.launches;
    st.blocks += L.blocks;
    st.rows += L.rows;
    for (int64_t t = 0; t < L.rows; ++t) {
        if (rescued(L, t) && !is_listed(L.stale, t)) {
            ++st.rescued;
            ++st.nsat[__builtin_popcount(row_mask(L, t))];
            ++st.path[classify(L, t)];
        } else {
            ++st.untouched;
        }
    }
    st.timeouts += !L.stale.empty();
    st.late += (int)L.late.size();
    return true;
}

// ------------------------------------------------------- merge-built rows

// The outputs of launch number `n`: ids, owned rows, or both; rank 0 or
// another.
void pick_outputs(Launch &L, Rng &rng, int n)
{
    L.want_ids = n % 3 != 1;
    L.want_rows = n % 3 != 0;
    L.rank = n % 2 ? (int32_t)rng.below(WORLD) : 0;
}

// The launch of world `wd` as the merge builds it: each rank's rows packed
// (dcptopk_ref_pack, or dcptopk_ref_pack_indices of `local_ids` [W][rows][N]
// when given), the rank's select for the saturation words, the saturated
// ranks' pushes.
bool build(Launch &L, Rng &rng, const dc_world &wd, const std::vector<std::vector<int32_t>> *local_ids)
{
    const dcptopk_merge_config c = config();
    alloc(L, rng, wd.rows);
    for (int q = 0; q < WORLD; ++q) {
        dcptopk_pack_args pa = DCPTOPK_PACK_ARGS_INIT;
        pa.logits = wd.logits[q];
        pa.logits_stride = wd.stride;
        pa.max_local_len = wd.max_local_len;
        pa.row_ends = wd.row_ends[q];
        pa.rows = wd.rows;
        pa.out = L.gathered.data() + (size_t)q * (size_t)L.stride_rows * WORDS;
        dcptopk_result r;
        if (local_ids) {
            pa.local_ids = (*local_ids)[(size_t)q].data();
            r = dcptopk_ref_pack_indices(&c, &pa);
        } else {
            r = dcptopk_ref_pack(&c, &pa);
        }
        EXPECT(r == DCPTOPK_SUCCESS, "pack of rank %d: %s", q, dcptopk_last_error(NULL));
    }
    L.logits = wd.logits[L.rank];
    L.logits_stride = wd.stride;
    L.max_local_len = wd.max_local_len;
    L.row_ends = wd.row_ends[L.rank];
    if (L.want_rows)
        rows_map(L, rng, wd.max_local_len);
    std::vector<int32_t> round1((size_t)(wd.rows * TOPK));
    dcptopk_select_args a = select_args(L, round1.data(), nullptr, nullptr);
    a.ids_out_stride = TOPK;
    EXPECT(dcptopk_ref_select(&c, &a, L.sat.data()) == DCPTOPK_SUCCESS, "select: %s",
           dcptopk_last_error(NULL));
    for (int64_t t = 0; t < wd.rows; ++t) {
        const uint32_t m = row_mask(L, t);
        EXPECT(__builtin_popcount(m) <= NSAT_MAX && (L.sat[(size_t)t] >> 16) == m,
               "row %lld: saturation word 0x%08x (at most %d ranks)", (long long)t, L.sat[(size_t)t],
               NSAT_MAX);
        if (!m)
            continue;
        for (int r = 0; r < WORLD; ++r) {
            if (!((m >> r) & 1u))
                continue;
            int32_t *slot = push_slot(L, t, __builtin_popcount(m & ((1u << r) - 1u)));
            EXPECT(dcptopk_ref_push_list(&c, wd.logits[r] + t * wd.stride, wd.max_local_len,
                                         wd.row_ends[r][t], slot) == DCPTOPK_SUCCESS,
                   "push list of rank %d, row %lld: %s", r, (long long)t, dcptopk_last_error(NULL));
        }
        set_flags(L, t);
    }
    return true;
}

// dcptopk_ref_packed_merge's outputs for the rank (the whole reference
// merge from the logits) on the rows rescued: the same as the expectation
// built from the pieces above, or this test builds its inputs wrong.
bool cross_check(const Launch &L, const Want &E, const dc_world &wd, const char *what, Stats &st,
                 const char *(*name_of)(int64_t))
{
    const dcptopk_merge_config c = config();
    std::vector<int32_t> ids((size_t)(wd.rows * TOPK)), prow((size_t)(wd.rows * L.rows_stride)),
        counts((size_t)wd.rows);
    std::vector<uint32_t> sat((size_t)wd.rows);
    int32_t *ids_out[16] = {nullptr};
    uint32_t *sat_out[16] = {nullptr};
    dcptopk_rows_map maps[16];
    memset(maps, 0, sizeof maps);
    ids_out[L.rank] = ids.data();
    sat_out[L.rank] = sat.data();
    if (L.want_rows) // the launch's map, with this call's buffers
        maps[L.rank] = select_args(L, nullptr, prow.data(), counts.data()).rows_map;
    const uint16_t *logits[16];
    const int32_t *ends[16];
    for (int q = 0; q < WORLD; ++q) {
        logits[q] = wd.logits[q];
        ends[q] = wd.row_ends[q];
    }
    int64_t nres = 0;
    EXPECT(dcptopk_ref_packed_merge(&c, logits, wd.stride, wd.max_local_len, ends, wd.rows, ids_out,
                                    maps, sat_out, &nres) == DCPTOPK_SUCCESS,
           "%s: dcptopk_ref_packed_merge: %s", what, dcptopk_last_error(NULL));
    for (int64_t t = 0; t < wd.rows; ++t) {
        EXPECT(sat[(size_t)t] == L.sat[(size_t)t], "%s: row %lld: merge's sat 0x%08x, select's 0x%08x",
               what, (long long)t, sat[(size_t)t], L.sat[(size_t)t]);
        if (!rescued(L, t) || is_listed(L.stale, t)) // a timed-out row keeps round 1
            continue;
        for (int p = 0; p < TOPK; ++p) {
            if (L.want_ids)
                EXPECT(ids[(size_t)(t * TOPK + p)] == E.ids[(size_t)(t * L.ids_stride + p)],
                       "%s: %s: merge's ids[%d] = %d, rescue_row's %d", what,
                       row_name(L, t, name_of).c_str(), p, ids[(size_t)(t * TOPK + p)],
                       E.ids[(size_t)(t * L.ids_stride + p)]);
            if (L.want_rows)
                EXPECT(prow[(size_t)(t * L.rows_stride + p)] == E.prow[(size_t)(t * L.rows_stride + p)],
                       "%s: %s: merge's rows[%d] = %d, rescue_row's %d", what,
                       row_name(L, t, name_of).c_str(), p, prow[(size_t)(t * L.rows_stride + p)],
                       E.prow[(size_t)(t * L.rows_stride + p)]);
        }
        if (L.want_rows)
            EXPECT(counts[(size_t)t] == E.counts[(size_t)t],
                   "%s: %s: merge's count %d, rescue_row's %d", what,
                   row_name(L, t, name_of).c_str(), counts[(size_t)t], E.counts[(size_t)t]);
        ++st.cross;
    }
    return true;
}

// One world through build, the reference and the kernel.
bool world_case(Rng &rng, const dc_world &wd, const char *what, int n, Stats &st,
                const char *(*name_of)(int64_t) = nullptr,
                const std::vector<std::vector<int32_t>> *local_ids = nullptr, int blocks = 3)
{
    Launch L;
    pick_outputs(L, rng, n);
    L.blocks = blocks;
    TRY(build(L, rng, wd, local_ids));
    Want E;
    TRY(expect(L, E));
    // The whole merge costs W selects of every row: not on the grid's
    // hundreds of rows, whose few saturated rows the other worlds cover.
    if (!local_ids && wd.rows <= 256)
        TRY(cross_check(L, E, wd, what, st, name_of));
    return launch_and_check(L, E, what, st, name_of);
}

// ------------------------------------------------------------ the worlds

// Row t saturated in `nsat` random ranks: each gets a full row whose
// columns from a random start on, N and a few more, are boosted by +50
// (every other score is N(0,1)-like), so that its N words are all above
// the K-th one (nsat * N < K).
void saturate_row(dc_world &wd, int64_t t, int nsat, dc_rng *r)
{
    int32_t perm[16];
    for (int q = 0; q < WORLD; ++q)
        perm[q] = q;
    dc_rng_shuffle_i32(r, perm, WORLD);
    const int64_t len = wd.max_local_len, boosted = LTOPK + 16;
    for (int i = 0; i < nsat; ++i) {
        const int q = perm[i];
        uint16_t *row = wd.logits[q] + t * wd.stride;
        wd.row_ends[q][t] = (int32_t)len;
        const int64_t at = (int64_t)dc_rng_below(r, (uint64_t)(len - boosted + 1));
        for (int64_t l = at; l < at + boosted; ++l)
            row[l] = dc_f32_to_bf16(dc_bf16_to_f32(row[l]) + 50.0f);
    }
}

// test_loopback's boundary ties (tests/gpu): CONC_SAT rows whose boosted
// scores are redrawn as 2^(span * U), the others made negative, so that a
// wide span spreads the K-th score over many bf16 values and a narrow one
// puts dozens or hundreds of keys on it (span 0: as generated, +50 on a
// step of 0.25).
bool boundary_world(dc_world &wd, int64_t rows, float span, uint64_t seed)
{
    EXPECT(dc_gen_world(&wd, DC_FAM_CONC_SAT, TOPK, LTOPK, WORLD, rows, TOPK + 64, seed) == 0,
           "out of memory");
    dc_rng rng;
    dc_rng_seed(&rng, seed * 31 + 7);
    for (int q = 0; q < WORLD && span > 0.0f; q++)
        for (int64_t i = 0; i < rows * wd.stride; i++) {
            const float x = dc_bf16_to_f32(wd.logits[q][i]);
            const float y = x > 25.0f ? exp2f((float)dc_rng_uniform(&rng) * span) : -(fabsf(x) + 1.0f);
            wd.logits[q][i] = dc_f32_to_bf16(y);
        }
    return true;
}

// Given ids of the world's rows [W][rows][N]: each rank's own top-N (the
// pack's slots, decoded), then, in most rows, some slots repeat another
// slot's id (duplicates, which the contract leaves to the caller) and the
// slots are shuffled (the slot order is the caller's).
std::vector<std::vector<int32_t>> ids_with_duplicates(Rng &rng, const dc_world &wd)
{
    const dcptopk_merge_config c = config();
    std::vector<std::vector<int32_t>> ids((size_t)WORLD);
    std::vector<int32_t> packed((size_t)(wd.rows * WORDS));
    for (int q = 0; q < WORLD; ++q) {
        dcptopk_pack_args pa = DCPTOPK_PACK_ARGS_INIT;
        pa.logits = wd.logits[q];
        pa.logits_stride = wd.stride;
        pa.max_local_len = wd.max_local_len;
        pa.row_ends = wd.row_ends[q];
        pa.rows = wd.rows;
        pa.out = packed.data();
        if (dcptopk_ref_pack(&c, &pa) != DCPTOPK_SUCCESS)
            return {};
        std::vector<int32_t> &v = ids[(size_t)q];
        v.resize((size_t)(wd.rows * LTOPK));
        for (int64_t t = 0; t < wd.rows; ++t) {
            int32_t *row = v.data() + t * LTOPK;
            for (int j = 0; j < LTOPK; ++j) {
                const dcptopk_ref_candidate d =
                    dcptopk_ref_decode(packed.data() + t * WORDS, LTOPK, j, q, WORLD, ILV);
                row[j] = d.ord16 ? d.local_id : -1;
            }
            if (t % 4 == 3)
                continue; // some rows as packed
            const int dups = std::vector<int>{1, 3, 40, LTOPK / 2}[rng.below(4)];
            for (int k = 0; k < dups; ++k)
                row[rng.below(LTOPK)] = row[rng.below(LTOPK)];
            for (int j = LTOPK - 1; j > 0; --j)
                std::swap(row[j], row[rng.below((uint32_t)j + 1)]);
        }
    }
    return ids;
}

// A packed word of score ord16 and local id l, and its plane bit.
void put(int32_t *row, int n, int j, uint32_t ord, uint32_t l)
{
    row[j] = (int32_t)((ord << 16) | (0xFFFFu - (l & 0xFFFFu)));
    const uint32_t bit = 1u << (j & 31);
    uint32_t &pl = *(uint32_t *)&row[n + j / 32];
    pl = (l >> 16) & 1u ? pl | bit : pl & ~bit;
}

// Random words in a band of ord16 values, for rows of n slots: empty slots,
// local ids from a narrow range (duplicates) or all 2^17, now and then a
// word whose ord16 is 0 but which is not empty.
struct Band {
    uint32_t lo, hi, id_span;
    double empty;
    uint32_t word_ord(Rng &rng) const
    {
        return rng.chance(0.005) ? 0u : lo + rng.below(hi - lo + 1);
    }
    void fill(Rng &rng, int32_t *row, int n) const
    {
        for (int j = 0; j < n; ++j) {
            put(row, n, j, word_ord(rng), rng.below(id_span));
            if (rng.chance(empty))
                row[j] = 0; // the plane bit stays: a reader must ignore it
        }
    }
};

// A row whose K-th key is one of exactly m words of score P = tau16 in
// unsaturated ranks (their even slots, rank after rank; `dup`: one local id
// a rank, so the copies tie on the whole key and only their positions
// order them), with words above P in the odd slots between them and in the
// pushed lists, K - need in all (1 <= need < m): which copies are taken
// shows in the output order. The other unsaturated ranks' words are below
// tau16 (not candidates).
bool boundary_row(Launch &L, Rng &rng, int64_t t, int m, bool dup)
{
    const int half = LTOPK / 2;
    const int tie_ranks = (m + half - 1) / half;
    int nsat = rng.range(1, std::min(NSAT_MAX, WORLD - tie_ranks));
    uint32_t mask = 0;
    while (__builtin_popcount(mask) < nsat)
        mask |= 1u << rng.below(WORLD);
    const uint32_t P = (uint32_t)rng.range(0x3000, 0xC000);
    const int need = rng.range(1, m - 1);
    int above = TOPK - need;
    auto above_word = [&](int32_t *row, int n, int j) {
        put(row, n, j, P + 1 + rng.below(300), rng.below(1u << 17));
    };
    int ties = 0;
    for (int r = 0; r < WORLD; ++r) {
        int32_t *row = const_cast<int32_t *>(gathered_row(L, r, t));
        if ((mask >> r) & 1u)
            continue;
        const uint32_t l = rng.below(1u << 17);
        for (int j = 0; j < LTOPK; ++j) {
            if (j % 2 == 0 && ties < m) {
                put(row, LTOPK, j, P, dup ? l : rng.below(1u << 17));
                ++ties;
            } else if (j % 2 == 1 && ties > 0 && above > 0 && rng.chance(0.8)) {
                above_word(row, LTOPK, j);
                --above;
            } else {
                put(row, LTOPK, j, P - 1 - rng.below(P - 1), rng.below(1u << 17)); // below tau16
                if (rng.chance(0.3))
                    row[j] = 0;
            }
        }
    }
    for (int s = 0; s < nsat; ++s) {
        int32_t *list = push_slot(L, t, s);
        int take = s == nsat - 1 ? above : rng.range(0, above);
        above -= take;
        for (int j = 0; j < TOPK; ++j) // `take` of the K slots, at random
            if (rng.below((uint32_t)(TOPK - j)) < (uint32_t)take) {
                above_word(list, TOPK, j);
                --take;
            } else {
                list[j] = 0;
            }
    }
    L.sat[(size_t)t] = (mask << 16) | P;
    set_flags(L, t);
    const Path want = m > TIE_MAX ? P_RADIX : P_TIES;
    EXPECT(classify(L, t) == want, "boundary row of %d ties: %s, want %s", m, PATH_NAME[classify(L, t)],
           PATH_NAME[want]);
    return true;
}

// Rows of random words: the gathered rows, the saturation words (any mask
// of at most NSAT_MAX ranks, any tau16) and the pushed lists are drawn
// directly, as any producer of the format could write them. A third of the
// rows put exactly m keys on the K-th score, m around TIE_MAX among them.
bool random_case(Rng &rng, int n, Stats &st)
{
    Launch L;
    pick_outputs(L, rng, n);
    L.blocks = rng.range(1, 4);
    alloc(L, rng, rng.range(1, 10));
    dummy_logits(L);
    if (L.want_rows)
        rows_map(L, rng, 1 << 17);
    for (int64_t t = 0; t < L.rows; ++t) {
        if (t % 3 == 2) {
            const int ms[] = {2, 33, TIE_MAX - 1, TIE_MAX, TIE_MAX + 1, 200};
            TRY(boundary_row(L, rng, t, ms[rng.below(6)], rng.chance(0.5)));
            continue;
        }
        Band b;
        const uint32_t centre = (uint32_t)rng.range(0x0400, 0xFB00);
        const uint32_t half = std::vector<uint32_t>{0, 1, 3, 40, 1024}[rng.below(5)];
        b.lo = centre - half;
        b.hi = centre + half;
        b.id_span = std::vector<uint32_t>{LTOPK / 2, 4096, 1u << 17}[rng.below(3)];
        b.empty = std::vector<double>{0.0, 0.05, 0.5}[rng.below(3)];
        for (int r = 0; r < WORLD; ++r)
            b.fill(rng, const_cast<int32_t *>(gathered_row(L, r, t)), LTOPK);
        uint32_t m = 0;
        if (t % 4 != 1) { // a few rows without a saturated rank
            const int k = rng.range(1, NSAT_MAX);
            while (__builtin_popcount(m) < k)
                m |= 1u << rng.below(WORLD);
        }
        const uint32_t tau = rng.chance(0.2) ? 0u : b.lo + rng.below(b.hi - b.lo + 1);
        L.sat[(size_t)t] = (m << 16) | tau;
        for (int s = 0; s < __builtin_popcount(m); ++s) {
            Band pb = b; // the pushed lists a little higher, or the same band
            if (rng.chance(0.5))
                pb.lo = pb.lo + (pb.hi - pb.lo) / 2;
            pb.fill(rng, push_slot(L, t, s), TOPK);
        }
        set_flags(L, t);
    }
    Want E;
    TRY(expect(L, E));
    return launch_and_check(L, E, "random words", st);
}

// The select's grid loop: rows of normal scores, a few of them saturated,
// more rows than the grid's THREADS * blocks (several batches a block), or
// fewer rows than blocks (one row a block, no list).
bool grid_case(Rng &rng, int n, int blocks, int64_t rows, int saturated, Stats &st)
{
    dc_world wd;
    EXPECT(dc_gen_world(&wd, DC_FAM_NORMAL, TOPK, LTOPK, WORLD, rows, LTOPK + 128,
                        500 + (uint64_t)n) == 0,
           "out of memory");
    dc_rng r;
    dc_rng_seed(&r, 600 + (uint64_t)n);
    for (int i = 0; i < saturated; ++i)
        saturate_row(wd, (int64_t)dc_rng_below(&r, (uint64_t)rows),
                     (int)dc_rng_range(&r, 1, NSAT_MAX), &r);
    char what[96];
    snprintf(what, sizeof what, "%d blocks, %lld rows", blocks, (long long)rows);
    const bool ok = world_case(rng, wd, what, n, st, nullptr, nullptr, blocks);
    dc_world_free(&wd);
    return ok;
}

// The emulator's order of the rows of a launch: block 0's first, each
// block's in ascending order.
bool before(const Launch &L, int64_t a, int64_t b)
{
    const int64_t ba = a % L.blocks, bb = b % L.blocks;
    return ba != bb ? ba < bb : a < b;
}

// Pushes that land during the wait, and pushes that never land: CONC_SAT
// rows (every row saturated). Late: some rows' flags (one rank, or all of
// the row's) are stale when the kernel polls and set while it waits: the
// rows are rescued as usual. Stale: the first such row in the emulator's
// order times out (status = {10, row, rank, expected}), a later one gives up
// at once; both keep their round-1 outputs and seq; every other row is
// rescued.
bool flags_case(Rng &rng, int n, bool timeout, Stats &st)
{
    dc_world wd;
    EXPECT(dc_gen_world(&wd, DC_FAM_CONC_SAT, TOPK, LTOPK, WORLD, 7, TOPK + 64, 800 + (uint64_t)n) == 0,
           "out of memory");
    Launch L;
    pick_outputs(L, rng, n);
    L.blocks = 2;
    bool ok = build(L, rng, wd, nullptr);
    std::vector<int64_t> rows;
    for (int64_t t = 0; ok && t < L.rows; ++t)
        if (rescued(L, t))
            rows.push_back(t);
    std::sort(rows.begin(), rows.end(), [&](int64_t a, int64_t b) { return before(L, a, b); });
    ok = ok && rows.size() >= 3;
    if (ok) {
        // Rows 0 and 2 of the order: one rank each; late: row 1 all ranks.
        auto ranks = [&](int64_t t) {
            std::vector<int> v;
            for (int r = 0; r < WORLD; ++r)
                if ((row_mask(L, t) >> r) & 1u)
                    v.push_back(r);
            return v;
        };
        auto &list = timeout ? L.stale : L.late;
        const std::vector<int> r0 = ranks(rows[0]), r2 = ranks(rows[2]);
        list.emplace_back(rows[0], r0[rng.below((uint32_t)r0.size())]);
        list.emplace_back(rows[2], r2[rng.below((uint32_t)r2.size())]);
        if (!timeout)
            for (int r : ranks(rows[1]))
                list.emplace_back(rows[1], r);
        for (const auto &p : list) // as before the push: seq[t], the last call's
            L.flags[(size_t)p.second * (size_t)L.max_rows + (size_t)p.first] = L.seq[(size_t)p.first];
        Want E;
        ok = expect(L, E) && cross_check(L, E, wd, "flags", st, nullptr);
        ok = ok && launch_and_check(L, E, timeout ? "a push that never lands" : "late pushes", st);
    }
    dc_world_free(&wd);
    EXPECT(ok, "flags case %d (%s)", n, timeout ? "timeout" : "late");
    return true;
}

} // namespace rt

using namespace rt;

// The constants this test was compiled with are those of the renderer's
// text for the key (a renderer or a key that changes breaks the build's
// prelude, or this).
TEST(prelude)
{
    dcptopk_key key;
    CHECK(key_matches_prelude(&key));
    CHECK(key.kernel == DCPTOPK_KERNEL_RESCUE);
    CHECK_EQ(key.topk, TOPK);
    CHECK_EQ(key.local_topk, LTOPK);
    CHECK_EQ(key.world_size, WORLD);
    CHECK_EQ(key.block_size, BLOCK);
    CHECK_EQ(key.interleave, ILV);
    CHECK_EQ(key.emit_ids, EMIT_IDS ? 1 : 0);
    // The kernel's shared memory is in the section that every block poisons.
    const size_t shared = (size_t)(__stop_dc_emu_shared - __start_dc_emu_shared);
    CHECK_MSG(shared >= sizeof(dcsel::Smem) + sizeof(RescueSmem), "%zu bytes of __shared__ poisoned",
              shared);
    printf("%s: compiled with its rendered prelude; %d threads, %d key slots a thread, %s, "
           "%u bytes of dynamic shared memory, %zu of static, both poisoned before each block\n",
           DC_EMU_KEY, THREADS, KPT, STORE_NAME, DC_RESCUE_SMEM_BYTES(TOPK, LTOPK, WORLD), shared);
}

// gen.h's families, a few rows each (the rows of the families without a
// saturated rank check that the rescue leaves them alone).
TEST(families)
{
    Rng rng(0x2E5C1E);
    Stats st;
    const int fams[] = {DC_FAM_CONC_SAT,  DC_FAM_CONC_ONE,   DC_FAM_CONC_ALL, DC_FAM_INTEGER,
                        DC_FAM_ALL_EQUAL, DC_FAM_NORMAL_100, DC_FAM_NAN_ROWS, DC_FAM_SHORT_ROWS,
                        DC_FAM_EMPTY_OWNER, DC_FAM_INF,      DC_FAM_SIGNED_ZERO, DC_FAM_ALL_ZERO,
                        DC_FAM_NORMAL,    DC_FAM_LONG};
    int n = 0;
    for (int f : fams) {
        const bool heavy = f == DC_FAM_CONC_SAT || f == DC_FAM_CONC_ALL || f == DC_FAM_CONC_ONE;
        const int64_t rows = f == DC_FAM_LONG ? 2 : scaled(heavy ? 8 : 6);
        dc_world wd;
        CHECK(dc_gen_world(&wd, f, TOPK, LTOPK, WORLD, rows, 1024, 100 + (uint64_t)f) == 0);
        const bool ok = world_case(rng, wd, dc_family_name(f), n++, st);
        dc_world_free(&wd);
        CHECK(ok);
    }
    st.print("families");
    CHECK(st.rescued > 0);
}

// Rows whose K-th score is shared by a few keys, dozens, about a hundred or
// hundreds (test_loopback's boundary ties), and ties.h's one-answer rows:
// ties at the K-th score on every rank or some, full unsaturated ranks with
// ties past their top N, all-equal rows, +-0, -inf tails, NaN and short rows.
TEST(boundary_ties)
{
    Rng rng(0xB0DA7);
    Stats st;
    const float span[] = {8.0f, 2.0f, 1.0f, 0.5f, 0.0f};
    int n = 0;
    for (float sp : span) {
        dc_world wd;
        CHECK(boundary_world(wd, scaled(6), sp, 70 + (uint64_t)n));
        char what[64];
        snprintf(what, sizeof what, "boundary ties, span %g", (double)sp);
        const bool ok = world_case(rng, wd, what, n++, st);
        dc_world_free(&wd);
        CHECK(ok);
    }
    dc_world wd;
    const int64_t rows = dc_ties_world(&wd, TOPK, LTOPK, WORLD);
    CHECK(rows > 0);
    // All of it in the normal build; under the sanitizers a slice.
    if (CASE_DIV > 1) {
        const int64_t keep = rows / CASE_DIV + 1, from = rows / 3;
        for (int q = 0; q < WORLD; ++q) {
            memmove(wd.logits[q], wd.logits[q] + from * wd.stride,
                    sizeof(uint16_t) * (size_t)(keep * wd.stride));
            memmove(wd.row_ends[q], wd.row_ends[q] + from, sizeof(int32_t) * (size_t)keep);
        }
        wd.rows = keep;
    }
    const bool ok = world_case(rng, wd, "one-answer rows", n++, st,
                               CASE_DIV > 1 ? nullptr : dc_ties_row_name);
    dc_world_free(&wd);
    CHECK(ok);
    st.print("boundary ties");
    if (STORE == Store::smem && CASE_DIV == 1)
        CHECK_MSG(st.path[P_TIES] > 0 && st.path[P_RADIX] > 0,
                  "ties by comparison %ld, by the radix select %ld: both paths must run",
                  st.path[P_TIES], st.path[P_RADIX]);
}

// Rows packed from given ids (dcptopk_ref_pack_indices) with duplicates
// and in the caller's order: equal keys are taken lower position first.
TEST(duplicate_ids)
{
    Rng rng(0xD0B1E);
    Stats st;
    int n = 0;
    for (int k = 0; k < 3; ++k) {
        dc_world wd;
        if (k == 0)
            CHECK(dc_gen_world(&wd, DC_FAM_INTEGER, TOPK, LTOPK, WORLD, scaled(6), 1024, 900) == 0);
        else
            CHECK(boundary_world(wd, scaled(5), k == 1 ? 1.0f : 0.0f, 910 + (uint64_t)k));
        const std::vector<std::vector<int32_t>> ids = ids_with_duplicates(rng, wd);
        const bool ok = !ids.empty() &&
                        world_case(rng, wd, "given ids with duplicates", n++, st, nullptr, &ids);
        dc_world_free(&wd);
        CHECK(ok);
    }
    st.print("duplicate ids");
    CHECK(st.rescued > 0);
}

TEST(random_words)
{
    Rng rng(0x4A4D0);
    Stats st;
    for (int n = 0; n < scaled(40); ++n)
        CHECK(random_case(rng, n, st));
    st.print("random words");
}

// Several batches of rows a block, and one row a block.
TEST(grid)
{
    Rng rng(0x6E1D);
    Stats st;
    // The reference's selects of a thousand rows are most of the time
    // under the sanitizers: there one block's two batches only.
    if (CASE_DIV == 1)
        CHECK(grid_case(rng, 0, 2, 2 * THREADS + 77, 8, st));
    CHECK(grid_case(rng, 1, 1, THREADS + 5, 4, st));
    CHECK(grid_case(rng, 2, 3, 2, 2, st)); // rows <= blocks: a row a block
    CHECK(grid_case(rng, 3, 1, 1, 1, st));
    st.print("grid");
}

// Two flags cases from one seed: pushes that land late, or never.
static void flags_cases(uint64_t seed, bool timeout, const char *what)
{
    Rng rng(seed);
    Stats st;
    for (int n = 0; n < 2; ++n)
        CHECK(flags_case(rng, n, timeout, st));
    st.print(what);
}

TEST(late_push) { flags_cases(0x1A7E, false, "late pushes"); }

TEST(timeout) { flags_cases(0x713E, true, "timeout"); }
