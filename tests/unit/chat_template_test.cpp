// Chat templates end to end: every rendered golden of tests/data/chat-templates (made with Python
// Jinja2 configured like Hugging Face's apply_chat_template) must come out byte-identical, or fail
// with the same message; and the template is found where Hugging Face looks for it.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "specula/text/chat_template.h"
#include "specula/text/jinja/errors.h"
#include "specula/text/jinja/template.h"
#include "specula/util/error.h"

namespace specula {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const fs::path kTemplates = fs::path(SPECULA_TEST_DATA) / "chat-templates";
const fs::path kGemmaTokenizer = fs::path(SPECULA_TEST_DATA) / "tokenizer-gemma4";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

ojson goldens() { return ojson::parse(read_file(kTemplates / "render-goldens.json")); }

// A scratch directory removed at the end of the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag)
      : path_(fs::temp_directory_path() / ("specula-chat-template-" + tag + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }

 private:
  fs::path path_;
};

TEST(ChatTemplateGoldens, EveryGoldenRendersIdentically) {
  const ojson all = goldens();
  ASSERT_GE(all.size(), 40u);
  size_t passed = 0;
  for (const auto& g : all) {
    const std::string name = g["template"].get<std::string>() + " / " + g["case"].get<std::string>();
    SCOPED_TRACE(name);
    std::string rendered, error;
    try {
      rendered = jinja::Template(read_file(kTemplates / g["template"].get<std::string>())).render(g["context"]);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (g.contains("error")) {
      EXPECT_EQ(error, g["error"].get<std::string>());
      EXPECT_TRUE(rendered.empty());
      passed += error == g["error"].get<std::string>();
    } else {
      EXPECT_EQ(error, "");
      EXPECT_EQ(rendered, g["rendered"].get<std::string>());
      passed += error.empty() && rendered == g["rendered"].get<std::string>();
    }
  }
  EXPECT_EQ(passed, all.size());
}

// The same goldens through ChatTemplate::render, which adds the variables Hugging Face always
// passes (tools and documents as None when absent): the templates must not notice the difference.
TEST(ChatTemplateGoldens, ChatTemplateRenderMatchesGoldens) {
  for (const auto& g : goldens()) {
    SCOPED_TRACE(g["template"].get<std::string>() + " / " + g["case"].get<std::string>());
    const ojson& ctx = g["context"];
    ojson tokens = ojson::object();
    tokens["bos_token"] = ctx["bos_token"];
    tokens["eos_token"] = ctx["eos_token"];
    ojson extra = ojson::object();
    if (ctx.contains("enable_thinking")) extra["enable_thinking"] = ctx["enable_thinking"];
    const ChatTemplate chat(read_file(kTemplates / g["template"].get<std::string>()), g["template"].get<std::string>(),
                            tokens);
    std::string rendered, error;
    try {
      rendered = chat.render(ctx["messages"], ctx.contains("tools") ? ctx["tools"] : ojson(nullptr),
                             ctx["add_generation_prompt"].get<bool>(), extra);
    } catch (const Error& e) {
      error = e.what();
    }
    if (g.contains("error")) {
      EXPECT_EQ(error, g["error"].get<std::string>());  // raise_exception's message, unprefixed
    } else {
      EXPECT_EQ(error, "");
      EXPECT_EQ(rendered, g["rendered"].get<std::string>());
    }
  }
}

ojson user_message(const std::string& text) { return ojson::array({{{"role", "user"}, {"content", text}}}); }

TEST(ChatTemplateLoading, PrefersChatTemplateJinjaInTheModelDirectory) {
  const ChatTemplate chat = ChatTemplate::from_model_dir(kGemmaTokenizer);
  EXPECT_EQ(chat.source(), read_file(kGemmaTokenizer / "chat_template.jinja"));
  EXPECT_NE(chat.origin().find("chat_template.jinja"), std::string::npos);
  EXPECT_EQ(chat.special_tokens()["bos_token"], "<bos>");
  EXPECT_EQ(chat.special_tokens()["eos_token"], "<eos>");
}

TEST(ChatTemplateLoading, ReadsTheGemma4TokenizerConfig) {
  ScratchDir dir("gemma4-config");
  fs::copy_file(kGemmaTokenizer / "tokenizer_config.json", dir.path() / "tokenizer_config.json");
  const ChatTemplate chat = ChatTemplate::from_model_dir(dir.path());
  EXPECT_EQ(chat.source(), read_file(kGemmaTokenizer / "chat_template.jinja"));
  EXPECT_NE(chat.origin().find("tokenizer_config.json"), std::string::npos);
  // BOS from the config, the user turn, and the empty thought channel of this revision.
  EXPECT_EQ(chat.render(user_message("What is 2+2?")),
            "<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  EXPECT_EQ(chat.render(user_message("Hi"), nullptr, false), "<bos><|turn>user\nHi<turn|>\n");
  ojson thinking = ojson::object();
  thinking["enable_thinking"] = true;
  EXPECT_EQ(chat.render(user_message("Hi"), nullptr, true, thinking),
            "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
}

TEST(ChatTemplateLoading, PicksNamedTemplatesFromAList) {
  ScratchDir dir("named");
  dir.write("tokenizer_config.json", R"({
    "bos_token": {"content": "<s>", "special": true},
    "eos_token": "</s>",
    "chat_template": [
      {"name": "tool_use", "template": "T{{ bos_token }}{{ tools | length }}"},
      {"name": "default", "template": "D{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"}
    ]})");
  EXPECT_EQ(ChatTemplate::from_model_dir(dir.path()).render(user_message("x")), "D<s>x</s>");
  EXPECT_EQ(ChatTemplate::from_model_dir(dir.path(), "tool_use").render(user_message("x"), ojson::array({1, 2})),
            "T<s>2");
  try {
    ChatTemplate::from_model_dir(dir.path(), "rag");
    FAIL() << "no error for a missing named template";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no chat template named 'rag' (available: tool_use, default)"),
              std::string::npos)
        << e.what();
  }
}

TEST(ChatTemplateLoading, OverrideFileKeepsTheModelsSpecialTokens) {
  ScratchDir dir("override");
  dir.write("tokenizer_config.json", R"({"bos_token": "<B>", "chat_template": "unused"})");
  dir.write("mine.jinja", "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}\n");
  const ChatTemplate chat = ChatTemplate::from_file(dir.path() / "mine.jinja", dir.path());
  EXPECT_EQ(chat.render(user_message("hey")), "<B>[user:hey]");
}

TEST(ChatTemplateLoading, ErrorsNameTheFileAndLine) {
  ScratchDir dir("errors");
  EXPECT_THROW(ChatTemplate::from_model_dir(dir.path()), Error);
  dir.write("tokenizer_config.json", R"({"chat_template": 42})");
  EXPECT_THROW(ChatTemplate::from_model_dir(dir.path()), Error);
  dir.write("tokenizer_config.json", "{not json");
  EXPECT_THROW(ChatTemplate::from_model_dir(dir.path()), Error);
  dir.write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  dir.write("chat_template.jinja", "line one\n{% for m in messages %}\n{{ m | frobnicate }}\n{% endfor %}");
  try {
    ChatTemplate::from_model_dir(dir.path());
    FAIL() << "no error for an unknown filter";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("chat_template.jinja: template line 3: unknown filter 'frobnicate'"), std::string::npos)
        << what;
  }
  const ChatTemplate runtime("a\n{{ messages[0].content.nope.deeper }}", "inline");
  try {
    runtime.render(user_message("x"));
    FAIL() << "no error for attribute access on undefined";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "inline: template line 2: 'str object' has no attribute 'nope'");
  }
  EXPECT_THROW(runtime.render(ojson::object()), Error);  // messages must be an array
}

TEST(ChatTemplateLoading, StrftimeNowReadsTheInjectedClock) {
  ChatTemplate chat("{{ strftime_now('%d %b %Y') }}", "inline");
  chat.set_clock([] {
    std::tm t{};
    t.tm_year = 2026 - 1900;
    t.tm_mon = 10;
    t.tm_mday = 30;
    return t;
  });
  EXPECT_EQ(chat.render(ojson::array()), "30 Nov 2026");
}

}  // namespace
}  // namespace specula
