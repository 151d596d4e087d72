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

void host_gather(distributed::Group& g, distributed::Buffer in, distributed::Buffer out, int root) {
  if (g.has(distributed::Device::Cpu)) return g.gather(in, out, root);
  const bool at_root = g.rank() == root;
  const size_t out_bytes = at_root ? out.bytes() : 0;
  char* d = static_cast<char*>(cuda::staging(in.bytes() + out_bytes));
  cuda::to_device(d, in.data, in.bytes());
  g.gather(on_device(in, d), on_device(out, d + in.bytes()), root);
  if (at_root) cuda::to_host(out.data, d + in.bytes(), out_bytes);
}

void host_scatter(distributed::Group& g, distributed::Buffer in, distributed::Buffer out, int root) {
  if (g.has(distributed::Device::Cpu)) return g.scatter(in, out, root);
  const bool at_root = g.rank() == root;
  const size_t in_bytes = at_root ? in.bytes() : 0;
  char* d = static_cast<char*>(cuda::staging(in_bytes + out.bytes()));
  if (at_root) cuda::to_device(d, in.data, in_bytes);
  g.scatter(on_device(in, d), on_device(out, d + in_bytes), root);
  cuda::to_host(out.data, d + in_bytes, out.bytes());
}

}  // namespace mr::run
