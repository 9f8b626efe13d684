// One kernel launch through the CUDA driver API; see core.h.

#include "core.h"

#include "group.h"
#include "nvshmem.h"
#include "symmetric_heap.h"
#include "timing.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace smalti::launcher {
namespace {

constexpr std::int64_t kUint32Max = 0xffffffffll;

// "4x2x1" from `count` values.
template <typename T>
std::string Shape(const T* values, std::size_t count) {
  std::string text;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) text += "x";
    text += std::to_string(values[i]);
  }
  return text;
}

std::string KernelName(const LaunchRequest& request) {
  return "kernel " + std::string(request.kernel);
}

// Checks what the driver cannot: the request's own shape. Driver limits (grid sizes, box
// sizes, alignment, ...) are left to the driver, whose errors name the call.
LaunchResult CheckRequest(const LaunchRequest& request) {
  const std::string kernel = KernelName(request);
  if (request.kernel.empty()) return Invalid("the kernel name is empty");
  if (request.cubin == nullptr || request.cubin_bytes == 0) {
    return Invalid(kernel + " has no cubin (was ptxas found when it was compiled?)");
  }
  for (std::size_t i = 0; i < 9; ++i) {
    if (request.launch[i] < 1 || request.launch[i] > kUint32Max) {
      return Invalid("launch value " + std::to_string(i) + " of " + kernel + " is " +
                     std::to_string(request.launch[i]) +
                     "; grid, block and cluster sizes are positive 32-bit values");
    }
  }
  if (request.launch[9] < 0 || request.launch[9] > kUint32Max) {
    return Invalid("the dynamic shared memory of " + kernel + " is " +
                   std::to_string(request.launch[9]) + " bytes");
  }
  if (request.debug_bytes < 0 || (request.debug_bytes > 0) != (request.debug != nullptr)) {
    return Invalid("the debug buffer of " + kernel + " does not match debug_bytes = " +
                   std::to_string(request.debug_bytes));
  }
  if (request.tensor_map_entries % kRecordSize != 0 ||
      (request.tensor_map_entries > 0 && request.tensor_maps == nullptr)) {
    return Invalid("the tensor_maps of " + kernel + " hold " +
                   std::to_string(request.tensor_map_entries) + " values, not records of " +
                   std::to_string(kRecordSize));
  }
  const CollectiveRequest& collective = request.collective;
  if (collective.devices < 0 || collective.symmetric_bytes < 0 ||
      (collective.devices > 0 && collective.rank == nullptr)) {
    return Invalid("the collective launch of " + kernel + " (" +
                   std::to_string(collective.devices) + " devices, " +
                   std::to_string(collective.symmetric_bytes) +
                   " heap bytes) is malformed or lacks its rank buffer");
  }
  for (std::size_t m = 0; m * kRecordSize < request.tensor_map_entries; ++m) {
    const std::int64_t* r = request.tensor_maps + m * kRecordSize;
    const std::string which = "tensor map record " + std::to_string(m) + " of " + kernel;
    if (r[0] < 0 && collective.devices == 0) {
      return Invalid(which + " maps a symmetric buffer, but the kernel is not collective");
    }
    if (r[0] < 0 && -1 - r[0] >= collective.symmetric_bytes) {
      return Invalid(which + " maps a symmetric buffer at offset " + std::to_string(-1 - r[0]) +
                     ", past the " + std::to_string(collective.symmetric_bytes) +
                     "-byte symmetric heap");
    }
    if (r[0] >= 0 && static_cast<std::size_t>(r[0]) >= request.buffers.size()) {
      return Invalid(which + " names argument " + std::to_string(r[0]) + " of " +
                     std::to_string(request.buffers.size()));
    }
    if (r[2] < 1 || r[2] > 5) {
      return Invalid(which + " has rank " + std::to_string(r[2]) + " (1 to 5)");
    }
    for (std::size_t e = 1; e < kRecordSize; ++e) {
      bool is_32_bit = e < 5 || e >= 14;  // codes, box and element strides
      if (r[e] < 0 || (is_32_bit && r[e] > INT_MAX)) {
        return Invalid(which + " has entry " + std::to_string(e) + " = " +
                       std::to_string(r[e]) + " out of range");
      }
    }
  }
  return {};
}

// Modules are cached by content (the cubin's fingerprint) and context, so a new executable
// whose attribute storage reuses an old address never gets a stale module.
using FunctionKey = std::tuple<CUcontext, std::uint64_t, std::size_t, std::string>;

struct CachedFunction {
  CUfunction function = nullptr;
  std::int64_t dynamic_shared_limit = kDefaultDynamicSharedBytes;  // as set on the driver
};

std::mutex cache_mutex;
std::map<FunctionKey, CachedFunction> cache;  // guarded by cache_mutex

// The request's function in `context` (which must be current), loaded at first use, with
// room for the launch's dynamic shared memory.
LaunchResult LoadFunction(const Driver& driver, CUcontext context,
                          const LaunchRequest& request, CUfunction* function) {
  const std::string kernel = KernelName(request);
  std::lock_guard<std::mutex> lock(cache_mutex);
  FunctionKey key{context, Fingerprint(request.cubin, request.cubin_bytes), request.cubin_bytes,
                  std::string(request.kernel)};
  auto found = cache.find(key);
  if (found == cache.end()) {
    // cuModuleLoadData reads an ELF image: give it an 8-byte aligned copy.
    std::vector<std::uint64_t> image(request.cubin_bytes / 8 + 1, 0);
    std::memcpy(image.data(), request.cubin, request.cubin_bytes);
    CUmodule module = nullptr;
    CUresult result = driver.module_load_data(&module, image.data());
    if (result != kCudaSuccess) {
      return DriverFailure(driver, result, "cuModuleLoadData",
                           "loading the cubin of " + kernel + " (" +
                               std::to_string(request.cubin_bytes) + " bytes)");
    }
    CUfunction loaded = nullptr;
    result = driver.module_get_function(&loaded, module, std::get<3>(key).c_str());
    if (result != kCudaSuccess) {
      driver.module_unload(module);
      return DriverFailure(driver, result, "cuModuleGetFunction",
                           "looking up " + kernel + " in its cubin");
    }
    found = cache.emplace(key, CachedFunction{loaded}).first;
  }
  CachedFunction& cached = found->second;
  const std::int64_t shared_bytes = request.launch[9];
  if (shared_bytes > cached.dynamic_shared_limit) {
    CUresult result = driver.func_set_attribute(
        cached.function, kFuncAttributeMaxDynamicSharedSizeBytes, static_cast<int>(shared_bytes));
    if (result != kCudaSuccess) {
      return DriverFailure(driver, result, "cuFuncSetAttribute",
                           "raising MAX_DYNAMIC_SHARED_SIZE_BYTES to " +
                               std::to_string(shared_bytes) + " for " + kernel);
    }
    cached.dynamic_shared_limit = shared_bytes;
  }
  *function = cached.function;
  return {};
}

// Encodes every record into `maps`: one map per record, or one per device of the group for a
// map over a symmetric buffer (over each device's heap + its offset, in axis order);
// `first[m]` is the index of record m's first map, whose address is its parameter.
LaunchResult EncodeTensorMaps(const Driver& driver, const LaunchRequest& request,
                              const SymmetricHeap* heap, std::vector<TensorMap>* maps,
                              std::vector<std::size_t>* first) {
  const std::size_t records = request.tensor_map_entries / kRecordSize;
  std::size_t total = 0;
  for (std::size_t m = 0; m < records; ++m) {
    first->push_back(total);
    const bool symmetric = request.tensor_maps[m * kRecordSize] < 0;
    total += symmetric ? static_cast<std::size_t>(request.collective.devices) : 1;
  }
  maps->resize(total);
  for (std::size_t m = 0; m < records; ++m) {
    const std::int64_t* r = request.tensor_maps + m * kRecordSize;
    const std::int64_t arg = r[0], rank = r[2];
    std::uint64_t dims[5], strides[4];
    std::uint32_t box[5], element_strides[5];
    for (int d = 0; d < 5; ++d) {
      dims[d] = static_cast<std::uint64_t>(r[5 + d]);
      box[d] = static_cast<std::uint32_t>(r[14 + d]);
      element_strides[d] = static_cast<std::uint32_t>(r[19 + d]);
    }
    for (int d = 0; d < 4; ++d) strides[d] = static_cast<std::uint64_t>(r[10 + d]);
    std::vector<void*> addresses;
    if (arg >= 0) {
      addresses.push_back(request.buffers[arg]);
    } else {
      for (CUdeviceptr base : heap->bases) {
        addresses.push_back(reinterpret_cast<void*>(base + static_cast<CUdeviceptr>(-1 - arg)));
      }
    }
    for (std::size_t copy = 0; copy < addresses.size(); ++copy) {
      CUresult result = driver.tensor_map_encode_tiled(
          &(*maps)[(*first)[m] + copy], static_cast<int>(r[1]), static_cast<std::uint32_t>(rank),
          addresses[copy], dims, strides, box, element_strides, kTensorMapInterleaveNone,
          static_cast<int>(r[3]), kTensorMapL2Promotion128B, static_cast<int>(r[4]));
      if (result != kCudaSuccess) {
        const std::string over =
            arg >= 0 ? "argument " + std::to_string(arg)
                     : "the symmetric buffer at heap offset " + std::to_string(-1 - arg) +
                           " of device " + std::to_string(copy);
        return DriverFailure(driver, result, "cuTensorMapEncodeTiled",
                             "for tensor map " + std::to_string(m) + " of " +
                                 KernelName(request) + " (" + over + ", dims " +
                                 Shape(dims, rank) + ", box " + Shape(box, rank) +
                                 ", data type " + std::to_string(r[1]) + ", swizzle " +
                                 std::to_string(r[3]) + ")");
      }
    }
  }
  return {};
}

// A collective launch's part before its kernel: its rank, its device, its group's meeting
// and heap (see core.h). `rank` is set to the device's index along the mesh axis.
LaunchResult JoinGroup(const std::shared_ptr<const Driver>& shared, CUcontext context,
                       const LaunchRequest& request, std::shared_ptr<const SymmetricHeap>* heap,
                       int* rank) {
  const Driver& driver = *shared;
  const std::string kernel = "collective " + KernelName(request);
  if (!driver.missing.empty()) {
    return {LaunchStatus::kNoDriver, "", 0,
            "smalti launcher: " + driver.path + " lacks " + driver.missing + ", which the " +
                kernel + " needs (collective kernels need a CUDA 12.1 or newer driver)"};
  }
  std::int32_t position[2] = {0, 0};
  CUresult result = driver.memcpy_dtoh_async(
      position, reinterpret_cast<CUdeviceptr>(request.collective.rank), sizeof(position),
      request.stream);
  if (result != kCudaSuccess) {
    return DriverFailure(driver, result, "cuMemcpyDtoHAsync",
                         "reading the device index and group of " + kernel);
  }
  result = driver.stream_synchronize(request.stream);
  if (result != kCudaSuccess) {
    return DriverFailure(driver, result, "cuStreamSynchronize",
                         "waiting for the device index and group of " + kernel);
  }
  GroupMember me{position[0], 0, context};
  result = driver.ctx_get_device(&me.device);
  if (result != kCudaSuccess) {
    return DriverFailure(driver, result, "cuCtxGetDevice", "for the stream of " + kernel);
  }
  const CollectiveRequest& collective = request.collective;
  *rank = position[0];
  // Across processes (NVSHMEM initialised, one GPU per process) no local meeting: the heap is
  // NVSHMEM's. A group of one device has no peers and meets itself alone.
  if (collective.devices > 1 && NvshmemActive()) {
    return GetNvshmemHeap(shared, me, position[1], collective.devices,
                          collective.symmetric_bytes, collective.multimem, "the " + kernel, heap);
  }
  GroupWork work = [&](const std::vector<GroupMember>& members,
                       std::shared_ptr<const SymmetricHeap>* made) {
    return GetSymmetricHeap(shared, members, collective.symmetric_bytes, collective.multimem,
                            "the " + kernel, made);
  };
  return Meet(std::string(request.kernel), position[1], collective.devices, me,
              CollectiveTimeout(), work, heap);
}

LaunchResult LaunchWith(const std::shared_ptr<const Driver>& shared,
                        const LaunchRequest& request) {
  const Driver& driver = *shared;
  const std::string kernel = KernelName(request);
  CUcontext context = nullptr;
  CUresult result = driver.stream_get_ctx(request.stream, &context);
  if (result != kCudaSuccess) {
    return DriverFailure(driver, result, "cuStreamGetCtx", "for the stream of " + kernel);
  }
  ScopedContext current(driver, context);
  if (current.result() != kCudaSuccess) {
    return DriverFailure(driver, current.result(), "cuCtxPushCurrent",
                         "making the stream's context current for " + kernel);
  }
  CUfunction function = nullptr;
  if (LaunchResult loaded = LoadFunction(driver, context, request, &function); !loaded.ok()) {
    return loaded;
  }
  std::shared_ptr<const SymmetricHeap> heap;
  int rank = 0;
  const bool collective = request.collective.devices > 0;
  if (collective) {
    if (LaunchResult joined = JoinGroup(shared, context, request, &heap, &rank); !joined.ok()) {
      return joined;
    }
  }
  std::vector<TensorMap> maps;
  std::vector<std::size_t> first_map;
  if (LaunchResult encoded = EncodeTensorMaps(driver, request, heap.get(), &maps, &first_map);
      !encoded.ok()) {
    return encoded;
  }
  std::vector<CUdeviceptr> pointers;
  for (void* buffer : request.buffers) pointers.push_back(reinterpret_cast<CUdeviceptr>(buffer));
  CUdeviceptr debug_pointer = reinterpret_cast<CUdeviceptr>(request.debug);
  std::vector<void*> params;
  for (CUdeviceptr& pointer : pointers) params.push_back(&pointer);
  for (std::size_t first : first_map) params.push_back(&maps[first]);
  if (request.debug_bytes > 0) params.push_back(&debug_pointer);
  // A collective kernel's hidden parameters: smalti_device, smalti_peers, smalti_multicast.
  CUdeviceptr device_pointer = reinterpret_cast<CUdeviceptr>(request.collective.rank);
  CUdeviceptr peers = collective ? heap->tables[rank] : 0;
  CUdeviceptr multicast = collective ? heap->multicast_base : 0;
  if (collective) {
    params.push_back(&device_pointer);
    params.push_back(&peers);
    params.push_back(&multicast);
  }

  const std::int64_t* launch = request.launch;
  LaunchAttribute cluster{};
  cluster.id = kLaunchAttributeClusterDimension;
  cluster.value.cluster_dim.x = static_cast<unsigned int>(launch[6]);
  cluster.value.cluster_dim.y = static_cast<unsigned int>(launch[7]);
  cluster.value.cluster_dim.z = static_cast<unsigned int>(launch[8]);
  const bool clustered = launch[6] * launch[7] * launch[8] > 1;
  LaunchConfig config{};
  config.grid_x = static_cast<unsigned int>(launch[0]);
  config.grid_y = static_cast<unsigned int>(launch[1]);
  config.grid_z = static_cast<unsigned int>(launch[2]);
  config.block_x = static_cast<unsigned int>(launch[3]);
  config.block_y = static_cast<unsigned int>(launch[4]);
  config.block_z = static_cast<unsigned int>(launch[5]);
  config.shared_bytes = static_cast<unsigned int>(launch[9]);
  config.stream = request.stream;
  config.attrs = clustered ? &cluster : nullptr;
  config.num_attrs = clustered ? 1 : 0;

  if (request.debug_bytes > 0) {
    result = driver.memset_d8_async(debug_pointer, 0,
                                    static_cast<std::size_t>(request.debug_bytes), request.stream);
    if (result != kCudaSuccess) {
      return DriverFailure(driver, result, "cuMemsetD8Async",
                           "zeroing the " + std::to_string(request.debug_bytes) +
                               "-byte debug buffer of " + kernel);
    }
  }
  LaunchTimer timer;  // events around the launch while its kernel is being timed
  if (AnyTimed()) {
    LaunchResult begun = timer.Begin(
        shared, context, request.stream,
        IdentityOf(request.cubin, request.cubin_bytes, request.kernel));
    if (!begun.ok()) return begun;
  }
  result = driver.launch_kernel_ex(&config, function, params.data(), nullptr);
  if (result != kCudaSuccess) {
    return DriverFailure(driver, result, "cuLaunchKernelEx",
                         "launching " + kernel + " (grid " + Shape(launch, 3) + ", block " +
                             Shape(launch + 3, 3) + ", cluster " + Shape(launch + 6, 3) + ", " +
                             std::to_string(launch[9]) + " bytes of dynamic shared memory)");
  }
  return timer.End();
}

}  // namespace

LaunchResult Launch(const LaunchRequest& request) {
  if (LaunchResult checked = CheckRequest(request); !checked.ok()) return checked;
  std::string error;
  std::shared_ptr<const Driver> driver = LoadedDriver(&error);
  if (driver == nullptr) {
    return {LaunchStatus::kNoDriver, "", 0, "smalti launcher: " + error};
  }
  return LaunchWith(driver, request);
}

void ResetLauncher() {
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    cache.clear();
  }
  ResetTiming();
  ReleaseSymmetricHeaps();
  FinalizeNvshmem();  // collective when NVSHMEM is active: every process resets together
  ForgetDriver();
}

}  // namespace smalti::launcher

extern "C" int smalti_launch_core(void* stream, const std::uint8_t* cubin,
                                  std::size_t cubin_bytes, const char* kernel,
                                  const std::int64_t* launch, std::size_t launch_size,
                                  const std::int64_t* tensor_maps,
                                  std::size_t tensor_map_entries, void* const* buffers,
                                  std::size_t buffer_count, void* debug,
                                  std::int64_t debug_bytes, const std::int64_t* collective,
                                  std::size_t collective_size, void* rank, int* cuda_error,
                                  char* call,
                                  std::size_t call_capacity, char* message,
                                  std::size_t message_capacity) {
  using namespace smalti::launcher;
  LaunchResult result;
  if (launch == nullptr || launch_size != kLaunchSize) {
    result = Invalid("launch must hold " + std::to_string(kLaunchSize) + " values, got " +
                     std::to_string(launch == nullptr ? 0 : launch_size));
  } else if (collective_size != 0 && (collective == nullptr || collective_size != kCollectiveSize)) {
    result = Invalid("collective must hold 0 or " + std::to_string(kCollectiveSize) +
                     " values, got " + std::to_string(collective_size));
  } else if (buffers == nullptr && buffer_count > 0) {
    result = Invalid("no buffer pointers given for " + std::to_string(buffer_count) + " buffers");
  } else {
    LaunchRequest request;
    request.stream = static_cast<CUstream>(stream);
    request.cubin = cubin;
    request.cubin_bytes = cubin_bytes;
    request.kernel = kernel == nullptr ? std::string_view() : std::string_view(kernel);
    std::copy(launch, launch + kLaunchSize, request.launch);
    request.tensor_maps = tensor_maps;
    request.tensor_map_entries = tensor_map_entries;
    if (buffer_count > 0) request.buffers.assign(buffers, buffers + buffer_count);
    request.debug = debug;
    request.debug_bytes = debug_bytes;
    if (collective_size == kCollectiveSize) {
      request.collective.devices = static_cast<int>(collective[0]);
      request.collective.symmetric_bytes = collective[1];
      request.collective.multimem = collective[2] != 0;
      request.collective.rank = rank;
    }
    result = Launch(request);
  }
  if (cuda_error != nullptr) *cuda_error = result.cuda_error;
  CopyOut(result.call, call, call_capacity);
  CopyOut(result.message, message, message_capacity);
  return static_cast<int>(result.status);
}

extern "C" void smalti_launcher_reset(void) { smalti::launcher::ResetLauncher(); }
