// The selective scan (Mamba's S6 recurrence) as one CPU kernel, forward and backward, for every channel e and state
// dim n (diagonal real A):
//
//     h_t = exp(delta_t,e A_e,n) h_t-1 + delta_t,e u_t,e B_t,n        y_t,e = sum_n h_t,e,n C_t,n
//
// Each job is one block of W channels (the SIMD width of ATen's Vectorized<T>) of one sequence: the N states of the
// block stay in vector registers / L1 while the tokens pass, so a state is read and written once per token instead
// of once per elementwise PyTorch op. The forward pass keeps only the state after every K tokens (b, S, N, E),
// S = ceil(L / K) - 1; the backward pass rebuilds the K states of one segment at a time from them (right to left)
// and runs the adjoint recurrence dL/dh_t = gy_t C_t + exp(delta_t+1 A) dL/dh_t+1 over the segment. The
// exponentials are of non-positive numbers (decays): finite for any delta >= 0.
//
// Operands (contiguous, one floating dtype): u, delta (b, L, E); A transposed, At (N, E); B, C (b, L, N).
// The last block of channels may be partial: Vectorized<T>::loadu(ptr, count) fills the lanes past `count` with
// zeros (so lane_sum adds nothing for them) and store(ptr, count) writes `count` lanes only.
#include <torch/extension.h>

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <vector>

namespace {

using at::vec::Vectorized;

template <typename T>
T lane_sum(const Vectorized<T>& v) {
  alignas(64) T lanes[Vectorized<T>::size()];
  v.store(lanes);
  T sum = 0;
  for (int i = 0; i < Vectorized<T>::size(); ++i) sum += lanes[i];
  return sum;
}

struct Shape {
  int64_t batch, length, channels, states, segment;
  int64_t checkpoints() const { return (length + segment - 1) / segment - 1; }
};

template <typename T>
void scan_forward_kernel(const T* u, const T* delta, const T* At, const T* B, const T* C, T* y, T* checkpoints,
                         const Shape& s) {
  using V = Vectorized<T>;
  constexpr int64_t W = V::size();
  const int64_t blocks = (s.channels + W - 1) / W, E = s.channels, N = s.states;
  at::parallel_for(0, s.batch * blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<V> h(N), a(N);
    for (int64_t job = begin; job < end; ++job) {
      const int64_t b = job / blocks, e0 = job % blocks * W, lanes = std::min(W, E - e0);
      for (int64_t n = 0; n < N; ++n) {
        h[n] = V(0);
        a[n] = V::loadu(At + n * E + e0, lanes);
      }
      for (int64_t t = 0; t < s.length; ++t) {
        const int64_t row = b * s.length + t;
        const V d = V::loadu(delta + row * E + e0, lanes);
        const V x = d * V::loadu(u + row * E + e0, lanes);
        V out(0);
        for (int64_t n = 0; n < N; ++n) {
          h[n] = at::vec::fmadd((d * a[n]).exp(), h[n], x * V(B[row * N + n]));
          out = at::vec::fmadd(h[n], V(C[row * N + n]), out);
        }
        out.store(y + row * E + e0, lanes);
        const int64_t done = t + 1;
        if (done % s.segment == 0 && done / s.segment <= s.checkpoints()) {
          T* saved = checkpoints + (b * s.checkpoints() + done / s.segment - 1) * N * E + e0;
          for (int64_t n = 0; n < N; ++n) h[n].store(saved + n * E, lanes);
        }
      }
    }
  });
}

// gB and gC sum over channels, which the blocks share: the blocks are split into `parts` contiguous groups, and each
// group adds into its own row of gB_parts / gC_parts (parts, b, L, N), summed by the caller.
template <typename T>
void scan_backward_kernel(const T* u, const T* delta, const T* At, const T* B, const T* C, const T* checkpoints,
                          const T* gy, T* gu, T* gdelta, T* gAt, T* gB_parts, T* gC_parts, int64_t parts,
                          const Shape& s) {
  using V = Vectorized<T>;
  constexpr int64_t W = V::size();
  const int64_t blocks = (s.channels + W - 1) / W, E = s.channels, N = s.states, K = s.segment;
  const int64_t blocks_per_part = (blocks + parts - 1) / parts;
  at::parallel_for(0, parts, 1, [&](int64_t first_part, int64_t end_part) {
    for (int64_t part = first_part; part < end_part; ++part) {
      T* gB = gB_parts + part * s.batch * s.length * N;
      T* gC = gC_parts + part * s.batch * s.length * N;
      std::vector<V> a(N), gA(N), carried(N), start(N), states(K * N), decays(K * N);
      for (int64_t block = part * blocks_per_part; block < std::min(blocks, (part + 1) * blocks_per_part); ++block) {
        const int64_t e0 = block * W, lanes = std::min(W, E - e0);
        for (int64_t n = 0; n < N; ++n) {
          a[n] = V::loadu(At + n * E + e0, lanes);
          gA[n] = V(0);
        }
        for (int64_t b = 0; b < s.batch; ++b) {
          std::fill(carried.begin(), carried.end(), V(0));  // exp(delta_t+1 A) dL/dh_t+1
          for (int64_t segment = s.checkpoints(); segment >= 0; --segment) {
            const int64_t t0 = segment * K, t1 = std::min(s.length, t0 + K);
            for (int64_t n = 0; n < N; ++n) {
              start[n] = segment ? V::loadu(checkpoints + ((b * s.checkpoints() + segment - 1) * N + n) * E + e0,
                                            lanes)
                                 : V(0);
            }
            for (int64_t t = t0; t < t1; ++t) {  // the segment's states and decays again
              const int64_t row = b * s.length + t, i = (t - t0) * N;
              const V d = V::loadu(delta + row * E + e0, lanes);
              const V x = d * V::loadu(u + row * E + e0, lanes);
              for (int64_t n = 0; n < N; ++n) {
                decays[i + n] = (d * a[n]).exp();
                states[i + n] = at::vec::fmadd(decays[i + n], t > t0 ? states[i - N + n] : start[n],
                                               x * V(B[row * N + n]));
              }
            }
            for (int64_t t = t1 - 1; t >= t0; --t) {  // the adjoint recurrence, right to left
              const int64_t row = b * s.length + t, i = (t - t0) * N;
              const V d = V::loadu(delta + row * E + e0, lanes);
              const V ut = V::loadu(u + row * E + e0, lanes);
              const V x = d * ut;
              const V grad_y = V::loadu(gy + row * E + e0, lanes);
              V grad_x(0), grad_rate(0);
              for (int64_t n = 0; n < N; ++n) {
                const V grad_h = at::vec::fmadd(grad_y, V(C[row * N + n]), carried[n]);
                grad_x = at::vec::fmadd(grad_h, V(B[row * N + n]), grad_x);
                gB[row * N + n] += lane_sum(grad_h * x);
                gC[row * N + n] += lane_sum(grad_y * states[i + n]);
                const V grad_log_decay = grad_h * decays[i + n] * (t > t0 ? states[i - N + n] : start[n]);
                grad_rate = at::vec::fmadd(grad_log_decay, a[n], grad_rate);
                gA[n] = at::vec::fmadd(grad_log_decay, d, gA[n]);
                carried[n] = decays[i + n] * grad_h;
              }
              (grad_x * d).store(gu + row * E + e0, lanes);
              at::vec::fmadd(grad_x, ut, grad_rate).store(gdelta + row * E + e0, lanes);
            }
          }
        }
        for (int64_t n = 0; n < N; ++n) gA[n].store(gAt + n * E + e0, lanes);
      }
    }
  });
}

Shape shape_of(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& At, const at::Tensor& B,
               const at::Tensor& C, int64_t segment) {
  TORCH_CHECK(u.dim() == 3 && u.size(1) > 0 && segment > 0, "selective scan: u must be (b, L > 0, E)");
  TORCH_CHECK(delta.sizes() == u.sizes() && B.dim() == 3 && B.size(0) == u.size(0) && B.size(1) == u.size(1) &&
                  C.sizes() == B.sizes() && At.dim() == 2 && At.size(0) == B.size(2) && At.size(1) == u.size(2),
              "selective scan: expected u, delta (b, L, E), At (N, E), B, C (b, L, N)");
  for (const at::Tensor* t : {&u, &delta, &At, &B, &C}) {
    TORCH_CHECK(t->device().is_cpu() && t->is_contiguous() && t->scalar_type() == u.scalar_type(),
                "selective scan: operands must be contiguous CPU tensors of one dtype");
  }
  return {u.size(0), u.size(1), u.size(2), B.size(2), segment};
}

std::vector<at::Tensor> scan_forward(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& At,
                                     const at::Tensor& B, const at::Tensor& C, int64_t segment) {
  const Shape s = shape_of(u, delta, At, B, C, segment);
  auto y = at::empty_like(u);
  auto checkpoints = at::empty({s.batch, s.checkpoints(), s.states, s.channels}, u.options());
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "selective_scan_forward", [&] {
    scan_forward_kernel<scalar_t>(u.data_ptr<scalar_t>(), delta.data_ptr<scalar_t>(), At.data_ptr<scalar_t>(),
                                  B.data_ptr<scalar_t>(), C.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                                  checkpoints.data_ptr<scalar_t>(), s);
  });
  return {y, checkpoints};
}

std::vector<at::Tensor> scan_backward(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& At,
                                      const at::Tensor& B, const at::Tensor& C, const at::Tensor& checkpoints,
                                      const at::Tensor& gy, int64_t segment) {
  const Shape s = shape_of(u, delta, At, B, C, segment);
  TORCH_CHECK(gy.sizes() == u.sizes() && gy.is_contiguous() && gy.scalar_type() == u.scalar_type() &&
                  checkpoints.is_contiguous() && checkpoints.scalar_type() == u.scalar_type() &&
                  checkpoints.numel() == s.batch * s.checkpoints() * s.states * s.channels,
              "selective scan: bad gradient or checkpoints");
  auto gu = at::empty_like(u), gdelta = at::empty_like(u), gAt = at::empty_like(At);
  at::Tensor gB_parts, gC_parts;
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "selective_scan_backward", [&] {
    // one partial sum of gB / gC per thread (never more parts than blocks of channels)
    const int64_t blocks = (s.channels + at::vec::Vectorized<scalar_t>::size() - 1) /
                           at::vec::Vectorized<scalar_t>::size();
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), blocks));
    gB_parts = at::zeros({parts, s.batch, s.length, s.states}, u.options());
    gC_parts = at::zeros({parts, s.batch, s.length, s.states}, u.options());
    scan_backward_kernel<scalar_t>(u.data_ptr<scalar_t>(), delta.data_ptr<scalar_t>(), At.data_ptr<scalar_t>(),
                                   B.data_ptr<scalar_t>(), C.data_ptr<scalar_t>(),
                                   checkpoints.data_ptr<scalar_t>(), gy.data_ptr<scalar_t>(),
                                   gu.data_ptr<scalar_t>(), gdelta.data_ptr<scalar_t>(), gAt.data_ptr<scalar_t>(),
                                   gB_parts.data_ptr<scalar_t>(), gC_parts.data_ptr<scalar_t>(), parts, s);
  });
  return {gu, gdelta, gAt, gB_parts.sum(0), gC_parts.sum(0)};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &scan_forward, "y and the checkpoint states of the selective scan");
  m.def("backward", &scan_backward, "gradients of u, delta, A^T, B and C");
}
