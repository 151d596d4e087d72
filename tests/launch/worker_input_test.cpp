// worker_input.h: the words ranks say when their configs differ (fingerprint_differences).
#include "launch/worker_input.h"

#include "../config/validated_fills.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <string>

using mr::launch::fingerprint_differences;

TEST_CASE("config differences between ranks name each value's rank, the derived arguments last and marked",
          "[launch][worker-input]") {
  // Review firsthour36 #13: rank 1 got --num-layers 4, rank 0 2; validation derives --encoder-num-layers from it.
  const std::string rank1 = R"({"encoder_num_layers": 4, "lr": 0.1, "num_layers": 4})";
  const std::string rank0 = R"({"encoder_num_layers": 2, "lr": 0.1, "num_layers": 2})";
  const std::map<std::string, std::string> derived = {{"encoder_num_layers", "derived by model-dimensions"}};
  CHECK(fingerprint_differences(1, rank1, rank0, derived) ==
        " --num-layers (4 on rank 1, 2 on rank 0), --encoder-num-layers (4 on rank 1, 2 on rank 0; not given: "
        "derived by model-dimensions)");
  // Nothing derived: the order of the fingerprint; an argument one rank lacks is "(absent)".
  CHECK(fingerprint_differences(3, R"({"a_b": 1})", R"({"a_b": 2, "c": true})", {}) ==
        " --a-b (1 on rank 3, 2 on rank 0), --c ((absent) on rank 3, true on rank 0)");
  // At most 12, then the count.
  std::string a = "{", b = "{";
  for (int i = 0; i < 14; ++i) {
    a += std::string(i ? ", " : "") + "\"x" + std::to_string(10 + i) + "\": 1";
    b += std::string(i ? ", " : "") + "\"x" + std::to_string(10 + i) + "\": 2";
  }
  const std::string many = fingerprint_differences(1, a + "}", b + "}", {});
  CHECK_THAT(many, Catch::EndsWith("--x21 (1 on rank 1, 2 on rank 0) ... (14 in all)"));
}

TEST_CASE("the derived arguments travel to the workers with the worker input", "[launch][worker-input]") {
  mr::launch::WorkerInput in;
  in.derived = {{"encoder_num_layers", "derived by model-dimensions"}, {"kv_channels", "derived"}};
  const std::string text = in.encode();
  CHECK_THAT(text, Catch::Contains(R"("derived": {"encoder_num_layers": "derived by model-dimensions", )"
                                   R"("kv_channels": "derived"})"));
  in.ns.set("tensor_model_parallel_size", mr::Value(2), {});  // decode needs a (validated) namespace
  mrtest::fill_as_validated(in.ns);
  CHECK(mr::launch::WorkerInput::decode(in.encode()).derived == in.derived);
}

// Review hostile37 #2: the worker's input is read bounded and never from what could block or never end.
TEST_CASE("the worker input is read from a regular file only, bounded, and --input-fd takes digits only",
          "[launch][worker-input]") {
  const int fd = mr::launch::memfd_with("{\"x\": 1}");
  CHECK(mr::launch::read_fd(fd) == "{\"x\": 1}");
  ::close(fd);
  const int zero = ::open("/dev/zero", O_RDONLY);
  REQUIRE(zero >= 0);
  CHECK_THROWS_WITH(mr::launch::read_fd(zero), Catch::Contains("is a character device, not the regular file"));
  ::close(zero);
  int p[2];
  REQUIRE(::pipe(p) == 0);
  CHECK_THROWS_WITH(mr::launch::read_fd(p[0]), Catch::Contains("is a named pipe"));  // no blocking read
  ::close(p[0]);
  ::close(p[1]);
  CHECK_THROWS_WITH(mr::launch::read_file("/dev/zero"), Catch::Contains("not a regular file"));
  CHECK_THROWS_WITH(mr::launch::read_file("/"), Catch::Contains("is a directory"));
  // The worker reads it: the refusal names the worker, not the launcher (review diff38 #10e).
  CHECK_THROWS_WITH(mr::launch::read_file("/"), Catch::EndsWith("; megatron-run-worker reads only regular files"));
  CHECK_THROWS_WITH(mr::launch::read_file("/nonexistent/x.json"), Catch::Contains("No such file"));
  CHECK(mr::launch::parse_input_fd("3") == 3);
  for (const char* bad : {"", "abc", "0x3", "-1", "3 ", "99999999999999"})
    CHECK_THROWS_WITH(mr::launch::parse_input_fd(bad), Catch::Contains("is not a file descriptor number"));
}
