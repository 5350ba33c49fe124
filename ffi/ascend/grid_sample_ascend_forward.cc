// XLA FFI handler: grid_sample forward on Ascend through aclnnGridSampler2D/3D.
#include <cstdint>
#include <string>
#include <utility>

#include "../common/ffi_contract.h"
#include "../common/handler_exceptions.h"
#include "aclnn_api.h"
#include "aclnn_call.h"
#include "grid_sample_ascend.h"
#include "workspace.h"
#include "xla/ffi/api/ffi.h"

namespace gs_ascend {
namespace {

ffi::Error ForwardImpl(aclrtStream stream, int32_t device_ordinal,
                       ffi::AnyBuffer input, ffi::AnyBuffer grid, ffi::Result<ffi::AnyBuffer> out,
                       int64_t interpolation, int64_t padding, bool align_corners,
                       bool channels_last, bool deterministic) {
  (void)deterministic;  // the forward kernels are deterministic (op_api_list.md)
  if (ffi::Error e = CheckCommon(input, grid, interpolation, padding, channels_last); e.failure()) {
    return e;
  }
  if (out->element_type() != input.element_type()) {
    return InvalidArgument("the output must have the input's dtype");
  }
  if (ffi::Error e = CheckPlaneLimit(input); e.failure()) return e;
  auto api_or = PrepareCall(stream, device_ordinal);
  if (api_or.has_error()) return api_or.error();
  const AclnnApi& api = *api_or.value();
  // aclnn returns early and writes nothing when a tensor is empty
  // (aclnn_grid_sampler2d.cpp, aclnn_grid_sampler3d.cpp); the output then has
  // no elements either, unless a future shape rule gives it some.
  if (input.element_count() == 0 || grid.element_count() == 0) {
    return ZeroOnStream(api, out->untyped_data(), out->size_bytes(), stream, "the output");
  }

  const size_t rank = input.dimensions().size();
  const int32_t dtype = *AclDataTypeOf(input.element_type());
  const bool is3d = rank == 5;

  Tensor acl_input(api), acl_grid(api), acl_out(api);
  Executor executor(api);
  if (ffi::Error e = acl_input.Create(DimsOf(input), dtype, FeatureFormat(rank),
                                      input.untyped_data(), "input");
      e.failure()) {
    return e;
  }
  if (ffi::Error e = acl_grid.Create(DimsOf(grid), dtype, kGridFormat, grid.untyped_data(),
                                     "grid");
      e.failure()) {
    return e;
  }
  if (ffi::Error e = acl_out.Create(DimsOf(*out), dtype, FeatureFormat(rank),
                                    out->untyped_data(), "out");
      e.failure()) {
    return e;
  }

  uint64_t workspace_size = 0;
  const auto get_workspace = is3d ? api.grid_sampler3d_workspace : api.grid_sampler2d_workspace;
  const char* get_workspace_name =
      is3d ? "aclnnGridSampler3DGetWorkspaceSize" : "aclnnGridSampler2DGetWorkspaceSize";
  const aclnnStatus status = get_workspace(acl_input.get(), acl_grid.get(), interpolation, padding,
                                           align_corners, acl_out.get(), &workspace_size,
                                           executor.out());
  if (status != kAclnnSuccess) return StatusError(api, get_workspace_name, status);

  Workspace workspace;
  if (ffi::Error e = workspace.Allocate(api, stream, workspace_size); e.failure()) {
    return e;
  }
  return Launch(api, executor, is3d ? api.grid_sampler3d : api.grid_sampler2d,
                is3d ? "aclnnGridSampler3D" : "aclnnGridSampler2D", workspace.data(),
                workspace_size, stream);
}

ffi::Error ForwardOnTestStream(int32_t device_ordinal,
                               ffi::AnyBuffer input, ffi::AnyBuffer grid,
                               ffi::Result<ffi::AnyBuffer> out, int64_t interpolation,
                               int64_t padding, bool align_corners, bool channels_last,
                               bool deterministic, int64_t test_stream) {
  return ForwardImpl(TestStream(test_stream), device_ordinal, input, grid,
                     out, interpolation, padding, align_corners, channels_last, deterministic);
}

}  // namespace
}  // namespace gs_ascend

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxGridSampleAscendForward,
    (gs_ffi::NoExceptions<gs_ascend::kPlatform, gs_ascend::ForwardImpl>::Call),
    gs_ffi::BindForward(xla::ffi::Ffi::Bind()
                            .Ctx<gs_ascend::AclStream>()
                            .Ctx<xla::ffi::DeviceOrdinal>())
        .Attr<bool>("deterministic"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxGridSampleAscendForwardOnTestStream,
    (gs_ffi::NoExceptions<gs_ascend::kPlatform, gs_ascend::ForwardOnTestStream>::Call),
    gs_ffi::BindForward(xla::ffi::Ffi::Bind()
                            .Ctx<xla::ffi::DeviceOrdinal>())
        .Attr<bool>("deterministic")
        .Attr<int64_t>("test_stream"));
