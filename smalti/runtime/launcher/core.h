// The driver-facing core of smalti's launcher: one kernel launch described as plain data
// (LaunchRequest) and the one function making every driver call for it. The XLA FFI handler
// (launcher.cc) only unpacks its arguments into a request; tests drive the same function
// through the C entry smalti_launch_core with host memory posing as device buffers.
//
// Launch order: the stream's context; the module and function (loaded once per context and
// cubin, with MAX_DYNAMIC_SHARED_SIZE_BYTES raised when the launch needs more than 48 KiB);
// one cuTensorMapEncodeTiled per tensor-map record; the debug buffer zeroed with
// cuMemsetD8Async; cuLaunchKernelEx with the cluster attribute when a cluster has more than
// one CTA. Kernel parameters: one pointer per buffer (inputs, then outputs), then the tensor
// maps, then the debug buffer's pointer when the kernel has one.

#ifndef SMALTI_RUNTIME_LAUNCHER_CORE_H_
#define SMALTI_RUNTIME_LAUNCHER_CORE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "driver.h"

namespace smalti::launcher {

// i64 entries per tensor-map record (smalti.runtime.jax_integration writes the same layout):
// arg, data type, rank, swizzle, oob fill, dims[5], byte strides[4], box[5], element
// strides[5], innermost dimension first, unused trailing entries 0.
constexpr std::size_t kRecordSize = 24;
constexpr std::size_t kLaunchSize = 10;  // grid x,y,z, block x,y,z, cluster x,y,z, shared bytes

struct LaunchRequest {
  CUstream stream = nullptr;
  const std::uint8_t* cubin = nullptr;
  std::size_t cubin_bytes = 0;
  std::string_view kernel;
  std::int64_t launch[kLaunchSize] = {};
  const std::int64_t* tensor_maps = nullptr;  // kRecordSize entries per record
  std::size_t tensor_map_entries = 0;
  std::vector<void*> buffers;  // the kernel's inputs, then its outputs
  void* debug = nullptr;       // the debug buffer, debug_bytes long; null when 0
  std::int64_t debug_bytes = 0;
};

enum class LaunchStatus : int {
  kOk = 0,
  kInvalidArgument = 1,  // the request itself is malformed (no driver call made for it)
  kDriverError = 2,      // a driver call failed: `call` and `cuda_error` say which and how
  kNoDriver = 3,         // the driver library cannot be opened or lacks an entry point
};

struct LaunchResult {
  LaunchStatus status = LaunchStatus::kOk;
  std::string call;        // the failing driver call, e.g. "cuTensorMapEncodeTiled"
  CUresult cuda_error = 0;  // its CUresult
  std::string message;     // "smalti launcher: ..." (never the cubin's bytes)

  bool ok() const { return status == LaunchStatus::kOk; }
};

// Enqueues the kernel on request.stream; see the file comment for the driver calls made.
LaunchResult Launch(const LaunchRequest& request);

// Forgets the loaded driver and every module loaded through it (tests swap the driver).
void ResetLauncher();

}  // namespace smalti::launcher

extern "C" {

// smalti_launch_core: Launch() for callers without C++ (ctypes). `launch` holds
// `launch_size` values (10 expected), `buffers` `buffer_count` device pointers. Returns the
// LaunchStatus; on failure writes the NUL-terminated failing call and message into `call` and
// `message` (truncated to their capacities) and the CUresult into *cuda_error.
int smalti_launch_core(void* stream, const std::uint8_t* cubin, std::size_t cubin_bytes,
                       const char* kernel, const std::int64_t* launch, std::size_t launch_size,
                       const std::int64_t* tensor_maps, std::size_t tensor_map_entries,
                       void* const* buffers, std::size_t buffer_count, void* debug,
                       std::int64_t debug_bytes, int* cuda_error, char* call,
                       std::size_t call_capacity, char* message, std::size_t message_capacity);

// Test hook: ResetLauncher(), so the next launch opens $SMALTI_LIBCUDA afresh.
void smalti_launcher_reset(void);
}

#endif  // SMALTI_RUNTIME_LAUNCHER_CORE_H_
