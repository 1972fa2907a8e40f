// cairn key create [PATH] [--kdf scrypt|argon2id] [--passphrase-file F] [--json]
// cairn key change-passphrase [PATH] [--passphrase-file F] [--new-passphrase-file F]
//   [--kdf scrypt|argon2id] [--json]
// cairn key show [PATH] [--json]
// cairn key export [PATH] [--paper]
// cairn key import SOURCE [PATH] [--json]
//
// PATH defaults to CAIRN_KEYFILE, else $XDG_CONFIG_HOME/cairn/key.json or
// ~/.config/cairn/key.json. Key files are written with mode 0600 and never
// overwritten except by change-passphrase, which keeps the master key.
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <qrencode.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>

#include "cli/cli_util.h"
#include "cli/key_options.h"
#include "crypto/key_file.h"

namespace cairn::cli {
namespace {

using crypto::Kdf;
using crypto::KeyFileInfo;

constexpr char kBeginMarker[] = "-----BEGIN CAIRN KEY-----";
constexpr char kEndMarker[] = "-----END CAIRN KEY-----";

// PATH, else CAIRN_KEYFILE, else the default place.
Result<std::string> ResolvePath(const std::string& arg) {
  if (!arg.empty()) return arg;
  std::string named = NamedKeyFile(KeyOptions{});
  if (!named.empty()) return named;
  return DefaultKeyFilePath();
}

// CAIRN_TEST_WEAK_KDF=1 (test suites only) makes new keys cheap to unwrap.
crypto::KdfParams NewKeyParams(Kdf kdf) {
  const char* weak = std::getenv("CAIRN_TEST_WEAK_KDF");
  if (weak == nullptr || std::string_view(weak) != "1") return crypto::DefaultKdfParams(kdf);
  crypto::KdfParams p = crypto::WeakKdfParams(kdf);
  fmt::print(stderr,
             "cairn: warning: CAIRN_TEST_WEAK_KDF=1: {} {} is for tests only; this key is "
             "only as strong as its passphrase\n",
             crypto::KdfName(kdf), p.ToString());
  return p;
}

std::string Rfc3339(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  char buf[32] = "?";
  if (gmtime_r(&t, &tm) != nullptr) std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json InfoJson(const std::string& path, const KeyFileInfo& info) {
  nlohmann::json kdf = {{"name", crypto::KdfName(info.kdf)}};
  if (info.kdf == Kdf::kScrypt) {
    kdf["n"] = info.params.scrypt_n;
    kdf["r"] = info.params.scrypt_r;
    kdf["p"] = info.params.scrypt_p;
  } else {
    kdf["t"] = info.params.argon2_t;
    kdf["m_kib"] = info.params.argon2_m_kib;
    kdf["p"] = info.params.argon2_p;
  }
  return {{"path", path},
          {"fingerprint", crypto::FingerprintText(info.fingerprint)},
          {"fingerprint_hex", ToHex(info.fingerprint)},
          {"created", Rfc3339(info.created_unix)},
          {"created_unix", info.created_unix},
          {"kdf", kdf}};
}

void PrintInfo(const std::string& path, const KeyFileInfo& info) {
  fmt::print("key file     {}\n", path);
  fmt::print("fingerprint  {}\n", crypto::FingerprintText(info.fingerprint));
  fmt::print("             {}\n", ToHex(info.fingerprint));
  fmt::print("created      {}\n", Rfc3339(info.created_unix));
  fmt::print("kdf          {} {}\n", crypto::KdfName(info.kdf), info.kdf_params);
}

Status RefuseEmpty(const std::string& pass) {
  if (!pass.empty()) return Status::Ok();
  return InvalidArgumentError("empty passphrase refused: the passphrase is what protects the key");
}

// Fails with AlreadyExists before anyone types a passphrase for nothing
// (WriteKeyFile refuses again, atomically, should the file appear since).
Status RefuseExisting(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) return Status::Ok();
  return AlreadyExistsError(fmt::format(
      "{} already exists: refusing to overwrite a key file (move it away, or name another "
      "PATH)",
      path));
}

// --- create ------------------------------------------------------------------

struct CreateArgs {
  std::string path;
  std::string kdf = "scrypt";
  KeyOptions key;
};

void RunCreate(Context& ctx, const CreateArgs& args) {
  auto kdf = crypto::ParseKdf(args.kdf);
  if (!kdf.ok()) return Fail(ctx, kdf.status());
  auto path = ResolvePath(args.path);
  if (!path.ok()) return Fail(ctx, path.status());
  if (Status s = RefuseExisting(*path); !s.ok()) return Fail(ctx, s);
  PassphraseSources sources = KeyPassphraseSources(args.key, *path);
  sources.prompt = fmt::format("New passphrase for key {}: ", *path);
  sources.what = fmt::format("the new key file {}", *path);
  sources.confirm = true;
  auto pass = ReadPassphrase(sources);
  if (!pass.ok()) return Fail(ctx, pass.status());
  if (Status s = RefuseEmpty(*pass); !s.ok()) return Fail(ctx, s);
  crypto::Key256 master;
  crypto::RandomBytes(master);
  auto text = crypto::WrapKeyWith(master, *pass, NewKeyParams(*kdf), ctx.env->NowUnixSeconds());
  OPENSSL_cleanse(master.data(), master.size());
  OPENSSL_cleanse(pass->data(), pass->size());
  if (!text.ok()) return Fail(ctx, text.status());
  if (Status s = WriteKeyFile(*path, *text, /*replace=*/false); !s.ok()) return Fail(ctx, s);
  auto info = crypto::ParseKeyFile(*text);
  if (!info.ok()) return Fail(ctx, info.status());
  if (ctx.json) return PrintJson(InfoJson(*path, *info));
  fmt::print("created key file {}\n", *path);
  fmt::print("fingerprint {}\n", crypto::FingerprintText(info->fingerprint));
  fmt::print(
      "Keep a copy of this file and its passphrase apart from the backups: without both, "
      "encrypted backups cannot be restored (`cairn key export --paper {}` prints one for "
      "paper).\n",
      *path);
}

// --- change-passphrase -------------------------------------------------------

struct ChangeArgs {
  std::string path;
  std::string new_passphrase_file;
  std::string kdf;  // empty: keep the file's KDF and parameters
  KeyOptions key;
};

void RunChange(Context& ctx, const ChangeArgs& args) {
  auto path = ResolvePath(args.path);
  if (!path.ok()) return Fail(ctx, path.status());
  auto text = ReadKeyFile(*path, KeyFileAccess::kPrivate);
  if (!text.ok()) return Fail(ctx, text.status());
  auto info = crypto::ParseKeyFile(*text);
  if (!info.ok()) return Fail(ctx, KeyFileError(info.status(), *path));
  crypto::KdfParams params = info->params;
  if (!args.kdf.empty()) {
    auto kdf = crypto::ParseKdf(args.kdf);
    if (!kdf.ok()) return Fail(ctx, kdf.status());
    params = NewKeyParams(*kdf);
  }
  auto old_pass = ReadPassphrase(KeyPassphraseSources(args.key, *path));
  if (!old_pass.ok()) return Fail(ctx, old_pass.status());
  auto master = crypto::UnwrapKey(*text, *old_pass);
  OPENSSL_cleanse(old_pass->data(), old_pass->size());
  if (!master.ok()) return Fail(ctx, KeyFileError(master.status(), *path));

  PassphraseSources sources;
  sources.file = args.new_passphrase_file;
  sources.env = "CAIRN_NEW_PASSPHRASE";
  sources.prompt = fmt::format("New passphrase for key {}: ", *path);
  sources.confirm = true;
  sources.what = fmt::format("the new passphrase of key file {}", *path);
  sources.how_to_give = "set CAIRN_NEW_PASSPHRASE or pass --new-passphrase-file FILE";
  auto new_pass = ReadPassphrase(sources);
  Status s = new_pass.ok() ? RefuseEmpty(*new_pass) : new_pass.status();
  std::string new_text;
  if (s.ok()) {
    auto wrapped = crypto::WrapKeyWith(*master, *new_pass, params, info->created_unix);
    OPENSSL_cleanse(new_pass->data(), new_pass->size());
    s = wrapped.status();
    if (s.ok()) new_text = std::move(*wrapped);
  }
  OPENSSL_cleanse(master->data(), master->size());
  if (s.ok()) s = WriteKeyFile(*path, new_text, /*replace=*/true);
  if (!s.ok()) return Fail(ctx, s);
  auto new_info = crypto::ParseKeyFile(new_text);
  if (!new_info.ok()) return Fail(ctx, new_info.status());
  if (ctx.json) return PrintJson(InfoJson(*path, *new_info));
  fmt::print("changed the passphrase of key file {} (fingerprint {}, unchanged)\n", *path,
             crypto::FingerprintText(new_info->fingerprint));
}

// --- show, export --------------------------------------------------------------

void RunShow(Context& ctx, const std::string& arg) {
  auto path = ResolvePath(arg);
  if (!path.ok()) return Fail(ctx, path.status());
  auto text = ReadKeyFile(*path, KeyFileAccess::kWarn);
  if (!text.ok()) return Fail(ctx, text.status());
  auto info = crypto::ParseKeyFile(*text);
  if (!info.ok()) return Fail(ctx, KeyFileError(info.status(), *path));
  if (ctx.json) return PrintJson(InfoJson(*path, *info));
  PrintInfo(*path, *info);
}

// `data` as a QR code (level M) drawn with Unicode half blocks, two module
// rows per text line, dark modules as ink, with the 4-module quiet zone.
Result<std::string> QrText(const std::string& data) {
  std::unique_ptr<QRcode, decltype(&QRcode_free)> qr(
      QRcode_encodeString(data.c_str(), 0, QR_ECLEVEL_M, QR_MODE_8, 1), &QRcode_free);
  if (!qr) return InternalError(fmt::format("QR encoding failed: {}", std::strerror(errno)));
  const int w = qr->width, quiet = 4;
  auto dark = [&](int x, int y) {
    return x >= 0 && y >= 0 && x < w && y < w && (qr->data[y * w + x] & 1) != 0;
  };
  std::string out;
  for (int y = -quiet; y < w + quiet; y += 2) {
    for (int x = -quiet; x < w + quiet; ++x) {
      const bool top = dark(x, y), bottom = dark(x, y + 1);
      out += top && bottom ? "\u2588" : top ? "\u2580" : bottom ? "\u2584" : " ";
    }
    out += '\n';
  }
  return out;
}

struct ExportArgs {
  std::string path;
  bool paper = false;
};

void RunExport(Context& ctx, const ExportArgs& args) {
  auto path = ResolvePath(args.path);
  if (!path.ok()) return Fail(ctx, path.status());
  auto text = ReadKeyFile(*path, KeyFileAccess::kWarn);
  if (!text.ok()) return Fail(ctx, text.status());
  auto info = crypto::ParseKeyFile(*text);
  if (!info.ok()) return Fail(ctx, KeyFileError(info.status(), *path));
  if (!text->ends_with('\n')) *text += '\n';
  if (!args.paper) return fmt::print("{}", *text);
  // The QR code holds the same JSON without its indentation: fewer modules.
  auto qr = QrText(nlohmann::ordered_json::parse(*text).dump());
  if (!qr.ok()) return Fail(ctx, qr.status());
  fmt::print(
      "cairn encryption key: paper backup\n"
      "\n"
      "Fingerprint  {}\n"
      "             {}\n"
      "Created      {}\n"
      "KDF          {} {}\n"
      "\n"
      "The key below is still protected by its passphrase: keep the passphrase\n"
      "somewhere else, not on this sheet. To restore the key, type or scan the\n"
      "text from the BEGIN line to the END line (or the QR code) into a file and\n"
      "run `cairn key import FILE [PATH]`.\n"
      "\n"
      "{}\n{}{}\n\n{}",
      crypto::FingerprintText(info->fingerprint), ToHex(info->fingerprint),
      Rfc3339(info->created_unix), crypto::KdfName(info->kdf), info->kdf_params, kBeginMarker,
      *text, kEndMarker, *qr);
}

// --- import ----------------------------------------------------------------------

// The key file in `source`: the text between the paper markers when they
// are there, else all of it.
Result<std::string> ExtractKeyText(const std::string& source, std::string text) {
  if (auto begin = text.find(kBeginMarker); begin != std::string::npos) {
    begin += std::strlen(kBeginMarker);
    auto end = text.find(kEndMarker, begin);
    if (end == std::string::npos) {
      return DataLossError(fmt::format("{}: has a \"{}\" line but no \"{}\" line after it", source,
                                       kBeginMarker, kEndMarker));
    }
    text = text.substr(begin, end - begin);
  }
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    return DataLossError(fmt::format("{}: no key file in it", source));
  text = text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
  if (crypto::ParseKeyFile(text).ok()) return text + "\n";
  // Typed or scanned from paper, long lines may come back broken; no
  // member of a key file holds white space, so it can all go.
  std::string squeezed;
  for (char c : text) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') squeezed += c;
  }
  if (crypto::ParseKeyFile(squeezed).ok()) {
    return nlohmann::ordered_json::parse(squeezed).dump(2) + "\n";
  }
  auto info = crypto::ParseKeyFile(text);  // the error of the text as given
  return info.status().WithContext(source);
}

struct ImportArgs {
  std::string source;
  std::string path;
};

Result<std::string> ReadSource(Context& ctx, const std::string& source) {
  constexpr uint64_t kMaxSource = 1 << 20;  // a paper page, with slack
  if (source != "-") {
    CAIRN_ASSIGN_OR_RETURN(Bytes data, ReadWholeFile(*ctx.env, source, kMaxSource));
    return std::string(AsStringView(data));
  }
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0 && text.size() <= kMaxSource) {
    text.append(buf, n);
  }
  if (std::ferror(stdin)) return UnknownError("reading the key from standard input failed");
  if (text.size() > kMaxSource) {
    return InvalidArgumentError(
        fmt::format("standard input is larger than {} bytes: not a key file", kMaxSource));
  }
  return text;
}

void RunImport(Context& ctx, const ImportArgs& args) {
  auto path = ResolvePath(args.path);
  if (!path.ok()) return Fail(ctx, path.status());
  auto source = ReadSource(ctx, args.source);
  if (!source.ok()) return Fail(ctx, source.status());
  const std::string name = args.source == "-" ? "standard input" : args.source;
  auto text = ExtractKeyText(name, std::move(*source));
  if (!text.ok()) return Fail(ctx, text.status());
  if (Status s = RefuseExisting(*path); !s.ok()) return Fail(ctx, s);
  if (Status s = WriteKeyFile(*path, *text, /*replace=*/false); !s.ok()) return Fail(ctx, s);
  auto info = crypto::ParseKeyFile(*text);
  if (!info.ok()) return Fail(ctx, info.status());
  if (ctx.json) return PrintJson(InfoJson(*path, *info));
  fmt::print("imported key {} from {} into {}\n", crypto::FingerprintText(info->fingerprint), name,
             *path);
}

}  // namespace

void RegisterKey(CLI::App& app, Context& ctx) {
  auto* key = app.add_subcommand("key", "create and manage encryption keys");
  key->require_subcommand(1);
  const char* path_help =
      "key file (default: CAIRN_KEYFILE, else $XDG_CONFIG_HOME/cairn/key.json or "
      "~/.config/cairn/key.json)";
  {
    auto* cmd = key->add_subcommand("create", "create a new random key, protected by a passphrase");
    auto args = std::make_shared<CreateArgs>();
    AddJsonOption(cmd, ctx);
    cmd->add_option("PATH", args->path, path_help);
    cmd->add_option("--kdf", args->kdf, "passphrase KDF: scrypt (default) or argon2id");
    cmd->add_option("--passphrase-file", args->key.passphrase_file,
                    "file holding the new passphrase (or CAIRN_PASSPHRASE, CAIRN_PASSPHRASE_FILE)");
    cmd->callback([&ctx, args] { RunCreate(ctx, *args); });
  }
  {
    auto* cmd =
        key->add_subcommand("change-passphrase", "protect the same key with a new passphrase");
    auto args = std::make_shared<ChangeArgs>();
    AddJsonOption(cmd, ctx);
    cmd->add_option("PATH", args->path, path_help);
    cmd->add_option("--passphrase-file", args->key.passphrase_file,
                    "file holding the current passphrase (or CAIRN_PASSPHRASE, "
                    "CAIRN_PASSPHRASE_FILE)");
    cmd->add_option("--new-passphrase-file", args->new_passphrase_file,
                    "file holding the new passphrase (or CAIRN_NEW_PASSPHRASE)");
    cmd->add_option("--kdf", args->kdf,
                    "switch to this KDF with its default parameters (default: keep the file's)");
    cmd->callback([&ctx, args] { RunChange(ctx, *args); });
  }
  {
    auto* cmd = key->add_subcommand("show",
                                    "show a key file's fingerprint, date and KDF "
                                    "(no passphrase needed)");
    auto path = std::make_shared<std::string>();
    AddJsonOption(cmd, ctx);
    cmd->add_option("PATH", *path, path_help);
    cmd->callback([&ctx, path] { RunShow(ctx, *path); });
  }
  {
    auto* cmd = key->add_subcommand("export",
                                    "print the key file (--paper: a printable page "
                                    "with a QR code)");
    auto args = std::make_shared<ExportArgs>();
    cmd->add_option("PATH", args->path, path_help);
    cmd->add_flag("--paper", args->paper, "a page to print and keep: text and QR code");
    cmd->callback([&ctx, args] { RunExport(ctx, *args); });
  }
  {
    auto* cmd = key->add_subcommand("import", "install a key file or paper backup as PATH");
    auto args = std::make_shared<ImportArgs>();
    AddJsonOption(cmd, ctx);
    cmd->add_option("SOURCE", args->source,
                    "a key file, or the text of `key export --paper` ('-': standard input)")
        ->required();
    cmd->add_option("PATH", args->path, path_help);
    cmd->callback([&ctx, args] { RunImport(ctx, *args); });
  }
}

}  // namespace cairn::cli
