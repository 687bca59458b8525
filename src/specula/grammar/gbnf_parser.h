#pragma once
// The GBNF-style grammar text format (the llama.cpp family's notation):
//
//   root   ::= object            # comments run to the end of the line
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   pair   ::= string ":" ws value
//   digit  ::= [0-9]             # classes: ranges, [^...] negation, escapes
//   any    ::= .                 # any one character
//   item   ::= x? | x* | x+ | x{2} | x{2,} | x{2,5}
//   call   ::= <[48]> "call:"     # a token terminal: token id 48, matched by id (grammar.h)
//
// Literals are "..." with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes; classes take the same
// escapes plus \] \[ \- \^. Names are letters, digits, '-' and '_'. A rule runs until the next
// `name ::=`, so a definition may span lines. The start rule is `root`. Errors throw
// specula::Error as "grammar line L, column C: what".
#include <string_view>

#include "specula/grammar/grammar.h"

namespace specula::grammar {

// Largest count allowed in x{m,n} (each repetition becomes an element or a rule).
constexpr uint32_t kMaxRepetition = 1000;

Grammar parse_gbnf(std::string_view text);

}  // namespace specula::grammar
