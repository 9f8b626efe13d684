// A recording stand-in for NVSHMEM's host library (libnvshmem_host.so.3), so smalti's
// bootstrap across processes and its NVSHMEM heap path can be tested without GPUs.
//
// It exports the host entry points smalti's launcher resolves, appends one JSON line per call
// ({"call", "pid", "pe", its arguments, "result", and "reason" when it refuses}) to
// $SMALTI_FAKE_NVSHMEM_LOG when that is set, and refuses what the NVSHMEM documentation
// forbids: a versioned struct whose version is not (1 << 16) + its size, initialisation
// without NVSHMEMX_INIT_WITH_UNIQUEID or twice, a rank outside 0..nranks-1, heap calls before
// initialisation, pointers that are not in a symmetric allocation. Refusals return a nonzero
// status, or null where the API returns a pointer.
//
// Each process is one PE with heaps of its own in host memory (nothing is shared between
// processes): nvshmem_malloc fills a new heap with 0xA5 bytes (so zeroing shows), and
// nvshmem_ptr(p, pe) is p itself for the caller's PE, and for another PE the address
//   0x500000000000 + pe << 36 + (allocation index) << 32 + (offset of p in its allocation),
// which is never dereferenced; nvshmemx_mc_ptr gives 0x600000000000 + index << 32 + offset.
// Test knobs:
//   SMALTI_FAKE_NVSHMEM_FAIL=NAME[,...]       entry point NAME fails (status 7, or null)
//   SMALTI_FAKE_NVSHMEM_UNREACHABLE=PE[,...]  nvshmem_ptr returns null for these other PEs
//   SMALTI_FAKE_NVSHMEM_NO_MULTICAST=1        nvshmemx_mc_ptr returns null
// The ABI types below are written from NVSHMEM 3's documentation and headers, independently
// of the launcher's own declarations.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr int kFailure = 7;  // the status an injected or refused call returns
constexpr unsigned int kInitWithUniqueId = 1u << 3;
constexpr std::uintptr_t kPeerBase = 0x500000000000ull;
constexpr std::uintptr_t kMulticastBase = 0x600000000000ull;
constexpr int kPeShift = 36, kIndexShift = 32;

struct nvshmemx_uniqueid_t {
  int version;
  char internal[124];
};
struct nvshmemx_uniqueid_args_t {
  int version;
  nvshmemx_uniqueid_t* id;
  int myrank;
  int nranks;
};
struct nvshmemx_init_args_t {
  int version;
  nvshmemx_uniqueid_args_t uid_args;
  char content[96];
};
struct nvshmemx_init_attr_t {
  int version;
  void* mpi_comm;
  nvshmemx_init_args_t args;
};

template <typename T>
constexpr int VersionOf() {
  return (1 << 16) + static_cast<int>(sizeof(T));
}

struct Heap {
  std::uint8_t* base;
  std::size_t size;
};

std::mutex state_mutex;
bool initialized = false;  // guarded by state_mutex, as everything below
int my_pe = -1, n_pes = 0;
std::vector<Heap> heaps;  // by allocation index; base null once freed
unsigned long long ids_made = 0;

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

// One call's JSON object; Finish writes it with its result.
class Record {
 public:
  explicit Record(const char* call)
      : text_("{\"call\": \"" + std::string(call) + "\", \"pid\": " + std::to_string(getpid()) +
              ", \"pe\": " + std::to_string(my_pe)) {}
  Record& Int(const char* key, long long value) {
    text_ += ", \"" + std::string(key) + "\": " + std::to_string(value);
    return *this;
  }
  Record& Uint(const char* key, unsigned long long value) {
    text_ += ", \"" + std::string(key) + "\": " + std::to_string(value);
    return *this;
  }
  Record& Str(const char* key, const std::string& value) {
    text_ += ", \"" + std::string(key) + "\": \"" + value + "\"";  // no quotes in values
    return *this;
  }
  long long Finish(long long result, const std::string& reason = "") {
    Int("result", result);
    if (!reason.empty()) Str("reason", reason);
    const char* path = std::getenv("SMALTI_FAKE_NVSHMEM_LOG");
    if (path != nullptr && *path != '\0') {
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

// Whether `value` is listed in the comma-separated $`variable`.
bool Listed(const char* variable, const std::string& value) {
  const char* spec = std::getenv(variable);
  if (spec == nullptr) return false;
  const std::string list = "," + std::string(spec) + ",";
  return list.find("," + value + ",") != std::string::npos;
}

bool Injected(const char* call) { return Listed("SMALTI_FAKE_NVSHMEM_FAIL", call); }

// The allocation holding `pointer`: its index, or -1.
int HeapOf(const void* pointer) {
  const auto* at = static_cast<const std::uint8_t*>(pointer);
  for (std::size_t i = 0; i < heaps.size(); ++i) {
    if (heaps[i].base != nullptr && at >= heaps[i].base && at < heaps[i].base + heaps[i].size) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

std::uint64_t Mix(std::uint64_t value) {  // splitmix64's finaliser: ids that differ
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT int nvshmemx_get_uniqueid(nvshmemx_uniqueid_t* id) {
  std::lock_guard<std::mutex> lock(state_mutex);
  Record record("nvshmemx_get_uniqueid");
  if (Injected("nvshmemx_get_uniqueid")) return record.Finish(kFailure, "injected");
  if (id == nullptr) return record.Finish(kFailure, "id is null");
  if (id->version != VersionOf<nvshmemx_uniqueid_t>()) {
    return record.Finish(kFailure, "id->version is not NVSHMEMX_UNIQUEID_INITIALIZER's");
  }
  const std::uint64_t seed = static_cast<std::uint64_t>(getpid()) << 32 ^ ++ids_made ^
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  for (std::size_t i = 0; i < sizeof(id->internal); i += 8) {
    const std::uint64_t word = Mix(seed + i);
    std::memcpy(id->internal + i, &word, std::min<std::size_t>(8, sizeof(id->internal) - i));
  }
  record.Str("id", Hex(id, sizeof(*id)));
  return record.Finish(0);
}

FAKE_EXPORT int nvshmemx_set_attr_uniqueid_args(int myrank, int nranks,
                                                const nvshmemx_uniqueid_t* id,
                                                nvshmemx_init_attr_t* attr) {
  std::lock_guard<std::mutex> lock(state_mutex);
  Record record("nvshmemx_set_attr_uniqueid_args");
  record.Int("rank", myrank).Int("nranks", nranks);
  if (Injected("nvshmemx_set_attr_uniqueid_args")) return record.Finish(kFailure, "injected");
  if (id == nullptr || attr == nullptr) return record.Finish(kFailure, "id or attr is null");
  record.Str("id", Hex(id, sizeof(*id)));
  if (attr->version != VersionOf<nvshmemx_init_attr_t>() ||
      attr->args.version != VersionOf<nvshmemx_init_args_t>() ||
      attr->args.uid_args.version != VersionOf<nvshmemx_uniqueid_args_t>()) {
    return record.Finish(kFailure, "attr is not NVSHMEMX_INIT_ATTR_INITIALIZER's versions");
  }
  attr->args.uid_args.id = const_cast<nvshmemx_uniqueid_t*>(id);
  attr->args.uid_args.myrank = myrank;
  attr->args.uid_args.nranks = nranks;
  return record.Finish(0);
}

FAKE_EXPORT int nvshmemx_hostlib_init_attr(unsigned int flags, nvshmemx_init_attr_t* attr) {
  std::lock_guard<std::mutex> lock(state_mutex);
  Record record("nvshmemx_hostlib_init_attr");
  record.Uint("flags", flags);
  if (Injected("nvshmemx_hostlib_init_attr")) return record.Finish(kFailure, "injected");
  if (flags != kInitWithUniqueId) return record.Finish(kFailure, "not INIT_WITH_UNIQUEID");
  if (attr == nullptr) return record.Finish(kFailure, "attr is null");
  const nvshmemx_uniqueid_args_t& args = attr->args.uid_args;
  record.Int("rank", args.myrank).Int("nranks", args.nranks);
  if (attr->version != VersionOf<nvshmemx_init_attr_t>() ||
      attr->args.version != VersionOf<nvshmemx_init_args_t>() ||
      args.version != VersionOf<nvshmemx_uniqueid_args_t>()) {
    return record.Finish(kFailure, "a versioned struct of attr has a wrong version");
  }
  if (args.id == nullptr || args.id->version != VersionOf<nvshmemx_uniqueid_t>()) {
    return record.Finish(kFailure, "no unique id (nvshmemx_set_attr_uniqueid_args)");
  }
  record.Str("id", Hex(args.id, sizeof(*args.id)));
  if (args.nranks < 1 || args.myrank < 0 || args.myrank >= args.nranks) {
    return record.Finish(kFailure, "rank outside 0..nranks-1");
  }
  if (initialized) return record.Finish(kFailure, "already initialized");
  initialized = true;
  my_pe = args.myrank;
  n_pes = args.nranks;
  return record.Finish(0);
}

FAKE_EXPORT void nvshmemx_hostlib_finalize() {
  std::lock_guard<std::mutex> lock(state_mutex);
  Record record("nvshmemx_hostlib_finalize");
  if (!initialized) {
    record.Finish(kFailure, "not initialized");
    return;
  }
  for (Heap& heap : heaps) std::free(heap.base);
  heaps.clear();
  initialized = false;
  record.Finish(0);
  my_pe = -1;
  n_pes = 0;
}

FAKE_EXPORT int nvshmem_my_pe() {
  std::lock_guard<std::mutex> lock(state_mutex);
  Record("nvshmem_my_pe").Finish(my_pe);
  return my_pe;
}

FAKE_EXPORT int nvshmem_n_pes() {
  std::lock_guard<std::mutex> lock(state_mutex);
  Record("nvshmem_n_pes").Finish(n_pes);
  return n_pes;
}

FAKE_EXPORT void* nvshmem_malloc(std::size_t size) {
  std::lock_guard<std::mutex> lock(state_mutex);
  Record record("nvshmem_malloc");
  record.Uint("size", size);
  if (Injected("nvshmem_malloc")) return (record.Finish(0, "injected"), nullptr);
  if (!initialized) return (record.Finish(0, "not initialized"), nullptr);
  if (size == 0) return (record.Finish(0, "size 0"), nullptr);
  auto* base = static_cast<std::uint8_t*>(std::aligned_alloc(512, (size + 511) / 512 * 512));
  std::memset(base, 0xA5, size);
  heaps.push_back({base, size});
  record.Uint("pointer", reinterpret_cast<std::uintptr_t>(base)).Uint("index", heaps.size() - 1);
  record.Finish(reinterpret_cast<std::uintptr_t>(base));
  return base;
}

FAKE_EXPORT void nvshmem_free(void* pointer) {
  std::lock_guard<std::mutex> lock(state_mutex);
  Record record("nvshmem_free");
  record.Uint("pointer", reinterpret_cast<std::uintptr_t>(pointer));
  const int index = HeapOf(pointer);
  if (index < 0 || heaps[index].base != pointer) {
    record.Finish(kFailure, "not an allocation's start");
    return;
  }
  std::free(heaps[index].base);
  heaps[index].base = nullptr;
  record.Finish(0);
}

FAKE_EXPORT void* nvshmem_ptr(const void* pointer, int pe) {
  std::lock_guard<std::mutex> lock(state_mutex);
  Record record("nvshmem_ptr");
  record.Uint("pointer", reinterpret_cast<std::uintptr_t>(pointer)).Int("target", pe);
  if (Injected("nvshmem_ptr")) return (record.Finish(0, "injected"), nullptr);
  if (!initialized) return (record.Finish(0, "not initialized"), nullptr);
  const int index = HeapOf(pointer);
  if (index < 0) return (record.Finish(0, "not symmetric memory"), nullptr);
  if (pe < 0 || pe >= n_pes) return (record.Finish(0, "no such PE"), nullptr);
  if (pe == my_pe) return (record.Finish(reinterpret_cast<std::uintptr_t>(pointer)),
                           const_cast<void*>(pointer));
  if (Listed("SMALTI_FAKE_NVSHMEM_UNREACHABLE", std::to_string(pe))) {
    return (record.Finish(0, "unreachable"), nullptr);
  }
  const std::uintptr_t offset = static_cast<const std::uint8_t*>(pointer) - heaps[index].base;
  const std::uintptr_t peer = kPeerBase + (static_cast<std::uintptr_t>(pe) << kPeShift) +
                              (static_cast<std::uintptr_t>(index) << kIndexShift) + offset;
  record.Finish(static_cast<long long>(peer));
  return reinterpret_cast<void*>(peer);
}

FAKE_EXPORT void* nvshmemx_mc_ptr(std::int32_t team, const void* pointer) {
  std::lock_guard<std::mutex> lock(state_mutex);
  Record record("nvshmemx_mc_ptr");
  record.Int("team", team).Uint("pointer", reinterpret_cast<std::uintptr_t>(pointer));
  if (!initialized) return (record.Finish(0, "not initialized"), nullptr);
  if (team != 0) return (record.Finish(0, "a team other than NVSHMEM_TEAM_WORLD"), nullptr);
  const int index = HeapOf(pointer);
  if (index < 0) return (record.Finish(0, "not symmetric memory"), nullptr);
  const char* off = std::getenv("SMALTI_FAKE_NVSHMEM_NO_MULTICAST");
  if (off != nullptr && *off == '1') return (record.Finish(0, "no multicast"), nullptr);
  const std::uintptr_t offset = static_cast<const std::uint8_t*>(pointer) - heaps[index].base;
  const std::uintptr_t address =
      kMulticastBase + (static_cast<std::uintptr_t>(index) << kIndexShift) + offset;
  record.Finish(static_cast<long long>(address));
  return reinterpret_cast<void*>(address);
}

FAKE_EXPORT void nvshmem_barrier_all() {
  std::lock_guard<std::mutex> lock(state_mutex);
  Record record("nvshmem_barrier_all");
  record.Finish(initialized ? 0 : kFailure, initialized ? "" : "not initialized");
}
