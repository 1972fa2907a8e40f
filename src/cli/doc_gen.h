// Man pages and shell completion generated from the command tree itself
// (the CLI::App that parses the command line), so they say what --help
// says and cannot drift from it: `cairn generate man DIR` writes cairn(1)
// and one page per subcommand (cairn-restore(1), cairn-key-create(1), …);
// `cairn generate completion bash|zsh` prints a completion script that
// knows every subcommand and option, which options take a value, and
// completes snapshot and archive names by asking `cairn generate names`.
//
// Thread safety: none needed (the CLI's one thread).
#pragma once

#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "base/status.h"

namespace cairn::cli {

// Page file name → roff text, for `app` and every visible subcommand.
std::map<std::string, std::string> RenderManPages(const CLI::App& app, const std::string& version);

// The completion script for `shell` ("bash" or "zsh"); InvalidArgument for
// another shell.
Result<std::string> RenderCompletion(const CLI::App& app, const std::string& shell);

}  // namespace cairn::cli
