// Timing launches with CUDA events; see timing.h.

#include "timing.h"

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <utility>

namespace smalti::launcher {
namespace {

struct EventPair {
  CUevent start = nullptr;
  CUevent end = nullptr;
};

using StreamKey = std::pair<CUcontext, CUstream>;

// A launch whose events are recorded and not read yet.
struct Recorded {
  StreamKey stream;
  EventPair events;
};

struct KernelTimer {
  bool active = false;
  std::shared_ptr<const Driver> driver;              // the one that created its events
  std::map<StreamKey, std::vector<EventPair>> idle;  // created, free to record again
  std::deque<Recorded> recorded;                     // in launch order
};

std::mutex timing_mutex;
std::map<KernelIdentity, KernelTimer> timers;  // guarded by timing_mutex
std::atomic<int> active_timers{0};

std::string KernelText(const KernelIdentity& kernel) { return "kernel " + kernel.name; }

// Gives `events` back to `kernel`'s unused ones for `key` (if the timer still exists for the
// driver that made them; timing_mutex held).
void Release(const KernelIdentity& kernel, const std::shared_ptr<const Driver>& driver,
             const StreamKey& key, EventPair events) {
  auto found = timers.find(kernel);
  if (found != timers.end() && found->second.driver == driver) {
    found->second.idle[key].push_back(events);
  }
}

}  // namespace

std::uint64_t Fingerprint(const std::uint8_t* bytes, std::size_t size) {
  std::uint64_t hash = 1469598103934665603ull;
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

KernelIdentity IdentityOf(const std::uint8_t* cubin, std::size_t cubin_bytes,
                          std::string_view name) {
  return {cubin == nullptr ? 0 : Fingerprint(cubin, cubin_bytes), cubin_bytes,
          std::string(name)};
}

bool AnyTimed() { return active_timers.load(std::memory_order_acquire) > 0; }

LaunchResult StartTiming(const KernelIdentity& kernel) {
  if (kernel.name.empty() || kernel.cubin_bytes == 0) {
    return Invalid("timing needs a kernel name and its cubin");
  }
  std::lock_guard<std::mutex> lock(timing_mutex);
  KernelTimer& timer = timers[kernel];
  if (timer.active) return Invalid(KernelText(kernel) + " is already being timed");
  timer.active = true;
  active_timers.fetch_add(1, std::memory_order_release);
  return {};
}

LaunchResult StopTiming(const KernelIdentity& kernel, std::vector<float>* milliseconds) {
  std::shared_ptr<const Driver> driver;
  std::deque<Recorded> recorded;
  {
    std::lock_guard<std::mutex> lock(timing_mutex);
    auto found = timers.find(kernel);
    if (found == timers.end() || !found->second.active) {
      return Invalid(KernelText(kernel) + " is not being timed");
    }
    KernelTimer& timer = found->second;
    timer.active = false;
    active_timers.fetch_sub(1, std::memory_order_release);
    driver = timer.driver;
    recorded.swap(timer.recorded);
  }
  LaunchResult outcome;
  for (std::size_t i = 0; i < recorded.size() && outcome.ok(); ++i) {
    const Recorded& launch = recorded[i];
    const std::string which = "launch " + std::to_string(i) + " of " + KernelText(kernel);
    ScopedContext current(*driver, launch.stream.first);
    if (current.result() != kCudaSuccess) {
      outcome = DriverFailure(*driver, current.result(), "cuCtxPushCurrent",
                              "making the context of " + which + " current");
      break;
    }
    CUresult result = driver->event_synchronize(launch.events.end);
    if (result != kCudaSuccess) {
      outcome = DriverFailure(*driver, result, "cuEventSynchronize",
                              "waiting for the end event of " + which);
      break;
    }
    float elapsed = 0.0f;
    result = driver->event_elapsed_time(&elapsed, launch.events.start, launch.events.end);
    if (result != kCudaSuccess) {
      outcome = DriverFailure(*driver, result, "cuEventElapsedTime",
                              "reading the device time of " + which);
      break;
    }
    milliseconds->push_back(elapsed);
  }
  std::lock_guard<std::mutex> lock(timing_mutex);
  for (const Recorded& launch : recorded) Release(kernel, driver, launch.stream, launch.events);
  return outcome;
}

LaunchTimer::~LaunchTimer() {
  if (!begun_) return;
  std::lock_guard<std::mutex> lock(timing_mutex);
  auto found = timers.find(kernel_);
  if (found != timers.end()) found->second.idle[{context_, stream_}].push_back({start_, end_});
}

LaunchResult LaunchTimer::Begin(const std::shared_ptr<const Driver>& driver, CUcontext context,
                                CUstream stream, const KernelIdentity& kernel) {
  std::lock_guard<std::mutex> lock(timing_mutex);
  auto found = timers.find(kernel);
  if (found == timers.end() || !found->second.active) return {};
  KernelTimer& timer = found->second;
  if (timer.driver != nullptr && timer.driver != driver) {
    return Invalid(KernelText(kernel) + " was timed through another driver; reset first");
  }
  timer.driver = driver;
  std::vector<EventPair>& idle = timer.idle[{context, stream}];
  EventPair events;
  if (!idle.empty()) {
    events = idle.back();
    idle.pop_back();
  } else {
    for (CUevent* event : {&events.start, &events.end}) {
      CUresult result = driver->event_create(event, kEventDefault);
      if (result != kCudaSuccess) {
        if (events.start != nullptr) driver->event_destroy(events.start);
        return DriverFailure(*driver, result, "cuEventCreate",
                             "creating the timing events of " + KernelText(kernel));
      }
    }
  }
  CUresult result = driver->event_record(events.start, stream);
  if (result != kCudaSuccess) {
    idle.push_back(events);
    return DriverFailure(*driver, result, "cuEventRecord",
                         "recording the start event of " + KernelText(kernel));
  }
  begun_ = true;
  kernel_ = kernel;
  context_ = context;
  stream_ = stream;
  start_ = events.start;
  end_ = events.end;
  return {};
}

LaunchResult LaunchTimer::End() {
  if (!begun_) return {};
  std::lock_guard<std::mutex> lock(timing_mutex);
  auto found = timers.find(kernel_);
  if (found == timers.end()) {  // reset while launching: the events are gone
    begun_ = false;
    return {};
  }
  KernelTimer& timer = found->second;
  begun_ = false;
  const StreamKey key{context_, stream_};
  CUresult result = timer.driver->event_record(end_, stream_);
  if (result != kCudaSuccess) {
    timer.idle[key].push_back({start_, end_});
    return DriverFailure(*timer.driver, result, "cuEventRecord",
                         "recording the end event of " + KernelText(kernel_));
  }
  timer.recorded.push_back({key, {start_, end_}});
  if (timer.recorded.size() > kTimedLaunches) {  // keep the last ones: reuse the oldest pair
    timer.idle[timer.recorded.front().stream].push_back(timer.recorded.front().events);
    timer.recorded.pop_front();
  }
  return {};
}

void ResetTiming() {
  std::lock_guard<std::mutex> lock(timing_mutex);
  for (auto& [kernel, timer] : timers) {
    if (timer.driver == nullptr) continue;
    std::vector<std::pair<CUcontext, EventPair>> all;
    for (auto& [key, pairs] : timer.idle) {
      for (EventPair events : pairs) all.emplace_back(key.first, events);
    }
    for (const Recorded& launch : timer.recorded) {
      all.emplace_back(launch.stream.first, launch.events);
    }
    for (const auto& [context, events] : all) {
      ScopedContext current(*timer.driver, context);
      if (current.result() != kCudaSuccess) continue;
      timer.driver->event_destroy(events.start);
      timer.driver->event_destroy(events.end);
    }
  }
  timers.clear();
  active_timers.store(0, std::memory_order_release);
}

}  // namespace smalti::launcher

extern "C" int smalti_timing_start(const std::uint8_t* cubin, std::size_t cubin_bytes,
                                   const char* kernel, char* message,
                                   std::size_t message_capacity) {
  using namespace smalti::launcher;
  LaunchResult result = StartTiming(
      IdentityOf(cubin, cubin_bytes, kernel == nullptr ? std::string_view() : kernel));
  CopyOut(result.message, message, message_capacity);
  return static_cast<int>(result.status);
}

extern "C" int smalti_timing_stop(const std::uint8_t* cubin, std::size_t cubin_bytes,
                                  const char* kernel, float* milliseconds, std::size_t capacity,
                                  std::size_t* count, int* cuda_error, char* call,
                                  std::size_t call_capacity, char* message,
                                  std::size_t message_capacity) {
  using namespace smalti::launcher;
  std::vector<float> times;
  LaunchResult result = StopTiming(
      IdentityOf(cubin, cubin_bytes, kernel == nullptr ? std::string_view() : kernel), &times);
  const std::size_t kept = times.size() < capacity ? times.size() : capacity;
  for (std::size_t i = 0; i < kept; ++i) milliseconds[i] = times[times.size() - kept + i];
  if (count != nullptr) *count = kept;
  if (cuda_error != nullptr) *cuda_error = result.cuda_error;
  CopyOut(result.call, call, call_capacity);
  CopyOut(result.message, message, message_capacity);
  return static_cast<int>(result.status);
}
