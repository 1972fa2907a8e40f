// Environment variables scrubbed for one test. The harness passes the test
// process's environment on to cairn (and getenv finds the first entry), so
// whatever the developer's shell holds (a key, a passphrase, a config file,
// credentials) must not leak into the commands a test runs.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace cairn::cli_test {

// Scrub() unsets variables and remembers what they held; Restore() (also
// run by the destructor) unsets them again and puts back what they held.
// Not thread-safe: call from the test's own thread, as setenv requires.
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() { Restore(); }

  void Scrub(std::span<const char* const> names) {
    for (const char* name : names) {
      if (const char* v = std::getenv(name)) saved_.emplace(name, v);
      ::unsetenv(name);
      names_.emplace_back(name);
    }
  }
  void Scrub(std::initializer_list<const char*> names) {
    Scrub(std::span<const char* const>(names.begin(), names.size()));
  }

  void Restore() {
    for (const std::string& name : names_) ::unsetenv(name.c_str());
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
    names_.clear();
    saved_.clear();
  }

 private:
  std::vector<std::string> names_;
  std::map<std::string, std::string> saved_;
};

}  // namespace cairn::cli_test
