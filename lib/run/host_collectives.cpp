// Host-scalar collectives over any group (run/host_collectives.h).
#include "run/host_collectives.h"

#include "run/cuda_ops.h"

namespace mr::run {

namespace {
distributed::Buffer on_device(distributed::Buffer b, void* where) {
  b.data = where;
  b.device = distributed::Device::Cuda;
  return b;
}
}  // namespace

void host_all_reduce(distributed::Group& g, distributed::Buffer host, distributed::ReduceOp op) {
  if (g.has(distributed::Device::Cpu)) return g.all_reduce(host, op);
  void* d = cuda::staging(host.bytes());
  cuda::to_device(d, host.data, host.bytes());
  g.all_reduce(on_device(host, d), op);
  cuda::to_host(host.data, d, host.bytes());
}

void host_all_gather(distributed::Group& g, distributed::Buffer in, distributed::Buffer out) {
  if (g.has(distributed::Device::Cpu)) return g.all_gather(in, out);
  char* d = static_cast<char*>(cuda::staging(in.bytes() + out.bytes()));
  cuda::to_device(d, in.data, in.bytes());
  g.all_gather(on_device(in, d), on_device(out, d + in.bytes()));
  cuda::to_host(out.data, d + in.bytes(), out.bytes());
}

void host_broadcast(distributed::Group& g, distributed::Buffer buf, int root) {
  if (g.has(distributed::Device::Cpu)) return g.broadcast(buf, root);
  void* d = cuda::staging(buf.bytes());
  cuda::to_device(d, buf.data, buf.bytes());
  g.broadcast(on_device(buf, d), root);
  cuda::to_host(buf.data, d, buf.bytes());
}

}  // namespace mr::run
