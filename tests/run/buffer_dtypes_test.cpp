// run/buffer_dtypes.h: the buffers' dtypes from the typed arguments, the one mapping the run allocates by and the
// memory estimate counts by (model_test's [memory] case compares the two byte for byte).
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "config/namespace.h"
#include "config/value.h"
#include "run/buffer_dtypes.h"

#include "../config/validated_fills.h"

using mr::Value;
using mr::optim::DType;
using mr::run::MainStorage;

namespace {

// The arguments the mapping reads, over Args' defaults (fp32, adam, no precision-aware optimizer).
mr::Args args(std::map<std::string, Value> over) {
  mr::Namespace ns;
  for (auto& [k, x] : over) ns.set(k, x, {});
  mrtest::fill_as_validated(ns);
  return mr::Args::from(ns);
}

Value s(const char* v) { return Value(std::string(v)); }

}  // namespace

TEST_CASE("buffer dtypes: the model's, and fp32 moments and masters without the precision-aware Adam", "[run][dtypes]") {
  CHECK(mr::run::buffer_dtypes(args({})).model == DType::F32);
  CHECK(mr::run::buffer_dtypes(args({{"bf16", Value(true)}})).model == DType::BF16);
  CHECK(mr::run::buffer_dtypes(args({{"fp16", Value(true)}})).model == DType::F16);
  // --exp-avg-dtype without --use-precision-aware-optimizer, or with another optimizer: fp32 state.
  for (const auto& over : {std::map<std::string, Value>{{"bf16", Value(true)}, {"exp_avg_dtype", s("bf16")}},
                           std::map<std::string, Value>{{"bf16", Value(true)},
                                                        {"use_precision_aware_optimizer", Value(true)},
                                                        {"optimizer", s("sgd")},
                                                        {"exp_avg_dtype", s("bf16")}}}) {
    const mr::run::BufferDtypes d = mr::run::buffer_dtypes(args(over));
    CHECK(d.model == DType::BF16);
    CHECK(d.exp_avg == DType::F32);
    CHECK(d.exp_avg_sq == DType::F32);
    CHECK(d.main == MainStorage::F32);
  }
}

TEST_CASE("buffer dtypes: the precision-aware Adam's moments in every dtype, and how the masters are kept",
          "[run][dtypes]") {
  const std::map<std::string, DType> moment = {
      {"fp32", DType::F32}, {"fp16", DType::F16}, {"bf16", DType::BF16}, {"fp8", DType::E4M3}};
  for (const auto& [m1, d1] : moment)
    for (const auto& [m2, d2] : moment) {
      const mr::run::BufferDtypes d = mr::run::buffer_dtypes(args({{"bf16", Value(true)},
                                                                   {"use_precision_aware_optimizer", Value(true)},
                                                                   {"exp_avg_dtype", s(m1.c_str())},
                                                                   {"exp_avg_sq_dtype", s(m2.c_str())}}));
      INFO(m1 << " " << m2);
      CHECK(d.exp_avg == d1);
      CHECK(d.exp_avg_sq == d2);
    }
  const std::map<std::string, Value> aware_bf16 = {{"bf16", Value(true)}, {"use_precision_aware_optimizer", Value(true)}};
  // bf16 params with fp32 masters: remainders with Transformer Engine 2.1 or newer, else fp32.
  mr::TargetEnv te20, te21;
  te20.te_version = "2.0.0";
  te21.te_version = "2.1.0";
  CHECK(mr::run::buffer_dtypes(args(aware_bf16), te21).main == MainStorage::Remainder);
  CHECK(mr::run::buffer_dtypes(args(aware_bf16), te20).main == MainStorage::F32);
  std::map<std::string, Value> fp16_main = aware_bf16;
  fp16_main["main_params_dtype"] = s("fp16");
  CHECK(mr::run::buffer_dtypes(args(fp16_main), te21).main == MainStorage::F16);
  CHECK(mr::run::main_storage_bytes(MainStorage::F32) == 4);
  CHECK(mr::run::main_storage_bytes(MainStorage::F16) == 2);
  CHECK(mr::run::main_storage_bytes(MainStorage::Remainder) == 2);
}
