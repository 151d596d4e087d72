// Which of Megatron's model families a config looks like, where the model plan (run/model.h: pretrain_gpt.py's
// decoder) counts it as a GPT decoder anyway. Megatron's arguments do not say which program reads them; the plan
// refuses the two that do say it (--decoder-num-layers: T5; --bert-no-binary-head: BERT). For the others a hint is
// all there is: flags of the "vision" group the user set, or a multimodal or BERT tokenizer. `megatron-run params`
// names the hint beside its figures (docs/run.md, "The model plan").
#pragma once

#include <string>

#include "config/args.h"
#include "config/namespace.h"

namespace mr::run {

// One sentence for `params` when the config hints at a model the plan does not build (the flags that say so, and
// what is left out of the figures); empty when nothing does.
std::string other_family_notice(const Namespace& ns, const Args& a);

}  // namespace mr::run
