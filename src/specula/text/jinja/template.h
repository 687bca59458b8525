#pragma once
// A compiled Jinja template, configured like Hugging Face's apply_chat_template environment:
// trim_blocks and lstrip_blocks on, loop controls (break/continue), sandboxed attribute access,
// `tojson` that keeps non-ASCII text, and the raise_exception(msg) and strftime_now(fmt) globals.
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "specula/text/jinja/ast.h"
#include "specula/text/jinja/interpreter.h"
#include "specula/text/jinja/lexer.h"

namespace specula::jinja {

class Template {
 public:
  // Parses `source`; throws TemplateError ("template line N: ...") for syntax errors, unknown
  // tags, filters and tests.
  explicit Template(std::string_view source, LexerOptions lexer_options = {}, RenderOptions render_options = {});

  // `context` is an object of variables (keys in the caller's order: dict iteration and tojson
  // follow it). Throws TemplateError for runtime errors and RaisedError for raise_exception.
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const Value& context) const;

 private:
  std::shared_ptr<const Body> body_;
  RenderOptions render_options_;
};

}  // namespace specula::jinja
