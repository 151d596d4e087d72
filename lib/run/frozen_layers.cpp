// --freeze-all-layers at the load (run/frozen_layers.h).
#include "run/frozen_layers.h"

#include "run/checkpoint_args.h"
#include "run/checkpoint_format.h"

namespace mr::run {

int64_t frozen_resume_iteration(const Args& a, const TrackerSource* trackers) {
  // checkpointing.py read_frozen_resume_iteration: `if save_dir is None: return 0`; no tracker file: 0; else
  // read_metadata's iteration (0 for 'release', a stop for anything else).
  if (!a.save) return 0;
  const TrackerSource own;
  const std::optional<TrackerValue> t = (trackers ? *trackers : own).read(*a.save);
  if (!t || t->release) return 0;
  return t->iteration;
}

Args frozen_load_args(const Args& a, std::optional<int64_t>* from_save, const TrackerSource* trackers) {
  if (from_save) from_save->reset();
  if (!a.freeze_all_layers) return a;
  // checkpointing.py load_checkpoint: `args.finetune = True`; `if args.override_ckpt_iteration is None:
  // progress_iteration = read_frozen_resume_iteration(args.save); if progress_iteration > 0:
  // args.override_ckpt_iteration = progress_iteration`.
  Args out = a;
  out.finetune = true;
  if (!out.override_ckpt_iteration) {
    const int64_t n = frozen_resume_iteration(a, trackers);
    if (n > 0) {
      out.override_ckpt_iteration = n;
      if (from_save) *from_save = n;
    }
  }
  return out;
}

}  // namespace mr::run
