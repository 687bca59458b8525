// Usage errors and exit codes a user meets first, through the real binary: an unknown subcommand
// is named with the valid ones, `inspect --draft` fails on an incompatible drafter, every numeric
// flag out of range (a context above the model's limit included) is refused before anything loads
// or listens, and `chat` answers an unknown /command itself instead of sending it to the model.
// Also the repository's .editorconfig and the sources' agreement with it.
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "read_file.h"

namespace {

namespace fs = std::filesystem;

using Result = specula::test::CliResult;
using specula::test::read_file;
using specula::test::run_shell;

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

class CliUsage : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "specula-cli-usage-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Runs the CLI with `args` (shell-quoted by the caller); stdout and stderr apart. `timeout` keeps
  // a command that wrongly starts serving from hanging the suite.
  static Result run(const std::string& args, std::string& err, const std::string& stdin_file = "/dev/null") {
    const std::string err_file = dir_ + "/stderr.txt";
    const Result r =
        run_shell("timeout 300 " + std::string(SPECULA_BINARY) + " " + args + " < " + stdin_file + " 2> " + err_file);
    err = read_file(err_file);
    return r;
  }

  static void synth(const std::string& flags) {
    std::string err;
    const Result r = run("synth " + flags, err);
    ASSERT_EQ(r.code, 0) << r.out << err;
  }

  static std::string dir_;
};

std::string CliUsage::dir_;

// ---- unknown subcommand ----

TEST_F(CliUsage, UnknownCommandIsNamedWithTheValidOnes) {
  std::string err;
  const Result r = run("foo --bar 1", err);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_TRUE(contains(err, "unknown command 'foo'")) << err;
  for (const char* name : {"synth", "inspect", "run", "chat", "serve", "bench", "demo", "tokenize", "render"})
    EXPECT_TRUE(contains(err, name)) << name << " missing from: " << err;
  EXPECT_FALSE(contains(err, "A subcommand is required")) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;  // one line
}

TEST_F(CliUsage, KnownCommandsAndNoCommandKeepTheirMessages) {
  std::string err;
  // No subcommand at all: still a usage error, not an "unknown command".
  EXPECT_EQ(run("", err).code, 2);
  EXPECT_TRUE(contains(err, "subcommand is required")) << err;
  // A known subcommand with a missing argument reports that argument.
  EXPECT_EQ(run("inspect", err).code, 2);
  EXPECT_FALSE(contains(err, "unknown command")) << err;
  EXPECT_TRUE(contains(err, "dir")) << err;
  EXPECT_EQ(run("--version", err).code, 0);
}

// ---- inspect --draft with an incompatible drafter ----

TEST_F(CliUsage, InspectFailsOnAnIncompatibleDrafter) {
  const std::string a = dir_ + "/e4b", ad = dir_ + "/e4b-drafter";
  const std::string b = dir_ + "/dense", bd = dir_ + "/dense-drafter";
  synth("--preset tiny-e4b --out " + a + " --drafter " + ad);
  synth("--preset tiny-dense --out " + b + " --drafter " + bd);
  std::string err;

  // The matching pair passes.
  Result r = run("inspect " + a + " --draft " + ad, err);
  EXPECT_EQ(r.code, 0) << r.out << err;
  EXPECT_TRUE(contains(r.out, "compatible  yes")) << r.out;

  // The mismatched pair prints the whole report with the reasons, then fails.
  r = run("inspect " + a + " --draft " + bd, err);
  EXPECT_EQ(r.code, 1) << r.out << err;
  EXPECT_TRUE(contains(r.out, "compatible  NO")) << r.out;
  EXPECT_TRUE(contains(r.out, "    - ")) << r.out;  // at least one listed problem
  EXPECT_TRUE(contains(err, "not compatible")) << err;
  EXPECT_TRUE(contains(err, bd)) << err;

  // The same with --json: stdout stays one parseable document, the error goes to stderr.
  r = run("inspect " + a + " --draft " + bd + " --json", err);
  EXPECT_EQ(r.code, 1) << r.out << err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("drafter").at("compatible"), false);
  EXPECT_TRUE(contains(err, "not compatible")) << err;
}

// ---- serve: values refused at parse time ----

TEST_F(CliUsage, ServeRefusesAPortOutOfRange) {
  // A model that does not exist: should parsing let the value through, the run ends with exit 1
  // after "listening" instead of hanging.
  for (const std::string port : {"83636", "65536", "-1"}) {
    std::string err;
    const Result r = run("serve --model " + dir_ + "/no-such-model --host 127.0.0.1 --port " + port, err);
    EXPECT_EQ(r.code, 2) << port << ": " << r.out << err;
    EXPECT_FALSE(contains(r.out, "listening")) << r.out;
    EXPECT_TRUE(contains(err, "--port")) << err;
    EXPECT_TRUE(contains(err, port)) << err;
    EXPECT_TRUE(contains(err, "[0, 65535]")) << err;
  }
}

TEST_F(CliUsage, ServeRefusesANegativeContext) {
  std::string err;
  const Result r = run("serve --model " + dir_ + "/no-such-model --host 127.0.0.1 --port 0 --ctx -5", err);
  EXPECT_EQ(r.code, 2) << r.out << err;
  EXPECT_FALSE(contains(r.out, "listening")) << r.out;
  EXPECT_TRUE(contains(err, "--ctx")) << err;
  EXPECT_TRUE(contains(err, "-5")) << err;
}

// ---- every numeric flag: refused at parse time, naming the flag, the value and the range ----

TEST_F(CliUsage, NumericFlagsOutOfRangeAreRefusedBeforeAnythingLoads) {
  const std::string model = " --model " + dir_ + "/no-such-model";
  const struct {
    std::string args;
    const char* flag;
    const char* value;
    const char* range;
  } cases[] = {
      {"run --tokens 2 --gamma 9999" + model, "--gamma", "9999", "[0, 64]"},
      {"run --tokens 2 --max-tokens 0" + model, "--max-tokens", "0", "[1, 1073741824]"},
      {"run --tokens 2 --threads 5000" + model, "--threads", "5000", "[0, 1024]"},
      {"run --tokens 2 --prefill-chunk 100000" + model, "--prefill-chunk", "100000", "[1, 4096]"},
      {"run --tokens 2 --max-context 99999999999" + model, "--max-context", "99999999999", "[0, 16777216]"},
      {"run --tokens 2 --top-p 0" + model, "--top-p", "0", "(0, 1]"},
      {"run --tokens 2 --top-k -1" + model, "--top-k", "-1", "[0, 1073741824]"},
      {"run --tokens 2 --temperature nan" + model, "--temperature", "nan", "[0, 100]"},
      {"chat --repetition-penalty 0" + model, "--repetition-penalty", "0", "(0, 100]"},
      {"chat --presence-penalty 3" + model, "--presence-penalty", "3", "[-2, 2]"},
      {"chat --frequency-penalty -2.5" + model, "--frequency-penalty", "-2.5", "[-2, 2]"},
      {"chat --gamma 65" + model, "--gamma", "65", "[0, 64]"},
      {"serve --gamma 100" + model, "--gamma", "100", "[0, 64]"},
      {"serve --threads -1" + model, "--threads", "-1", "[0, 1024]"},
      {"serve --prefill-chunk 0" + model, "--prefill-chunk", "0", "[1, 4096]"},
      {"serve --step-rows 999999" + model, "--step-rows", "999999", "[0, 16384]"},
      {"serve --max-queue 99999" + model, "--max-queue", "99999", "[0, 4096]"},
      {"serve --max-connections 0" + model, "--max-connections", "0", "[1, 4096]"},
      {"serve --read-timeout-s 0" + model, "--read-timeout-s", "0", "[1, 3600]"},
      {"serve --max-body-bytes 10" + model, "--max-body-bytes", "10", "[1024, 1073741824]"},
      {"serve --max-tokens-default 0" + model, "--max-tokens-default", "0", "[1, 1073741824]"},
      {"demo --gamma x", "--gamma", "x", "[0, 64]"},
      {"bench --concurrency 1 --gamma 70", "--gamma", "70", "[0, 64]"},
      {"logits --tokens 2 --prefill-chunk 5000" + model, "--prefill-chunk", "5000", "[1, 4096]"},
      {"synth --preset tiny-dense --out " + dir_ + "/never --vocab 0", "--vocab", "0", "[1, 1048576]"},
  };
  for (const auto& c : cases) {
    std::string err;
    const Result r = run(c.args, err);
    EXPECT_EQ(r.code, 2) << c.args << ": " << r.out << err;
    EXPECT_FALSE(contains(r.out, "listening")) << r.out;
    EXPECT_TRUE(contains(err, c.flag)) << c.args << ": " << err;
    EXPECT_TRUE(contains(err, c.value)) << c.args << ": " << err;
    EXPECT_TRUE(contains(err, c.range)) << c.args << ": " << err;
  }
  EXPECT_FALSE(fs::exists(dir_ + "/never"));
}

TEST_F(CliUsage, KvTypeOtherThanF32Bf16OrQ8IsRefusedBeforeAnythingLoads) {
  const std::string model = " --model " + dir_ + "/no-such-model";
  for (const std::string& args : {"run --tokens 2" + model, "chat" + model, "serve" + model,
                                  "logits --tokens 2" + model, std::string("bench --quick"), std::string("demo")}) {
    std::string err;
    const Result r = run(args + " --kv-type q4", err);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out << err;
    EXPECT_TRUE(contains(err, "--kv-type")) << args << ": " << err;
    EXPECT_TRUE(contains(err, "q4")) << args << ": " << err;
    EXPECT_TRUE(contains(err, "bf16")) << args << ": " << err;
    EXPECT_TRUE(contains(err, "q8")) << args << ": " << err;
  }
}

TEST_F(CliUsage, TraceWithoutJsonIsAUsageError) {
  std::string err;
  const Result r = run("run --tokens 2 --trace --model " + dir_ + "/no-such-model", err);
  EXPECT_EQ(r.code, 2) << err;
  EXPECT_TRUE(contains(err, "--trace requires --json")) << err;
}

TEST_F(CliUsage, AContextAboveTheModelsLimitIsRefusedBeforeLoading) {
  const std::string model = dir_ + "/ctx-model";
  synth("--preset tiny-dense --out " + model);
  for (const std::string& args :
       {"run --tokens 2 --max-tokens 1 --max-context 200000 --model " + model,
        "serve --port 0 --ctx 131073 --model " + model, "chat --ctx 200000 --model " + model}) {
    std::string err;
    const Result r = run(args, err);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out << err;
    EXPECT_FALSE(contains(r.out, "listening")) << r.out;
    EXPECT_TRUE(contains(err, "above the model's limit of 131072")) << args << ": " << err;
  }
  // At the limit it runs.
  std::string err;
  const Result r = run("run --tokens 2 --max-tokens 1 --threads 1 --max-context 131072 --model " + model, err);
  EXPECT_EQ(r.code, 0) << err;
}

// ---- run: seeds and a drafter that never agrees ----

TEST_F(CliUsage, RunDrawsAFreshSeedUnlessGivenOneAndWarnsWhenNoDraftIsAccepted) {
  const std::string model = dir_ + "/seed-model", drafter = dir_ + "/seed-drafter";
  synth("--preset tiny-dense --out " + model + " --drafter " + drafter);
  const std::string base = "run --model " + model + " --tokens 2,10,11 --threads 1 --json";
  auto stats = [&](const std::string& extra, std::string& err) {
    const Result r = run(base + extra, err);
    EXPECT_EQ(r.code, 0) << err;
    return nlohmann::json::parse(r.out);
  };
  std::string err;
  const auto a = stats(" --max-tokens 6 --temperature 1", err);
  const auto b = stats(" --max-tokens 6 --temperature 1", err);
  EXPECT_NE(a["stats"]["seed"], b["stats"]["seed"]);
  const std::string seed = " --seed " + a["stats"]["seed"].dump();
  const auto again = stats(" --max-tokens 6 --temperature 1" + seed, err);
  EXPECT_EQ(again["stats"]["seed"], a["stats"]["seed"]);
  EXPECT_EQ(again["tokens"], a["tokens"]);

  // A random drafter (as one made for another model) agrees with the target on nothing.
  const auto spec = stats(" --max-tokens 16 --draft " + drafter + " --gamma 4", err);
  ASSERT_EQ(spec["stats"]["accepted"], 0) << spec;
  EXPECT_TRUE(contains(err, "none of the ")) << err;
  EXPECT_TRUE(contains(err, drafter)) << err;
}

// ---- chat: unknown /commands ----

// The prompt size of every answered turn ("prefilled P of T" in the statistics lines).
std::vector<long> prompt_sizes(const std::string& err) {
  std::vector<long> totals;
  const std::string key = "prefilled ";
  for (size_t at = err.find(key); at != std::string::npos; at = err.find(key, at + 1)) {
    long prefilled = 0, total = 0;
    if (std::sscanf(err.c_str() + at, "prefilled %ld of %ld", &prefilled, &total) == 2) totals.push_back(total);
  }
  return totals;
}

TEST_F(CliUsage, ChatAnswersAnUnknownCommandItself) {
  const std::string model = dir_ + "/chat-model";
  synth("--preset tiny-dense --vocab 262144 --tokenizer " + std::string(SPECULA_TEST_DATA) +
        "/tokenizer-gemma4 --out " + model);
  // The same first message before and after /reset, with unknown commands in between: a command
  // sent as a message would add a turn and lengthen the second prompt.
  const std::string in_file = dir_ + "/chat-input.txt";
  std::ofstream(in_file, std::ios::binary) << "Hi\n/reset\n/foo\n/foo with words\nHi\n/usr/bin\n//foo\n";
  std::string err;
  const Result r = run("chat --model " + model + " --max-tokens 2 --temperature 0 --threads 1", err, in_file);
  ASSERT_EQ(r.code, 0) << err;
  const size_t at = err.find("unknown command /foo");
  ASSERT_NE(at, std::string::npos) << err;
  const std::string message = err.substr(at, err.find('\n', at) - at);
  for (const char* known : {"/reset", "/help", "/exit"}) EXPECT_TRUE(contains(message, known)) << message;
  const std::vector<long> sizes = prompt_sizes(err);
  // Answered: "Hi", "Hi", then a path (a message, not a command) and "//foo" (sent as "/foo").
  ASSERT_EQ(sizes.size(), 4u) << err;
  EXPECT_EQ(sizes[1], sizes[0]) << err;
  EXPECT_GT(sizes[3], sizes[2]) << err;
}

// ---- .editorconfig ----

const fs::path kRoot = fs::path(SPECULA_TEST_DATA).parent_path().parent_path();

TEST(CliUsageStyle, EditorConfigDescribesTheCode) {
  const std::string ec = read_file((kRoot / ".editorconfig").string());
  ASSERT_FALSE(ec.empty()) << "no .editorconfig at " << kRoot;
  for (const char* line : {"root = true", "end_of_line = lf", "insert_final_newline = true",
                           "trim_trailing_whitespace = true", "indent_style = space", "indent_size = 2",
                           "max_line_length = 120", "[*.md]", "trim_trailing_whitespace = false"})
    EXPECT_TRUE(contains(ec, line)) << line;
}

// The C++ sources keep the rules an editor applies on save, so saving a file changes only what
// was edited. (Line length is not checked: some long lines predate the file.)
TEST(CliUsageStyle, SourcesFollowTheEditorConfig) {
  size_t files = 0;
  for (const char* top :
       {"src", "tests/unit", "tests/integration", "tests/threaded", "tests/support", "bench", "fuzz"}) {
    if (!fs::exists(kRoot / top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(kRoot / top)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
      // Its raw-string templates hold trailing spaces on purpose (.editorconfig exempts it).
      const bool keep_trailing = entry.path().filename() == "jinja_test.cpp";
      const std::string text = read_file(entry.path().string());
      const std::string name = fs::relative(entry.path(), kRoot).string();
      ++files;
      if (text.empty()) continue;
      EXPECT_EQ(text.back(), '\n') << name << ": no final newline";
      std::istringstream lines(text);
      std::string line;
      for (size_t line_no = 1; std::getline(lines, line); ++line_no) {
        const std::string at = name + ":" + std::to_string(line_no);
        EXPECT_EQ(line.find('\r'), std::string::npos) << at << ": CR";
        EXPECT_EQ(line.find('\t'), std::string::npos) << at << ": tab";
        if (!keep_trailing && !line.empty()) {
          EXPECT_NE(line.back(), ' ') << at << ": trailing space";
        }
      }
    }
  }
  EXPECT_GT(files, 50u);
}

}  // namespace
