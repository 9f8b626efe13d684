// NVSHMEM's host library as the symmetric heap across processes; see nvshmem.h.

#include "nvshmem.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace smalti::launcher {
namespace {

constexpr const char* kDefaultLibrary = "libnvshmem_host.so.3";
constexpr const char* kLibraryVariable = "SMALTI_LIBNVSHMEM";

// ---------------------------------------------------------------------------------------
// NVSHMEM 3's C ABI (bootstrap_device_host/nvshmem_uniqueid.h, device_host/nvshmem_types.h,
// device_host/nvshmem_common.cuh, host/nvshmemx_api.h). Versioned structs start with
// `version` = (1 << 16) + their size, as the headers' *_INITIALIZER macros set it.

// nvshmemx_uniqueid_v1.
struct UniqueId {
  int version;
  char internal[kNvshmemUniqueIdBytes - sizeof(int)];
};

// nvshmemx_uniqueid_args_v1.
struct UniqueIdArgs {
  int version;
  UniqueId* id;
  int myrank;
  int nranks;
};

// nvshmemx_init_args_v1 (96 bytes of padding after the unique-id arguments).
struct InitArgs {
  int version;
  UniqueIdArgs uid_args;
  char content[96];
};

// nvshmemx_init_attr_v1.
struct InitAttr {
  int version;
  void* mpi_comm;
  InitArgs args;
};

static_assert(sizeof(UniqueId) == 128, "nvshmemx_uniqueid_t is 128 bytes");
static_assert(sizeof(UniqueIdArgs) == 24, "nvshmemx_uniqueid_args_t is 24 bytes");
static_assert(sizeof(InitArgs) == 128, "nvshmemx_init_args_t is 128 bytes");
static_assert(sizeof(InitAttr) == 144, "nvshmemx_init_attr_t is 144 bytes");

template <typename T>
constexpr int Version() {
  return (1 << 16) + static_cast<int>(sizeof(T));
}

constexpr unsigned int kInitWithUniqueId = 1u << 3;  // NVSHMEMX_INIT_WITH_UNIQUEID
constexpr std::int32_t kTeamWorld = 0;               // NVSHMEM_TEAM_WORLD (nvshmem_team_t)

using GetUniqueIdFn = int (*)(UniqueId*);
using SetAttrUniqueIdArgsFn = int (*)(int, int, const UniqueId*, InitAttr*);
using HostlibInitAttrFn = int (*)(unsigned int, InitAttr*);
using HostlibFinalizeFn = void (*)();
using QueryFn = int (*)();
using MallocFn = void* (*)(std::size_t);
using FreeFn = void (*)(void*);
using PtrFn = void* (*)(const void*, int);
using McPtrFn = void* (*)(std::int32_t, const void*);
using BarrierAllFn = void (*)();

// The opened library and the entry points smalti calls.
struct Library {
  Library() = default;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library() {
    if (handle != nullptr) dlclose(handle);
  }

  std::string path;
  void* handle = nullptr;
  GetUniqueIdFn get_uniqueid = nullptr;
  SetAttrUniqueIdArgsFn set_attr_uniqueid_args = nullptr;
  HostlibInitAttrFn hostlib_init_attr = nullptr;
  HostlibFinalizeFn hostlib_finalize = nullptr;
  QueryFn my_pe = nullptr;
  QueryFn n_pes = nullptr;
  MallocFn malloc = nullptr;
  FreeFn free = nullptr;
  PtrFn ptr = nullptr;
  McPtrFn mc_ptr = nullptr;
  BarrierAllFn barrier_all = nullptr;
};

// One nvshmem_malloc'ed heap and what this process made for it. `failure` is kept when the
// collective part failed here, so a later launch reports it again instead of calling
// nvshmem_malloc once more than the other PEs (which would leave them waiting).
struct Allocation {
  void* heap = nullptr;
  LaunchResult failure;
  std::shared_ptr<const Driver> driver;  // the peer table's
  CUcontext context = nullptr;
  CUdeviceptr table = 0;
  std::shared_ptr<const SymmetricHeap> view;  // made once the table is written
};

struct State {
  std::unique_ptr<Library> library;
  bool initialized = false;
  int rank = -1, ranks = 0;
  std::array<std::uint8_t, kNvshmemUniqueIdBytes> id{};
  std::map<std::pair<std::int64_t, bool>, Allocation> heaps;  // by (bytes, multimem)
};

std::mutex state_mutex;
State state;  // guarded by state_mutex

LaunchResult NoLibrary(const std::string& why) {
  return {LaunchStatus::kNoDriver, "", 0, "smalti launcher: " + why};
}

// An NVSHMEM call's failure: `call` returned `status` while `doing`.
LaunchResult NvshmemFailure(const std::string& call, int status, const std::string& doing) {
  return {LaunchStatus::kDriverError, call, status,
          "smalti launcher: " + call + " failed (status " + std::to_string(status) + ") " +
              doing};
}

template <typename Fn>
bool Resolve(Library& library, const char* name, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(dlsym(library.handle, name));
  if (*fn == nullptr) *error = library.path + " lacks " + name;
  return *fn != nullptr;
}

// The library (caller holds state_mutex), opened at first use: $SMALTI_LIBNVSHMEM, else
// `path`, else the soname. Once NVSHMEM is initialised the open library is kept.
LaunchResult OpenLibrary(const std::string& path) {
  const char* variable = std::getenv(kLibraryVariable);
  std::string wanted = (variable != nullptr && *variable != '\0') ? variable
                       : !path.empty()                           ? path
                                                                 : kDefaultLibrary;
  if (state.library != nullptr && (state.initialized || state.library->path == wanted)) {
    return {};
  }
  auto library = std::make_unique<Library>();
  library->path = wanted;
  library->handle = dlopen(wanted.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library->handle == nullptr) {
    const char* why = dlerror();
    return NoLibrary("cannot load the NVSHMEM host library " + wanted + ": " +
                     (why ? why : "unknown error") +
                     " (collective kernels across processes need the nvidia-nvshmem-cu13 "
                     "wheel, or $" + kLibraryVariable + " naming libnvshmem_host.so.3)");
  }
  Library& l = *library;
  std::string error;
  bool resolved =
      Resolve(l, "nvshmemx_get_uniqueid", &l.get_uniqueid, &error) &&
      Resolve(l, "nvshmemx_set_attr_uniqueid_args", &l.set_attr_uniqueid_args, &error) &&
      Resolve(l, "nvshmemx_hostlib_init_attr", &l.hostlib_init_attr, &error) &&
      Resolve(l, "nvshmemx_hostlib_finalize", &l.hostlib_finalize, &error) &&
      Resolve(l, "nvshmem_my_pe", &l.my_pe, &error) &&
      Resolve(l, "nvshmem_n_pes", &l.n_pes, &error) &&
      Resolve(l, "nvshmem_malloc", &l.malloc, &error) &&
      Resolve(l, "nvshmem_free", &l.free, &error) &&
      Resolve(l, "nvshmem_ptr", &l.ptr, &error) &&
      Resolve(l, "nvshmemx_mc_ptr", &l.mc_ptr, &error) &&
      Resolve(l, "nvshmem_barrier_all", &l.barrier_all, &error);
  if (!resolved) return NoLibrary(error + " (an NVSHMEM 3 host library is needed)");
  state.library = std::move(library);
  return {};
}

std::string Pe(int pe) { return "NVSHMEM PE " + std::to_string(pe); }

// Zeroes the heap on this process's device (its context current) and waits for it.
LaunchResult Zero(const Driver& driver, void* heap, std::size_t bytes, const std::string& what) {
  const CUdeviceptr base = reinterpret_cast<CUdeviceptr>(heap);
  CUresult result = driver.memset_d8(base, 0, bytes);
  if (result != kCudaSuccess) {
    return DriverFailure(driver, result, "cuMemsetD8",
                         "zeroing the " + std::to_string(bytes) + "-byte NVSHMEM heap of " + what);
  }
  result = driver.ctx_synchronize();
  if (result != kCudaSuccess) {
    return DriverFailure(driver, result, "cuCtxSynchronize",
                         "waiting for the zeroing of the NVSHMEM heap of " + what);
  }
  return {};
}

// nvshmem_malloc, zeroing, nvshmem_barrier_all: the collective part, once per key, the
// barrier reached whatever came before it (caller holds state_mutex).
Allocation Allocate(const std::shared_ptr<const Driver>& driver, CUcontext context,
                    std::size_t bytes, const std::string& what) {
  const Library& library = *state.library;
  Allocation made;
  made.driver = driver;
  made.context = context;
  made.heap = library.malloc(bytes);
  if (made.heap == nullptr) {
    made.failure = {LaunchStatus::kDriverError, "nvshmem_malloc", 0,
                    "smalti launcher: nvshmem_malloc(" + std::to_string(bytes) +
                        ") returned null on " + Pe(state.rank) + ", for the symmetric heap of " +
                        what + " (is NVSHMEM_SYMMETRIC_SIZE large enough?)"};
  } else {
    made.failure = Zero(*driver, made.heap, bytes, what);
  }
  library.barrier_all();  // no PE signals into a heap before its owner zeroed it
  return made;
}

// The peer table and multicast address of `allocation` (local calls only, retried by a later
// launch when one fails); caller holds state_mutex.
LaunchResult MakeView(Allocation& allocation, const GroupMember& me, std::size_t bytes,
                      bool multimem, const std::string& what) {
  const Library& library = *state.library;
  const Driver& driver = *allocation.driver;
  const int ranks = state.ranks;
  auto view = std::make_shared<SymmetricHeap>();  // driver null: owns nothing
  view->members.assign(ranks, GroupMember{});
  view->members[me.rank] = me;
  view->bytes = bytes;
  view->multimem = multimem;
  view->tables.assign(ranks, 0);
  for (int pe = 0; pe < ranks; ++pe) {
    void* peer = library.ptr(allocation.heap, pe);
    if (peer == nullptr) {
      return {LaunchStatus::kDriverError, "nvshmem_ptr", 0,
              "smalti launcher: nvshmem_ptr returned null for " + Pe(pe) + " on " +
                  Pe(state.rank) + ": its symmetric heap is not reachable by loads and "
                  "stores from this GPU (not on this node's NVLink, or peer access is off), "
                  "which " + what + " needs (smalti's kernels read and write peers' memory "
                  "directly)"};
    }
    view->bases.push_back(reinterpret_cast<CUdeviceptr>(peer));
  }
  if (multimem) {
    void* multicast = library.mc_ptr(kTeamWorld, allocation.heap);
    if (multicast == nullptr) {
      return {LaunchStatus::kDriverError, "nvshmemx_mc_ptr", 0,
              "smalti launcher: nvshmemx_mc_ptr(NVSHMEM_TEAM_WORLD) returned null on " +
                  Pe(state.rank) + ": the heap has no multicast mapping, which " + what +
                  " needs for multimem (NVLink multicast through NVSwitch, NVLS enabled in "
                  "NVSHMEM)"};
    }
    view->multicast_base = reinterpret_cast<CUdeviceptr>(multicast);
  }
  const std::size_t table_bytes = ranks * sizeof(CUdeviceptr);
  if (allocation.table == 0) {
    CUresult result = driver.mem_alloc(&allocation.table, table_bytes);
    if (result != kCudaSuccess) {
      allocation.table = 0;
      return DriverFailure(driver, result, "cuMemAlloc", "allocating the peer table of " + what);
    }
  }
  CUresult result = driver.memcpy_htod(allocation.table, view->bases.data(), table_bytes);
  if (result != kCudaSuccess) {
    return DriverFailure(driver, result, "cuMemcpyHtoD", "writing the peer table of " + what);
  }
  // The copy runs on the legacy stream, which XLA's non-blocking streams do not wait for.
  result = driver.ctx_synchronize();
  if (result != kCudaSuccess) {
    return DriverFailure(driver, result, "cuCtxSynchronize",
                         "waiting for the peer table of " + what);
  }
  view->tables[me.rank] = allocation.table;
  allocation.view = std::move(view);
  return {};
}

std::string PathOf(const char* library) { return library == nullptr ? "" : library; }

}  // namespace

bool NvshmemActive() {
  std::lock_guard<std::mutex> lock(state_mutex);
  return state.initialized;
}

LaunchResult NvshmemUniqueId(const std::string& path, std::uint8_t* id) {
  std::lock_guard<std::mutex> lock(state_mutex);
  if (LaunchResult opened = OpenLibrary(path); !opened.ok()) return opened;
  UniqueId unique{};
  unique.version = Version<UniqueId>();  // NVSHMEMX_UNIQUEID_INITIALIZER
  const int status = state.library->get_uniqueid(&unique);
  if (status != 0) {
    return NvshmemFailure("nvshmemx_get_uniqueid", status,
                          "making the unique id that bootstraps NVSHMEM across processes");
  }
  std::memcpy(id, &unique, sizeof(unique));
  return {};
}

LaunchResult NvshmemInitialize(const std::string& path, const std::uint8_t* id, int rank,
                               int ranks) {
  std::lock_guard<std::mutex> lock(state_mutex);
  const std::string as = "as " + Pe(rank) + " of " + std::to_string(ranks);
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    return Invalid("cannot initialise NVSHMEM " + as + ": the rank is outside 0.." +
                   std::to_string(ranks - 1));
  }
  if (state.initialized) {
    if (state.rank == rank && state.ranks == ranks &&
        std::memcmp(state.id.data(), id, kNvshmemUniqueIdBytes) == 0) {
      return {};
    }
    return Invalid("cannot initialise NVSHMEM " + as + ": this process already is " +
                   Pe(state.rank) + " of " + std::to_string(state.ranks) +
                   (state.rank == rank && state.ranks == ranks ? " (with another unique id)"
                                                               : ""));
  }
  if (LaunchResult opened = OpenLibrary(path); !opened.ok()) return opened;
  const Library& library = *state.library;
  UniqueId unique;
  std::memcpy(&unique, id, sizeof(unique));
  InitAttr attr{};  // NVSHMEMX_INIT_ATTR_INITIALIZER
  attr.version = Version<InitAttr>();
  attr.args.version = Version<InitArgs>();
  attr.args.uid_args = {Version<UniqueIdArgs>(), nullptr, -1, -1};
  int status = library.set_attr_uniqueid_args(rank, ranks, &unique, &attr);
  if (status != 0) {
    return NvshmemFailure("nvshmemx_set_attr_uniqueid_args", status,
                          "setting the unique id to initialise NVSHMEM " + as);
  }
  status = library.hostlib_init_attr(kInitWithUniqueId, &attr);
  if (status != 0) {
    return NvshmemFailure("nvshmemx_hostlib_init_attr", status,
                          "initialising NVSHMEM " + as + " with a unique id (did every "
                          "process get the same id, and can they reach process 0?)");
  }
  const int pe = library.my_pe(), pes = library.n_pes();
  if (pe != rank || pes != ranks) {
    return Invalid("NVSHMEM initialised " + as + " says it is " + Pe(pe) + " of " +
                   std::to_string(pes));
  }
  state.initialized = true;
  state.rank = rank;
  state.ranks = ranks;
  std::memcpy(state.id.data(), id, kNvshmemUniqueIdBytes);
  return {};
}

LaunchResult GetNvshmemHeap(const std::shared_ptr<const Driver>& driver, const GroupMember& me,
                            std::int64_t group, int devices, std::int64_t bytes, bool multimem,
                            const std::string& what,
                            std::shared_ptr<const SymmetricHeap>* heap) {
  std::lock_guard<std::mutex> lock(state_mutex);
  if (!state.initialized) return Invalid(what + " has no NVSHMEM to take its heap from");
  if (devices != state.ranks) {
    return Invalid(what + " runs over " + std::to_string(devices) + " devices along its "
                   "mesh axis, but NVSHMEM joins " + std::to_string(state.ranks) +
                   " processes: across processes a collective kernel's mesh axis must span "
                   "every process, one GPU each");
  }
  if (me.rank != state.rank || group != 0) {
    return Invalid(what + " got device index " + std::to_string(me.rank) + " (group " +
                   std::to_string(group) + ") in the process that is " + Pe(state.rank) +
                   ": across processes the index along the mesh axis must be the process "
                   "index (jax.process_index()), one GPU per process");
  }
  const std::size_t size = static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1));
  auto key = std::make_pair(bytes, multimem);
  auto found = state.heaps.find(key);
  if (found == state.heaps.end()) {
    found = state.heaps.emplace(key, Allocate(driver, me.context, size, what)).first;
  }
  Allocation& allocation = found->second;
  if (!allocation.failure.ok()) return allocation.failure;
  if (allocation.view == nullptr) {
    if (LaunchResult made = MakeView(allocation, me, size, multimem, what); !made.ok()) {
      return made;
    }
  }
  *heap = allocation.view;
  return {};
}

void FinalizeNvshmem() {
  std::lock_guard<std::mutex> lock(state_mutex);
  if (state.initialized) {
    const Library& library = *state.library;
    for (auto& [key, allocation] : state.heaps) {
      if (allocation.table != 0 && allocation.driver->ctx_push(allocation.context) ==
                                       kCudaSuccess) {
        allocation.driver->mem_free(allocation.table);
        CUcontext popped = nullptr;
        allocation.driver->ctx_pop(&popped);
      }
      if (allocation.heap != nullptr) library.free(allocation.heap);
    }
    library.hostlib_finalize();
  }
  state = State();  // closes the library
}

}  // namespace smalti::launcher

extern "C" int smalti_nvshmem_unique_id(const char* library, std::uint8_t* id,
                                        std::size_t id_bytes, char* message,
                                        std::size_t capacity) {
  using namespace smalti::launcher;
  LaunchResult result =
      (id == nullptr || id_bytes != kNvshmemUniqueIdBytes)
          ? Invalid("a unique id takes " + std::to_string(kNvshmemUniqueIdBytes) + " bytes")
          : NvshmemUniqueId(PathOf(library), id);
  CopyOut(result.message, message, capacity);
  return static_cast<int>(result.status);
}

extern "C" int smalti_nvshmem_initialize(const char* library, const std::uint8_t* id,
                                         std::size_t id_bytes, int rank, int ranks,
                                         char* message, std::size_t capacity) {
  using namespace smalti::launcher;
  LaunchResult result =
      (id == nullptr || id_bytes != kNvshmemUniqueIdBytes)
          ? Invalid("a unique id takes " + std::to_string(kNvshmemUniqueIdBytes) + " bytes, got " +
                    std::to_string(id == nullptr ? 0 : id_bytes))
          : NvshmemInitialize(PathOf(library), id, rank, ranks);
  CopyOut(result.message, message, capacity);
  return static_cast<int>(result.status);
}

extern "C" int smalti_nvshmem_active(void) { return smalti::launcher::NvshmemActive() ? 1 : 0; }

extern "C" void smalti_nvshmem_finalize(void) { smalti::launcher::FinalizeNvshmem(); }
