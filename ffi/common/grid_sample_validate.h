// Argument validation and problem geometry of the grid_sample FFI handlers,
// shared by every platform's handlers (CPU and CUDA). Host code only: it
// reads buffer shapes and attributes, never buffer contents, so it compiles
// unchanged under a C++ compiler and under nvcc.
//
// Errors are ffi::Error(kInvalidArgument) whose text starts with
// "grid_sample (<platform>): " and names the offending argument.
#ifndef JAX_GRIDSAMPLE_FFI_COMMON_GRID_SAMPLE_VALIDATE_H_
#define JAX_GRIDSAMPLE_FFI_COMMON_GRID_SAMPLE_VALIDATE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "xla/ffi/api/ffi.h"

namespace gs_ffi {

namespace ffi = xla::ffi;

inline ffi::Error InvalidArgument(const char* platform, const std::string& msg) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                    std::string("grid_sample (") + platform + "): " + msg);
}

inline std::string DimsToString(ffi::Span<const int64_t> dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + ")";
}

inline const char* DTypeName(ffi::DataType dt) {
  switch (dt) {
    case ffi::DataType::F16: return "float16";
    case ffi::DataType::BF16: return "bfloat16";
    case ffi::DataType::F32: return "float32";
    case ffi::DataType::F64: return "float64";
    default: return "an unsupported dtype";
  }
}

// Every array of a call (input, grid, output and their gradients) has fewer
// than 2^62 elements with its zero-sized dimensions counted as 1, so that no
// size or index the kernels form overflows int64_t, even for an empty array.
inline constexpr int64_t kElementLimit = int64_t{1} << 62;

// Whether `dims`, zero-sized ones counted as 1, multiply to below kElementLimit.
inline bool BelowElementLimit(ffi::Span<const int64_t> dims) {
  int64_t product = 1;
  for (const int64_t d : dims) {
    if (d > 1 && product > (kElementLimit - 1) / d) return false;
    if (d > 1) product *= d;
  }
  return true;
}

inline ffi::Error CheckElementLimit(const char* platform, const char* name,
                                    ffi::Span<const int64_t> dims) {
  if (BelowElementLimit(dims)) return ffi::Error::Success();
  return InvalidArgument(platform, std::string(name) + " shape " + DimsToString(dims) +
                                       " is too large: the product of its non-zero "
                                       "dimensions must be below 2^62");
}

// Geometry::padding when the axes have different padding modes.
inline constexpr int64_t kPerAxis = -1;

// Sizes of one call. Spatial sizes are (D, H, W) with D = 1 in 2D.
struct Geometry {
  int k = 2;              // spatial rank
  int64_t n = 0, c = 0;   // batch, channels
  int64_t d = 1, h = 1, w = 1;
  int64_t plane = 0;      // d * h * w
  int64_t points = 0;     // output points per batch element
  // The padding mode of every axis, or kPerAxis where they differ; then
  // axis_padding holds each axis's (x, y, z: grid component order).
  int64_t padding = 0;
  int64_t axis_padding[3] = {0, 0, 0};
  bool align_corners = false;
  bool channels_last = false;
  // With a "constant" axis: the fill value of each channel (C values in the
  // kernel's compute dtype), which the kernel adds to the "zeros" sum with the
  // weight of the taps outside; nullptr otherwise.
  const void* fill = nullptr;
};

// Whether some axis of g has the padding mode `code`.
inline bool HasAxisPadding(const Geometry& g, int64_t code) {
  for (int a = 0; a < g.k; ++a) {
    if (g.axis_padding[a] == code) return true;
  }
  return false;
}

// Whether some axis of g is "constant" (the targets that take a fill value).
inline bool HasConstantAxis(const Geometry& g) { return HasAxisPadding(g, 3); }

// Whether `padding` is a valid code of the `padding` attribute: 0 (zeros),
// 1 (border) or 2 (reflection) in version 1 of the targets, also 4 (wrap) in
// version 2, and 3 ("constant") in the targets that take the fill value as
// an operand (`with_fill`: version 2's forward, version 3's CPU backward,
// version 2's fill backward); version 2's backward takes "constant" axes as
// "zeros" (its lowering passed 0), the fill term's gradients computed beside.
inline bool ValidPaddingCode(int64_t padding, bool version1, bool with_fill) {
  return (padding >= 0 && padding <= 2) || (!version1 && padding == 4) ||
         (with_fill && padding == 3);
}

// Checks the `padding` attribute, one code for every axis (version 1: one
// entry) or one per axis, x first (version 2: k entries), and stores it in g.
inline ffi::Error SetPadding(const char* platform, ffi::Span<const int64_t> padding, int k,
                             bool with_fill, Geometry* g) {
  const bool version1 = padding.size() == 1;
  if (!version1 && padding.size() != static_cast<size_t>(k)) {
    return InvalidArgument(platform, "attribute padding must hold one mode per grid component (" +
                                         std::to_string(k) + " for a " + std::to_string(k) +
                                         "D grid), got " + std::to_string(padding.size()));
  }
  for (int a = 0; a < k; ++a) {
    const int64_t code = padding[version1 ? 0 : a];
    if (!ValidPaddingCode(code, version1, with_fill)) {
      return InvalidArgument(platform, std::string("attribute padding") +
                                           (version1 ? "" : "[" + std::to_string(a) + "]") +
                                           " must be 0 (zeros), 1 (border), 2 (reflection)" +
                                           (version1   ? ""
                                            : with_fill ? ", 3 (constant) or 4 (wrap)"
                                                        : " or 4 (wrap)") +
                                           ", got " + std::to_string(code));
    }
    g->axis_padding[a] = code;
  }
  if (k == 2) g->axis_padding[2] = g->axis_padding[1];
  const bool uniform = g->axis_padding[0] == g->axis_padding[1] &&
                       g->axis_padding[1] == g->axis_padding[2];
  g->padding = uniform ? g->axis_padding[0] : kPerAxis;
  return ffi::Error::Success();
}

// Checks that `buf` has dtype `dt` and dims `dims`.
inline ffi::Error CheckShape(const char* platform, const char* name, const ffi::AnyBuffer& buf,
                             ffi::DataType dt, const int64_t* dims, size_t rank) {
  if (buf.element_type() != dt) {
    return InvalidArgument(platform, std::string(name) + " dtype " +
                                         DTypeName(buf.element_type()) +
                                         " differs from input dtype " + DTypeName(dt));
  }
  const auto bd = buf.dimensions();
  bool ok = bd.size() == rank;
  for (size_t i = 0; ok && i < rank; ++i) ok = bd[i] == dims[i];
  if (!ok) {
    return InvalidArgument(platform, std::string(name) + " has shape " + DimsToString(bd) +
                                         ", expected " +
                                         DimsToString(ffi::Span<const int64_t>(dims, rank)));
  }
  return ffi::Error::Success();
}

// Expected output dims for the grid of a geometry; returns the rank.
inline size_t OutputDims(const ffi::AnyBuffer& grid, const Geometry& g, int64_t* dims) {
  const auto gd = grid.dimensions();
  size_t r = 0;
  dims[r++] = g.n;
  if (!g.channels_last) dims[r++] = g.c;
  for (int a = 0; a < g.k; ++a) dims[r++] = gd[1 + a];
  if (g.channels_last) dims[r++] = g.c;
  return r;
}

// Validates input / grid / attributes and `like_output` (named `name`: the
// forward's output or the backward's grad_output), which must have the
// output's shape and the input's dtype; fills the geometry. `padding`: the
// attribute, one code (version 1) or one per axis (version 2; SetPadding).
// `fill`: the fill operand of the targets that take one (C values of the
// input's dtype, read only with a "constant" axis), nullptr for the others.
// The input is given by its dtype `dt` and dims `id` (MakeGeometry: of a buffer).
inline ffi::Error MakeGeometryOf(const char* platform, ffi::DataType dt,
                                 ffi::Span<const int64_t> id, const ffi::AnyBuffer& grid,
                                 const char* name, const ffi::AnyBuffer& like_output,
                                 int64_t interpolation, ffi::Span<const int64_t> padding,
                                 bool align_corners, bool channels_last, Geometry* g,
                                 const ffi::AnyBuffer* fill = nullptr) {
  if (dt != ffi::DataType::F16 && dt != ffi::DataType::BF16 && dt != ffi::DataType::F32 &&
      dt != ffi::DataType::F64) {
    return InvalidArgument(platform, "input has an unsupported dtype; expected float16, "
                                     "bfloat16, float32 or float64");
  }
  if (grid.element_type() != dt) {
    return InvalidArgument(platform, std::string("grid dtype ") +
                                         DTypeName(grid.element_type()) +
                                         " differs from input dtype " + DTypeName(dt));
  }
  if (interpolation < 0 || interpolation > 2) {
    return InvalidArgument(platform, "attribute interpolation must be 0 (bilinear), 1 "
                                     "(nearest) or 2 (bicubic), got " +
                                         std::to_string(interpolation));
  }
  const auto gd = grid.dimensions();
  if (gd.size() != 4 && gd.size() != 5) {
    return InvalidArgument(platform, "grid must have rank 4 (2D) or 5 (3D), got shape " +
                                         DimsToString(gd));
  }
  const int k = static_cast<int>(gd.size()) - 2;
  if (id.size() != gd.size()) {
    return InvalidArgument(platform, "input rank " + std::to_string(id.size()) +
                                         " does not match grid rank " +
                                         std::to_string(gd.size()) + " (input " +
                                         DimsToString(id) + ", grid " + DimsToString(gd) +
                                         ")");
  }
  if (gd[gd.size() - 1] != k) {
    return InvalidArgument(platform, "grid last dimension must be " + std::to_string(k) +
                                         " for a " + std::to_string(k) +
                                         "D grid, got shape " + DimsToString(gd));
  }
  if (id[0] != gd[0]) {
    return InvalidArgument(platform, "input batch size " + std::to_string(id[0]) +
                                         " differs from grid batch size " +
                                         std::to_string(gd[0]));
  }
  if (ffi::Error err = SetPadding(platform, padding, k, fill != nullptr, g); !err.success()) {
    return err;
  }
  g->k = k;
  g->n = id[0];
  g->c = channels_last ? id[id.size() - 1] : id[1];
  g->channels_last = channels_last;
  int64_t od[5];
  const ffi::Span<const int64_t> output_dims(od, OutputDims(grid, *g, od));
  for (const auto& [name, dims] : {std::pair<const char*, ffi::Span<const int64_t>>{"input", id},
                                   {"grid", gd},
                                   {"output", output_dims}}) {
    if (ffi::Error err = CheckElementLimit(platform, name, dims); !err.success()) return err;
  }
  const int64_t first_spatial = channels_last ? 1 : 2;
  int64_t sp[3] = {1, 1, 1};
  for (int a = 0; a < k; ++a) {
    sp[3 - k + a] = id[first_spatial + a];
    if (sp[3 - k + a] <= 0) {
      return InvalidArgument(platform, "input spatial sizes must be positive, got input "
                                       "shape " + DimsToString(id));
    }
  }
  g->d = sp[0];
  g->h = sp[1];
  g->w = sp[2];
  g->plane = sp[0] * sp[1] * sp[2];
  g->points = 1;
  for (int a = 0; a < k; ++a) g->points *= gd[1 + a];
  g->align_corners = align_corners;
  if (fill != nullptr && HasConstantAxis(*g)) {  // without one, fill is not read
    if (ffi::Error err = CheckShape(platform, "fill", *fill, dt, &g->c, 1); !err.success()) {
      return err;
    }
    g->fill = fill->untyped_data();
  }
  return CheckShape(platform, name, like_output, dt, od, output_dims.size());
}

inline ffi::Error MakeGeometry(const char* platform, const ffi::AnyBuffer& input,
                               const ffi::AnyBuffer& grid, const char* name,
                               const ffi::AnyBuffer& like_output, int64_t interpolation,
                               ffi::Span<const int64_t> padding, bool align_corners,
                               bool channels_last, Geometry* g,
                               const ffi::AnyBuffer* fill = nullptr) {
  return MakeGeometryOf(platform, input.element_type(), input.dimensions(), grid, name,
                        like_output, interpolation, padding, align_corners, channels_last, g,
                        fill);
}

// The backward's results (RemainingRets): one per true mask entry, grad_input
// first, then `extra_results` of the platform's own (the CUDA workspace).
// Checks count, dtypes and shapes; fills the data pointers (nullptr for a
// result not asked for).
inline ffi::Error DecodeBackwardResults(const char* platform, ffi::RemainingRets& results,
                                        const ffi::AnyBuffer& input, const ffi::AnyBuffer& grid,
                                        bool input_mask, bool grid_mask, void** gi_ptr,
                                        void** gg_ptr, size_t extra_results = 0) {
  const ffi::DataType dt = input.element_type();
  const size_t expected = (input_mask ? 1 : 0) + (grid_mask ? 1 : 0) + extra_results;
  if (results.size() != expected) {
    return InvalidArgument(platform, "expected " + std::to_string(expected) +
                                         " result(s) for input_mask=" +
                                         (input_mask ? "true" : "false") + " and grid_mask=" +
                                         (grid_mask ? "true" : "false") + ", got " +
                                         std::to_string(results.size()));
  }
  *gi_ptr = nullptr;
  *gg_ptr = nullptr;
  size_t next = 0;
  if (input_mask) {
    auto r = results.get<ffi::AnyBuffer>(next++);
    if (r.has_error()) return InvalidArgument(platform, "grad_input result could not be decoded");
    ffi::AnyBuffer buf = **r;
    const auto idims = input.dimensions();
    if (ffi::Error err = CheckShape(platform, "grad_input", buf, dt, idims.begin(), idims.size());
        !err.success()) {
      return err;
    }
    *gi_ptr = buf.untyped_data();
  }
  if (grid_mask) {
    auto r = results.get<ffi::AnyBuffer>(next++);
    if (r.has_error()) return InvalidArgument(platform, "grad_grid result could not be decoded");
    ffi::AnyBuffer buf = **r;
    const auto gdims = grid.dimensions();
    if (ffi::Error err = CheckShape(platform, "grad_grid", buf, dt, gdims.begin(), gdims.size());
        !err.success()) {
      return err;
    }
    *gg_ptr = buf.untyped_data();
  }
  return ffi::Error::Success();
}

}  // namespace gs_ffi

#endif  // JAX_GRIDSAMPLE_FFI_COMMON_GRID_SAMPLE_VALIDATE_H_
