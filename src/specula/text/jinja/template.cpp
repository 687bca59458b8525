#include "specula/text/jinja/template.h"

#include "specula/text/jinja/parser.h"
#include "specula/util/error.h"

namespace specula::jinja {

Template::Template(std::string_view source, LexerOptions lexer_options, RenderOptions render_options)
    : body_(std::make_shared<const Body>(parse_template(source, lexer_options))),
      render_options_(std::move(render_options)) {}

std::string Template::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) fail("template context must be a JSON object, got {}", context.type_name());
  return render(from_json(context));
}

std::string Template::render(const Value& context) const { return render_body(*body_, context, render_options_); }

}  // namespace specula::jinja
