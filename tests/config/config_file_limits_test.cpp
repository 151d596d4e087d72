// Robust reading of config files, --yaml-cfg, --target-env and the files validation reads (issue 9): every bad
// input is a usage error (or the file's rule) naming the flag or file:line, never a crash, hang or silent change.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/limits.h"
#include "config/parse/invocation.h"
#include "config/target_env.h"
#include "config/parse/yaml_cfg.h"
#include "support.h"
#include "scratch.h"

namespace fs = std::filesystem;

namespace {
fs::path scratch() { return mrtest::scratch_dir("limits"); }
std::string write(const std::string& name, const std::string& text) {
  return mrtest::write_file(name, text, "limits");
}
std::string fifo(const std::string& name) {
  fs::path p = scratch() / name;
  fs::remove(p);
  REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
  return p.string();
}

mr::Parsed parse(const std::vector<std::string>& files, const std::vector<std::string>& cli = {}) {
  mr::Invocation inv;
  inv.config_files = files;
  inv.cli = mr::argv_tokens(cli);
  inv.env = mr::TargetEnv{};
  return mr::parse_invocation(mr::Schema::megatron(), inv);
}
mr::UsageError refusal(const std::vector<std::string>& files, const std::vector<std::string>& cli = {}) {
  try {
    parse(files, cli);
  } catch (const mr::UsageError& e) {
    return e;
  }
  return mr::UsageError("");
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
bool has(const mr::UsageError& e, const std::string& part) { return has(std::string(e.what()), part); }
bool warned(const mr::Parsed& p, const std::string& part) {
  for (const auto& w : p.warnings)
    if (has(w, part)) return true;
  return false;
}
const std::string kDefault = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
}  // namespace

TEST_CASE("config files: what is not a regular file is refused, not opened", "[config-limits]") {
  auto f = refusal({fifo("p.yaml")});
  CHECK(f.id == "input.not-regular-file");
  CHECK(has(f, "p.yaml: the config file is not a regular file (it is a named pipe)"));
  CHECK(f.flags == std::vector<std::string>{"--config"});
  CHECK(refusal({scratch().string()}).id == "input.not-regular-file");
  CHECK(refusal({"/dev/zero"}).id == "input.not-regular-file");
  CHECK(refusal({"/proc/self/mem"}).id == "input.unreadable");
  CHECK(has(refusal({"/nonexistent/x.yaml"}), "cannot read config file"));
}

TEST_CASE("config files: recursive aliases, billion laughs and deep nesting fail the file", "[config-limits]") {
  auto r = refusal({write("rec.yaml", "--data-path: &a [*a]\n")});
  CHECK(r.id == "input.yaml-recursive-alias");
  CHECK(has(r, "rec.yaml:1:"));
  CHECK(refusal({write("recm.yaml", "MODEL_ARGS:\n  --x: &m {<<: *m}\n")}).id == "input.yaml-recursive-alias");
  std::string s = "a: &a [1,1,1,1,1,1,1,1,1,1]\n";
  std::string prev = "a";
  for (int i = 0; i < 7; ++i) {
    std::string n = "b" + std::to_string(i);
    s += n + ": &" + n + " [*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" +
         prev + ",*" + prev + ",*" + prev + ",*" + prev + "]\n";
    prev = n;
  }
  for (const char* use : {"--data-path: *", "--use-mcore-models: *"}) {
    auto e = refusal({write("laughs.yaml", s + use + prev + "\n")});
    CHECK(e.id == "input.yaml-expansion-limit");
    CHECK(has(e, "laughs.yaml:"));
  }
  // In the functional-test layout, ENV_VARS keys included.
  std::string ci = "MODEL_ARGS:\n  --num-layers: 2\nX: &a [1,1,1,1,1,1,1,1,1,1]\n";
  prev = "a";
  for (int i = 0; i < 7; ++i) {
    std::string n = "b" + std::to_string(i);
    ci += "Y" + n + ": &" + n + " [*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev +
          ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + "]\n";
    prev = n;
  }
  CHECK(refusal({write("laughs-env.yaml", ci + "ENV_VARS:\n  ? *" + prev + "\n  : 1\n")}).id ==
        "input.yaml-expansion-limit");
  auto d = refusal({write("deep.yaml", "--data-path: " + std::string(500, '[') + std::string(500, ']') + "\n")});
  CHECK(d.id == "input.yaml-nesting-limit");
  CHECK(has(d, "deep.yaml:1: YAML sequences and mappings nested deeper than 64 levels"));
}

TEST_CASE("config files: a repeated key is an error in the plain layout, a warning naming both lines in CI's",
          "[config-limits]") {
  auto e = refusal({write("dup.yaml", "--num-layers: 2\n--hidden-size: 64\n--num-layers: 4\n")});
  CHECK(e.id == "input.yaml-duplicate-key");
  CHECK(std::string(e.what()) == scratch().string() + "/dup.yaml:3: duplicate key '--num-layers' (also at " +
                                     scratch().string() + "/dup.yaml:1); a config file sets each argument once");
  // A file name's newline is escaped inside the message too (its place in front is escaped where it is printed).
  auto nl = refusal({write("dup\nline.yaml", "--num-layers: 2\n--num-layers: 4\n")});
  CHECK(nl.id == "input.yaml-duplicate-key");
  CHECK(has(nl, "(also at " + scratch().string() + "/dup\\x0aline.yaml:1)"));
  // A key set twice is one more of the file's mistakes: all of them at once, in line order, each with its line.
  auto both = refusal({write("dup2.yaml", "hidden_sizee: 4\nnum_layers: 2\nnum_layers: 3\nnum_layerz: 1\n")});
  const std::string d2 = scratch().string() + "/dup2.yaml";
  CHECK(std::string(both.what()) ==
        d2 + ":1: unknown argument 'hidden_sizee' (did you mean --hidden-size?)\n  also " + d2 +
            ":3: duplicate key 'num_layers' (also at " + d2 + ":2); a config file sets each argument once\n  also " + d2 +
            ":4: unknown argument 'num_layerz' (did you mean --num-layers?)");
  CHECK(both.where == d2 + ":1");  // the first mistake's place and id
  CHECK(both.id == "parse.unknown-argument");
  CHECK(both.flags == std::vector<std::string>{"hidden_sizee", "num_layers", "num_layerz"});
  // One argument under two keys, and a bad value after a duplicate: each reported.
  auto two = refusal({write("dup3.yaml", "--num-layers: 2\nnum_layers: 3\n--hidden-size: x\n")});
  CHECK(two.id == "input.yaml-duplicate-key");
  CHECK(has(two, "dup3.yaml:2: 'num_layers' sets the same argument as '--num-layers'"));
  CHECK(has(two, "\n  also " + scratch().string() + "/dup3.yaml:3: argument --hidden-size: invalid int value: 'x'"));
  // Bounded as the other mistakes: the first kMaxListedArguments + 1 by line, then a count.
  std::string many_dups;
  for (int i = 0; i < 1000; ++i) many_dups += "--num-layers: " + std::to_string(i) + "\n";
  many_dups += "--num-layerz: 1\n";  // after every duplicate: counted, not listed
  auto bounded = refusal({write("dups.yaml", many_dups)});
  CHECK(has(bounded, "dups.yaml:2: duplicate key '--num-layers' (also at "));
  CHECK(has(bounded, "dups.yaml:102: duplicate key"));
  CHECK_FALSE(has(bounded, "dups.yaml:103:"));
  CHECK_FALSE(has(bounded, "num-layerz"));
  CHECK(has(bounded, "\n  ... (899 more)"));
  // "Did you mean" for the first kMaxSuggestedFlags unknown keys only, as on a command line: each is a search over
  // every flag (review lint36: 100,000 unknown keys of 30 characters took 86 s with one each).
  const size_t max = mr::limits::kMaxSuggestedFlags;
  auto key = [](size_t i) { return "hidden_size" + std::string(1, char('a' + i)); };  // one letter from --hidden-size
  std::string near_misses;
  for (size_t i = 0; i <= max; ++i) near_misses += key(i) + ": 4\n";
  auto suggested = refusal({write("near.yaml", near_misses)});
  const std::string near = scratch().string() + "/near.yaml:";
  CHECK(has(suggested, near + "1: unknown argument '" + key(0) + "' (did you mean --hidden-size"));
  CHECK(has(suggested, near + std::to_string(max) + ": unknown argument '" + key(max - 1) + "' (did you mean --hidden-size"));
  CHECK(has(suggested, near + std::to_string(max + 1) + ": unknown argument '" + key(max) + "'"));
  CHECK_FALSE(has(suggested, near + std::to_string(max + 1) + ": unknown argument '" + key(max) + "' (did you mean"));
  // Megatron's CI loader (PyYAML) keeps the last value: so do we, and provenance cites that line.
  auto p = parse({write("dupci.yaml", "MODEL_ARGS:\n  --num-layers: 2\n  --hidden-size: 64\n  --num-layers: 4\n")});
  CHECK(p.ns["num_layers"].as_int() == 4);
  CHECK(p.ns.provenance("num_layers").where == scratch().string() + "/dupci.yaml:4");
  CHECK(warned(p, "[input.yaml-duplicate-key] " + scratch().string() + "/dupci.yaml:4: duplicate key '--num-layers' (also at " +
                      scratch().string() + "/dupci.yaml:2)"));
  // The key keeps its first position in the command line the file stands for.
  CHECK(p.argv[0].text == "--num-layers");
  CHECK(p.argv[1].text == "4");
  // 100k repeats: linear, and a few warnings.
  std::string many = "MODEL_ARGS:\n";
  for (int i = 0; i < 100000; ++i) many += "  --num-layers: " + std::to_string(i + 1) + "\n";
  auto m = parse({write("many.yaml", many)});
  CHECK(m.ns["num_layers"].as_int() == 100000);
  CHECK(m.warnings.size() <= mr::limits::kMaxWarningsPerKind + 1);
  CHECK(warned(m, "and 99989 more like these"));
  // A key a merge brings in is overridden silently (that is what merges are for).
  auto g = parse({write("merge.yaml", "BASE: &b\n  --num-layers: 2\n  --hidden-size: 64\nMODEL_ARGS:\n  <<: *b\n"
                                      "  --num-layers: 4\n")});
  CHECK(g.ns["num_layers"].as_int() == 4);
  CHECK(g.ns["hidden_size"].as_int() == 64);
  CHECK(g.warnings.empty());
  auto pm = parse({write("mergep.yaml", "{<<: {--num-layers: 2, --hidden-size: 64}, --num-layers: 3}\n")});
  CHECK(pm.ns["num_layers"].as_int() == 3);
}

TEST_CASE("config files: 100k distinct keys are linear (the first unknown one is named)", "[config-limits]") {
  std::string keys;
  for (int i = 0; i < 100000; ++i) keys += "--key-" + std::to_string(i) + ": " + std::to_string(i) + "\n";
  auto e = refusal({write("keys.yaml", keys)});
  CHECK(has(e, "keys.yaml:1: unknown argument '--key-0'"));
  std::string env = "MODEL_ARGS:\n  --num-layers: 2\nENV_VARS:\n";
  for (int i = 0; i < 100000; ++i) env += "  V" + std::to_string(i) + ": " + std::to_string(i) + "\n";
  auto p = parse({write("env.yaml", env)});
  CHECK(p.env.vars.at("V99999") == "99999");
}

TEST_CASE("config files: tags are constructed (standard ones) or refused naming file:line", "[config-limits]") {
  auto t = refusal({write("tag.yaml", "--tokenizer-type: !!python/name:os.system x\n")});
  CHECK(t.id == "input.yaml-tag");
  CHECK(has(t, "tag.yaml:1: unsupported YAML tag !!python/name:os.system"));
  auto i = refusal({write("int.yaml", "--tokenizer-type: !!int NullTokenizer\n")});
  CHECK(i.id == "input.yaml-tag");
  CHECK(has(i, "int.yaml:1: cannot construct !!int from 'NullTokenizer'"));
  CHECK(refusal({write("local.yaml", "--save: !local x\n")}).id == "input.yaml-tag");
  CHECK(refusal({write("seqtag.yaml", "--data-path: !!python/tuple [a]\n")}).id == "input.yaml-tag");
  CHECK(refusal({write("citag.yaml", "MODEL_ARGS:\n  --num-layers: !!python/object:x {}\n")}).id == "input.yaml-tag");
  auto ok = parse({write("std.yaml", "--save: !!str 5\n--num-layers: !!int 3\n--lr: !!float 1\n--data-path: !!seq [a]\n")});
  CHECK(ok.ns["save"].as_str() == "5");
  CHECK(ok.ns["num_layers"].as_int() == 3);
  CHECK(ok.ns["lr"].as_float() == 1.0);
}

TEST_CASE("config files: !!float 1e-4 and !!null foo are constructed as yaml.safe_load does, in both layouts",
          "[config-limits]") {
  // PyYAML 6.0: yaml.safe_load("a: !!float 1e-4") -> {'a': 0.0001} (1e-4 alone is the string '1e-4'); !!null makes
  // None of any text; !!int takes 0x1F (31); !!bool takes TRUE; !!float abc and !!int 1.5 raise ValueError.
  auto plain = parse({write("fl.yaml", "--lr: !!float 1e-4\n--min-lr: !!float 1e4\n--load: !!null foo\n"
                                       "--num-layers: !!int 0x1F\n--fp16: !!bool TRUE\n")});
  CHECK(plain.ns["lr"].as_float() == 0.0001);
  CHECK(plain.ns["min_lr"].as_float() == 10000.0);
  CHECK(plain.ns["load"].is_none());
  CHECK(plain.ns["num_layers"].as_int() == 31);
  CHECK(plain.ns["fp16"].as_bool());
  // MODEL_ARGS: Megatron's CI launcher passes the scalar's text (yq), so !!float 1e-4 is the word 0.0001 (Python's
  // float('1e-4') is that number), while !!int 0x1F stays 0x1F, which Megatron's int() refuses.
  auto ci = parse({write("flci.yaml", "MODEL_ARGS:\n  --lr: !!float 1e-4\n  --num-layers: !!int 31\n")});
  CHECK(ci.ns["lr"].as_float() == 0.0001);
  CHECK(ci.ns["num_layers"].as_int() == 31);
  auto hex = refusal({write("flcihex.yaml", "MODEL_ARGS:\n  --num-layers: !!int 0x1F\n")});
  CHECK(hex.id == "parse.invalid-value");
  CHECK(has(hex, "flcihex.yaml:2: argument --num-layers: invalid int value: '0x1F'"));
  auto f = refusal({write("flbad.yaml", "--num-layers: 2\n--lr: !!float abc\n")});
  CHECK(f.id == "input.yaml-tag");
  CHECK(has(f, "flbad.yaml:2: cannot construct !!float from 'abc'"));
  auto i = refusal({write("intbad.yaml", "MODEL_ARGS:\n  --num-layers: !!int 1.5\n")});
  CHECK(i.id == "input.yaml-tag");
  CHECK(has(i, "intbad.yaml:2: cannot construct !!int from '1.5'"));
}

TEST_CASE("config files: a quote that swallows key lines is an error (plain) or a warning (CI)", "[config-limits]") {
  auto e = refusal({kDefault, write("q.yaml", "--save: \"/x\n--num-layers: 4\n--hidden-size: 9999\"\n")});
  CHECK(e.id == "input.yaml-multiline-quoted");
  CHECK(has(e, "q.yaml:1: the quoted value starting here runs on to " + scratch().string() +
                   "/q.yaml:2, taking in what looks like the key '--num-layers'"));
  auto p = parse({write("qci.yaml", "MODEL_ARGS:\n  --save: \"/x\n  --num-layers: 4\n  --hidden-size: 9999\"\n")});
  CHECK(p.ns["save"].as_str() == "/x --num-layers: 4 --hidden-size: 9999");
  CHECK(warned(p, "[input.yaml-multiline-quoted] " + scratch().string() + "/qci.yaml:2:"));
  CHECK(warned(p, "qci.yaml:3"));
  // A quote never closed is a syntax error everywhere.
  CHECK(refusal({write("open.yaml", "--save: \"/x\n--num-layers: 4\n")}).id == "input.yaml-syntax");
  // Ordinary folding is fine.
  CHECK(parse({write("fold.yaml", "--save: \"/a\n  /b\"\n")}).ns["save"].as_str() == "/a /b");
}

TEST_CASE("config files: second documents, non-scalar keys, bad ENV_VARS and text are refused", "[config-limits]") {
  auto m = refusal({write("multi.yaml", "--num-layers: 2\n---\n--num-layers: 4\n")});
  CHECK(m.id == "input.yaml-multiple-documents");
  CHECK(has(m, "multi.yaml:2: a second YAML document starts here"));
  auto k = refusal({write("key.yaml", "--num-layers: 2\n[a, b]: 1\n")});
  CHECK(k.id == "input.yaml-non-scalar-key");
  CHECK(has(k, "key.yaml:2: the key at " + scratch().string() + "/key.yaml:2 is not a scalar (it is a sequence)"));
  CHECK(refusal({write("key2.yaml", "? {a: 1}\n: 1\n")}).id == "input.yaml-non-scalar-key");
  CHECK(refusal({write("key3.yaml", "MODEL_ARGS:\n  [x]: 1\n")}).id == "input.yaml-non-scalar-key");
  CHECK(refusal({write("key4.yaml", "MODEL_ARGS: {}\nENV_VARS:\n  {a: 1}: 1\n")}).id == "input.yaml-non-scalar-key");
  CHECK(has(refusal({write("envlist.yaml", "MODEL_ARGS: {}\nENV_VARS: [A]\n")}),
            "envlist.yaml:2: ENV_VARS must be a mapping of variable names to values"));
  CHECK(refusal({write("nul.yaml", std::string("--num-layers: 2\0\n", 17))}).id == "input.not-text");
  CHECK(refusal({write("latin1.yaml", "--save: /caf\xe9\n")}).id == "input.not-text");
  // An empty file, or one of comments, sets nothing.
  CHECK(parse({write("empty.yaml", "")}).ns.provenance("num_layers").kind == mr::Provenance::Kind::Default);
  CHECK(parse({write("comments.yaml", "# nothing\n")}).ns.provenance("num_layers").kind == mr::Provenance::Kind::Default);
}

TEST_CASE("ENV_VARS values that are not integers name the file:line that set them", "[config-limits]") {
  auto w = refusal({write("ws.yaml", "MODEL_ARGS:\n  --num-layers: 2\nENV_VARS:\n  WORLD_SIZE: eight\n")});
  CHECK(has(w, "ws.yaml:4: environment variable WORLD_SIZE"));
  CHECK(w.where == scratch().string() + "/ws.yaml:4");
  auto r = refusal({write("rank.yaml", "MODEL_ARGS:\n  --num-layers: 2\nENV_VARS:\n  RANK: first\n")});
  CHECK(std::string(r.what()) == scratch().string() + "/rank.yaml:4: environment variable RANK='first' (set here) is not an integer");
  // --world-size replaces the file's value: then nothing is wrong.
  mr::Invocation inv;
  inv.config_files = {write("ws2.yaml", "MODEL_ARGS:\n  --num-layers: 2\nENV_VARS:\n  WORLD_SIZE: eight\n")};
  inv.world_size = 8;
  inv.env = mr::TargetEnv{};
  CHECK(mr::parse_invocation(mr::Schema::megatron(), inv).ns["world_size"].as_int() == 8);
}

TEST_CASE("--target-env files: the same reader and checks, and values that fit", "[config-limits]") {
  auto load = [](const std::string& text) {
    mr::TargetEnv t;
    t.load_file(write("target.yaml", text));
    return t;
  };
  auto fails = [](const std::string& path) -> mr::UsageError {
    try {
      mr::TargetEnv t;
      t.load_file(path);
    } catch (const mr::UsageError& e) {
      return e;
    }
    return mr::UsageError("");
  };
  mr::TargetEnv t = load("gpu_arch: sm_100\nenv:\n  WORLD_SIZE: '8'\n");
  CHECK(t.arch_major() == 10);
  CHECK(t.var_where.at("WORLD_SIZE") == scratch().string() + "/target.yaml:3");
  CHECK(fails(fifo("target.fifo")).id == "input.not-regular-file");
  CHECK(fails(scratch().string()).id == "input.not-regular-file");
  CHECK(fails("/dev/zero").id == "input.not-regular-file");
  CHECK(fails(write("t1.yaml", "env: &e {A: *e}\n")).id == "input.yaml-recursive-alias");
  CHECK(fails(write("t2.yaml", "te_version: 1\nte_version: 2\n")).id == "input.yaml-duplicate-key");
  CHECK(fails(write("t3.yaml", "[a]: 1\n")).id == "input.yaml-non-scalar-key");
  CHECK(fails(write("t4.yaml", "env:\n  A: !!python/name:x y\n")).id == "input.yaml-tag");
  CHECK(has(fails(write("t5.yaml", "env:\n  A: [1]\n")), "t5.yaml:2: 'env.A' must be a scalar, not a sequence"));
  CHECK(has(fails(write("t6.yaml", "gpu_arch: sm_99999999999999999999\n")), "t6.yaml:1: bad GPU architecture"));
  // Top-level keys: the target keys, env:, or a name spelled like an environment variable. Anything else (a
  // typo, an option's spelling) is refused naming file:line and the key it most likely meant.
  mr::TargetEnv bare = load("gpu_arch: sm_100\nCUDA_DEVICE_MAX_CONNECTIONS: '1'\nNCCL_ALGO_2: Ring\n");
  CHECK(bare.vars.at("CUDA_DEVICE_MAX_CONNECTIONS") == "1");
  CHECK(bare.vars.at("NCCL_ALGO_2") == "Ring");
  const std::vector<std::pair<std::string, std::string>> typos = {
      {"gpu-arch: sm_100\n", "unknown key 'gpu-arch' in the target environment file (did you mean 'gpu_arch'?)"},
      {"gpu_arc: sm_100\n", "(did you mean 'gpu_arch'?)"},
      {"target-gpu-arch: sm_100\n", "(did you mean 'gpu_arch'?)"},
      {"--target-te-version: '2.9'\n", "(did you mean 'te_version'?)"},
      {"torch_versoin: '2.1'\n", "(did you mean 'torch_version'?)"},
      {"Env:\n  A: b\n", "(did you mean 'env'?)"},
      {"cuda_device_max_connections: 1\n", "its keys are gpu_arch, te_version"},
      {"gpu_arch: sm_90\nmy_var: [1]\n", "t7.yaml:2: unknown key 'my_var'"},  // refused before its value is read
  };
  for (const auto& [text, fragment] : typos) {
    INFO(text);
    const mr::UsageError e = fails(write("t7.yaml", text));
    CHECK(e.id == "input.target-env-key");
    CHECK(has(e, fragment));
    CHECK(has(e, "t7.yaml:"));
  }
  mr::TargetEnv w = load("env:\n  WORLD_SIZE: x\n");
  try {
    w.int_var("WORLD_SIZE", 1);
    FAIL("no error");
  } catch (const mr::UsageError& e) {
    CHECK(has(e, "target.yaml:2: environment variable WORLD_SIZE='x' (set here) is not an integer"));
  }
  // Version numbers too long for a long are a usage error, not an exception escaping as "internal".
  mr::TargetEnv v;
  v.te_version = "99999999999999999999.1";
  CHECK_THROWS_AS(mr::compare_versions(v.te_version, "2.0"), mr::UsageError);
}

TEST_CASE("--yaml-cfg: limits, recursion, duplicates and base-60 overflow", "[config-limits]") {
  auto fails = [](const std::string& path) -> mr::UsageError {
    try {
      mr::load_yaml_cfg_file(path, {});
    } catch (const mr::UsageError& e) {
      return e;
    }
    return mr::UsageError("");
  };
  CHECK(fails(fifo("cfg.fifo")).id == "input.not-regular-file");
  CHECK(has(fails(fifo("cfg2.fifo")), "the --yaml-cfg file is not a regular file"));
  CHECK(fails(scratch().string()).id == "input.not-regular-file");
  CHECK(fails(write("y1.yaml", "a: &a [*a]\n")).id == "input.yaml-recursive-alias");
  CHECK(fails(write("y2.yaml", "a: &a\n  <<: *a\n")).id == "input.yaml-recursive-alias");
  CHECK(fails(write("y3.yaml", "a: 1\n---\na: 2\n")).id == "input.yaml-multiple-documents");
  CHECK(fails(write("y4.yaml", "a: " + std::string(100, '[') + std::string(100, ']') + "\n")).id == "input.yaml-nesting-limit");
  CHECK(has(fails(write("y5.yaml", "a: 1:30:00:00:00:00:00:00:00:00:00:00\n")), "y5.yaml:1: integer 1:30:00:00:00:00:00:00:00:00:00:00 is out of range"));
  CHECK(has(fails(write("y6.yaml", "a: 9223372036854775807:0\n")), "is out of range"));
  CHECK(has(fails(write("y7.yaml", "[a]: 1\n")), "y7.yaml:1: the key at"));
  std::map<std::string, std::string> where;
  std::vector<std::string> warnings;
  mr::Object o = mr::load_yaml_cfg_file(write("y8.yaml", "a: 1:30:00\nb: 1\nc: x\nb: 2\n1: p\n1.0: q\n"), {}, &where, &warnings);
  CHECK(o[0].second.as_int() == 5400);
  CHECK(o[1].first == "b");
  CHECK(o[1].second.as_int() == 2);
  CHECK(where["b"] == scratch().string() + "/y8.yaml:4");  // the line whose value is kept
  REQUIRE(warnings.size() == 2);
  CHECK(has(warnings[0], "[input.yaml-duplicate-key] " + scratch().string() + "/y8.yaml:4: duplicate key 'b' (also at " +
                             scratch().string() + "/y8.yaml:2)"));
  CHECK(has(warnings[1], "y8.yaml:6: duplicate key 1.0"));  // 1 == 1.0 in a Python dict
  // 100k keys: linear.
  std::string many;
  for (int i = 0; i < 100000; ++i) many += "k" + std::to_string(i) + ": " + std::to_string(i) + "\n";
  CHECK(mr::load_yaml_cfg_file(write("y9.yaml", many), {}).size() == 100000);
  std::vector<std::string> qw;
  mr::load_yaml_cfg_file(write("y10.yaml", "save: \"/x\nnum_layers: 4\"\n"), {}, nullptr, &qw);
  REQUIRE(qw.size() == 1);
  CHECK(has(qw[0], "[input.yaml-multiline-quoted]"));
}

TEST_CASE("--heterogeneous-layers-config-path: bounded read; errors name the flag and file:line", "[config-limits]") {
  auto a = mrtest::run(mrtest::with({"--heterogeneous-layers-config-path", fifo("het.fifo")}));
  CHECK(a.exit == 1);
  CHECK(a.rule == "heterogeneous.config-unreadable");
  CHECK(has(a.message, "--heterogeneous-layers-config-path '" + scratch().string() + "/het.fifo'"));
  CHECK(has(a.message, "is not a regular file (it is a named pipe)"));
  CHECK_FALSE(has(a.message, "relative path"));  // an absolute path needs no working directory
  // A relative path is read from the working directory (as Megatron opens it), which the message names.
  auto rel = mrtest::run(mrtest::with({"--heterogeneous-layers-config-path", "no-such-dir/blocks.json"}));
  CHECK(rel.exit == 1);
  CHECK(rel.rule == "heterogeneous.config-unreadable");
  CHECK(has(rel.message, "No such file or directory (a relative path is taken from the working directory, here " +
                             std::filesystem::current_path().string() + ")"));
  auto z = mrtest::run(mrtest::with({"--heterogeneous-layers-config-path", "/dev/zero"}));
  CHECK(z.rule == "heterogeneous.config-unreadable");
  CHECK(has(z.message, "(it is a character device)"));
  auto d = mrtest::run(mrtest::with({"--heterogeneous-layers-config-path", scratch().string()}));
  CHECK(has(d.message, "(it is a directory)"));
  std::string bad = write("het.json", "{\"hidden_act\": \"silu\",\n \"block_configs\": [}\n");
  auto j = mrtest::run(mrtest::with({"--heterogeneous-layers-config-path", bad}));
  CHECK(j.rule == "heterogeneous.config-unreadable");
  CHECK(has(j.message, bad + ":2:20: it is not valid JSON"));
  auto e = mrtest::run(mrtest::with({"--heterogeneous-layers-config-encoded-json", "{\"a\": "}));
  CHECK(has(e.message, "(--heterogeneous-layers-config-encoded-json): line:column 1:7: it is not valid JSON"));
}

TEST_CASE("--result-rejected-tracker-filename: bounded read; an unreadable file warns naming it", "[config-limits]") {
  auto f = mrtest::run(mrtest::with({"--result-rejected-tracker-filename", fifo("tracker.fifo")}));
  CHECK(f.exit == 0);
  CHECK(f.warned("rerun.tracker-file-unreadable"));
  auto z = mrtest::run(mrtest::with({"--result-rejected-tracker-filename", "/dev/zero"}));
  CHECK(z.warned("rerun.tracker-file-unreadable"));
  // A line too long for std::regex (which recurses per character) stops reading with the warning.
  std::string line = "ts=" + std::string(200000, 'a') +
                     " node=n device=0 jobID=1 rank=0 iteration=5 status=RERUN_DISABLED result=r message=m\n";
  auto l = mrtest::run(mrtest::with({"--result-rejected-tracker-filename", write("tracker.txt", line)}));
  CHECK(l.exit == 0);
  bool named = false;
  for (const auto& d : l.out.diagnostics)
    named = named || has(d.message, "line 1 is longer than 4096 bytes (the limit, limits::kMaxTrackerLineBytes)");
  CHECK(named);
}
