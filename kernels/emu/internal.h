// internal.h — what the emulator's runtime.cpp and host.cpp share; not for
// kernels.
#ifndef TW_EMU_INTERNAL_H
#define TW_EMU_INTERNAL_H

#include <string>

#include "tw_emu.h"

namespace tw_emu {

// Per-OS-thread dynamic shared memory, in bytes (H100: 228 KiB per SM).
constexpr size_t kSmemBytes = 228 * 1024;

void set_last_error(cudaError_t e);
// Dynamic shared memory a launch of func may ask for on the current
// context's device: 48 KiB unless raised there with cudaFuncSetAttribute.
size_t func_smem_limit(const void *func);
// cudaSuccess if work may be queued on stream from this thread: the stream
// belongs to the current context. Otherwise the error, and why in *why.
cudaError_t check_stream(cudaStream_t stream, std::string *why);
// When the launch's stream is capturing, keeps the launch in the graph
// (cloning ctx) and returns true, with *err the launch's result; otherwise
// returns false.
bool capture_launch(const LaunchConfig &c, void (*body)(void *), void *ctx, cudaError_t *err);
// Called after a launch on stream has run: delivers an armed kernel fault to
// the stream's context.
void after_launch(cudaStream_t stream);
// The ceiling cudaFuncSetAttribute accepts (227 KiB, or TW_EMU_SMEM_KB).
size_t smem_optin_limit();
// An environment variable as a number, or def when unset or malformed.
long env_long(const char *name, long def);

namespace banks {
// Around each block (runtime.cpp): the bank counts of include/tw_emu_banks.h
// start empty, and at the end are added to the process's table under the
// kernel's name.
void block_begin();
void block_end(const char *kernel);
} // namespace banks

} // namespace tw_emu

#endif
