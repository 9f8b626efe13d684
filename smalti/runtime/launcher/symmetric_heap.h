// The symmetric heap of a group of devices in one process: on each device one physical
// allocation (cuMemCreate), mapped at its own reserved virtual range (cuMemAddressReserve,
// cuMemMap) that every device of the group may read and write (cuMemSetAccess: peer access
// through the VMM API, no cuCtxEnablePeerAccess), zeroed once; per device a peer table
// (cuMemAlloc) holding every device's heap address in axis order; with multimem, a
// multicast object (cuMulticastCreate) over the group, bound to each device's allocation
// (cuMulticastBindMem) and mapped at a range of its own.
//
// Heaps are created at the first launch of a group (CUDA ordinals in axis order, heap bytes,
// multimem) and kept for the process's life: semaphores in the heap start at 0 because it
// is zeroed when created, and balanced signal/wait leaves them at 0, so it is never cleared
// again (a peer may already be signalling). ReleaseSymmetricHeaps (the launcher's reset)
// unmaps and frees them; at process exit they are left to the driver's teardown.

#ifndef SMALTI_RUNTIME_LAUNCHER_SYMMETRIC_HEAP_H_
#define SMALTI_RUNTIME_LAUNCHER_SYMMETRIC_HEAP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "driver.h"
#include "result.h"

namespace smalti::launcher {

// One device of a group: its index along the mesh axis, CUDA ordinal and context.
struct GroupMember {
  int rank = 0;
  CUdevice device = 0;
  CUcontext context = nullptr;
};

struct SymmetricHeap {
  SymmetricHeap() = default;
  SymmetricHeap(const SymmetricHeap&) = delete;
  SymmetricHeap& operator=(const SymmetricHeap&) = delete;
  ~SymmetricHeap();  // unmaps and frees what was made (errors ignored)

  std::shared_ptr<const Driver> driver;
  std::vector<GroupMember> members;  // in axis order
  std::size_t bytes = 0;             // per device: the requested size, rounded to granularity
  std::size_t granularity = 0;       // of allocations (and multicast): the ranges' alignment
  bool multimem = false;
  // Per member (0 / false: not made yet, so a failed creation frees what it made).
  std::vector<CUmemGenericAllocationHandle> physical;
  std::vector<CUdeviceptr> bases;  // each device's heap address, as every device sees it
  std::vector<bool> mapped;
  std::vector<CUdeviceptr> tables;  // each device's peer table: `bases`, in its memory
  CUmemGenericAllocationHandle multicast = 0;
  CUdeviceptr multicast_base = 0;  // the multicast address of the heap (0 without multimem)
  bool multicast_mapped = false;
};

// The heap of `members` (in axis order) holding `bytes` (multicast-mapped when `multimem`),
// created at first use; `what` names the launch in error messages. The driver must have
// every collective entry point (Driver::missing empty). A failed creation makes every driver
// call's error a LaunchResult naming the call, and leaves nothing behind.
LaunchResult GetSymmetricHeap(const std::shared_ptr<const Driver>& driver,
                              const std::vector<GroupMember>& members, std::int64_t bytes,
                              bool multimem, const std::string& what,
                              std::shared_ptr<const SymmetricHeap>* heap);

// Forgets (and so frees, once no launch holds them) every cached heap.
void ReleaseSymmetricHeaps();

}  // namespace smalti::launcher

#endif  // SMALTI_RUNTIME_LAUNCHER_SYMMETRIC_HEAP_H_
