# A real torch.distributed program (gloo, env://): every rank adds its rank+1; each prints the sum it got.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("allreduce rank %d of %d: %g" % (dist.get_rank(), dist.get_world_size(), t.item()), flush=True)
dist.destroy_process_group()
