// The meeting of one collective launch's per-device calls in one process. XLA calls the
// launcher once per device, on a thread of that device; the calls of one group (the same
// kernel and group index: the devices along the mesh axis that launch it together) wait for
// each other here, so the last to arrive can make (or find) the group's symmetric heap with
// every device's ordinal and context known, and every call then launches with it.
//
// A device that never arrives (its program did not reach the launch, or reached another)
// ends the wait after CollectiveTimeout() with an error naming the devices still missing.

#ifndef SMALTI_RUNTIME_LAUNCHER_GROUP_H_
#define SMALTI_RUNTIME_LAUNCHER_GROUP_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "result.h"
#include "symmetric_heap.h"

namespace smalti::launcher {

// Work done once per meeting, by the last call to arrive, for all: members in axis order.
using GroupWork = std::function<LaunchResult(const std::vector<GroupMember>& members,
                                             std::shared_ptr<const SymmetricHeap>* heap)>;

// Waits until the `devices` calls of (kernel, group) have arrived, `me` among them; the last
// runs `work` and each call gets its result and heap. Ranks must be 0 .. devices - 1, each
// once per meeting.
LaunchResult Meet(const std::string& kernel, std::int64_t group, int devices,
                  const GroupMember& me, std::chrono::milliseconds timeout,
                  const GroupWork& work, std::shared_ptr<const SymmetricHeap>* heap);

// How long a call waits for the rest of its group: $SMALTI_COLLECTIVE_TIMEOUT seconds
// (a decimal number) when set, else 120 s.
std::chrono::milliseconds CollectiveTimeout();

}  // namespace smalti::launcher

#endif  // SMALTI_RUNTIME_LAUNCHER_GROUP_H_
