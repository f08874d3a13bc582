// emu.h - the CUDA emulation's own controls (gpu/emu/README.md), for the
// tests that run gpu/ under it: no CUDA types, so a test includes it
// without the runtime shim.
#ifndef MTS_EMU_EMU_H
#define MTS_EMU_EMU_H

#include <cstdint>
#include <string>

namespace mts_emu {

// The seed of the schedule: the order of the blocks of a grid, of the
// threads of a block between two barriers, and of the queued work of
// concurrent streams. 0 runs everything in index order. Default: the
// environment variable MTS_GPUEMU_SEED, else 1.
void set_seed(uint64_t seed);
uint64_t get_seed();

// false: the emulated device is absent (cudaGetDeviceCount answers
// cudaErrorNoDevice), to test what callers do without a device. Default:
// present, unless the environment variable MTS_GPUEMU_DEVICES is "0".
void set_device_present(bool present);

// The last fault the execution model found (a barrier some threads of a
// block miss, a warp operation whose mask names exited lanes, a deadlock, a
// __trap, a copy outside an allocation), with the kernel, block, thread and
// source line; "" when none since the last cudaDeviceReset. Every fault is
// also printed on stderr as it happens.
std::string last_fault();

// cudaDeviceReset: frees every allocation, stream and event and clears a
// fault (a faulted device answers every call with it until then).
void reset();

struct Stats {
    uint64_t launches, blocks, threads, switches; // switches: fiber resumptions
};
Stats stats();

} // namespace mts_emu
#endif
