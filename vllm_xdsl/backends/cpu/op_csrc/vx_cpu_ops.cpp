// The cpu provider's torch operator kernels: `VX_NAMESPACE::<op>` on the CPU dispatch key,
// calling the kernel library's launchers (vx_launchers.h) straight from the dispatcher.
//
// Why: the ops are defined in Python (backends/cuda/torch_ops.py: one schema per op, a
// fake, and a Python kernel on CompositeExplicitAutograd that checks the arguments and
// calls the launcher through ctypes), and that Python kernel costs 20-40 µs a call, more
// than the kernel itself on one token. These kernels take the common cases (contiguous
// rows, the default numerics or a variant already seen) and allocate and launch as the
// Python kernel does, with the same launcher arguments, so the same bits. Every other call
// (a zero point, a variant not seen yet, a view that is not contiguous, an argument the
// Python kernel refuses) is handed to the Python kernel through the dispatcher, unchanged:
// its checks and its messages stay the only ones. Arguments are found by name in the op's
// schema (defined once, in Python).
//
// Variants are not parsed here: the Python kernel parses a variant's text, and hands the
// launchers' struct to vx_ops_remember_variant (op_library.remember_variant), keyed by the
// scheme and the text; from then on the text finds that struct here.
//
// Built by backends/cpu/op_library.py with torch's headers; the -D constants below (the
// launchers' codes, the quant maxima, the act-and-mul ops and their producer codes) come
// from the Python modules that define them.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "vx_launchers.h"

#if !defined(VX_NAMESPACE) || !defined(VX_D_F32) || !defined(VX_S_GROUP_FP8) || \
    !defined(VX_FMAX_E4M3FN) || !defined(VX_CATALOG_OPS)
#error "build with backends/cpu/op_library.py (it defines the namespace and the codes)"
#endif

namespace {

using c10::IValue;
using torch::jit::Stack;

// The op's Python kernel (CompositeExplicitAutograd), on the same stack.
void python_kernel(const c10::OperatorHandle& op, Stack* stack) {
  c10::Dispatcher::singleton().callBoxedForDispatchKey(
      op, c10::DispatchKey::CompositeExplicitAutograd, stack);
}

// The positions of named arguments in an op's schema (looked up once per op).
template <size_t N> struct Args {
  std::array<size_t, N> at{};
  size_t count = 0;
  Args(const c10::OperatorHandle& op, const std::array<const char*, N>& names) {
    const auto& args = op.schema().arguments();
    count = args.size();
    for (size_t k = 0; k < N; ++k) {
      auto it = std::find_if(args.begin(), args.end(),
                             [&](const c10::Argument& a) { return a.name() == names[k]; });
      TORCH_CHECK(it != args.end(), op.schema().name(), ": no argument '", names[k],
                  "' in the schema the cpu operator kernels were written for");
      at[k] = static_cast<size_t>(it - args.begin());
    }
  }
  const IValue& operator()(const Stack& s, size_t k) const {
    return s[s.size() - count + at[k]];
  }
};

void finish(Stack* stack, size_t count, std::initializer_list<at::Tensor> outputs) {
  torch::jit::drop(*stack, count);
  for (const auto& t : outputs) stack->emplace_back(t);
}

void check(int rc, const c10::OperatorHandle& op) {
  TORCH_CHECK(rc == 0, op.schema().name(), ": ", vx_last_error());
}

int dtype_code(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return VX_D_F32;
    case at::kHalf: return VX_D_F16;
    case at::kBFloat16: return VX_D_BF16;
    default: return -1;
  }
}

// A tensor the fast paths take: on the CPU, row-major contiguous, an activation dtype.
bool plain(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.layout() == at::kStrided && !t.is_neg() &&
         t.is_contiguous() && dtype_code(t.scalar_type()) >= 0;
}

// x as rows: plain, at least one dimension, no empty row or row count.
bool rows_ok(const at::Tensor& x) { return plain(x) && x.dim() >= 1 && x.numel() > 0; }

// The weight the norm kernels take: none, or H values in x's dtype or float32.
bool weight_ok(const IValue& w, const at::Tensor& x, int64_t H) {
  if (w.isNone()) return true;
  if (!w.isTensor()) return false;
  const at::Tensor& t = w.toTensor();
  return plain(t) && t.numel() == H &&
         (t.scalar_type() == x.scalar_type() || t.scalar_type() == at::kFloat);
}

const void* weight_ptr(const IValue& w) {
  return w.isNone() ? nullptr : w.toTensor().const_data_ptr();
}

int weight_code(const IValue& w, const at::Tensor& x) {
  return dtype_code(w.isNone() ? x.scalar_type() : w.toTensor().scalar_type());
}

bool same_rows(const at::Tensor& a, const at::Tensor& x) {
  return plain(a) && a.sizes() == x.sizes() && a.scalar_type() == x.scalar_type();
}

// An optional scalar tensor (a scale or an upper bound): one value, as float32 [1].
bool scalar_ok(const IValue& v) {
  if (v.isNone()) return true;
  if (!v.isTensor()) return false;
  const at::Tensor& t = v.toTensor();
  return t.defined() && t.device().is_cpu() && t.layout() == at::kStrided && !t.is_neg() &&
         t.numel() == 1 && at::isFloatingType(t.scalar_type());
}

// Outputs: allocated without a dispatch (at::empty's CPU kernel, less the dispatcher).
at::Tensor empty(c10::IntArrayRef shape, at::ScalarType dtype) {
  return at::Tensor(at::detail::empty_cpu(shape, dtype));
}

// The scale as the Python kernel copies it (scale.to(float32, copy=True).reshape(1)).
at::Tensor f32_copy(const at::Tensor& t) {
  at::Tensor out = empty({1}, at::kFloat);
  const at::Tensor f = t.scalar_type() == at::kFloat ? t : t.to(at::kFloat);
  *out.mutable_data_ptr<float>() = *f.const_data_ptr<float>();
  return out;
}

// An int argument (a SymInt in the schema) with a value; false for a symbolic one.
bool int_arg(const IValue& v, int64_t* out) {
  if (!v.isInt()) return false;
  *out = v.toInt();
  return true;
}

// --- norms and act-and-mul ----------------------------------------------------------------

void rms_norm(const c10::OperatorHandle& op, Stack* stack) {
  static const Args<4> a(op, {"x", "weight", "epsilon", "variance_size"});
  const at::Tensor x = a(*stack, 0).toTensor();
  const IValue& w = a(*stack, 1);
  const IValue& vs = a(*stack, 3);
  const int64_t H = rows_ok(x) ? x.size(-1) : 0;
  int64_t var = H;
  if (!vs.isNone() && !int_arg(vs, &var)) return python_kernel(op, stack);
  if (H == 0 || !weight_ok(w, x, H) || var <= 0 || var > H) return python_kernel(op, stack);
  at::Tensor out = empty(x.sizes(), x.scalar_type());
  check(vx_rms_norm(out.data_ptr(), x.const_data_ptr(), weight_ptr(w), x.numel() / H, H, H, var,
                    static_cast<float>(a(*stack, 2).toDouble()), dtype_code(x.scalar_type()),
                    weight_code(w, x), nullptr), op);
  finish(stack, a.count, {out});
}

// fused_add_rms_norm (INPLACE false) and fused_add_rms_norm_ (writes x and residual).
template <bool INPLACE> void fused_add_rms_norm(const c10::OperatorHandle& op, Stack* stack) {
  static const Args<5> a(op, {"x", "residual", "weight", "epsilon", "rounded_sum"});
  const at::Tensor x = a(*stack, 0).toTensor();
  const at::Tensor r = a(*stack, 1).toTensor();
  const IValue& w = a(*stack, 2);
  const int64_t H = rows_ok(x) ? x.size(-1) : 0;
  if (H == 0 || !same_rows(r, x) || !weight_ok(w, x, H)) return python_kernel(op, stack);
  // In place, each element is read and then written by the same thread: aliasing is safe.
  at::Tensor out = INPLACE ? x : empty(x.sizes(), x.scalar_type());
  at::Tensor ro = INPLACE ? r : empty(x.sizes(), x.scalar_type());
  check(vx_fused_add_rms_norm(out.data_ptr(), ro.data_ptr(), x.const_data_ptr(),
                              r.const_data_ptr(), weight_ptr(w), x.numel() / H, H, H, H, H, H,
                              static_cast<float>(a(*stack, 3).toDouble()),
                              a(*stack, 4).toBool() ? 1 : 0, dtype_code(x.scalar_type()),
                              weight_code(w, x), nullptr), op);
  if (INPLACE) finish(stack, a.count, {});
  else finish(stack, a.count, {out, ro});
}

// The act-and-mul operands: x = [gate | up] (up None) or x and up of one shape and dtype.
// Sets d (the output row) and returns false where the Python kernel must decide.
bool act_operands(const at::Tensor& x, const IValue& up, int64_t* d) {
  if (!rows_ok(x)) return false;
  const int64_t h = x.size(-1);
  if (up.isNone()) {
    *d = h / 2;
    return h % 2 == 0;
  }
  *d = h;
  return up.isTensor() && same_rows(up.toTensor(), x);
}

std::vector<int64_t> with_last(const at::Tensor& x, int64_t d) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = d;
  return shape;
}

template <int ACT> void act_and_mul(const c10::OperatorHandle& op, Stack* stack) {
  static const Args<2> a(op, {"x", "up"});
  const at::Tensor x = a(*stack, 0).toTensor();
  const IValue& up = a(*stack, 1);
  int64_t d = 0;
  if (!act_operands(x, up, &d)) return python_kernel(op, stack);
  at::Tensor out = empty(with_last(x, d), x.scalar_type());
  const void* u = up.isNone() ? nullptr : up.toTensor().const_data_ptr();
  check(vx_act_and_mul(out.data_ptr(), x.const_data_ptr(), u, x.numel() / x.size(-1), d,
                       x.size(-1), up.isNone() ? 0 : d, ACT, dtype_code(x.scalar_type()),
                       nullptr), op);
  finish(stack, a.count, {out});
}

// --- quantization ---------------------------------------------------------------------------

// The variants seen so far: the launchers' struct (variant.cuh's Variant, as bytes: only its
// address is passed on) and the dtype code of the dynamic scales it stores. Entries are
// never removed, so a found entry stays valid; the table stops growing at kMaxVariants.
struct KnownVariant {
  std::unique_ptr<std::max_align_t[]> bytes;
  int scale_dtype;
};
constexpr size_t kMaxVariants = 4096;
std::shared_mutex variants_lock;
std::unordered_map<std::string, KnownVariant>& known_variants() {
  static std::unordered_map<std::string, KnownVariant> table;
  return table;
}

// What the struct depends on beside the text: the scheme, fp8's fnuz flavour (its maximum),
// and the absmax floor of per-group schemes.
std::string variant_key(int scheme, int fnuz, float group_eps, std::string_view text) {
  if (scheme != VX_S_GROUP_FP8) group_eps = 0.f;
  std::string key(sizeof(int) * 2 + sizeof(float), '\0');
  std::memcpy(&key[0], &scheme, sizeof(int));
  std::memcpy(&key[sizeof(int)], &fnuz, sizeof(int));
  std::memcpy(&key[sizeof(int) * 2], &group_eps, sizeof(float));
  key.append(text);
  return key;
}

const KnownVariant* find_variant(int scheme, int fnuz, float group_eps, std::string_view text) {
  const std::string key = variant_key(scheme, fnuz, group_eps, text);
  std::shared_lock<std::shared_mutex> hold(variants_lock);
  const auto& table = known_variants();
  const auto it = table.find(key);
  return it == table.end() ? nullptr : &it->second;
}

at::ScalarType scale_type(int code) {
  return code == VX_D_BF16 ? at::kBFloat16 : code == VX_D_F16 ? at::kHalf : at::kFloat;
}

// A quant scheme without a zero point, as the launchers take it (VX_QUANT_ARGS), and the
// scales tensor the op returns.
struct Quant {
  at::ScalarType dtype;
  int scheme;
  int fnuz = 0;
  float qmax = 0.f;
  int64_t group_size = 0;
  bool column_major = false;
  int ue8m0 = 0;
  float group_eps = 0.f;  // read by per-group schemes only
  const KnownVariant* variant = nullptr;  // null: the default numerics
  at::Tensor scales;       // static: the fp32 copy of the scale the kernel reads
  at::Tensor scale_ub;     // per-token fp8: its fp32 copy, or undefined

  // The variant the text names (after the scheme is known); false for one not seen yet.
  bool find(std::string_view text) {
    if (text.empty()) return true;
    variant = find_variant(scheme, fnuz, group_eps, text);
    return variant != nullptr;
  }

  // The launchers' quant arguments, after x's rows and hidden size are known. Dynamic
  // scales are stored in the variant's scale dtype.
  bool prepare(const at::Tensor& x, int64_t rows, int64_t hidden) {
    const at::ScalarType sd = scale_type(variant ? variant->scale_dtype : VX_D_F32);
    if (scheme == VX_S_GROUP_FP8) {
      if (group_size <= 0 || hidden % group_size) return false;
      const int64_t g = hidden / group_size;
      // Column-major: [rows, g] over a [g, rows] buffer (the Python kernel's empty(g, rows).t()).
      scales = column_major ? at::Tensor(at::detail::empty_strided_cpu({rows, g}, {1, rows}, sd))
                            : empty({rows, g}, sd);
    } else if (scheme == VX_S_TOKEN_FP8 || scheme == VX_S_TOKEN_I8) {
      scales = empty({rows, 1}, sd);
    }
    return true;
  }
  float* scales_ptr() { return scales.defined() ? static_cast<float*>(scales.data_ptr()) : nullptr; }
  const vx::Variant* variant_ptr() const {
    return variant ? reinterpret_cast<const vx::Variant*>(variant->bytes.get()) : nullptr;
  }
  const float* scale_ptr() const {
    return scheme == VX_S_STATIC_FP8 || scheme == VX_S_STATIC_I8 ? scales.const_data_ptr<float>()
                                                                  : nullptr;
  }
  const float* ub_ptr() const { return scale_ub.defined() ? scale_ub.const_data_ptr<float>() : nullptr; }
  int64_t stride_t() const { return scheme == VX_S_GROUP_FP8 || scheme == VX_S_TOKEN_FP8 ||
                                    scheme == VX_S_TOKEN_I8 ? scales.stride(0) : 0; }
  int64_t stride_g() const { return scheme == VX_S_GROUP_FP8 ? scales.stride(1) : 0; }
};

#define VX_QUANT_VALUES(qs)                                                                \
  (qs).scale_ptr(), (qs).ub_ptr(), (qs).scheme, (qs).fnuz, (qs).qmax, (qs).group_size,    \
      (qs).stride_t(), (qs).stride_g(), (qs).ue8m0, (qs).group_eps, (qs).variant_ptr()

// The quant dtype's code and maximum; false for a dtype the Python kernel must refuse.
bool quant_dtype(at::ScalarType t, Quant* qs) {
  qs->dtype = t;
  switch (t) {
    case at::kFloat8_e4m3fn: qs->qmax = VX_FMAX_E4M3FN; return true;
    case at::kFloat8_e4m3fnuz: qs->qmax = VX_FMAX_E4M3FNUZ; qs->fnuz = 1; return true;
    case at::kChar: qs->qmax = VX_IMAX; return true;
    default: return false;
  }
}

bool is_fp8(const Quant& qs) { return qs.dtype != at::kChar; }

// The unfused quants, by form (op_library.py's CPP_FORMS names each op's).
enum Form { STATIC_FP8, STATIC_I8, TOKEN_FP8, TOKEN_I8, GROUP_FP8, TENSOR_FP8 };

// The arguments of the unfused quants' schemas (each form has some of them).
struct QuantArgs {
  static constexpr size_t kAbsent = SIZE_MAX;
  size_t count, x, scale, scale_ub, fp8_dtype, group_size, column_major, ue8m0, eps, zero_point,
      variant;
  explicit QuantArgs(const c10::OperatorHandle& op) {
    const auto& args = op.schema().arguments();
    count = args.size();
    auto at = [&](const char* name) {
      for (size_t i = 0; i < args.size(); ++i)
        if (args[i].name() == name) return i;
      return kAbsent;
    };
    x = at("x"), scale = at("scale"), scale_ub = at("scale_ub"), fp8_dtype = at("fp8_dtype");
    group_size = at("group_size"), column_major = at("column_major_scales");
    ue8m0 = at("use_ue8m0"), eps = at("eps"), zero_point = at("zero_point");
    variant = at("variant");
    TORCH_CHECK(x != kAbsent && zero_point != kAbsent && variant != kAbsent, op.schema().name(),
                ": not the quant schema the cpu operator kernels were written for");
  }
  const IValue* operator()(const Stack& s, size_t i) const {
    return i == kAbsent ? nullptr : &s[s.size() - count + i];
  }
};

template <Form FORM> void unfused_quant(const c10::OperatorHandle& op, Stack* stack) {
  static const QuantArgs a(op);
  const size_t count = a.count;
  const at::Tensor x = a(*stack, a.x)->toTensor();
  const std::string_view variant = a(*stack, a.variant)->toStringView();
  if (!rows_ok(x) || !a(*stack, a.zero_point)->isNone() ||
      (FORM == TENSOR_FP8 && !variant.empty()))
    return python_kernel(op, stack);
  Quant qs;
  const IValue* fp8 = a(*stack, a.fp8_dtype);
  if (!quant_dtype(fp8 != nullptr ? fp8->toScalarType() : at::kChar, &qs) ||
      is_fp8(qs) != (fp8 != nullptr))
    return python_kernel(op, stack);
  const int64_t H = x.size(-1), rows = x.numel() / H;
  switch (FORM) {
    case STATIC_FP8: case STATIC_I8: {
      const IValue& scale = *a(*stack, a.scale);
      if (scale.isNone() || !scalar_ok(scale)) return python_kernel(op, stack);
      qs.scheme = FORM == STATIC_FP8 ? VX_S_STATIC_FP8 : VX_S_STATIC_I8;
      qs.scales = f32_copy(scale.toTensor());
      break;
    }
    case TOKEN_FP8: {
      const IValue& ub = *a(*stack, a.scale_ub);
      if (!scalar_ok(ub)) return python_kernel(op, stack);
      if (!ub.isNone()) qs.scale_ub = f32_copy(ub.toTensor());
      qs.scheme = VX_S_TOKEN_FP8;
      break;
    }
    case TOKEN_I8: qs.scheme = VX_S_TOKEN_I8; break;
    case GROUP_FP8:
      qs.scheme = VX_S_GROUP_FP8;
      if (!int_arg(*a(*stack, a.group_size), &qs.group_size)) return python_kernel(op, stack);
      qs.column_major = a(*stack, a.column_major)->toBool();
      qs.ue8m0 = a(*stack, a.ue8m0)->toBool() ? 1 : 0;
      qs.group_eps = static_cast<float>(a(*stack, a.eps)->toDouble());
      break;
    case TENSOR_FP8: {
      at::Tensor q = empty(x.sizes(), qs.dtype);
      at::Tensor scale = empty({1}, at::kFloat);
      check(vx_dynamic_scaled_fp8_quant(q.data_ptr(), scale.mutable_data_ptr<float>(),
                                        x.const_data_ptr(), rows, H, H, qs.fnuz, qs.qmax,
                                        nullptr, scale.mutable_data_ptr<float>(),
                                        dtype_code(x.scalar_type()), nullptr), op);
      return finish(stack, count, {q, scale});
    }
  }
  if (!qs.find(variant) || !qs.prepare(x, rows, H)) return python_kernel(op, stack);
  at::Tensor q = empty(x.sizes(), qs.dtype);
  check(vx_quant(q.data_ptr(), qs.scales_ptr(), x.const_data_ptr(), rows, H, H,
                 VX_QUANT_VALUES(qs),
                 dtype_code(x.scalar_type()), nullptr), op);
  if (FORM == STATIC_FP8 || FORM == STATIC_I8) finish(stack, count, {q});
  else finish(stack, count, {q, qs.scales});
}

// --- fused ----------------------------------------------------------------------------------

// The flat scheme of a fused op (catalog SCHEME_PARAMS), read by name.
constexpr std::array<const char*, 10> kScheme = {
    "scale", "scale_ub", "quant_dtype", "static", "granularity", "group_size",
    "column_major_scales", "use_ue8m0", "group_eps", "variant"};

// The scheme of a fused op's flat arguments where it is a valid one (scheme_of would accept
// it) with the default numerics or a variant seen before; false for everything else.
template <size_t N> bool fused_scheme(const Args<N>& a, const Stack& s, size_t first, Quant* qs) {
  const IValue &scale = a(s, first), &ub = a(s, first + 1);
  if (!quant_dtype(a(s, first + 2).toScalarType(), qs)) return false;
  const bool is_static = a(s, first + 3).toBool();
  const std::string_view granularity = a(s, first + 4).toStringView();
  if (!int_arg(a(s, first + 5), &qs->group_size)) return false;
  qs->column_major = a(s, first + 6).toBool();
  qs->ue8m0 = a(s, first + 7).toBool() ? 1 : 0;
  qs->group_eps = static_cast<float>(a(s, first + 8).toDouble());
  const bool group_opts = qs->group_size != 0 || qs->column_major || qs->ue8m0;
  if (!scalar_ok(scale) || !scalar_ok(ub) || is_static != !scale.isNone()) return false;
  if (!ub.isNone() && !(is_fp8(*qs) && granularity == "token")) return false;
  if (granularity == "tensor") {
    if (!is_static || group_opts) return false;
    qs->scheme = is_fp8(*qs) ? VX_S_STATIC_FP8 : VX_S_STATIC_I8;
    qs->scales = f32_copy(scale.toTensor());
  } else if (granularity == "token") {
    if (is_static || group_opts) return false;
    qs->scheme = is_fp8(*qs) ? VX_S_TOKEN_FP8 : VX_S_TOKEN_I8;
    if (!ub.isNone()) qs->scale_ub = f32_copy(ub.toTensor());
  } else if (granularity == "group") {
    if (is_static || !is_fp8(*qs) || qs->group_size <= 0) return false;
    qs->scheme = VX_S_GROUP_FP8;
  } else {
    return false;
  }
  return qs->find(a(s, first + 9).toStringView());
}

void rms_norm_quant(const c10::OperatorHandle& op, Stack* stack) {
  static const Args<14> a(op, {"x", "weight", "epsilon", "zero_point", kScheme[0], kScheme[1],
                               kScheme[2], kScheme[3], kScheme[4], kScheme[5], kScheme[6],
                               kScheme[7], kScheme[8], kScheme[9]});
  const at::Tensor x = a(*stack, 0).toTensor();
  const IValue& w = a(*stack, 1);
  const int64_t H = rows_ok(x) ? x.size(-1) : 0, rows = H ? x.numel() / H : 0;
  Quant qs;
  if (H == 0 || !weight_ok(w, x, H) || !a(*stack, 3).isNone() ||
      !fused_scheme(a, *stack, 4, &qs) || !qs.prepare(x, rows, H))
    return python_kernel(op, stack);
  at::Tensor q = empty(x.sizes(), qs.dtype);
  check(vx_rms_norm_quant(q.data_ptr(), qs.scales_ptr(), x.const_data_ptr(),
                          weight_ptr(w), rows, H, H, static_cast<float>(a(*stack, 2).toDouble()),
                          VX_QUANT_VALUES(qs), dtype_code(x.scalar_type()), weight_code(w, x),
                          nullptr), op);
  finish(stack, a.count, {q, qs.scales});
}

// fused_add_rms_norm_quant (INPLACE false: returns q, residual_out, scales) and
// fused_add_rms_norm_quant_ (writes residual_out into residual; returns q, scales).
template <bool INPLACE> void fused_add_rms_norm_quant(const c10::OperatorHandle& op, Stack* stack) {
  static const Args<16> a(op, {"x", "residual", "weight", "epsilon", "rounded_sum", "zero_point",
                               kScheme[0], kScheme[1], kScheme[2], kScheme[3], kScheme[4],
                               kScheme[5], kScheme[6], kScheme[7], kScheme[8], kScheme[9]});
  const at::Tensor x = a(*stack, 0).toTensor();
  const at::Tensor r = a(*stack, 1).toTensor();
  const IValue& w = a(*stack, 2);
  const int64_t H = rows_ok(x) ? x.size(-1) : 0, rows = H ? x.numel() / H : 0;
  Quant qs;
  if (H == 0 || !same_rows(r, x) || !weight_ok(w, x, H) || !a(*stack, 5).isNone() ||
      !fused_scheme(a, *stack, 6, &qs) || !qs.prepare(x, rows, H))
    return python_kernel(op, stack);
  at::Tensor q = empty(x.sizes(), qs.dtype);
  at::Tensor ro = INPLACE ? r : empty(x.sizes(), x.scalar_type());
  check(vx_fused_add_rms_norm_quant(q.data_ptr(), ro.data_ptr(), qs.scales_ptr(),
                                    x.const_data_ptr(), r.const_data_ptr(), weight_ptr(w), rows,
                                    H, H, H, static_cast<float>(a(*stack, 3).toDouble()),
                                    a(*stack, 4).toBool() ? 1 : 0, VX_QUANT_VALUES(qs),
                                    dtype_code(x.scalar_type()), weight_code(w, x), nullptr), op);
  if (INPLACE) finish(stack, a.count, {q, qs.scales});
  else finish(stack, a.count, {q, ro, qs.scales});
}

template <int ACT> void act_and_mul_quant(const c10::OperatorHandle& op, Stack* stack) {
  static const Args<12> a(op, {"x", "up", kScheme[0], kScheme[1], kScheme[2], kScheme[3],
                               kScheme[4], kScheme[5], kScheme[6], kScheme[7], kScheme[8],
                               kScheme[9]});
  static const size_t zp = Args<1>(op, {"zero_point"}).at[0];
  const at::Tensor x = a(*stack, 0).toTensor();
  const IValue& up = a(*stack, 1);
  int64_t d = 0;
  Quant qs;
  if (!act_operands(x, up, &d) || !(*stack)[stack->size() - a.count + zp].isNone() ||
      !fused_scheme(a, *stack, 2, &qs))
    return python_kernel(op, stack);
  const int64_t rows = x.numel() / x.size(-1);
  if (!qs.prepare(x, rows, d)) return python_kernel(op, stack);
  at::Tensor q = empty(with_last(x, d), qs.dtype);
  const void* u = up.isNone() ? nullptr : up.toTensor().const_data_ptr();
  check(vx_act_and_mul_quant(q.data_ptr(), qs.scales_ptr(), x.const_data_ptr(), u,
                             rows, d, x.size(-1), up.isNone() ? 0 : d, ACT, VX_QUANT_VALUES(qs),
                             dtype_code(x.scalar_type()), nullptr), op);
  finish(stack, a.count, {q, qs.scales});
}

template <void (*F)(const c10::OperatorHandle&, Stack*)> torch::CppFunction boxed() {
  return torch::CppFunction::makeFromBoxedFunction<F>();
}

}  // namespace

// Called by op_library.remember_variant (ctypes): the launchers' struct of a variant (`size`
// bytes), for the scheme and the text the Python kernel parsed. Returns 0, or 1 when the
// table is full (the text then keeps reaching the Python kernel).
extern "C" int vx_ops_remember_variant(int scheme, int fnuz, float group_eps, const char* text,
                                       const void* variant, int64_t size, int scale_dtype) {
  std::string key = variant_key(scheme, fnuz, group_eps, text);
  std::unique_lock<std::shared_mutex> hold(variants_lock);
  auto& table = known_variants();
  if (table.count(key)) return 0;
  if (table.size() >= kMaxVariants) return 1;
  const size_t words = (static_cast<size_t>(size) + sizeof(std::max_align_t) - 1) /
                       sizeof(std::max_align_t);
  KnownVariant entry{std::make_unique<std::max_align_t[]>(words), scale_dtype};
  std::memcpy(entry.bytes.get(), variant, static_cast<size_t>(size));
  table.emplace(std::move(key), std::move(entry));
  return 0;
}

TORCH_LIBRARY_IMPL(VX_NAMESPACE, CPU, m) {
  m.impl("rms_norm", boxed<rms_norm>());
  m.impl("fused_add_rms_norm", boxed<fused_add_rms_norm<false>>());
  m.impl("fused_add_rms_norm_", boxed<fused_add_rms_norm<true>>());
  m.impl("rms_norm_quant", boxed<rms_norm_quant>());
  m.impl("fused_add_rms_norm_quant", boxed<fused_add_rms_norm_quant<false>>());
  m.impl("fused_add_rms_norm_quant_", boxed<fused_add_rms_norm_quant<true>>());
  // The families' members, from the catalog: each op's name and its kernel.
#define X(name, kernel) m.impl(#name, boxed<kernel>());
  VX_CATALOG_OPS
#undef X
}
