// Typed values against the schema (config/arg_fit.h): the kind each declared type converts a word to, nargs,
// choices, switches, and the typed view for a dest validation derives.
#include <catch2/catch.hpp>

#include "config/arg_fit.h"

using mr::Value;
using mr::arg_value_misfit;

TEST_CASE("arg fit: a value of the argument's declared type fits; another JSON type is named", "[arg-fit]") {
  // type=int
  CHECK_FALSE(arg_value_misfit("num_layers", Value(2)));
  CHECK_FALSE(arg_value_misfit("num_layers", Value()));  // None: every argument's "not set"
  CHECK(arg_value_misfit("num_layers", Value("two")) == std::optional<std::string>("an integer"));
  CHECK(arg_value_misfit("seq_length", Value("128")) == std::optional<std::string>("an integer"));  // no word conversion
  CHECK(arg_value_misfit("hidden_size", Value(64.5)) == std::optional<std::string>("an integer"));
  CHECK(arg_value_misfit("num_layers", Value(true)) == std::optional<std::string>("an integer"));
  CHECK(arg_value_misfit("max_position_embeddings", Value(mr::List{})) == std::optional<std::string>("an integer"));
  // A JSON integer past 64 bits is read as a float: named as such.
  CHECK(arg_value_misfit("num_layers", Value::parse_json("1000000000000000000000000000000")) ==
        std::optional<std::string>("an integer of 64 bits"));
  // type=float: an int is a number (Python's 0 == 0.0)
  CHECK_FALSE(arg_value_misfit("attention_dropout", Value(0)));
  CHECK_FALSE(arg_value_misfit("attention_dropout", Value(0.1)));
  CHECK(arg_value_misfit("attention_dropout", Value("big")) == std::optional<std::string>("a number"));
  // type=str
  CHECK_FALSE(arg_value_misfit("hybrid_layer_pattern", Value("M*M*")));
  CHECK(arg_value_misfit("hybrid_layer_pattern", Value(5)) == std::optional<std::string>("a string"));
  // choices
  CHECK_FALSE(arg_value_misfit("normalization", Value("RMSNorm")));
  CHECK(arg_value_misfit("normalization", Value("BatchNorm")) ==
        std::optional<std::string>("one of 'LayerNorm', 'RMSNorm'"));
  CHECK(arg_value_misfit("position_embedding_type", Value(3)) == std::optional<std::string>("a string"));
  // switches
  CHECK_FALSE(arg_value_misfit("swiglu", Value(true)));
  CHECK(arg_value_misfit("swiglu", Value("yes")) == std::optional<std::string>("true or false"));
  CHECK(arg_value_misfit("add_position_embedding", Value(1)) == std::optional<std::string>("true or false"));
  // an int or a layer pattern (a list of ints once converted)
  CHECK_FALSE(arg_value_misfit("moe_layer_freq", Value(2)));
  CHECK_FALSE(arg_value_misfit("moe_layer_freq", Value(mr::List{Value(1), Value(0)})));
  CHECK(arg_value_misfit("moe_layer_freq", Value("x")) == std::optional<std::string>("an integer or a list of integers"));
  // nargs lists: each item checked
  CHECK_FALSE(arg_value_misfit("data_path", Value(mr::List{Value("a"), Value("b")})));
  CHECK(arg_value_misfit("data_path", Value("a")) == std::optional<std::string>("a list"));
  CHECK(arg_value_misfit("data_path", Value(mr::List{Value(1)})) ==
        std::optional<std::string>("a list of which each item is a string"));
  // A dest only validation derives: its typed view
  CHECK_FALSE(arg_value_misfit("virtual_pipeline_model_parallel_size", Value(2)));
  CHECK(arg_value_misfit("virtual_pipeline_model_parallel_size", Value("x")) == std::optional<std::string>("an integer"));
  // A dest nobody declares fits (nothing reads it).
  CHECK_FALSE(arg_value_misfit("no_such_argument", Value("x")));
}
