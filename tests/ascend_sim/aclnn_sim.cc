// A simulated CANN aclnn library for the tests: the symbols the Ascend
// handlers dlopen (aclCreateTensor & co., the eight grid sampler entry points,
// the executor calls, the aclrt* runtime calls, aclGetRecentErrMsg, the
// determinism options and the version query), executing on host memory.
//
// It models the vendor's documented and source-visible behaviour, including
// where it is unhelpful, and each rule cites where it comes from: the API
// pages (ops-cv image/*/docs/aclnn*.md), the ops-cv op code at commit
// 6ae87653 (image/grid_sample/op_api/, image/grid_sampler{2,3}_d_grad/op_host/),
// opbase at aa3cd74 (src/nnopbase/) and the runtime's API reference
// (hicann/runtime docs/zh/api_ref/). It never encodes the handlers' own
// assumptions: what it cannot model (NHWC feature maps) it refuses with
// kSimUnmodeled, so that a test notices.
//
// Releases (sim_set_release): "head" (ops-cv 6ae87653, opbase aa3cd74),
// "opbase-c501b51" (ops-cv 6ae87653 with opbase from c501b51 to before
// f93b493, which differ in how they read ACL_OPT_DETERMINISTIC) and "8.1.RC1"
// (the released CANN 8.1.RC1: ops-cv before 78f22ac4, b3bb0e12 and 760ad4cc,
// opbase before c501b51), whose differences it models where cited.
//
// Test knobs (extern "C", prefixed sim_):
//   sim_get_log() / sim_clear_log()   the call log, one line per call
//   sim_fail_next(fn, code)           the next call of fn returns code (null for creators)
//   sim_set_wrong_results(fn, bias)   added to every value a launch of fn (a launch
//                                     entry point, or "" for all) writes: a wrong kernel
//   sim_live(kind)                    live "tensor", "bool_array", "executor", "malloc"
//   sim_violations()                  calls that broke a documented contract
//   sim_set_release(name)             0, or -1 for an unknown release
//   sim_set_soc(name)                 what aclrtGetSocName returns (default "Ascend910B2")
//   sim_set_default_context(on, device)  whether threads without a context of their own
//                                     have the primary context current, and its device
//   sim_get/set_context_deterministic()  ACL_OPT_DETERMINISTIC of the primary context
//                                     (-1: never set)
//   sim_get/set_process_deterministic()  ... of the process
//   sim_reset()                       all of the above back to the start (live objects kept)
//
// Build: c++ -std=c++17 -O1 -shared -fPIC aclnn_sim.cc -o libaclnn_sim.so
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr int32_t kOk = 0;
constexpr int32_t kNullptr = 161001;        // ACLNN_ERR_PARAM_NULLPTR
constexpr int32_t kInvalid = 161002;        // ACLNN_ERR_PARAM_INVALID
constexpr int32_t kRuntimeError = 361001;   // ACLNN_ERR_RUNTIME_ERROR
constexpr int32_t kInner = 561000;          // ACLNN_ERR_INNER
constexpr int32_t kInnerNullptr = 561103;   // ACLNN_ERR_INNER_NULLPTR
constexpr int32_t kRtParamInvalid = 107000;  // ACL_ERROR_RT_PARAM_INVALID
constexpr int32_t kRtContextNull = 107002;   // ACL_ERROR_RT_CONTEXT_NULL
constexpr int32_t kRtOptNotSet = 107021;     // ACL_ERROR_RT_SYSPARAMOPT_NOT_SET
// Not CANN's: what the simulator does not model (a test must not rely on it).
constexpr int32_t kSimUnmodeled = 599999;

constexpr int32_t kFloat = 0, kFloat16 = 1, kDouble = 11, kBf16 = 27;
constexpr int32_t kNHWC = 1, kND = 2, kNDHWC = 27, kNCDHW = 30;

enum class Release { kHead, kOpbaseC501b51, k81RC1 };

// The chip's architecture, from its SoC name as aclrtGetSocName gives it (the
// runtime's platform .ini files): Ascend910A/B/ProA/ProB/PremiumA are Atlas
// training (DAV_1001); Ascend910B<digit>... Atlas A2 and Ascend910_93xx
// Atlas A3 (DAV_2201); Ascend950* DAV_3510 (register-based, IsRegBase);
// Ascend310P* DAV_2002.
enum class Arch { kDav1001, kDav2201, kDav3510, kDav2002, kOther };

// An ACL context (aclrtCreateContext). ACL_OPT_DETERMINISTIC of a context has
// no default: reading it before it was set fails (the runtime's API
// reference, aclrtCtxGetSysParamOpt).
struct SimContext {
  int id;
  int32_t device;
  bool deterministic_set;
  int64_t deterministic;
};

std::recursive_mutex g_mu;
std::string g_log;
std::string g_err;
std::string g_log_copy;
std::map<std::string, int32_t> g_fail;
std::map<std::string, double> g_wrong;  // entry point ("" for all) -> bias
int64_t g_violations = 0;
Release g_release = Release::kHead;
std::string g_soc = "Ascend910B2";
int g_next_id = 1;
// The primary context, current on every thread that has not made another
// current (as a PJRT plugin makes its device's context current on the
// threads running its work; the tests cannot reach those threads).
SimContext g_primary{0, 0, false, 0};
bool g_primary_current = true;
int64_t g_process_deterministic = 0;  // aclrtGetSysParamOpt: default 0
std::set<SimContext*> g_contexts;
thread_local SimContext* t_context = nullptr;  // aclrtSetCurrentContext on this thread
// opbase before c501b51 reads the context option once per kernel, when it
// first parses the kernel's tiling, and keeps it (tiling_parse_ctx_holder.cpp
// and op_kernel.h's determinConfig_ at c501b51^): kernel name -> flag.
std::map<std::string, bool> g_cached_kernel_deterministic;
uint64_t g_launches = 0;  // seeds the order of the atomic adds of a launch
// opbase's op cache: the calls (entry point, shapes, dtypes, attributes) whose
// executor it keeps; an identical later call gets a wrapper of it.
std::set<std::string> g_op_cache;

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
// Where a launch runs, as the op code routes it; it decides what the
// simulation does about atomics.
enum SimRoute { kRouteNone, kRouteAiCore, kRouteAiCpu };
struct aclOpExecutor {
  int kind;  // 0 fwd2d, 1 fwd3d, 2 bwd2d, 3 bwd3d
  const aclTensor *a, *b, *c;  // fwd: input, grid, -; bwd: grad_output, input, grid
  aclTensor *out0, *out1;      // fwd: out, -; bwd: input_grad, grid_grad
  int64_t interpolation, padding;
  bool align_corners;
  bool mask[2];
  bool compute;
  bool repeatable;
  SimRoute route;
  bool deterministic_kernel;
  // A wrapper of an executor from opbase's op cache (CreateCacheWrap,
  // op_cache.cpp:782/:817), handed out for a call identical to an earlier one.
  bool cache_wrap;
  // Why the kernel the first phase picked fails when launched ("": it runs).
  const char* launch_failure;
  uint64_t workspace;
  int id;
};
}

namespace {

std::set<const aclTensor*> g_tensors;
std::set<const aclBoolArray*> g_arrays;
std::set<const aclOpExecutor*> g_executors;
std::set<void*> g_mallocs;
std::map<const void*, int> g_streams;  // live streams from aclrtCreateStream -> id

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

// A call that breaks a documented contract: counted (tests assert none) and
// failed.
int32_t Violation(int32_t code, const std::string& msg) {
  ++g_violations;
  Log("  VIOLATION: " + msg);
  return Fail(code, msg);
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

SimContext* CurrentContext() {
  if (t_context != nullptr) return t_context;
  return g_primary_current ? &g_primary : nullptr;
}

std::string Dims(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

std::string Desc(const aclTensor* t) {
  if (t == nullptr) return "null";
  return "T" + std::to_string(t->id) + Dims(t->view) + "/dt" + std::to_string(t->dtype) + "/f" +
         std::to_string(t->format) + (t->data == nullptr ? "/nodata" : "");
}

size_t ElemSize(int32_t dt) { return dt == kDouble ? 8 : dt == kFloat ? 4 : 2; }

int64_t Numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

Arch CurrentArch() {
  const std::string& s = g_soc;
  if (s.rfind("Ascend950", 0) == 0) return Arch::kDav3510;
  if (s.rfind("Ascend910_93", 0) == 0) return Arch::kDav2201;
  if (s.rfind("Ascend910B", 0) == 0 && s.size() > 10 &&
      std::isdigit(static_cast<unsigned char>(s[10]))) {
    return Arch::kDav2201;
  }
  if (s.rfind("Ascend910", 0) == 0) return Arch::kDav1001;
  if (s.rfind("Ascend310P", 0) == 0) return Arch::kDav2002;
  return Arch::kOther;
}

bool IsHalf(int32_t dtype) { return dtype == kFloat16 || dtype == kBf16; }
bool AiCoreDtype(int32_t dtype) { return dtype == kFloat || IsHalf(dtype); }

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

// Runs forward (go == nullptr) or backward over every output point; `bias` is
// added to every value written (sim_set_wrong_results). Feature maps are
// (N, C, D, H, W) with D = 1 in 2D; grids (N, Do, Ho, Wo, k).
//
// The grad_input of a backward is a scatter: the AICore kernels add each
// point's contribution with atomics, in whatever order the cores get there,
// unless the deterministic kernel was picked (op_api_list.md: the backward is
// "默认非确定性实现，支持配置开启"). The simulation adds them in float32 in an
// order that changes from launch to launch for the default AICore kernel,
// and in point order, in float64, otherwise.
void Run(const aclOpExecutor& e, double bias) {
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
  // grad_input's contributions: (flat index, value), in point order.
  std::vector<std::pair<size_t, double>> scatter;
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
                    scatter.emplace_back(
                        static_cast<size_t>((((b * c + ch) * in_d + jz) * in_h + jy) * in_w + jx),
                        g * w);
                  }
                  if (ggrid) {
                    double v;
                    fidx(input, b, ch, jz, jy, jx, &v, false, 0);
                    ggrad[0] += g * v * ax[0].dw[tx] * ax[1].w[ty] * ax[2].w[tz];
                    ggrad[1] += g * v * ax[0].w[tx] * ax[1].dw[ty] * ax[2].w[tz];
                    if (k == 3) ggrad[2] += g * v * ax[0].w[tx] * ax[1].w[ty] * ax[2].dw[tz];
                  }
                }
            if (out) fidx(out, b, ch, z, y, x, nullptr, true, acc + bias);
          }
          if (ggrid) {
            for (int a = 0; a < k; ++a) {
              gidx(ggrid, b, z, y, x, a, nullptr, true, ggrad[a] * ax[a].dcoord + bias);
            }
          }
        }
  if (!gin) return;
  const size_t total = static_cast<size_t>(n * c * in_d * in_h * in_w);
  std::vector<double> gin_acc(total, 0.0);
  if (e.route == kRouteAiCore && !e.deterministic_kernel) {
    // Atomic adds in float32, in an order of this launch's own.
    uint64_t state = 0x9e3779b97f4a7c15ull * ++g_launches;
    for (size_t i = scatter.size(); i > 1; --i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(scatter[i - 1], scatter[(state >> 33) % i]);
    }
    std::vector<float> acc(total, 0.0f);
    for (const auto& [index, value] : scatter) acc[index] += static_cast<float>(value);
    std::copy(acc.begin(), acc.end(), gin_acc.begin());
  } else {
    for (const auto& [index, value] : scatter) gin_acc[index] += value;
  }
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t z = 0; z < in_d; ++z)
        for (int64_t y = 0; y < in_h; ++y)
          for (int64_t x = 0; x < in_w; ++x)
            fidx(gin, b, ch, z, y, x, nullptr, true,
                 gin_acc[static_cast<size_t>((((b * c + ch) * in_d + z) * in_h + y) * in_w + x)] +
                     bias);
}

// ---- the first phase's checks ----

bool Live(const aclTensor* t) { return g_tensors.count(t) != 0; }

const char* kKindNames[4] = {"aclnnGridSampler2D", "aclnnGridSampler3D",
                             "aclnnGridSampler2DBackward", "aclnnGridSampler3DBackward"};

// CheckNotNull (161001) and OP_CHECK_DTYPE_NOT_MATCH (161002), shared by the
// four entry points. A tensor's data is not looked at in the first phase:
// nnopbase takes tensors without data (aclCreateTensor.md's examples, and
// aclSetAclOpExecutorRepeatable.md's, which calls a first phase with them).
int32_t CheckTensors(const std::vector<const aclTensor*>& ts, const char* names) {
  for (const aclTensor* t : ts) {
    if (t == nullptr) return Fail(kNullptr, std::string("null tensor among ") + names);
  }
  for (const aclTensor* t : ts) {
    if (!Live(t)) return Violation(kInvalid, "a tensor that is not a live aclTensor (destroyed?)");
    if (t->dtype != ts[0]->dtype) return Fail(kInvalid, std::string("dtypes differ among ") + names);
  }
  return kOk;
}

// The dtype lists of the entry points' CheckDtypeValid, and the API pages'
// per-product exclusions that the code does not check itself.
int32_t CheckDtype(int kind, int32_t dtype) {
  const Arch arch = CurrentArch();
  const bool known = dtype == kFloat || dtype == kFloat16 || dtype == kDouble || dtype == kBf16;
  if (!known) return Fail(kInvalid, "dtype " + std::to_string(dtype) + " not supported");
  const bool training = arch == Arch::kDav1001;
  switch (kind) {
    case 0:
      // head: {FLOAT, FLOAT16, BF16, DOUBLE}, BF16 refused on DAV_2002
      // (aclnn_grid_sampler2d.cpp:52, :85). 8.1.RC1, before ops-cv 78f22ac4:
      // {FLOAT, FLOAT16, DOUBLE}, BF16 only on register-based chips.
      if (dtype == kBf16 && g_release == Release::kHead && arch == Arch::kDav2002) {
        return Fail(kInvalid, "input dtype does not support bf16 on this chip");
      }
      if (dtype == kBf16 && g_release == Release::k81RC1 && arch != Arch::kDav3510) {
        return Fail(kInvalid, "BFLOAT16 is not in the 2D forward's dtype list (8.1.RC1)");
      }
      // aclnnGridSampler2D.md: Atlas training products take no BFLOAT16. The
      // code does not check it: such a call goes to the AICPU kernel, which
      // fails at launch (Route).
      return kOk;
    case 1:
      return kOk;  // all four (aclnn_grid_sampler3d.cpp:54); BF16 is routed below
    case 2:
      // {FLOAT, FLOAT16, DOUBLE, BF16} on DAV_2201 and register-based chips,
      // else without BF16 (aclnn_grid_sampler2d_backward.cpp:56-75);
      // aclnnGridSampler2DBackward.md: Atlas training products take no DOUBLE.
      if (dtype == kBf16 && arch != Arch::kDav2201 && arch != Arch::kDav3510) {
        return Fail(kInvalid, "BFLOAT16 is not in the 2D backward's dtype list for this chip");
      }
      if (dtype == kDouble && training) {
        return Fail(kInvalid, "DOUBLE is not supported on Atlas training products");
      }
      return kOk;
    default:
      // All four (aclnn_grid_sampler3d_backward.cpp:53);
      // aclnnGridSampler3DBackward.md: Atlas training products take no BF16.
      if (dtype == kBf16 && training) {
        return Fail(kInvalid, "BFLOAT16 is not supported on Atlas training products");
      }
      return kOk;
  }
}

// The modes of CheckAttrValid. 2D forward: interpolation 0..2
// (aclnn_grid_sampler2d.cpp:40); 2D backward: 0..2 at head, 0..1 before
// ops-cv b3bb0e12 (8.1.RC1); 3D: 0..1 (aclnn_grid_sampler3d.cpp:47,
// aclnn_grid_sampler3d_backward.cpp:41). Padding 0..2 everywhere.
int32_t CheckModes(int kind, int64_t interpolation, int64_t padding) {
  int64_t max_interpolation = kind == 0 ? 2 : kind == 2 ? 2 : 1;
  if (kind == 2 && g_release == Release::k81RC1) max_interpolation = 1;
  if (interpolation < 0 || interpolation > max_interpolation) {
    return Fail(kInvalid, "interpolationMode " + std::to_string(interpolation) +
                              " should be in range [0, " + std::to_string(max_interpolation) + "]");
  }
  if (padding < 0 || padding > 2) {
    return Fail(kInvalid, "paddingMode " + std::to_string(padding) + " should be in range [0, 2]");
  }
  return kOk;
}

// Formats. Only the 3D forward checks them: input and out NCDHW, NDHWC or ND
// (aclnn_grid_sampler3d.cpp:57, :101-113). Grids are never checked. An NHWC
// (2D) or NDHWC (3D) feature map makes ops-cv read C and the spatial axes
// elsewhere (aclnn_grid_sampler2d_backward.cpp:178,
// aclnn_grid_sampler3d_backward.cpp:122), which the simulator does not model.
int32_t CheckFormats(int kind, const std::vector<const aclTensor*>& features) {
  for (const aclTensor* t : features) {
    if (kind == 1 && t->format != kNCDHW && t->format != kNDHWC && t->format != kND) {
      return Fail(kInvalid, "format " + std::to_string(t->format) +
                                " is not one of NCDHW, NDHWC, ND");
    }
    if (t->format == kNHWC || t->format == kNDHWC) {
      return Violation(kSimUnmodeled, "channels-last feature maps are not simulated");
    }
  }
  return kOk;
}

// Ranks and shape relations (CheckShape of each entry point).
int32_t CheckShapes(int k, bool backward, const aclTensor* input, const aclTensor* grid,
                    const aclTensor* go, const aclTensor* out, const aclTensor* gin,
                    const aclTensor* ggrid) {
  const size_t rank = static_cast<size_t>(k) + 2;
  for (const aclTensor* t : {input, grid, backward ? go : out}) {
    if (t->view.size() != rank) {
      return Fail(kInvalid, "tensor is not " + std::to_string(rank) + "-D: " + Desc(t));
    }
  }
  const auto& iv = input->view;
  const auto& gv = grid->view;
  if (gv[0] != iv[0]) return Fail(kInvalid, "N of input and grid differ");
  if (gv[rank - 1] != k) {
    return Fail(kInvalid, "the last dimension of grid is not " + std::to_string(k));
  }
  // Input H and W must not be 0 (2D: aclnn_grid_sampler2d_backward.cpp:145
  // and the 2D forward; 3D forward: H and W, not D); the 3D backward checks none.
  for (size_t i = rank - 2; i < rank && !(k == 3 && backward); ++i) {
    if (iv[i] == 0) return Fail(kInvalid, "a spatial dimension of input is 0");
  }
  const aclTensor* result = backward ? go : out;  // (N, C, grid spatial)
  const char* what = backward ? "gradOutput" : "out";
  if (result->view[0] != iv[0]) return Fail(kInvalid, std::string(what) + " N differs from input");
  if (result->view[1] != iv[1]) return Fail(kInvalid, std::string(what) + " C differs from input");
  for (int i = 0; i < k; ++i) {
    if (gv[1 + i] != result->view[2 + i]) {
      return Fail(kInvalid, std::string("grid spatial dims differ from ") + what);
    }
  }
  if (gin && gin->view != iv) return Fail(kInvalid, "inputGrad shape differs from input");
  if (ggrid && ggrid->view != gv) return Fail(kInvalid, "gridGrad shape differs from grid");
  return kOk;
}

// ---- routes, kernels and workspaces ----

// Where the op code sends a non-empty call, or a rejection (*code set).
SimRoute Route(int kind, int32_t dtype, int64_t interpolation, int64_t channels, int32_t* code) {
  const Arch arch = CurrentArch();
  *code = kOk;
  switch (kind) {
    case 0: {
      // aclnn_grid_sampler2d.cpp:211-249 (AICore), :63-76 (register-based),
      // :177-184 (AICPU has no bicubic: paramsNotSupport, 161002).
      const bool aicore =
          (arch == Arch::kDav3510 && interpolation != 0 && AiCoreDtype(dtype)) ||
          (AiCoreDtype(dtype) && arch == Arch::kDav2201);
      const bool regbase = arch == Arch::kDav3510 && interpolation == 0 && AiCoreDtype(dtype);
      if (aicore || regbase) return kRouteAiCore;
      if (interpolation == 2) {
        *code = Fail(kInvalid, "The op info is not supported: when data type is double, no "
                               "support interpolation mode is bicubic");
        return kRouteNone;
      }
      return kRouteAiCpu;
    }
    case 1: {
      // aclnn_grid_sampler3d.cpp:214-248, :340-361: AICore for FLOAT,
      // FLOAT16, BF16 on DAV_2201 (and DAV_3510), AICPU for FLOAT, FLOAT16,
      // DOUBLE, else 161002 ("when data type is bfloat16, only support by
      // ascend910B or ascend910_93").
      if (AiCoreDtype(dtype) && (arch == Arch::kDav2201 || arch == Arch::kDav3510)) {
        return kRouteAiCore;
      }
      if (dtype != kBf16) return kRouteAiCpu;
      *code = Fail(kInvalid, "when data type is bfloat16, only support by ascend910B or "
                             "ascend910_93");
      return kRouteNone;
    }
    case 2: {
      // aclnn_grid_sampler2d_backward.cpp:174-193 (the transposed AICore
      // route: not DOUBLE, not DAV_1001 or DAV_3510, C <= 2048) and :290-299
      // (DAV_3510 without DOUBLE: AICore; else the AICPU GridSampler2DGrad).
      // 8.1.RC1, before ops-cv 760ad4cc, sent DOUBLE on DAV_3510 to the AICore
      // kernel, which has no DOUBLE: the launcher list fails and the first
      // phase returns ACLNN_ERR_INNER_NULLPTR (CheckTupleNullptr, :302).
      const bool transposed = dtype != kDouble && arch != Arch::kDav1001 &&
                              arch != Arch::kDav3510 && channels <= 2048;
      if (transposed) return kRouteAiCore;
      if (arch == Arch::kDav3510 && dtype != kDouble) return kRouteAiCore;
      if (arch == Arch::kDav3510 && g_release == Release::k81RC1) {
        *code = Fail(kInnerNullptr, "GridSamplerGrad AiCore ADD_TO_LAUNCHER_LIST_AICORE failed.");
        return kRouteNone;
      }
      return kRouteAiCpu;
    }
    default:
      // grid_sampler3d_grad.cpp: AICore on DAV_2201 and DAV_3510 for FLOAT,
      // FLOAT16, BF16 with C <= 2048, else AICPU.
      if ((arch == Arch::kDav2201 || arch == Arch::kDav3510) && channels <= 2048 &&
          AiCoreDtype(dtype)) {
        return kRouteAiCore;
      }
      return kRouteAiCpu;
  }
}

// Whether an AICore kernel picked in this first phase is the deterministic
// one. head (opbase f93b493 and later): the process option, read at every
// first phase, any level >= 1 (op_executor.cpp:1008-1046,
// GetDeterministicLevelFromRt and InitL2Phase1Context). opbase c501b51 to
// before f93b493: the process option at every first phase, but only level 1
// (op_executor.cpp:1453-1457 at c501b51: determinConfig == 1). 8.1.RC1
// (before c501b51): the context option, read the first time the kernel's
// tiling is parsed and kept (tiling_parse_ctx_holder.cpp:225 at c501b51^,
// op_kernel.h's determinConfig_).
bool DeterministicKernel(int kind) {
  if (g_release == Release::kHead) return g_process_deterministic >= 1;
  if (g_release == Release::kOpbaseC501b51) return g_process_deterministic == 1;
  const std::string kernel = kKindNames[kind];
  auto it = g_cached_kernel_deterministic.find(kernel);
  if (it != g_cached_kernel_deterministic.end()) return it->second;
  const SimContext* context = CurrentContext();
  const bool on = context != nullptr && context->deterministic_set && context->deterministic >= 1;
  g_cached_kernel_deterministic[kernel] = on;
  return on;
}

// The workspace the first phase asks for: the AICore tilings' 16 MiB system
// workspace (grid_sample_tiling.cpp:266, grid_sampler2_d_grad_tiling.cpp:527,
// grid_sampler3_d_grad_tiling.cpp:50), plus, for half types, the forward's
// float32 staging (grid_sample_tiling.cpp:267-271, 20 cores x C x 512
// floats here) and the 2D backward's float32 copy of grad_input, whose size
// the tiling computes as a uint32 product (grid_sampler2_d_grad_tiling.cpp:526,
// kept here); plus the intermediate results the op code allocates in the
// executor (the backward's internal gradients). AICPU routes: the
// intermediates only.
uint64_t WorkspaceSize(int kind, SimRoute route, const aclTensor* input, const aclTensor* grid) {
  const uint64_t element = ElemSize(input->dtype);
  uint64_t bytes = 0;
  if (kind >= 2) {
    bytes += static_cast<uint64_t>(Numel(input->view) + Numel(grid->view)) * element;
  }
  if (route != kRouteAiCore) return bytes;
  bytes += 16u * 1024 * 1024;
  if (!IsHalf(input->dtype)) return bytes;
  const auto& iv = input->view;
  if (kind == 0 || kind == 1) return bytes + 20ull * static_cast<uint64_t>(iv[1]) * 512 * 4;
  if (kind == 2) {
    const uint32_t nchw = static_cast<uint32_t>(iv[0]) * static_cast<uint32_t>(iv[1]) *
                          static_cast<uint32_t>(iv[2]) * static_cast<uint32_t>(iv[3]);
    return bytes + static_cast<uint64_t>(nchw) * sizeof(float);
  }
  return bytes;
}

// A new executor for kind; compute false: one that runs nothing, as ops-cv
// hands out (with workspace size 0) when it returns early.
// `call`: the call's key for opbase's op cache (CallKey), "" for one that
// computes nothing.
aclOpExecutor* NewExecutor(int kind, bool compute, uint64_t workspace, uint64_t* ws,
                           aclOpExecutor** ex, const std::string& call = "") {
  auto* e = new aclOpExecutor{};
  e->kind = kind;
  e->compute = compute;
  e->workspace = compute ? workspace : 0;
  e->id = g_next_id++;
  e->cache_wrap = !call.empty() && !g_op_cache.insert(call).second;
  e->launch_failure = "";
  g_executors.insert(e);
  *ws = e->workspace;
  *ex = e;
  Log("  -> executor E" + std::to_string(e->id) + " workspace=" + std::to_string(e->workspace) +
      (compute ? "" : " (computes nothing)") + (e->cache_wrap ? " (from the op cache)" : ""));
  return e;
}

// What opbase's op cache tells calls apart by: the entry point, each tensor's
// shape, dtype, format and whether it has data, and the attributes (not the
// data's addresses, which a cached executor takes anew).
std::string CallKey(int kind, const std::vector<const aclTensor*>& tensors, int64_t interpolation,
                    int64_t padding, bool ac, const bool* mask) {
  std::string key = std::to_string(kind);
  for (const aclTensor* t : tensors) {
    key += " " + Dims(t->view) + "/" + std::to_string(t->dtype) + "/" +
           std::to_string(t->format) + (t->data == nullptr ? "/nodata" : "");
  }
  key += " " + std::to_string(interpolation) + std::to_string(padding) + std::to_string(ac);
  if (mask != nullptr) key += std::to_string(mask[0]) + std::to_string(mask[1]);
  return key;
}

std::string DeterministicDesc() {
  const SimContext* context = CurrentContext();
  std::string ctx = context == nullptr ? "none"
                    : context->deterministic_set ? std::to_string(context->deterministic)
                                                 : "unset";
  return " det=" + std::to_string(g_process_deterministic) + " ctxdet=" + ctx;
}

// What every first phase checks before its own rules (OP_CHECK_COMM_INPUT,
// and a current context, without which the runtime calls it makes fail).
int32_t CheckCall(const std::string& fn, uint64_t* ws, aclOpExecutor** ex) {
  int32_t code;
  if (Injected(fn.c_str(), &code)) return code;
  if (ws == nullptr || ex == nullptr) return Fail(kNullptr, "null workspaceSize or executor");
  if (CurrentContext() == nullptr) return Fail(kRuntimeError, "no current context");
  return kOk;
}

// aclnnGridSampler2D/3DGetWorkspaceSize (aclnn_grid_sampler2d.cpp:266-,
// aclnn_grid_sampler3d.cpp:314-): CheckParams, then an empty input or grid
// returns success with nothing to run (out is neither checked nor written),
// then the routing (its rejections included).
int32_t ForwardWorkspace(int kind, const aclTensor* input, const aclTensor* grid,
                         int64_t interpolation, int64_t padding, bool ac, aclTensor* out,
                         uint64_t* ws, aclOpExecutor** ex) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const std::string fn = std::string(kKindNames[kind]) + "GetWorkspaceSize";
  Log(fn + " input=" + Desc(input) + " grid=" + Desc(grid) + " out=" + Desc(out) + " interp=" +
      std::to_string(interpolation) + " pad=" + std::to_string(padding) + " ac=" +
      std::to_string(ac) + DeterministicDesc());
  int32_t code;
  if ((code = CheckCall(fn, ws, ex)) != kOk) return code;
  if ((code = CheckTensors({input, grid, out}, "input, grid, out")) != kOk) return code;
  if ((code = CheckDtype(kind, input->dtype)) != kOk) return code;
  if ((code = CheckModes(kind, interpolation, padding)) != kOk) return code;
  if ((code = CheckFormats(kind, {input, out})) != kOk) return code;
  const int k = kind == 1 ? 3 : 2;
  if ((code = CheckShapes(k, false, input, grid, nullptr, out, nullptr, nullptr)) != kOk) {
    return code;
  }
  if (Numel(input->view) == 0 || Numel(grid->view) == 0) {
    NewExecutor(kind, false, 0, ws, ex);
    return kOk;
  }
  const SimRoute route = Route(kind, input->dtype, interpolation, input->view[1], &code);
  if (code != kOk) return code;
  aclOpExecutor* e = NewExecutor(kind, true, WorkspaceSize(kind, route, input, grid), ws, ex,
                                 CallKey(kind, {input, grid, out}, interpolation, padding, ac,
                                         nullptr));
  // The 2D forward sends BFLOAT16 to the AICPU kernel where it has no AICore
  // one (Atlas training products, aclnn_grid_sampler2d.cpp:211-249), but the
  // AICPU GridSampler2D's op info lists FLOAT16, FLOAT and DOUBLE only (CANN
  // 8.1.RC1 AICPU op info): the first phase succeeds, the launch fails.
  if (kind == 0 && route == kRouteAiCpu && input->dtype == kBf16) {
    e->launch_failure = "the AICPU kernel GridSampler2D has no BFLOAT16 (its op info: FLOAT16, "
                        "FLOAT, DOUBLE)";
  }
  e->a = input; e->b = grid; e->out0 = out;
  e->interpolation = interpolation; e->padding = padding; e->align_corners = ac;
  e->route = route;
  e->deterministic_kernel = true;  // the forwards are deterministic (op_api_list.md)
  return kOk;
}

// aclnnGridSampler2D/3DBackwardGetWorkspaceSize
// (aclnn_grid_sampler2d_backward.cpp:214-350, aclnn_grid_sampler3d_backward.cpp:206-357):
// a null outputMask returns success before any check (:231, :223); then
// CheckParams (the mask's size included); then an empty gradOutput, input or
// grid, or an all-false mask, returns success with nothing to run and nothing
// written (:242, :234); then the routing.
int32_t BackwardWorkspace(int kind, const aclTensor* go, const aclTensor* input,
                          const aclTensor* grid, int64_t interpolation, int64_t padding, bool ac,
                          const aclBoolArray* mask, aclTensor* gin, aclTensor* ggrid,
                          uint64_t* ws, aclOpExecutor** ex) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const std::string fn = std::string(kKindNames[kind]) + "GetWorkspaceSize";
  std::string mask_desc = "null";
  if (mask != nullptr) {
    mask_desc = "A" + std::to_string(mask->id) + "[";
    for (size_t i = 0; i < mask->values.size(); ++i) {
      mask_desc += (i ? "," : "") + std::to_string(mask->values[i]);
    }
    mask_desc += "]";
  }
  Log(fn + " gradOutput=" + Desc(go) + " input=" + Desc(input) + " grid=" + Desc(grid) +
      " inputGrad=" + Desc(gin) + " gridGrad=" + Desc(ggrid) + " mask=" + mask_desc +
      " interp=" + std::to_string(interpolation) + " pad=" + std::to_string(padding) + " ac=" +
      std::to_string(ac) + DeterministicDesc());
  int32_t code;
  if ((code = CheckCall(fn, ws, ex)) != kOk) return code;
  if (mask == nullptr) {
    NewExecutor(kind, false, 0, ws, ex);
    return kOk;
  }
  if ((code = CheckTensors({go, input, grid, gin, ggrid},
                           "gradOutput, input, grid, inputGrad, gridGrad")) != kOk) {
    return code;
  }
  if ((code = CheckDtype(kind, input->dtype)) != kOk) return code;
  if ((code = CheckModes(kind, interpolation, padding)) != kOk) return code;
  if ((code = CheckFormats(kind, {go, input, gin})) != kOk) return code;
  const int k = kind == 3 ? 3 : 2;
  if ((code = CheckShapes(k, true, input, grid, go, nullptr, gin, ggrid)) != kOk) return code;
  if (g_arrays.count(mask) == 0) {
    return Violation(kInvalid, "outputMask is not a live aclBoolArray");
  }
  if (mask->values.size() != 2) return Fail(kInvalid, "outputMask must have 2 elements");
  const bool m[2] = {mask->values[0], mask->values[1]};
  if (Numel(go->view) == 0 || Numel(input->view) == 0 || Numel(grid->view) == 0 ||
      !(m[0] || m[1])) {
    NewExecutor(kind, false, 0, ws, ex);
    return kOk;
  }
  const SimRoute route = Route(kind, input->dtype, interpolation, input->view[1], &code);
  if (code != kOk) return code;
  const bool deterministic = route == kRouteAiCpu || DeterministicKernel(kind);
  aclOpExecutor* e = NewExecutor(kind, true, WorkspaceSize(kind, route, input, grid), ws, ex,
                                 CallKey(kind, {go, input, grid, gin, ggrid}, interpolation,
                                         padding, ac, m));
  // The 2D backward sends float64, C > 2048 and every Atlas training call to
  // the AICPU GridSampler2DGrad without looking at the interpolation mode
  // (aclnn_grid_sampler2d_backward.cpp:174-193, :290-299), and the AICPU
  // kernels have no bicubic (the 2D forward says so before routing there,
  // aclnn_grid_sampler2d.cpp:177-184): the first phase succeeds, the launch
  // fails.
  if (kind == 2 && route == kRouteAiCpu && interpolation == 2) {
    e->launch_failure = "the AICPU kernel GridSampler2DGrad has no bicubic interpolation";
  }
  e->a = go; e->b = input; e->c = grid; e->out0 = gin; e->out1 = ggrid;
  e->interpolation = interpolation; e->padding = padding; e->align_corners = ac;
  e->mask[0] = m[0]; e->mask[1] = m[1];
  e->route = route;
  e->deterministic_kernel = deterministic;
  return kOk;
}

// aclrt[Ctx]SetSysParamOpt for ACL_OPT_DETERMINISTIC, levels [0, 4) (the
// runtime's aclSysParamOpt reference; api_c.cc rtSetSysParamOpt).
int SetDeterministicOpt(const char* fn, int32_t opt, int64_t value, bool context) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log(std::string(fn) + " opt=" + std::to_string(opt) + " value=" + std::to_string(value));
  int32_t code;
  if (Injected(fn, &code)) return code;
  if (opt != 0 || value < 0 || value > 3) {
    return Fail(kRtParamInvalid, std::string(fn) + ": bad args");
  }
  if (!context) {
    g_process_deterministic = value;
    return kOk;
  }
  SimContext* current = CurrentContext();
  if (current == nullptr) return Fail(kRtContextNull, std::string(fn) + ": no current context");
  current->deterministic_set = true;
  current->deterministic = value;
  return kOk;
}

// The second phase (CommonOpExecutorRun): consumes a non-repeatable executor
// whatever the outcome (opbase op_executor.cpp:991-995), checks the
// workspace, and runs the kernel on the stream. A kernel that reads or writes
// a tensor without data faults the device.
int32_t Launch(int kind, void* workspace, uint64_t size, aclOpExecutor* ex, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const std::string fn = kKindNames[kind];
  std::string kernel = "-";
  if (ex && g_executors.count(ex) && ex->compute) {
    kernel = ex->route == kRouteAiCpu ? "aicpu"
             : ex->deterministic_kernel ? "aicore-deterministic" : "aicore";
  }
  Log(fn + " executor=" + (ex && g_executors.count(ex) ? "E" + std::to_string(ex->id) : ex ? "stale" : "null") +
      " workspace_size=" + std::to_string(size) + (workspace ? " workspace=set" : " workspace=null") +
      " stream=" + StreamDesc(stream) + " kernel=" + kernel);
  if (ex == nullptr) return Fail(kNullptr, "null executor");
  if (g_executors.count(ex) == 0) {
    return Violation(kInvalid, "executor is not live: executors are single-use (launched already?)");
  }
  struct Consume {
    aclOpExecutor* e;
    ~Consume() {
      if (e->repeatable) return;
      g_executors.erase(e);
      delete e;
    }
  } consume{ex};
  int32_t code;
  if (Injected(fn.c_str(), &code)) return code;
  if (CurrentContext() == nullptr) return Fail(kRuntimeError, "no current context");
  if (!StreamUsable(stream)) return Fail(kRuntimeError, "stream is not a live aclrtStream");
  if (ex->kind != kind) return Fail(kInvalid, "executor belongs to " + std::string(kKindNames[ex->kind]));
  if (size != ex->workspace) return Fail(kInvalid, "workspaceSize differs from GetWorkspaceSize's");
  if (size > 0) {
    if (workspace == nullptr) return Fail(kNullptr, "null workspace");
    // The workspace must be writable memory of that size: touch both ends.
    static_cast<volatile char*>(workspace)[0] = 0x5a;
    static_cast<volatile char*>(workspace)[size - 1] = 0x5a;
  }
  if (!ex->compute) return kOk;
  if (ex->launch_failure[0] != '\0') return Fail(kInner, ex->launch_failure);
  std::vector<const aclTensor*> touched = {ex->a, ex->b};
  if (ex->c) touched.push_back(ex->c);
  if (kind < 2 || ex->mask[0]) touched.push_back(ex->out0);
  if (kind >= 2 && ex->mask[1]) touched.push_back(ex->out1);
  for (const aclTensor* t : touched) {
    if (!Live(t)) return Violation(kInvalid, "a tensor was destroyed before the launch");
    if (t->data == nullptr && Numel(t->view) > 0) {
      return Violation(kRuntimeError, "device fault: the kernel accessed " + Desc(t) +
                                          ", which has no data");
    }
  }
  double bias = 0;
  for (const std::string& key : {std::string(), fn}) {
    auto it = g_wrong.find(key);
    if (it != g_wrong.end()) bias += it->second;
  }
  Run(*ex, bias);
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
  t->data = tensor_data;  // may be null (aclCreateTensor.md's examples)
  t->id = g_next_id++;
  g_tensors.insert(t);
  Log("aclCreateTensor -> " + Desc(t) + " strides=" + Dims(t->strides) + " offset=" +
      std::to_string(offset) + " storage=" + Dims(t->storage));
  return t;
}

int32_t aclDestroyTensor(const aclTensor* t) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclDestroyTensor " + (t && g_tensors.count(t) ? "T" + std::to_string(t->id) : std::string("invalid")));
  if (t == nullptr) return kOk;
  if (g_tensors.erase(t) == 0) return Violation(kInvalid, "aclDestroyTensor: not a live tensor");
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
  if (g_arrays.erase(a) == 0) return Violation(kInvalid, "aclDestroyBoolArray: not a live array");
  delete a;
  return kOk;
}

// aclSetAclOpExecutorRepeatable.md: the caller then manages the executor: a
// launch no longer consumes it, and aclDestroyAclOpExecutor releases it.
int32_t aclSetAclOpExecutorRepeatable(aclOpExecutor* e) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclSetAclOpExecutorRepeatable " + (e && g_executors.count(e) ? "E" + std::to_string(e->id) : std::string("invalid")));
  if (e == nullptr) return Fail(kInnerNullptr, "null executor");
  if (g_executors.count(e) == 0) return Violation(kInner, "not a live executor");
  // A cache wrapper is neither of the executor kinds it knows:
  // ACLNN_ERR_INNER (acl_op_api.cpp:476-488).
  if (e->cache_wrap) return Fail(kInner, "not an executor that can be made repeatable");
  e->repeatable = true;
  return kOk;
}

// aclDestroyAclOpExecutor.md: only for executors made repeatable ("must be
// used together with aclSetAclOpExecutorRepeatable"); the second phase
// destroys the others itself.
int32_t aclDestroyAclOpExecutor(aclOpExecutor* e) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclDestroyAclOpExecutor " + (e && g_executors.count(e) ? "E" + std::to_string(e->id) : std::string("invalid")));
  if (e == nullptr) return Fail(kInnerNullptr, "null executor");
  if (g_executors.count(e) == 0) return Violation(kInner, "not a live executor");
  // A cache wrapper is deleted (acl_op_api.cpp:501-504).
  if (!e->repeatable && !e->cache_wrap) {
    return Violation(kInner, "aclDestroyAclOpExecutor on an executor that is not repeatable");
  }
  g_executors.erase(e);
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
  int32_t code;
  if (Injected("aclrtFree", &code)) return code;
  if (g_mallocs.erase(ptr) == 0) return Violation(kRtParamInvalid, "aclrtFree: not an aclrtMalloc'ed pointer");
  ::operator delete(ptr);
  return kOk;
}

int aclrtSynchronizeStream(void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclrtSynchronizeStream stream=" + StreamDesc(stream));
  int32_t code;
  if (Injected("aclrtSynchronizeStream", &code)) return code;
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
  if (CurrentContext() == nullptr) return Fail(kRtContextNull, "aclrtMemsetAsync: no current context");
  if (ptr == nullptr || count > max_count || !StreamUsable(stream)) {
    return Fail(kRtParamInvalid, "aclrtMemsetAsync: null pointer, count > maxCount or bad stream");
  }
  std::memset(ptr, value, count);
  return kOk;
}

// Contexts are per thread: aclrtCreateContext makes the new one current on
// the calling thread, aclrtSetCurrentContext changes it (the runtime's API
// reference, 05_context_management.md).
int aclrtCreateContext(void** context, int32_t device) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (context == nullptr) return Fail(kRtParamInvalid, "aclrtCreateContext: null pointer");
  auto* c = new SimContext{g_next_id++, device, false, 0};
  g_contexts.insert(c);
  t_context = c;
  *context = c;
  Log("aclrtCreateContext -> C" + std::to_string(c->id) + " device=" + std::to_string(device));
  return kOk;
}

int aclrtSetCurrentContext(void* context) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  auto* c = static_cast<SimContext*>(context);
  if (c != &g_primary && g_contexts.count(c) == 0) {
    return Fail(kRtParamInvalid, "aclrtSetCurrentContext: not a context");
  }
  t_context = c;
  return kOk;
}

int aclrtDestroyContext(void* context) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  auto* c = static_cast<SimContext*>(context);
  if (g_contexts.erase(c) == 0) return Fail(kRtParamInvalid, "aclrtDestroyContext: not a context");
  if (t_context == c) t_context = nullptr;
  delete c;
  return kOk;
}

int aclrtGetCurrentContext(void** context) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclrtGetCurrentContext");
  if (context == nullptr) return Fail(kRtParamInvalid, "aclrtGetCurrentContext: null pointer");
  SimContext* current = CurrentContext();
  if (current == nullptr) return Fail(kRtContextNull, "no context is current");
  *context = current;
  return kOk;
}

int aclrtGetDevice(int32_t* device) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (device == nullptr) return Fail(kRtParamInvalid, "aclrtGetDevice: null pointer");
  SimContext* current = CurrentContext();
  if (current == nullptr) return Fail(kRtContextNull, "no context is current");
  *device = current->device;
  return kOk;
}

const char* aclrtGetSocName() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_soc.empty() ? nullptr : g_soc.c_str();
}

// aclCANNPackageVersion: version[128], then four [64] parts and reserved[128].
int aclsysGetCANNVersion(int32_t package, char* version) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (version == nullptr || package != 0) return Fail(kRtParamInvalid, "aclsysGetCANNVersion: bad args");
  std::memset(version, 0, 128 + 4 * 64 + 128);
  const char* text = g_release == Release::kHead ? "head (ops-cv 6ae87653, opbase aa3cd74)"
                     : g_release == Release::kOpbaseC501b51
                         ? "opbase-c501b51 (ops-cv 6ae87653, opbase c501b51)"
                         : "8.1.RC1";
  std::snprintf(version, 128, "%s", text);
  return kOk;
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
  const SimContext* current = CurrentContext();
  if (current == nullptr) return Fail(kRtContextNull, "no context is current");
  if (!current->deterministic_set) return Fail(kRtOptNotSet, "option is not set");
  *value = current->deterministic;
  return kOk;
}

int aclrtCtxSetSysParamOpt(int32_t opt, int64_t value) {
  return SetDeterministicOpt("aclrtCtxSetSysParamOpt", opt, value, true);
}

int aclrtGetSysParamOpt(int32_t opt, int64_t* value) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Log("aclrtGetSysParamOpt opt=" + std::to_string(opt));
  if (value == nullptr || opt != 0) return Fail(kRtParamInvalid, "aclrtGetSysParamOpt: bad args");
  *value = g_process_deterministic;
  return kOk;
}

int aclrtSetSysParamOpt(int32_t opt, int64_t value) {
  return SetDeterministicOpt("aclrtSetSysParamOpt", opt, value, false);
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

void sim_set_wrong_results(const char* fn, double bias) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_wrong[fn ? fn : ""] = bias;
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

int64_t sim_violations() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_violations;
}

int sim_set_release(const char* name) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const std::string n = name ? name : "";
  if (n == "head") {
    g_release = Release::kHead;
  } else if (n == "opbase-c501b51") {
    g_release = Release::kOpbaseC501b51;
  } else if (n == "8.1.RC1") {
    g_release = Release::k81RC1;
  } else {
    return -1;
  }
  g_cached_kernel_deterministic.clear();
  return 0;
}

void sim_set_soc(const char* name) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_soc = name ? name : "";
}

void sim_set_default_context(bool current, int32_t device) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_primary_current = current;
  g_primary.device = device;
}

int64_t sim_get_context_deterministic() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_primary.deterministic_set ? g_primary.deterministic : -1;
}

void sim_set_context_deterministic(int64_t value) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_primary.deterministic_set = value >= 0;
  g_primary.deterministic = value >= 0 ? value : 0;
}

int64_t sim_get_process_deterministic() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_process_deterministic;
}

void sim_set_process_deterministic(int64_t value) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_process_deterministic = value;
}

void sim_reset() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_release = Release::kHead;
  g_soc = "Ascend910B2";
  g_primary_current = true;
  g_primary = SimContext{0, 0, false, 0};
  g_process_deterministic = 0;
  g_cached_kernel_deterministic.clear();
  g_op_cache.clear();
  g_wrong.clear();
  g_log.clear();
  g_err.clear();
  g_fail.clear();
  g_violations = 0;
}

}  // extern "C"
