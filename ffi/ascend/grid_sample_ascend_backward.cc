// XLA FFI handler: grid_sample backward on Ascend through
// aclnnGridSampler2DBackward / aclnnGridSampler3DBackward.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../common/ffi_contract.h"
#include "../common/handler_exceptions.h"
#include "aclnn_api.h"
#include "aclnn_call.h"
#include "grid_sample_ascend.h"
#include "workspace.h"
#include "xla/ffi/api/ffi.h"

namespace gs_ascend {
namespace {

ffi::Error BackwardImpl(aclrtStream stream, int32_t device_ordinal,
                        ffi::AnyBuffer grad_output, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                        ffi::RemainingRets rets, int64_t interpolation, int64_t padding,
                        bool align_corners, bool channels_last, bool input_mask,
                        bool grid_mask, bool deterministic) {
  // CANN picks the deterministic kernel from the process's setting, not per
  // call (determinism.h): the attribute, part of the target's schema, is not
  // read here; the lowering routes a deterministic call that the start-up
  // level does not cover to the reference.
  (void)deterministic;
  if (ffi::Error e = CheckCommon(input, grid, interpolation, padding, channels_last); e.failure()) {
    return e;
  }
  if (grad_output.element_type() != input.element_type()) {
    return InvalidArgument("grad_output must have the input's dtype");
  }
  if (!input_mask && !grid_mask) {
    // aclnn would silently compute nothing for an all-false mask: never pass one.
    return InvalidArgument("the output mask asks for no gradient");
  }
  if (ffi::Error e = CheckBackwardSizeLimits(grad_output, input, grid); e.failure()) return e;
  const size_t wanted = static_cast<size_t>(input_mask) + static_cast<size_t>(grid_mask);
  if (rets.size() != wanted) {
    return InvalidArgument("expected " + std::to_string(wanted) + " results for the mask, got " +
                           std::to_string(rets.size()));
  }
  // Results in order: grad_input if asked, then grad_grid if asked. A
  // masked-off gradient is a tensor without data: aclnn never writes it (it
  // copies a result out only where outputMask is true,
  // aclnn_grid_sampler2d_backward.cpp:305/:332,
  // aclnn_grid_sampler3d_backward.cpp:326/:348), and aclCreateTensor takes
  // null data (nnopbase aclCreateTensor.md's examples).
  void* input_grad_data = nullptr;
  void* grid_grad_data = nullptr;
  size_t next = 0;
  if (input_mask) {
    auto r = rets.get<ffi::AnyBuffer>(next++);
    if (r.has_error()) return r.error();
    if ((*r)->element_type() != input.element_type() || DimsOf(**r) != DimsOf(input)) {
      return InvalidArgument("grad_input must have the input's shape and dtype");
    }
    input_grad_data = (*r)->untyped_data();
  }
  if (grid_mask) {
    auto r = rets.get<ffi::AnyBuffer>(next++);
    if (r.has_error()) return r.error();
    if ((*r)->element_type() != grid.element_type() || DimsOf(**r) != DimsOf(grid)) {
      return InvalidArgument("grad_grid must have the grid's shape and dtype");
    }
    grid_grad_data = (*r)->untyped_data();
  }

  auto api_or = PrepareCall(stream, device_ordinal);
  if (api_or.has_error()) return api_or.error();
  const AclnnApi& api = *api_or.value();
  // aclnn returns early and writes nothing when gradOutput, input or grid is
  // empty (aclnn_grid_sampler2d_backward.cpp:242, aclnn_grid_sampler3d_backward.cpp:234),
  // while a gradient may still have elements (grad_input with an empty output
  // grid, grad_grid with C = 0): those are zero.
  if (grad_output.element_count() == 0 || input.element_count() == 0 ||
      grid.element_count() == 0) {
    if (input_mask) {
      if (ffi::Error e = ZeroOnStream(api, input_grad_data, input.size_bytes(), stream,
                                      "grad_input");
          e.failure()) {
        return e;
      }
    }
    return grid_mask ? ZeroOnStream(api, grid_grad_data, grid.size_bytes(), stream, "grad_grid")
                     : ffi::Error::Success();
  }

  const size_t rank = input.dimensions().size();
  const int32_t dtype = *AclDataTypeOf(input.element_type());
  const bool is3d = rank == 5;
  const int32_t feature_format = FeatureFormat(rank);

  Tensor acl_grad_output(api), acl_input(api), acl_grid(api);
  Tensor acl_input_grad(api), acl_grid_grad(api);
  BoolArray mask(api);
  Executor executor(api);
  if (ffi::Error e = acl_grad_output.Create(DimsOf(grad_output), dtype, feature_format,
                                            grad_output.untyped_data(), "grad_output");
      e.failure()) {
    return e;
  }
  if (ffi::Error e = acl_input.Create(DimsOf(input), dtype, feature_format, input.untyped_data(),
                                      "input");
      e.failure()) {
    return e;
  }
  if (ffi::Error e = acl_grid.Create(DimsOf(grid), dtype, kGridFormat, grid.untyped_data(),
                                     "grid");
      e.failure()) {
    return e;
  }
  if (ffi::Error e = acl_input_grad.Create(DimsOf(input), dtype, feature_format,
                                           input_grad_data, "grad_input");
      e.failure()) {
    return e;
  }
  if (ffi::Error e = acl_grid_grad.Create(DimsOf(grid), dtype, kGridFormat, grid_grad_data,
                                          "grad_grid");
      e.failure()) {
    return e;
  }
  const bool mask_values[2] = {input_mask, grid_mask};
  if (ffi::Error e = mask.Create(mask_values, 2); e.failure()) return e;

  uint64_t workspace_size = 0;
  const auto get_workspace =
      is3d ? api.grid_sampler3d_backward_workspace : api.grid_sampler2d_backward_workspace;
  const char* get_workspace_name = is3d ? "aclnnGridSampler3DBackwardGetWorkspaceSize"
                                        : "aclnnGridSampler2DBackwardGetWorkspaceSize";
  const aclnnStatus status = get_workspace(acl_grad_output.get(), acl_input.get(), acl_grid.get(),
                                           interpolation, padding, align_corners, mask.get(),
                                           acl_input_grad.get(), acl_grid_grad.get(),
                                           &workspace_size, executor.out());
  if (status != kAclnnSuccess) return StatusError(api, get_workspace_name, status);

  Workspace workspace;
  if (ffi::Error e = workspace.Allocate(api, stream, workspace_size); e.failure()) {
    return e;
  }
  if (ffi::Error e = Launch(api, executor,
                            is3d ? api.grid_sampler3d_backward : api.grid_sampler2d_backward,
                            is3d ? "aclnnGridSampler3DBackward" : "aclnnGridSampler2DBackward",
                            workspace.data(), workspace_size, stream);
      e.failure()) {
    return e;
  }
  return ffi::Error::Success();
}

ffi::Error BackwardOnTestStream(int32_t device_ordinal,
                                ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                                ffi::AnyBuffer grid, ffi::RemainingRets rets,
                                int64_t interpolation, int64_t padding, bool align_corners,
                                bool channels_last, bool input_mask, bool grid_mask,
                                bool deterministic, int64_t test_stream) {
  return BackwardImpl(TestStream(test_stream), device_ordinal, grad_output,
                      input, grid, rets, interpolation, padding, align_corners, channels_last,
                      input_mask, grid_mask, deterministic);
}

}  // namespace
}  // namespace gs_ascend

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxGridSampleAscendBackward,
    (gs_ffi::NoExceptions<gs_ascend::kPlatform, gs_ascend::BackwardImpl>::Call),
    gs_ffi::BindBackward(xla::ffi::Ffi::Bind()
                             .Ctx<gs_ascend::AclStream>()
                             .Ctx<xla::ffi::DeviceOrdinal>())
        .Attr<bool>("deterministic"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxGridSampleAscendBackwardOnTestStream,
    (gs_ffi::NoExceptions<gs_ascend::kPlatform, gs_ascend::BackwardOnTestStream>::Call),
    gs_ffi::BindBackward(xla::ffi::Ffi::Bind()
                             .Ctx<xla::ffi::DeviceOrdinal>())
        .Attr<bool>("deterministic")
        .Attr<int64_t>("test_stream"));
