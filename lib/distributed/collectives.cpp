// Buffer helpers and the communicator of a one-rank group (no backend needed).
#include <cstring>

#include "distributed/store.h"

namespace mr::distributed {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  return 1;
}

const char* to_string(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
  }
  return "?";
}

const char* to_string(ReduceOp op) { return op == ReduceOp::Sum ? "sum" : "max"; }

namespace {

class LocalCommunicator final : public Communicator {
 public:
  const char* backend() const override { return "local"; }
  Device device() const override { return Device::Cpu; }
  void all_reduce(Buffer, ReduceOp, std::optional<Timeout>) override {}
  void reduce_scatter(Buffer in, Buffer out, ReduceOp, std::optional<Timeout>) override { copy(in, out, "reduce_scatter"); }
  void all_gather(Buffer in, Buffer out, std::optional<Timeout>) override { copy(in, out, "all_gather"); }
  void broadcast(Buffer, int root, std::optional<Timeout>) override { only_root(root, "broadcast"); }
  void gather(Buffer in, Buffer out, int root, std::optional<Timeout>) override {
    only_root(root, "gather");
    copy(in, out, "gather");
  }
  void scatter(Buffer in, Buffer out, int root, std::optional<Timeout>) override {
    only_root(root, "scatter");
    copy(in, out, "scatter");
  }
  void barrier(std::optional<Timeout>) override {}

 private:
  static void only_root(int root, const char* op) {
    if (root != 0) throw CollectiveError(std::string(op) + ": root " + std::to_string(root) + " is outside a group of one", false);
  }
  static void copy(const Buffer& in, const Buffer& out, const char* op) {
    if (in.count != out.count || in.dtype != out.dtype)
      throw CollectiveError(std::string(op) + ": input and output differ in a group of one", false);
    if (in.device != Device::Cpu || out.device != Device::Cpu)
      throw CollectiveError(std::string(op) + ": the local communicator needs host buffers", false);
    if (in.data != out.data) std::memmove(out.data, in.data, in.bytes());
  }
};

}  // namespace

std::shared_ptr<Communicator> make_local_communicator(Device device) {
  if (device != Device::Cpu) throw DistError("no local communicator for device buffers");
  return std::make_shared<LocalCommunicator>();
}

}  // namespace mr::distributed
