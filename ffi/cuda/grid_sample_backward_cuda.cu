// XLA FFI CUDA handler: grid_sample backward (grad_input and/or grad_grid).
//
// One thread per (batch element, output point) computes the point's taps once
// and loops over all channels. grad_grid: the thread owns its point's K
// values and sums channel by channel, tap by tap, in a fixed order (no
// atomics, deterministic in both variants).
//
// grad_input, two variants chosen by the `deterministic` attribute:
//  * default (fast): atomicAdd of w * grad_output into grad_input (float32 /
//    float64), or into a float32 accumulator in the workspace that is then
//    cast (float16 / bfloat16: accumulation stays in float32). Summation order
//    is not fixed.
//  * deterministic: no float atomics. Each point writes one record per tap
//    (key = batch * plane + input offset, or a sentinel past the end for an
//    out-of-range tap; value = the record's own index; its weight to a side
//    array). A stable CUB radix sort by key (restricted to the key's bits)
//    groups the records of each input location in increasing record order,
//    i.e. in (point, tap) order; a CSR pass finds each location's segment; a
//    gather pass then sums, for every (location, channel), weight *
//    grad_output over the segment in that order and writes grad_input once.
//    The records hold no channel, so the sort moves N*points*taps pairs
//    whatever C is. The result is bitwise reproducible and independent of
//    launch geometry.
//
// Temporary memory comes from the call's last result, a uint8 workspace that
// XLA allocates like any other buffer (the Python lowering sizes it with
// BackwardWorkspaceBytes, exported by the module). XLA's FFI scratch allocator
// is not used: it can refuse even small requests, and memory owned by the
// call's own buffers stays valid when the call is captured in a CUDA graph.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <type_traits>

#include "../common/ffi_contract.h"
#include "../common/handler_exceptions.h"
#include "backward_workspace.h"
#include "grid_sample_cuda.cuh"
#include "xla/ffi/api/ffi.h"

namespace gs_cuda {
namespace {

template <typename T>
__device__ __forceinline__ void AtomicAddCompute(T* addr, T v) {
  atomicAdd(addr, v);  // float (all archs) and double (sm_60+)
}

// What the per-point kernel does for grad_input.
enum GradInputMode : int { kAtomic = 1, kRecord = 2 };

// Per-point backward. kAtomic: atomics into `gi_acc`, a compute-type
// accumulation buffer in the input's layout, or nothing for grad_input when
// it is null (grid gradient only; a uniform branch, one kernel fewer to
// compile). kRecord: keys / values / weights of N*points*kTaps records.
// `grad_grid` may be null.
template <typename Fmt, int K, int kInterp, typename I, int kGiMode, typename Key>
__global__ void __launch_bounds__(kThreads)
    BackwardPointKernel(Params<I> p, const typename Fmt::Storage* __restrict__ grad_out,
                        const typename Fmt::Storage* __restrict__ input,
                        const typename Fmt::Storage* __restrict__ grid,
                        typename Fmt::Storage* __restrict__ grad_grid,
                        typename Fmt::Compute* __restrict__ gi_acc, Key* __restrict__ keys,
                        I* __restrict__ values, typename Fmt::Compute* __restrict__ weights,
                        Key sentinel) {
  using T = typename Fmt::Compute;
  using Taps = PointTaps<T, K, kInterp, I>;
  constexpr bool kGridGrad = kInterp != gs::kNearest;
  const bool need_gg = kGridGrad && grad_grid != nullptr;
  const bool need_gi = gi_acc != nullptr;
  const I total = p.n * p.points;
  for (I pt = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; pt < total;
       pt += static_cast<I>(gridDim.x) * blockDim.x) {
    const I n = pt / p.points;
    const I pnt = pt - n * p.points;
    T coords[K];
    LoadCoords<Fmt, K>(grid, pt, coords);
    Taps taps;
    taps.Compute(coords, p);
    if constexpr (kGiMode == kRecord) {
      const I base = pt * Taps::kTaps;
      const Key nbase = static_cast<Key>(n) * static_cast<Key>(p.plane);
      taps.ForEachTap(p, [&](int t, bool valid, I off, T w, int, int, int) {
        keys[base + t] = valid ? nbase + static_cast<Key>(off) : sentinel;
        values[base + t] = base + t;
        weights[base + t] = w;
      });
    }
    if (!need_gg && !(kGiMode == kAtomic && need_gi)) continue;
    T gacc[K];
#pragma unroll
    for (int a = 0; a < K; ++a) gacc[a] = T(0);
    const typename Fmt::Storage* src = input + n * p.in_sn;
    const typename Fmt::Storage* go = grad_out + n * p.out_sn + pnt * p.out_sp;
    T* gi = need_gi ? gi_acc + n * p.in_sn : nullptr;
    for (I c = 0; c < p.c; ++c) {
      const T gv = Fmt::Load(go[c * p.out_sc]);
      const typename Fmt::Storage* src_c = src + c * p.in_sc;
      taps.ForEachTap(p, [&](int, bool valid, I off, T w, int i, int j, int l) {
        if (!valid) return;
        if constexpr (kGiMode == kAtomic) {
          if (need_gi) AtomicAddCompute(gi + c * p.in_sc + off * p.in_ss, w * gv);
        }
        if (kGridGrad && need_gg) {
          const T prod = gv * Fmt::Load(src_c[off * p.in_ss]);
          gacc[0] += prod * (taps.x.dw[i] * taps.y.w[j] * taps.z.w[l]);
          gacc[1] += prod * (taps.x.w[i] * taps.y.dw[j] * taps.z.w[l]);
          if constexpr (K == 3) gacc[K - 1] += prod * (taps.x.w[i] * taps.y.w[j] * taps.z.dw[l]);
        }
      });
    }
    if (need_gg) {
      grad_grid[pt * K + 0] = Fmt::Store(gacc[0] * taps.x.dmult);
      grad_grid[pt * K + 1] = Fmt::Store(gacc[1] * taps.y.dmult);
      if constexpr (K == 3) grad_grid[pt * K + K - 1] = Fmt::Store(gacc[K - 1] * taps.z.dmult);
    }
  }
}

// Casts the float32 accumulation buffer to the half-type grad_input.
template <typename Fmt, typename I>
__global__ void __launch_bounds__(kThreads)
    CastKernel(I count, const typename Fmt::Compute* __restrict__ src,
               typename Fmt::Storage* __restrict__ dst) {
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    dst[i] = Fmt::Store(src[i]);
  }
}

// offsets[k] = first sorted position whose key is >= k, for k in [0, locations];
// sorted keys end with sentinels == locations. One thread per position m in
// [0, count] (position count stands for a final key past every location).
template <typename I, typename Key>
__global__ void __launch_bounds__(kThreads)
    SegmentOffsetsKernel(I count, I locations, const Key* __restrict__ sorted_keys,
                         I* __restrict__ offsets) {
  for (I m = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; m <= count;
       m += static_cast<I>(gridDim.x) * blockDim.x) {
    const I prev = m == 0 ? I(-1) : static_cast<I>(sorted_keys[m - 1]);
    const I cur = m == count ? locations : static_cast<I>(sorted_keys[m]);
    const I hi = cur < locations ? cur : locations;
    for (I k = prev + 1; k <= hi; ++k) offsets[k] = m;
  }
}

// grad_input[n, c, s] = sum over the records of location n*plane + s, in
// sorted order, of weight * grad_output[n, c, point of the record]. One thread
// per grad_input element, in memory order.
template <typename Fmt, typename I>
__global__ void __launch_bounds__(kThreads)
    GatherGradInputKernel(Params<I> p, bool channels_last, int taps,
                          const I* __restrict__ offsets, const I* __restrict__ sorted_values,
                          const typename Fmt::Compute* __restrict__ weights,
                          const typename Fmt::Storage* __restrict__ grad_out,
                          typename Fmt::Storage* __restrict__ grad_input) {
  using T = typename Fmt::Compute;
  const I total = p.n * p.c * p.plane;
  for (I idx = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<I>(gridDim.x) * blockDim.x) {
    I n, c, s;
    if (channels_last) {
      c = idx % p.c;
      const I loc = idx / p.c;
      n = loc / p.plane;
      s = loc - n * p.plane;
    } else {
      s = idx % p.plane;
      const I nc = idx / p.plane;
      n = nc / p.c;
      c = nc - n * p.c;
    }
    const I loc = n * p.plane + s;
    const typename Fmt::Storage* go = grad_out + n * p.out_sn + c * p.out_sc;
    const I pt0 = n * p.points;
    T sum = T(0);
    for (I m = offsets[loc], end = offsets[loc + 1]; m < end; ++m) {
      const I rec = sorted_values[m];
      const I pnt = rec / taps - pt0;
      sum += weights[rec] * Fmt::Load(go[pnt * p.out_sp]);
    }
    grad_input[idx] = Fmt::Store(sum);
  }
}

// Bump allocator over the workspace.
struct Carve {
  char* base;
  size_t used = 0;
  template <typename U>
  U* Take(size_t count) {
    used = (used + 255) & ~size_t{255};
    U* ptr = reinterpret_cast<U*>(base + used);
    used += count * sizeof(U);
    return ptr;
  }
};

inline size_t Aligned(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

inline int BitsFor(uint64_t v) {  // bits needed to represent v
  int b = 0;
  while (b < 64 && (v >> b) != 0) ++b;
  return std::max(b, 1);
}

// Whether a backward call needs 64-bit indices: any linear index of a tensor,
// of the grid-stride loops or of the deterministic variant's tap records
// past int32.
inline bool BackwardUses64(int64_t n, int64_t c, int64_t plane, int64_t points, int k,
                           int64_t taps) {
  const int64_t stride = int64_t{kThreads} * (1 << 20);
  const int64_t all_points = n * points;
  return !FitsInt32(n * c * plane + stride) || !FitsInt32(n * c * points) ||
         !FitsInt32(all_points * k) || !FitsInt32(all_points * taps + stride) ||
         !FitsInt32(all_points + stride);
}

// Workspace of one call, with index type I and compute type T: where each
// piece starts (offsets from the workspace base) and the bytes in all.
template <typename I, typename T>
struct WorkspaceLayout {
  using Key = std::conditional_t<std::is_same_v<I, int32_t>, uint32_t, uint64_t>;
  int64_t records = 0, locations = 0;
  int end_bit = 1;
  size_t sort_bytes = 0;
  size_t total = 0;

  // The sizes for grad_input of gi_count elements (0: no grad_input to
  // compute). Fails only when cub's size query does.
  cudaError_t Plan(int64_t gi_count, int64_t all_points, int64_t taps, int64_t n_plane,
                   bool half_storage, bool deterministic) {
    total = 0;
    if (gi_count == 0 || all_points == 0) return cudaSuccess;
    if (!deterministic) {
      if (half_storage) total = Aligned(static_cast<size_t>(gi_count) * sizeof(T));
      return cudaSuccess;
    }
    records = all_points * taps;
    locations = n_plane;  // also the sentinel key
    end_bit = BitsFor(static_cast<uint64_t>(locations));
    const cudaError_t err = cub::DeviceRadixSort::SortPairs(
        nullptr, sort_bytes, static_cast<const Key*>(nullptr), static_cast<Key*>(nullptr),
        static_cast<const I*>(nullptr), static_cast<I*>(nullptr), static_cast<I>(records), 0,
        end_bit, cudaStream_t{0});
    if (err != cudaSuccess) return err;
    const size_t n_rec = static_cast<size_t>(records);
    total = 2 * Aligned(n_rec * sizeof(Key)) + 2 * Aligned(n_rec * sizeof(I)) +
            Aligned(n_rec * sizeof(T)) + Aligned(static_cast<size_t>(locations + 1) * sizeof(I)) +
            Aligned(sort_bytes) + 256;
    return cudaSuccess;
  }
};

template <typename Fmt, int K, int kInterp, typename I>
ffi::Error BackwardTyped(cudaStream_t stream, void* workspace, size_t workspace_bytes,
                         const gs_ffi::Geometry& g, bool deterministic,
                         const typename Fmt::Storage* grad_out,
                         const typename Fmt::Storage* input, const typename Fmt::Storage* grid,
                         typename Fmt::Storage* grad_input, typename Fmt::Storage* grad_grid) {
  using S = typename Fmt::Storage;
  using T = typename Fmt::Compute;
  using Key = std::conditional_t<std::is_same_v<I, int32_t>, uint32_t, uint64_t>;
  constexpr int kTaps = PointTaps<T, K, kInterp, I>::kTaps;
  const Params<I> p = MakeParams<I>(g);
  const int64_t gi_count = g.n * g.c * g.plane;
  const int64_t points = g.n * g.points;
  const bool kNearestMode = kInterp == gs::kNearest;

  if (grad_grid != nullptr && (kNearestMode || g.c == 0 || points == 0)) {
    // Nearest: the grid gradient is exactly 0. No channels: an empty sum.
    if (ffi::Error err = CudaCall(
            cudaMemsetAsync(grad_grid, 0, static_cast<size_t>(points * g.k) * sizeof(S), stream),
            "cudaMemsetAsync(grad_grid)");
        !err.success()) {
      return err;
    }
    if (kNearestMode || g.c == 0) grad_grid = nullptr;
  }
  if (grad_input != nullptr && (points == 0 || g.c == 0 || gi_count == 0)) {
    if (gi_count > 0) {
      if (ffi::Error err = CudaCall(cudaMemsetAsync(grad_input, 0,
                                                    static_cast<size_t>(gi_count) * sizeof(S),
                                                    stream),
                                    "cudaMemsetAsync(grad_input)");
          !err.success()) {
        return err;
      }
    }
    grad_input = nullptr;
  }
  if (points == 0) return ffi::Error::Success();
  if (grad_input == nullptr && grad_grid == nullptr) return ffi::Error::Success();
  const unsigned int point_blocks = NumBlocks(points);
  WorkspaceLayout<I, T> layout;
  if (ffi::Error err = CudaCall(layout.Plan(grad_input ? gi_count : 0, points, kTaps,
                                            g.n * g.plane, !std::is_same_v<S, T>, deterministic),
                                "cub::DeviceRadixSort::SortPairs (size query)");
      !err.success()) {
    return err;
  }
  if (workspace_bytes < layout.total) {
    return InvalidArgument("the workspace result has " + std::to_string(workspace_bytes) +
                           " bytes; this call needs " + std::to_string(layout.total));
  }

  if (grad_input == nullptr) {
    BackwardPointKernel<Fmt, K, kInterp, I, kAtomic, Key>
        <<<point_blocks, kThreads, 0, stream>>>(p, grad_out, input, grid, grad_grid, nullptr,
                                                nullptr, nullptr, nullptr, Key(0));
    return LastCudaError("backward kernel launch");
  }

  if (!deterministic) {
    T* acc = reinterpret_cast<T*>(grad_input);
    if constexpr (!std::is_same_v<S, T>) acc = reinterpret_cast<T*>(workspace);
    if (ffi::Error err = CudaCall(
            cudaMemsetAsync(acc, 0, static_cast<size_t>(gi_count) * sizeof(T), stream),
            "cudaMemsetAsync(grad_input accumulator)");
        !err.success()) {
      return err;
    }
    BackwardPointKernel<Fmt, K, kInterp, I, kAtomic, Key>
        <<<point_blocks, kThreads, 0, stream>>>(p, grad_out, input, grid, grad_grid, acc,
                                                nullptr, nullptr, nullptr, Key(0));
    if (ffi::Error err = LastCudaError("backward kernel launch"); !err.success()) return err;
    if constexpr (!std::is_same_v<S, T>) {
      CastKernel<Fmt, I><<<NumBlocks(gi_count), kThreads, 0, stream>>>(
          static_cast<I>(gi_count), acc, grad_input);
      return LastCudaError("grad_input cast kernel launch");
    }
    return ffi::Error::Success();
  }

  // Deterministic: records, sort, segment offsets, ordered gather.
  const int64_t records = layout.records;
  const int64_t locations = layout.locations;
  const Key sentinel = static_cast<Key>(locations);
  const int end_bit = layout.end_bit;
  size_t sort_bytes = layout.sort_bytes;
  const size_t n_rec = static_cast<size_t>(records);
  Carve carve{reinterpret_cast<char*>(workspace)};
  Key* keys_in = carve.Take<Key>(n_rec);
  Key* keys_out = carve.Take<Key>(n_rec);
  I* vals_in = carve.Take<I>(n_rec);
  I* vals_out = carve.Take<I>(n_rec);
  T* weights = carve.Take<T>(n_rec);
  I* offsets = carve.Take<I>(static_cast<size_t>(locations + 1));
  void* sort_tmp = carve.Take<char>(sort_bytes);

  BackwardPointKernel<Fmt, K, kInterp, I, kRecord, Key>
      <<<point_blocks, kThreads, 0, stream>>>(p, grad_out, input, grid, grad_grid, nullptr,
                                              keys_in, vals_in, weights, sentinel);
  if (ffi::Error err = LastCudaError("backward record kernel launch"); !err.success()) return err;
  if (ffi::Error err = CudaCall(
          cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, keys_in, keys_out, vals_in,
                                          vals_out, static_cast<I>(records), 0, end_bit, stream),
          "cub::DeviceRadixSort::SortPairs");
      !err.success()) {
    return err;
  }
  if (ffi::Error err = LastCudaError("radix sort"); !err.success()) return err;
  SegmentOffsetsKernel<I, Key><<<NumBlocks(records + 1), kThreads, 0, stream>>>(
      static_cast<I>(records), static_cast<I>(locations), keys_out, offsets);
  if (ffi::Error err = LastCudaError("segment offsets kernel launch"); !err.success()) return err;
  GatherGradInputKernel<Fmt, I><<<NumBlocks(gi_count), kThreads, 0, stream>>>(
      p, g.channels_last, kTaps, offsets, vals_out, weights, grad_out, grad_input);
  return LastCudaError("grad_input gather kernel launch");
}

// `padding`: one code for every axis (version 1) or one per axis (version 2).
ffi::Error BackwardImpl(cudaStream_t stream, ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                        ffi::AnyBuffer grid, ffi::RemainingRets results, int64_t interpolation,
                        ffi::Span<const int64_t> padding, bool align_corners, bool channels_last,
                        bool input_mask, bool grid_mask, bool deterministic) {
  gs_ffi::Geometry g;
  if (ffi::Error err = gs_ffi::MakeGeometry(kPlatform, input, grid, "grad_output", grad_output,
                                            interpolation, padding, align_corners, channels_last,
                                            &g);
      !err.success()) {
    return err;
  }
  const ffi::DataType dt = input.element_type();
  void* gi_ptr = nullptr;
  void* gg_ptr = nullptr;
  if (ffi::Error err = gs_ffi::DecodeBackwardResults(kPlatform, results, input, grid, input_mask,
                                                     grid_mask, &gi_ptr, &gg_ptr,
                                                     /*extra_results=*/1);
      !err.success()) {
    return err;
  }
  auto ws = results.get<ffi::AnyBuffer>(results.size() - 1);
  if (ws.has_error()) return InvalidArgument("workspace result could not be decoded");
  ffi::AnyBuffer workspace = **ws;
  if (workspace.element_type() != ffi::DataType::U8 || workspace.dimensions().size() != 1) {
    return InvalidArgument("the last result (workspace) must be a rank-1 uint8 buffer");
  }
  const bool use64 = BackwardUses64(g.n, g.c, g.plane, g.points, g.k,
                                    gs::TapsPerPoint(g.k, static_cast<int>(interpolation)));
  return Dispatch(dt, g.k, interpolation, use64,
                  [&](auto fmt, auto k, auto interp, auto index) -> ffi::Error {
                    using Fmt = decltype(fmt);
                    using S = typename Fmt::Storage;
                    return BackwardTyped<Fmt, decltype(k)::value, decltype(interp)::value,
                                         decltype(index)>(
                        stream, workspace.untyped_data(), workspace.size_bytes(), g,
                        deterministic,
                        reinterpret_cast<const S*>(grad_output.untyped_data()),
                        reinterpret_cast<const S*>(input.untyped_data()),
                        reinterpret_cast<const S*>(grid.untyped_data()),
                        reinterpret_cast<S*>(gi_ptr), reinterpret_cast<S*>(gg_ptr));
                  });
}

// Version 1: one padding code for every axis.
ffi::Error BackwardImplV1(cudaStream_t stream, ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                          ffi::AnyBuffer grid, ffi::RemainingRets results, int64_t interpolation,
                          int64_t padding, bool align_corners, bool channels_last,
                          bool input_mask, bool grid_mask, bool deterministic) {
  return BackwardImpl(stream, grad_output, input, grid, results, interpolation, {&padding, 1},
                      align_corners, channels_last, input_mask, grid_mask, deterministic);
}

}  // namespace

int64_t BackwardWorkspaceBytes(int k, int64_t n, int64_t c, int64_t plane, int64_t points,
                               int64_t interpolation, int storage_bytes, bool input_mask,
                               bool deterministic) {
  if ((k != 2 && k != 3) || interpolation < 0 || interpolation > 2 || n < 0 || c < 0 ||
      plane < 0 || points < 0 || (storage_bytes != 2 && storage_bytes != 4 && storage_bytes != 8)) {
    return -1;
  }
  const int64_t gi_count = input_mask ? n * c * plane : 0;
  const int64_t taps = gs::TapsPerPoint(k, static_cast<int>(interpolation));
  auto plan = [&](auto index, auto compute) -> int64_t {
    WorkspaceLayout<decltype(index), decltype(compute)> layout;
    if (layout.Plan(gi_count, n * points, taps, n * plane, storage_bytes == 2, deterministic) !=
        cudaSuccess) {
      cudaGetLastError();  // leave no sticky error behind
      return -1;
    }
    return static_cast<int64_t>(layout.total);
  };
  const bool use64 = BackwardUses64(n, c, plane, points, k, taps);
  if (storage_bytes == 8) return use64 ? plan(int64_t{}, double{}) : plan(int32_t{}, double{});
  return use64 ? plan(int64_t{}, float{}) : plan(int32_t{}, float{});
}

}  // namespace gs_cuda

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleBackwardCuda,
    (gs_ffi::NoExceptions<gs_cuda::kPlatform, gs_cuda::BackwardImpl>::Call),
    gs_ffi::BindBackward<gs_ffi::PaddingV2>(
        xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<cudaStream_t>>())
        .Attr<bool>("deterministic"),
    {xla::ffi::Traits::kCmdBufferCompatible});
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleBackwardCudaV1,
    (gs_ffi::NoExceptions<gs_cuda::kPlatform, gs_cuda::BackwardImplV1>::Call),
    gs_ffi::BindBackward<gs_ffi::PaddingV1>(
        xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<cudaStream_t>>())
        .Attr<bool>("deterministic"),
    {xla::ffi::Traits::kCmdBufferCompatible});
