// Group filters of `cairn sync --group-filter` (PBS sync jobs' spelling):
//
//   type:vm            groups of that type (vm, ct, host)
//   group:vm/100       exactly that group
//   regex:^vm/1\d\d$   groups whose "TYPE/ID" the ECMAScript regex matches
//                      anywhere (anchor it to match the whole name)
//   exclude:FILTER     any of the above, taking groups out again
//
// A group passes when no exclude filter matches it and either no include
// filter is given or one of them matches (include filters are OR'd).
//
// Thread safety: const methods may be called concurrently.
#pragma once

#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "datastore/snapshot_ref.h"

namespace cairn::sync {

class GroupFilter {
 public:
  // InvalidArgument, naming the filter and the spellings it may take, for
  // an unknown kind, an empty value, a bad type or group, or a bad regex.
  static Result<GroupFilter> Parse(const std::vector<std::string>& specs);

  bool Matches(const datastore::GroupRef& group) const;
  bool empty() const { return includes_.empty() && excludes_.empty(); }

 private:
  struct Rule {
    enum class Kind { kType, kGroup, kRegex } kind;
    std::string text;  // the type, or "TYPE/ID"
    std::regex regex;
    bool Matches(const datastore::GroupRef& group) const;
  };
  static Result<Rule> ParseRule(std::string_view spec, std::string_view whole);

  std::vector<Rule> includes_;
  std::vector<Rule> excludes_;
};

}  // namespace cairn::sync
