#include "sync/group_filter.h"

#include <fmt/format.h>

namespace cairn::sync {

bool GroupFilter::Rule::Matches(const datastore::GroupRef& group) const {
  switch (kind) {
    case Kind::kType:
      return group.type == text;
    case Kind::kGroup:
      return group.ToString() == text;
    case Kind::kRegex:
      return std::regex_search(group.ToString(), regex);
  }
  return false;
}

Result<GroupFilter::Rule> GroupFilter::ParseRule(std::string_view spec, std::string_view whole) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError(fmt::format(
        "--group-filter '{}': {} (filters are type:vm|ct|host, group:TYPE/ID, regex:RE, "
        "or exclude: before any of them)",
        whole, why));
  };
  size_t colon = spec.find(':');
  if (colon == std::string_view::npos) return bad("no kind before ':'");
  std::string_view kind = spec.substr(0, colon);
  std::string value(spec.substr(colon + 1));
  if (value.empty()) return bad("nothing after ':'");
  Rule rule;
  rule.text = value;
  if (kind == "type") {
    if (value != "vm" && value != "ct" && value != "host")
      return bad("the type is not vm, ct or host");
    rule.kind = Rule::Kind::kType;
  } else if (kind == "group") {
    auto group = datastore::ParseGroup("", value);
    if (!group.ok()) return bad(group.status().message());
    rule.kind = Rule::Kind::kGroup;
  } else if (kind == "regex") {
    try {
      rule.regex = std::regex(value, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return bad(fmt::format("not a regular expression ({})", e.what()));
    }
    rule.kind = Rule::Kind::kRegex;
  } else {
    return bad(fmt::format("unknown kind '{}'", kind));
  }
  return rule;
}

Result<GroupFilter> GroupFilter::Parse(const std::vector<std::string>& specs) {
  GroupFilter filter;
  for (const std::string& spec : specs) {
    std::string_view s = spec;
    bool exclude = s.starts_with("exclude:");
    if (exclude) s.remove_prefix(8);
    CAIRN_ASSIGN_OR_RETURN(Rule rule, ParseRule(s, spec));
    (exclude ? filter.excludes_ : filter.includes_).push_back(std::move(rule));
  }
  return filter;
}

bool GroupFilter::Matches(const datastore::GroupRef& group) const {
  for (const Rule& r : excludes_) {
    if (r.Matches(group)) return false;
  }
  if (includes_.empty()) return true;
  for (const Rule& r : includes_) {
    if (r.Matches(group)) return true;
  }
  return false;
}

}  // namespace cairn::sync
