#include "run/model_family.h"

#include <string_view>
#include <vector>

#include "config/args.h"
#include "config/schema.h"
#include "util/text.h"

namespace mr::run {

namespace {

// The "vision" flags the user wrote (a config file or the command line), in schema order.
std::vector<std::string> user_vision_flags(const Namespace& ns) {
  std::vector<std::string> flags;
  for (const Arg& arg : Schema::megatron().args()) {
    // --no-data-sharding sits in the vision group but is the cyclic data loader's, whatever the model.
    const std::string_view dest = arg.dest();
    if (std::string_view(arg.spec->group) != "vision" || dest == dest_of(ArgId::data_sharding) || !ns.has(dest))
      continue;
    if (ns.provenance(arg.dest()).by_user()) flags.push_back(Schema::megatron().flag_for_dest(arg.dest()));
  }
  return flags;
}

}  // namespace

std::string other_family_notice(const Namespace& ns, const Args& a) {
  using arg::TokenizerType;
  std::vector<std::string> signs = user_vision_flags(ns);
  const bool multimodal_tokenizer = a.tokenizer_type && (*a.tokenizer_type == TokenizerType::MultimodalTokenizer ||
                                                        *a.tokenizer_type == TokenizerType::NullMultimodalTokenizer);
  if (multimodal_tokenizer) signs.push_back("--tokenizer-type " + std::string(arg::to_string(*a.tokenizer_type)));
  if (!signs.empty())
    return join(signs, ", ") + (signs.size() == 1 ? " is" : " are") +
           " a vision or multimodal model's (Megatron's LLaVA / pretrain_vlm.py, ViT): the figures are the GPT "
           "decoder of the config's sizes only, without a vision encoder or projection";
  const bool bert_tokenizer = a.tokenizer_type && (*a.tokenizer_type == TokenizerType::BertWordPieceLowerCase ||
                                                  *a.tokenizer_type == TokenizerType::BertWordPieceCase);
  if (bert_tokenizer)
    return "--tokenizer-type " + std::string(arg::to_string(*a.tokenizer_type)) +
           " is BERT's: if the program is pretrain_bert.py, the figures are the GPT decoder of the config's sizes, "
           "without BERT's pooler, LM head transform and binary head (nor its token-type embedding)";
  return {};
}

}  // namespace mr::run
