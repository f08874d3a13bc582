// emu.cpp - the CUDA execution model on the CPU, for tests (README.md).
//
// A launch runs its blocks one after another, in an order drawn from the
// seed; a block's threads are fibers (ucontext) on this thread's stack
// pool. The scheduler resumes every runnable fiber once per round, in an
// order drawn afresh from the seed; a fiber runs until it reaches a barrier
// (__syncthreads, a warp operation), yields (__nanosleep) or returns. A
// barrier opens when every thread it concerns has reached it, and only
// then; what cannot open (threads at different barriers, a mask naming an
// exited lane, everyone waiting) is a fault: the launch fails with
// cudaErrorLaunchFailure (sticky, as a device fault is) and the fault is
// printed. Shared memory and device memory start each block / allocation
// filled with 0xFF bytes; under AddressSanitizer device memory is poisoned
// whenever no device operation runs, so host code that dereferences a device
// pointer is reported.
//
// All runtime calls are serialised by one lock: one emulated device, one
// kernel at a time.
#include "cuda_runtime.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// The section of every __shared__ variable (cuda_runtime.h); absent when the
// program declares none.
extern "C" {
extern char __start_mts_emu_smem[] __attribute__((weak));
extern char __stop_mts_emu_smem[] __attribute__((weak));
}

struct CUstream_st;
struct CUevent_st;

namespace mts_emu {

const uint3 *g_tid = nullptr;
BlockInfo g_block;

namespace {

// ------------------------------------------------------------ constants

// The limits of the device the device check runs on (H100, sm_90).
const unsigned kMaxThreads = 1024, kMaxBlockX = 1024, kMaxBlockY = 1024, kMaxBlockZ = 64;
const uint64_t kMaxGridX = 2147483647ull, kMaxGridYZ = 65535;
const size_t kSmemDefault = 48 * 1024, kSmemOptin = 232448;
const size_t kStackBytes = 256 * 1024;   // per fiber; ASan frames are large
const uint64_t kSpinRounds = 1u << 14;   // rounds of yields without progress: a hang
const uint64_t kPoison64 = ~0ull;        // an undefined shuffle source

uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// --------------------------------------------------------------- fibers

enum FiberState { F_RUN, F_BAR, F_WARP, F_DONE };

struct Fiber {
    ucontext_t uc;
    bool made = false;  // uc initialised by getcontext once
    char *stack = nullptr;
    bool dirty = false; // abandoned mid-kernel: its stack shadow needs clearing
    uint3 tid;
    unsigned linear;
    int state;
    // block barrier
    int bkind, bpred, bresult, bline;
    const char *bfile;
    uint64_t bcount;
    // warp operation
    int wop, warg, wwidth, wline;
    unsigned wmask;
    uint64_t wval, wresult;
    const char *wfile;
    void *fake = nullptr; // ASan's fake stack of this fiber
};

struct Exec {
    const Launch *l;
    Fiber *f;
    unsigned n;
    Fiber *cur = nullptr;
    ucontext_t sched;
    void *sched_fake = nullptr;
    const void *sched_bottom = nullptr;
    size_t sched_size = 0;
    char *dyn = nullptr;
    bool fault = false;
};
thread_local Exec *t_exec = nullptr;

char *stack_alloc()
{
    long page = sysconf(_SC_PAGESIZE);
    void *p = mmap(nullptr, kStackBytes + (size_t)page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) {
        std::fprintf(stderr, "CUDA emulation: cannot map a fiber stack\n");
        std::abort();
    }
    mprotect(p, (size_t)page, PROT_NONE); // guard: an overflow faults instead of corrupting
    return static_cast<char *>(p) + page;
}

// ---------------------------------------------------------- the device

struct Op {
    enum Kind { KERNEL, COPY, SET, RECORD, WAIT, HOSTFN } kind;
    Launch k;
    void *dst;
    const void *src;
    size_t bytes;
    int value;
    CUevent_st *ev;
    uint64_t seq;
    cudaHostFn_t fn;
};

} // namespace
} // namespace mts_emu

struct CUstream_st {
    std::deque<mts_emu::Op> q;
    unsigned flags;
};
struct CUevent_st {
    uint64_t recorded = 0, done = 0;
    double t = 0;
};

namespace mts_emu {
namespace {

struct Device {
    std::recursive_mutex mu;
    bool present = true;
    uint64_t seed = 1, launches = 0, sched_rng = 0;
    cudaError_t sticky = cudaSuccess; // a fault: every call answers it until cudaDeviceReset
    std::string fault;
    std::map<uintptr_t, size_t> allocs; // device allocations: base -> bytes
    std::set<void *> host_allocs;       // cudaMallocHost
    size_t live = 0, limit = 0;
    std::map<const void *, size_t> max_dyn; // cudaFuncSetAttribute
    std::vector<CUstream_st *> streams;
    std::set<CUevent_st *> events;
    // the fiber pool, reused by every block; never moved (a ucontext_t
    // points into itself)
    std::unique_ptr<Fiber[]> fibers{new Fiber[kMaxThreads]};
    Stats stats{};
    Device()
    {
        const char *s = std::getenv("MTS_GPUEMU_SEED");
        if (s && *s) seed = std::strtoull(s, nullptr, 0);
        s = std::getenv("MTS_GPUEMU_DEVICES"); // "0": no device, for a child process under test
        present = !(s && !std::strcmp(s, "0"));
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        size_t host = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : ((size_t)16 << 30);
        limit = std::min(host / 2, (size_t)80 << 30); // an H100's 80 GiB at most
    }
};

Device &dev()
{
    static Device *d = new Device; // never destroyed: usable from atexit handlers
    return *d;
}

typedef std::lock_guard<std::recursive_mutex> Lock;

// cudaGetLastError's state: per host thread, as CUDA keeps it
thread_local cudaError_t t_last = cudaSuccess;

cudaError_t set_last(Device &d, cudaError_t e)
{
    (void)d;
    if (e != cudaSuccess && t_last == cudaSuccess) t_last = e;
    return e;
}

std::string vformat(const char *fmt, va_list ap)
{
    char buf[1024];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    return buf;
}

// Records a fault of the execution model: the launch (or operation) fails
// and the device stays failed until cudaDeviceReset, as after a device fault.
void fault(Device &d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fault(Device &d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    d.fault = vformat(fmt, ap);
    va_end(ap);
    d.sticky = cudaErrorLaunchFailure;
    set_last(d, cudaErrorLaunchFailure);
    std::fprintf(stderr, "CUDA emulation: %s\n", d.fault.c_str());
}

// A usage error the device would answer with an error code (not a fault):
// kept in last_fault() for the test that wants the detail, not printed.
cudaError_t refuse(Device &d, cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
cudaError_t refuse(Device &d, cudaError_t e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    d.fault = vformat(fmt, ap);
    va_end(ap);
    return set_last(d, e);
}

// Device memory is visible to host code only during device operations.
void device_access(Device &d, bool on)
{
#ifdef EMU_ASAN
    for (auto &a : d.allocs) {
        if (on) ASAN_UNPOISON_MEMORY_REGION((void *)a.first, a.second);
        else ASAN_POISON_MEMORY_REGION((void *)a.first, a.second);
    }
#else
    (void)d, (void)on;
#endif
}

// [p, p + bytes) inside one device allocation?
bool in_device(Device &d, const void *p, size_t bytes)
{
    uintptr_t u = (uintptr_t)p;
    auto it = d.allocs.upper_bound(u);
    if (it == d.allocs.begin()) return false;
    --it;
    return u >= it->first && u - it->first <= it->second && bytes <= it->second - (u - it->first);
}
bool is_device(Device &d, const void *p)
{
    uintptr_t u = (uintptr_t)p;
    auto it = d.allocs.upper_bound(u);
    if (it == d.allocs.begin()) return false;
    --it;
    return u >= it->first && u < it->first + (it->second ? it->second : 1);
}

// -------------------------------------------------------- the scheduler

const char *base_name(const char *path)
{
    const char *s = std::strrchr(path ? path : "?", '/');
    return s ? s + 1 : (path ? path : "?");
}

// (noinline: swapcontext returns twice; keep that out of the callers' frames)
__attribute__((noinline)) void to_sched(Exec *e, Fiber *f, bool dying)
{
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(dying ? nullptr : &f->fake, e->sched_bottom, e->sched_size);
#else
    (void)dying;
#endif
    swapcontext(&f->uc, &e->sched);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake, &e->sched_bottom, &e->sched_size);
#endif
}

__attribute__((noinline)) void to_fiber(Exec *e, Fiber *f)
{
    e->cur = f;
    g_tid = &f->tid;
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&e->sched_fake, f->stack, kStackBytes);
#endif
    swapcontext(&e->sched, &f->uc);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(e->sched_fake, nullptr, nullptr);
#endif
    e->cur = nullptr;
}

void fiber_main()
{
    Exec *e = t_exec;
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &e->sched_bottom, &e->sched_size);
#endif
    e->l->run(e->l->closure);
    Fiber *f = e->cur;
    f->state = F_DONE;
    to_sched(e, f, true); // never resumed
    std::abort();
}

Exec *running(const char *what, const char *file, int line)
{
    Exec *e = t_exec;
    if (!e || !e->cur) {
        std::fprintf(stderr, "CUDA emulation: %s called outside a kernel (%s:%d)\n", what, base_name(file), line);
        std::abort();
    }
    return e;
}

std::string where(const Exec *e, const Fiber &f)
{
    char buf[160];
    std::snprintf(buf, sizeof buf, "kernel %s (%s:%d), block (%u,%u,%u), thread (%u,%u,%u)", e->l->name,
                  base_name(e->l->file), e->l->line, g_block.idx.x, g_block.idx.y, g_block.idx.z, f.tid.x, f.tid.y,
                  f.tid.z);
    return buf;
}

const char *const kWopName[WOP_COUNT_] = {"__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                          "__shfl_xor_sync", "__ballot_sync", "__reduce_add_sync",
                                          "__reduce_min_sync", "__reduce_max_sync", "__reduce_min_sync",
                                          "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync",
                                          "__reduce_xor_sync"};

// The results of one complete warp operation: lanes `mask` of the warp
// whose first fiber is w.
bool finish_warp_op(Device &d, Exec *e, Fiber *w, unsigned mask)
{
    int op = w[__builtin_ctz(mask)].wop;
    uint64_t ballot = 0, red = 0;
    bool first = true;
    for (unsigned j = 0; j < 32; j++) {
        if (!(mask >> j & 1u)) continue;
        Fiber &g = w[j];
        ballot |= (uint64_t)(g.wval != 0) << j;
        uint32_t v = (uint32_t)g.wval, r = (uint32_t)red;
        switch (op) {
        case WOP_RED_ADD: r = first ? v : r + v; break;
        case WOP_RED_MIN: r = first || (int32_t)v < (int32_t)r ? v : r; break;
        case WOP_RED_MAX: r = first || (int32_t)v > (int32_t)r ? v : r; break;
        case WOP_RED_UMIN: r = first || v < r ? v : r; break;
        case WOP_RED_UMAX: r = first || v > r ? v : r; break;
        case WOP_RED_AND: r = first ? v : r & v; break;
        case WOP_RED_OR: r = first ? v : r | v; break;
        case WOP_RED_XOR: r = first ? v : r ^ v; break;
        default: break;
        }
        red = r;
        first = false;
    }
    for (unsigned l = 0; l < 32; l++) {
        if (!(mask >> l & 1u)) continue;
        Fiber &f = w[l];
        uint64_t res = 0;
        if (op >= WOP_SHFL_IDX && op <= WOP_SHFL_XOR) {
            int width = f.wwidth;
            if (width < 1 || width > 32 || (width & (width - 1))) {
                fault(d, "%s with width %d (a power of two in 1..32 expected) at %s:%d in %s", kWopName[op], width,
                      base_name(f.wfile), f.wline, where(e, f).c_str());
                return false;
            }
            // out of the lane's segment of width lanes: its own value (up,
            // down, and xor into a later segment)
            unsigned seg = l & ~(unsigned)(width - 1), end = seg + (unsigned)width, src = l, a = (unsigned)f.warg;
            switch (op) {
            case WOP_SHFL_IDX: src = seg + (a & (unsigned)(width - 1)); break;
            case WOP_SHFL_UP: src = a > l - seg ? l : l - a; break;
            case WOP_SHFL_DOWN: src = a >= end - l ? l : l + a; break;
            default: src = (l ^ a) >= end ? l : (l ^ a); break;
            }
            // reading a lane outside the mask is undefined on the device
            res = (mask >> src & 1u) ? w[src].wval : kPoison64;
        } else if (op == WOP_BALLOT) {
            res = ballot;
        } else if (op != WOP_SYNC) {
            res = red;
        }
        f.wresult = res;
        f.state = F_RUN;
    }
    return true;
}

// Opens every warp operation all of whose lanes have arrived. Returns 1 if
// one opened, 0 if none could, -1 on a fault.
int release_warps(Device &d, Exec *e)
{
    int opened = 0;
    for (unsigned base = 0; base < e->n; base += 32) {
        Fiber *w = e->f + base;
        unsigned lanes = std::min(32u, e->n - base), exist = lanes == 32 ? ~0u : (1u << lanes) - 1u;
        for (unsigned l = 0; l < lanes; l++) {
            Fiber &f = w[l];
            if (f.state != F_WARP) continue;
            unsigned m = f.wmask;
            if (!(m >> l & 1u) || (m & ~exist)) {
                fault(d, "%s at %s:%d with mask 0x%08x: %s, in %s", kWopName[f.wop], base_name(f.wfile), f.wline, m,
                      !(m >> l & 1u) ? "the calling lane is not in it" : "it names lanes the block does not have",
                      where(e, f).c_str());
                return -1;
            }
            bool complete = true;
            for (unsigned j = 0; j < 32 && complete; j++) {
                if (!(m >> j & 1u)) continue;
                Fiber &g = w[j];
                if (g.state == F_DONE) {
                    fault(d, "%s at %s:%d with mask 0x%08x waits for lane %u, which has exited, in %s",
                          kWopName[f.wop], base_name(f.wfile), f.wline, m, j, where(e, f).c_str());
                    return -1;
                }
                if (g.state != F_WARP) complete = false;
                else if (g.wmask != m || g.wop != f.wop) {
                    fault(d, "lanes of one warp meet at different warp operations: %s (mask 0x%08x) at %s:%d and "
                             "%s (mask 0x%08x) at %s:%d, in %s",
                          kWopName[f.wop], m, base_name(f.wfile), f.wline, kWopName[g.wop], g.wmask,
                          base_name(g.wfile), g.wline, where(e, f).c_str());
                    return -1;
                }
            }
            if (!complete) continue;
            if (!finish_warp_op(d, e, w, m)) return -1;
            opened = 1;
        }
    }
    return opened;
}

// Runs the current block to completion; false on a fault.
bool run_block(Device &d, Exec *e, uint64_t *rng, bool shuffle)
{
    const unsigned n = e->n;
    for (unsigned i = 0; i < n; i++) {
        Fiber &f = e->f[i];
        const dim3 &bd = e->l->block;
        f.tid = uint3{i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y)};
        f.linear = i;
        f.state = F_RUN;
        f.bcount = 0;
        f.fake = nullptr;
#ifdef EMU_ASAN
        if (f.dirty) ASAN_UNPOISON_MEMORY_REGION(f.stack, kStackBytes);
#endif
        f.dirty = false;
        f.uc.uc_stack.ss_sp = f.stack;
        f.uc.uc_stack.ss_size = kStackBytes;
        f.uc.uc_link = nullptr;
        makecontext(&f.uc, fiber_main, 0);
        // swapcontext's ASan interceptor would clear the whole stack's shadow
        // at every switch (cost, and lost redzones); the fiber-switch
        // annotations tell ASan about the stacks instead
        f.uc.uc_stack.ss_size = 0;
    }
    static thread_local std::vector<unsigned> order;
    order.resize(n);
    for (unsigned i = 0; i < n; i++) order[i] = i;
    uint64_t idle = 0;
    for (;;) {
        if (shuffle)
            for (unsigned i = n; i > 1; i--) std::swap(order[i - 1], order[splitmix(rng) % i]);
        for (unsigned i : order) {
            Fiber &f = e->f[i];
            if (f.state != F_RUN) continue;
            d.stats.switches++;
            to_fiber(e, &f);
            if (e->fault) return false;
        }
        unsigned nrun = 0, nbar = 0, nwarp = 0, ndone = 0;
        for (unsigned i = 0; i < n; i++) switch (e->f[i].state) {
            case F_RUN: nrun++; break;
            case F_BAR: nbar++; break;
            case F_WARP: nwarp++; break;
            default: ndone++; break;
            }
        if (ndone == n) return true;
        if (nwarp) {
            int r = release_warps(d, e);
            if (r < 0) return false;
            if (r > 0) {
                idle = 0;
                continue;
            }
        }
        if (nrun) { // yielding threads: another round, unless nothing ever changes
            if (++idle > kSpinRounds) {
                fault(d, "kernel %s (%s:%d): threads of block (%u,%u,%u) spin without reaching a barrier or "
                         "exiting (a spin-wait on a thread that never runs?)",
                      e->l->name, base_name(e->l->file), e->l->line, g_block.idx.x, g_block.idx.y, g_block.idx.z);
                return false;
            }
            continue;
        }
        idle = 0;
        if (nwarp) { // nobody runs and no warp operation can complete
            for (unsigned i = 0; i < n; i++) {
                Fiber &f = e->f[i];
                if (f.state != F_WARP) continue;
                unsigned base = i & ~31u, missing = 0;
                for (unsigned j = 0; j < 32; j++)
                    if ((f.wmask >> j & 1u) && e->f[base + j].state != F_WARP) missing = j;
                fault(d, "deadlock: %s at %s:%d (mask 0x%08x) waits for lane %u, which waits at %s, in %s",
                      kWopName[f.wop], base_name(f.wfile), f.wline, f.wmask, missing,
                      e->f[base + missing].state == F_BAR ? "__syncthreads" : "another warp operation",
                      where(e, f).c_str());
                return false;
            }
        }
        // every live thread waits at a block barrier
        Fiber *a = nullptr;
        for (unsigned i = 0; i < n && !a; i++)
            if (e->f[i].state == F_BAR) a = &e->f[i];
        for (unsigned i = 0; i < n; i++) {
            Fiber &f = e->f[i];
            if (f.state == F_DONE) {
                fault(d, "__syncthreads at %s:%d waits for thread (%u,%u,%u), which has exited: %u of %u threads "
                         "reach it (undefined on the device), in %s",
                      base_name(a->bfile), a->bline, f.tid.x, f.tid.y, f.tid.z, nbar, n, where(e, *a).c_str());
                return false;
            }
            if (f.bline != a->bline || f.bfile != a->bfile || f.bcount != a->bcount || f.bkind != a->bkind) {
                fault(d, "threads of one block wait at different barriers: thread (%u,%u,%u) at %s:%d (its barrier "
                         "%llu), thread (%u,%u,%u) at %s:%d (its barrier %llu), in kernel %s",
                      a->tid.x, a->tid.y, a->tid.z, base_name(a->bfile), a->bline, (unsigned long long)a->bcount,
                      f.tid.x, f.tid.y, f.tid.z, base_name(f.bfile), f.bline, (unsigned long long)f.bcount,
                      e->l->name);
                return false;
            }
        }
        int cnt = 0;
        for (unsigned i = 0; i < n; i++) cnt += e->f[i].bpred != 0;
        int res = a->bkind == BAR_COUNT ? cnt : a->bkind == BAR_AND ? cnt == (int)n : cnt != 0;
        for (unsigned i = 0; i < n; i++) {
            e->f[i].bresult = res;
            e->f[i].state = F_RUN;
        }
    }
}

// Volatile stores in an uninstrumented function, not memset: the section
// holds ASan's redzones between the shared variables.
#ifdef EMU_ASAN
__attribute__((no_sanitize_address))
#endif
void poison_static_shared()
{
    if (__start_mts_emu_smem && __stop_mts_emu_smem)
        for (volatile char *p = __start_mts_emu_smem; p < __stop_mts_emu_smem; p++) *p = (char)0xFF;
}

__attribute__((noinline)) void init_context(Fiber *f) // getcontext returns twice, as swapcontext
{
    getcontext(&f->uc);
    f->made = true;
}

// A launch on the device: every block in the seeded order.
void execute_kernel(Device &d, Launch &l)
{
    if (d.sticky != cudaSuccess) return; // a failed device runs nothing more
    d.stats.launches++;
    uint64_t rng = d.seed * 0x2545F4914F6CDD1Dull + ++d.launches;
    bool shuffle = d.seed != 0;
    unsigned n = l.block.x * l.block.y * l.block.z;
    for (unsigned i = 0; i < n; i++) {
        Fiber &f = d.fibers[i];
        if (!f.stack) f.stack = stack_alloc();
        if (!f.made) init_context(&f);
    }
    char *dyn = static_cast<char *>(std::malloc(l.smem ? l.smem : 1)); // heap: ASan sees an overrun
    Exec e;
    e.l = &l;
    e.f = d.fibers.get();
    e.n = n;
    e.dyn = dyn;
    std::memset(&e.sched, 0, sizeof e.sched); // uc_stack.ss_size 0: see run_block
    Exec *saved = t_exec;
    t_exec = &e;
    device_access(d, true);
    uint64_t nb = (uint64_t)l.grid.x * l.grid.y * l.grid.z;
    // block order: i -> (a*i + c) mod nb with a odd and coprime to nb, a
    // bijection that needs no table for grids of 2^31 blocks
    uint64_t a = 1, c = 0;
    if (shuffle && nb > 1) {
        c = splitmix(&rng) % nb;
        do a = (splitmix(&rng) % nb) | 1u;
        while (std::gcd(a, nb) != 1);
    }
    for (uint64_t i = 0; i < nb; i++) {
        uint64_t b = (uint64_t)(((unsigned __int128)a * i + c) % nb);
        g_block.idx = uint3{(unsigned)(b % l.grid.x), (unsigned)(b / l.grid.x % l.grid.y),
                            (unsigned)(b / ((uint64_t)l.grid.x * l.grid.y))};
        g_block.dim = l.block;
        g_block.grid = l.grid;
        poison_static_shared();
        std::memset(dyn, 0xFF, l.smem);
        d.stats.blocks++;
        d.stats.threads += n;
        if (!run_block(d, &e, &rng, shuffle)) {
            for (unsigned k = 0; k < n; k++)
                if (e.f[k].state != F_DONE) e.f[k].dirty = true;
            break;
        }
    }
    device_access(d, false);
    t_exec = saved;
    g_tid = nullptr;
    std::free(dyn);
}

void do_copy(Device &d, void *dst, const void *src, size_t bytes)
{
    device_access(d, true);
    std::memmove(dst, src, bytes);
    device_access(d, false);
}
void do_set(Device &d, void *dst, int value, size_t bytes)
{
    device_access(d, true);
    std::memset(dst, value, bytes);
    device_access(d, false);
}

void destroy_op(Op &op)
{
    if (op.kind == Op::KERNEL && op.k.closure) op.k.destroy(op.k.closure);
    op.k.closure = nullptr;
}

void execute(Device &d, Op &op)
{
    switch (op.kind) {
    case Op::KERNEL: execute_kernel(d, op.k); break;
    case Op::COPY:
        if (d.sticky == cudaSuccess) do_copy(d, op.dst, op.src, op.bytes);
        break;
    case Op::SET:
        if (d.sticky == cudaSuccess) do_set(d, op.dst, op.value, op.bytes);
        break;
    case Op::RECORD:
        op.ev->done = std::max(op.ev->done, op.seq);
        op.ev->t = now_s();
        break;
    case Op::WAIT: break;
    case Op::HOSTFN: op.fn(op.dst); break;
    }
    destroy_op(op);
}

bool ready(const Op &op) { return op.kind != Op::WAIT || op.ev->done >= op.seq; }

// Runs queued work until every stream in scope is empty, picking the next
// stream among those whose head can run in the seeded order: work of
// different streams interleaves as it may on the device.
void drain(Device &d, bool nonblocking_too)
{
    for (;;) {
        std::vector<CUstream_st *> cand;
        bool pending = false;
        for (CUstream_st *s : d.streams) {
            if (s->q.empty() || (!nonblocking_too && (s->flags & cudaStreamNonBlocking))) continue;
            pending = true;
            if (ready(s->q.front())) cand.push_back(s);
        }
        if (!pending) return;
        if (cand.empty()) { // only possible with events recorded after the wait was queued
            fault(d, "deadlock: every stream with queued work waits on an event");
            for (CUstream_st *s : d.streams) {
                for (Op &op : s->q) destroy_op(op);
                s->q.clear();
            }
            return;
        }
        CUstream_st *s = cand[d.seed ? splitmix(&d.sched_rng) % cand.size() : 0];
        Op op = s->q.front();
        s->q.pop_front();
        execute(d, op);
    }
}

bool valid_stream(Device &d, cudaStream_t s)
{
    if (s == nullptr || s == cudaStreamLegacy) return true;
    return std::find(d.streams.begin(), d.streams.end(), s) != d.streams.end();
}

// Queues op on stream s, or runs it now on the legacy default stream (after
// the blocking streams' work, which it waits for).
cudaError_t enqueue(Device &d, cudaStream_t s, Op op)
{
    if (s == nullptr || s == cudaStreamLegacy) {
        drain(d, false);
        execute(d, op);
    } else {
        s->q.push_back(op);
    }
    return cudaSuccess;
}

// ---------------------------------------------------- copies: checking

cudaError_t check_copy(Device &d, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    if (!bytes) return cudaSuccess;
    bool dd = is_device(d, dst), sd = is_device(d, src);
    bool want_dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool want_sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind == cudaMemcpyDefault) want_dd = dd, want_sd = sd;
    else if (kind < 0 || kind > cudaMemcpyDefault)
        return refuse(d, cudaErrorInvalidMemcpyDirection, "cudaMemcpy: copy kind %d", (int)kind);
    if (dd != want_dd || sd != want_sd)
        return refuse(d, cudaErrorInvalidValue, "cudaMemcpy: kind %d but the destination is %s memory and the "
                      "source %s memory", (int)kind, dd ? "device" : "host", sd ? "device" : "host");
    if ((dd && !in_device(d, dst, bytes)) || (sd && !in_device(d, src, bytes)))
        return refuse(d, cudaErrorInvalidValue, "cudaMemcpy: %zu bytes at %p run past the end of the %s allocation",
                      bytes, dd && !in_device(d, dst, bytes) ? dst : src,
                      dd && !in_device(d, dst, bytes) ? "destination" : "source");
    return cudaSuccess;
}

const char *error_string(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchTimeout: return "the launch timed out and was terminated";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
    }
}

// Every call but the error queries answers a failed device with its fault.
#define EMU_ENTER(d)                                                  \
    Device &d = dev();                                                \
    Lock lock_(d.mu);                                                 \
    if (d.sticky != cudaSuccess) return d.sticky;                     \
    if (!d.present) return set_last(d, cudaErrorNoDevice)

} // namespace

// ------------------------------------------------ the execution model API

int block_barrier(int kind, int pred, const char *file, int line)
{
    Exec *e = running("__syncthreads", file, line);
    Fiber *f = e->cur;
    f->state = F_BAR;
    f->bkind = kind;
    f->bpred = pred;
    f->bfile = file;
    f->bline = line;
    f->bcount++;
    to_sched(e, f, false);
    return f->bresult;
}

uint64_t warp_op(int op, unsigned mask, uint64_t value, int arg, int width, const char *file, int line)
{
    Exec *e = running(kWopName[op], file, line);
    Fiber *f = e->cur;
    f->state = F_WARP;
    f->wop = op;
    f->wmask = mask;
    f->wval = value;
    f->warg = arg;
    f->wwidth = width;
    f->wfile = file;
    f->wline = line;
    to_sched(e, f, false);
    return f->wresult;
}

void yield(const char *file, int line)
{
    Exec *e = running("__nanosleep", file, line);
    to_sched(e, e->cur, false);
}

void *dynamic_shared_base()
{
    Exec *e = running("dynamic shared memory", __FILE__, __LINE__);
    return e->dyn;
}

void trap(const char *file, int line)
{
    Exec *e = running("__trap", file, line);
    Device &d = dev(); // the launch holds the lock
    fault(d, "__trap() at %s:%d in %s", base_name(file), line, where(e, *e->cur).c_str());
    e->fault = true;
    e->cur->state = F_DONE;
    to_sched(e, e->cur, true);
    std::abort(); // never resumed
}

cudaError_t func_set_attribute(const void *fn, cudaFuncAttribute attr, int value)
{
    EMU_ENTER(d);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > kSmemOptin)
            return refuse(d, cudaErrorInvalidValue, "cudaFuncSetAttribute: %d bytes of dynamic shared memory "
                          "(at most %zu)", value, kSmemOptin);
        d.max_dyn[fn] = (size_t)value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    return refuse(d, cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute %d", (int)attr);
}

void submit(const Launch &l0)
{
    Device &d = dev();
    Lock lock_(d.mu);
    Launch l = l0;
    auto drop = [&](cudaError_t e) {
        l.destroy(l.closure);
        set_last(d, e);
    };
    if (d.sticky != cudaSuccess) return drop(d.sticky);
    if (!d.present) return drop(cudaErrorNoDevice);
    uint64_t threads = (uint64_t)l.block.x * l.block.y * l.block.z;
    if (!l.grid.x || !l.grid.y || !l.grid.z || l.grid.x > kMaxGridX || l.grid.y > kMaxGridYZ ||
        l.grid.z > kMaxGridYZ || !threads || l.block.x > kMaxBlockX || l.block.y > kMaxBlockY ||
        l.block.z > kMaxBlockZ || threads > kMaxThreads) {
        refuse(d, cudaErrorInvalidConfiguration, "launch of %s (%s:%d): grid (%u,%u,%u), block (%u,%u,%u): the "
               "device takes grids up to (%llu,%llu,%llu) and blocks up to (%u,%u,%u), %u threads",
               l.name, base_name(l.file), l.line, l.grid.x, l.grid.y, l.grid.z, l.block.x, l.block.y, l.block.z,
               (unsigned long long)kMaxGridX, (unsigned long long)kMaxGridYZ, (unsigned long long)kMaxGridYZ,
               kMaxBlockX, kMaxBlockY, kMaxBlockZ, kMaxThreads);
        return drop(cudaErrorInvalidConfiguration);
    }
    auto it = d.max_dyn.find(l.fn);
    size_t max_dyn = it == d.max_dyn.end() ? kSmemDefault : it->second;
    if (l.smem > max_dyn) {
        refuse(d, cudaErrorInvalidValue, "launch of %s (%s:%d): %zu bytes of dynamic shared memory, the kernel "
               "may use %zu (cudaFuncSetAttribute raises it to %zu)", l.name, base_name(l.file), l.line, l.smem,
               max_dyn, kSmemOptin);
        return drop(cudaErrorInvalidValue);
    }
    if (!valid_stream(d, l.stream)) {
        refuse(d, cudaErrorInvalidResourceHandle, "launch of %s (%s:%d) on a stream that does not exist", l.name,
               base_name(l.file), l.line);
        return drop(cudaErrorInvalidResourceHandle);
    }
    Op op{};
    op.kind = Op::KERNEL;
    op.k = l;
    enqueue(d, l.stream, op);
}

void set_seed(uint64_t seed)
{
    Device &d = dev();
    Lock lock_(d.mu);
    d.seed = seed;
}
uint64_t get_seed()
{
    Device &d = dev();
    Lock lock_(d.mu);
    return d.seed;
}
void set_device_present(bool present)
{
    Device &d = dev();
    Lock lock_(d.mu);
    d.present = present;
    t_last = cudaSuccess; // a device (re)appearing starts without a stale error
}
std::string last_fault()
{
    Device &d = dev();
    Lock lock_(d.mu);
    return d.fault;
}
Stats stats()
{
    Device &d = dev();
    Lock lock_(d.mu);
    return d.stats;
}

} // namespace mts_emu

using namespace mts_emu;

unsigned __activemask()
{
    Exec *e = running("__activemask", __FILE__, __LINE__);
    unsigned base = e->cur->linear & ~31u, m = 0;
    for (unsigned j = 0; j < 32 && base + j < e->n; j++)
        if (e->f[base + j].state != F_DONE) m |= 1u << j;
    return m;
}

// ------------------------------------------------------------ runtime API

const char *cudaGetErrorString(cudaError_t e) { return error_string(e); }

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    default: return "cudaError";
    }
}

cudaError_t cudaGetLastError(void)
{
    Device &d = dev();
    Lock lock_(d.mu);
    cudaError_t e = t_last != cudaSuccess ? t_last : d.sticky;
    t_last = cudaSuccess; // a failed device keeps answering its fault (d.sticky)
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    Device &d = dev();
    Lock lock_(d.mu);
    return t_last != cudaSuccess ? t_last : d.sticky;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    Device &d = dev();
    Lock lock_(d.mu);
    *count = d.present ? 1 : 0;
    return d.present ? cudaSuccess : set_last(d, cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int *device)
{
    EMU_ENTER(d);
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    EMU_ENTER(d);
    return device == 0 ? cudaSuccess : set_last(d, cudaErrorInvalidDevice);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device)
{
    EMU_ENTER(d);
    if (device != 0) return set_last(d, cudaErrorInvalidDevice);
    std::memset(p, 0, sizeof *p);
    // honest about what this is: never to be read as a GPU
    std::snprintf(p->name, sizeof p->name, "Mantis CUDA emulation on the CPU (not a GPU)");
    p->totalGlobalMem = d.limit;
    p->sharedMemPerBlock = kSmemDefault;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = (int)kMaxThreads;
    p->maxThreadsDim[0] = (int)kMaxBlockX;
    p->maxThreadsDim[1] = (int)kMaxBlockY;
    p->maxThreadsDim[2] = (int)kMaxBlockZ;
    p->maxGridSize[0] = (int)kMaxGridX;
    p->maxGridSize[1] = p->maxGridSize[2] = (int)kMaxGridYZ;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->l2CacheSize = 50 << 20;
    p->maxThreadsPerMultiProcessor = 2048;
    p->sharedMemPerBlockOptin = kSmemOptin;
    p->sharedMemPerMultiprocessor = 233472;
    p->concurrentKernels = 1;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    EMU_ENTER(d);
    *total_bytes = d.limit;
    *free_bytes = d.limit - d.live;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    EMU_ENTER(d);
    drain(d, true);
    return d.sticky;
}

cudaError_t cudaDeviceReset(void)
{
    Device &d = dev();
    Lock lock_(d.mu);
    for (CUstream_st *s : d.streams) {
        for (Op &op : s->q) destroy_op(op);
        delete s;
    }
    d.streams.clear();
    for (CUevent_st *ev : d.events) delete ev;
    d.events.clear();
    device_access(d, true);
    for (auto &a : d.allocs) std::free((void *)a.first);
    d.allocs.clear();
    d.live = 0;
    d.max_dyn.clear();
    d.sticky = t_last = cudaSuccess;
    d.fault.clear();
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    *ptr = nullptr;
    EMU_ENTER(d);
    if (bytes > d.limit - d.live)
        return refuse(d, cudaErrorMemoryAllocation, "cudaMalloc: %zu bytes, %zu of %zu free", bytes,
                      d.limit - d.live, d.limit);
    void *p = std::malloc(bytes ? bytes : 1);
    if (!p) return refuse(d, cudaErrorMemoryAllocation, "cudaMalloc: %zu bytes: host memory exhausted", bytes);
    std::memset(p, 0xFF, bytes); // undefined on the device: NaN floats, -1 integers
    d.allocs[(uintptr_t)p] = bytes;
    d.live += bytes;
#ifdef EMU_ASAN
    ASAN_POISON_MEMORY_REGION(p, bytes);
#endif
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    EMU_ENTER(d);
    if (!ptr) return cudaSuccess;
    drain(d, true); // cudaFree waits for the device
    auto it = d.allocs.find((uintptr_t)ptr);
    if (it == d.allocs.end())
        return refuse(d, cudaErrorInvalidValue, "cudaFree(%p): not a live device allocation", ptr);
#ifdef EMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(ptr, it->second);
#endif
    d.live -= it->second;
    d.allocs.erase(it);
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes)
{
    *ptr = nullptr;
    EMU_ENTER(d);
    void *p = std::malloc(bytes ? bytes : 1);
    if (!p) return set_last(d, cudaErrorMemoryAllocation);
    d.host_allocs.insert(p);
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned) { return cudaMallocHost(ptr, bytes); }

cudaError_t cudaFreeHost(void *ptr)
{
    EMU_ENTER(d);
    if (!ptr) return cudaSuccess;
    drain(d, true);
    if (!d.host_allocs.erase(ptr)) return refuse(d, cudaErrorInvalidValue, "cudaFreeHost(%p): not pinned memory", ptr);
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    EMU_ENTER(d);
    cudaError_t e = check_copy(d, dst, src, bytes, kind);
    if (e != cudaSuccess || !bytes) return e;
    drain(d, false); // the legacy default stream waits for the blocking streams
    do_copy(d, dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream)
{
    EMU_ENTER(d);
    if (!valid_stream(d, stream)) return set_last(d, cudaErrorInvalidResourceHandle);
    cudaError_t e = check_copy(d, dst, src, bytes, kind);
    if (e != cudaSuccess || !bytes) return e;
    Op op{};
    op.kind = Op::COPY;
    op.dst = dst;
    op.src = src;
    op.bytes = bytes;
    return enqueue(d, stream, op);
}

cudaError_t cudaMemset(void *dst, int value, size_t bytes) { return cudaMemsetAsync(dst, value, bytes, nullptr); }

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream)
{
    EMU_ENTER(d);
    if (!valid_stream(d, stream)) return set_last(d, cudaErrorInvalidResourceHandle);
    if (!bytes) return cudaSuccess;
    if (!in_device(d, dst, bytes))
        return refuse(d, cudaErrorInvalidValue, "cudaMemset: %zu bytes at %p are not inside a device allocation",
                      bytes, dst);
    Op op{};
    op.kind = Op::SET;
    op.dst = dst;
    op.value = value;
    op.bytes = bytes;
    return enqueue(d, stream, op);
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags)
{
    EMU_ENTER(d);
    CUstream_st *s = new CUstream_st;
    s->flags = flags;
    d.streams.push_back(s);
    *stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    EMU_ENTER(d);
    auto it = std::find(d.streams.begin(), d.streams.end(), stream);
    if (stream == nullptr || it == d.streams.end()) return set_last(d, cudaErrorInvalidResourceHandle);
    drain(d, true); // its queued work still runs
    d.streams.erase(std::find(d.streams.begin(), d.streams.end(), stream));
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    EMU_ENTER(d);
    if (!valid_stream(d, stream)) return set_last(d, cudaErrorInvalidResourceHandle);
    drain(d, true);
    return d.sticky;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) { return cudaStreamSynchronize(stream); }

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned)
{
    EMU_ENTER(d);
    if (!valid_stream(d, stream) || !d.events.count(event)) return set_last(d, cudaErrorInvalidResourceHandle);
    Op op{};
    op.kind = Op::WAIT;
    op.ev = event;
    op.seq = event->recorded;
    if (stream == nullptr || stream == cudaStreamLegacy) {
        drain(d, true);
        return d.sticky;
    }
    return enqueue(d, stream, op);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    EMU_ENTER(d);
    if (!valid_stream(d, stream)) return set_last(d, cudaErrorInvalidResourceHandle);
    Op op{};
    op.kind = Op::HOSTFN;
    op.fn = fn;
    op.dst = userData;
    return enqueue(d, stream, op);
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned)
{
    EMU_ENTER(d);
    CUevent_st *ev = new CUevent_st;
    d.events.insert(ev);
    *event = ev;
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    EMU_ENTER(d);
    if (!d.events.erase(event)) return set_last(d, cudaErrorInvalidResourceHandle);
    // a queued wait on it still holds the pointer: keep it until the queues drain
    drain(d, true);
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    EMU_ENTER(d);
    if (!valid_stream(d, stream) || !d.events.count(event)) return set_last(d, cudaErrorInvalidResourceHandle);
    Op op{};
    op.kind = Op::RECORD;
    op.ev = event;
    op.seq = ++event->recorded;
    return enqueue(d, stream, op);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    EMU_ENTER(d);
    if (!d.events.count(event)) return set_last(d, cudaErrorInvalidResourceHandle);
    drain(d, true);
    return d.sticky;
}

cudaError_t cudaEventQuery(cudaEvent_t event) { return cudaEventSynchronize(event); }

// Host wall time between the two events' executions: a property of the
// emulation, never of a GPU.
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    EMU_ENTER(d);
    if (!d.events.count(start) || !d.events.count(end)) return set_last(d, cudaErrorInvalidResourceHandle);
    if (!start->done || !end->done) return set_last(d, cudaErrorNotReady);
    *ms = (float)((end->t - start->t) * 1e3);
    return cudaSuccess;
}

void mts_emu::reset() { cudaDeviceReset(); }
