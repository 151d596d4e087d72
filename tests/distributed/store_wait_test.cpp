// get_within (lib/distributed/store_wait.cpp): the NCCL unique id's wait on the non-root ranks is bounded by the
// collective timeout, not the store's own (10 minutes by default), and a peer failure seen by the poll ends it.
// On a real TCPStore hosted here; no GPU involved (the wait is the store's part of the NCCL bring-up).
#include <catch2/catch.hpp>

#include <thread>

#include "distributed/store.h"
#include "proc.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::shared_ptr<mr::distributed::Store> host_store(int port) {
  mr::distributed::Store::Options so;
  so.port = port;
  so.is_server = true;
  so.timeout = std::chrono::minutes(10);  // the store's own timeout: what the wait must NOT take
  return mr::distributed::Store::connect(so);
}

std::shared_ptr<mr::distributed::Store> client_store(int port) {
  mr::distributed::Store::Options so;
  so.port = port;
  so.timeout = std::chrono::minutes(10);
  return mr::distributed::Store::connect(so);
}

}  // namespace

TEST_CASE("get_within: an absent root fails within the collective timeout, not the store's", "[dist][store]") {
  const int port = mrtest::free_port();
  auto server = host_store(port);
  auto group = client_store(port)->with_prefix("nccl/0,1");
  const auto t0 = Clock::now();
  try {
    mr::distributed::get_within(*group, "nccl_id", milliseconds(700), {}, "the NCCL unique id of group tp [0, 1]");
    FAIL("returned without the key");
  } catch (const mr::distributed::CollectiveError& e) {
    const auto took = Clock::now() - t0;
    INFO(e.what());
    // Not flagged as a collective's timeout: Runtime::diagnose would replace the text by "timed out; the collective
    // timeout is ..." and the user would not learn that the root never published the id.
    CHECK_FALSE(e.timed_out);
    CHECK(took >= milliseconds(700));
    CHECK(took < std::chrono::seconds(5));
    CHECK_THAT(e.what(), Catch::Contains("the NCCL unique id of group tp [0, 1]") && Catch::Contains("'nccl_id'") &&
                             Catch::Contains("0.7 s") && Catch::Contains("MR_DIST_TIMEOUT_S"));
  }
}

TEST_CASE("get_within: a key published during the wait is returned", "[dist][store]") {
  const int port = mrtest::free_port();
  auto server = host_store(port);
  auto root = server->with_prefix("nccl/0,1");
  auto other = client_store(port)->with_prefix("nccl/0,1");
  std::thread publisher([&] {
    std::this_thread::sleep_for(milliseconds(300));
    root->set("nccl_id", "00ff");
  });
  int polls = 0;
  const std::string got =
      mr::distributed::get_within(*other, "nccl_id", std::chrono::seconds(20), [&] { ++polls; }, "the id");
  publisher.join();
  CHECK(got == "00ff");
  CHECK(polls > 0);  // the peers were polled while it waited
  // Already there: returned at once, no poll.
  polls = 0;
  CHECK(mr::distributed::get_within(*other, "nccl_id", milliseconds(1), [&] { ++polls; }, "the id") == "00ff");
  CHECK(polls == 0);
}

TEST_CASE("get_within: a peer failure seen by the poll ends the wait with its own error", "[dist][store]") {
  const int port = mrtest::free_port();
  auto server = host_store(port);
  int polls = 0;
  const auto t0 = Clock::now();
  try {
    mr::distributed::get_within(*server, "nccl_id", std::chrono::seconds(60), [&] {
      if (++polls == 3) throw mr::distributed::CollectiveError("rank 0 stopped sending heartbeats", false);
    }, "the id");
    FAIL("returned without the key");
  } catch (const mr::distributed::CollectiveError& e) {
    CHECK(std::string(e.what()) == "rank 0 stopped sending heartbeats");
    CHECK_FALSE(e.timed_out);
    CHECK(polls == 3);
    CHECK(Clock::now() - t0 < std::chrono::seconds(5));
  }
}
