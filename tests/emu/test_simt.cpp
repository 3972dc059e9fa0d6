// test_simt.cpp - the SIMT emulator itself (simt.h): its warp primitives
// against their definitions (CUDA C++ Programming Guide, "Warp Shuffle
// Functions", "Warp Vote Functions", "Warp Reduce Functions"), its barrier
// against a write-then-read-the-neighbour block, and its reports of the
// bugs it exists to catch: a barrier some threads never reach, lanes of one
// warp in different primitives, a partial mask. After each report the next
// block must run normally. And a grid: blockIdx, gridDim, the dynamic shared
// memory, polling through yield, the device clock.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "emu_test.h"

// Each lane's results of every primitive, and what the definitions say.
static bool warp_block(Rng &rng, int threads)
{
    constexpr int N = 12; // results a lane
    std::vector<uint32_t> val((size_t)threads);
    std::vector<int> src((size_t)threads), delta((size_t)threads);
    for (int t = 0; t < threads; ++t) {
        val[(size_t)t] = rng.chance(0.2) ? 0u : (uint32_t)rng.next();
        src[(size_t)t] = rng.range(0, 31);
    }
    const int d = rng.range(0, 31), width = 1 << rng.range(1, 5);
    std::vector<uint64_t> got((size_t)threads * N);
    RUN_BLOCK(threads, [&] {
        const int tid = (int)threadIdx.x;
        const uint32_t v = val[(size_t)tid];
        uint64_t *o = &got[(size_t)tid * N];
        o[0] = __shfl_sync(0xFFFFFFFFu, v, src[(size_t)tid]);
        o[1] = __shfl_sync(0xFFFFFFFFu, v, src[(size_t)tid], width);
        o[2] = __shfl_up_sync(0xFFFFFFFFu, v, (unsigned)d, width);
        o[3] = __shfl_down_sync(0xFFFFFFFFu, v, (unsigned)d, width);
        o[4] = __shfl_xor_sync(0xFFFFFFFFu, v, d, width);
        o[5] = __ballot_sync(0xFFFFFFFFu, v & 1u);
        o[6] = (uint64_t)__any_sync(0xFFFFFFFFu, v == 0);
        o[6] |= (uint64_t)__all_sync(0xFFFFFFFFu, v != 0) << 1;
        o[7] = __reduce_or_sync(0xFFFFFFFFu, v & 0xFFu);
        o[8] = __reduce_add_sync(0xFFFFFFFFu, v);
        o[9] = dc_emu_lanemask_lt();
        o[10] = __shfl_sync(0xFFFFFFFFu, (uint64_t)v << 32 | (uint64_t)tid, src[(size_t)tid]);
        __syncwarp();
        o[11] = blockDim.x;
    });
    for (int t = 0; t < threads; ++t) {
        const int lane = t & 31, w0 = t & ~31, seg = w0 + (lane & ~(width - 1));
        const uint32_t *wv = &val[(size_t)w0];
        uint32_t ballot = 0, any = 0, all = 1, orv = 0, add = 0;
        for (int l = 0; l < 32; ++l) {
            ballot |= (wv[l] & 1u) << l;
            any |= wv[l] == 0;
            all &= wv[l] != 0;
            orv |= wv[l] & 0xFFu;
            add += wv[l];
        }
        const int sx = lane ^ d;
        const uint64_t want[N] = {
            wv[src[(size_t)t]],
            val[(size_t)(seg + (src[(size_t)t] & (width - 1)))],
            (lane & (width - 1)) >= d ? val[(size_t)(t - d)] : val[(size_t)t],
            (lane & (width - 1)) + d < width ? val[(size_t)(t + d)] : val[(size_t)t],
            w0 + sx < seg + width ? val[(size_t)(w0 + sx)] : val[(size_t)t],
            ballot,
            any | all << 1,
            orv,
            add,
            (1u << lane) - 1u,
            (uint64_t)wv[src[(size_t)t]] << 32 | (uint64_t)(w0 + src[(size_t)t]),
            (uint64_t)threads};
        for (int k = 0; k < N; ++k)
            EXPECT(got[(size_t)t * N + k] == want[k],
                   "thread %d result %d (delta %d width %d): 0x%" PRIx64 ", want 0x%" PRIx64, t, k, d,
                   width, got[(size_t)t * N + k], want[k]);
    }
    return true;
}

TEST(warp_primitives)
{
    Rng rng(0x5171);
    int blocks = 0;
    for (int b = 0; b < scaled(100); ++b, ++blocks)
        CHECK(warp_block(rng, 32 * rng.range(1, 32)));
    printf("warp primitives: %d blocks of 32 to 1024 threads match their definitions\n", blocks);
}

// Every thread writes its slot, the barrier, every thread reads its
// neighbour's; shared atomics hand out each old value once.
static bool barrier_block(int threads)
{
    __shared__ int slot[1024];
    __shared__ int counter;
    std::vector<int> seen((size_t)threads), ticket((size_t)threads);
    counter = 0;
    RUN_BLOCK(threads, [&] {
        const int tid = (int)threadIdx.x;
        slot[tid] = 3 * tid + 1;
        ticket[(size_t)tid] = atomicAdd(&counter, 1);
        __syncthreads();
        seen[(size_t)tid] = slot[(tid + 1) % threads];
    });
    std::vector<int> hits((size_t)threads, 0);
    for (int t = 0; t < threads; ++t) {
        EXPECT(seen[(size_t)t] == 3 * ((t + 1) % threads) + 1, "thread %d read %d", t, seen[(size_t)t]);
        EXPECT(ticket[(size_t)t] >= 0 && ticket[(size_t)t] < threads && !hits[(size_t)ticket[(size_t)t]]++,
               "thread %d: ticket %d twice or out of range", t, ticket[(size_t)t]);
    }
    EXPECT(counter == threads, "counter %d", counter);
    return true;
}

TEST(block_barrier)
{
    for (int threads : {32, 256, 512, 1024})
        CHECK(barrier_block(threads));
    printf("__syncthreads, atomicAdd: 4 block sizes order and count as on a GPU\n");
}

// A block that must be reported, and a message that says why.
static bool reports(const char *what, int threads, const std::function<void()> &body,
                    const char *expect)
{
    const std::string err = dc_emu::run_block(threads, body);
    EXPECT(err.find(expect) != std::string::npos, "%s: reported \"%s\", want it to say \"%s\"", what,
           err.c_str(), expect);
    printf("  %s: %s\n", what, err.c_str());
    // The emulator is usable again at once.
    return barrier_block(threads);
}

TEST(reports_misuse)
{
    const auto tid = [] { return (int)threadIdx.x; };
    CHECK(reports("a warp exits before a barrier", 128,
                  [&] {
                      if (tid() >= 32)
                          __syncthreads();
                  },
                  "32 of 128 threads exited, 96 wait at __syncthreads"));
    CHECK(reports("two barriers on two lines", 64,
                  [&] {
                      if (tid() < 32)
                          __syncthreads();
                      else
                          __syncthreads();
                  },
                  "__syncthreads reached from different lines"));
    CHECK(reports("a lane skips a shuffle", 64,
                  [&] {
                      if (tid() != 3)
                          (void)__shfl_sync(0xFFFFFFFFu, tid(), 0);
                  },
                  "warp 0: 31 lanes in __shfl_sync, 1 exited"));
    CHECK(reports("a lane at a barrier, its warp in a ballot", 64,
                  [&] {
                      if (tid() == 5)
                          __syncthreads();
                      else
                          (void)__ballot_sync(0xFFFFFFFFu, 1);
                  },
                  "warp 0: 31 lanes in __ballot_sync, 0 exited, 1 at __syncthreads"));
    CHECK(reports("lanes in different primitives", 32,
                  [&] {
                      if (tid() & 1)
                          (void)__ballot_sync(0xFFFFFFFFu, 1);
                      else
                          (void)__shfl_xor_sync(0xFFFFFFFFu, 1, 1);
                  },
                  "warp 0: lane"));
    CHECK(reports("a partial mask", 32, [&] { (void)__ballot_sync(0xFFFFu, 1); },
                  "only full-warp masks"));
    printf("misuse: 6 kinds of non-uniform barrier or warp primitive reported\n");
}

// DC_EMU_SCHEDULE: the order in which the fibers run. A block whose warps
// read each other's words after a __syncwarp but no __syncthreads: round
// runs every warp to the same primitive first, which mostly hides the
// missing barrier; low (high) runs warp 0 (1) on to its exit first, so that its
// reads come before the other warp's writes. The log of events (tid before
// the __syncwarp, 1000 + tid after) shows the order: *order is 0 when the
// warps interleave, 1 when warp 0 ends before warp 1 starts, 2 for the
// reverse.
static bool schedule_block(const char *sched, int &stale, int &order)
{
    setenv("DC_EMU_SCHEDULE", sched, 1);
    std::vector<int> word(64, -1), seen(64, 0), log;
    RUN_BLOCK(64, [&] {
        const int tid = (int)threadIdx.x;
        word[(size_t)tid] = tid;
        log.push_back(tid);
        __syncwarp();
        log.push_back(1000 + tid);
        seen[(size_t)tid] = word[(size_t)((tid + 32) % 64)];
    });
    unsetenv("DC_EMU_SCHEDULE");
    EXPECT(log.size() == 128, "%s: %zu events", sched, log.size());
    int first[2] = {-1, -1}, last[2] = {-1, -1};
    for (int i = 0; i < (int)log.size(); ++i) {
        const int w = (log[(size_t)i] % 1000) / 32;
        first[w] = first[w] < 0 ? i : first[w];
        last[w] = i;
    }
    order = last[0] < first[1] ? 1 : last[1] < first[0] ? 2 : 0;
    stale = 0;
    for (int t = 0; t < 64; ++t)
        stale += seen[(size_t)t] != (t + 32) % 64;
    return true;
}

TEST(schedules)
{
    int stale = 0, order = 0;
    CHECK(schedule_block("round", stale, order));
    // Only the lane that completes warp 0's primitive, and runs on at once,
    // reads before warp 1 wrote.
    CHECK_MSG(stale == 1 && order == 0, "round: %d stale reads, order %d", stale, order);
    CHECK(schedule_block("low", stale, order));
    // The warp that runs first reads the other's words before they exist.
    CHECK_MSG(stale == 32 && order == 1, "low: %d stale reads, order %d", stale, order);
    CHECK(schedule_block("high", stale, order));
    CHECK_MSG(stale == 32 && order == 2, "high: %d stale reads, order %d", stale, order);
    setenv("DC_EMU_SCHEDULE", "random", 1);
    const std::string err = dc_emu::run_block(32, [] {});
    unsetenv("DC_EMU_SCHEDULE");
    CHECK_MSG(err.find("DC_EMU_SCHEDULE") != std::string::npos, "an unknown schedule: \"%s\"",
              err.c_str());
    printf("schedules: round mostly hides a missing barrier, low and high expose it\n");
}

// run_grid: each block sees its blockIdx and the grid's size, and dynamic
// shared memory that the block's threads share and that is poisoned again
// before the next block (the previous block's words are gone). A thread
// that polls a flag which a later thread of its block sets gets it through
// yield (a spin without one would never let that thread run); the device
// clock advances by its tick a read, and a nanosleep runs on_sleep.
TEST(grid_and_polling)
{
    constexpr int BLOCKS = 3, T = 64;
    std::vector<uint32_t> got((size_t)(BLOCKS * T)), first((size_t)BLOCKS);
    std::vector<unsigned long long> clock((size_t)BLOCKS);
    static int flag;
    int sleeps = 0;
    dc_emu::g.clock_ns = 0;
    dc_emu::g.on_sleep = [&] { ++sleeps; };
    const std::string err = dc_emu::run_grid(BLOCKS, T, T * sizeof(uint32_t), [&] {
        const unsigned tid = threadIdx.x, b = blockIdx.x;
        uint32_t *dyn = (uint32_t *)dc_emu_dynamic_smem();
        if (tid == 0) {
            first[b] = dyn[T - 1]; // before any thread of this block wrote it
            flag = 0;
        }
        __syncthreads();
        dyn[tid] = b * 1000u + tid + gridDim.x * 100000u;
        if (tid == 1) {
            while (flag == 0)
                dc_emu::yield();
            clock[b] = dc_emu_globaltimer();
            dc_emu_nanosleep(10);
        } else if (tid == T - 2) {
            flag = 1;
        }
        __syncthreads();
        got[(size_t)(b * T + tid)] = dyn[(tid + 1) % T];
    });
    dc_emu::g.on_sleep = nullptr;
    CHECK_MSG(err.empty(), "%s", err.c_str());
    for (int b = 0; b < BLOCKS; ++b) {
        CHECK_EQ(first[(size_t)b], 0xA5A5A5A5u);
        for (int t = 0; t < T; ++t)
            CHECK_EQ(got[(size_t)(b * T + t)], b * 1000u + (unsigned)((t + 1) % T) + BLOCKS * 100000u);
        CHECK_EQ(clock[(size_t)b], (unsigned long long)(b + 1) * dc_emu::g.timer_tick_ns + 10ull * b);
    }
    CHECK_EQ(sleeps, BLOCKS);
    CHECK(!dc_emu::run_grid(0, T, 0, [] {}).empty()); // reported: no blocks
    printf("grid: %d blocks of %d threads see their blockIdx and gridDim, share fresh poisoned "
           "dynamic shared memory, and poll through yield\n", BLOCKS, T);
}
