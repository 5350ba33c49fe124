// A simulated CANN aclnn library for the tests: the symbols the Ascend
// handlers dlopen (aclCreateTensor & co., the eight grid sampler entry points,
// the aclrt* runtime calls, aclGetRecentErrMsg and the determinism options),
// executing on host memory in float64.
//
// It follows CANN's API pages for aclnnGridSampler2D/3D[Backward] and the
// ops-cv sources of those entry points (image/grid_sample/op_api/,
// image/grid_sampler{2,3}_d_grad/op_host/op_api/), including where they are
// unhelpful: ACLNN_ERR_PARAM_NULLPTR 161001 for null tensors,
// ACLNN_ERR_PARAM_INVALID 161002 for invalid parameters, formats outside the
// pages' lists and the per-chip dtype and mode rejections; success with
// nothing computed or written for a null or all-false outputMask and for
// empty tensors (ops-cv returns early); single-use executors; a current
// context for every call (ACL_ERROR_RT_CONTEXT_NULL 107002 without one) and
// live streams from aclrtCreateStream (or null, ACL's default stream) for
// launches, which its log names. It has no guard of its own for non-finite
// coordinates. It records every call. Test knobs (extern "C", prefixed sim_):
//   sim_get_log() / sim_clear_log()   the call log, one line per call
//   sim_fail_next(fn, code)           the next call of fn returns code (null for creators)
//   sim_live(kind)                    live "tensor", "bool_array", "executor", "malloc"
//   sim_set_workspace_size(bytes)     what GetWorkspaceSize reports (default 256)
//   sim_get/set_deterministic()       ACL_OPT_DETERMINISTIC of the context (set: both)
//   sim_get_process_deterministic()   ... of the process
//   sim_set_context_current(bool)     whether a context is current (one for the process:
//                                     the tests cannot reach the thread XLA runs a call on)
//   sim_set_soc(name)                 what aclrtGetSocName returns (default "Ascend910B2")
//   sim_set_output_bias(value)        added to every value a launch writes (a wrong kernel)
//   sim_reset()                       all of the above back to the start (live objects kept)
//
// Build: c++ -std=c++17 -O1 -shared -fPIC aclnn_sim.cc -o libaclnn_sim.so
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr int32_t kOk = 0;
constexpr int32_t kNullptr = 161001;
constexpr int32_t kInvalid = 161002;
constexpr int32_t kRuntimeError = 361001;     // ACLNN_ERR_RUNTIME_ERROR
constexpr int32_t kRtParamInvalid = 107000;  // ACL_ERROR_RT_PARAM_INVALID (aclrt* calls)
constexpr int32_t kRtContextNull = 107002;   // ACL_ERROR_RT_CONTEXT_NULL

constexpr int32_t kFloat = 0, kFloat16 = 1, kDouble = 11, kBf16 = 27;
constexpr int32_t kND = 2, kNCHW = 0, kNDHWC = 27, kNCDHW = 30;

std::recursive_mutex g_mu;
std::string g_log;
std::string g_err;
std::string g_log_copy;
std::map<std::string, int32_t> g_fail;
uint64_t g_workspace_size = 256;
int64_t g_deterministic = 0;          // ACL_OPT_DETERMINISTIC of the context
int64_t g_process_deterministic = 0;  // ... of the process (aclrtSetSysParamOpt)
// The ACL context current "on the calling thread". The tests cannot reach the
// thread XLA runs a call on, so the simulator keeps one for the process.
bool g_context_current = true;
int g_context_tag = 0;  // what aclrtGetCurrentContext hands out
std::string g_soc = "Ascend910B2";
double g_output_bias = 0;  // added to every value a launch writes (a wrong kernel, for tests)

}  // namespace

extern "C" {
struct aclTensor {
  std::vector<int64_t> view, strides, storage;
  int32_t dtype;
  int64_t offset;
  int32_t format;
  void* data;
  int id;
};
struct aclBoolArray {
  std::vector<bool> values;
  int id;
};
struct aclOpExecutor {
  int kind;  // 0 fwd2d, 1 fwd3d, 2 bwd2d, 3 bwd3d
  const aclTensor *a, *b, *c;  // fwd: input, grid, -; bwd: grad_output, input, grid
  aclTensor *out0, *out1;      // fwd: out, -; bwd: input_grad, grid_grad
  int64_t interpolation, padding;
  bool align_corners;
  bool mask[2];
  bool compute;
  uint64_t workspace;
  int64_t deterministic;
  int id;
};
}

namespace {

std::set<const aclTensor*> g_tensors;
std::set<const aclBoolArray*> g_arrays;
std::set<const aclOpExecutor*> g_executors;
std::set<void*> g_mallocs;
std::map<const void*, int> g_streams;  // live streams from aclrtCreateStream -> id
int g_next_id = 1;

// "S<id>" for a live stream, "default" for null (ACL's default stream),
// "invalid" for anything else.
std::string StreamDesc(const void* stream) {
  if (stream == nullptr) return "default";
  auto it = g_streams.find(stream);
  return it == g_streams.end() ? "invalid" : "S" + std::to_string(it->second);
}

bool StreamUsable(const void* stream) { return stream == nullptr || g_streams.count(stream); }

void Log(const std::string& line) { g_log += line + "\n"; }

int32_t Fail(int32_t code, const std::string& msg) {
  g_err = "EZ9999: [aclnn sim] " + msg;
  return code;
}

// The injected failure for fn, if any (consumed).
bool Injected(const char* fn, int32_t* code) {
  auto it = g_fail.find(fn);
  if (it == g_fail.end()) return false;
  *code = it->second;
  g_fail.erase(it);
  g_err = std::string("EZ9999: [aclnn sim] injected failure of ") + fn + " (" +
          std::to_string(*code) + ")";
  return true;
}

std::string Dims(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

std::string Desc(const aclTensor* t) {
  if (t == nullptr) return "null";
  return "T" + std::to_string(t->id) + Dims(t->view) + "/dt" + std::to_string(t->dtype) + "/f" +
         std::to_string(t->format);
}

bool ValidDtype(int32_t dt) {
  return dt == kFloat || dt == kFloat16 || dt == kDouble || dt == kBf16;
}

size_t ElemSize(int32_t dt) { return dt == kDouble ? 8 : dt == kFloat ? 4 : 2; }

int64_t Numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// ---- element access (host memory, strided) ----

double HalfToDouble(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(mant, -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(mant + 1024, exp - 25);
  return sign ? -v : v;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (ax < 0x38800000u) {  // subnormal half or zero: round to multiple of 2^-24
    const float m = std::nearbyint(std::fabs(f) * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(m));
  }
  const uint32_t round = ax + 0xfffu + ((ax >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((round - 0x38000000u) >> 13));
}

double Bf16ToDouble(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

char* ElemPtr(const aclTensor* t, const int64_t* idx) {
  int64_t off = t->offset;
  for (size_t i = 0; i < t->view.size(); ++i) off += idx[i] * t->strides[i];
  return static_cast<char*>(t->data) + off * static_cast<int64_t>(ElemSize(t->dtype));
}

double Read(const aclTensor* t, std::initializer_list<int64_t> idx) {
  const char* p = ElemPtr(t, idx.begin());
  switch (t->dtype) {
    case kDouble: { double v; std::memcpy(&v, p, 8); return v; }
    case kFloat: { float v; std::memcpy(&v, p, 4); return v; }
    case kFloat16: { uint16_t v; std::memcpy(&v, p, 2); return HalfToDouble(v); }
    default: { uint16_t v; std::memcpy(&v, p, 2); return Bf16ToDouble(v); }
  }
}

void Write(const aclTensor* t, std::initializer_list<int64_t> idx, double value) {
  char* p = ElemPtr(t, idx.begin());
  switch (t->dtype) {
    case kDouble: std::memcpy(p, &value, 8); break;
    case kFloat: { float v = static_cast<float>(value); std::memcpy(p, &v, 4); break; }
    case kFloat16: { uint16_t v = FloatToHalf(static_cast<float>(value)); std::memcpy(p, &v, 2); break; }
    default: { uint16_t v = FloatToBf16(static_cast<float>(value)); std::memcpy(p, &v, 2); break; }
  }
}

// ---- the sampler math (docs/semantics.md), in float64 ----

struct Axis {  // one spatial axis of one output point
  double idx[4], w[4], dw[4];
  int taps;
  double dcoord;  // d(padded coordinate)/d(grid value), times dw gives the grid gradient
};

double Clip(double u, double s, double* d) {
  if (u <= 0) { *d = 0; return 0; }
  if (u >= s - 1) { *d = 0; return s - 1; }
  return u;
}

double Reflect(double u, int64_t s, bool ac, double* d) {
  double lo = ac ? 0.0 : -0.5, hi = ac ? s - 1.0 : s - 0.5;
  if (ac && s == 1) { *d = 0; return 0; }
  const double span = hi - lo, a = std::fabs(u - lo);
  const double flips = std::floor(a / span), extra = std::fmod(a, span);
  double sign = u - lo >= 0 ? 1.0 : -1.0;
  double r;
  if (std::fmod(flips, 2.0) == 0) { r = lo + extra; } else { r = hi - extra; sign = -sign; }
  double dc = 1;
  r = Clip(r, static_cast<double>(s), &dc);
  *d = sign * dc;
  return r;
}

double PadTap(double x, int64_t s, int64_t padding, bool ac) {
  double d;
  if (padding == 1) return Clip(x, static_cast<double>(s), &d);
  if (padding == 2) return Reflect(x, s, ac, &d);
  return x;
}

double Cubic1(double x) { const double A = -0.75; return ((A + 2) * x - (A + 3)) * x * x + 1; }
double Cubic2(double x) { const double A = -0.75; return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }
double DCubic1(double x) { const double A = -0.75; return (3 * (A + 2) * x - 2 * (A + 3)) * x; }
double DCubic2(double x) { const double A = -0.75; return (3 * A * x - 10 * A) * x + 8 * A; }

Axis MakeAxis(double c, int64_t s, int64_t interpolation, int64_t padding, bool ac) {
  Axis ax{};
  double u = ac ? (c + 1) / 2 * (s - 1) : ((c + 1) * s - 1) / 2;
  double du = ac ? (s - 1) / 2.0 : s / 2.0;
  // No guard for non-finite or huge coordinates: CANN documents none. Taps
  // are compared as doubles (InRange) before any conversion to an integer, so
  // NaN and out-of-range positions read nothing rather than out of bounds.
  if (interpolation == 2) {
    const double x0 = std::floor(u), t = u - x0;
    const double w[4] = {Cubic2(t + 1), Cubic1(t), Cubic1(1 - t), Cubic2(2 - t)};
    const double dw[4] = {DCubic2(t + 1), DCubic1(t), -DCubic1(1 - t), -DCubic2(2 - t)};
    ax.taps = 4;
    for (int i = 0; i < 4; ++i) {
      ax.idx[i] = PadTap(x0 - 1 + i, s, padding, ac);
      ax.w[i] = w[i];
      ax.dw[i] = dw[i];
    }
    ax.dcoord = du;
    return ax;
  }
  double dpad = 1;
  if (padding == 1) u = Clip(u, static_cast<double>(s), &dpad);
  if (padding == 2) u = Reflect(u, s, ac, &dpad);
  ax.dcoord = du * dpad;
  if (interpolation == 1) {
    ax.taps = 1;
    ax.idx[0] = std::nearbyint(u);
    ax.w[0] = 1;
    ax.dw[0] = 0;
    return ax;
  }
  const double x0 = std::floor(u), t = u - x0;
  ax.taps = 2;
  ax.idx[0] = x0; ax.w[0] = 1 - t; ax.dw[0] = -1;
  ax.idx[1] = x0 + 1; ax.w[1] = t; ax.dw[1] = 1;
  return ax;
}

bool InRange(double i, int64_t s) { return i >= 0 && i <= s - 1; }

// Runs forward (go == nullptr) or backward over every output point.
// Index convention: feature maps (N, C, D, H, W) with D = 1 in 2D; grid
// (N, Do, Ho, Wo, k).
void Run(const aclOpExecutor& e) {
  const bool backward = e.kind >= 2;
  const int k = (e.kind % 2) ? 3 : 2;
  const aclTensor* input = backward ? e.b : e.a;
  const aclTensor* grid = backward ? e.c : e.b;
  const aclTensor* go = backward ? e.a : nullptr;
  const aclTensor* out = backward ? nullptr : e.out0;
  const aclTensor* gin = (backward && e.mask[0]) ? e.out0 : nullptr;
  const aclTensor* ggrid = (backward && e.mask[1]) ? e.out1 : nullptr;
  const auto& iv = input->view;
  const auto& gv = grid->view;
  const int64_t n = iv[0], c = iv[1];
  const int64_t in_d = k == 3 ? iv[2] : 1, in_h = iv[k], in_w = iv[k + 1];
  const int64_t o_d = k == 3 ? gv[1] : 1, o_h = gv[k - 1], o_w = gv[k];
  auto fidx = [&](const aclTensor* t, int64_t b, int64_t ch, int64_t z, int64_t y, int64_t x,
                  double* v, bool write, double value) {
    if (k == 3) {
      if (write) Write(t, {b, ch, z, y, x}, value); else *v = Read(t, {b, ch, z, y, x});
    } else {
      if (write) Write(t, {b, ch, y, x}, value); else *v = Read(t, {b, ch, y, x});
    }
  };
  auto gidx = [&](const aclTensor* t, int64_t b, int64_t z, int64_t y, int64_t x, int64_t a,
                  double* v, bool write, double value) {
    if (k == 3) {
      if (write) Write(t, {b, z, y, x, a}, value); else *v = Read(t, {b, z, y, x, a});
    } else {
      if (write) Write(t, {b, y, x, a}, value); else *v = Read(t, {b, y, x, a});
    }
  };
  // grad_input accumulates in float64 and is written once at the end.
  std::vector<double> gin_acc(gin ? static_cast<size_t>(n * c * in_d * in_h * in_w) : 0, 0.0);
  const int64_t sizes[3] = {in_w, in_h, in_d};
  for (int64_t b = 0; b < n; ++b)
    for (int64_t z = 0; z < o_d; ++z)
      for (int64_t y = 0; y < o_h; ++y)
        for (int64_t x = 0; x < o_w; ++x) {
          Axis ax[3];
          for (int a = 0; a < k; ++a) {
            double coord;
            gidx(grid, b, z, y, x, a, &coord, false, 0);
            ax[a] = MakeAxis(coord, sizes[a], e.interpolation, e.padding, e.align_corners);
          }
          if (k == 2) { ax[2] = Axis{}; ax[2].taps = 1; ax[2].w[0] = 1; ax[2].dcoord = 0; }
          double ggrad[3] = {0, 0, 0};
          for (int64_t ch = 0; ch < c; ++ch) {
            double acc = 0, g = 0;
            if (go) {
              if (k == 3) g = Read(go, {b, ch, z, y, x}); else g = Read(go, {b, ch, y, x});
            }
            for (int tz = 0; tz < ax[2].taps; ++tz)
              for (int ty = 0; ty < ax[1].taps; ++ty)
                for (int tx = 0; tx < ax[0].taps; ++tx) {
                  const double ix = ax[0].idx[tx], iy = ax[1].idx[ty], iz = ax[2].idx[tz];
                  if (!InRange(ix, in_w) || !InRange(iy, in_h) || !InRange(iz, in_d)) continue;
                  const int64_t jx = static_cast<int64_t>(ix), jy = static_cast<int64_t>(iy),
                                jz = static_cast<int64_t>(iz);
                  const double w = ax[0].w[tx] * ax[1].w[ty] * ax[2].w[tz];
                  if (!go) {
                    double v;
                    fidx(input, b, ch, jz, jy, jx, &v, false, 0);
                    acc += w * v;
                    continue;
                  }
                  if (gin) {
                    gin_acc[static_cast<size_t>((((b * c + ch) * in_d + jz) * in_h + jy) * in_w + jx)] += g * w;
                  }
                  if (ggrid) {
                    double v;
                    fidx(input, b, ch, jz, jy, jx, &v, false, 0);
                    ggrad[0] += g * v * ax[0].dw[tx] * ax[1].w[ty] * ax[2].w[tz];
                    ggrad[1] += g * v * ax[0].w[tx] * ax[1].dw[ty] * ax[2].w[tz];
                    if (k == 3) ggrad[2] += g * v * ax[0].w[tx] * ax[1].w[ty] * ax[2].dw[tz];
                  }
                }
            if (out) fidx(out, b, ch, z, y, x, nullptr, true, acc + g_output_bias);
          }
          if (ggrid) {
            for (int a = 0; a < k; ++a) {
              gidx(ggrid, b, z, y, x, a, nullptr, true, ggrad[a] * ax[a].dcoord + g_output_bias);
            }
          }
        }
  if (gin) {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t z = 0; z < in_d; ++z)
          for (int64_t y = 0; y < in_h; ++y)
            for (int64_t x = 0; x < in_w; ++x)
              fidx(gin, b, ch, z, y, x, nullptr, true,
                   gin_acc[static_cast<size_t>((((b * c + ch) * in_d + z) * in_h + y) * in_w + x)] +
                       g_output_bias);
  }
}

// ---- parameter checks ----

bool Live(const aclTensor* t) { return g_tensors.count(t) != 0; }

// The tensor-level checks shared by every entry point; returns 0 or a code.
int32_t CheckTensors(const std::vector<const aclTensor*>& ts, const char* names) {
  for (const aclTensor* t : ts) {
    if (t == nullptr) return Fail(kNullptr, std::string("null tensor among ") + names);
  }
  for (const aclTensor* t : ts) {
    if (!Live(t)) return Fail(kInvalid, "tensor is not a live aclTensor (destroyed?)");
    if (!ValidDtype(t->dtype)) {
      return Fail(kInvalid, "dtype " + std::to_string(t->dtype) +
                                " not in {FLOAT, FLOAT16, DOUBLE, BFLOAT16} for " + names);
    }
    if (t->dtype != ts[0]->dtype) return Fail(kInvalid, std::string("dtypes differ among ") + names);
    if (Numel(t->view) > 0 && t->data == nullptr) {
      return Fail(kInvalid, "non-empty tensor T" + std::to_string(t->id) + " has no data");
    }
  }
  return kOk;
}

// The simulated chip, from its SoC name as aclrtGetSocName gives it (the
// runtime's platform .ini files: Ascend910A/B/ProA/ProB/PremiumA are Atlas
// training, DAV_1001; Ascend910B<digit>... Atlas A2 and Ascend910_93xx Atlas
// A3, DAV_2201; Ascend950* DAV_3510; Ascend310P* DAV_2002).
enum class Chip { kTraining, kA2A3, k950, k310P, kOther };

Chip CurrentChip() {
  const std::string& s = g_soc;
  if (s.rfind("Ascend950", 0) == 0) return Chip::k950;
  if (s.rfind("Ascend910_93", 0) == 0) return Chip::kA2A3;
  if (s.rfind("Ascend910B", 0) == 0 && s.size() > 10 && std::isdigit(static_cast<unsigned char>(s[10]))) {
    return Chip::kA2A3;
  }
  if (s.rfind("Ascend910", 0) == 0) return Chip::kTraining;
  if (s.rfind("Ascend310P", 0) == 0) return Chip::k310P;
  return Chip::kOther;
}

// Formats as the API pages list them. aclnnGridSampler2D / 2DBackward: every
// tensor ND. aclnnGridSampler3D: input and out NCDHW, NDHWC or ND (the op
// checks this), grid ND. aclnnGridSampler3DBackward: gradOutput, input and
// inputGrad NCDHW or NDHWC (not NDHWC for DOUBLE), grid and gridGrad NDHWC.
// Only the 3D forward's check is in the ops-cv code; the simulator holds the
// other calls to the documented formats as well. NDHWC feature maps make
// ops-cv read C from the last axis, which the simulator does not model.
int32_t CheckFormats(int k, bool backward, const std::vector<const aclTensor*>& features,
                     const std::vector<const aclTensor*>& grids) {
  for (const aclTensor* t : features) {
    if (k == 2 && t->format != kND) {
      return Fail(kInvalid, "feature map format " + std::to_string(t->format) + " is not ND");
    }
    if (k == 3 && t->format == kNDHWC) {
      return Fail(kInvalid, t->dtype == kDouble ? "DOUBLE does not support the NDHWC format"
                                                : "NDHWC feature maps are not simulated");
    }
    if (k == 3 && t->format != kNCDHW && (backward || t->format != kND)) {
      return Fail(kInvalid, "feature map format " + std::to_string(t->format) +
                                (backward ? " is not NCDHW" : " is not NCDHW or ND"));
    }
  }
  const int32_t grid_format = (k == 3 && backward) ? kNDHWC : kND;
  for (const aclTensor* t : grids) {
    if (t->format != grid_format) {
      return Fail(kInvalid, "grid format " + std::to_string(t->format) + " is not " +
                                (grid_format == kND ? "ND" : "NDHWC"));
    }
  }
  return kOk;
}

// The dtype and mode rules that depend on the chip, checked where ops-cv
// checks them (kind 0/1: 2D/3D forward, 2/3: 2D/3D backward). In CheckParams,
// before the empty-tensor return:
//  - 2D backward: BFLOAT16 only on A2/A3/950 (aclnn_grid_sampler2d_backward.cpp
//    dtype lists); its page also excludes DOUBLE on Atlas training products,
//    which the code would send to AICPU: the simulator follows the page.
//  - 3D backward: its page excludes BFLOAT16 on Atlas training products (the
//    code has no chip gating): the simulator follows the page.
//  - 2D forward: BFLOAT16 rejected on 310P (DAV_2002).
int32_t CheckChipDtypes(int kind, int32_t dtype) {
  const Chip chip = CurrentChip();
  const bool modern = chip == Chip::kA2A3 || chip == Chip::k950;
  if (kind == 2 && dtype == kBf16 && !modern) return Fail(kInvalid, "BFLOAT16 needs Atlas A2/A3 or 950");
  if (kind == 2 && dtype == kDouble && chip == Chip::kTraining) {
    return Fail(kInvalid, "DOUBLE is not supported on Atlas training products");
  }
  if (kind == 3 && dtype == kBf16 && chip == Chip::kTraining) {
    return Fail(kInvalid, "BFLOAT16 is not supported on Atlas training products");
  }
  if (kind == 0 && dtype == kBf16 && chip == Chip::k310P) return Fail(kInvalid, "BFLOAT16 on 310P");
  return kOk;
}

// The forwards' routing rejections, after the empty-tensor return:
//  - 2D: bicubic is rejected wherever the call would run on AICPU, which has
//    no bicubic: DOUBLE on every chip, every dtype on Atlas training products
//    and everything the 310P's AICore template does not take (it takes
//    bilinear only) (aclnn_grid_sampler2d.cpp CheckAiCpuSupport).
//  - 3D: BFLOAT16 only on A2/A3 (and 950) ("when data type is bfloat16, only
//    support by ascend910B or ascend910_93", aclnn_grid_sampler3d.cpp).
int32_t CheckForwardRoute(int kind, int32_t dtype, int64_t interpolation) {
  const Chip chip = CurrentChip();
  const bool modern = chip == Chip::kA2A3 || chip == Chip::k950;
  if (kind == 0 && interpolation == 2 && (dtype == kDouble || !modern)) {
    return Fail(kInvalid, "no AICPU bicubic: when data type is double, no support interpolation "
                          "mode is bicubic");
  }
  if (kind == 1 && dtype == kBf16 && !modern) {
    return Fail(kInvalid, "when data type is bfloat16, only support by ascend910B or ascend910_93");
  }
  return kOk;
}

// Ranks, formats, modes and shape relations for the forward or backward.
// feature maps: input (and grad_output, input_grad / out), grids: grid (and grid_grad).
int32_t CheckShapes(int k, bool backward, const aclTensor* input, const aclTensor* grid,
                    const aclTensor* go, const aclTensor* out, const aclTensor* gin,
                    const aclTensor* ggrid, int64_t interpolation, int64_t padding) {
  const size_t rank = static_cast<size_t>(k) + 2;
  std::vector<const aclTensor*> features = {input};
  if (go) features.push_back(go);
  if (out) features.push_back(out);
  if (gin) features.push_back(gin);
  std::vector<const aclTensor*> grids = {grid};
  if (ggrid) grids.push_back(ggrid);
  for (const aclTensor* t : features) {
    if (t->view.size() != rank) return Fail(kInvalid, "feature map is not " + std::to_string(rank) + "-D: " + Desc(t));
  }
  for (const aclTensor* t : grids) {
    if (t->view.size() != rank) return Fail(kInvalid, "grid is not " + std::to_string(rank) + "-D: " + Desc(t));
  }
  if (int32_t code = CheckFormats(k, backward, features, grids); code != kOk) return code;
  // Modes: 2D forward and (since ops-cv commit b3bb0e12) 2D backward take
  // bicubic (2); the 3D ones bilinear and nearest only.
  const int64_t max_interp = k == 2 ? 2 : 1;
  if (interpolation < 0 || interpolation > max_interp) {
    return Fail(kInvalid, "interpolationMode " + std::to_string(interpolation) + " not supported");
  }
  if (padding < 0 || padding > 2) {
    return Fail(kInvalid, "paddingMode " + std::to_string(padding) + " not supported");
  }
  const auto& iv = input->view;
  const auto& gv = grid->view;
  if (gv[0] != iv[0]) return Fail(kInvalid, "N of input and grid differ");
  if (gv[rank - 1] != k) return Fail(kInvalid, "the last dimension of grid is not " + std::to_string(k));
  // Input H and W must not be 0 (2D, and dims 3 and 4 of the 3D forward);
  // the 3D backward checks none, the 3D forward not D.
  for (size_t i = rank - 2; i < rank && !(k == 3 && backward); ++i) {
    if (iv[i] == 0) return Fail(kInvalid, "a spatial dimension of input is 0");
  }
  const aclTensor* result = backward ? go : out;  // (N, C, grid spatial)
  if (result->view[0] != iv[0]) return Fail(kInvalid, std::string(backward ? "gradOutput" : "out") + " N differs from input");
  if (result->view[1] != iv[1]) return Fail(kInvalid, std::string(backward ? "gradOutput" : "out") + " C differs from input");
  for (int i = 0; i < k; ++i) {
    if (gv[1 + i] != result->view[2 + i]) {
      return Fail(kInvalid, std::string("grid spatial dims differ from ") + (backward ? "gradOutput" : "out"));
    }
  }
  if (gin && gin->view != iv) return Fail(kInvalid, "inputGrad shape differs from input");
  if (ggrid && ggrid->view != gv) return Fail(kInvalid, "gridGrad shape differs from grid");
  return kOk;
}

const char* kKindNames[4] = {"aclnnGridSampler2D", "aclnnGridSampler3D",
                             "aclnnGridSampler2DBackward", "aclnnGridSampler3DBackward"};

// A new executor for kind; compute false: one that runs nothing, as ops-cv
// hands out (with workspace size 0) when it returns early.
aclOpExecutor* NewExecutor(int kind, bool compute, uint64_t* ws, aclOpExecutor** ex) {
  auto* e = new aclOpExecutor{};
  e->kind = kind;
  e->compute = compute;
  e->workspace = compute ? g_workspace_size : 0;
  e->deterministic = g_process_deterministic;
  e->id = g_next_id++;
  g_executors.insert(e);
  *ws = e->workspace;
  *ex = e;
  Log("  -> executor E" + std::to_string(e->id) + " workspace=" + std::to_string(e->workspace) +
      (compute ? "" : " (computes nothing)"));
  return e;
}

std::string DeterministicDesc() {
  return " det=" + std::to_string(g_process_deterministic) +
         " ctxdet=" + std::to_string(g_deterministic);
}

// aclnnGridSampler2D/3DGetWorkspaceSize (aclnn_grid_sampler2d.cpp,
// aclnn_grid_sampler3d.cpp): CheckParams, then an empty input or grid returns
// success with nothing to run (out is neither checked nor written), then the
// routing rejections.
int32_t ForwardWorkspace(int kind, const aclTensor* input, const aclTensor* grid,
                         int64_t interpolation, int64_t padding, bool ac, aclTensor* out,
                         uint64_t* ws, aclOpExecutor** ex) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const std::string fn = std::string(kKindNames[kind]) + "GetWorkspaceSize";
  Log(fn + " input=" + Desc(input) + " grid=" + Desc(grid) + " out=" + Desc(out) + " interp=" +
      std::to_string(interpolation) + " pad=" + std::to_string(padding) + " ac=" +
      std::to_string(ac) + DeterministicDesc());
  int32_t code;
  if (Injected(fn.c_str(), &code)) return code;
  if (ws == nullptr || ex == nullptr) return Fail(kNullptr, "null workspaceSize or executor");
  if (!g_context_current) return Fail(kRuntimeError, "no current context");
  if ((code = CheckTensors({input, grid, out}, "input, grid, out")) != kOk) return code;
  const int k = kind == 1 ? 3 : 2;
  if ((code = CheckShapes(k, false, input, grid, nullptr, out, nullptr, nullptr, interpolation,
                          padding)) != kOk) {
    return code;
  }
  if ((code = CheckChipDtypes(kind, input->dtype)) != kOk) return code;
  if (Numel(input->view) == 0 || Numel(grid->view) == 0) {
    NewExecutor(kind, false, ws, ex);
    return kOk;
  }
  if ((code = CheckForwardRoute(kind, input->dtype, interpolation)) != kOk) return code;
  aclOpExecutor* e = NewExecutor(kind, true, ws, ex);
  e->a = input; e->b = grid; e->out0 = out;
  e->interpolation = interpolation; e->padding = padding; e->align_corners = ac;
  return kOk;
}

// aclnnGridSampler2D/3DBackwardGetWorkspaceSize
// (aclnn_grid_sampler2d_backward.cpp, aclnn_grid_sampler3d_backward.cpp): a
// null outputMask returns success before any check; then CheckParams
// (including the mask's size); then an empty gradOutput, input or grid, or an
// all-false mask, returns success with nothing to run and nothing written.
int32_t BackwardWorkspace(int kind, const aclTensor* go, const aclTensor* input,
                          const aclTensor* grid, int64_t interpolation, int64_t padding, bool ac,
                          const aclBoolArray* mask, aclTensor* gin, aclTensor* ggrid,
                          uint64_t* ws, aclOpExecutor** ex) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const std::string fn = std::string(kKindNames[kind]) + "GetWorkspaceSize";
  std::string mask_desc = "null";
  if (mask != nullptr) {
    mask_desc = "A" + std::to_string(mask->id) + "[";
    for (size_t i = 0; i < mask->values.size(); ++i) mask_desc += (i ? "," : "") + std::to_string(mask->values[i]);
    mask_desc += "]";
  }
  Log(fn + " gradOutput=" + Desc(go) + " input=" + Desc(input) + " grid=" + Desc(grid) +
      " inputGrad=" + Desc(gin) + " gridGrad=" + Desc(ggrid) + " mask=" + mask_desc +
      " interp=" + std::to_string(interpolation) + " pad=" + std::to_string(padding) + " ac=" +
      std::to_string(ac) + DeterministicDesc());
  int32_t code;
  if (Injected(fn.c_str(), &code)) return code;
  if (ws == nullptr || ex == nullptr) return Fail(kNullptr, "null workspaceSize or executor");
  if (!g_context_current) return Fail(kRuntimeError, "no current context");
  if (mask == nullptr) {
    NewExecutor(kind, false, ws, ex);
    return kOk;
  }
  if ((code = CheckTensors({go, input, grid, gin, ggrid},
                           "gradOutput, input, grid, inputGrad, gridGrad")) != kOk) {
    return code;
  }
  const int k = kind == 3 ? 3 : 2;
  if ((code = CheckShapes(k, true, input, grid, go, nullptr, gin, ggrid, interpolation,
                          padding)) != kOk) {
    return code;
  }
  if ((code = CheckChipDtypes(kind, input->dtype)) != kOk) return code;
  if (g_arrays.count(mask) == 0) return Fail(kInvalid, "outputMask is not a live aclBoolArray");
  if (mask->values.size() != 2) return Fail(kInvalid, "outputMask must have 2 elements");
  const bool m[2] = {mask->values[0], mask->values[1]};
  if (Numel(go->view) == 0 || Numel(input->view) == 0 || Numel(grid->view) == 0 ||
      !(m[0] || m[1])) {
    NewExecutor(kind, false, ws, ex);
    return kOk;
  }
  aclOpExecutor* e = NewExecutor(kind, true, ws, ex);
  e->a = go; e->b = input; e->c = grid; e->out0 = gin; e->out1 = ggrid;
  e->interpolation = interpolation; e->padding = padding; e->align_corners = ac;
  e->mask[0] = m[0]; e->mask[1] = m[1];
  return kOk;
}

// aclrt[Ctx]SetSysParamOpt for ACL_OPT_DETERMINISTIC (0: off, 1..3: levels).
int SetDeterministicOpt(const char* fn, int32_t opt, int64_t value, int64_t* slot) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log(std::string(fn) + " opt=" + std::to_string(opt) + " value=" + std::to_string(value));
  int32_t code;
  if (Injected(fn, &code)) return code;
  if (opt != 0 || value < 0 || value > 3) return Fail(kRtParamInvalid, std::string(fn) + ": bad args");
  *slot = value;
  return kOk;
}

int32_t Launch(int kind, void* workspace, uint64_t size, aclOpExecutor* ex, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const std::string fn = kKindNames[kind];
  Log(fn + " executor=" + (ex && g_executors.count(ex) ? "E" + std::to_string(ex->id) : ex ? "stale" : "null") +
      " workspace_size=" + std::to_string(size) + (workspace ? " workspace=set" : " workspace=null") +
      " stream=" + StreamDesc(stream));
  if (ex == nullptr) return Fail(kNullptr, "null executor");
  if (g_executors.count(ex) == 0) {
    return Fail(kInvalid, "executor is not live: executors are single-use (launched already?)");
  }
  // From here on the executor is consumed, whatever the outcome.
  g_executors.erase(ex);
  struct Free { aclOpExecutor* e; ~Free() { delete e; } } free_ex{ex};
  int32_t code;
  if (Injected(fn.c_str(), &code)) return code;
  if (!g_context_current) return Fail(kRuntimeError, "no current context");
  if (!StreamUsable(stream)) return Fail(kRuntimeError, "stream is not a live aclrtStream");
  if (ex->kind != kind) return Fail(kInvalid, "executor belongs to " + std::string(kKindNames[ex->kind]));
  if (size != ex->workspace) return Fail(kInvalid, "workspaceSize differs from GetWorkspaceSize's");
  if (size > 0) {
    if (workspace == nullptr) return Fail(kNullptr, "null workspace");
    std::memset(workspace, 0xa5, size);  // the workspace must be writable memory
  }
  if (!ex->compute) return kOk;
  // The tensors must still be live at launch (a handler may destroy them right after).
  for (const aclTensor* t : {ex->a, ex->b, ex->c, static_cast<const aclTensor*>(ex->out0),
                             static_cast<const aclTensor*>(ex->out1)}) {
    if (t != nullptr && !Live(t)) return Fail(kInvalid, "a tensor was destroyed before the launch");
  }
  Run(*ex);
  return kOk;
}

}  // namespace

extern "C" {

// ---- aclnn meta (libnnopbase) ----

aclTensor* aclCreateTensor(const int64_t* view_dims, uint64_t view_dims_num, int32_t data_type,
                           const int64_t* stride, int64_t offset, int32_t format,
                           const int64_t* storage_dims, uint64_t storage_dims_num,
                           void* tensor_data) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  int32_t code;
  if (Injected("aclCreateTensor", &code)) {
    Log("aclCreateTensor -> null (injected)");
    return nullptr;
  }
  if ((view_dims == nullptr && view_dims_num) || (stride == nullptr && view_dims_num) ||
      (storage_dims == nullptr && storage_dims_num)) {
    Fail(kNullptr, "aclCreateTensor: null dims or strides");
    Log("aclCreateTensor -> null");
    return nullptr;
  }
  auto* t = new aclTensor{};
  t->view.assign(view_dims, view_dims + view_dims_num);
  t->strides.assign(stride, stride + view_dims_num);
  t->storage.assign(storage_dims, storage_dims + storage_dims_num);
  t->dtype = data_type;
  t->offset = offset;
  t->format = format;
  t->data = tensor_data;
  t->id = g_next_id++;
  g_tensors.insert(t);
  std::string strides;
  Log("aclCreateTensor -> " + Desc(t) + " strides=" + Dims(t->strides) + " offset=" +
      std::to_string(offset) + " storage=" + Dims(t->storage));
  return t;
}

int32_t aclDestroyTensor(const aclTensor* t) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclDestroyTensor " + (t && g_tensors.count(t) ? "T" + std::to_string(t->id) : std::string("invalid")));
  if (t == nullptr) return kOk;
  if (g_tensors.erase(t) == 0) return Fail(kInvalid, "aclDestroyTensor: not a live tensor (double free?)");
  delete t;
  return kOk;
}

aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  int32_t code;
  if (Injected("aclCreateBoolArray", &code)) {
    Log("aclCreateBoolArray -> null (injected)");
    return nullptr;
  }
  if (value == nullptr && size) {
    Fail(kNullptr, "aclCreateBoolArray: null values");
    return nullptr;
  }
  auto* a = new aclBoolArray{};
  a->values.assign(value, value + size);
  a->id = g_next_id++;
  g_arrays.insert(a);
  std::string v;
  for (uint64_t i = 0; i < size; ++i) v += (i ? "," : "") + std::to_string(value[i]);
  Log("aclCreateBoolArray -> A" + std::to_string(a->id) + "[" + v + "]");
  return a;
}

int32_t aclDestroyBoolArray(const aclBoolArray* a) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclDestroyBoolArray " + (a && g_arrays.count(a) ? "A" + std::to_string(a->id) : std::string("invalid")));
  if (a == nullptr) return kOk;
  if (g_arrays.erase(a) == 0) return Fail(kInvalid, "aclDestroyBoolArray: not a live array");
  delete a;
  return kOk;
}

int32_t aclDestroyAclOpExecutor(aclOpExecutor* e) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclDestroyAclOpExecutor " + (e && g_executors.count(e) ? "E" + std::to_string(e->id) : std::string("invalid")));
  if (e == nullptr || g_executors.erase(e) == 0) return Fail(kInvalid, "not a live executor");
  delete e;
  return kOk;
}

// ---- the grid sampler (libopapi / libopapi_cv) ----

int32_t aclnnGridSampler2DGetWorkspaceSize(const aclTensor* input, const aclTensor* grid,
                                           int64_t interpolation, int64_t padding, bool ac,
                                           aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  return ForwardWorkspace(0, input, grid, interpolation, padding, ac, out, ws, ex);
}
int32_t aclnnGridSampler3DGetWorkspaceSize(const aclTensor* input, const aclTensor* grid,
                                           int64_t interpolation, int64_t padding, bool ac,
                                           aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  return ForwardWorkspace(1, input, grid, interpolation, padding, ac, out, ws, ex);
}
int32_t aclnnGridSampler2DBackwardGetWorkspaceSize(
    const aclTensor* go, const aclTensor* input, const aclTensor* grid, int64_t interpolation,
    int64_t padding, bool ac, const aclBoolArray* mask, aclTensor* gin, aclTensor* ggrid,
    uint64_t* ws, aclOpExecutor** ex) {
  return BackwardWorkspace(2, go, input, grid, interpolation, padding, ac, mask, gin, ggrid, ws, ex);
}
int32_t aclnnGridSampler3DBackwardGetWorkspaceSize(
    const aclTensor* go, const aclTensor* input, const aclTensor* grid, int64_t interpolation,
    int64_t padding, bool ac, const aclBoolArray* mask, aclTensor* gin, aclTensor* ggrid,
    uint64_t* ws, aclOpExecutor** ex) {
  return BackwardWorkspace(3, go, input, grid, interpolation, padding, ac, mask, gin, ggrid, ws, ex);
}
int32_t aclnnGridSampler2D(void* w, uint64_t s, aclOpExecutor* e, void* st) { return Launch(0, w, s, e, st); }
int32_t aclnnGridSampler3D(void* w, uint64_t s, aclOpExecutor* e, void* st) { return Launch(1, w, s, e, st); }
int32_t aclnnGridSampler2DBackward(void* w, uint64_t s, aclOpExecutor* e, void* st) { return Launch(2, w, s, e, st); }
int32_t aclnnGridSampler3DBackward(void* w, uint64_t s, aclOpExecutor* e, void* st) { return Launch(3, w, s, e, st); }

// ---- runtime (libascendcl / libacl_rt) ----

int aclrtMalloc(void** ptr, size_t size, int32_t policy) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclrtMalloc size=" + std::to_string(size) + " policy=" + std::to_string(policy));
  int32_t code;
  if (Injected("aclrtMalloc", &code)) return code;
  if (ptr == nullptr || size == 0) return Fail(kRtParamInvalid, "aclrtMalloc: null pointer or size 0");
  *ptr = ::operator new(size);
  g_mallocs.insert(*ptr);
  return kOk;
}

int aclrtFree(void* ptr) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log(std::string("aclrtFree ") + (g_mallocs.count(ptr) ? "ok" : "invalid"));
  if (g_mallocs.erase(ptr) == 0) return Fail(kRtParamInvalid, "aclrtFree: not an aclrtMalloc'ed pointer");
  ::operator delete(ptr);
  return kOk;
}

int aclrtSynchronizeStream(void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclrtSynchronizeStream stream=" + StreamDesc(stream));
  if (!StreamUsable(stream)) return Fail(kRtParamInvalid, "aclrtSynchronizeStream: not a stream");
  return kOk;
}

int aclrtCreateStream(void** stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (stream == nullptr) return Fail(kRtParamInvalid, "aclrtCreateStream: null pointer");
  *stream = ::operator new(1);
  g_streams[*stream] = g_next_id++;
  Log("aclrtCreateStream -> " + StreamDesc(*stream));
  return kOk;
}

int aclrtDestroyStream(void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclrtDestroyStream " + StreamDesc(stream));
  if (stream == nullptr || g_streams.erase(stream) == 0) {
    return Fail(kRtParamInvalid, "aclrtDestroyStream: not a live stream");
  }
  ::operator delete(stream);
  return kOk;
}

int aclrtMemsetAsync(void* ptr, size_t max_count, int32_t value, size_t count, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclrtMemsetAsync count=" + std::to_string(count) + " max=" + std::to_string(max_count) +
      " value=" + std::to_string(value) + " stream=" + StreamDesc(stream));
  int32_t code;
  if (Injected("aclrtMemsetAsync", &code)) return code;
  if (!g_context_current) return Fail(kRtContextNull, "aclrtMemsetAsync: no current context");
  if (ptr == nullptr || count > max_count || !StreamUsable(stream)) {
    return Fail(kRtParamInvalid, "aclrtMemsetAsync: null pointer, count > maxCount or bad stream");
  }
  std::memset(ptr, value, count);
  return kOk;
}

int aclrtGetCurrentContext(void** context) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclrtGetCurrentContext");
  if (context == nullptr) return Fail(kRtParamInvalid, "aclrtGetCurrentContext: null pointer");
  if (!g_context_current) return Fail(kRtContextNull, "no context is current");
  *context = &g_context_tag;
  return kOk;
}

const char* aclrtGetSocName() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_soc.empty() ? nullptr : g_soc.c_str();
}

const char* aclGetRecentErrMsg() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  static thread_local std::string copy;
  copy = g_err;
  g_err.clear();
  return copy.empty() ? nullptr : copy.c_str();
}

int aclrtCtxGetSysParamOpt(int32_t opt, int64_t* value) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclrtCtxGetSysParamOpt opt=" + std::to_string(opt));
  int32_t code;
  if (Injected("aclrtCtxGetSysParamOpt", &code)) return code;
  if (value == nullptr || opt != 0) return Fail(kRtParamInvalid, "aclrtCtxGetSysParamOpt: bad args");
  *value = g_deterministic;
  return kOk;
}

int aclrtGetSysParamOpt(int32_t opt, int64_t* value) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclrtGetSysParamOpt opt=" + std::to_string(opt));
  if (value == nullptr || opt != 0) return Fail(kRtParamInvalid, "aclrtGetSysParamOpt: bad args");
  *value = g_process_deterministic;
  return kOk;
}

int aclrtSetSysParamOpt(int32_t opt, int64_t value) {
  return SetDeterministicOpt("aclrtSetSysParamOpt", opt, value, &g_process_deterministic);
}

int aclrtCtxSetSysParamOpt(int32_t opt, int64_t value) {
  return SetDeterministicOpt("aclrtCtxSetSysParamOpt", opt, value, &g_deterministic);
}

// ---- test knobs ----

const char* sim_get_log() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_log_copy = g_log;
  return g_log_copy.c_str();
}

void sim_clear_log() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_log.clear();
}

void sim_fail_next(const char* fn, int32_t code) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_fail[fn] = code;
}

int64_t sim_live(const char* kind) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const std::string k = kind;
  if (k == "tensor") return static_cast<int64_t>(g_tensors.size());
  if (k == "bool_array") return static_cast<int64_t>(g_arrays.size());
  if (k == "executor") return static_cast<int64_t>(g_executors.size());
  if (k == "malloc") return static_cast<int64_t>(g_mallocs.size());
  return -1;
}

void sim_set_workspace_size(uint64_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_workspace_size = bytes;
}

int64_t sim_get_deterministic() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_deterministic;
}

void sim_set_deterministic(int64_t value) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_deterministic = value;
  g_process_deterministic = value;
}

int64_t sim_get_process_deterministic() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_process_deterministic;
}

void sim_set_context_current(bool current) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_context_current = current;
}

void sim_set_output_bias(double bias) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_output_bias = bias;
}

void sim_set_soc(const char* name) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_soc = name ? name : "";
}

void sim_reset() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_context_current = true;
  g_soc = "Ascend910B2";
  g_output_bias = 0;
  g_log.clear();
  g_err.clear();
  g_fail.clear();
  g_workspace_size = 256;
  g_deterministic = 0;
  g_process_deterministic = 0;
}

}  // extern "C"
