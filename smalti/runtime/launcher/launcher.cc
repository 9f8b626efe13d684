// smalti's CUDA launcher: an XLA FFI handler that runs one smalti kernel on XLA's stream.
//
// Attributes (set by smalti.runtime.jax_integration):
//   cubin        u8[]   the kernel's cubin
//   kernel       string the kernel's entry name
//   launch       i64[10] grid x,y,z, block x,y,z, cluster x,y,z, dynamic shared bytes
//   tensor_maps  i64[]  per record: arg, data type, rank, swizzle, oob fill, dims[5],
//                       byte strides[4], box[5], element strides[5] (innermost first)
//   debug_bytes  i64    size of the kernel's debug buffer; 0 when it has no debug_print
// Results: the kernel's outputs, then (debug_bytes > 0) its debug buffer, u8[debug_bytes],
// which is zeroed on the stream before the launch and read by the host after it.
// Kernel parameters: one pointer per operand and output (in order), then the tensor maps,
// then (debug_bytes > 0) the debug buffer's pointer (the kernel's `.param .u64 debug`).
// The driver API is reached through dlopen("libcuda.so.1"); no CUDA headers are needed.

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// The few driver API types and constants used here (ABI facts of the CUDA driver API).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;

constexpr int kMaxDynamicSharedSizeBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kLaunchAttributeClusterDimension = 4;  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION

union LaunchAttributeValue {
  char pad[64];
  struct {
    unsigned int x, y, z;
  } cluster_dim;
};

struct LaunchAttribute {
  int id;
  char pad[8 - sizeof(int)];
  LaunchAttributeValue value;
};

struct LaunchConfig {
  unsigned int grid_x, grid_y, grid_z;
  unsigned int block_x, block_y, block_z;
  unsigned int shared_bytes;
  CUstream stream;
  LaunchAttribute* attrs;
  unsigned int num_attrs;
};

struct alignas(128) TensorMap {
  std::uint64_t opaque[16];
};

using GetErrorStringFn = CUresult (*)(CUresult, const char**);
using StreamGetCtxFn = CUresult (*)(CUstream, CUcontext*);
using CtxPushFn = CUresult (*)(CUcontext);
using CtxPopFn = CUresult (*)(CUcontext*);
using ModuleLoadDataFn = CUresult (*)(CUmodule*, const void*);
using ModuleGetFunctionFn = CUresult (*)(CUfunction*, CUmodule, const char*);
using FuncSetAttributeFn = CUresult (*)(CUfunction, int, int);
using LaunchKernelExFn = CUresult (*)(const LaunchConfig*, CUfunction, void**, void**);
// cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream); the
// symbol has no _v2 variant (only the synchronous cuMemsetD8 does).
using MemsetD8AsyncFn = CUresult (*)(CUdeviceptr, unsigned char, std::size_t, CUstream);
using TensorMapEncodeTiledFn = CUresult (*)(TensorMap*, int, std::uint32_t, void*,
                                            const std::uint64_t*, const std::uint64_t*,
                                            const std::uint32_t*, const std::uint32_t*, int,
                                            int, int, int);

struct Driver {
  GetErrorStringFn get_error_string = nullptr;
  StreamGetCtxFn stream_get_ctx = nullptr;
  CtxPushFn ctx_push = nullptr;
  CtxPopFn ctx_pop = nullptr;
  ModuleLoadDataFn module_load_data = nullptr;
  ModuleGetFunctionFn module_get_function = nullptr;
  FuncSetAttributeFn func_set_attribute = nullptr;
  LaunchKernelExFn launch_kernel_ex = nullptr;
  MemsetD8AsyncFn memset_d8_async = nullptr;
  TensorMapEncodeTiledFn tensor_map_encode_tiled = nullptr;
  std::string error;
};

template <typename Fn>
bool Resolve(void* library, const char* name, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (*fn == nullptr) *error = std::string("libcuda.so.1 lacks ") + name;
  return *fn != nullptr;
}

const Driver& GetDriver() {
  static const Driver driver = [] {
    Driver d;
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = dlerror();
      d.error = std::string("cannot load libcuda.so.1: ") + (why ? why : "unknown error");
      return d;
    }
    bool ok = Resolve(library, "cuGetErrorString", &d.get_error_string, &d.error) &&
              Resolve(library, "cuStreamGetCtx", &d.stream_get_ctx, &d.error) &&
              Resolve(library, "cuCtxPushCurrent_v2", &d.ctx_push, &d.error) &&
              Resolve(library, "cuCtxPopCurrent_v2", &d.ctx_pop, &d.error) &&
              Resolve(library, "cuModuleLoadData", &d.module_load_data, &d.error) &&
              Resolve(library, "cuModuleGetFunction", &d.module_get_function, &d.error) &&
              Resolve(library, "cuFuncSetAttribute", &d.func_set_attribute, &d.error) &&
              Resolve(library, "cuLaunchKernelEx", &d.launch_kernel_ex, &d.error) &&
              Resolve(library, "cuMemsetD8Async", &d.memset_d8_async, &d.error) &&
              Resolve(library, "cuTensorMapEncodeTiled", &d.tensor_map_encode_tiled,
                      &d.error);
    (void)ok;
    return d;
  }();
  return driver;
}

ffi::Error DriverError(const Driver& driver, CUresult result, const char* what) {
  const char* text = nullptr;
  if (driver.get_error_string == nullptr || driver.get_error_string(result, &text) != 0) {
    text = nullptr;
  }
  return ffi::Error::Internal(std::string("smalti launcher: ") + what + " failed: " +
                              (text ? text : "CUDA error " + std::to_string(result)));
}

// FNV-1a over the cubin: modules are cached by content (and context), so a new executable
// whose attribute storage reuses an old address never gets a stale module.
std::uint64_t Fingerprint(ffi::Span<const std::uint8_t> bytes) {
  std::uint64_t hash = 1469598103934665603ull;
  for (std::uint8_t byte : bytes) hash = (hash ^ byte) * 1099511628211ull;
  return hash;
}

using FunctionKey = std::tuple<CUcontext, std::uint64_t, std::size_t, std::string>;

ffi::Error LoadFunction(const Driver& driver, CUcontext context,
                        ffi::Span<const std::uint8_t> cubin, std::string_view kernel,
                        std::int64_t shared_bytes, CUfunction* function) {
  static std::mutex mutex;
  static std::map<FunctionKey, CUfunction> functions;
  FunctionKey key{context, Fingerprint(cubin), cubin.size(), std::string(kernel)};
  std::lock_guard<std::mutex> lock(mutex);
  auto found = functions.find(key);
  if (found != functions.end()) {
    *function = found->second;
    return ffi::Error::Success();
  }
  CUresult result = driver.ctx_push(context);
  if (result != 0) return DriverError(driver, result, "cuCtxPushCurrent");
  // Give cuModuleLoadData an 8-byte aligned copy of the image.
  std::vector<std::uint64_t> image(cubin.size() / 8 + 1, 0);
  std::memcpy(image.data(), &cubin[0], cubin.size());
  CUmodule module = nullptr;
  const char* failed = nullptr;
  result = driver.module_load_data(&module, image.data());
  if (result != 0) {
    failed = "cuModuleLoadData";
  } else if ((result = driver.module_get_function(function, module, std::get<3>(key).c_str()))
             != 0) {
    failed = "cuModuleGetFunction";
  } else if (shared_bytes > 48 * 1024 &&
             (result = driver.func_set_attribute(*function, kMaxDynamicSharedSizeBytes,
                                                 static_cast<int>(shared_bytes))) != 0) {
    failed = "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)";
  }
  CUcontext popped = nullptr;
  driver.ctx_pop(&popped);
  if (failed != nullptr) return DriverError(driver, result, failed);
  functions.emplace(key, *function);
  return ffi::Error::Success();
}

constexpr std::size_t kRecordSize = 24;  // i64 entries per tensor-map record

ffi::Error EncodeTensorMaps(const Driver& driver, ffi::Span<const std::int64_t> records,
                            const std::vector<void*>& buffers, std::vector<TensorMap>* maps) {
  if (records.size() % kRecordSize != 0) {
    return ffi::Error::InvalidArgument("smalti launcher: malformed tensor_maps attribute");
  }
  maps->resize(records.size() / kRecordSize);
  for (std::size_t m = 0; m < maps->size(); ++m) {
    const std::int64_t* r = &records[m * kRecordSize];
    std::int64_t arg = r[0], rank = r[2];
    if (arg < 0 || static_cast<std::size_t>(arg) >= buffers.size() || rank < 1 || rank > 5) {
      return ffi::Error::InvalidArgument("smalti launcher: bad tensor map record " +
                                         std::to_string(m));
    }
    std::uint64_t dims[5], strides[4];
    std::uint32_t box[5], element_strides[5];
    for (int d = 0; d < 5; ++d) {
      dims[d] = static_cast<std::uint64_t>(r[5 + d]);
      box[d] = static_cast<std::uint32_t>(r[14 + d]);
      element_strides[d] = static_cast<std::uint32_t>(r[19 + d]);
    }
    for (int d = 0; d < 4; ++d) strides[d] = static_cast<std::uint64_t>(r[10 + d]);
    CUresult result = driver.tensor_map_encode_tiled(
        &(*maps)[m], static_cast<int>(r[1]), static_cast<std::uint32_t>(rank), buffers[arg],
        dims, strides, box, element_strides, /*interleave=*/0, static_cast<int>(r[3]),
        /*l2 promotion=*/2, static_cast<int>(r[4]));
    if (result != 0) return DriverError(driver, result, "cuTensorMapEncodeTiled");
  }
  return ffi::Error::Success();
}

// The debug buffer: the last result when debug_bytes > 0 (checked to be u8[debug_bytes]),
// else null.
ffi::Error DebugBuffer(ffi::RemainingRets rets, std::int64_t debug_bytes, void** debug) {
  *debug = nullptr;
  if (debug_bytes == 0) return ffi::Error::Success();
  if (debug_bytes < 0 || rets.size() == 0) {
    return ffi::Error::InvalidArgument("smalti launcher: debug_bytes does not match results");
  }
  auto buffer = rets.get<ffi::AnyBuffer>(rets.size() - 1);
  if (buffer.has_error()) return buffer.error();
  if ((*buffer)->element_type() != ffi::DataType::U8 ||
      (*buffer)->size_bytes() != static_cast<std::size_t>(debug_bytes)) {
    return ffi::Error::InvalidArgument("smalti launcher: the last result must be the u8[" +
                                       std::to_string(debug_bytes) + "] debug buffer");
  }
  *debug = (*buffer)->untyped_data();
  return ffi::Error::Success();
}

// Makes the stream's context current for the calls in its scope.
class ScopedContext {
 public:
  ScopedContext(const Driver& driver, CUcontext context)
      : driver_(driver), result_(driver.ctx_push(context)) {}
  ~ScopedContext() {
    CUcontext popped = nullptr;
    if (result_ == 0) driver_.ctx_pop(&popped);
  }
  CUresult result() const { return result_; }

 private:
  const Driver& driver_;
  CUresult result_;
};

ffi::Error Launch(CUstream stream, ffi::RemainingArgs args, ffi::RemainingRets rets,
                  ffi::Span<const std::uint8_t> cubin, std::string_view kernel,
                  ffi::Span<const std::int64_t> launch,
                  ffi::Span<const std::int64_t> tensor_maps, std::int64_t debug_bytes) {
  const Driver& driver = GetDriver();
  if (!driver.error.empty()) return ffi::Error::Internal("smalti launcher: " + driver.error);
  if (launch.size() != 10) {
    return ffi::Error::InvalidArgument("smalti launcher: launch must hold 10 values");
  }
  const bool has_debug = debug_bytes > 0;
  void* debug = nullptr;
  if (ffi::Error error = DebugBuffer(rets, debug_bytes, &debug); error.failure()) return error;
  std::size_t outputs = rets.size() - (has_debug ? 1 : 0);
  std::vector<void*> buffers;
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto buffer = args.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    buffers.push_back(buffer.value().untyped_data());
  }
  for (std::size_t i = 0; i < outputs; ++i) {
    auto buffer = rets.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    buffers.push_back((*buffer)->untyped_data());
  }
  CUcontext context = nullptr;
  CUresult result = driver.stream_get_ctx(stream, &context);
  if (result != 0) return DriverError(driver, result, "cuStreamGetCtx");
  CUfunction function = nullptr;
  if (ffi::Error error = LoadFunction(driver, context, cubin, kernel, launch[9], &function);
      error.failure()) {
    return error;
  }
  std::vector<TensorMap> maps;
  if (ffi::Error error = EncodeTensorMaps(driver, tensor_maps, buffers, &maps);
      error.failure()) {
    return error;
  }
  std::vector<CUdeviceptr> pointers;
  for (void* buffer : buffers) pointers.push_back(reinterpret_cast<CUdeviceptr>(buffer));
  std::vector<void*> params;
  for (CUdeviceptr& pointer : pointers) params.push_back(&pointer);
  for (TensorMap& map : maps) params.push_back(&map);
  CUdeviceptr debug_pointer = reinterpret_cast<CUdeviceptr>(debug);
  if (has_debug) params.push_back(&debug_pointer);

  LaunchAttribute cluster{};
  cluster.id = kLaunchAttributeClusterDimension;
  cluster.value.cluster_dim.x = static_cast<unsigned int>(launch[6]);
  cluster.value.cluster_dim.y = static_cast<unsigned int>(launch[7]);
  cluster.value.cluster_dim.z = static_cast<unsigned int>(launch[8]);
  bool clustered = launch[6] * launch[7] * launch[8] > 1;
  LaunchConfig config{};
  config.grid_x = static_cast<unsigned int>(launch[0]);
  config.grid_y = static_cast<unsigned int>(launch[1]);
  config.grid_z = static_cast<unsigned int>(launch[2]);
  config.block_x = static_cast<unsigned int>(launch[3]);
  config.block_y = static_cast<unsigned int>(launch[4]);
  config.block_z = static_cast<unsigned int>(launch[5]);
  config.shared_bytes = static_cast<unsigned int>(launch[9]);
  config.stream = stream;
  config.attrs = clustered ? &cluster : nullptr;
  config.num_attrs = clustered ? 1 : 0;
  ScopedContext current(driver, context);
  if (current.result() != 0) return DriverError(driver, current.result(), "cuCtxPushCurrent");
  if (has_debug &&
      (result = driver.memset_d8_async(debug_pointer, 0, static_cast<std::size_t>(debug_bytes),
                                       stream)) != 0) {
    return DriverError(driver, result, "cuMemsetD8Async");
  }
  result = driver.launch_kernel_ex(&config, function, params.data(), nullptr);
  if (result != 0) return DriverError(driver, result, "cuLaunchKernelEx");
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(SmaltiLaunch, Launch,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<CUstream>>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<ffi::Span<const std::uint8_t>>("cubin")
                                  .Attr<std::string_view>("kernel")
                                  .Attr<ffi::Span<const std::int64_t>>("launch")
                                  .Attr<ffi::Span<const std::int64_t>>("tensor_maps")
                                  .Attr<std::int64_t>("debug_bytes"));
