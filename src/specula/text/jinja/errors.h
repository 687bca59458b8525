#pragma once
// Errors of the Jinja engine. Operations on values throw OpError (a message only); the
// interpreter adds the template line of the node being evaluated and rethrows TemplateError.
// raise_exception(msg) in a template throws RaisedError carrying msg unchanged, as Hugging Face
// reports it.
#include <string>

#include "specula/util/error.h"

namespace specula::jinja {

struct OpError {
  std::string message;
};

[[noreturn]] inline void op_fail(std::string message) { throw OpError{std::move(message)}; }

class TemplateError : public specula::Error {
 public:
  TemplateError(int line, const std::string& message)
      : specula::Error("template line " + std::to_string(line) + ": " + message), line_(line) {}
  int line() const { return line_; }

 private:
  int line_;
};

class RaisedError : public specula::Error {
 public:
  explicit RaisedError(const std::string& message) : specula::Error(message) {}
};

}  // namespace specula::jinja
