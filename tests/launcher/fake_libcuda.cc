// A recording stand-in for libcuda.so.1, so smalti's launcher can be tested without a GPU.
//
// It exports every driver entry point the launcher resolves, appends one JSON line per call
// (its arguments, its result, and the reason for a rejection) to $SMALTI_FAKE_CUDA_LOG when
// that is set, and checks each call's documented preconditions the way the driver does,
// returning CUDA_ERROR_INVALID_VALUE (or the code the driver would) when one is violated. It
// models one H100 (sm_90) with one context; streams are opaque values that all belong to it.
//
// Modules are cubins (ELF): kernels, their parameter sizes (EIATTR_KPARAM_INFO of
// .nv.info.<kernel>), thread and cluster requirements, register counts and static shared
// memory are read at cuModuleLoadData, and a launch records each parameter's bytes.
// Device pointers are host memory: cuMemsetD8Async really writes.
//
// For collective launches it models kDevices H100s in one process (device d has context d;
// a stream handle's bits 4-7 name its device, so the null stream belongs to device 0), with
// the virtual memory management API: a physical allocation (cuMemCreate) is a memfd, a
// reservation (cuMemAddressReserve) an inaccessible host range, and cuMemMap maps the memfd
// there, so every mapping of an allocation aliases the same bytes; access descriptors
// (cuMemSetAccess) are kept per mapping and checked by the calls that touch memory
// (cuMemsetD8, cuMemcpyHtoD). Multicast objects keep their team and bindings (their mapping
// is plain memory: a write through it reaches no device's allocation). Test knobs:
//   SMALTI_FAKE_CUDA_FAIL=NAME[:CODE][,...]  entry point NAME fails with CODE (or a
//                                            plausible default) before checking anything
//   SMALTI_FAKE_CUDA_STAMP=1                 a launch writes byte (ordinal + 1) where each
//                                            8-byte parameter points (which buffer is which)
//   SMALTI_FAKE_CUDA_NO_MULTICAST=D[,...]    devices D report no multicast support
//   SMALTI_FAKE_CUDA_NO_VMM=D[,...]          devices D report no VMM support
//   SMALTI_FAKE_CUDA_NO_PEER=D[,...]         devices D cannot access (or be accessed by) peers
//   SMALTI_FAKE_CUDA_KERNEL_MS=NAME:MS[,...] a launch of kernel NAME takes MS milliseconds of
//                                            device time (others 0)
// Events (cuEventCreate/Record/Synchronize/ElapsedTime/Destroy) run on a deterministic clock:
// each stream has one, advanced by every launch on it by the kernel's device time; a recorded
// event captures its stream's clock and completes when it is synchronised (or its stream is).
// The ABI types below are written from the driver API's documentation, independently of the
// launcher's own, so a layout mistake on either side shows up as a failed check.

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;

constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;        // CUDA_ERROR_INVALID_VALUE
constexpr CUresult kInvalidImage = 200;      // CUDA_ERROR_INVALID_IMAGE
constexpr CUresult kInvalidContext = 201;    // CUDA_ERROR_INVALID_CONTEXT
constexpr CUresult kNoBinaryForGpu = 209;    // CUDA_ERROR_NO_BINARY_FOR_GPU
constexpr CUresult kInvalidHandle = 400;     // CUDA_ERROR_INVALID_HANDLE
constexpr CUresult kNotFound = 500;          // CUDA_ERROR_NOT_FOUND
constexpr CUresult kIllegalAddress = 700;    // CUDA_ERROR_ILLEGAL_ADDRESS
constexpr CUresult kOutOfResources = 701;    // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
constexpr CUresult kInvalidCluster = 912;    // CUDA_ERROR_INVALID_CLUSTER_SIZE
constexpr CUresult kOutOfMemory = 2;         // CUDA_ERROR_OUT_OF_MEMORY
constexpr CUresult kInvalidDevice = 101;     // CUDA_ERROR_INVALID_DEVICE
constexpr CUresult kNotSupported = 801;      // CUDA_ERROR_NOT_SUPPORTED
constexpr CUresult kNotReady = 600;          // CUDA_ERROR_NOT_READY

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};

constexpr ErrorText kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {912, "CUDA_ERROR_INVALID_CLUSTER_SIZE",
     "a kernel launch error has occurred due to cluster misconfiguration"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

// Device limits of an H100 (compute capability 9.0).
constexpr std::uint64_t kMaxThreadsPerBlock = 1024;
constexpr std::uint64_t kMaxBlockDim[3] = {1024, 1024, 64};
constexpr std::uint64_t kMaxGridDim[3] = {0x7fffffff, 65535, 65535};
constexpr std::int64_t kDefaultDynamicShared = 48 * 1024;
constexpr std::int64_t kMaxSharedPerBlockOptin = 232448;  // 227 KiB
constexpr std::uint64_t kRegistersPerBlock = 65536;
constexpr std::uint64_t kRegisterGranularity = 256;  // registers allocated per warp in units
constexpr std::uint64_t kMaxPortableCluster = 8;
// ptxas puts the 1 KiB the system reserves per block on sm_90 at the start of a kernel's
// .nv.shared section (its own variables start at 0x400); it is not the kernel's to count.
constexpr std::uint64_t kReservedShared = 1024;

// cuda.h ABI, from the driver API documentation.
struct CUctx_st {
  int id;
  int device;  // its device's ordinal
};
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;

union alignas(8) CUlaunchAttributeValue {
  char pad[64];
  struct {
    unsigned int x, y, z;
  } clusterDim;
};

struct CUlaunchAttribute {
  int id;
  char pad[8 - sizeof(int)];
  CUlaunchAttributeValue value;
};

struct CUlaunchConfig {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
};

constexpr int kLaunchAttributeClusterDimension = 4;
constexpr int kFuncAttributeMaxDynamicSharedSizeBytes = 8;
constexpr int kFuncAttributePreferredSharedMemoryCarveout = 9;

// ---------------------------------------------------------------------------------------
// Recording.

std::mutex log_mutex;

std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Hex(const void* data, std::size_t size) {
  static const char digits[] = "0123456789abcdef";
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  std::string out;
  for (std::size_t i = 0; i < size; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

template <typename T>
std::string List(const T* values, std::size_t count) {
  std::string out = "[";
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + "]";
}

// One call's JSON object, written to the log by Finish.
class Record {
 public:
  explicit Record(const char* call) : text_("{\"call\": " + Quoted(call)) {}

  Record& Raw(const char* key, const std::string& json) {
    text_ += ", " + Quoted(key) + ": " + json;
    return *this;
  }
  Record& Int(const char* key, long long value) { return Raw(key, std::to_string(value)); }
  Record& Uint(const char* key, unsigned long long value) {
    return Raw(key, std::to_string(value));
  }
  Record& Str(const char* key, const std::string& value) { return Raw(key, Quoted(value)); }

  // Writes the record with its result (and the reason for a failure); returns the result.
  CUresult Finish(CUresult result, const std::string& reason = "") {
    Int("result", result);
    if (!reason.empty()) Str("reason", reason);
    const char* path = std::getenv("SMALTI_FAKE_CUDA_LOG");
    if (path != nullptr && *path != '\0') {
      std::lock_guard<std::mutex> lock(log_mutex);
      if (std::FILE* file = std::fopen(path, "a")) {
        std::fputs((text_ + "}\n").c_str(), file);
        std::fclose(file);
      }
    }
    return result;
  }

 private:
  std::string text_;
};

CUresult DefaultFailure(const std::string& name) {
  static const std::map<std::string, CUresult> defaults = {
      {"cuStreamGetCtx", kInvalidHandle},     {"cuCtxPushCurrent_v2", kInvalidContext},
      {"cuCtxPopCurrent_v2", kInvalidContext}, {"cuModuleLoadData", kInvalidImage},
      {"cuModuleUnload", kInvalidHandle},     {"cuModuleGetFunction", kNotFound},
      {"cuFuncSetAttribute", kInvalidValue},  {"cuTensorMapEncodeTiled", kInvalidValue},
      {"cuMemsetD8Async", kIllegalAddress},   {"cuLaunchKernelEx", kOutOfResources},
      {"cuMulticastCreate", kNotSupported},   {"cuMemCreate", kOutOfMemory},
      {"cuMemMap", kOutOfMemory},             {"cuMemAlloc_v2", kOutOfMemory},
      {"cuMemcpyDtoHAsync_v2", kIllegalAddress}, {"cuMulticastBindMem", kInvalidValue},
      {"cuEventCreate", kOutOfMemory},        {"cuEventRecord", kInvalidHandle},
      {"cuEventSynchronize", kIllegalAddress}, {"cuEventElapsedTime", kNotReady},
      {"cuEventDestroy_v2", kInvalidHandle},
  };
  auto found = defaults.find(name);
  return found == defaults.end() ? 999 : found->second;
}

// Whether $SMALTI_FAKE_CUDA_FAIL asks `call` to fail, and with which code.
bool Injected(const char* call, CUresult* code) {
  const char* spec = std::getenv("SMALTI_FAKE_CUDA_FAIL");
  if (spec == nullptr) return false;
  std::string entries = spec;
  std::size_t start = 0;
  while (start <= entries.size()) {
    std::size_t end = entries.find(',', start);
    if (end == std::string::npos) end = entries.size();
    std::string entry = entries.substr(start, end - start);
    std::size_t colon = entry.find(':');
    std::string name = entry.substr(0, colon);
    if (name == call) {
      *code = colon == std::string::npos ? DefaultFailure(name)
                                         : std::atoi(entry.c_str() + colon + 1);
      return true;
    }
    start = end + 1;
  }
  return false;
}

#define FAKE_INJECT(record, name)                           \
  do {                                                      \
    CUresult injected_code = 0;                             \
    if (Injected(name, &injected_code)) {                   \
      (record).Raw("injected", "true");                     \
      return (record).Finish(injected_code, "injected");    \
    }                                                       \
  } while (0)

// ---------------------------------------------------------------------------------------
// The device state: one context, its current-context stack per thread, modules, functions.

constexpr int kDevices = 8;
CUctx_st contexts[kDevices] = {{1, 0}, {2, 1}, {3, 2}, {4, 3}, {5, 4}, {6, 5}, {7, 6}, {8, 7}};
thread_local std::vector<CUcontext> context_stack;

bool ValidContext(CUcontext context) {
  return context >= contexts && context < contexts + kDevices;
}

CUcontext Current() { return context_stack.empty() ? nullptr : context_stack.back(); }

struct Param {
  std::uint32_t ordinal, offset, size;
};

struct Kernel {
  std::vector<Param> params;  // by ordinal
  std::uint32_t max_threads[3] = {0, 0, 0};  // EIATTR_MAX_THREADS (.maxntid), 0: none
  std::uint32_t reqntid[3] = {0, 0, 0};      // EIATTR_REQNTID (.reqntid), 0: none
  std::uint32_t cluster[3] = {0, 0, 0};      // EIATTR_CTA_PER_CLUSTER (.reqnctapercluster)
  bool explicit_cluster = false;             // EIATTR_EXPLICIT_CLUSTER (.explicitcluster)
  std::uint32_t registers = 0;               // EIATTR_REGCOUNT
  std::uint64_t shared_section = 0;          // size of .nv.shared.<kernel>
  std::uint64_t static_shared = 0;           // the kernel's own part of it
};

}  // namespace

struct CUmod_st {
  int id;
  CUcontext context;
  int sm;
  std::map<std::string, Kernel> kernels;
  std::map<std::string, struct CUfunc_st*> functions;
};

struct CUfunc_st {
  int id;
  CUmod_st* module;
  std::string name;
  Kernel kernel;
  std::int64_t max_dynamic_shared = kDefaultDynamicShared;
};

namespace {

std::mutex state_mutex;
std::set<CUmod_st*> modules;      // guarded by state_mutex
std::set<CUfunc_st*> functions;   // guarded by state_mutex
int next_id = 1;                  // guarded by state_mutex
std::uint64_t next_map_serial = 1;  // guarded by state_mutex

// ---------------------------------------------------------------------------------------
// Cubin (ELF) reading.

template <typename T>
T Read(const std::uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

struct Section {
  std::string name;
  std::uint32_t type;
  std::uint64_t offset, size;
};

constexpr std::uint16_t kMachineCuda = 190;  // EM_CUDA
constexpr std::uint32_t kSectionNoBits = 8;  // SHT_NOBITS
constexpr std::uint32_t kSectionSymtab = 2;  // SHT_SYMTAB
// .nv.info record formats and attributes.
constexpr std::uint8_t kFormatSval = 0x04;
constexpr std::uint8_t kAttrMaxThreads = 0x05;
constexpr std::uint8_t kAttrReqntid = 0x10;
constexpr std::uint8_t kAttrKparamInfo = 0x17;
constexpr std::uint8_t kAttrRegcount = 0x2f;
constexpr std::uint8_t kAttrCtaPerCluster = 0x3d;
constexpr std::uint8_t kAttrExplicitCluster = 0x3e;

// Calls `visit(attribute, payload, payload_size)` for each record of an .nv.info section;
// false when the records do not tile the section.
template <typename Visit>
bool VisitInfo(const std::uint8_t* image, const Section& section, Visit visit) {
  std::uint64_t at = section.offset, end = section.offset + section.size;
  while (at + 4 <= end) {
    std::uint8_t format = image[at], attribute = image[at + 1];
    if (format == kFormatSval) {
      std::uint16_t size = Read<std::uint16_t>(image + at + 2);
      if (at + 4 + size > end) return false;
      visit(attribute, image + at + 4, size);
      at += 4 + size;
    } else if (format >= 1 && format <= 3) {  // EIFMT_NVAL, _BVAL, _HVAL: a 2-byte value
      visit(attribute, image + at + 2, 2);
      at += 4;
    } else {
      return false;
    }
  }
  return at == end;
}

void ReadTriple(const std::uint8_t* payload, std::uint16_t size, std::uint32_t* out) {
  if (size >= 12) {
    for (int i = 0; i < 3; ++i) out[i] = Read<std::uint32_t>(payload + 4 * i);
  }
}

// Reads a cubin into `module`; an empty string, or why the image is not one.
std::string ReadCubin(const std::uint8_t* image, CUmod_st* module) {
  static const std::uint8_t kMagic[4] = {0x7f, 'E', 'L', 'F'};
  if (std::memcmp(image, kMagic, 4) != 0) return "not an ELF image";
  if (image[4] != 2 || image[5] != 1) return "not a little-endian ELF64 image";
  if (Read<std::uint16_t>(image + 18) != kMachineCuda) return "not a CUDA ELF (e_machine)";
  const std::uint8_t abi_version = image[8];
  const std::uint32_t flags = Read<std::uint32_t>(image + 48);
  module->sm = static_cast<int>(abi_version >= 8 ? (flags >> 8) & 0xff : flags & 0xff);
  const std::uint64_t section_table = Read<std::uint64_t>(image + 40);
  const std::uint16_t entry_size = Read<std::uint16_t>(image + 58);
  const std::uint16_t count = Read<std::uint16_t>(image + 60);
  const std::uint16_t names_index = Read<std::uint16_t>(image + 62);
  if (entry_size != 64 || names_index >= count) return "malformed section table";
  std::vector<Section> sections(count);
  std::vector<std::uint32_t> name_offsets(count);
  for (std::uint16_t i = 0; i < count; ++i) {
    const std::uint8_t* header = image + section_table + 64ull * i;
    name_offsets[i] = Read<std::uint32_t>(header);
    sections[i].type = Read<std::uint32_t>(header + 4);
    sections[i].offset = Read<std::uint64_t>(header + 24);
    sections[i].size = Read<std::uint64_t>(header + 32);
  }
  const char* names = reinterpret_cast<const char*>(image + sections[names_index].offset);
  std::map<std::string, const Section*> by_name;
  const Section* symtab = nullptr;
  std::uint32_t strtab_index = 0;
  for (std::uint16_t i = 0; i < count; ++i) {
    sections[i].name = names + name_offsets[i];
    by_name[sections[i].name] = &sections[i];
    if (sections[i].type == kSectionSymtab) {
      symtab = &sections[i];
      strtab_index = Read<std::uint32_t>(image + section_table + 64ull * i + 40);  // sh_link
    }
  }
  if (symtab == nullptr || strtab_index >= count) return "no symbol table";
  const char* symbol_names = reinterpret_cast<const char*>(image + sections[strtab_index].offset);
  std::vector<std::string> symbols;
  for (std::uint64_t at = 0; at + 24 <= symtab->size; at += 24) {
    const std::uint8_t* symbol = image + symtab->offset + at;
    std::string name = symbol_names + Read<std::uint32_t>(symbol);
    symbols.push_back(name);
    const std::uint8_t type = symbol[4] & 0xf;  // STT_FUNC = 2
    if (type == 2 && by_name.count(".nv.info." + name)) module->kernels[name] = Kernel{};
  }
  for (auto& [name, kernel] : module->kernels) {
    Kernel* k = &kernel;
    bool tiled = VisitInfo(image, *by_name[".nv.info." + name],
                           [k](std::uint8_t attribute, const std::uint8_t* payload,
                               std::uint16_t size) {
      if (attribute == kAttrKparamInfo && size >= 12) {
        std::uint32_t packed = Read<std::uint32_t>(payload + 8);
        k->params.push_back({Read<std::uint16_t>(payload + 4), Read<std::uint16_t>(payload + 6),
                             packed >> 18});
      } else if (attribute == kAttrMaxThreads) {
        ReadTriple(payload, size, k->max_threads);
      } else if (attribute == kAttrReqntid) {
        ReadTriple(payload, size, k->reqntid);
      } else if (attribute == kAttrCtaPerCluster) {
        ReadTriple(payload, size, k->cluster);
      } else if (attribute == kAttrExplicitCluster) {
        k->explicit_cluster = true;
      }
    });
    if (!tiled) return "malformed .nv.info." + name;
    std::sort(k->params.begin(), k->params.end(),
              [](const Param& a, const Param& b) { return a.ordinal < b.ordinal; });
    for (std::size_t i = 0; i < k->params.size(); ++i) {
      if (k->params[i].ordinal != i) return "kernel " + name + " has a gap in its parameters";
    }
    auto shared = by_name.find(".nv.shared." + name);
    if (shared != by_name.end()) {
      k->shared_section = shared->second->size;
      bool reserved = by_name.count(".nv.shared.reserved.0") && k->shared_section >= kReservedShared;
      k->static_shared = k->shared_section - (reserved ? kReservedShared : 0);
    }
  }
  auto info = by_name.find(".nv.info");
  if (info != by_name.end()) {
    CUmod_st* m = module;
    VisitInfo(image, *info->second, [m, &symbols](std::uint8_t attribute,
                                                  const std::uint8_t* payload,
                                                  std::uint16_t size) {
      if (attribute != kAttrRegcount || size < 8) return;
      std::uint32_t symbol = Read<std::uint32_t>(payload);
      if (symbol < symbols.size() && m->kernels.count(symbols[symbol])) {
        m->kernels[symbols[symbol]].registers = Read<std::uint32_t>(payload + 4);
      }
    });
  }
  return "";
}

std::string KernelJson(const Kernel& k) {
  std::string params = "[";
  for (std::size_t i = 0; i < k.params.size(); ++i) {
    if (i > 0) params += ", ";
    params += "{\"ordinal\": " + std::to_string(k.params[i].ordinal) +
              ", \"offset\": " + std::to_string(k.params[i].offset) +
              ", \"size\": " + std::to_string(k.params[i].size) + "}";
  }
  params += "]";
  return "{\"params\": " + params + ", \"max_threads\": " + List(k.max_threads, 3) +
         ", \"reqntid\": " + List(k.reqntid, 3) + ", \"cluster\": " + List(k.cluster, 3) +
         ", \"explicit_cluster\": " + (k.explicit_cluster ? "true" : "false") +
         ", \"registers\": " + std::to_string(k.registers) +
         ", \"shared_section\": " + std::to_string(k.shared_section) +
         ", \"static_shared\": " + std::to_string(k.static_shared) + "}";
}

// The path this library was loaded from (tests tell copies of the stand-in apart by it).
std::string OwnPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OwnPath), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  return info.dli_fname;
}

bool ValidFunction(CUfunc_st* function) {
  std::lock_guard<std::mutex> lock(state_mutex);
  return functions.count(function) > 0;
}

// ---------------------------------------------------------------------------------------
// Tensor maps.

// Bytes per element of each CUtensorMapDataType an sm_90 device supports (UINT8 .. TFLOAT32_FTZ).
constexpr std::uint32_t kElementBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
constexpr int kDataTypes = sizeof(kElementBytes) / sizeof(kElementBytes[0]);
constexpr int kFirstFloatType = 6;  // FLOAT16 and after are floating point

std::string CheckTensorMap(const void* map, int data_type, std::uint32_t rank,
                           const void* address, const std::uint64_t* dims,
                           const std::uint64_t* strides, const std::uint32_t* box,
                           const std::uint32_t* element_strides, int interleave, int swizzle,
                           int l2_promotion, int oob_fill) {
  if (map == nullptr) return "tensorMap is null";
  if (reinterpret_cast<std::uintptr_t>(map) % 64 != 0) return "tensorMap is not 64-byte aligned";
  if (data_type < 0 || data_type >= kDataTypes) {
    return "tensorDataType " + std::to_string(data_type) + " is not a CUtensorMapDataType";
  }
  if (interleave < 0 || interleave > 2) return "interleave " + std::to_string(interleave);
  if (swizzle < 0 || swizzle > 3) return "swizzle " + std::to_string(swizzle) + " (sm_90: 0-3)";
  if (l2_promotion < 0 || l2_promotion > 3) return "l2Promotion " + std::to_string(l2_promotion);
  if (oob_fill < 0 || oob_fill > 1) return "oobFill " + std::to_string(oob_fill);
  if (oob_fill == 1 && data_type < kFirstFloatType) {
    return "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA needs a floating-point type";
  }
  if (rank < 1 || rank > 5) return "tensorRank " + std::to_string(rank) + " is not 1 to 5";
  if (interleave != 0 && rank < 3) return "an interleaved tensorRank must be at least 3";
  if (address == nullptr || dims == nullptr || box == nullptr || element_strides == nullptr ||
      (rank > 1 && strides == nullptr)) {
    return "a null array or globalAddress";
  }
  const std::uintptr_t alignment = interleave == 2 ? 32 : 16;
  if (reinterpret_cast<std::uintptr_t>(address) % alignment != 0) {
    return "globalAddress is not " + std::to_string(alignment) + "-byte aligned";
  }
  for (std::uint32_t d = 0; d < rank; ++d) {
    if (dims[d] == 0 || dims[d] > (1ull << 32)) {
      return "globalDim[" + std::to_string(d) + "] = " + std::to_string(dims[d]) +
             " is not in 1..2^32";
    }
    if (box[d] == 0 || box[d] > 256) {
      return "boxDim[" + std::to_string(d) + "] = " + std::to_string(box[d]) +
             " is not in 1..256";
    }
    if (element_strides[d] == 0 || element_strides[d] > 8) {
      return "elementStrides[" + std::to_string(d) + "] = " +
             std::to_string(element_strides[d]) + " is not in 1..8";
    }
  }
  for (std::uint32_t d = 0; d + 1 < rank; ++d) {
    const std::uint64_t multiple = interleave == 2 ? 32 : 16;
    if (strides[d] % multiple != 0 || strides[d] >= (1ull << 40)) {
      return "globalStrides[" + std::to_string(d) + "] = " + std::to_string(strides[d]) +
             " is not a multiple of " + std::to_string(multiple) + " below 2^40";
    }
  }
  const std::uint64_t inner_bytes = std::uint64_t{box[0]} * kElementBytes[data_type];
  if (interleave == 0) {
    if (inner_bytes % 16 != 0) {
      return "boxDim[0] * element size = " + std::to_string(inner_bytes) +
             " bytes is not a multiple of 16";
    }
    const std::uint64_t span = swizzle == 0 ? 0 : 16ull << swizzle;  // 32, 64, 128 bytes
    if (span != 0 && inner_bytes > span) {
      return "the box's inner dimension (" + std::to_string(inner_bytes) +
             " bytes) exceeds the swizzle span of " + std::to_string(span) + " bytes";
    }
  }
  if (interleave == 2 && swizzle != 1) return "CU_TENSOR_MAP_INTERLEAVE_32B needs SWIZZLE_32B";
  return "";
}

// ---------------------------------------------------------------------------------------
// Devices, virtual memory management and multicast objects.

// H100 figures: allocations come in 2 MiB granules; the multicast granularity is set apart
// (4 MiB) so that a heap rounded to only one of them shows up.
constexpr std::size_t kAllocationGranularity = 2u << 20;
constexpr std::size_t kMulticastGranularity = 4u << 20;
constexpr int kAttributeVirtualMemoryManagement = 102;  // CU_DEVICE_ATTRIBUTE_...
constexpr int kAttributeMulticastSupported = 132;       // CU_DEVICE_ATTRIBUTE_...
constexpr int kAllocationTypePinned = 1;                // CU_MEM_ALLOCATION_TYPE_PINNED
constexpr int kLocationTypeDevice = 1;                  // CU_MEM_LOCATION_TYPE_DEVICE
constexpr int kAccessReadWrite = 3;                     // CU_MEM_ACCESS_FLAGS_PROT_READWRITE

// cuda.h ABI: CUmemLocation, CUmemAllocationProp, CUmemAccessDesc, CUmulticastObjectProp.
struct CUmemLocation {
  int type;
  int id;
};
struct CUmemAllocationProp {
  int type;
  int requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;
};
struct CUmulticastObjectProp {
  unsigned int numDevices;
  std::size_t size;
  unsigned long long handleTypes;
  unsigned long long flags;
};
static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp");
static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc");
static_assert(sizeof(CUmulticastObjectProp) == 32, "CUmulticastObjectProp");

// Whether the comma-separated device list in environment variable `name` holds `device`.
bool Listed(const char* name, int device) {
  const char* list = std::getenv(name);
  if (list == nullptr) return false;
  std::string text = std::string(",") + list + ",";
  return text.find("," + std::to_string(device) + ",") != std::string::npos;
}

bool ValidDevice(int device) { return device >= 0 && device < kDevices; }

struct Physical {
  int device;
  std::size_t size;
  int fd;  // a memfd: every mapping of the allocation aliases its bytes
};

struct Multicast {
  unsigned int num_devices;
  std::size_t size;
  std::vector<int> devices;                          // in the order added
  std::map<int, std::pair<std::size_t, std::size_t>> bound;  // device -> (offset, size)
};

struct Mapping {
  std::size_t size;
  unsigned long long handle;
  bool multicast;
  std::set<int> access;  // devices allowed to read and write (cuMemSetAccess)
};

std::mutex vmm_mutex;
unsigned long long next_handle = 0x100;                  // guarded by vmm_mutex
std::map<unsigned long long, Physical> physicals;        // guarded by vmm_mutex
std::map<unsigned long long, Multicast> multicasts;      // guarded by vmm_mutex
std::map<CUdeviceptr, std::size_t> reservations;         // base -> size; guarded
std::map<CUdeviceptr, Mapping> mappings;                 // base -> mapping; guarded
std::map<CUdeviceptr, std::pair<int, std::size_t>> allocations;  // cuMemAlloc: device, size

// The reservation holding [address, address + size), or reservations.end().
std::map<CUdeviceptr, std::size_t>::iterator ReservationOf(CUdeviceptr address,
                                                           std::size_t size) {
  auto after = reservations.upper_bound(address);
  if (after == reservations.begin()) return reservations.end();
  auto found = std::prev(after);
  return address + size <= found->first + found->second ? found : reservations.end();
}

// Why `device` may not touch [address, address + size) ("" when it may): inside a
// reservation every byte must be mapped with read-write access for the device.
std::string CheckUse(CUdeviceptr address, std::size_t size, int device) {
  std::lock_guard<std::mutex> lock(vmm_mutex);
  auto after = reservations.upper_bound(address);
  if (after == reservations.begin()) return "";
  auto reservation = std::prev(after);
  if (address >= reservation->first + reservation->second) return "";
  for (CUdeviceptr at = address; at < address + size;) {
    auto next = mappings.upper_bound(at);
    if (next == mappings.begin()) return "an unmapped address of a reservation";
    auto mapping = std::prev(next);
    if (at >= mapping->first + mapping->second.size) {
      return "an unmapped address of a reservation";
    }
    if (mapping->second.access.count(device) == 0) {
      return "memory device " + std::to_string(device) + " has no access to (cuMemSetAccess)";
    }
    at = mapping->first + mapping->second.size;
  }
  return "";
}

std::string CheckAllocationProp(const CUmemAllocationProp* prop) {
  if (prop == nullptr) return "prop is null";
  if (prop->type != kAllocationTypePinned) return "type is not CU_MEM_ALLOCATION_TYPE_PINNED";
  if (prop->location.type != kLocationTypeDevice) return "location is not a device";
  if (!ValidDevice(prop->location.id)) return "location.id is not a device";
  if (prop->requestedHandleTypes < 0 || prop->requestedHandleTypes > 8) {
    return "requestedHandleTypes is not a CUmemAllocationHandleType";
  }
  return "";
}

std::string AllocationPropJson(const CUmemAllocationProp* prop) {
  if (prop == nullptr) return "null";
  return "{\"type\": " + std::to_string(prop->type) +
         ", \"handle_types\": " + std::to_string(prop->requestedHandleTypes) +
         ", \"location_type\": " + std::to_string(prop->location.type) +
         ", \"device\": " + std::to_string(prop->location.id) + "}";
}

std::string MulticastPropJson(const CUmulticastObjectProp* prop) {
  if (prop == nullptr) return "null";
  return "{\"num_devices\": " + std::to_string(prop->numDevices) +
         ", \"size\": " + std::to_string(prop->size) +
         ", \"handle_types\": " + std::to_string(prop->handleTypes) +
         ", \"flags\": " + std::to_string(prop->flags) + "}";
}

int CurrentDevice() { return Current() == nullptr ? -1 : Current()->device; }

}  // namespace

// ---------------------------------------------------------------------------------------
// Device time: a clock per stream, and events on it.

constexpr unsigned int kEventBlockingSync = 0x1;   // CU_EVENT_BLOCKING_SYNC
constexpr unsigned int kEventDisableTiming = 0x2;  // CU_EVENT_DISABLE_TIMING
constexpr unsigned int kEventInterprocess = 0x4;   // CU_EVENT_INTERPROCESS

struct StreamClock {
  double now_ms = 0;            // device time of the work enqueued so far
  std::uint64_t recorded = 0;   // events recorded on the stream
  std::uint64_t completed = 0;  // of which the first `completed` have completed
};

struct CUevent_st {
  int id;
  CUcontext context;
  unsigned int flags;
  bool recorded = false;
  std::uintptr_t stream = 0;
  std::uint64_t sequence = 0;  // its place among its stream's records
  double time_ms = 0;          // its stream's clock when recorded
};

std::map<std::uintptr_t, StreamClock> clocks;  // guarded by state_mutex
std::set<CUevent_st*> events;                  // guarded by state_mutex

// The device time of one launch of `kernel` ($SMALTI_FAKE_CUDA_KERNEL_MS; 0 when unnamed).
double KernelMilliseconds(const std::string& kernel) {
  const char* spec = std::getenv("SMALTI_FAKE_CUDA_KERNEL_MS");
  if (spec == nullptr) return 0;
  std::string entries = spec;
  std::size_t start = 0;
  while (start < entries.size()) {
    std::size_t end = entries.find(',', start);
    if (end == std::string::npos) end = entries.size();
    std::string entry = entries.substr(start, end - start);
    std::size_t colon = entry.find(':');
    if (colon != std::string::npos && entry.substr(0, colon) == kernel) {
      return std::atof(entry.c_str() + colon + 1);
    }
    start = end + 1;
  }
  return 0;
}

bool EventComplete(const CUevent_st* event) {
  return event->sequence <= clocks[event->stream].completed;
}

// ---------------------------------------------------------------------------------------
// The entry points.

extern "C" {

__attribute__((visibility("default"))) CUresult cuGetErrorName(CUresult error,
                                                               const char** name) {
  if (name == nullptr) return kInvalidValue;
  for (const ErrorText& entry : kErrors) {
    if (entry.code == error) {
      *name = entry.name;
      return kSuccess;
    }
  }
  *name = nullptr;
  return kInvalidValue;
}

__attribute__((visibility("default"))) CUresult cuGetErrorString(CUresult error,
                                                                 const char** text) {
  if (text == nullptr) return kInvalidValue;
  for (const ErrorText& entry : kErrors) {
    if (entry.code == error) {
      *text = entry.text;
      return kSuccess;
    }
  }
  *text = nullptr;
  return kInvalidValue;
}

__attribute__((visibility("default"))) CUresult cuStreamGetCtx(CUstream stream,
                                                               CUcontext* context) {
  Record record("cuStreamGetCtx");
  record.Uint("stream", reinterpret_cast<std::uintptr_t>(stream));
  FAKE_INJECT(record, "cuStreamGetCtx");
  if (context == nullptr) return record.Finish(kInvalidValue, "pctx is null");
  const std::uintptr_t device = reinterpret_cast<std::uintptr_t>(stream) >> 4 & 0xf;
  if (device >= kDevices) return record.Finish(kInvalidHandle, "a stream of no device");
  *context = &contexts[device];
  record.Int("device", static_cast<long long>(device));
  record.Uint("context", reinterpret_cast<std::uintptr_t>(*context));
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuCtxPushCurrent_v2(CUcontext context) {
  Record record("cuCtxPushCurrent_v2");
  record.Uint("context", reinterpret_cast<std::uintptr_t>(context));
  FAKE_INJECT(record, "cuCtxPushCurrent_v2");
  if (!ValidContext(context)) return record.Finish(kInvalidContext, "not a context");
  context_stack.push_back(context);
  record.Int("depth", static_cast<long long>(context_stack.size()));
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuCtxPopCurrent_v2(CUcontext* context) {
  Record record("cuCtxPopCurrent_v2");
  FAKE_INJECT(record, "cuCtxPopCurrent_v2");
  if (context_stack.empty()) return record.Finish(kInvalidContext, "no current context");
  if (context != nullptr) *context = context_stack.back();
  context_stack.pop_back();
  record.Int("depth", static_cast<long long>(context_stack.size()));
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuModuleLoadData(CUmod_st** module,
                                                                 const void* image) {
  Record record("cuModuleLoadData");
  record.Uint("image", reinterpret_cast<std::uintptr_t>(image)).Str("library", OwnPath());
  FAKE_INJECT(record, "cuModuleLoadData");
  if (module == nullptr || image == nullptr) return record.Finish(kInvalidValue, "null argument");
  if (Current() == nullptr) return record.Finish(kInvalidContext, "no current context");
  auto loaded = std::make_unique<CUmod_st>();
  loaded->context = Current();
  std::string why = ReadCubin(static_cast<const std::uint8_t*>(image), loaded.get());
  if (!why.empty()) return record.Finish(kInvalidImage, why);
  record.Int("sm", loaded->sm);
  if (loaded->sm != 90) {
    return record.Finish(kNoBinaryForGpu, "a cubin for sm_" + std::to_string(loaded->sm));
  }
  std::string kernels = "{";
  for (const auto& [name, kernel] : loaded->kernels) {
    if (kernels.size() > 1) kernels += ", ";
    kernels += Quoted(name) + ": " + KernelJson(kernel);
  }
  record.Raw("kernels", kernels + "}");
  std::lock_guard<std::mutex> lock(state_mutex);
  loaded->id = next_id++;
  record.Int("module", loaded->id);
  *module = loaded.release();
  modules.insert(*module);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuModuleUnload(CUmod_st* module) {
  Record record("cuModuleUnload");
  FAKE_INJECT(record, "cuModuleUnload");
  std::lock_guard<std::mutex> lock(state_mutex);
  if (modules.count(module) == 0) return record.Finish(kInvalidHandle, "not a module");
  record.Int("module", module->id);
  for (auto& [name, function] : module->functions) {
    functions.erase(function);
    delete function;
  }
  modules.erase(module);
  delete module;
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuModuleGetFunction(CUfunc_st** function,
                                                                    CUmod_st* module,
                                                                    const char* name) {
  Record record("cuModuleGetFunction");
  if (name != nullptr) record.Str("name", name);
  FAKE_INJECT(record, "cuModuleGetFunction");
  if (function == nullptr || name == nullptr) return record.Finish(kInvalidValue, "null argument");
  std::lock_guard<std::mutex> lock(state_mutex);
  if (modules.count(module) == 0) return record.Finish(kInvalidHandle, "not a module");
  record.Int("module", module->id);
  auto kernel = module->kernels.find(name);
  if (kernel == module->kernels.end()) {
    return record.Finish(kNotFound, std::string("no kernel ") + name + " in the module");
  }
  CUfunc_st*& found = module->functions[name];
  if (found == nullptr) {
    found = new CUfunc_st{next_id++, module, name, kernel->second};
    functions.insert(found);
  }
  *function = found;
  record.Int("function", found->id);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuFuncSetAttribute(CUfunc_st* function,
                                                                   int attribute, int value) {
  Record record("cuFuncSetAttribute");
  record.Int("attribute", attribute).Int("value", value);
  FAKE_INJECT(record, "cuFuncSetAttribute");
  if (!ValidFunction(function)) return record.Finish(kInvalidHandle, "not a function");
  record.Int("function", function->id);
  if (attribute == kFuncAttributeMaxDynamicSharedSizeBytes) {
    const std::int64_t total = std::int64_t{value} + function->kernel.static_shared;
    if (value < 0 || total > kMaxSharedPerBlockOptin) {
      return record.Finish(kInvalidValue,
                           "MAX_DYNAMIC_SHARED_SIZE_BYTES " + std::to_string(value) + " plus " +
                               std::to_string(function->kernel.static_shared) +
                               " static bytes exceeds the " +
                               std::to_string(kMaxSharedPerBlockOptin) + "-byte opt-in limit");
    }
    function->max_dynamic_shared = value;
    return record.Finish(kSuccess);
  }
  if (attribute == kFuncAttributePreferredSharedMemoryCarveout && value >= -1 && value <= 100) {
    return record.Finish(kSuccess);
  }
  return record.Finish(kInvalidValue, "attribute not settable here");
}

__attribute__((visibility("default"))) CUresult cuTensorMapEncodeTiled(
    void* map, int data_type, std::uint32_t rank, void* address, const std::uint64_t* dims,
    const std::uint64_t* strides, const std::uint32_t* box, const std::uint32_t* element_strides,
    int interleave, int swizzle, int l2_promotion, int oob_fill) {
  Record record("cuTensorMapEncodeTiled");
  const std::uint32_t shown = std::min<std::uint32_t>(rank, 5);
  record.Uint("map_address", reinterpret_cast<std::uintptr_t>(map))
      .Int("data_type", data_type)
      .Uint("rank", rank)
      .Uint("address", reinterpret_cast<std::uintptr_t>(address))
      .Int("interleave", interleave)
      .Int("swizzle", swizzle)
      .Int("l2_promotion", l2_promotion)
      .Int("oob_fill", oob_fill);
  if (dims != nullptr) record.Raw("dims", List(dims, shown));
  if (strides != nullptr && shown > 1) record.Raw("strides", List(strides, shown - 1));
  if (box != nullptr) record.Raw("box", List(box, shown));
  if (element_strides != nullptr) record.Raw("element_strides", List(element_strides, shown));
  FAKE_INJECT(record, "cuTensorMapEncodeTiled");
  std::string why = CheckTensorMap(map, data_type, rank, address, dims, strides, box,
                                   element_strides, interleave, swizzle, l2_promotion, oob_fill);
  if (!why.empty()) return record.Finish(kInvalidValue, why);
  // An encoding of this fake's own: a serial number makes every map of every launch distinct.
  std::uint64_t words[16] = {};
  words[0] = 0x70616d736e6574ull;  // "tensmap"
  {
    std::lock_guard<std::mutex> lock(state_mutex);
    words[1] = next_map_serial++;
  }
  words[2] = reinterpret_cast<std::uintptr_t>(address);
  words[3] = static_cast<std::uint64_t>(data_type) | std::uint64_t{rank} << 8 |
             static_cast<std::uint64_t>(swizzle) << 16 | static_cast<std::uint64_t>(oob_fill) << 24;
  for (std::uint32_t d = 0; d < rank; ++d) {
    words[4 + d] = dims[d];
    words[9 + d] = std::uint64_t{box[d]} | std::uint64_t{element_strides[d]} << 32;
    if (d + 1 < rank) words[14] ^= strides[d] << d;
  }
  std::memcpy(map, words, sizeof(words));
  record.Str("map", Hex(map, sizeof(words)));
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemsetD8Async(CUdeviceptr destination,
                                                                unsigned char value,
                                                                std::size_t count,
                                                                CUstream stream) {
  Record record("cuMemsetD8Async");
  record.Uint("destination", destination)
      .Int("value", value)
      .Uint("count", count)
      .Uint("stream", reinterpret_cast<std::uintptr_t>(stream));
  FAKE_INJECT(record, "cuMemsetD8Async");
  if (Current() == nullptr) return record.Finish(kInvalidContext, "no current context");
  if (destination == 0) return record.Finish(kInvalidValue, "null destination");
  std::memset(reinterpret_cast<void*>(destination), value, count);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuLaunchKernelEx(const CUlaunchConfig* config,
                                                                 CUfunc_st* function,
                                                                 void** params, void** extra) {
  Record record("cuLaunchKernelEx");
  if (config != nullptr) {
    const unsigned int grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
    const unsigned int block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
    record.Raw("grid", List(grid, 3))
        .Raw("block", List(block, 3))
        .Uint("shared_bytes", config->sharedMemBytes)
        .Uint("stream", reinterpret_cast<std::uintptr_t>(config->hStream))
        .Uint("num_attrs", config->numAttrs);
    if (config->attrs != nullptr) {
      std::string attrs = "[";
      for (unsigned int i = 0; i < config->numAttrs; ++i) {
        const CUlaunchAttribute& a = config->attrs[i];
        if (i > 0) attrs += ", ";
        attrs += "{\"id\": " + std::to_string(a.id);
        if (a.id == kLaunchAttributeClusterDimension) {
          const unsigned int dims[3] = {a.value.clusterDim.x, a.value.clusterDim.y,
                                        a.value.clusterDim.z};
          attrs += ", \"cluster\": " + List(dims, 3);
        }
        attrs += "}";
      }
      record.Raw("attrs", attrs + "]");
    }
  }
  record.Int("depth", static_cast<long long>(context_stack.size()));
  FAKE_INJECT(record, "cuLaunchKernelEx");
  if (config == nullptr) return record.Finish(kInvalidValue, "config is null");
  if (!ValidFunction(function)) return record.Finish(kInvalidHandle, "not a function");
  record.Int("function", function->id).Str("kernel", function->name);
  if (Current() == nullptr) return record.Finish(kInvalidContext, "no current context");
  if (Current() != function->module->context) {
    return record.Finish(kInvalidContext, "the function's context is not current");
  }
  const Kernel& k = function->kernel;
  if (params != nullptr && extra != nullptr) {
    return record.Finish(kInvalidValue, "both kernelParams and extra are given");
  }
  if (!k.params.empty() && params == nullptr) return record.Finish(kInvalidValue, "no params");
  const std::uint64_t grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  const std::uint64_t block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
  for (int d = 0; d < 3; ++d) {
    if (grid[d] == 0 || grid[d] > kMaxGridDim[d]) {
      return record.Finish(kInvalidValue, "grid dimension " + std::to_string(d) + " = " +
                                              std::to_string(grid[d]));
    }
    if (block[d] == 0 || block[d] > kMaxBlockDim[d]) {
      return record.Finish(kInvalidValue, "block dimension " + std::to_string(d) + " = " +
                                              std::to_string(block[d]));
    }
  }
  const std::uint64_t threads = block[0] * block[1] * block[2];
  if (threads > kMaxThreadsPerBlock) {
    return record.Finish(kInvalidValue, std::to_string(threads) + " threads per block");
  }
  const std::uint64_t max_threads =
      std::uint64_t{k.max_threads[0]} * k.max_threads[1] * k.max_threads[2];
  if (max_threads != 0 && threads > max_threads) {
    return record.Finish(kInvalidValue, std::to_string(threads) +
                                            " threads per block, over the kernel's .maxntid " +
                                            std::to_string(max_threads));
  }
  if (k.reqntid[0] != 0 &&
      (block[0] != k.reqntid[0] || block[1] != k.reqntid[1] || block[2] != k.reqntid[2])) {
    return record.Finish(kInvalidValue, "the block is not the kernel's .reqntid " +
                                            List(k.reqntid, 3));
  }
  const std::int64_t shared = config->sharedMemBytes;
  if (shared > function->max_dynamic_shared) {
    return record.Finish(kInvalidValue,
                         std::to_string(shared) + " bytes of dynamic shared memory, over the "
                         "function's MAX_DYNAMIC_SHARED_SIZE_BYTES " +
                             std::to_string(function->max_dynamic_shared));
  }
  if (shared + static_cast<std::int64_t>(k.static_shared) > kMaxSharedPerBlockOptin) {
    return record.Finish(kInvalidValue, "dynamic plus static shared memory exceeds 227 KiB");
  }
  const std::uint64_t warps = (threads + 31) / 32;
  const std::uint64_t per_warp =
      (std::uint64_t{k.registers} * 32 + kRegisterGranularity - 1) / kRegisterGranularity *
      kRegisterGranularity;
  if (warps * per_warp > kRegistersPerBlock) {
    return record.Finish(kOutOfResources, std::to_string(k.registers) + " registers x " +
                                              std::to_string(threads) + " threads");
  }
  if (config->numAttrs > 0 && config->attrs == nullptr) {
    return record.Finish(kInvalidValue, "numAttrs without attrs");
  }
  const std::uint32_t* cluster = nullptr;
  std::uint32_t launch_cluster[3];
  for (unsigned int i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    if (a.id != kLaunchAttributeClusterDimension) continue;
    if (cluster != nullptr) return record.Finish(kInvalidValue, "two cluster attributes");
    launch_cluster[0] = a.value.clusterDim.x;
    launch_cluster[1] = a.value.clusterDim.y;
    launch_cluster[2] = a.value.clusterDim.z;
    cluster = launch_cluster;
    if (k.cluster[0] != 0 && !std::equal(k.cluster, k.cluster + 3, launch_cluster)) {
      return record.Finish(kInvalidCluster, "cluster " + List(launch_cluster, 3) +
                                                " is not the kernel's .reqnctapercluster " +
                                                List(k.cluster, 3));
    }
  }
  if (cluster == nullptr && k.cluster[0] != 0) cluster = k.cluster;  // compile-time dims
  if (cluster == nullptr && k.explicit_cluster) {
    return record.Finish(kInvalidCluster, "the kernel needs a cluster launch");
  }
  if (cluster != nullptr) {
    std::uint64_t ctas = 1;
    for (int d = 0; d < 3; ++d) {
      if (cluster[d] == 0 || grid[d] % cluster[d] != 0) {
        return record.Finish(kInvalidCluster, "cluster " + List(cluster, 3) +
                                                  " does not divide the grid " + List(grid, 3));
      }
      ctas *= cluster[d];
    }
    if (ctas > kMaxPortableCluster) {
      return record.Finish(kInvalidCluster, std::to_string(ctas) + " CTAs per cluster");
    }
  }
  std::string recorded = "[";
  for (const Param& p : k.params) {
    if (params[p.ordinal] == nullptr) {
      return record.Finish(kInvalidValue, "kernelParams[" + std::to_string(p.ordinal) +
                                              "] is null");
    }
    if (p.ordinal > 0) recorded += ", ";
    recorded += "{\"ordinal\": " + std::to_string(p.ordinal) +
                ", \"size\": " + std::to_string(p.size) + ", \"bytes\": " +
                Quoted(Hex(params[p.ordinal], p.size)) + "}";
  }
  record.Raw("params", recorded + "]");
  const char* stamp = std::getenv("SMALTI_FAKE_CUDA_STAMP");
  if (stamp != nullptr && *stamp == '1') {
    for (const Param& p : k.params) {
      if (p.size != 8) continue;
      auto* target = reinterpret_cast<std::uint8_t*>(Read<std::uint64_t>(
          static_cast<const std::uint8_t*>(params[p.ordinal])));
      if (target != nullptr) *target = static_cast<std::uint8_t>(p.ordinal + 1);
    }
  }
  const double device_ms = KernelMilliseconds(function->name);
  {
    std::lock_guard<std::mutex> lock(state_mutex);
    StreamClock& clock = clocks[reinterpret_cast<std::uintptr_t>(config->hStream)];
    clock.now_ms += device_ms;
    record.Raw("device_ms", std::to_string(device_ms)).Raw("clock_ms",
                                                           std::to_string(clock.now_ms));
  }
  return record.Finish(kSuccess);
}

// ---------------------------------------------------------------------------------------
// Collective launches: devices, memory, VMM and multicast.

__attribute__((visibility("default"))) CUresult cuCtxGetDevice(int* device) {
  Record record("cuCtxGetDevice");
  FAKE_INJECT(record, "cuCtxGetDevice");
  if (device == nullptr) return record.Finish(kInvalidValue, "device is null");
  if (Current() == nullptr) return record.Finish(kInvalidContext, "no current context");
  *device = Current()->device;
  record.Int("device", *device);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuCtxSynchronize() {
  Record record("cuCtxSynchronize");
  record.Int("device", CurrentDevice());
  FAKE_INJECT(record, "cuCtxSynchronize");
  if (Current() == nullptr) return record.Finish(kInvalidContext, "no current context");
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuDeviceGetAttribute(int* value, int attribute,
                                                                     int device) {
  Record record("cuDeviceGetAttribute");
  record.Int("attribute", attribute).Int("device", device);
  FAKE_INJECT(record, "cuDeviceGetAttribute");
  if (value == nullptr) return record.Finish(kInvalidValue, "pi is null");
  if (!ValidDevice(device)) return record.Finish(kInvalidDevice, "not a device");
  if (attribute == kAttributeVirtualMemoryManagement) {
    *value = Listed("SMALTI_FAKE_CUDA_NO_VMM", device) ? 0 : 1;
  } else if (attribute == kAttributeMulticastSupported) {
    *value = Listed("SMALTI_FAKE_CUDA_NO_MULTICAST", device) ? 0 : 1;
  } else {
    return record.Finish(kInvalidValue, "an attribute this stand-in does not model");
  }
  record.Int("value", *value);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuDeviceCanAccessPeer(int* can, int device,
                                                                      int peer) {
  Record record("cuDeviceCanAccessPeer");
  record.Int("device", device).Int("peer", peer);
  FAKE_INJECT(record, "cuDeviceCanAccessPeer");
  if (can == nullptr) return record.Finish(kInvalidValue, "canAccessPeer is null");
  if (!ValidDevice(device) || !ValidDevice(peer)) return record.Finish(kInvalidDevice, "device");
  const bool blocked = Listed("SMALTI_FAKE_CUDA_NO_PEER", device) ||
                       Listed("SMALTI_FAKE_CUDA_NO_PEER", peer);
  *can = device != peer && !blocked ? 1 : 0;
  record.Int("value", *can);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuStreamSynchronize(CUstream stream) {
  Record record("cuStreamSynchronize");
  record.Uint("stream", reinterpret_cast<std::uintptr_t>(stream));
  FAKE_INJECT(record, "cuStreamSynchronize");
  std::lock_guard<std::mutex> lock(state_mutex);
  StreamClock& clock = clocks[reinterpret_cast<std::uintptr_t>(stream)];
  clock.completed = clock.recorded;
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemcpyDtoHAsync_v2(void* destination,
                                                                     CUdeviceptr source,
                                                                     std::size_t count,
                                                                     CUstream stream) {
  Record record("cuMemcpyDtoHAsync_v2");
  record.Uint("source", source).Uint("count", count)
      .Uint("stream", reinterpret_cast<std::uintptr_t>(stream)).Int("device", CurrentDevice());
  FAKE_INJECT(record, "cuMemcpyDtoHAsync_v2");
  if (Current() == nullptr) return record.Finish(kInvalidContext, "no current context");
  if (destination == nullptr || source == 0) return record.Finish(kInvalidValue, "null pointer");
  std::string why = CheckUse(source, count, CurrentDevice());
  if (!why.empty()) return record.Finish(kInvalidValue, "source is " + why);
  std::memcpy(destination, reinterpret_cast<const void*>(source), count);
  record.Str("bytes", Hex(destination, count));
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemcpyHtoD_v2(CUdeviceptr destination,
                                                                const void* source,
                                                                std::size_t count) {
  Record record("cuMemcpyHtoD_v2");
  record.Uint("destination", destination).Uint("count", count).Int("device", CurrentDevice());
  FAKE_INJECT(record, "cuMemcpyHtoD_v2");
  if (Current() == nullptr) return record.Finish(kInvalidContext, "no current context");
  if (destination == 0 || source == nullptr) return record.Finish(kInvalidValue, "null pointer");
  std::string why = CheckUse(destination, count, CurrentDevice());
  if (!why.empty()) return record.Finish(kInvalidValue, "destination is " + why);
  record.Str("bytes", Hex(source, count));
  std::memcpy(reinterpret_cast<void*>(destination), source, count);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemAlloc_v2(CUdeviceptr* pointer,
                                                              std::size_t size) {
  Record record("cuMemAlloc_v2");
  record.Uint("size", size).Int("device", CurrentDevice());
  FAKE_INJECT(record, "cuMemAlloc_v2");
  if (pointer == nullptr || size == 0) return record.Finish(kInvalidValue, "null or empty");
  if (Current() == nullptr) return record.Finish(kInvalidContext, "no current context");
  void* memory = std::aligned_alloc(256, (size + 255) / 256 * 256);
  if (memory == nullptr) return record.Finish(kOutOfMemory, "host allocation failed");
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  {
    std::lock_guard<std::mutex> lock(vmm_mutex);
    allocations[*pointer] = {CurrentDevice(), size};
  }
  record.Uint("pointer", *pointer);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemFree_v2(CUdeviceptr pointer) {
  Record record("cuMemFree_v2");
  record.Uint("pointer", pointer).Int("device", CurrentDevice());
  FAKE_INJECT(record, "cuMemFree_v2");
  if (Current() == nullptr) return record.Finish(kInvalidContext, "no current context");
  std::lock_guard<std::mutex> lock(vmm_mutex);
  if (allocations.erase(pointer) == 0) return record.Finish(kInvalidValue, "not cuMemAlloc'd");
  std::free(reinterpret_cast<void*>(pointer));
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemsetD8_v2(CUdeviceptr destination,
                                                              unsigned char value,
                                                              std::size_t count) {
  Record record("cuMemsetD8_v2");
  record.Uint("destination", destination).Int("value", value).Uint("count", count)
      .Int("device", CurrentDevice());
  FAKE_INJECT(record, "cuMemsetD8_v2");
  if (Current() == nullptr) return record.Finish(kInvalidContext, "no current context");
  if (destination == 0) return record.Finish(kInvalidValue, "null destination");
  std::string why = CheckUse(destination, count, CurrentDevice());
  if (!why.empty()) return record.Finish(kInvalidValue, "destination is " + why);
  std::memset(reinterpret_cast<void*>(destination), value, count);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemGetAllocationGranularity(
    std::size_t* granularity, const CUmemAllocationProp* prop, int option) {
  Record record("cuMemGetAllocationGranularity");
  record.Raw("prop", AllocationPropJson(prop)).Int("option", option);
  FAKE_INJECT(record, "cuMemGetAllocationGranularity");
  if (granularity == nullptr) return record.Finish(kInvalidValue, "granularity is null");
  std::string why = CheckAllocationProp(prop);
  if (!why.empty()) return record.Finish(kInvalidValue, why);
  if (option != 0 && option != 1) return record.Finish(kInvalidValue, "option");
  *granularity = kAllocationGranularity;
  record.Uint("granularity", *granularity);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemCreate(unsigned long long* handle,
                                                            std::size_t size,
                                                            const CUmemAllocationProp* prop,
                                                            unsigned long long flags) {
  Record record("cuMemCreate");
  record.Uint("size", size).Raw("prop", AllocationPropJson(prop)).Uint("flags", flags)
      .Int("current_device", CurrentDevice());
  FAKE_INJECT(record, "cuMemCreate");
  if (handle == nullptr) return record.Finish(kInvalidValue, "handle is null");
  std::string why = CheckAllocationProp(prop);
  if (!why.empty()) return record.Finish(kInvalidValue, why);
  if (flags != 0) return record.Finish(kInvalidValue, "flags must be 0");
  if (size == 0 || size % kAllocationGranularity != 0) {
    return record.Finish(kInvalidValue, "size " + std::to_string(size) +
                                            " is not a multiple of the granularity");
  }
  const int fd = memfd_create("smalti-fake-cuda", 0);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) close(fd);
    return record.Finish(kOutOfMemory, "memfd_create failed");
  }
  std::lock_guard<std::mutex> lock(vmm_mutex);
  *handle = next_handle++;
  physicals[*handle] = {prop->location.id, size, fd};
  record.Uint("handle", *handle);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemRelease(unsigned long long handle) {
  Record record("cuMemRelease");
  record.Uint("handle", handle);
  FAKE_INJECT(record, "cuMemRelease");
  std::lock_guard<std::mutex> lock(vmm_mutex);
  for (const auto& [base, mapping] : mappings) {
    if (mapping.handle == handle) record.Raw("still_mapped", "true");  // allowed: freed later
  }
  auto physical = physicals.find(handle);
  if (physical != physicals.end()) {
    close(physical->second.fd);
    physicals.erase(physical);
    return record.Finish(kSuccess);
  }
  if (multicasts.erase(handle) > 0) return record.Finish(kSuccess);
  return record.Finish(kInvalidValue, "not a handle");
}

__attribute__((visibility("default"))) CUresult cuMemAddressReserve(CUdeviceptr* pointer,
                                                                    std::size_t size,
                                                                    std::size_t alignment,
                                                                    CUdeviceptr address,
                                                                    unsigned long long flags) {
  Record record("cuMemAddressReserve");
  record.Uint("size", size).Uint("alignment", alignment).Uint("address", address)
      .Uint("flags", flags);
  FAKE_INJECT(record, "cuMemAddressReserve");
  if (pointer == nullptr) return record.Finish(kInvalidValue, "ptr is null");
  if (size == 0 || size % kAllocationGranularity != 0) {
    return record.Finish(kInvalidValue, "size is not a multiple of the granularity");
  }
  if (alignment & (alignment - 1)) return record.Finish(kInvalidValue, "alignment not 2^n");
  if (flags != 0) return record.Finish(kInvalidValue, "flags must be 0");
  const std::size_t align = std::max(alignment, kAllocationGranularity);
  void* range = mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
  if (range == MAP_FAILED) return record.Finish(kOutOfMemory, "mmap failed");
  const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(range);
  const std::uintptr_t base = (start + align - 1) / align * align;
  if (base > start) munmap(range, base - start);
  if (start + size + align > base + size) {
    munmap(reinterpret_cast<void*>(base + size), start + size + align - base - size);
  }
  std::lock_guard<std::mutex> lock(vmm_mutex);
  reservations[base] = size;
  *pointer = base;
  record.Uint("pointer", base);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemAddressFree(CUdeviceptr pointer,
                                                                 std::size_t size) {
  Record record("cuMemAddressFree");
  record.Uint("pointer", pointer).Uint("size", size);
  FAKE_INJECT(record, "cuMemAddressFree");
  std::lock_guard<std::mutex> lock(vmm_mutex);
  auto found = reservations.find(pointer);
  if (found == reservations.end() || found->second != size) {
    return record.Finish(kInvalidValue, "not a reservation of that size");
  }
  auto mapped = mappings.lower_bound(pointer);
  if (mapped != mappings.end() && mapped->first < pointer + size) {
    return record.Finish(kInvalidValue, "the range is still mapped");
  }
  munmap(reinterpret_cast<void*>(pointer), size);
  reservations.erase(found);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemMap(CUdeviceptr pointer, std::size_t size,
                                                         std::size_t offset,
                                                         unsigned long long handle,
                                                         unsigned long long flags) {
  Record record("cuMemMap");
  record.Uint("pointer", pointer).Uint("size", size).Uint("offset", offset)
      .Uint("handle", handle).Uint("flags", flags);
  FAKE_INJECT(record, "cuMemMap");
  if (flags != 0) return record.Finish(kInvalidValue, "flags must be 0");
  if (offset != 0) return record.Finish(kInvalidValue, "offset must be 0");
  std::lock_guard<std::mutex> lock(vmm_mutex);
  if (ReservationOf(pointer, size) == reservations.end()) {
    return record.Finish(kInvalidValue, "the range is not inside one reservation");
  }
  if (pointer % kAllocationGranularity != 0 || size == 0 || size % kAllocationGranularity != 0) {
    return record.Finish(kInvalidValue, "ptr or size is not a multiple of the granularity");
  }
  auto next = mappings.lower_bound(pointer);
  bool overlaps = next != mappings.end() && next->first < pointer + size;
  if (next != mappings.begin()) {
    auto before = std::prev(next);
    overlaps = overlaps || before->first + before->second.size > pointer;
  }
  if (overlaps) return record.Finish(kInvalidValue, "the range is already mapped");
  void* where = reinterpret_cast<void*>(pointer);
  auto physical = physicals.find(handle);
  auto multicast = multicasts.find(handle);
  if (physical != physicals.end()) {
    if (size > physical->second.size) {
      return record.Finish(kInvalidValue, "size exceeds the allocation");
    }
    if (mmap(where, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, physical->second.fd,
             0) == MAP_FAILED) {
      return record.Finish(kOutOfMemory, "mmap failed");
    }
    record.Int("device", physical->second.device);
  } else if (multicast != multicasts.end()) {
    const Multicast& m = multicast->second;
    if (m.devices.size() != m.num_devices) {
      return record.Finish(kInvalidValue, "a multicast object is mapped before all " +
                                              std::to_string(m.num_devices) +
                                              " devices were added");
    }
    if (size > m.size) return record.Finish(kInvalidValue, "size exceeds the multicast object");
    if (mmap(where, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
             0) == MAP_FAILED) {
      return record.Finish(kOutOfMemory, "mmap failed");
    }
    record.Raw("multicast", "true");
  } else {
    return record.Finish(kInvalidHandle, "not a handle");
  }
  mappings[pointer] = {size, handle, multicast != multicasts.end(), {}};
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemUnmap(CUdeviceptr pointer, std::size_t size) {
  Record record("cuMemUnmap");
  record.Uint("pointer", pointer).Uint("size", size);
  FAKE_INJECT(record, "cuMemUnmap");
  std::lock_guard<std::mutex> lock(vmm_mutex);
  auto found = mappings.find(pointer);
  if (found == mappings.end() || found->second.size != size) {
    return record.Finish(kInvalidValue, "not a mapping of that size");
  }
  mmap(reinterpret_cast<void*>(pointer), size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);  // reserved again
  mappings.erase(found);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMemSetAccess(CUdeviceptr pointer,
                                                               std::size_t size,
                                                               const CUmemAccessDesc* desc,
                                                               std::size_t count) {
  Record record("cuMemSetAccess");
  record.Uint("pointer", pointer).Uint("size", size).Uint("count", count);
  if (desc != nullptr) {
    std::string access = "[";
    for (std::size_t i = 0; i < count; ++i) {
      if (i > 0) access += ", ";
      access += "{\"location_type\": " + std::to_string(desc[i].location.type) +
                ", \"device\": " + std::to_string(desc[i].location.id) +
                ", \"flags\": " + std::to_string(desc[i].flags) + "}";
    }
    record.Raw("access", access + "]");
  }
  FAKE_INJECT(record, "cuMemSetAccess");
  if (desc == nullptr || count == 0) return record.Finish(kInvalidValue, "no descriptors");
  for (std::size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != kLocationTypeDevice || !ValidDevice(desc[i].location.id)) {
      return record.Finish(kInvalidDevice, "descriptor " + std::to_string(i) + " names no device");
    }
    if (desc[i].flags != 0 && desc[i].flags != 1 && desc[i].flags != kAccessReadWrite) {
      return record.Finish(kInvalidValue, "descriptor " + std::to_string(i) + " flags");
    }
  }
  std::lock_guard<std::mutex> lock(vmm_mutex);
  // The range must be whole mappings, back to back.
  std::vector<Mapping*> covered;
  for (CUdeviceptr at = pointer; at < pointer + size;) {
    auto mapping = mappings.find(at);
    if (mapping == mappings.end()) {
      return record.Finish(kInvalidValue, "the range is not fully mapped");
    }
    covered.push_back(&mapping->second);
    at += mapping->second.size;
    if (at > pointer + size) return record.Finish(kInvalidValue, "the range splits a mapping");
  }
  if (covered.empty()) return record.Finish(kInvalidValue, "an empty range");
  for (Mapping* mapping : covered) {
    if (mapping->multicast) {
      const Multicast& m = multicasts[mapping->handle];
      for (std::size_t i = 0; i < count; ++i) {
        if (std::find(m.devices.begin(), m.devices.end(), desc[i].location.id) ==
            m.devices.end()) {
          return record.Finish(kInvalidDevice, "device " + std::to_string(desc[i].location.id) +
                                                   " is not in the multicast team");
        }
      }
    }
    for (std::size_t i = 0; i < count; ++i) {
      if (desc[i].flags == kAccessReadWrite) {
        mapping->access.insert(desc[i].location.id);
      } else {
        mapping->access.erase(desc[i].location.id);
      }
    }
  }
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMulticastGetGranularity(
    std::size_t* granularity, const CUmulticastObjectProp* prop, int option) {
  Record record("cuMulticastGetGranularity");
  record.Raw("prop", MulticastPropJson(prop)).Int("option", option);
  FAKE_INJECT(record, "cuMulticastGetGranularity");
  if (granularity == nullptr || prop == nullptr) return record.Finish(kInvalidValue, "null");
  if (prop->numDevices == 0 || prop->numDevices > kDevices) {
    return record.Finish(kInvalidValue, "numDevices");
  }
  if (option != 0 && option != 1) return record.Finish(kInvalidValue, "option");
  *granularity = kMulticastGranularity;
  record.Uint("granularity", *granularity);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMulticastCreate(
    unsigned long long* handle, const CUmulticastObjectProp* prop) {
  Record record("cuMulticastCreate");
  record.Raw("prop", MulticastPropJson(prop));
  FAKE_INJECT(record, "cuMulticastCreate");
  if (handle == nullptr || prop == nullptr) return record.Finish(kInvalidValue, "null");
  if (prop->numDevices == 0 || prop->numDevices > kDevices) {
    return record.Finish(kInvalidValue, "numDevices " + std::to_string(prop->numDevices));
  }
  if (prop->size == 0 || prop->size % kMulticastGranularity != 0) {
    return record.Finish(kInvalidValue, "size " + std::to_string(prop->size) +
                                            " is not a multiple of the multicast granularity");
  }
  if (prop->flags != 0) return record.Finish(kInvalidValue, "flags must be 0");
  std::lock_guard<std::mutex> lock(vmm_mutex);
  *handle = next_handle++;
  multicasts[*handle] = {prop->numDevices, prop->size, {}, {}};
  record.Uint("handle", *handle);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMulticastAddDevice(unsigned long long handle,
                                                                     int device) {
  Record record("cuMulticastAddDevice");
  record.Uint("handle", handle).Int("device", device);
  FAKE_INJECT(record, "cuMulticastAddDevice");
  if (!ValidDevice(device)) return record.Finish(kInvalidDevice, "not a device");
  if (Listed("SMALTI_FAKE_CUDA_NO_MULTICAST", device)) {
    return record.Finish(kNotSupported, "the device has no multicast");
  }
  std::lock_guard<std::mutex> lock(vmm_mutex);
  auto found = multicasts.find(handle);
  if (found == multicasts.end()) return record.Finish(kInvalidHandle, "not a multicast object");
  Multicast& m = found->second;
  if (std::find(m.devices.begin(), m.devices.end(), device) != m.devices.end()) {
    return record.Finish(kInvalidValue, "the device was already added");
  }
  if (m.devices.size() == m.num_devices) return record.Finish(kInvalidValue, "the team is full");
  m.devices.push_back(device);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuMulticastBindMem(
    unsigned long long handle, std::size_t multicast_offset, unsigned long long memory,
    std::size_t memory_offset, std::size_t size, unsigned long long flags) {
  Record record("cuMulticastBindMem");
  record.Uint("handle", handle).Uint("multicast_offset", multicast_offset)
      .Uint("memory", memory).Uint("memory_offset", memory_offset).Uint("size", size)
      .Uint("flags", flags);
  FAKE_INJECT(record, "cuMulticastBindMem");
  if (flags != 0) return record.Finish(kInvalidValue, "flags must be 0");
  std::lock_guard<std::mutex> lock(vmm_mutex);
  auto found = multicasts.find(handle);
  if (found == multicasts.end()) return record.Finish(kInvalidHandle, "not a multicast object");
  Multicast& m = found->second;
  auto physical = physicals.find(memory);
  if (physical == physicals.end()) return record.Finish(kInvalidHandle, "not an allocation");
  const int device = physical->second.device;
  record.Int("device", device);
  if (m.devices.size() != m.num_devices) {
    // The driver blocks here until the whole team has joined; one thread would wait forever.
    return record.Finish(kInvalidValue, "memory is bound before all " +
                                            std::to_string(m.num_devices) +
                                            " devices were added");
  }
  if (std::find(m.devices.begin(), m.devices.end(), device) == m.devices.end()) {
    return record.Finish(kInvalidDevice, "the allocation's device is not in the team");
  }
  if (multicast_offset % kMulticastGranularity || memory_offset % kMulticastGranularity ||
      size == 0 || size % kMulticastGranularity) {
    return record.Finish(kInvalidValue, "offsets and size must be multiples of the multicast "
                                        "granularity");
  }
  if (size + memory_offset > physical->second.size) {
    return record.Finish(kInvalidValue, "size + memOffset exceeds the allocation");
  }
  if (size + multicast_offset > m.size) {
    return record.Finish(kInvalidValue, "size + mcOffset exceeds the multicast object");
  }
  if (m.bound.count(device)) return record.Finish(kInvalidValue, "the device is already bound");
  m.bound[device] = {multicast_offset, size};
  return record.Finish(kSuccess);
}

// ---------------------------------------------------------------------------------------
// Events.

__attribute__((visibility("default"))) CUresult cuEventCreate(CUevent_st** event,
                                                              unsigned int flags) {
  Record record("cuEventCreate");
  record.Uint("flags", flags).Int("device", CurrentDevice());
  FAKE_INJECT(record, "cuEventCreate");
  if (event == nullptr) return record.Finish(kInvalidValue, "phEvent is null");
  if (Current() == nullptr) return record.Finish(kInvalidContext, "no current context");
  if (flags & ~(kEventBlockingSync | kEventDisableTiming | kEventInterprocess)) {
    return record.Finish(kInvalidValue, "unknown flags");
  }
  if ((flags & kEventInterprocess) && !(flags & kEventDisableTiming)) {
    return record.Finish(kInvalidValue, "CU_EVENT_INTERPROCESS needs CU_EVENT_DISABLE_TIMING");
  }
  std::lock_guard<std::mutex> lock(state_mutex);
  *event = new CUevent_st{next_id++, Current(), flags};
  events.insert(*event);
  record.Int("event", (*event)->id);
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuEventRecord(CUevent_st* event,
                                                              CUstream stream) {
  Record record("cuEventRecord");
  const auto handle = reinterpret_cast<std::uintptr_t>(stream);
  record.Uint("stream", handle);
  FAKE_INJECT(record, "cuEventRecord");
  std::lock_guard<std::mutex> lock(state_mutex);
  if (!events.count(event)) return record.Finish(kInvalidHandle, "not an event");
  record.Int("event", event->id);
  const std::uintptr_t device = handle >> 4 & 0xf;
  if (device >= kDevices) return record.Finish(kInvalidHandle, "a stream of no device");
  if (&contexts[device] != event->context) {
    return record.Finish(kInvalidHandle, "the event and the stream are of different contexts");
  }
  StreamClock& clock = clocks[handle];
  event->recorded = true;
  event->stream = handle;
  event->sequence = ++clock.recorded;
  event->time_ms = clock.now_ms;
  record.Raw("clock_ms", std::to_string(clock.now_ms));
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuEventSynchronize(CUevent_st* event) {
  Record record("cuEventSynchronize");
  FAKE_INJECT(record, "cuEventSynchronize");
  std::lock_guard<std::mutex> lock(state_mutex);
  if (!events.count(event)) return record.Finish(kInvalidHandle, "not an event");
  record.Int("event", event->id);
  if (event->recorded) {  // an event never recorded captures no work: nothing to wait for
    StreamClock& clock = clocks[event->stream];
    clock.completed = std::max(clock.completed, event->sequence);
  }
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuEventElapsedTime(float* milliseconds,
                                                                   CUevent_st* start,
                                                                   CUevent_st* end) {
  Record record("cuEventElapsedTime");
  FAKE_INJECT(record, "cuEventElapsedTime");
  if (milliseconds == nullptr) return record.Finish(kInvalidValue, "pMilliseconds is null");
  std::lock_guard<std::mutex> lock(state_mutex);
  if (!events.count(start) || !events.count(end)) {
    return record.Finish(kInvalidHandle, "not an event");
  }
  record.Int("start", start->id).Int("end", end->id);
  if (!start->recorded || !end->recorded) {
    return record.Finish(kInvalidHandle, "an event was never recorded");
  }
  if ((start->flags | end->flags) & kEventDisableTiming) {
    return record.Finish(kInvalidHandle, "an event was created with CU_EVENT_DISABLE_TIMING");
  }
  if (!EventComplete(start) || !EventComplete(end)) {
    return record.Finish(kNotReady, "an event has not completed");
  }
  *milliseconds = static_cast<float>(end->time_ms - start->time_ms);
  record.Raw("milliseconds", std::to_string(*milliseconds));
  return record.Finish(kSuccess);
}

__attribute__((visibility("default"))) CUresult cuEventDestroy_v2(CUevent_st* event) {
  Record record("cuEventDestroy_v2");
  FAKE_INJECT(record, "cuEventDestroy_v2");
  std::lock_guard<std::mutex> lock(state_mutex);
  if (!events.count(event)) return record.Finish(kInvalidHandle, "not an event");
  record.Int("event", event->id);
  events.erase(event);
  delete event;
  return record.Finish(kSuccess);
}

}  // extern "C"
