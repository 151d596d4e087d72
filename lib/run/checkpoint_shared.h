// The helpers the Checkpointer's files share (checkpoint.cpp, checkpoint_save.cpp, checkpoint_load.cpp): how an
// error is told, every rank's verdict, a rank's place and the model dtype's name. Internal to lib/run.
#pragma once

#include <cstdint>
#include <exception>
#include <ostream>
#include <string>

#include "run/checkpoint.h"
#include "run/checkpoint_format.h"
#include "run/checkpoint_io.h"
#include "run/run_context.h"

namespace mr::run::ckpt_detail {

// The message of an exception, without a CheckpointError's "[id] " (its id travels apart).
std::string message_of(const std::exception& e);

// A warning of the checkpoint code (a Warning rule of checkpoint_format.h): "PREFIX warning[ID]: text".
void warn_rule(std::ostream& log, const std::string& prefix, const Rule& rule, const std::string& text);

// Every rank's verdict, from each rank's error (empty: none): the lowest rank that failed (-1: none) and its error
// (broadcast from it), so that whichever rank reports first names the cause (the launcher stops the others at the
// first exit).
struct Verdict {
  int64_t rank = -1;
  std::string error;  // the failed rank's, cut at kErrorBytes - 1
};
Verdict verdict(RunContext& c, const std::string& error);

// Where this rank's pieces of the model are (its TP/ETP ranks, whether it writes the model's or experts' pieces).
RankPlace place_of(RunContext& c);

// The model dtype as a checkpoint names it: "fp32", "bf16" or "fp16".
std::string dtype_name(const RunContext& c);

}  // namespace mr::run::ckpt_detail
