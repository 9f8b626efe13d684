// Timing launches with CUDA events. While a kernel is being timed (StartTiming), each of its
// launches is bracketed by cuEventRecord of a start and an end event on the launch's stream;
// StopTiming waits for each end event (cuEventSynchronize) and reads the device time between
// the two (cuEventElapsedTime, in milliseconds), in launch order.
//
// A kernel is known by its content, as the launcher's function cache knows it: its cubin's
// fingerprint and size and its entry name, so two kernels timed at once never mix. Events are
// created (timing enabled) per kernel and stream as launches need them, one pair per launch
// in flight (no host wait between timed launches), and reused by later launches once read;
// a kernel keeps the last kTimedLaunches launches' events unread, so a long timing holds a
// bounded number of them.

#ifndef SMALTI_RUNTIME_LAUNCHER_TIMING_H_
#define SMALTI_RUNTIME_LAUNCHER_TIMING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "driver.h"
#include "result.h"

namespace smalti::launcher {

constexpr std::size_t kTimedLaunches = 1024;  // unread launches kept per kernel: the last ones

// FNV-1a over a cubin.
std::uint64_t Fingerprint(const std::uint8_t* bytes, std::size_t size);

// A compiled kernel by content: its cubin's fingerprint and size, and its entry name.
struct KernelIdentity {
  std::uint64_t fingerprint = 0;
  std::size_t cubin_bytes = 0;
  std::string name;

  bool operator<(const KernelIdentity& other) const {
    return std::tie(fingerprint, cubin_bytes, name) <
           std::tie(other.fingerprint, other.cubin_bytes, other.name);
  }
};

KernelIdentity IdentityOf(const std::uint8_t* cubin, std::size_t cubin_bytes,
                          std::string_view name);

// Whether any kernel is being timed: launches look up their own timer only then.
bool AnyTimed();

// Starts timing `kernel`'s launches (refused while it is already being timed).
LaunchResult StartTiming(const KernelIdentity& kernel);

// Stops timing `kernel` and appends the device time of each launch made since StartTiming
// (the last kTimedLaunches), in milliseconds, to `milliseconds`; a failing event call is named.
LaunchResult StopTiming(const KernelIdentity& kernel, std::vector<float>* milliseconds);

// The events around one launch: Begin records the start event when the kernel is being timed
// (nothing otherwise), End the end event after a successful launch. Events of a launch that
// never reaches End go back to the kernel's unused ones.
class LaunchTimer {
 public:
  LaunchTimer() = default;
  LaunchTimer(const LaunchTimer&) = delete;
  LaunchTimer& operator=(const LaunchTimer&) = delete;
  ~LaunchTimer();

  // `context` is current and owns `stream`.
  LaunchResult Begin(const std::shared_ptr<const Driver>& driver, CUcontext context,
                     CUstream stream, const KernelIdentity& kernel);
  LaunchResult End();

 private:
  bool begun_ = false;
  KernelIdentity kernel_;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr;
  CUevent end_ = nullptr;
};

// Destroys every event and forgets every timer (before the launcher forgets its driver).
void ResetTiming();

}  // namespace smalti::launcher

extern "C" {

// StartTiming for the kernel `kernel` of `cubin`: the LaunchStatus; `message` says why not.
int smalti_timing_start(const std::uint8_t* cubin, std::size_t cubin_bytes, const char* kernel,
                        char* message, std::size_t message_capacity);

// StopTiming: writes up to `capacity` times (ms) into `milliseconds` and their number into
// *count; on failure the failing call, its CUresult and the message, as smalti_launch_core.
int smalti_timing_stop(const std::uint8_t* cubin, std::size_t cubin_bytes, const char* kernel,
                       float* milliseconds, std::size_t capacity, std::size_t* count,
                       int* cuda_error, char* call, std::size_t call_capacity, char* message,
                       std::size_t message_capacity);
}

#endif  // SMALTI_RUNTIME_LAUNCHER_TIMING_H_
