// The CUDA driver API as smalti's launcher reaches it: the few ABI types and constants it
// uses (facts of the driver API's C ABI, so no CUDA headers are needed to build), and the
// driver library itself, opened with dlopen and resolved symbol by symbol.
//
// The library is $SMALTI_LIBCUDA when set (tests point it at a recording stand-in), else
// libcuda.so.1. It is loaded at first use; ForgetDriver() makes the next use load it again.

#ifndef SMALTI_RUNTIME_LAUNCHER_DRIVER_H_
#define SMALTI_RUNTIME_LAUNCHER_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace smalti::launcher {

using CUresult = int;
using CUdeviceptr = unsigned long long;
using CUdevice = int;
using CUmemGenericAllocationHandle = unsigned long long;  // physical memory or multicast object
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;

constexpr CUresult kCudaSuccess = 0;
constexpr int kFuncAttributeMaxDynamicSharedSizeBytes = 8;  // CU_FUNC_ATTRIBUTE_...
constexpr int kLaunchAttributeClusterDimension = 4;         // CU_LAUNCH_ATTRIBUTE_...
constexpr int kTensorMapInterleaveNone = 0;                 // CU_TENSOR_MAP_INTERLEAVE_NONE
constexpr int kTensorMapL2Promotion128B = 2;                // CU_TENSOR_MAP_L2_PROMOTION_L2_128B
constexpr unsigned int kEventDefault = 0;                    // CU_EVENT_DEFAULT (timing on)
constexpr CUresult kCudaErrorNotSupported = 801;            // CUDA_ERROR_NOT_SUPPORTED
constexpr CUresult kCudaErrorPeerAccessUnsupported = 217;   // CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
constexpr int kDeviceAttributeVirtualMemoryManagement = 102;  // CU_DEVICE_ATTRIBUTE_...
constexpr int kDeviceAttributeMulticastSupported = 132;       // CU_DEVICE_ATTRIBUTE_...
constexpr int kMemAllocationTypePinned = 1;                   // CU_MEM_ALLOCATION_TYPE_PINNED
constexpr int kMemLocationTypeDevice = 1;                     // CU_MEM_LOCATION_TYPE_DEVICE
constexpr int kMemHandleTypeNone = 0;                         // CU_MEM_HANDLE_TYPE_NONE
constexpr int kMemAccessReadWrite = 3;            // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
constexpr int kMemAllocGranularityMinimum = 0;    // CU_MEM_ALLOC_GRANULARITY_MINIMUM
constexpr int kMulticastGranularityMinimum = 0;   // CU_MULTICAST_GRANULARITY_MINIMUM
// Dynamic shared memory a launch may use without opting in through cuFuncSetAttribute.
constexpr std::int64_t kDefaultDynamicSharedBytes = 48 * 1024;

// CUlaunchAttributeValue: a 64-byte union (8-byte aligned: some members hold pointers); only
// the cluster dimension is used here.
union alignas(8) LaunchAttributeValue {
  char pad[64];
  struct {
    unsigned int x, y, z;
  } cluster_dim;
};

// CUlaunchAttribute.
struct LaunchAttribute {
  int id;
  char pad[8 - sizeof(int)];
  LaunchAttributeValue value;
};

// CUlaunchConfig.
struct LaunchConfig {
  unsigned int grid_x, grid_y, grid_z;
  unsigned int block_x, block_y, block_z;
  unsigned int shared_bytes;
  CUstream stream;
  LaunchAttribute* attrs;
  unsigned int num_attrs;
};

// CUtensorMap: 128 opaque bytes, 64-byte aligned.
struct alignas(64) TensorMap {
  std::uint64_t opaque[16];
};

// CUmemLocation.
struct MemLocation {
  int type;
  int id;
};

// CUmemAllocationProp (allocFlags: compressionType, gpuDirectRDMACapable, usage, reserved[4]).
struct MemAllocationProp {
  int type;
  int requested_handle_types;
  MemLocation location;
  void* win32_handle_meta_data;
  struct {
    unsigned char compression_type;
    unsigned char gpu_direct_rdma_capable;
    unsigned short usage;
    unsigned char reserved[4];
  } alloc_flags;
};

// CUmemAccessDesc.
struct MemAccessDesc {
  MemLocation location;
  int flags;
};

// CUmulticastObjectProp.
struct MulticastObjectProp {
  unsigned int num_devices;
  std::size_t size;
  unsigned long long handle_types;
  unsigned long long flags;
};

static_assert(sizeof(MemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");
static_assert(sizeof(MemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");
static_assert(sizeof(MulticastObjectProp) == 32, "CUmulticastObjectProp is 32 bytes");
static_assert(sizeof(LaunchAttribute) == 72 && alignof(LaunchAttribute) == 8,
              "CUlaunchAttribute is 72 bytes, 8-byte aligned");
static_assert(sizeof(LaunchConfig) == 56, "CUlaunchConfig is 56 bytes");
static_assert(sizeof(TensorMap) == 128, "CUtensorMap is 128 bytes");

using GetErrorTextFn = CUresult (*)(CUresult, const char**);
using StreamGetCtxFn = CUresult (*)(CUstream, CUcontext*);
using CtxPushFn = CUresult (*)(CUcontext);
using CtxPopFn = CUresult (*)(CUcontext*);
using ModuleLoadDataFn = CUresult (*)(CUmodule*, const void*);
using ModuleUnloadFn = CUresult (*)(CUmodule);
using ModuleGetFunctionFn = CUresult (*)(CUfunction*, CUmodule, const char*);
using FuncSetAttributeFn = CUresult (*)(CUfunction, int, int);
using LaunchKernelExFn = CUresult (*)(const LaunchConfig*, CUfunction, void**, void**);
// cuMemsetD8Async(dst, value, count, stream); the symbol has no _v2 variant.
using MemsetD8AsyncFn = CUresult (*)(CUdeviceptr, unsigned char, std::size_t, CUstream);
using TensorMapEncodeTiledFn = CUresult (*)(TensorMap*, int, std::uint32_t, void*,
                                            const std::uint64_t*, const std::uint64_t*,
                                            const std::uint32_t*, const std::uint32_t*, int,
                                            int, int, int);
// Event management, for timing launches (timing.h).
using EventCreateFn = CUresult (*)(CUevent*, unsigned int);
using EventRecordFn = CUresult (*)(CUevent, CUstream);
using EventSynchronizeFn = CUresult (*)(CUevent);
using EventElapsedTimeFn = CUresult (*)(float*, CUevent, CUevent);
using EventDestroyFn = CUresult (*)(CUevent);

// What collective launches add (driver API "Virtual Memory Management" and "Multicast Object
// Management"; plain memory calls for the peer tables and the rank read-back).
using CtxGetDeviceFn = CUresult (*)(CUdevice*);
using CtxSynchronizeFn = CUresult (*)();
using DeviceGetAttributeFn = CUresult (*)(int*, int, CUdevice);
using DeviceCanAccessPeerFn = CUresult (*)(int*, CUdevice, CUdevice);
using StreamSynchronizeFn = CUresult (*)(CUstream);
using MemcpyDtoHAsyncFn = CUresult (*)(void*, CUdeviceptr, std::size_t, CUstream);
using MemcpyHtoDFn = CUresult (*)(CUdeviceptr, const void*, std::size_t);
using MemAllocFn = CUresult (*)(CUdeviceptr*, std::size_t);
using MemFreeFn = CUresult (*)(CUdeviceptr);
using MemsetD8Fn = CUresult (*)(CUdeviceptr, unsigned char, std::size_t);
using MemGetAllocationGranularityFn = CUresult (*)(std::size_t*, const MemAllocationProp*, int);
using MemCreateFn = CUresult (*)(CUmemGenericAllocationHandle*, std::size_t,
                                 const MemAllocationProp*, unsigned long long);
using MemReleaseFn = CUresult (*)(CUmemGenericAllocationHandle);
using MemAddressReserveFn = CUresult (*)(CUdeviceptr*, std::size_t, std::size_t, CUdeviceptr,
                                         unsigned long long);
using MemAddressFreeFn = CUresult (*)(CUdeviceptr, std::size_t);
using MemMapFn = CUresult (*)(CUdeviceptr, std::size_t, std::size_t, CUmemGenericAllocationHandle,
                              unsigned long long);
using MemUnmapFn = CUresult (*)(CUdeviceptr, std::size_t);
using MemSetAccessFn = CUresult (*)(CUdeviceptr, std::size_t, const MemAccessDesc*, std::size_t);
using MulticastGetGranularityFn = CUresult (*)(std::size_t*, const MulticastObjectProp*, int);
using MulticastCreateFn = CUresult (*)(CUmemGenericAllocationHandle*, const MulticastObjectProp*);
using MulticastAddDeviceFn = CUresult (*)(CUmemGenericAllocationHandle, CUdevice);
using MulticastBindMemFn = CUresult (*)(CUmemGenericAllocationHandle, std::size_t,
                                        CUmemGenericAllocationHandle, std::size_t, std::size_t,
                                        unsigned long long);

// The opened driver library and the entry points the launcher calls.
struct Driver {
  Driver() = default;
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;
  ~Driver();

  std::string path;
  void* library = nullptr;
  GetErrorTextFn get_error_name = nullptr;
  GetErrorTextFn get_error_string = nullptr;
  StreamGetCtxFn stream_get_ctx = nullptr;
  CtxPushFn ctx_push = nullptr;
  CtxPopFn ctx_pop = nullptr;
  ModuleLoadDataFn module_load_data = nullptr;
  ModuleUnloadFn module_unload = nullptr;
  ModuleGetFunctionFn module_get_function = nullptr;
  FuncSetAttributeFn func_set_attribute = nullptr;
  LaunchKernelExFn launch_kernel_ex = nullptr;
  MemsetD8AsyncFn memset_d8_async = nullptr;
  TensorMapEncodeTiledFn tensor_map_encode_tiled = nullptr;
  EventCreateFn event_create = nullptr;
  EventRecordFn event_record = nullptr;
  EventSynchronizeFn event_synchronize = nullptr;
  EventElapsedTimeFn event_elapsed_time = nullptr;
  EventDestroyFn event_destroy = nullptr;

  // Entry points of collective launches only: resolved when present (multicast needs a
  // CUDA 12.1+ driver), so an older driver still launches other kernels. `missing` names
  // the first one the library lacks ("" when it has them all).
  std::string missing;
  CtxGetDeviceFn ctx_get_device = nullptr;
  CtxSynchronizeFn ctx_synchronize = nullptr;
  DeviceGetAttributeFn device_get_attribute = nullptr;
  DeviceCanAccessPeerFn device_can_access_peer = nullptr;
  StreamSynchronizeFn stream_synchronize = nullptr;
  MemcpyDtoHAsyncFn memcpy_dtoh_async = nullptr;
  MemcpyHtoDFn memcpy_htod = nullptr;
  MemAllocFn mem_alloc = nullptr;
  MemFreeFn mem_free = nullptr;
  MemsetD8Fn memset_d8 = nullptr;
  MemGetAllocationGranularityFn mem_get_allocation_granularity = nullptr;
  MemCreateFn mem_create = nullptr;
  MemReleaseFn mem_release = nullptr;
  MemAddressReserveFn mem_address_reserve = nullptr;
  MemAddressFreeFn mem_address_free = nullptr;
  MemMapFn mem_map = nullptr;
  MemUnmapFn mem_unmap = nullptr;
  MemSetAccessFn mem_set_access = nullptr;
  MulticastGetGranularityFn multicast_get_granularity = nullptr;
  MulticastCreateFn multicast_create = nullptr;
  MulticastAddDeviceFn multicast_add_device = nullptr;
  MulticastBindMemFn multicast_bind_mem = nullptr;
};

// The driver library, loaded and resolved at first use (then shared); null with `error`
// set when it cannot be opened or lacks a symbol.
std::shared_ptr<const Driver> LoadedDriver(std::string* error);

// Drops the loaded driver: the next LoadedDriver opens $SMALTI_LIBCUDA again. Launches in
// flight keep the old one alive until they finish.
void ForgetDriver();

// A driver error code as "CUDA_ERROR_INVALID_VALUE (invalid argument)", from cuGetErrorName
// and cuGetErrorString ("CUDA error N" when the driver does not know the code).
std::string DescribeError(const Driver& driver, CUresult result);

}  // namespace smalti::launcher

#endif  // SMALTI_RUNTIME_LAUNCHER_DRIVER_H_
