// The symmetric heap across processes: NVSHMEM's host library, for collective kernels whose
// mesh axis spans several processes (jax.distributed, one GPU per process).
//
// The library is dlopen'ed ($SMALTI_LIBNVSHMEM when set, else the path Python passes: the
// nvidia-nvshmem-cu13 wheel's libnvshmem_host.so.3, else that name on the loader's path) and
// only its host API is used; kernels reach peers by plain loads and stores through the peer
// table, not through NVSHMEM's device library. The ABI facts used (struct sizes, enum values,
// versioned struct headers) are those of NVSHMEM 3's headers, declared below.
//
// Python bootstraps it (smalti.runtime.distributed): process 0 gets a unique id
// (NvshmemUniqueId), publishes it through jax.distributed's key-value store, and every process
// initialises NVSHMEM with it as PE jax.process_index() of jax.process_count()
// (NvshmemInitialize: nvshmemx_set_attr_uniqueid_args, then nvshmemx_hostlib_init_attr with
// NVSHMEMX_INIT_WITH_UNIQUEID; the exported host-library form of nvshmemx_init_attr, which is
// an inline function of the headers). Python does this while tracing, where no CUDA context
// is current: NVSHMEM's two-stage initialisation binds the GPU at the first nvshmem_malloc,
// which runs in a launch with its stream's context current. From then on a collective launch
// (of more than one device) in this process takes its heap from NVSHMEM (GetNvshmemHeap)
// instead of meeting other local devices (group.h).
//
// Heaps: one nvshmem_malloc per (heap bytes, multimem) at the first launch that needs it,
// zeroed (cuMemsetD8 + cuCtxSynchronize) and then nvshmem_barrier_all, so no PE signals into a
// heap its owner has not zeroed yet. nvshmem_malloc and nvshmem_barrier_all are collective:
// every process must make the same collective launches in the same order (as SPMD programs
// under jax.jit do), or they wait for each other forever. Each collective step is taken on
// every PE whatever a local step before it returned, so a local failure is reported without
// leaving the other PEs waiting. The peer table (device memory, cuMemAlloc + cuMemcpyHtoD)
// holds nvshmem_ptr(heap, p) for every PE p (null: PE p is not reachable by loads and stores,
// e.g. not on this node's NVLink, an error); the multicast address is
// nvshmemx_mc_ptr(NVSHMEM_TEAM_WORLD, heap), asked only of kernels that use multimem.
// The index along the mesh axis must be the process's PE and the axis must span every PE.

#ifndef SMALTI_RUNTIME_LAUNCHER_NVSHMEM_H_
#define SMALTI_RUNTIME_LAUNCHER_NVSHMEM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "driver.h"
#include "result.h"
#include "symmetric_heap.h"

namespace smalti::launcher {

// nvshmemx_uniqueid_t: an int version then opaque bytes, 128 in all.
constexpr std::size_t kNvshmemUniqueIdBytes = 128;

// Whether NVSHMEM was initialised in this process (collective launches then use it).
bool NvshmemActive();

// A fresh unique id from the library at `path` (opened if not yet), into `id`
// (kNvshmemUniqueIdBytes long).
LaunchResult NvshmemUniqueId(const std::string& path, std::uint8_t* id);

// Initialises NVSHMEM once in this process as PE `rank` of `ranks` with unique id `id`. Again
// with the same rank, ranks and id: nothing to do; with others: an error.
LaunchResult NvshmemInitialize(const std::string& path, const std::uint8_t* id, int rank,
                               int ranks);

// The heap of a collective launch on this process's device (`me`: its index along the mesh
// axis, CUDA device and context, which is current; `group`: its group; `devices`: along the
// axis). The result owns nothing (its driver is null): the peer table and the NVSHMEM
// allocation behind it live until FinalizeNvshmem. `what` names the launch in errors.
LaunchResult GetNvshmemHeap(const std::shared_ptr<const Driver>& driver, const GroupMember& me,
                            std::int64_t group, int devices, std::int64_t bytes, bool multimem,
                            const std::string& what, std::shared_ptr<const SymmetricHeap>* heap);

// Frees every heap (nvshmem_free, collective) and its peer table, finalises NVSHMEM
// (nvshmemx_hostlib_finalize, collective) and closes the library; nothing when not active.
void FinalizeNvshmem();

}  // namespace smalti::launcher

extern "C" {

// C entries for Python (ctypes), each returning a LaunchStatus and writing a NUL-terminated
// message (truncated to `capacity`) on failure. `library` is the path to open unless
// $SMALTI_LIBNVSHMEM is set (null or "": libnvshmem_host.so.3).
int smalti_nvshmem_unique_id(const char* library, std::uint8_t* id, std::size_t id_bytes,
                             char* message, std::size_t capacity);
int smalti_nvshmem_initialize(const char* library, const std::uint8_t* id, std::size_t id_bytes,
                              int rank, int ranks, char* message, std::size_t capacity);
// 1 when NVSHMEM is initialised in this process, else 0.
int smalti_nvshmem_active(void);
// FinalizeNvshmem().
void smalti_nvshmem_finalize(void);
}

#endif  // SMALTI_RUNTIME_LAUNCHER_NVSHMEM_H_
