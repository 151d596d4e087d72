// torchrun's --nnodes, --rdzv-conf, --signals-to-handle and duplicate-filter values (launch/torchrun_options.h).
#include <signal.h>

#include <catch2/catch.hpp>

#include "config/diagnostic.h"
#include "launch/torchrun_options.h"

using mr::UsageError;
using mr::launch::parse_nnodes;
using mr::launch::parse_rdzv_conf;

namespace {

// The message of the UsageError `f` throws ("" when it throws none).
template <class F>
std::string refusal(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("--nnodes: N, or MIN:MAX (elastic when MIN < MAX)", "[launch][torchrun-options]") {
  auto is = [](mr::launch::NodeCount c, int lo, int hi) { return c.min == lo && c.max == hi; };
  CHECK(is(parse_nnodes("4", "--nnodes"), 4, 4));
  CHECK(is(parse_nnodes("3:3", "--nnodes"), 3, 3));
  CHECK_FALSE(parse_nnodes("3:3", "--nnodes").elastic());
  CHECK(is(parse_nnodes("1:4", "--nnodes"), 1, 4));
  CHECK(parse_nnodes("1:4", "--nnodes").elastic());
  for (const char* bad : {"4:1", "0:2"})
    CHECK(refusal([&] { parse_nnodes(bad, "--nnodes"); }) ==
          std::string("argument --nnodes: '") + bad + "' is not MIN:MAX with 1 <= MIN <= MAX");
  for (const char* bad : {"", "x", "2x", ":", "1:", ":2", "1:2:3", "99999999999"})
    CHECK(refusal([&] { parse_nnodes(bad, "PET_NNODES") ; }).rfind("argument PET_NNODES: invalid value '", 0) == 0);
}

TEST_CASE("--rdzv-conf: join_timeout and is_host act, the rest is named", "[launch][torchrun-options]") {
  const auto c = parse_rdzv_conf(" join_timeout = 90 , is_host=Yes,last_call_timeout=5,colour=blue", "c10d");
  REQUIRE(c.join_timeout_s);
  CHECK(*c.join_timeout_s == 90);
  REQUIRE(c.is_host);
  CHECK(*c.is_host);
  REQUIRE(c.notices.size() == 2);
  CHECK(c.notices[0] == "--rdzv-conf last_call_timeout=5: not used (the wait for more nodes once the minimum "
                        "arrived: an elastic --nnodes MIN:MAX only)");
  // White space around keys and values as Python's strip() takes it (a value from a multi-line YAML string).
  const auto ws = parse_rdzv_conf("join_timeout=\t30\n,\r\nis_host=no\n", "c10d");
  REQUIRE(ws.join_timeout_s);
  CHECK(*ws.join_timeout_s == 30);
  REQUIRE(ws.is_host);
  CHECK_FALSE(*ws.is_host);
  // In an elastic job last_call_timeout acts.
  const auto el = parse_rdzv_conf("last_call_timeout=5", "c10d", /*elastic=*/true);
  REQUIRE(el.last_call_timeout_s);
  CHECK(*el.last_call_timeout_s == 5);
  CHECK(el.notices.empty());
  for (const char* bad : {"last_call_timeout=soon", "last_call_timeout=-1", "last_call_timeout=86401"})
    CHECK_THAT(refusal([&] { parse_rdzv_conf(bad, "c10d", true); }),
               Catch::StartsWith("argument --rdzv-conf: last_call_timeout='") &&
                   Catch::Contains("is not a whole number of seconds from 0 to 86400"));
  CHECK(c.notices[1] == "--rdzv-conf colour=blue: not used (not a setting of torchrun's c10d rendezvous)");
  for (const char* f : {"0", "false", "F", "no", "n"}) CHECK_FALSE(*parse_rdzv_conf(std::string("is_host=") + f, "c10d").is_host);
  // is_host with the static rendezvous: node 0 hosts the store; named, not used.
  const auto s = parse_rdzv_conf("is_host=1", "static");
  CHECK_FALSE(s.is_host);
  REQUIRE(s.notices.size() == 1);
  CHECK(s.notices[0].find("acts on the c10d rendezvous only") != std::string::npos);
  // Empty: nothing.
  const auto e = parse_rdzv_conf("  ", "c10d");
  CHECK_FALSE(e.join_timeout_s);
  CHECK(e.notices.empty());
}

TEST_CASE("--rdzv-conf: malformed strings and bad values are refused", "[launch][torchrun-options]") {
  CHECK(refusal([] { parse_rdzv_conf("a=1,,b=2", "c10d"); }) ==
        "argument --rdzv-conf: 'a=1,,b=2' is not KEY1=VALUE1,...,KEYN=VALUEN (an empty key)");
  CHECK(refusal([] { parse_rdzv_conf("a=", "c10d"); }) ==
        "argument --rdzv-conf: 'a=' is not KEY1=VALUE1,...,KEYN=VALUEN (no value for 'a')");
  CHECK(refusal([] { parse_rdzv_conf("=1", "c10d"); }).find("(an empty key)") != std::string::npos);
  for (const char* bad : {"join_timeout=1.5", "join_timeout=0", "join_timeout=-3", "join_timeout=soon"})
    CHECK(refusal([&] { parse_rdzv_conf(bad, "c10d"); }).find("is not a whole number of seconds above 0") !=
          std::string::npos);
  CHECK(refusal([] { parse_rdzv_conf("is_host=maybe", "c10d"); }) ==
        "argument --rdzv-conf: is_host='maybe' is not a boolean (true/false, 1/0, yes/no)");
}

TEST_CASE("a long value is echoed in part: its first 200 bytes and its length", "[launch][torchrun-options]") {
  const std::string big(100'000, 'j');
  CHECK(refusal([&] { parse_rdzv_conf("join_timeout=" + big, "c10d"); }) ==
        "argument --rdzv-conf: join_timeout='" + big.substr(0, 200) +
            "... (100000 bytes)' is not a whole number of seconds above 0");
  CHECK(refusal([&] { parse_rdzv_conf(big, "c10d"); }) ==
        "argument --rdzv-conf: '" + big.substr(0, 200) + "... (100000 bytes)' is not KEY1=VALUE1,...,KEYN=VALUEN (no "
        "value for '" + big.substr(0, 200) + "... (100000 bytes)')");
  CHECK(refusal([&] { parse_nnodes(big, "--nnodes"); }) ==
        "argument --nnodes: invalid value '" + big.substr(0, 200) + "... (100000 bytes)' (a number of nodes, or MIN:MAX)");
}

TEST_CASE("--signals-to-handle: names with or without SIG, any case; unknown, uncatchable and empty refused",
          "[launch][torchrun-options]") {
  using mr::launch::parse_signals_to_handle;
  CHECK(parse_signals_to_handle("SIGTERM,SIGINT,SIGHUP,SIGQUIT", "--signals-to-handle") ==
        std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT});
  CHECK(parse_signals_to_handle(" usr1 , SIGTERM,sigusr1,", "--signals-to-handle") == std::vector<int>{SIGUSR1, SIGTERM});
  CHECK(refusal([] { parse_signals_to_handle("SIGTERM,SIGFOO", "--signals-to-handle"); }) ==
        "argument --signals-to-handle: 'SIGFOO' is not a signal name (e.g. SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1)");
  CHECK(refusal([] { parse_signals_to_handle("kill", "--signals-to-handle"); }) ==
        "argument --signals-to-handle: SIGKILL cannot be caught by any process");
  CHECK_THAT(refusal([] { parse_signals_to_handle(" , ", "PET_SIGNALS_TO_HANDLE"); }),
             Catch::StartsWith("argument PET_SIGNALS_TO_HANDLE: no signal named"));
  CHECK(mr::launch::signal_name_of(SIGUSR2) == "SIGUSR2");
}

TEST_CASE("--duplicate-stdout-filters: torchrun's comma_separated_list (,, is a comma)", "[launch][torchrun-options]") {
  using mr::launch::parse_filter_list;
  using V = std::vector<std::string>;
  // The expected lists are what torchrun's comma_separated_list returns for the same strings.
  CHECK(parse_filter_list("apple,orange") == V{"apple", "orange"});
  CHECK(parse_filter_list("a,,b,c") == V{"a,b", "c"});
  CHECK(parse_filter_list("") == V{""});
  CHECK(parse_filter_list("a,") == V{"a", ""});
  CHECK(parse_filter_list(",,,") == V{",", ""});
  CHECK(parse_filter_list("x,,,y") == V{"x,", "y"});
}
