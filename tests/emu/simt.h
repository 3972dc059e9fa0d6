// simt.h - a cooperative SIMT emulator of ONE CUDA thread block, so that a
// CPU-only machine (CI) can run block-level device helpers of the kernel
// templates (kernels/) and compare them with simple oracles (tests/emu).
//
// Each CUDA thread is a fiber (ucontext) with its own stack, all of them run
// one at a time on the calling OS thread. A fiber runs until it reaches a
// block barrier or a warp primitive, then hands the CPU to the next fiber
// that can run; the last arrival of a barrier (the 32nd lane of a warp
// primitive) completes it and lets the waiters run again. Since a fiber is
// never preempted between those points, shared memory needs no locks and
// the atomics are plain read-modify-writes. What the emulator cannot order
// it reports instead of guessing: a barrier that not every thread reaches
// (one exited, waits at a warp primitive, or reached __syncthreads from
// another line), lanes of one warp in different primitives, a partial mask.
// run_block() abandons the block and returns that message instead of
// aborting the process, so that a test can check the detection too.
//
// Scope: 1-D blocks of at most 1024 threads (blockDim.x = the count given to
// run_block), full-mask warp primitives, 4- or 8-byte shuffle values. Memory
// is sequentially consistent (no fence or volatile matters here), so the
// emulator checks the algorithm and its barrier structure, not the memory
// model: a missing barrier between a write and another thread's read is
// not reported, though under DC_EMU_SCHEDULE=low or high (below) one
// between two warps mostly changes the result. __shared__ is `static`: one block runs at a time, and a
// kernel's shared memory starts undefined anyway (a static keeps what the
// previous block left there). A test that defines DC_EMU_POISON_SHARED
// before this header gets it poisoned instead: every __shared__ variable
// then lives in one section, which run_block fills with a non-zero byte
// before each block (not for __shared__ in inline functions, such as
// common.cuh's indptr_scan: GCC cannot put their COMDAT copies in the
// section of the others, "section type conflict").
//
// A whole kernel runs as a 1-D grid, one block after the other (run_grid:
// blockIdx and gridDim, and the launch's dynamic shared memory, refilled
// with a non-zero poison before every block). That is one legal schedule of
// the blocks; a kernel whose blocks wait for each other cannot run so. A
// polling loop must yield (yield(), or the device clock's nanosleep below):
// a fiber that spins without one never lets another thread run. The device
// clock (%globaltimer) is a counter that every read advances by
// timer_tick_ns, so a bounded wait ends on its timeout, deterministically.
//
// The including test defines the templates' constants and includes this
// header before any kernel header. It defines DC_EMU, which selects the host
// side of the few device wrappers around inline PTX (NVRTC never defines it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef DC_EMU
#define DC_EMU 1
#endif

// Stack switching confuses AddressSanitizer and ThreadSanitizer unless they
// are told (their fiber APIs): GCC defines __SANITIZE_*__, clang has
// __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define DC_EMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define DC_EMU_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DC_EMU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define DC_EMU_TSAN 1
#endif
#endif
#ifdef DC_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef DC_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif

// ------------------------------------------------- CUDA's spelling, host side

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#ifdef DC_EMU_POISON_SHARED
#define __shared__ static __attribute__((section("dc_emu_shared")))
// The linker's bounds of the section (weak: absent when nothing is in it).
extern "C" char __start_dc_emu_shared[] __attribute__((weak));
extern "C" char __stop_dc_emu_shared[] __attribute__((weak));
#else
#define __shared__ static
#endif
// GCC's spelling, not alignas: it may stand after `static` (__shared__).
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

struct uint3 {
    unsigned x, y, z;
};
using dim3 = uint3;
// The vector types keep CUDA's alignment: helpers load int4 from int arrays.
struct alignas(16) int4 {
    int x, y, z, w;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(8) int2 {
    int x, y;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{x, y, z, w};
}
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }

// Read-only loads and the float bit casts, as CUDA's intrinsics.
template <class T> inline T __ldg(const T *p) { return *p; }
inline float __int_as_float(int x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}
inline int __float_as_int(float f)
{
    int x;
    memcpy(&x, &f, sizeof x);
    return x;
}
// Toward zero; the templates call it on values inside int's range only.
inline int __float2int_rz(float f) { return (int)f; }

// CUDA's integer min and max overloads.
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }

// Byte i of the result is byte (s >> 4i) & 7 of the 8 bytes y:x (x the
// low four), as PTX prmt's default mode.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
    const unsigned long long v = (unsigned long long)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i)
        r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
    return r;
}

constexpr int warpSize = 32;

namespace dc_emu {

constexpr int WARP = 32;
constexpr unsigned FULL = 0xFFFFFFFFu;
// Deep enough for the helpers' frames, also at -O0 with the sanitizers'
// redzones (ASan clears a stack's shadow at every switch: keep it small).
#if defined(DC_EMU_ASAN) || defined(DC_EMU_TSAN)
constexpr size_t STACK_BYTES = 128u << 10;
#else
constexpr size_t STACK_BYTES = 64u << 10;
#endif

enum class State : uint8_t { runnable, barrier, warp, exited };

// The warp primitives, each a rendezvous of the warp's 32 lanes.
enum class Op : uint8_t {
    shfl,
    shfl_up,
    shfl_down,
    shfl_xor,
    ballot,
    any,
    all,
    red_or,
    red_add,
    syncwarp,
    red_max,
    red_min
};

inline const char *op_name(Op op)
{
    static const char *const names[] = {"__shfl_sync",     "__shfl_up_sync",  "__shfl_down_sync",
                                        "__shfl_xor_sync", "__ballot_sync",   "__any_sync",
                                        "__all_sync",      "__reduce_or_sync", "__reduce_add_sync",
                                        "__syncwarp",      "__reduce_max_sync", "__reduce_min_sync"};
    return names[(int)op];
}

// The order in which the fibers run (DC_EMU_SCHEDULE, read as each block
// starts). round (the default): the next thread that can run after the one
// that stopped, so the warps advance together. low: the lowest-numbered
// thread that can run, so warp 0 goes on to its next barrier before warp 1
// starts; high: the highest first. Under low and high one warp's writes
// after a point without a barrier land before another warp's reads of the
// same phase, so a missing barrier changes the result, which round mostly
// hides.
// yield() stays round-robin either way (a polling loop must let the others
// run).
enum class Schedule : uint8_t { round, low, high };

struct Fiber {
    ucontext_t ctx;
    uint3 idx;
    State state;
    Op op;             // the primitive it waits in (state == warp)
    uint64_t in;       // the value it brought there
    const char *file;  // the __syncthreads it waits at (state == barrier)
    int line;
    void *asan_fake;   // ASan's fake stack while switched out
};

// The whole emulator: one block at a time, on one OS thread.
struct Emu {
    int n = 0;                        // threads of the running block
    std::vector<Fiber> fibers;        // sized before the block starts, never during it
    std::vector<char *> stacks;       // kept from block to block (mmap'ed)
    // TSan's context of each stack, kept too: creating one costs about a
    // millisecond. Each block a context runs leaves three frames on its
    // shadow call stack (fiber_main's, which switches away for good):
    // a few hundred entries in a test, which only a report's stack shows.
    std::vector<void *> tsan;
    std::vector<int> arrived;         // a warp's lanes in its current primitive
    std::vector<uint64_t> snapshot;   // [warp][lane]: the values of its last primitive
    Schedule schedule = Schedule::round;
    int cur = -1;                     // the running fiber, -1: run_block's caller
    int prev = -1;                    // the context that switched to `cur`
    int at_barrier = 0;
    int exited = 0;
    ucontext_t main_ctx;
    const std::function<void()> *body = nullptr;
    std::string error;
    uint3 dim{0, 1, 1};
    uint3 block{0, 0, 0};             // blockIdx of the running block
    uint3 grid{1, 1, 1};              // gridDim (run_grid; 1 for run_block)
    std::vector<uint4> dyn_smem;      // the launch's dynamic shared memory
    // The device clock: every globaltimer read advances it by
    // timer_tick_ns, every nanosleep by its argument, after which
    // on_sleep (if set) runs: a test's stand-in for another agent (a peer
    // that stores a flag late).
    uint64_t clock_ns = 0;
    uint64_t timer_tick_ns = 1000000;
    std::function<void()> on_sleep;
    // The caller's stack and fake stack (ASan), learnt at the first switch.
    const void *main_bottom = nullptr;
    size_t main_size = 0;
    void *main_fake = nullptr;
    void *main_tsan = nullptr;
};

inline Emu g;

// The running fiber; device code runs only inside run_block.
inline Fiber &self()
{
    if (g.cur < 0) {
        fputs("emu: device code called outside run_block\n", stderr);
        abort();
    }
    return g.fibers[(size_t)g.cur];
}
inline unsigned lane() { return (unsigned)g.cur & 31u; }

// Called first in a context that was just switched to: ends the sanitizer's
// switch, and learns the caller's stack when it is the one we came from.
inline void after_switch()
{
#ifdef DC_EMU_ASAN
    const void *bottom;
    size_t size;
    __sanitizer_finish_switch_fiber(g.cur < 0 ? g.main_fake : self().asan_fake, &bottom, &size);
    if (g.prev < 0 && g.cur >= 0) {
        g.main_bottom = bottom;
        g.main_size = size;
    }
#endif
}

// Hands the CPU from the running context to `to` (-1: run_block's caller).
// `leaving`: the running fiber never runs again (exited or abandoned).
inline void transfer(int to, bool leaving)
{
    const int from = g.cur;
    ucontext_t *fc = from < 0 ? &g.main_ctx : &g.fibers[(size_t)from].ctx;
    ucontext_t *tc = to < 0 ? &g.main_ctx : &g.fibers[(size_t)to].ctx;
#ifdef DC_EMU_ASAN
    void **fake = leaving ? nullptr : from < 0 ? &g.main_fake : &g.fibers[(size_t)from].asan_fake;
    if (to < 0)
        __sanitizer_start_switch_fiber(fake, g.main_bottom, g.main_size);
    else
        __sanitizer_start_switch_fiber(fake, g.stacks[(size_t)to], STACK_BYTES);
#else
    (void)leaving;
#endif
#ifdef DC_EMU_TSAN
    __tsan_switch_to_fiber(to < 0 ? g.main_tsan : g.tsan[(size_t)to], 0);
#endif
    g.prev = from;
    g.cur = to;
    swapcontext(fc, tc);
    after_switch(); // resumed: g.cur is `from` again
}

// The message of a block where no thread can run and some have not exited.
inline std::string describe_deadlock()
{
    std::string s = "emu: no thread can run (a non-uniform barrier or warp primitive):";
    char buf[160];
    int bar = 0;
    for (const Fiber &f : g.fibers)
        bar += f.state == State::barrier;
    snprintf(buf, sizeof buf, " %d of %d threads exited, %d wait at __syncthreads;", g.exited, g.n, bar);
    s += buf;
    for (int w = 0; w < g.n / WARP; ++w) {
        int in_op = 0, ex = 0, at_bar = 0;
        Op op = Op::shfl;
        bool mixed = false;
        for (int l = 0; l < WARP; ++l) {
            const Fiber &f = g.fibers[(size_t)(w * WARP + l)];
            ex += f.state == State::exited;
            at_bar += f.state == State::barrier;
            if (f.state == State::warp) {
                mixed |= in_op && f.op != op;
                op = in_op++ ? op : f.op;
            }
        }
        if (in_op) {
            snprintf(buf, sizeof buf, " warp %d: %d lanes in %s%s, %d exited, %d at __syncthreads;",
                     w, in_op, op_name(op), mixed ? " and other primitives" : "", ex, at_bar);
            s += buf;
        }
    }
    return s;
}

// The running fiber stopped (waits, or left for good): run the next one
// that can, in thread order after it; when none can, the block is over
// (every thread exited) or stuck (report it). Returns once the fiber runs
// again (never when `leaving`).
inline void run_next(bool leaving)
{
    for (int k = 1; k <= g.n; ++k) {
        const int j = g.schedule == Schedule::low    ? k - 1
                      : g.schedule == Schedule::high ? g.n - k
                                                     : (g.cur + k) % g.n;
        if (g.fibers[(size_t)j].state == State::runnable) {
            transfer(j, leaving);
            return;
        }
    }
    if (g.exited < g.n && g.error.empty())
        g.error = describe_deadlock();
    transfer(-1, true);
}

// A bug of the emulated code: report it and abandon the block. (A C string:
// the abandoned fiber's frames are never unwound, so a temporary std::string
// argument would leak.)
[[noreturn]] inline void fail(const char *msg)
{
    if (g.error.empty())
        g.error = msg;
    transfer(-1, true);
    __builtin_unreachable();
}

inline void fiber_main()
{
    after_switch();
    (*g.body)();
    self().state = State::exited;
    ++g.exited;
    run_next(true);
    __builtin_unreachable();
}

// The poison of shared memory (run_grid's dynamic, DC_EMU_POISON_SHARED's
// static), every byte: a word read before the block wrote it is 0xA5A5A5A5,
// neither zero nor what the previous block left.
constexpr unsigned char SMEM_POISON = 0xA5;

// Fills the __shared__ section with the poison (DC_EMU_POISON_SHARED). Byte
// by byte through volatile, unsanitized: the section is the globals' own
// bytes, which no interceptor needs to see.
__attribute__((no_sanitize("address", "thread"))) inline void poison_shared()
{
#ifdef DC_EMU_POISON_SHARED
    for (volatile char *p = __start_dc_emu_shared; p < __stop_dc_emu_shared; ++p)
        *p = (char)SMEM_POISON;
#endif
}

// Runs body() as every thread of one block of `threads` threads (a multiple
// of 32, at most 1024), block `block` of a grid of `grid`. Returns "" when
// every thread returned, else what went wrong. Not reentrant: body must not
// call it.
inline std::string run_block_at(int threads, const std::function<void()> &body, unsigned block,
                                unsigned grid)
{
    if (g.cur >= 0)
        return "emu: run_block called from inside a block";
    if (threads < WARP || threads > 1024 || threads % WARP)
        return "emu: a block has a multiple of 32 threads, at most 1024";
    const long page = sysconf(_SC_PAGESIZE);
    while (g.stacks.size() < (size_t)threads) {
        // One guard page below each stack: an overflow faults at once.
        void *p = mmap(nullptr, STACK_BYTES + (size_t)page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED || mprotect(p, (size_t)page, PROT_NONE) != 0)
            return "emu: cannot map a fiber stack";
        g.stacks.push_back((char *)p + page);
#ifdef DC_EMU_TSAN
        g.tsan.push_back(__tsan_create_fiber(0));
#endif
    }
    const char *sched = getenv("DC_EMU_SCHEDULE");
    if (!sched || !*sched || !strcmp(sched, "round"))
        g.schedule = Schedule::round;
    else if (!strcmp(sched, "low"))
        g.schedule = Schedule::low;
    else if (!strcmp(sched, "high"))
        g.schedule = Schedule::high;
    else
        return "emu: DC_EMU_SCHEDULE is \"" + std::string(sched) + "\", not round, low or high";
    poison_shared();
    g.n = threads;
    g.dim = uint3{(unsigned)threads, 1u, 1u};
    g.block = uint3{block, 0u, 0u};
    g.grid = uint3{grid, 1u, 1u};
    g.body = &body;
    g.error.clear();
    g.at_barrier = 0;
    g.exited = 0;
    g.arrived.assign((size_t)(threads / WARP), 0);
    g.snapshot.assign((size_t)threads, 0);
    g.fibers.assign((size_t)threads, Fiber{});
#ifdef DC_EMU_TSAN
    g.main_tsan = __tsan_get_current_fiber();
#endif
    for (int i = 0; i < threads; ++i) {
        Fiber &f = g.fibers[(size_t)i];
        f.idx = uint3{(unsigned)i, 0u, 0u};
        f.state = State::runnable;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = g.stacks[(size_t)i];
        f.ctx.uc_stack.ss_size = STACK_BYTES;
        f.ctx.uc_link = nullptr; // fiber_main never returns
        makecontext(&f.ctx, fiber_main, 0);
    }
    transfer(g.schedule == Schedule::high ? threads - 1 : 0, false);
    // Back here when every thread exited or the block was abandoned.
    g.body = nullptr;
    return g.error;
}

// One block: blockIdx 0 of a grid of one.
inline std::string run_block(int threads, const std::function<void()> &body)
{
    return run_block_at(threads, body, 0u, 1u);
}

// Runs body() as a kernel launch of `blocks` blocks of `threads` threads
// with `smem_bytes` of dynamic shared memory (dc_emu_dynamic_smem), block
// 0 first. Returns "" or the first block's failure, naming the block; the
// blocks after it do not run.
inline std::string run_grid(int blocks, int threads, size_t smem_bytes,
                            const std::function<void()> &body)
{
    if (blocks < 1)
        return "emu: a grid has at least one block";
    g.dyn_smem.assign((smem_bytes + sizeof(uint4) - 1) / sizeof(uint4), uint4{});
    for (int b = 0; b < blocks; ++b) {
        if (!g.dyn_smem.empty())
            memset((void *)g.dyn_smem.data(), SMEM_POISON, g.dyn_smem.size() * sizeof(uint4));
        const std::string err = run_block_at(threads, body, (unsigned)b, (unsigned)blocks);
        if (!err.empty()) {
            g.dyn_smem.clear();
            return "block " + std::to_string(b) + ": " + err;
        }
    }
    g.dyn_smem.clear();
    return "";
}

// Hands the CPU to the next thread that can run, if any; the caller stays
// runnable and continues once the others wait or exit (a polling loop's
// back-off: the thread it waits for may be one of them).
inline void yield()
{
    for (int k = 1; k < g.n; ++k) {
        const int j = (g.cur + k) % g.n;
        if (g.fibers[(size_t)j].state == State::runnable) {
            transfer(j, false);
            return;
        }
    }
}

// The block barrier: completes when all n threads reached it, from one line.
inline void syncthreads(const char *file, int line)
{
    Fiber &f = self();
    f.state = State::barrier;
    f.file = file;
    f.line = line;
    if (++g.at_barrier < g.n) {
        run_next(false);
        return;
    }
    g.at_barrier = 0;
    for (Fiber &o : g.fibers) {
        if (o.line != line || strcmp(o.file, file) != 0) {
            char buf[512];
            snprintf(buf, sizeof buf,
                     "emu: __syncthreads reached from different lines (a non-uniform barrier): "
                     "thread %u at %s:%d, thread %u at %s:%d",
                     o.idx.x, o.file, o.line, f.idx.x, file, line);
            fail(buf);
        }
        o.state = State::runnable;
    }
}

// The rendezvous of a warp primitive: every lane brings `v`, waits for the
// other 31, then reads all 32 values from the returned row. The row stays
// valid until this lane enters its next primitive (the next one completes
// only after all 32 lanes entered it, so after every lane read this one).
inline const uint64_t *exchange(Op op, unsigned mask, uint64_t v)
{
    Fiber &f = self();
    const int w = g.cur / WARP;
    if (mask != FULL) {
        char buf[128];
        snprintf(buf, sizeof buf, "emu: %s with mask 0x%08x: only full-warp masks are emulated",
                 op_name(op), mask);
        fail(buf);
    }
    f.state = State::warp;
    f.op = op;
    f.in = v;
    if (++g.arrived[(size_t)w] < WARP) {
        run_next(false);
    } else {
        g.arrived[(size_t)w] = 0;
        for (int l = 0; l < WARP; ++l) {
            Fiber &o = g.fibers[(size_t)(w * WARP + l)];
            if (o.op != op) {
                char buf[160];
                snprintf(buf, sizeof buf, "emu: warp %d: lane %d in %s while lane %u is in %s", w, l,
                         op_name(o.op), lane(), op_name(op));
                fail(buf);
            }
            g.snapshot[(size_t)(w * WARP + l)] = o.in;
            o.state = State::runnable;
        }
    }
    return &g.snapshot[(size_t)(w * WARP)];
}

template <class T> inline uint64_t bits_of(T v)
{
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "4- or 8-byte shuffle values");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    return b;
}

template <class T> inline T from_bits(uint64_t b)
{
    T v;
    memcpy(&v, &b, sizeof v);
    return v;
}

} // namespace dc_emu

// ------------------------------------------------- the device built-ins

#define threadIdx (::dc_emu::self().idx)
#define blockDim (::dc_emu::g.dim)
#define blockIdx (::dc_emu::g.block)
#define gridDim (::dc_emu::g.grid)
// A macro, so that the barrier knows its line.
#define __syncthreads() ::dc_emu::syncthreads(__FILE__, __LINE__)

inline void __syncwarp(unsigned mask = 0xFFFFFFFFu)
{
    dc_emu::exchange(dc_emu::Op::syncwarp, mask, 0);
}

// The source lanes follow the CUDA C++ Programming Guide, "Warp Shuffle
// Functions": width splits the warp into segments of width lanes.
template <class T> inline T __shfl_sync(unsigned mask, T var, int src, int width = warpSize)
{
    const uint64_t *v = dc_emu::exchange(dc_emu::Op::shfl, mask, dc_emu::bits_of(var));
    const unsigned base = dc_emu::lane() & ~(unsigned)(width - 1);
    return dc_emu::from_bits<T>(v[base + ((unsigned)src & (unsigned)(width - 1))]);
}

template <class T> inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize)
{
    const uint64_t *v = dc_emu::exchange(dc_emu::Op::shfl_up, mask, dc_emu::bits_of(var));
    const unsigned l = dc_emu::lane();
    return dc_emu::from_bits<T>(v[(l & (unsigned)(width - 1)) >= delta ? l - delta : l]);
}

template <class T> inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize)
{
    const uint64_t *v = dc_emu::exchange(dc_emu::Op::shfl_down, mask, dc_emu::bits_of(var));
    const unsigned l = dc_emu::lane();
    return dc_emu::from_bits<T>(v[(l & (unsigned)(width - 1)) + delta < (unsigned)width ? l + delta : l]);
}

template <class T> inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize)
{
    const uint64_t *v = dc_emu::exchange(dc_emu::Op::shfl_xor, mask, dc_emu::bits_of(var));
    const unsigned l = dc_emu::lane(), s = l ^ ((unsigned)lane_mask & 31u);
    // A lane of a later segment is out of reach: the lane keeps its own.
    const unsigned end = (l & ~(unsigned)(width - 1)) + (unsigned)width;
    return dc_emu::from_bits<T>(v[s < end ? s : l]);
}

inline unsigned __ballot_sync(unsigned mask, int pred)
{
    const uint64_t *v = dc_emu::exchange(dc_emu::Op::ballot, mask, pred != 0);
    unsigned b = 0;
    for (int l = 0; l < dc_emu::WARP; ++l)
        b |= (unsigned)v[l] << l;
    return b;
}

inline int __any_sync(unsigned mask, int pred)
{
    const uint64_t *v = dc_emu::exchange(dc_emu::Op::any, mask, pred != 0);
    for (int l = 0; l < dc_emu::WARP; ++l)
        if (v[l])
            return 1;
    return 0;
}

inline int __all_sync(unsigned mask, int pred)
{
    const uint64_t *v = dc_emu::exchange(dc_emu::Op::all, mask, pred != 0);
    for (int l = 0; l < dc_emu::WARP; ++l)
        if (!v[l])
            return 0;
    return 1;
}

inline unsigned __reduce_or_sync(unsigned mask, unsigned value)
{
    const uint64_t *v = dc_emu::exchange(dc_emu::Op::red_or, mask, value);
    unsigned r = 0;
    for (int l = 0; l < dc_emu::WARP; ++l)
        r |= (unsigned)v[l];
    return r;
}

inline unsigned __reduce_add_sync(unsigned mask, unsigned value)
{
    const uint64_t *v = dc_emu::exchange(dc_emu::Op::red_add, mask, value);
    unsigned r = 0;
    for (int l = 0; l < dc_emu::WARP; ++l)
        r += (unsigned)v[l];
    return r;
}

inline int __reduce_add_sync(unsigned mask, int value)
{
    return (int)__reduce_add_sync(mask, (unsigned)value);
}

inline unsigned __reduce_max_sync(unsigned mask, unsigned value)
{
    const uint64_t *v = dc_emu::exchange(dc_emu::Op::red_max, mask, value);
    unsigned r = 0;
    for (int l = 0; l < dc_emu::WARP; ++l)
        r = (unsigned)v[l] > r ? (unsigned)v[l] : r;
    return r;
}

inline unsigned __reduce_min_sync(unsigned mask, unsigned value)
{
    const uint64_t *v = dc_emu::exchange(dc_emu::Op::red_min, mask, value);
    unsigned r = 0xFFFFFFFFu;
    for (int l = 0; l < dc_emu::WARP; ++l)
        r = (unsigned)v[l] < r ? (unsigned)v[l] : r;
    return r;
}

// common.cuh's cluster wrappers here: a block of a cluster cannot run one
// block at a time, so a test that reaches one stops.
inline uint32_t dc_emu_no_cluster()
{
    fputs("emu: thread-block clusters are not emulated\n", stderr);
    abort();
}

// The lanes below this one (PTX %lanemask_lt), for select_core.cuh's wrapper.
inline uint32_t dc_emu_lanemask_lt() { return (1u << dc_emu::lane()) - 1u; }

// The launch's dynamic shared memory (extern __shared__; run_grid's
// smem_bytes, 16-byte aligned; NULL when none), for a template's DC_EMU side.
inline void *dc_emu_dynamic_smem()
{
    return dc_emu::g.dyn_smem.empty() ? nullptr : (void *)dc_emu::g.dyn_smem.data();
}

// %globaltimer and nanosleep (the templates' DC_EMU sides): the device clock
// of the emulator (see Emu::clock_ns). A sleep lets the other threads run.
inline unsigned long long dc_emu_globaltimer()
{
    return dc_emu::g.clock_ns += dc_emu::g.timer_tick_ns;
}
inline void dc_emu_nanosleep(unsigned ns)
{
    dc_emu::g.clock_ns += ns;
    if (dc_emu::g.on_sleep)
        dc_emu::g.on_sleep();
    dc_emu::yield();
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x)
{
    unsigned r = 0;
    for (int i = 0; i < 32; ++i)
        r |= ((x >> i) & 1u) << (31 - i);
    return r;
}

// Atomics: a fiber is never preempted between barriers, so a plain
// read-modify-write is atomic here. They return the old value; the operand
// takes the pointee's type, as CUDA's overloads do (atomicAdd(&u, 1)).
namespace dc_emu {
template <class T> struct same {
    using type = T;
};
template <class T, class F> inline T rmw(T *p, F f)
{
    const T old = *p;
    *p = f(old);
    return old;
}
} // namespace dc_emu
template <class T> using dc_emu_arg = typename dc_emu::same<T>::type;
template <class T> inline T atomicAdd(T *p, dc_emu_arg<T> v)
{
    return dc_emu::rmw(p, [&](T o) { return (T)(o + v); });
}
template <class T> inline T atomicOr(T *p, dc_emu_arg<T> v)
{
    return dc_emu::rmw(p, [&](T o) { return (T)(o | v); });
}
template <class T> inline T atomicMax(T *p, dc_emu_arg<T> v)
{
    return dc_emu::rmw(p, [&](T o) { return o > v ? o : v; });
}
template <class T> inline T atomicMin(T *p, dc_emu_arg<T> v)
{
    return dc_emu::rmw(p, [&](T o) { return o < v ? o : v; });
}
template <class T> inline T atomicCAS(T *p, dc_emu_arg<T> compare, dc_emu_arg<T> v)
{
    return dc_emu::rmw(p, [&](T o) { return o == compare ? v : o; });
}

inline void __threadfence_block() {}
inline void __threadfence() {}
