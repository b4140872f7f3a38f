// The element-wise work of attnmt/model/fused.py's loops in fp32 on the CPU, each formula in one
// pass over memory where torch runs several operations that each read and write whole tensors:
//
//   gru_forward      r, z = sigmoid(gi_rz + gh_rz)   n = tanh(gi_n + r gh_n)   q' = (1 - z) n + z q
//   gru_backward     d gi, d gh and the z d q' share of d q, from d q' and what forward kept
//   energy_forward   s_i = v^T e_i with e_i = tanh(W h_i + U q), keeping e for the backward
//   energy_backward  d v += sum_i d s_i e_i;  d (U q) = v * sum_i d s_i (1 - e_i^2);  and
//                    d s e^2 (B, S, A) added to a sum over steps, from which fused.py forms
//                    d (W h) = v * sum_t d s (1 - e^2) once for all steps
//   softmax_xent     the cross-entropy of a block of logits with label smoothing, summed, and
//                    its gradient p - q written over the logits (attnmt/train/blockwise.py)
//
// The matrix products stay in torch. attnmt/model/native.py builds and loads this file.
// Shapes: B batch rows, H hidden width, S source length, A attention width. Every tensor is
// fp32 on the CPU with its last dimension contiguous; rows may have any stride.

#include <ATen/Parallel.h>
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace {

using at::Tensor;

// exp, sigmoid and tanh written branch-free (selects, not jumps), so that -O3 vectorises the
// loops that call them (the C library's are scalar calls); NaN stays NaN. exp: Cephes' single
// precision polynomial, within 2 units in the last place. tanh: Eigen's rational approximation
// for float, within 3e-7 of the exact value.
inline float exp_fast(float x) {
  x = x < -87.3f ? -87.3f : x;  // comparisons, not fmin/fmax: those would turn NaN into a bound
  x = x > 88.3f ? 88.3f : x;
  float n = std::floor(x * 1.44269504088896341f + 0.5f);  // x = n ln 2 + r, |r| <= ln 2 / 2
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;  // e^r
  uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;  // 2^n
  return p * __builtin_bit_cast(float, bits);
}

inline float sigmoid_fast(float x) { return 1.0f / (1.0f + exp_fast(-x)); }

inline float tanh_fast(float x) {
  float c = x < -7.90531110763549805f ? -7.90531110763549805f : x;  // beyond, tanh rounds to +-1
  c = c > 7.90531110763549805f ? 7.90531110763549805f : c;
  float s = c * c;
  float p = -2.76076847742355e-16f;  // odd numerator: c (alpha_1 + alpha_3 c^2 + ... )
  p = p * s + 2.00018790482477e-13f;
  p = p * s - 8.60467152213735e-11f;
  p = p * s + 5.12229709037114e-08f;
  p = p * s + 1.48572235717979e-05f;
  p = p * s + 6.37261928875436e-04f;
  p = p * s + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;  // even denominator
  q = q * s + 1.18534705686654e-04f;
  q = q * s + 2.26843463243900e-03f;
  q = q * s + 4.89352518554385e-03f;
  return std::fabs(x) < 0.0004f ? x : c * p / q;  // tanh x = x below 0.0004, to float precision
}

// Rows of B run in parallel on torch's threads in chunks of at least this many elements (its
// own element-wise operations' grain): smaller chunks cost more to hand out than they save.
constexpr int64_t GRAIN = 32768;

int64_t grain_rows(int64_t width) {
  return std::max<int64_t>(1, GRAIN / std::max<int64_t>(1, width));
}

// Row b of a 2-D tensor (rows of any stride).
inline float* row(const Tensor& t, int64_t b) { return t.data_ptr<float>() + b * t.stride(0); }

void check(const Tensor& t, const char* name, int64_t dims) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == at::kFloat, name,
              ": expected fp32 on the CPU, got ", t.scalar_type(), " on ", t.device());
  TORCH_CHECK(t.dim() == dims, name, ": expected ", dims, " dimensions, got ", t.dim());
  TORCH_CHECK(t.stride(dims - 1) == 1 || t.size(dims - 1) <= 1, name,
              ": its last dimension must be contiguous");
}

void check_shape(const Tensor& t, const char* name, at::IntArrayRef shape) {
  TORCH_CHECK(t.sizes() == shape, name, ": expected shape ", shape, ", got ", t.sizes());
}

// A matrix of the GRU kernels: its name and its width (its rows are the batch's).
struct Operand {
  const Tensor& tensor;
  const char* name;
  int64_t width;
};

// Each operand fp32 on the CPU, of shape (batch, its width).
void check_rows(int64_t batch, std::initializer_list<Operand> operands) {
  for (const Operand& operand : operands) {
    check(operand.tensor, operand.name, 2);
    check_shape(operand.tensor, operand.name, {batch, operand.width});
  }
}

// One GRU step from gi, gh (B, 3H) and q (B, H): q' into out (B, H), and what the backward
// reads into rz (B, 2H), n (B, H) and hn = gh_n (B, H).
void gru_forward(const Tensor& gi, const Tensor& gh, const Tensor& query, Tensor rz, Tensor n,
                 Tensor hn, Tensor out) {
  check(query, "query", 2);
  const int64_t batch = query.size(0), hidden = query.size(1);
  check_rows(batch, {{gi, "gi", 3 * hidden},
                     {gh, "gh", 3 * hidden},
                     {rz, "rz", 2 * hidden},
                     {n, "n", hidden},
                     {hn, "hn", hidden},
                     {out, "out", hidden}});
  at::parallel_for(0, batch, grain_rows(8 * hidden), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* gi_b = row(gi, b);
      const float* gh_b = row(gh, b);
      const float* q_b = row(query, b);
      float* rz_b = row(rz, b);
      float* n_b = row(n, b);
      float* hn_b = row(hn, b);
      float* out_b = row(out, b);
#pragma omp simd
      for (int64_t j = 0; j < hidden; ++j) {
        float r = sigmoid_fast(gi_b[j] + gh_b[j]);
        float z = sigmoid_fast(gi_b[hidden + j] + gh_b[hidden + j]);
        float h = gh_b[2 * hidden + j];
        float nj = tanh_fast(gi_b[2 * hidden + j] + r * h);
        rz_b[j] = r;
        rz_b[hidden + j] = z;
        n_b[j] = nj;
        hn_b[j] = h;
        out_b[j] = nj + z * (q_b[j] - nj);
      }
    }
  });
}

// gru_forward's backward for d q' (B, H): d gi and d gh (B, 3H), and into grad_query (B, H) the
// part of d q that skips the products, z d q' (the rest is d gh W_hh).
void gru_backward(const Tensor& grad_out, const Tensor& query, const Tensor& rz, const Tensor& n,
                  const Tensor& hn, Tensor grad_gi, Tensor grad_gh, Tensor grad_query) {
  check(query, "query", 2);
  const int64_t batch = query.size(0), hidden = query.size(1);
  check_rows(batch, {{grad_out, "grad_out", hidden},
                     {rz, "rz", 2 * hidden},
                     {n, "n", hidden},
                     {hn, "hn", hidden},
                     {grad_gi, "grad_gi", 3 * hidden},
                     {grad_gh, "grad_gh", 3 * hidden},
                     {grad_query, "grad_query", hidden}});
  at::parallel_for(0, batch, grain_rows(12 * hidden), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* g_b = row(grad_out, b);
      const float* q_b = row(query, b);
      const float* rz_b = row(rz, b);
      const float* n_b = row(n, b);
      const float* hn_b = row(hn, b);
      float* gi_b = row(grad_gi, b);
      float* gh_b = row(grad_gh, b);
      float* gq_b = row(grad_query, b);
#pragma omp simd
      for (int64_t j = 0; j < hidden; ++j) {
        float g = g_b[j], r = rz_b[j], z = rz_b[hidden + j], nj = n_b[j];
        float grad_n = g * (1.0f - z) * (1.0f - nj * nj);  // d (gi_n + r gh_n)
        float grad_r = grad_n * hn_b[j] * r * (1.0f - r);   // d (gi_r + gh_r)
        float grad_z = g * (q_b[j] - nj) * z * (1.0f - z);  // d (gi_z + gh_z)
        gi_b[j] = grad_r;
        gi_b[hidden + j] = grad_z;
        gi_b[2 * hidden + j] = grad_n;
        gh_b[j] = grad_r;
        gh_b[hidden + j] = grad_z;
        gh_b[2 * hidden + j] = grad_n * r;
        gq_b[j] = g * z;
      }
    }
  });
}

// The additive scorer's scores (B, S) for W h (B, S, A), U q (B, A) and v (A,), each e = tanh(W h
// + U q) kept in energy (B, S, A). No mask: the caller masks the scores.
Tensor energy_forward(const Tensor& wh, const Tensor& uq, const Tensor& v, Tensor energy) {
  check(wh, "wh", 3);
  TORCH_CHECK(wh.is_contiguous() && energy.is_contiguous(), "wh and energy must be contiguous");
  const int64_t batch = wh.size(0), length = wh.size(1), attn = wh.size(2);
  check(uq, "uq", 2);
  check_shape(uq, "uq", {batch, attn});
  check(v, "v", 1);
  check_shape(v, "v", {attn});
  check(energy, "energy", 3);
  check_shape(energy, "energy", wh.sizes());
  Tensor scores = at::empty({batch, length}, wh.options());
  const float* v_ = v.data_ptr<float>();
  const float* wh_ = wh.data_ptr<float>();
  float* energy_ = energy.data_ptr<float>();
  float* scores_ = scores.data_ptr<float>();
  at::parallel_for(0, batch, grain_rows(length * attn), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* uq_b = row(uq, b);
      for (int64_t i = 0; i < length; ++i) {
        const float* wh_bi = wh_ + (b * length + i) * attn;
        float* e_bi = energy_ + (b * length + i) * attn;
        float score = 0.0f;
#pragma omp simd reduction(+ : score)
        for (int64_t a = 0; a < attn; ++a) {
          float e = tanh_fast(wh_bi[a] + uq_b[a]);
          e_bi[a] = e;
          score += v_[a] * e;
        }
        scores_[b * length + i] = score;
      }
    }
  });
  return scores;
}

// energy_forward's backward for d s (B, S) and its kept e (B, S, A): d v added into grad_v (A,),
// d (U q) = v * sum_i d s_i (1 - e_i^2) into grad_uq (B, A), and d s e^2 added into
// grad_energy_sum (B, S, A), from which the caller forms d (W h) over all steps at once.
void energy_backward(const Tensor& grad_scores, const Tensor& energy, const Tensor& v,
                     Tensor grad_energy_sum, Tensor grad_uq, Tensor grad_v) {
  check(energy, "energy", 3);
  TORCH_CHECK(energy.is_contiguous() && grad_energy_sum.is_contiguous() &&
                  grad_scores.is_contiguous(),
              "energy, grad_energy_sum and grad_scores must be contiguous");
  const int64_t batch = energy.size(0), length = energy.size(1), attn = energy.size(2);
  check(grad_scores, "grad_scores", 2);
  check_shape(grad_scores, "grad_scores", {batch, length});
  check(v, "v", 1);
  check_shape(v, "v", {attn});
  check(grad_energy_sum, "grad_energy_sum", 3);
  check_shape(grad_energy_sum, "grad_energy_sum", energy.sizes());
  check(grad_uq, "grad_uq", 2);
  check_shape(grad_uq, "grad_uq", {batch, attn});
  check(grad_v, "grad_v", 1);
  check_shape(grad_v, "grad_v", {attn});
  const float* v_ = v.data_ptr<float>();
  const float* grad_scores_ = grad_scores.data_ptr<float>();
  const float* energy_ = energy.data_ptr<float>();
  float* grad_energy_sum_ = grad_energy_sum.data_ptr<float>();
  // d v sums over every row: each chunk of rows sums its own, added in chunk order afterwards,
  // so that the result does not depend on which thread finishes first.
  const int64_t rows = grain_rows(length * attn);
  const int64_t chunks = (batch + rows - 1) / rows;
  std::vector<float> partial_v(chunks * attn, 0.0f);
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      float* pv = partial_v.data() + c * attn;
      for (int64_t b = c * rows; b < std::min(batch, (c + 1) * rows); ++b) {
        float* guq_b = row(grad_uq, b);
        for (int64_t a = 0; a < attn; ++a) guq_b[a] = 0.0f;
        for (int64_t i = 0; i < length; ++i) {
          const float ds = grad_scores_[b * length + i];
          const float* e_bi = energy_ + (b * length + i) * attn;
          float* acc_bi = grad_energy_sum_ + (b * length + i) * attn;
#pragma omp simd
          for (int64_t a = 0; a < attn; ++a) {
            float e = e_bi[a], dse = ds * e;
            pv[a] += dse;
            acc_bi[a] += dse * e;
            guq_b[a] += ds - dse * e;
          }
        }
        for (int64_t a = 0; a < attn; ++a) guq_b[a] *= v_[a];
      }
    }
  });
  float* gv = grad_v.data_ptr<float>();
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t a = 0; a < attn; ++a) gv[a] += partial_v[c * attn + a];
}

// The summed cross-entropy with label smoothing s of logits x (R, V) against target (R,) (int64),
// returned, with its gradient written over the logits and added, summed over the rows, into
// grad_bias (V,). For a row, with log p_j = x_j - lse, lse = log sum_j e^x_j:
//   loss = -(1 - s) log p_t - (s / V) sum_j log p_j
//   d loss / d x_j = p_j - s / V - (1 - s) [j = t]
// Each row is read three times (max and sum, sum of e^(x - max), the gradient) while it is in
// the cache, and written once: torch's log_softmax, exp_, scatter_, sub_ and sums each pass over
// the whole block.
double softmax_xent(Tensor logits, const Tensor& target, double smoothing, Tensor grad_bias) {
  check(logits, "logits", 2);
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  TORCH_CHECK(target.device().is_cpu() && target.scalar_type() == at::kLong && target.dim() == 1 &&
                  target.size(0) == rows,
              "target: expected ", rows, " int64 ids on the CPU, got ", target.sizes(), " ",
              target.scalar_type());
  check(grad_bias, "grad_bias", 1);
  check_shape(grad_bias, "grad_bias", {vocab});
  TORCH_CHECK(grad_bias.is_contiguous(), "grad_bias must be contiguous");
  const Tensor ids = target.contiguous();
  const int64_t* ids_ = ids.data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r)
    TORCH_CHECK(ids_[r] >= 0 && ids_[r] < vocab, "target ", ids_[r], " at row ", r,
                " is outside the vocabulary of ", vocab);
  const float hit = static_cast<float>(1.0 - smoothing);
  const float spread = static_cast<float>(smoothing / vocab);
  // The rows in one chunk a thread, each chunk summing its own loss and bias gradient, added in
  // chunk order afterwards: the result does not depend on which thread finishes first.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), rows));
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  std::vector<float> partial_bias(chunks * vocab, 0.0f);
  std::vector<double> partial_loss(chunks, 0.0);
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      float* pb = partial_bias.data() + c * vocab;
      for (int64_t r = c * per_chunk; r < std::min(rows, (c + 1) * per_chunk); ++r) {
        float* x = row(logits, r);
        float top = x[0], sum_x = 0.0f;
#pragma omp simd reduction(max : top) reduction(+ : sum_x)
        for (int64_t j = 0; j < vocab; ++j) {
          top = x[j] > top ? x[j] : top;
          sum_x += x[j];
        }
        float sum_e = 0.0f;
#pragma omp simd reduction(+ : sum_e)
        for (int64_t j = 0; j < vocab; ++j) sum_e += exp_fast(x[j] - top);
        const float lse = top + std::log(sum_e);
        const int64_t t = ids_[r];
        partial_loss[c] -= static_cast<double>(hit) * (x[t] - lse) +
                           static_cast<double>(spread) * (sum_x - vocab * static_cast<double>(lse));
#pragma omp simd
        for (int64_t j = 0; j < vocab; ++j) {
          const float g = exp_fast(x[j] - lse) - spread;
          x[j] = g;
          pb[j] += g;
        }
        x[t] -= hit;
        pb[t] -= hit;
      }
    }
  });
  float* gb = grad_bias.data_ptr<float>();
  double loss = 0.0;
  for (int64_t c = 0; c < chunks; ++c) {
    loss += partial_loss[c];
    const float* pb = partial_bias.data() + c * vocab;
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) gb[j] += pb[j];
  }
  return loss;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "attnmt's fused fp32 CPU kernels: GRU gates, additive energy, softmax cross-entropy";
  m.def("gru_forward", &gru_forward, "GRU gates forward (see fused.cpp)");
  m.def("gru_backward", &gru_backward, "GRU gates backward (see fused.cpp)");
  m.def("energy_forward", &energy_forward, "additive scorer energy forward (see fused.cpp)");
  m.def("energy_backward", &energy_backward, "additive scorer energy backward (see fused.cpp)");
  m.def("softmax_xent", &softmax_xent, "cross-entropy and its gradient in place (see fused.cpp)");
}
