#include "specula/grammar/grammar.h"

#include <algorithm>

#include "specula/util/error.h"

namespace specula::grammar {
namespace {

// Keeps a hostile grammar from exhausting memory while it is built.
constexpr size_t kMaxRules = 100000;
constexpr size_t kMaxElements = 2000000;

std::vector<CodePointRange> normalized(std::vector<CodePointRange> ranges) {
  for (CodePointRange& r : ranges) {
    if (r.first > r.last) std::swap(r.first, r.last);
    r.last = std::min(r.last, kMaxCodePoint);
  }
  std::erase_if(ranges, [](const CodePointRange& r) { return r.first > kMaxCodePoint; });
  std::sort(ranges.begin(), ranges.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<CodePointRange> out;
  for (const CodePointRange& r : ranges) {
    if (!out.empty() && r.first <= out.back().last + 1)
      out.back().last = std::max(out.back().last, r.last);
    else
      out.push_back(r);
  }
  return out;
}

std::vector<CodePointRange> complement(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  uint32_t next = 0;
  for (const CodePointRange& r : ranges) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.last + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

// Rules that can match the empty string (fixed point).
std::vector<bool> nullable_rules(const std::vector<std::vector<std::vector<Item>>>& rules) {
  std::vector<bool> nullable(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const auto& seq : rules[r]) {
        const bool all = std::all_of(
            seq.begin(), seq.end(), [&](const Item& it) { return it.kind == ElementKind::Rule && nullable[it.value]; });
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// Throws when a rule can reach itself before consuming a character: the matcher's expansion would
// never end. Edges: rule -> each rule it may start with (those after only nullable rules).
void check_left_recursion(const std::vector<std::vector<std::vector<Item>>>& rules,
                          const std::vector<std::string>& names) {
  const std::vector<bool> nullable = nullable_rules(rules);
  std::vector<std::vector<uint32_t>> starts(rules.size());
  for (size_t r = 0; r < rules.size(); ++r)
    for (const auto& seq : rules[r])
      for (const Item& it : seq) {
        if (it.kind != ElementKind::Rule) break;
        starts[r].push_back(it.value);
        if (!nullable[it.value]) break;
      }
  // Iterative DFS with colors: 0 new, 1 on the path, 2 done.
  std::vector<uint8_t> color(rules.size(), 0);
  for (size_t start = 0; start < rules.size(); ++start) {
    if (color[start]) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(start), 0}};
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == starts[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t to = starts[r][next++];
      if (color[to] == 1)
        fail("grammar: rule '{}' is left-recursive (it can reach itself without consuming a character)", names[to]);
      if (color[to] == 0) {
        color[to] = 1;
        path.emplace_back(to, 0);
      }
    }
  }
}

}  // namespace

bool Grammar::set_contains(uint32_t set, uint32_t cp) const {
  const auto& ranges = char_sets[set];
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t v, const CodePointRange& r) { return v < r.first; });
  return it != ranges.begin() && std::prev(it)->last >= cp;
}

bool Grammar::set_intersects(uint32_t set, uint32_t first, uint32_t last) const {
  const auto& ranges = char_sets[set];
  auto it = std::upper_bound(ranges.begin(), ranges.end(), last,
                             [](uint32_t v, const CodePointRange& r) { return v < r.first; });
  return it != ranges.begin() && std::prev(it)->last >= first;
}

std::vector<int32_t> Grammar::token_terminals() const {
  std::vector<int32_t> ids;
  for (const Element& e : elements)
    if (e.kind == ElementKind::Token) ids.push_back(static_cast<int32_t>(e.value));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

uint32_t GrammarBuilder::rule(const std::string& name) {
  if (auto it = index_.find(name); it != index_.end()) return it->second;
  if (names_.size() >= kMaxRules) fail("grammar: more than {} rules", kMaxRules);
  const auto id = static_cast<uint32_t>(names_.size());
  names_.push_back(name);
  defined_.push_back(false);
  rules_.emplace_back();
  index_.emplace(name, id);
  return id;
}

uint32_t GrammarBuilder::helper_rule(const std::string& base) {
  for (size_t n = names_.size();; ++n) {
    const std::string name = base + "-" + std::to_string(n);
    if (!index_.contains(name)) {
      const uint32_t id = rule(name);
      defined_[id] = true;
      return id;
    }
  }
}

void GrammarBuilder::add_alternative(uint32_t rule, std::vector<Item> sequence) {
  rules_[rule].push_back(std::move(sequence));
}

uint32_t GrammarBuilder::char_set(std::vector<CodePointRange> ranges, bool negate) {
  std::vector<CodePointRange> set = normalized(std::move(ranges));
  if (negate) set = complement(set);
  sets_.push_back(std::move(set));
  return static_cast<uint32_t>(sets_.size() - 1);
}

uint32_t GrammarBuilder::single_char(uint32_t cp) {
  if (auto it = single_sets_.find(cp); it != single_sets_.end()) return it->second;
  const uint32_t id = char_set({{cp, cp}}, false);
  single_sets_.emplace(cp, id);
  return id;
}

Grammar GrammarBuilder::build(const std::string& root) const {
  auto root_it = index_.find(root);
  if (root_it == index_.end() || !defined_[root_it->second]) fail("grammar: no rule named '{}' (the start rule)", root);
  for (size_t r = 0; r < names_.size(); ++r)
    if (!defined_[r]) fail("grammar: rule '{}' is used but never defined", names_[r]);
  for (size_t r = 0; r < names_.size(); ++r)
    if (rules_[r].empty()) fail("grammar: rule '{}' has no alternatives", names_[r]);
  check_left_recursion(rules_, names_);

  Grammar g;
  g.rule_names = names_;
  g.char_sets = sets_;
  g.root = root_it->second;
  g.alternatives.resize(names_.size());
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const auto& seq : rules_[r]) {
      if (g.elements.size() + seq.size() + 1 > kMaxElements) fail("grammar: more than {} elements", kMaxElements);
      g.alternatives[r].push_back(static_cast<uint32_t>(g.elements.size()));
      for (const Item& it : seq) g.elements.push_back({it.kind, it.value});
      g.elements.push_back({ElementKind::End, 0});
    }
  }
  return g;
}

}  // namespace specula::grammar
