// The driver-facing core of smalti's launcher: one kernel launch described as plain data
// (LaunchRequest) and the one function making every driver call for it. The XLA FFI handler
// (launcher.cc) only unpacks its arguments into a request; tests drive the same function
// through the C entry smalti_launch_core with host memory posing as device buffers.
//
// Launch order: the stream's context; the module and function (loaded once per context and
// cubin, with MAX_DYNAMIC_SHARED_SIZE_BYTES raised when the launch needs more than 48 KiB);
// one cuTensorMapEncodeTiled per tensor-map record; the debug buffer zeroed with
// cuMemsetD8Async; cuLaunchKernelEx with the cluster attribute when a cluster has more than
// one CTA, between two cuEventRecord while the kernel is being timed (timing.h). Kernel parameters: one pointer per buffer (inputs, then outputs), then the tensor
// maps, then the debug buffer's pointer when the kernel has one.
//
// A collective kernel (collective.devices > 0) launches once per device of its group: after
// loading its function, each call reads its rank buffer (i32[2] in device memory: index along
// the mesh axis, group index) to the host with cuMemcpyDtoHAsync + cuStreamSynchronize (a
// host wait for the stream's earlier work, on every launch: the price of learning the rank
// without a GPU-side rendezvous), learns its CUDA ordinal (cuCtxGetDevice), and meets the
// other calls of its group (group.h); the group's symmetric heap is made at its first launch
// (symmetric_heap.h). In a process that initialised NVSHMEM (nvshmem.h: a mesh axis across
// processes, one GPU each) the call meets no one locally and takes its heap from NVSHMEM.
// Its tensor maps over symmetric buffers are encoded once per device of the group, and three
// more `.u64` parameters follow the debug buffer's pointer: the rank buffer's address (its
// element 0 is the index along the axis), this device's peer table, and the heap's multicast
// address (0 without multimem).

#ifndef SMALTI_RUNTIME_LAUNCHER_CORE_H_
#define SMALTI_RUNTIME_LAUNCHER_CORE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "driver.h"
#include "result.h"

namespace smalti::launcher {

// i64 entries per tensor-map record (smalti.runtime.jax_integration writes the same layout):
// arg, data type, rank, swizzle, oob fill, dims[5], byte strides[4], box[5], element
// strides[5], innermost dimension first, unused trailing entries 0. `arg` is the argument's
// index, or for a map over a symmetric buffer of a collective kernel -1 - (the buffer's byte
// offset in the symmetric heap): that record is encoded once per device p of the group, over
// device p's heap + offset, into consecutive 128-byte maps of one parameter.
constexpr std::size_t kRecordSize = 24;
constexpr std::size_t kLaunchSize = 10;  // grid x,y,z, block x,y,z, cluster x,y,z, shared bytes
constexpr std::size_t kCollectiveSize = 3;  // devices, symmetric heap bytes, multimem (0 or 1)

// What a collective kernel's launch needs besides an ordinary one's (devices 0: none).
struct CollectiveRequest {
  int devices = 0;                  // along the mesh axis: the calls of one group
  std::int64_t symmetric_bytes = 0;  // of symmetric heap per device
  bool multimem = false;             // the heap is also mapped through a multicast object
  void* rank = nullptr;  // device memory, i32[2]: index along the mesh axis, group index
};

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
  CollectiveRequest collective;
};

// Enqueues the kernel on request.stream; see the file comment for the driver calls made.
LaunchResult Launch(const LaunchRequest& request);

// Forgets the loaded driver, every module loaded through it and every symmetric heap made
// with it (tests swap the driver); finalises NVSHMEM when it was initialised (collective).
void ResetLauncher();

}  // namespace smalti::launcher

extern "C" {

// smalti_launch_core: Launch() for callers without C++ (ctypes). `launch` holds
// `launch_size` values (10 expected), `buffers` `buffer_count` device pointers; `collective`
// holds `collective_size` values (0, or kCollectiveSize: devices, heap bytes, multimem) and
// `rank` is then the collective kernel's rank buffer. Returns the
// LaunchStatus; on failure writes the NUL-terminated failing call and message into `call` and
// `message` (truncated to their capacities) and the CUresult into *cuda_error.
int smalti_launch_core(void* stream, const std::uint8_t* cubin, std::size_t cubin_bytes,
                       const char* kernel, const std::int64_t* launch, std::size_t launch_size,
                       const std::int64_t* tensor_maps, std::size_t tensor_map_entries,
                       void* const* buffers, std::size_t buffer_count, void* debug,
                       std::int64_t debug_bytes, const std::int64_t* collective,
                       std::size_t collective_size, void* rank, int* cuda_error, char* call,
                       std::size_t call_capacity, char* message, std::size_t message_capacity);

// Test hook: ResetLauncher(), so the next launch opens $SMALTI_LIBCUDA afresh.
void smalti_launcher_reset(void);
}

#endif  // SMALTI_RUNTIME_LAUNCHER_CORE_H_
