// What a launch (or one step of it) comes to: LaunchResult, and the two ways it fails that
// every step reports alike (a malformed request; a driver call's error, naming the call).

#ifndef SMALTI_RUNTIME_LAUNCHER_RESULT_H_
#define SMALTI_RUNTIME_LAUNCHER_RESULT_H_

#include <algorithm>
#include <cstring>
#include <string>

#include "driver.h"

namespace smalti::launcher {

enum class LaunchStatus : int {
  kOk = 0,
  kInvalidArgument = 1,  // the request itself is malformed (no driver call made for it)
  kDriverError = 2,      // a driver call failed: `call` and `cuda_error` say which and how
  kNoDriver = 3,         // the driver library cannot be opened or lacks an entry point
  kTimeout = 4,          // a collective launch's devices did not all arrive in time
};

struct LaunchResult {
  LaunchStatus status = LaunchStatus::kOk;
  std::string call;        // the failing driver call, e.g. "cuTensorMapEncodeTiled"
  CUresult cuda_error = 0;  // its CUresult
  std::string message;     // "smalti launcher: ..." (never the cubin's bytes)

  bool ok() const { return status == LaunchStatus::kOk; }
};

inline LaunchResult Invalid(const std::string& what) {
  return {LaunchStatus::kInvalidArgument, "", 0, "smalti launcher: " + what};
}

// `call` returned `result` while `doing` ("for tensor map 0 of kernel k").
inline LaunchResult DriverFailure(const Driver& driver, CUresult result, const std::string& call,
                                  const std::string& doing) {
  return {LaunchStatus::kDriverError, call, result,
          "smalti launcher: " + call + " failed: " + DescribeError(driver, result) + " " + doing};
}

// Writes `text` NUL-terminated into `out` (truncated to `capacity`), for C callers.
inline void CopyOut(const std::string& text, char* out, std::size_t capacity) {
  if (out == nullptr || capacity == 0) return;
  std::size_t size = std::min(text.size(), capacity - 1);
  std::memcpy(out, text.data(), size);
  out[size] = '\0';
}

// Makes a context current for the calls in its scope.
class ScopedContext {
 public:
  ScopedContext(const Driver& driver, CUcontext context)
      : driver_(driver), result_(driver.ctx_push(context)) {}
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  ~ScopedContext() {
    CUcontext popped = nullptr;
    if (result_ == kCudaSuccess) driver_.ctx_pop(&popped);
  }
  CUresult result() const { return result_; }

 private:
  const Driver& driver_;
  CUresult result_;
};

}  // namespace smalti::launcher

#endif  // SMALTI_RUNTIME_LAUNCHER_RESULT_H_
