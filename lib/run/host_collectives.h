// Collectives on host buffers (the loss and norm partial sums, flags, checksums; the CPU backend's Muon shards,
// run/tp_adapter.h) over any process group, under either backend. With Gloo every group has a host communicator;
// with NCCL only the data-parallel groups and the world have one (Megatron's Gloo groups,
// --use-gloo-process-groups), so for the others the values travel through a device staging area (run/cuda_ops.h's
// staging, grown to the largest call) and the group's NCCL communicator. Internal to lib/run.
#pragma once

#include "distributed/runtime.h"

namespace mr::run {

void host_all_reduce(distributed::Group& g, distributed::Buffer host, distributed::ReduceOp op);
// out.count == in.count * g.size(); block i holds member i's input.
void host_all_gather(distributed::Group& g, distributed::Buffer in, distributed::Buffer out);
// buf <- member `root`'s buf.
void host_broadcast(distributed::Group& g, distributed::Buffer buf, int root);
// Every member's `in` to `out` on `root` (out.count == in.count * g.size() there; `out` is not used elsewhere), and
// block i of root's `in` to member i's `out` (Group::gather, Group::scatter).
void host_gather(distributed::Group& g, distributed::Buffer in, distributed::Buffer out, int root);
void host_scatter(distributed::Group& g, distributed::Buffer in, distributed::Buffer out, int root);

}  // namespace mr::run
