#include "optim/torch_adapter.h"

#include <stdexcept>
#include <string>

namespace mr::optim {

DType dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::F32;
    case at::kBFloat16: return DType::BF16;
    case at::kHalf: return DType::F16;
    case at::kByte: return DType::E4M3;  // Transformer Engine's convention: a torch.uint8 optimizer state is fp8
    default: throw std::invalid_argument(std::string("optimizer kernels: unsupported dtype ") + c10::toString(t.scalar_type()));
  }
}

namespace {
void* buffer(const at::Tensor& t, const at::Tensor& param, const char* what) {
  if (!t.defined()) return nullptr;
  if (!t.is_contiguous()) throw std::invalid_argument(std::string(what) + " is not contiguous");
  if (t.numel() != param.numel())
    throw std::invalid_argument(std::string(what) + " has " + std::to_string(t.numel()) + " elements, param has " +
                                std::to_string(param.numel()));
  if (t.device() != param.device()) throw std::invalid_argument(std::string(what) + " is not on the param's device");
  return t.data_ptr();
}
float* scale(const at::Tensor& t, const char* what) {
  if (!t.defined()) return nullptr;
  if (t.scalar_type() != at::kFloat || t.numel() != 1) throw std::invalid_argument(std::string(what) + " must be one fp32 element");
  return t.data_ptr<float>();
}
}  // namespace

TensorSlot make_slot(const TensorState& t) {
  if (!t.param.defined() || !t.grad.defined()) throw std::invalid_argument("make_slot: param and grad are required");
  TensorSlot s;
  s.numel = t.param.numel();
  s.param = buffer(t.param, t.param, "param");
  s.param_dtype = dtype_of(t.param);
  s.grad = buffer(t.grad, t.param, "grad");
  s.grad_dtype = dtype_of(t.grad);
  if (t.master.defined()) {
    s.master = buffer(t.master, t.param, "master param");
    s.master_dtype = dtype_of(t.master);
    s.master_scale = scale(t.master_scale, "master scale");
  }
  if (t.remainder.defined()) {
    if (t.remainder.element_size() != 2) throw std::invalid_argument("param remainders must be 16-bit integers");
    s.remainder = static_cast<uint16_t*>(buffer(t.remainder, t.param, "param remainder"));
  }
  if (t.exp_avg.defined()) {
    s.exp_avg = buffer(t.exp_avg, t.param, "exp_avg");
    s.exp_avg_dtype = dtype_of(t.exp_avg);
    s.exp_avg_scale = scale(t.exp_avg_scale, "exp_avg scale");
  }
  if (t.exp_avg_sq.defined()) {
    s.exp_avg_sq = buffer(t.exp_avg_sq, t.param, "exp_avg_sq");
    s.exp_avg_sq_dtype = dtype_of(t.exp_avg_sq);
    s.exp_avg_sq_scale = scale(t.exp_avg_sq_scale, "exp_avg_sq scale");
  }
  s.group = t.group;
  return s;
}

GradSlot make_grad_slot(const at::Tensor& grad) {
  if (!grad.is_contiguous()) throw std::invalid_argument("grad is not contiguous");
  return GradSlot{grad.numel(), grad.data_ptr(), dtype_of(grad)};
}

MuonParam make_muon_param(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& momentum, int32_t group) {
  if (param.dim() != 2) throw std::invalid_argument("Muon params must be 2-D");
  if (param.scalar_type() != at::kFloat || grad.scalar_type() != at::kFloat || momentum.scalar_type() != at::kFloat)
    throw std::invalid_argument("Muon params, grads and momentum buffers are fp32");
  MuonParam p;
  p.param = static_cast<float*>(buffer(param, param, "param"));
  p.grad = static_cast<const float*>(buffer(grad, param, "grad"));
  p.momentum_buffer = static_cast<float*>(buffer(momentum, param, "momentum buffer"));
  p.rows = param.size(0);
  p.cols = param.size(1);
  p.group = group;
  return p;
}

}  // namespace mr::optim
