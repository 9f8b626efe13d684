// smalti's XLA FFI handler: unpacks one custom call (`smalti_launch`) into a LaunchRequest
// and hands it to the driver-facing core (core.h), on XLA's CUDA stream.
//
// Attributes (set by smalti.runtime.jax_integration.ffi_attributes):
//   cubin        u8[]    the kernel's cubin
//   kernel       string  the kernel's entry name
//   launch       i64[10] grid x,y,z, block x,y,z, cluster x,y,z, dynamic shared bytes
//   tensor_maps  i64[]   kRecordSize entries per tensor-map record (see core.h)
//   debug_bytes  i64     size of the kernel's debug buffer; 0 when it has no debug_print
//   collective   i64[3]  devices along the mesh axis, symmetric heap bytes, multimem (0/1);
//                        devices 0 for a kernel that is not collective
// Operands: the kernel's inputs, then for a collective kernel its rank buffer (s32[2]: index
// along the mesh axis, group index; see core.h). Results: its outputs, then (debug_bytes > 0)
// its debug buffer, u8[debug_bytes], zeroed on the stream before the launch and read by the
// host after.
//
// SmaltiLaunchWithoutStream is the same handler bound without a platform stream (the null
// stream), for tests that register it on XLA's CPU platform against a stand-in driver.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace smalti::launcher {
namespace {

ffi::Error ToFfiError(const LaunchResult& result) {
  switch (result.status) {
    case LaunchStatus::kOk:
      return ffi::Error::Success();
    case LaunchStatus::kInvalidArgument:
      return ffi::Error::InvalidArgument(result.message);
    case LaunchStatus::kNoDriver:
      return ffi::Error(ffi::ErrorCode::kUnavailable, result.message);
    case LaunchStatus::kTimeout:
      return ffi::Error(ffi::ErrorCode::kDeadlineExceeded, result.message);
    case LaunchStatus::kDriverError:
      break;
  }
  return ffi::Error::Internal(result.message);
}

ffi::Error LaunchCall(CUstream stream, ffi::RemainingArgs args, ffi::RemainingRets rets,
                      ffi::Span<const std::uint8_t> cubin, std::string_view kernel,
                      ffi::Span<const std::int64_t> launch,
                      ffi::Span<const std::int64_t> tensor_maps, std::int64_t debug_bytes,
                      ffi::Span<const std::int64_t> collective) {
  const std::string name = "kernel " + std::string(kernel);
  if (collective.size() != kCollectiveSize) {
    return ffi::Error::InvalidArgument("smalti launcher: collective of " + name +
                                       " must hold " + std::to_string(kCollectiveSize) +
                                       " values");
  }
  const std::size_t rank_operands = collective[0] > 0 ? 1 : 0;
  if (args.size() < rank_operands) {
    return ffi::Error::InvalidArgument("smalti launcher: collective " + name +
                                       " lacks its rank operand");
  }
  if (launch.size() != kLaunchSize) {
    return ffi::Error::InvalidArgument("smalti launcher: launch of " + name + " must hold " +
                                       std::to_string(kLaunchSize) + " values");
  }
  const std::size_t debug_results = debug_bytes > 0 ? 1 : 0;
  if (debug_bytes < 0 || rets.size() < debug_results) {
    return ffi::Error::InvalidArgument("smalti launcher: debug_bytes of " + name +
                                       " does not match its results");
  }
  LaunchRequest request;
  request.stream = stream;
  request.cubin = cubin.begin();
  request.cubin_bytes = cubin.size();
  request.kernel = kernel;
  for (std::size_t i = 0; i < kLaunchSize; ++i) request.launch[i] = launch[i];
  request.tensor_maps = tensor_maps.begin();
  request.tensor_map_entries = tensor_maps.size();
  for (std::size_t i = 0; i + rank_operands < args.size(); ++i) {
    auto buffer = args.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    request.buffers.push_back(buffer->untyped_data());
  }
  if (rank_operands > 0) {
    auto rank = args.get<ffi::AnyBuffer>(args.size() - 1);
    if (rank.has_error()) return rank.error();
    if (rank->element_type() != ffi::DataType::S32 || rank->element_count() != 2) {
      return ffi::Error::InvalidArgument("smalti launcher: the last operand of collective " +
                                         name + " must be its s32[2] rank buffer");
    }
    request.collective.devices = static_cast<int>(collective[0]);
    request.collective.symmetric_bytes = collective[1];
    request.collective.multimem = collective[2] != 0;
    request.collective.rank = rank->untyped_data();
  }
  for (std::size_t i = 0; i + debug_results < rets.size(); ++i) {
    auto buffer = rets.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    request.buffers.push_back((*buffer)->untyped_data());
  }
  if (debug_results > 0) {
    auto buffer = rets.get<ffi::AnyBuffer>(rets.size() - 1);
    if (buffer.has_error()) return buffer.error();
    if ((*buffer)->element_type() != ffi::DataType::U8 ||
        (*buffer)->size_bytes() != static_cast<std::size_t>(debug_bytes)) {
      return ffi::Error::InvalidArgument("smalti launcher: the last result of " + name +
                                         " must be its u8[" + std::to_string(debug_bytes) +
                                         "] debug buffer");
    }
    request.debug = (*buffer)->untyped_data();
    request.debug_bytes = debug_bytes;
  }
  return ToFfiError(Launch(request));
}

ffi::Error LaunchOnStream(CUstream stream, ffi::RemainingArgs args, ffi::RemainingRets rets,
                          ffi::Span<const std::uint8_t> cubin, std::string_view kernel,
                          ffi::Span<const std::int64_t> launch,
                          ffi::Span<const std::int64_t> tensor_maps, std::int64_t debug_bytes,
                          ffi::Span<const std::int64_t> collective) {
  return LaunchCall(stream, args, rets, cubin, kernel, launch, tensor_maps, debug_bytes,
                    collective);
}

ffi::Error LaunchWithoutStream(ffi::RemainingArgs args, ffi::RemainingRets rets,
                               ffi::Span<const std::uint8_t> cubin, std::string_view kernel,
                               ffi::Span<const std::int64_t> launch,
                               ffi::Span<const std::int64_t> tensor_maps,
                               std::int64_t debug_bytes,
                               ffi::Span<const std::int64_t> collective) {
  return LaunchCall(nullptr, args, rets, cubin, kernel, launch, tensor_maps, debug_bytes,
                    collective);
}

// The operands and attributes both handlers bind, in the order of their parameters.
template <typename Binding>
auto WithOperands(Binding binding) {
  return std::move(binding)
      .RemainingArgs()
      .RemainingRets()
      .template Attr<ffi::Span<const std::uint8_t>>("cubin")
      .template Attr<std::string_view>("kernel")
      .template Attr<ffi::Span<const std::int64_t>>("launch")
      .template Attr<ffi::Span<const std::int64_t>>("tensor_maps")
      .template Attr<std::int64_t>("debug_bytes")
      .template Attr<ffi::Span<const std::int64_t>>("collective");
}

}  // namespace
}  // namespace smalti::launcher

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    SmaltiLaunch, smalti::launcher::LaunchOnStream,
    smalti::launcher::WithOperands(
        ffi::Ffi::Bind().Ctx<ffi::PlatformStream<smalti::launcher::CUstream>>()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(SmaltiLaunchWithoutStream, smalti::launcher::LaunchWithoutStream,
                              smalti::launcher::WithOperands(ffi::Ffi::Bind()));
