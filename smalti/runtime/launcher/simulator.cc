// smalti's CPU target: an XLA FFI handler that runs one smalti kernel in smalti's PTX
// simulator, on XLA's host buffers.
//
// The simulator is Python (smalti.sim); smalti.runtime.cpu_target installs it here, through
// smalti_set_simulator, as a C function pointer (a ctypes callback, which takes the GIL).
// Being an ordinary FFI custom call rather than a Python callback, the CPU path lowers for
// several platforms at once and its attributes serialize with jax.export.
//
// Attributes (set by smalti.runtime.jax_integration.cpu_attributes):
//   ptx        string  the kernel's PTX module
//   signature  string  the kernel's launch signature as JSON (smalti.runtime.signatures)
// Buffers: the kernel's inputs, then its outputs (written by the simulator).

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "xla/ffi/api/ffi.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace ffi = xla::ffi;

namespace {

// Runs the kernel on `buffer_count` buffers, the first `input_count` of them its inputs;
// returns 0, or nonzero after writing a NUL-terminated message (at most `capacity` bytes,
// truncated) into `error`.
using SimulateFn = int (*)(const char* ptx, std::size_t ptx_bytes, const char* signature,
                           std::size_t signature_bytes, std::size_t input_count,
                           std::size_t buffer_count, void* const* buffers,
                           const std::size_t* buffer_bytes, char* error, std::size_t capacity);

std::mutex simulator_mutex;
SimulateFn simulator = nullptr;

constexpr std::size_t kErrorCapacity = 16384;

// XLA's CPU threads flush subnormal floats to zero (x86 MXCSR FTZ and DAZ, AArch64 FPCR.FZ);
// PTX's arithmetic without .ftz keeps them, so the simulator (numpy, on this thread) runs
// with flushing off, restored when the call returns.
class KeepSubnormals {
 public:
  KeepSubnormals() {
#if defined(__x86_64__) || defined(__i386__)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ & ~(kFlushToZero | kDenormalsAreZero));
#elif defined(__aarch64__)
    saved_ = __builtin_aarch64_get_fpcr64();
    __builtin_aarch64_set_fpcr64(saved_ & ~kFpcrFlushToZero);
#endif
  }
  ~KeepSubnormals() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(saved_);
#elif defined(__aarch64__)
    __builtin_aarch64_set_fpcr64(saved_);
#endif
  }
  KeepSubnormals(const KeepSubnormals&) = delete;
  KeepSubnormals& operator=(const KeepSubnormals&) = delete;

 private:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr unsigned kFlushToZero = 0x8000;      // MXCSR.FTZ
  static constexpr unsigned kDenormalsAreZero = 0x0040;  // MXCSR.DAZ
  unsigned saved_;
#elif defined(__aarch64__)
  static constexpr std::uint64_t kFpcrFlushToZero = 1ull << 24;  // FPCR.FZ
  std::uint64_t saved_;
#endif
};

ffi::Error Simulate(ffi::RemainingArgs args, ffi::RemainingRets rets, std::string_view ptx,
                    std::string_view signature) {
  SimulateFn run;
  {
    std::lock_guard<std::mutex> lock(simulator_mutex);
    run = simulator;
  }
  if (run == nullptr) {
    return ffi::Error::Internal(
        "smalti simulator: no simulator installed in this process (import smalti and call "
        "smalti.runtime.register_targets() before running smalti kernels on the CPU)");
  }
  std::vector<void*> buffers;
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto buffer = args.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    buffers.push_back(buffer.value().untyped_data());
    sizes.push_back(buffer.value().size_bytes());
  }
  for (std::size_t i = 0; i < rets.size(); ++i) {
    auto buffer = rets.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    buffers.push_back((*buffer)->untyped_data());
    sizes.push_back((*buffer)->size_bytes());
  }
  std::string error(kErrorCapacity, '\0');
  KeepSubnormals keep_subnormals;
  int status = run(ptx.data(), ptx.size(), signature.data(), signature.size(), args.size(),
                   buffers.size(), buffers.data(), sizes.data(), error.data(), error.size());
  if (status != 0) {
    error.resize(error.find('\0') == std::string::npos ? error.size() : error.find('\0'));
    return ffi::Error::Internal(error);
  }
  return ffi::Error::Success();
}

}  // namespace

extern "C" void smalti_set_simulator(SimulateFn run) {
  std::lock_guard<std::mutex> lock(simulator_mutex);
  simulator = run;
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(SmaltiSimulate, Simulate,
                              ffi::Ffi::Bind()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<std::string_view>("ptx")
                                  .Attr<std::string_view>("signature"));
