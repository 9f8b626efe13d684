// Creating, caching and freeing symmetric heaps; see symmetric_heap.h.

#include "symmetric_heap.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <tuple>

namespace smalti::launcher {
namespace {

// A group's heap is found by its devices (CUDA ordinals in axis order), size and multimem.
using HeapKey = std::tuple<std::vector<CUdevice>, std::int64_t, bool>;

std::mutex heaps_mutex;
std::map<HeapKey, std::shared_ptr<const SymmetricHeap>> heaps;  // guarded by heaps_mutex

std::string DeviceName(const GroupMember& member) {
  return "CUDA device " + std::to_string(member.device) + " (index " +
         std::to_string(member.rank) + " along the mesh axis)";
}

std::size_t RoundUp(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

MemAllocationProp PinnedOn(CUdevice device) {
  MemAllocationProp prop{};
  prop.type = kMemAllocationTypePinned;
  prop.requested_handle_types = kMemHandleTypeNone;  // one process: nothing to export
  prop.location = {kMemLocationTypeDevice, device};
  return prop;
}

// Read-write access for every device of the group.
std::vector<MemAccessDesc> AccessForAll(const std::vector<GroupMember>& members) {
  std::vector<MemAccessDesc> access;
  for (const GroupMember& member : members) {
    access.push_back({{kMemLocationTypeDevice, member.device}, kMemAccessReadWrite});
  }
  return access;
}

// What every device must offer: the VMM API, multicast when asked for, and access to every
// other device of the group.
LaunchResult CheckDevices(const Driver& driver, const std::vector<GroupMember>& members,
                          bool multimem, const std::string& what) {
  auto unsupported = [&](CUresult code, const std::string& text) {
    return LaunchResult{LaunchStatus::kDriverError,
                        code == kCudaErrorNotSupported ? "cuDeviceGetAttribute"
                                                       : "cuDeviceCanAccessPeer",
                        code, "smalti launcher: " + text + ", which " + what + " needs"};
  };
  for (const GroupMember& member : members) {
    int value = 0;
    CUresult result = driver.device_get_attribute(&value, kDeviceAttributeVirtualMemoryManagement,
                                                  member.device);
    if (result != kCudaSuccess) {
      return DriverFailure(driver, result, "cuDeviceGetAttribute",
                           "asking whether " + DeviceName(member) + " supports VMM, for " + what);
    }
    if (value == 0) {
      return unsupported(kCudaErrorNotSupported,
                         DeviceName(member) + " does not support virtual memory management "
                         "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0)");
    }
    if (!multimem) continue;
    result = driver.device_get_attribute(&value, kDeviceAttributeMulticastSupported,
                                         member.device);
    if (result != kCudaSuccess) {
      return DriverFailure(driver, result, "cuDeviceGetAttribute",
                           "asking whether " + DeviceName(member) + " supports multicast, for " +
                               what);
    }
    if (value == 0) {
      return unsupported(kCudaErrorNotSupported,
                         DeviceName(member) + " does not support multicast "
                         "(CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0; multimem needs "
                         "NVLink through NVSwitch)");
    }
  }
  for (const GroupMember& member : members) {
    for (const GroupMember& peer : members) {
      if (peer.device == member.device) continue;
      int can = 0;
      CUresult result = driver.device_can_access_peer(&can, member.device, peer.device);
      if (result != kCudaSuccess) {
        return DriverFailure(driver, result, "cuDeviceCanAccessPeer",
                             "asking whether " + DeviceName(member) + " can reach " +
                                 DeviceName(peer) + ", for " + what);
      }
      if (can == 0) {
        return unsupported(kCudaErrorPeerAccessUnsupported,
                           DeviceName(member) + " cannot access the memory of " +
                               DeviceName(peer) + " (no peer access between them)");
      }
    }
  }
  return {};
}

// The size of each device's heap: `bytes` (at least 1) rounded to the allocation granularity
// of every device and, with multimem, to the multicast granularity.
LaunchResult HeapBytes(const Driver& driver, const std::vector<GroupMember>& members,
                       std::int64_t bytes, bool multimem, const std::string& what,
                       std::size_t* rounded, std::size_t* alignment) {
  std::size_t granularity = 1;
  for (const GroupMember& member : members) {
    MemAllocationProp prop = PinnedOn(member.device);
    std::size_t device_granularity = 0;
    CUresult result = driver.mem_get_allocation_granularity(&device_granularity, &prop,
                                                            kMemAllocGranularityMinimum);
    if (result != kCudaSuccess || device_granularity == 0) {
      return DriverFailure(driver, result, "cuMemGetAllocationGranularity",
                           "for " + DeviceName(member) + ", for " + what);
    }
    granularity = std::lcm(granularity, device_granularity);
  }
  const std::size_t wanted = RoundUp(static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1)),
                                     granularity);
  if (multimem) {
    MulticastObjectProp prop{};
    prop.num_devices = static_cast<unsigned int>(members.size());
    prop.size = wanted;
    std::size_t multicast_granularity = 0;
    CUresult result = driver.multicast_get_granularity(&multicast_granularity, &prop,
                                                       kMulticastGranularityMinimum);
    if (result != kCudaSuccess || multicast_granularity == 0) {
      return DriverFailure(driver, result, "cuMulticastGetGranularity",
                           "for " + std::to_string(members.size()) + " devices, for " + what);
    }
    granularity = std::lcm(granularity, multicast_granularity);
  }
  *rounded = RoundUp(wanted, granularity);
  *alignment = granularity;
  return {};
}

// The driver call `call` made with `member`'s context current.
#define SMALTI_HEAP_CALL(driver, member, call_name, expression, doing)                  \
  do {                                                                                \
    ScopedContext current((driver), (member).context);                               \
    if (current.result() != kCudaSuccess) {                                          \
      return DriverFailure((driver), current.result(), "cuCtxPushCurrent",            \
                           "making the context of " + DeviceName(member) + " current"); \
    }                                                                                 \
    CUresult call_result = (expression);                                              \
    if (call_result != kCudaSuccess) {                                                \
      return DriverFailure((driver), call_result, call_name, (doing));                \
    }                                                                                 \
  } while (0)

LaunchResult Create(SymmetricHeap& heap, const std::string& what) {
  const Driver& driver = *heap.driver;
  const std::vector<GroupMember>& members = heap.members;
  const std::size_t n = members.size(), bytes = heap.bytes;
  const std::string sized = std::to_string(bytes) + "-byte symmetric heap of " + what;
  const std::vector<MemAccessDesc> access = AccessForAll(members);
  heap.physical.assign(n, 0);
  heap.bases.assign(n, 0);
  heap.mapped.assign(n, false);
  heap.tables.assign(n, 0);
  for (std::size_t p = 0; p < n; ++p) {
    const GroupMember& m = members[p];
    const std::string on = " on " + DeviceName(m) + ", for the " + sized;
    MemAllocationProp prop = PinnedOn(m.device);
    SMALTI_HEAP_CALL(driver, m, "cuMemCreate",
                     driver.mem_create(&heap.physical[p], bytes, &prop, 0),
                     "allocating " + std::to_string(bytes) + " bytes" + on);
    SMALTI_HEAP_CALL(driver, m, "cuMemAddressReserve",
                     driver.mem_address_reserve(&heap.bases[p], bytes, heap.granularity, 0, 0),
                     "reserving addresses" + on);
    SMALTI_HEAP_CALL(driver, m, "cuMemMap",
                     driver.mem_map(heap.bases[p], bytes, 0, heap.physical[p], 0),
                     "mapping the allocation" + on);
    heap.mapped[p] = true;
  }
  for (std::size_t p = 0; p < n; ++p) {
    const GroupMember& m = members[p];
    SMALTI_HEAP_CALL(driver, m, "cuMemSetAccess",
                     driver.mem_set_access(heap.bases[p], bytes, access.data(), n),
                     "letting every device of the group read and write the heap on " +
                         DeviceName(m) + ", for the " + sized);
  }
  if (heap.multimem) {
    MulticastObjectProp prop{};
    prop.num_devices = static_cast<unsigned int>(n);
    prop.size = bytes;
    prop.handle_types = kMemHandleTypeNone;
    SMALTI_HEAP_CALL(driver, members[0], "cuMulticastCreate",
                     driver.multicast_create(&heap.multicast, &prop),
                     "creating a multicast object over " + std::to_string(n) +
                         " devices, for the " + sized);
    // Every device joins before any memory is bound (a bind waits for the whole team).
    for (const GroupMember& m : members) {
      SMALTI_HEAP_CALL(driver, m, "cuMulticastAddDevice",
                       driver.multicast_add_device(heap.multicast, m.device),
                       "adding " + DeviceName(m) + " to the multicast object of the " + sized);
    }
    for (std::size_t p = 0; p < n; ++p) {
      const GroupMember& m = members[p];
      SMALTI_HEAP_CALL(driver, m, "cuMulticastBindMem",
                       driver.multicast_bind_mem(heap.multicast, 0, heap.physical[p], 0, bytes,
                                                 0),
                       "binding the heap of " + DeviceName(m) + " to the multicast object of "
                       "the " + sized);
    }
    SMALTI_HEAP_CALL(driver, members[0], "cuMemAddressReserve",
                     driver.mem_address_reserve(&heap.multicast_base, bytes, heap.granularity,
                                                 0, 0),
                     "reserving addresses for the multicast object of the " + sized);
    SMALTI_HEAP_CALL(driver, members[0], "cuMemMap",
                     driver.mem_map(heap.multicast_base, bytes, 0, heap.multicast, 0),
                     "mapping the multicast object of the " + sized);
    heap.multicast_mapped = true;
    SMALTI_HEAP_CALL(driver, members[0], "cuMemSetAccess",
                     driver.mem_set_access(heap.multicast_base, bytes, access.data(), n),
                     "letting every device of the group use the multicast object of the " +
                         sized);
  }
  for (std::size_t p = 0; p < n; ++p) {
    const GroupMember& m = members[p];
    const std::string on = " on " + DeviceName(m) + ", for the " + sized;
    SMALTI_HEAP_CALL(driver, m, "cuMemsetD8", driver.memset_d8(heap.bases[p], 0, bytes),
                     "zeroing the heap" + on);
    SMALTI_HEAP_CALL(driver, m, "cuMemAlloc",
                     driver.mem_alloc(&heap.tables[p], n * sizeof(CUdeviceptr)),
                     "allocating the peer table" + on);
    SMALTI_HEAP_CALL(driver, m, "cuMemcpyHtoD",
                     driver.memcpy_htod(heap.tables[p], heap.bases.data(),
                                        n * sizeof(CUdeviceptr)),
                     "writing the peer table" + on);
    // The memset and the copy run on the legacy stream, which XLA's non-blocking streams do
    // not wait for: finish them before any kernel can use the heap.
    SMALTI_HEAP_CALL(driver, m, "cuCtxSynchronize", driver.ctx_synchronize(),
                     "waiting for the heap's zeroing and peer table" + on);
  }
  return {};
}

#undef SMALTI_HEAP_CALL

}  // namespace

SymmetricHeap::~SymmetricHeap() {
  if (driver == nullptr) return;
  const Driver& d = *driver;
  auto on = [&](std::size_t p, auto&& call) {
    if (d.ctx_push(members[p].context) != kCudaSuccess) return;
    call();
    CUcontext popped = nullptr;
    d.ctx_pop(&popped);
  };
  if (multicast_mapped) on(0, [&] { d.mem_unmap(multicast_base, bytes); });
  if (multicast_base != 0) on(0, [&] { d.mem_address_free(multicast_base, bytes); });
  if (multicast != 0) on(0, [&] { d.mem_release(multicast); });
  for (std::size_t p = 0; p < members.size(); ++p) {
    if (p < tables.size() && tables[p] != 0) on(p, [&] { d.mem_free(tables[p]); });
    if (p < mapped.size() && mapped[p]) on(p, [&] { d.mem_unmap(bases[p], bytes); });
    if (p < bases.size() && bases[p] != 0) on(p, [&] { d.mem_address_free(bases[p], bytes); });
    if (p < physical.size() && physical[p] != 0) on(p, [&] { d.mem_release(physical[p]); });
  }
}

LaunchResult GetSymmetricHeap(const std::shared_ptr<const Driver>& driver,
                              const std::vector<GroupMember>& members, std::int64_t bytes,
                              bool multimem, const std::string& what,
                              std::shared_ptr<const SymmetricHeap>* heap) {
  HeapKey key{{}, bytes, multimem};
  for (const GroupMember& member : members) std::get<0>(key).push_back(member.device);
  std::lock_guard<std::mutex> lock(heaps_mutex);
  auto found = heaps.find(key);
  if (found != heaps.end()) {
    *heap = found->second;
    return {};
  }
  if (LaunchResult checked = CheckDevices(*driver, members, multimem, what); !checked.ok()) {
    return checked;
  }
  auto made = std::make_shared<SymmetricHeap>();
  made->driver = driver;
  made->members = members;
  made->multimem = multimem;
  if (LaunchResult sized = HeapBytes(*driver, members, bytes, multimem, what, &made->bytes,
                                           &made->granularity);
      !sized.ok()) {
    return sized;
  }
  if (LaunchResult created = Create(*made, what); !created.ok()) return created;  // freed
  heaps.emplace(key, made);
  *heap = made;
  return {};
}

void ReleaseSymmetricHeaps() {
  std::map<HeapKey, std::shared_ptr<const SymmetricHeap>> released;
  {
    std::lock_guard<std::mutex> lock(heaps_mutex);
    released.swap(heaps);
  }
}

}  // namespace smalti::launcher
