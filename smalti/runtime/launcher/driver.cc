// Opens the CUDA driver library ($SMALTI_LIBCUDA, default libcuda.so.1) and resolves the
// entry points the launcher calls; see driver.h.

#include "driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace smalti::launcher {
namespace {

constexpr const char* kDefaultLibrary = "libcuda.so.1";
constexpr const char* kLibraryVariable = "SMALTI_LIBCUDA";

std::mutex driver_mutex;
std::shared_ptr<const Driver> loaded_driver;  // guarded by driver_mutex

template <typename Fn>
bool Resolve(Driver& driver, const char* name, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(dlsym(driver.library, name));
  if (*fn == nullptr) *error = driver.path + " lacks " + name;
  return *fn != nullptr;
}

// An entry point only collective launches need: null when absent, and the first absent one
// is remembered in `missing`.
template <typename Fn>
void Optional(Driver& driver, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(driver.library, name));
  if (*fn == nullptr && missing->empty()) *missing = name;
}

std::shared_ptr<const Driver> Open(std::string* error) {
  auto driver = std::make_shared<Driver>();
  const char* path = std::getenv(kLibraryVariable);
  driver->path = (path != nullptr && *path != '\0') ? path : kDefaultLibrary;
  driver->library = dlopen(driver->path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (driver->library == nullptr) {
    const char* why = dlerror();
    *error = "cannot load " + driver->path + ": " + (why ? why : "unknown error");
    return nullptr;
  }
  Driver& d = *driver;
  bool resolved =
      Resolve(d, "cuGetErrorName", &d.get_error_name, error) &&
      Resolve(d, "cuGetErrorString", &d.get_error_string, error) &&
      Resolve(d, "cuStreamGetCtx", &d.stream_get_ctx, error) &&
      Resolve(d, "cuCtxPushCurrent_v2", &d.ctx_push, error) &&
      Resolve(d, "cuCtxPopCurrent_v2", &d.ctx_pop, error) &&
      Resolve(d, "cuModuleLoadData", &d.module_load_data, error) &&
      Resolve(d, "cuModuleUnload", &d.module_unload, error) &&
      Resolve(d, "cuModuleGetFunction", &d.module_get_function, error) &&
      Resolve(d, "cuFuncSetAttribute", &d.func_set_attribute, error) &&
      Resolve(d, "cuLaunchKernelEx", &d.launch_kernel_ex, error) &&
      Resolve(d, "cuMemsetD8Async", &d.memset_d8_async, error) &&
      Resolve(d, "cuTensorMapEncodeTiled", &d.tensor_map_encode_tiled, error) &&
      Resolve(d, "cuEventCreate", &d.event_create, error) &&
      Resolve(d, "cuEventRecord", &d.event_record, error) &&
      Resolve(d, "cuEventSynchronize", &d.event_synchronize, error) &&
      Resolve(d, "cuEventElapsedTime", &d.event_elapsed_time, error) &&
      Resolve(d, "cuEventDestroy_v2", &d.event_destroy, error);
  if (!resolved) return nullptr;
  std::string& missing = d.missing;
  Optional(d, "cuCtxGetDevice", &d.ctx_get_device, &missing);
  Optional(d, "cuCtxSynchronize", &d.ctx_synchronize, &missing);
  Optional(d, "cuDeviceGetAttribute", &d.device_get_attribute, &missing);
  Optional(d, "cuDeviceCanAccessPeer", &d.device_can_access_peer, &missing);
  Optional(d, "cuStreamSynchronize", &d.stream_synchronize, &missing);
  Optional(d, "cuMemcpyDtoHAsync_v2", &d.memcpy_dtoh_async, &missing);
  Optional(d, "cuMemcpyHtoD_v2", &d.memcpy_htod, &missing);
  Optional(d, "cuMemAlloc_v2", &d.mem_alloc, &missing);
  Optional(d, "cuMemFree_v2", &d.mem_free, &missing);
  Optional(d, "cuMemsetD8_v2", &d.memset_d8, &missing);
  Optional(d, "cuMemGetAllocationGranularity", &d.mem_get_allocation_granularity, &missing);
  Optional(d, "cuMemCreate", &d.mem_create, &missing);
  Optional(d, "cuMemRelease", &d.mem_release, &missing);
  Optional(d, "cuMemAddressReserve", &d.mem_address_reserve, &missing);
  Optional(d, "cuMemAddressFree", &d.mem_address_free, &missing);
  Optional(d, "cuMemMap", &d.mem_map, &missing);
  Optional(d, "cuMemUnmap", &d.mem_unmap, &missing);
  Optional(d, "cuMemSetAccess", &d.mem_set_access, &missing);
  Optional(d, "cuMulticastGetGranularity", &d.multicast_get_granularity, &missing);
  Optional(d, "cuMulticastCreate", &d.multicast_create, &missing);
  Optional(d, "cuMulticastAddDevice", &d.multicast_add_device, &missing);
  Optional(d, "cuMulticastBindMem", &d.multicast_bind_mem, &missing);
  return driver;
}

}  // namespace

Driver::~Driver() {
  if (library != nullptr) dlclose(library);
}

std::shared_ptr<const Driver> LoadedDriver(std::string* error) {
  std::lock_guard<std::mutex> lock(driver_mutex);
  if (loaded_driver == nullptr) loaded_driver = Open(error);
  return loaded_driver;
}

void ForgetDriver() {
  std::lock_guard<std::mutex> lock(driver_mutex);
  loaded_driver.reset();
}

std::string DescribeError(const Driver& driver, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (driver.get_error_name(result, &name) != kCudaSuccess) name = nullptr;
  if (driver.get_error_string(result, &text) != kCudaSuccess) text = nullptr;
  std::string described = name ? name : "CUDA error " + std::to_string(result);
  if (text != nullptr) described += std::string(" (") + text + ")";
  return described;
}

}  // namespace smalti::launcher
