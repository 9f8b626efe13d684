// The rendezvous of a collective launch's per-device calls; see group.h.

#include "group.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

namespace smalti::launcher {
namespace {

constexpr double kDefaultTimeoutSeconds = 120;
constexpr const char* kTimeoutVariable = "SMALTI_COLLECTIVE_TIMEOUT";

// One gathering of a group's calls: made by the first to arrive, closed (taken out of
// `open`) by the last, who does the group's work, or by the first call to find the deadline
// passed, which gives every waiting call the same error (a late call then meets afresh).
struct Meeting {
  Meeting(int devices, std::chrono::steady_clock::time_point deadline)
      : members(devices), deadline(deadline) {}
  std::vector<std::optional<GroupMember>> members;  // by rank
  std::chrono::steady_clock::time_point deadline;   // the first arrival's, plus the timeout
  int arrived = 0;
  bool done = false;
  LaunchResult result;  // the work's, or the timeout's for every waiting call
  std::shared_ptr<const SymmetricHeap> heap;
};

using MeetingKey = std::tuple<std::string, std::int64_t, int>;

std::mutex meetings_mutex;
std::condition_variable meetings_changed;
std::map<MeetingKey, std::shared_ptr<Meeting>> open;  // guarded by meetings_mutex

std::string Launch(const std::string& kernel, std::int64_t group) {
  return "collective kernel " + kernel + " (group " + std::to_string(group) + ")";
}

// "devices 2, 3 of 4 along the mesh axis never arrived (arrived: 0 on CUDA device 4, ...)".
std::string Missing(const Meeting& meeting) {
  std::string missing, arrived;
  for (std::size_t rank = 0; rank < meeting.members.size(); ++rank) {
    const std::optional<GroupMember>& member = meeting.members[rank];
    std::string& list = member ? arrived : missing;
    if (!list.empty()) list += ", ";
    list += std::to_string(rank);
    if (member) list += " on CUDA device " + std::to_string(member->device);
  }
  return "devices " + missing + " of " + std::to_string(meeting.members.size()) +
         " along the mesh axis never arrived (arrived: " + arrived + ")";
}

}  // namespace

std::chrono::milliseconds CollectiveTimeout() {
  double seconds = kDefaultTimeoutSeconds;
  if (const char* text = std::getenv(kTimeoutVariable); text != nullptr && *text != '\0') {
    char* end = nullptr;
    double parsed = std::strtod(text, &end);
    if (end != text && parsed > 0) seconds = parsed;
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

LaunchResult Meet(const std::string& kernel, std::int64_t group, int devices,
                  const GroupMember& me, std::chrono::milliseconds timeout,
                  const GroupWork& work, std::shared_ptr<const SymmetricHeap>* heap) {
  const std::string launch = Launch(kernel, group);
  if (me.rank < 0 || me.rank >= devices || group < 0) {
    return Invalid(launch + " got device index " + std::to_string(me.rank) + " and group " +
                   std::to_string(group) + " for " + std::to_string(devices) +
                   " devices along its mesh axis");
  }
  const MeetingKey key{kernel, group, devices};
  std::unique_lock<std::mutex> lock(meetings_mutex);
  std::shared_ptr<Meeting>& slot = open[key];
  if (slot == nullptr) {
    slot = std::make_shared<Meeting>(devices, std::chrono::steady_clock::now() + timeout);
  }
  std::shared_ptr<Meeting> meeting = slot;
  if (meeting->members[me.rank]) {
    return Invalid(launch + ": device index " + std::to_string(me.rank) + " arrived on CUDA "
                   "device " + std::to_string(me.device) + " while CUDA device " +
                   std::to_string(meeting->members[me.rank]->device) + " already waits with it");
  }
  meeting->members[me.rank] = me;
  if (++meeting->arrived == devices) {
    open.erase(key);  // the next launch of the group meets afresh
    std::vector<GroupMember> members;
    for (const std::optional<GroupMember>& member : meeting->members) members.push_back(*member);
    lock.unlock();
    LaunchResult result = work(members, &meeting->heap);
    lock.lock();
    meeting->result = result;
    meeting->done = true;
    meetings_changed.notify_all();
  } else if (!meetings_changed.wait_until(lock, meeting->deadline,
                                          [&] { return meeting->done; }) &&
             meeting->arrived == devices) {
    // Everyone came just in time: the last is making the heap, which has no deadline.
    meetings_changed.wait(lock, [&] { return meeting->done; });
  } else if (!meeting->done) {
    auto still = open.find(key);
    if (still != open.end() && still->second == meeting) open.erase(still);
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.1f", static_cast<double>(timeout.count()) / 1000);
    meeting->result = {LaunchStatus::kTimeout, "", 0,
                       "smalti launcher: " + launch + " waited " + seconds +
                           " s for its group: " + Missing(*meeting) +
                           "; every device along the mesh axis must launch it (set "
                           "SMALTI_COLLECTIVE_TIMEOUT to wait longer)"};
    meeting->done = true;
    meetings_changed.notify_all();
  }
  *heap = meeting->heap;
  return meeting->result;
}

}  // namespace smalti::launcher
