#include "config/schema.h"
#include "util/text.h"

#include <algorithm>
#include <stdexcept>

namespace mr {

namespace {
using T = ArgType;
using A = Action;

// The table. Order is Megatron's add_megatron_arguments order; it drives --help and the JSON schema.
const ArgSpec kMegatronArgs[] = {
#include "config/schema/transformer_configuration.inc"
#include "config/schema/network_size.inc"
#include "config/schema/wide_residual.inc"
#include "config/schema/triton_autotune_policy.inc"
#include "config/schema/regularization.inc"
#include "config/schema/profiling.inc"
#include "config/schema/training.inc"
#include "config/schema/rl.inc"
#include "config/schema/rng_and_initialization.inc"
#include "config/schema/learning_rate_and_weight_decay.inc"
#include "config/schema/checkpointing.inc"
#include "config/schema/mixed_precision.inc"
#include "config/schema/distributed_init.inc"
#include "config/schema/validation.inc"
#include "config/schema/data_and_dataloader.inc"
#include "config/schema/tokenizer.inc"
#include "config/schema/autoresume.inc"
#include "config/schema/vision.inc"
#include "config/schema/moe.inc"
#include "config/schema/mla.inc"
#include "config/schema/experimental_attention_variant.inc"
#include "config/schema/heterogeneous_architecture.inc"
#include "config/schema/logging.inc"
#include "config/schema/logits_distillation.inc"
#include "config/schema/straggler.inc"
#include "config/schema/workload_inspector.inc"
#include "config/schema/inference.inc"
#include "config/schema/transformer_engine.inc"
#include "config/schema/experimental.inc"
#include "config/schema/in_process_restart.inc"
#include "config/schema/ft_package.inc"
#include "config/schema/rerun_engine.inc"
#include "config/schema/msc.inc"
#include "config/schema/kitchen.inc"
#include "config/schema/sft.inc"
#include "config/schema/varlen_dataset.inc"
#include "config/schema/fault_injector.inc"
};

std::vector<std::string> split_flags(const char* s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = s; *p; ++p) {
    if (*p == '|') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace

const std::vector<std::vector<std::string_view>>& mutually_exclusive_groups() {
  // arguments.py, _add_kitchen_quantization_arguments: recipe_or_config_group (the flags exist only when Kitchen is
  // installed, lib/config/schema/kitchen.inc).
  static const std::vector<std::vector<std::string_view>> groups = {{"kitchen_config_file", "kitchen_recipe_number"}};
  return groups;
}

Schema::Schema(const ArgSpec* begin, const ArgSpec* end) {
  args_.reserve(static_cast<size_t>(end - begin));
  for (const ArgSpec* s = begin; s != end; ++s) {
    Arg a;
    a.spec = s;
    a.flags = split_flags(s->flags);
    a.def = Value::parse_json(s->def);
    a.konst = Value::parse_json(s->konst);
    if (*s->choices) {
      Value c = Value::parse_json(s->choices);
      a.choices = c.as_list();
    }
    std::string_view n = s->nargs;
    if (n.empty()) a.nargs_kind = 0;
    else if (n == "?" || n == "*" || n == "+") a.nargs_kind = n[0];
    else {
      a.nargs_kind = 'N';
      a.nargs_count = std::stoi(std::string(n));
    }
    args_.push_back(std::move(a));
  }
  by_flag_.reserve(args_.size() * 2);
  by_dest_.reserve(args_.size() * 2);
  for (const Arg& a : args_) {
    for (const std::string& f : a.flags) {
      if (!by_flag_.emplace(f, &a).second) throw std::logic_error("schema: duplicate option string " + f);
    }
    by_dest_.emplace(a.spec->dest, &a);
  }
}

const Schema& Schema::megatron() {
  // Built on first use and never destroyed: process exit has nothing to tear down.
  static const Schema* schema = new Schema(std::begin(kMegatronArgs), std::end(kMegatronArgs));
  return *schema;
}

const Arg* Schema::find_flag(std::string_view flag) const {
  auto it = by_flag_.find(flag);
  return it == by_flag_.end() ? nullptr : it->second;
}

std::string Schema::flag_for_dest(std::string_view dest) const {
  for (const Arg* a : find_dest(dest))  // declaration order: the first action's first option string
    if (!a->flags.empty()) return a->flags.front();
  std::string f = "--" + std::string(dest);
  for (char& c : f)
    if (c == '_') c = '-';
  return f;
}

std::vector<const Arg*> Schema::find_dest(std::string_view dest) const {
  std::vector<const Arg*> out;
  auto [b, e] = by_dest_.equal_range(dest);
  for (auto it = b; it != e; ++it) out.push_back(it->second);
  std::sort(out.begin(), out.end());  // declaration order
  return out;
}

namespace {

// The first letters of a flag's words ("tensor-model-parallel-size" -> "tp"), "model" and "size" left out.
std::string initials(std::string_view flag) {
  std::string out;
  size_t at = 0;
  while (at <= flag.size()) {
    const size_t end = std::min(flag.find_first_of("-_", at), flag.size());
    const std::string_view part = flag.substr(at, end - at);
    if (!part.empty() && part != "model" && part != "size") out += part.front();
    at = end + 1;
  }
  return out;
}

// The flag without its word "model" ("tensor-model-parallel-size" -> "tensor-parallel-size"); empty without one.
std::string without_model(std::string_view flag) {
  std::string s(flag);
  for (size_t at = s.find("model"); at != std::string::npos; at = s.find("model", at + 1)) {
    const bool starts = at == 0 || s[at - 1] == '-';
    const size_t end = at + 5;
    if (!starts || (end < s.size() && s[end] != '-')) continue;
    // "tensor-model-parallel-size" -> "tensor-parallel-size"; a trailing "-model" goes with its dash.
    if (end < s.size()) return s.erase(at, 6);
    if (at > 0) return s.erase(at - 1, 6);
    return {};
  }
  return {};
}

}  // namespace

std::vector<std::string> Schema::suggest(std::string_view flag, size_t max) const {
  std::string_view bare = flag;
  while (!bare.empty() && bare.front() == '-') bare.remove_prefix(1);
  // Treat '_' and '-' alike, so --num_layers finds --num-layers.
  std::string norm(bare);
  std::replace(norm.begin(), norm.end(), '_', '-');
  const size_t limit = std::max<size_t>(2, bare.size() / 3);
  std::vector<std::pair<size_t, std::string_view>> scored;
  for (const auto& [f, arg] : by_flag_) {
    std::string_view fb = f.substr(2);
    size_t d;
    if (norm == fb) {
      d = 0;
    } else {
      d = edit_distance(norm, fb, limit);
      // A flag that contains the word (or is contained in it) is a good guess too.
      if (d > limit && (fb.find(norm) != std::string_view::npos || norm.find(fb) != std::string::npos)) {
        size_t diff = fb.size() > norm.size() ? fb.size() - norm.size() : norm.size() - fb.size();
        d = std::max<size_t>(1, diff / 2);
      }
      // So is a flag the word is the initials of, its words "model" and "size" not counted: tp is
      // --tensor-model-parallel-size, ep --expert-model-parallel-size, as the parallel sizes are called for short.
      if (d > 1 && norm.size() >= 2 && norm.find('-') == std::string::npos && initials(fb) == norm) d = 1;
      // So is the flag without its word "model" (one more step): --tensor-parallel-size, as other frameworks call
      // it, and its misspellings (--tensor-paralel-size) are --tensor-model-parallel-size.
      if (d > 1 && norm.find("model") == std::string::npos) {
        if (const std::string without = without_model(fb); !without.empty()) {
          const size_t e = edit_distance(norm, without, limit);
          if (e + 1 < d) d = e + 1;
        }
      }
    }
    // A flag every letter of the word would have to change into is no near miss (--tp is not --lr).
    if (d <= limit && d < norm.size()) scored.emplace_back(d, f);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (const auto& [d, f] : scored) {
    if (out.size() >= max) break;
    out.emplace_back(f);
  }
  return out;
}

std::vector<std::pair<std::string, Value>> Schema::defaults() const {
  std::vector<std::pair<std::string, Value>> out;
  std::unordered_map<std::string_view, size_t> seen;
  for (const Arg& a : args_) {
    // argparse: the first action registering a dest sets its default.
    if (seen.count(a.spec->dest)) continue;
    seen.emplace(a.spec->dest, out.size());
    out.emplace_back(a.spec->dest, a.def);
  }
  return out;
}

const char* to_string(ArgType t) {
  switch (t) {
    case ArgType::None: return "none";
    case ArgType::Int: return "int";
    case ArgType::Float: return "float";
    case ArgType::Str: return "str";
    case ArgType::PyBool: return "bool";
    case ArgType::Json: return "json";
    case ArgType::Path: return "path";
    case ArgType::MoeFreq: return "moe_freq_type";
    case ArgType::LaFreq: return "la_freq_type";
    case ArgType::NoRopeFreq: return "no_rope_freq_type";
    case ArgType::CompressRatios: return "compress_ratios_type";
    case ArgType::IntTuple: return "tuple_type";
    case ArgType::CudaGraphModule: return "cuda_graph_module";
    case ArgType::TritonBlockSize: return "triton_block_size";
    case ArgType::AttnBackendEnum: return "enum:AttnBackend";
    case ArgType::SignalEnum: return "enum:Signals";
  }
  return "?";
}

const char* to_string(Action a) {
  switch (a) {
    case Action::Store: return "store";
    case Action::StoreTrue: return "store_true";
    case Action::StoreFalse: return "store_false";
    case Action::StoreConst: return "store_const";
    case Action::Append: return "append";
    case Action::BoolOptional: return "boolean_optional";
  }
  return "?";
}

}  // namespace mr
