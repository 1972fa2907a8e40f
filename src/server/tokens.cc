// TokenStore: tokens.json on disk, a cached copy in memory.
//
// File format (version 1; docs/SERVER.md):
//   {"version": 1,
//    "tokens": [{"name": "host1", "store": "main", "role": "backup",
//                "created": 1717000000, "secret_sha256": "<64 hex>"}, …]}
//
// Every call stats the file first and re-reads it when its identity (inode,
// mtime, size) changed, so tokens made or revoked by another process (the
// `cairn token` CLI) take effect at the next request. Create and Revoke hold
// an flock on tokens.lock around read-modify-write, so two concurrent CLI
// runs never lose each other's token.
#include "server/tokens.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "base/mutex.h"
#include "base/unique_fd.h"
#include "crypto/crypt_config.h"
#include "crypto/sha256.h"
#include "server/server_config.h"

namespace cairn::server {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kReader:
      return "reader";
    case Role::kBackup:
      return "backup";
    case Role::kVerify:
      return "verify";
    case Role::kAdmin:
      return "admin";
    case Role::kMetrics:
      return "metrics";
  }
  return "?";
}

Result<Role> ParseRole(std::string_view text) {
  for (Role r : {Role::kReader, Role::kBackup, Role::kVerify, Role::kAdmin, Role::kMetrics}) {
    if (text == RoleName(r)) return r;
  }
  return InvalidArgumentError(
      fmt::format("unknown role '{}': expected reader, backup, verify, admin or metrics",
                  text));
}

// The table of docs/SERVER.md ("Tokens and roles"); keep the two in step.
bool Allows(Role role, Action action) {
  // A scraper's token: the figures, never a datastore's contents.
  if (role == Role::kMetrics) return action == Action::kMetrics;
  switch (action) {
    case Action::kListStores:
    case Action::kListSnapshots:
    case Action::kRead:
      return true;  // backup: own groups only, checked by the caller
    case Action::kStatus:
      // Store-wide counts tell of other hosts' backups.
      return role != Role::kBackup;
    case Action::kBackup:
      return role == Role::kBackup || role == Role::kAdmin;
    case Action::kVerify:
      return role == Role::kVerify || role == Role::kAdmin;
    case Action::kNotes:
      return role == Role::kBackup || role == Role::kAdmin;  // backup: own groups
    case Action::kPrune:
    case Action::kMetrics:
      return role == Role::kAdmin;  // (metrics: above)
  }
  return false;
}

namespace {

constexpr char kTokensFile[] = "tokens.json";
constexpr char kLockFile[] = "tokens.lock";
constexpr int kFormatVersion = 1;
constexpr size_t kSecretSize = 32;
constexpr off_t kMaxFileSize = 16 << 20;
// One message for every failure, so a caller learns nothing about which part
// of the credential was wrong.
constexpr char kDenied[] = "invalid API token";

struct Entry {
  Token token;
  crypto::Digest secret_hash{};
};

// What identifies one version of the file; a rename gives a new inode, an
// edit in place a new mtime or size, a chmod a new mode (a file that turns
// group-readable is refused at once, not at its next edit). Times alone are
// not enough: the kernel's clock for them ticks every few milliseconds, so a
// chmod right after a write can leave ctime unchanged.
struct FileStamp {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  off_t size = 0;
  mode_t mode = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp StampOf(const struct stat& st) {
  auto ns = [](const timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; };
  return FileStamp{true, st.st_dev, st.st_ino, ns(st.st_mtim), ns(st.st_ctim), st.st_size,
                   st.st_mode};
}

Result<FileStamp> StatFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return FileStamp{};
    return ErrnoToStatus(errno, fmt::format("stat {}", path));
  }
  return StampOf(st);
}

Status CheckPrivate(const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) {
    return FailedPreconditionError(fmt::format("tokens file {} is not a regular file", path));
  }
  if ((st.st_mode & 077) != 0) {
    return PermissionDeniedError(fmt::format(
        "tokens file {} is accessible by group or others (mode {:04o}): refusing to use it; "
        "run chmod 600 {}",
        path, st.st_mode & 07777, path));
  }
  return Status::Ok();
}

Result<Entry> ParseEntry(const std::string& path, const nlohmann::json& j, size_t index) {
  auto bad = [&](std::string_view why) {
    return DataLossError(fmt::format("tokens file {}: token #{}: {}", path, index, why));
  };
  if (!j.is_object()) return bad("not an object");
  Entry e;
  for (const auto& [key, value] : j.items()) {
    if (key == "name" && value.is_string()) {
      e.token.name = value.get<std::string>();
    } else if (key == "store" && value.is_string()) {
      e.token.store = value.get<std::string>();
    } else if (key == "role" && value.is_string()) {
      auto role = ParseRole(value.get<std::string>());
      if (!role.ok()) return bad(role.status().message());
      e.token.role = *role;
    } else if (key == "created" && value.is_number_integer()) {
      e.token.created = value.get<int64_t>();
    } else if (key == "secret_sha256" && value.is_string()) {
      auto digest = crypto::ParseDigestHex(value.get<std::string>());
      if (!digest.ok()) return bad("secret_sha256 is not 64 hex digits");
      e.secret_hash = *digest;
    } else {
      return bad(fmt::format("unexpected key or type of \"{}\"", key));
    }
  }
  if (!IsValidName(e.token.name)) return bad(fmt::format("bad name '{}'", e.token.name));
  if (e.token.store != "*" && !IsValidName(e.token.store)) {
    return bad(fmt::format("bad store '{}'", e.token.store));
  }
  if (!j.contains("role") || !j.contains("secret_sha256")) {
    return bad("role or secret_sha256 missing");
  }
  return e;
}

Result<std::map<std::string, Entry>> ParseTokens(const std::string& path, std::string_view text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return DataLossError(fmt::format("tokens file {} is not a JSON object", path));
  }
  if (!doc.contains("version") || doc["version"] != kFormatVersion) {
    return DataLossError(fmt::format("tokens file {}: missing or unknown version", path));
  }
  if (!doc.contains("tokens") || !doc["tokens"].is_array()) {
    return DataLossError(fmt::format("tokens file {}: \"tokens\" is not an array", path));
  }
  std::map<std::string, Entry> out;
  size_t index = 0;
  for (const auto& item : doc["tokens"]) {
    CAIRN_ASSIGN_OR_RETURN(Entry e, ParseEntry(path, item, index++));
    std::string name = e.token.name;
    if (!out.emplace(name, std::move(e)).second) {
      return DataLossError(fmt::format("tokens file {}: token '{}' appears twice", path, name));
    }
  }
  return out;
}

std::string Serialize(const std::map<std::string, Entry>& entries) {
  nlohmann::json tokens = nlohmann::json::array();
  for (const auto& [name, e] : entries) {
    tokens.push_back({{"name", e.token.name},
                      {"store", e.token.store},
                      {"role", RoleName(e.token.role)},
                      {"created", e.token.created},
                      {"secret_sha256", crypto::DigestHex(e.secret_hash)}});
  }
  nlohmann::json doc = {{"version", kFormatVersion}, {"tokens", tokens}};
  return doc.dump(2) + "\n";
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, fmt::format("writing {}", path));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status SyncDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) {
    return ErrnoToStatus(errno, fmt::format("fsync directory {}", dir));
  }
  return Status::Ok();
}

// Temp file (0600, O_EXCL), fsync, rename over `path`, fsync the directory.
// Returns the stamp of what was written.
// REQUIRES: the file lock held, so no cooperating writer replaces the file
// between the rename and the stat that follows it.
Result<FileStamp> WriteAtomic(const std::string& dir, const std::string& path,
                              std::string_view text) {
  const std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  ::unlink(tmp.c_str());  // a leftover of a crashed run of this pid; ENOENT is fine
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) return ErrnoToStatus(errno, fmt::format("creating {}", tmp));
  Status s = WriteAll(fd.get(), text, tmp);
  if (s.ok() && ::fsync(fd.get()) != 0) s = ErrnoToStatus(errno, fmt::format("fsync {}", tmp));
  if (s.ok()) s = fd.Close(fmt::format("closing {}", tmp));
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = ErrnoToStatus(errno, fmt::format("renaming {} to {}", tmp, path));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  CAIRN_RETURN_IF_ERROR(SyncDir(dir));
  return StatFile(path);  // after the rename, which changes the ctime
}

// Held flock on STATE_DIR/tokens.lock, for read-modify-write across processes.
class LockGuard {
 public:
  static Result<LockGuard> Acquire(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.get() < 0) return ErrnoToStatus(errno, fmt::format("opening lock file {}", path));
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return ErrnoToStatus(errno, fmt::format("locking {}", path));
    }
    return LockGuard(std::move(fd));
  }

 private:
  explicit LockGuard(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // closing it releases the lock
};

}  // namespace

std::string PrintableName(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, 64)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    out += ok ? c : '?';
  }
  if (name.size() > 64) out += "…";
  return out;
}

namespace {

std::string NewSecretHex(crypto::Digest* hash) {
  std::array<uint8_t, kSecretSize> secret;
  crypto::RandomBytes(secret);
  *hash = crypto::Sha256(secret);
  std::string hex = ToHex(secret);
  secret.fill(0);
  return hex;
}

}  // namespace

class TokenStore::Impl {
 public:
  explicit Impl(std::string state_dir)
      : state_dir_(std::move(state_dir)),
        path_(state_dir_ + "/" + kTokensFile),
        lock_path_(state_dir_ + "/" + kLockFile) {
    std::array<uint8_t, kSecretSize> dummy;
    crypto::RandomBytes(dummy);
    dummy_hash_ = crypto::Sha256(dummy);
  }

  Status Load() {
    MutexLock lock(mu_);
    return RefreshLocked();
  }

  // Re-reads the file when it changed since the last read.
  Status RefreshLocked() const REQUIRES(mu_) {
    CAIRN_ASSIGN_OR_RETURN(FileStamp now, StatFile(path_));
    if (loaded_ && now == stamp_) return Status::Ok();
    if (!now.exists) {
      entries_.clear();
      stamp_ = now;
      loaded_ = true;
      return Status::Ok();
    }
    UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (fd.get() < 0) {
      if (errno == ENOENT) return RefreshLocked();  // replaced between stat and open
      return ErrnoToStatus(errno, fmt::format("opening tokens file {}", path_));
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return ErrnoToStatus(errno, fmt::format("stat {}", path_));
    CAIRN_RETURN_IF_ERROR(CheckPrivate(path_, st));
    if (st.st_size > kMaxFileSize) {
      return DataLossError(fmt::format("tokens file {} is larger than {} bytes", path_,
                                       static_cast<int64_t>(kMaxFileSize)));
    }
    std::string text;
    char buf[8192];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoToStatus(errno, fmt::format("reading {}", path_));
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > static_cast<size_t>(kMaxFileSize)) {
        return DataLossError(fmt::format("tokens file {} grew while being read", path_));
      }
    }
    CAIRN_ASSIGN_OR_RETURN(auto entries, ParseTokens(path_, text));
    entries_ = std::move(entries);
    stamp_ = StampOf(st);
    loaded_ = true;
    return Status::Ok();
  }

  Result<std::string> Create(const std::string& name, const std::string& store, Role role) {
    if (!IsValidName(name)) {
      return InvalidArgumentError(
          fmt::format("bad token name '{}': use 1 to 64 of A-Z a-z 0-9 . _ -", name));
    }
    if (store != "*" && !IsValidName(store)) {
      return InvalidArgumentError(fmt::format(
          "bad store '{}': a datastore name (1 to 64 of A-Z a-z 0-9 . _ -) or '*' for all", store));
    }
    MutexLock lock(mu_);
    CAIRN_ASSIGN_OR_RETURN(LockGuard file_lock, LockGuard::Acquire(lock_path_));
    CAIRN_RETURN_IF_ERROR(RefreshLocked());
    if (entries_.count(name) != 0) {
      return AlreadyExistsError(
          fmt::format("token '{}' already exists in {} (revoke it first)", name, path_));
    }
    auto entries = entries_;
    Entry e;
    e.token = Token{name, store, role, static_cast<int64_t>(std::time(nullptr))};
    std::string secret = NewSecretHex(&e.secret_hash);
    entries.emplace(name, std::move(e));
    CAIRN_RETURN_IF_ERROR(Commit(std::move(entries)));
    return name + ":" + secret;
  }

  Status Revoke(const std::string& name) {
    MutexLock lock(mu_);
    CAIRN_ASSIGN_OR_RETURN(LockGuard file_lock, LockGuard::Acquire(lock_path_));
    CAIRN_RETURN_IF_ERROR(RefreshLocked());
    if (entries_.count(name) == 0) {
      return NotFoundError(fmt::format("no token '{}' in {}", name, path_));
    }
    auto entries = entries_;
    entries.erase(name);
    return Commit(std::move(entries));
  }

  std::vector<Token> List() const {
    MutexLock lock(mu_);
    // On a failed re-read the last good list is shown; Authenticate, which
    // decides access, fails closed instead.
    RefreshLocked().IgnoreError();
    std::vector<Token> out;
    out.reserve(entries_.size());
    for (const auto& [name, e] : entries_) out.push_back(e.token);
    return out;
  }

  Result<Token> Authenticate(std::string_view credential, std::string* why) const {
    // Every credential takes the same path: split, decode, hash, compare
    // against the stored hash or, for an unknown name, a dummy one.
    const size_t colon = credential.find(':');
    const std::string_view name =
        colon == std::string_view::npos ? credential : credential.substr(0, colon);
    const std::string_view secret_hex =
        colon == std::string_view::npos ? std::string_view() : credential.substr(colon + 1);
    std::array<uint8_t, kSecretSize> secret{};
    const bool well_formed = colon != std::string_view::npos &&
                             secret_hex.size() == 2 * kSecretSize && FromHex(secret_hex, secret);
    const crypto::Digest presented = crypto::Sha256(secret);
    secret.fill(0);

    MutexLock lock(mu_);
    if (Status s = RefreshLocked(); !s.ok()) {  // fail closed: a revoked token must not pass
      if (why != nullptr) *why = std::string(s.message());
      return s;
    }
    auto it = entries_.find(std::string(name));
    const bool known = it != entries_.end();
    const crypto::Digest& expected = known ? it->second.secret_hash : dummy_hash_;
    const bool equal = crypto::ConstantTimeEqual(presented, expected);
    if (!(equal && known && well_formed)) {
      if (why != nullptr) {
        // Decided after the comparison, which ran the same either way.
        const std::string shown = PrintableName(name);
        *why = !well_formed ? fmt::format("malformed credential for token '{}' (expected "
                                          "NAME:SECRET with 64 hex digits)",
                                          shown)
               : !known     ? fmt::format("unknown token '{}'", shown)
                            : fmt::format("wrong secret for token '{}'", shown);
      }
      return PermissionDeniedError(kDenied);
    }
    return it->second.token;
  }

 private:
  // REQUIRES: the file lock held.
  Status Commit(std::map<std::string, Entry> entries) REQUIRES(mu_) {
    CAIRN_ASSIGN_OR_RETURN(FileStamp stamp, WriteAtomic(state_dir_, path_, Serialize(entries)));
    entries_ = std::move(entries);
    stamp_ = stamp;
    loaded_ = true;
    return Status::Ok();
  }

  const std::string state_dir_;
  const std::string path_;
  const std::string lock_path_;
  crypto::Digest dummy_hash_{};

  mutable Mutex mu_;
  mutable std::map<std::string, Entry> entries_ GUARDED_BY(mu_);
  mutable FileStamp stamp_ GUARDED_BY(mu_);
  mutable bool loaded_ GUARDED_BY(mu_) = false;
};

TokenStore::TokenStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TokenStore::~TokenStore() = default;

Result<std::unique_ptr<TokenStore>> TokenStore::Open(const std::string& state_dir) {
  if (state_dir.empty()) return InvalidArgumentError("no state directory given for the tokens");
  auto impl = std::make_unique<Impl>(state_dir);
  CAIRN_RETURN_IF_ERROR(impl->Load());
  return std::unique_ptr<TokenStore>(new TokenStore(std::move(impl)));
}

Result<std::string> TokenStore::Create(const std::string& name, const std::string& store,
                                       Role role) {
  return impl_->Create(name, store, role);
}

Status TokenStore::Revoke(const std::string& name) { return impl_->Revoke(name); }

std::vector<Token> TokenStore::List() const { return impl_->List(); }

Result<Token> TokenStore::Authenticate(std::string_view credential, std::string* why) const {
  return impl_->Authenticate(credential, why);
}

}  // namespace cairn::server
