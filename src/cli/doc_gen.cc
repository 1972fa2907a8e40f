#include "cli/doc_gen.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace cairn::cli {
namespace {

// --- the command tree ---------------------------------------------------------

// Subcommands shown in --help (hidden ones have an empty group).
std::vector<const CLI::App*> Visible(const CLI::App& app) {
  return app.get_subcommands(
      [](const CLI::App* a) { return !a->get_name().empty() && !a->get_group().empty(); });
}

std::vector<const CLI::Option*> Options(const CLI::App& app, bool positional) {
  return app.get_options([positional](const CLI::Option* o) {
    return !o->get_group().empty() && o->get_positional() == positional && (positional || o->nonpositional());
  });
}

// An option that consumes the next word (not a flag, not an optional value).
bool TakesValue(const CLI::Option& o) {
  return o.get_type_size_max() > 0 && o.get_expected_min() > 0;
}

// Flags (expected(0)) take no value at all.
bool HasValue(const CLI::Option& o) { return o.get_type_size_max() > 0 && o.get_expected_max() > 0; }

bool Repeats(const CLI::Option& o) {
  return o.get_items_expected_max() >= CLI::detail::expected_max_vector_size;
}

// The placeholder of an option's value: its type name unless that is one
// of CLI11's generic ones, else its long name in capitals.
std::string ValueName(const CLI::Option& o) {
  std::string t = o.get_type_name();
  if (const size_t sp = t.find(' '); sp != std::string::npos) t.resize(sp);
  if (t.empty() || t == "TEXT" || t == "INT" || t == "UINT" || t == "FLOAT" || t == "INT64" ||
      t == "UINT64") {
    if (t == "INT" || t == "UINT" || t == "INT64" || t == "UINT64") return "N";
    std::string n = o.get_lnames().empty() ? o.get_name() : o.get_lnames().front();
    for (char& c : n) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return n;
  }
  return t;
}

struct Command {
  std::string path;  // "restore", "key create"
  const CLI::App* app;
};
void Walk(const CLI::App& app, const std::string& prefix, std::vector<Command>* out) {
  for (const CLI::App* sub : Visible(app)) {
    std::string path = prefix.empty() ? sub->get_name() : prefix + " " + sub->get_name();
    out->push_back({path, sub});
    Walk(*sub, path, out);
  }
}

// --- roff ---------------------------------------------------------------------

std::string Roff(std::string_view text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    line_start = c == '\n';
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

std::string OptionHead(const CLI::Option& o) {
  std::vector<std::string> names;
  for (const auto& s : o.get_snames()) names.push_back("\\fB\\-" + Roff(s) + "\\fR");
  for (const auto& l : o.get_lnames()) names.push_back("\\fB\\-\\-" + Roff(l) + "\\fR");
  std::string head = fmt::format("{}", fmt::join(names, ", "));
  if (HasValue(o)) {
    const std::string v = "\\fI" + Roff(ValueName(o)) + "\\fR";
    head += o.get_expected_min() == 0 ? " [" + v + "]" : " " + v;
  }
  return head;
}

void OptionItems(std::string* out, const std::vector<const CLI::Option*>& options) {
  for (const CLI::Option* o : options) {
    std::string desc = o->get_description();
    if (!o->get_default_str().empty()) desc += fmt::format(" (default: {})", o->get_default_str());
    if (Repeats(*o) && HasValue(*o) && desc.find("repeatable") == std::string::npos) {
      desc += "; may be given more than once";
    }
    *out += ".TP\n" + OptionHead(*o) + "\n" + Roff(desc) + "\n";
  }
}

std::string Synopsis(const std::string& path, const CLI::App& app) {
  std::string s = ".B cairn" + (path.empty() ? "" : " " + Roff(path)) + "\n";
  if (!Visible(app).empty()) return s + "\\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n";
  s += "[\\fIOPTIONS\\fR]";
  for (const CLI::Option* p : Options(app, true)) {
    std::string name = "\\fI" + Roff(p->get_name()) + "\\fR" + (Repeats(*p) ? "..." : "");
    s += " " + (p->get_required() ? name : "[" + name + "]");
  }
  return s + "\n";
}

// "cairn", "cairn-restore", "cairn-key-create".
std::string PageName(const std::string& path) {
  std::string name = "cairn";
  if (!path.empty()) name += "-";
  for (char c : path) name += c == ' ' ? '-' : c;
  return name;
}

// Sections of cairn(1) that no option carries.
constexpr char kExitStatus[] = R"(.SH EXIT STATUS
.TP
.B 0
success
.TP
.B 1
failure (the message on stderr says what, where and why)
.TP
.B 2
usage error: a bad option, argument or config file
.TP
.B 3
corruption found, or stored data the disk cannot read (an I/O error) (verify, restore)
.TP
.B 10
the repository does not exist (no datastore at the path, no such bucket, or no such store on the server)
.TP
.B 11
the repository, group or snapshot is locked by another operation (a running backup, gc or restore); try again later
.TP
.B 12
wrong passphrase or key: the key file's passphrase is wrong, the snapshot was made with another key (or needs one that was not given), or the server refused the token
)";

constexpr char kEnvironment[] = R"(.SH ENVIRONMENT
.TP
.B CAIRN_REPO
the repository when \-r is not given: a path, https://HOST:PORT/STORE, s3://BUCKET/PREFIX?endpoint=URL, or the name of a repository in the config file
.TP
.B CAIRN_CONFIG
the client config file (default: $XDG_CONFIG_HOME/cairn/config.toml, else ~/.config/cairn/config.toml)
.TP
.B CAIRN_TOKEN\fR, \fBCAIRN_FINGERPRINT
a server's API token NAME:SECRET and the certificate fingerprint to trust
.TP
.B CAIRN_KEYFILE
the encryption key file
.TP
.B CAIRN_PASSPHRASE\fR, \fBCAIRN_PASSPHRASE_FILE\fR, \fBCAIRN_PASSWORD_COMMAND
the key's passphrase, a file holding it, or a shell command printing it (after \-\-passphrase\-file and \-\-password\-command; a prompt on the terminal comes last)
.TP
.B CAIRN_LIMIT_UPLOAD\fR, \fBCAIRN_LIMIT_DOWNLOAD
bandwidth limits, as \-\-limit\-upload and \-\-limit\-download
.TP
.B CAIRN_RECONNECT_TIMEOUT
how long restore and verify through a server retry while it restarts (a duration such as 90s or 5m; 0 for three quick retries only; default 60s)
.TP
.B CAIRN_TRUSTED_SERVERS
the trusted\-servers file (default ~/.config/cairn/servers: lines HOST:PORT FINGERPRINT)
.TP
.B AWS_ACCESS_KEY_ID\fR, \fBAWS_SECRET_ACCESS_KEY\fR, \fBAWS_SESSION_TOKEN\fR, \fBAWS_PROFILE
credentials for s3:// repositories
)";

constexpr char kFiles[] = R"(.SH FILES
.TP
.I ~/.config/cairn/config.toml
named repositories and defaults (TOML):
.RS
.nf
[defaults]
repository = "main"
limit_upload = "20M"

[repository.main]
url = "https://backup.example.com:8007/main"
token = "host1:5f0c..."
fingerprint = "3f:a2:..."
keyfile = "~/.config/cairn/key.json"
password_command = "pass show cairn/main"
.fi
.RE
Keys of a repository: url, ns, token, fingerprint, keyfile, passphrase_file, password_command, limit_upload, limit_download. Flags and environment variables win over the file. A file holding a token must be private (chmod 600).
.TP
.I ~/.config/cairn/key.json
the default key file of \fBcairn key\fR
.TP
.I /etc/cairn/server.json
the server's configuration (\fBcairn serve \-\-config\fR; /usr/share/doc/cairn/SERVER.md)
.TP
.I /etc/cairn/backup.d/NAME.conf
a backup job run by \fBcairn\-backup@NAME.timer\fR (\fBcairn\-job\-run\fR(1))
)";

constexpr char kJobFormat[] = R"(.SH JOB FILE
A job file is TOML:
.RS
.nf
repository = "/srv/cairn/main"     # a path, URL, or a name from config.toml
id = "host/web1"                   # the backup group
sources = ["root.tree=/", "boot.tree=/boot"]
excludes = ["/proc", "/sys", "/dev", "/run", "/tmp", "*.tmp"]
exclude_files = []
cross_fs = false
keyfile = "/etc/cairn/key.json"
passphrase_file = "/etc/cairn/key.pass"   # or password_command
# token, fingerprint, ns, limit_upload, limit_download as in config.toml

[keep]                             # prune the group after the backup
last = 3
daily = 7
weekly = 4
monthly = 6
.fi
.RE
The job backs up \fIsources\fR with \fBcairn backup\fR and, when it has [keep] rules, prunes its group with \fBcairn prune\fR; a failed backup prunes nothing. Pruning through a server takes an admin token. A job file holding a token must be private (chmod 600).
.PP
To run a job every night:
.RS
.nf
systemctl enable \-\-now cairn\-backup@NAME.timer
.fi
.RE
)";

std::string RenderPage(const std::string& path, const CLI::App& app, const CLI::App& root,
                       const std::string& version) {
  const std::string name = PageName(path);
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string out = fmt::format(".TH {} 1 \"\" \"cairn {}\" \"cairn manual\"\n", Roff(upper), version);
  out += ".\\\" Generated by `cairn generate man` from the command tree; do not edit.\n";
  std::string desc = path.empty() ? "deduplicating backup of disk images and file trees"
                                  : app.get_description();
  out += ".SH NAME\n" + Roff(name) + " \\- " + Roff(desc) + "\n";
  out += ".SH SYNOPSIS\n" + Synopsis(path, app);
  out += ".SH DESCRIPTION\n";
  if (path.empty()) {
    out += Roff(
        "cairn backs up disk images and file trees into a content-addressed, deduplicating "
        "datastore (a directory, a cairn server, or S3-compatible object storage), restores and "
        "verifies them at the speed of the hardware, and prunes and garbage-collects them. Each "
        "command has its own page, below.") + "\n";
  } else {
    out += Roff(desc) + ".\n";
  }
  if (auto subs = Visible(app); !subs.empty()) {
    out += ".SH COMMANDS\n";
    for (const CLI::App* sub : subs) {
      const std::string sub_path = path.empty() ? sub->get_name() : path + " " + sub->get_name();
      out += ".TP\n.BR " + Roff(PageName(sub_path)) + " (1)\n" + Roff(sub->get_description()) + "\n";
    }
  }
  if (auto pos = Options(app, true); !pos.empty()) {
    out += ".SH ARGUMENTS\n";
    for (const CLI::Option* p : pos) {
      out += ".TP\n.I " + Roff(p->get_name()) + "\n" + Roff(p->get_description()) + "\n";
    }
  }
  if (!path.empty()) {
    out += ".SH OPTIONS\n";
    OptionItems(&out, Options(app, false));
  }
  out += path.empty() ? ".SH OPTIONS\n" : ".SH GLOBAL OPTIONS\nGiven before or after the command:\n";
  OptionItems(&out, Options(root, false));
  if (path == "job run") out += kJobFormat;
  if (path.empty()) {
    out += kEnvironment;
    out += kFiles;
    out += kExitStatus;
  } else {
    out += ".SH EXIT STATUS\n0 success, 1 failure, 2 usage error, 3 corruption found, 10 no such "
           "repository, 11 locked by another operation, 12 wrong passphrase or key; see "
           "\\fBcairn\\fR(1).\n";
  }
  out += ".SH SEE ALSO\n";
  if (path.empty()) {
    std::vector<std::string> refs;
    for (const CLI::App* sub : Visible(app)) refs.push_back(".BR " + Roff(PageName(sub->get_name())) + " (1)");
    out += fmt::format("{}\n", fmt::join(refs, ",\n"));
    out += ".PP\n/usr/share/doc/cairn/ (README.md, SERVER.md, SECURITY.md, S3.md)\n";
  } else {
    out += ".BR cairn (1)\n";
  }
  return out;
}

// --- completion -----------------------------------------------------------------

struct Tables {
  // command path ("_" for the root) → words
  std::vector<std::pair<std::string, std::string>> subs, opts, valopts, pos, desc;
};

std::string Join(const std::vector<std::string>& words) { return fmt::format("{}", fmt::join(words, " ")); }

Tables BuildTables(const CLI::App& root) {
  Tables t;
  std::vector<Command> commands = {{"_", &root}};
  Walk(root, "", &commands);
  for (const Command& c : commands) {
    std::vector<std::string> subs, opts, valopts, pos;
    for (const CLI::App* s : Visible(*c.app)) {
      subs.push_back(s->get_name());
      t.desc.emplace_back(c.path + " " + s->get_name(), s->get_description());
    }
    for (const CLI::Option* o : Options(*c.app, false)) {
      for (const auto& s : o->get_snames()) {
        opts.push_back("-" + s);
        if (TakesValue(*o)) valopts.push_back("-" + s);
      }
      for (const auto& l : o->get_lnames()) {
        opts.push_back("--" + l);
        if (TakesValue(*o)) valopts.push_back("--" + l);
        t.desc.emplace_back(c.path + " --" + l, o->get_description());
      }
    }
    for (const CLI::Option* p : Options(*c.app, true)) pos.push_back(p->get_name());
    if (!subs.empty()) t.subs.emplace_back(c.path, Join(subs));
    t.opts.emplace_back(c.path, Join(opts));
    if (!valopts.empty()) t.valopts.emplace_back(c.path, Join(valopts));
    if (!pos.empty()) t.pos.emplace_back(c.path, Join(pos));
  }
  return t;
}

// 'text' for a shell, single quotes escaped.
std::string Quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Table(const char* name, const std::vector<std::pair<std::string, std::string>>& rows,
                  bool zsh) {
  std::string out = fmt::format("{} {}=(\n", zsh ? "typeset -gA" : "declare -gA", name);
  for (const auto& [k, v] : rows) {
    out += zsh ? fmt::format("  {} {}\n", Quote(k), Quote(v)) : fmt::format("  [{}]={}\n", Quote(k), Quote(v));
  }
  return out + ")\n";
}

// The word loop both shells share: walks the words before the cursor,
// finding the command path, the positionals given, the repository and the
// namespace (for `cairn generate names`).
constexpr char kBashBody[] = R"BASH(
# Completion for cairn; generated by `cairn generate completion bash` from
# the command tree, do not edit. Snapshot and archive names come from
# `cairn generate names` on the repository given with -r (or CAIRN_REPO).
_cairn() {
  local line=${COMP_LINE:0:COMP_POINT} words cur prev path=_ npos=0 repo= ns= snapshot= i w
  read -ra words <<<"$line"
  [[ $line == *[[:space:]] || ${#words[@]} -eq 0 ]] && words+=("")
  cur=${words[-1]}
  prev=
  (( ${#words[@]} > 1 )) && prev=${words[-2]}
  local valopts=" ${_cairn_valopts[_]} "
  for ((i = 1; i < ${#words[@]} - 1; i++)); do
    w=${words[i]}
    if [[ $w == -* ]]; then
      if [[ $w == *=* ]]; then
        [[ $w == --repo=* ]] && repo=${w#--repo=}
        [[ $w == --ns=* ]] && ns=${w#--ns=}
      elif [[ $valopts == *" $w "* ]]; then
        ((i++))
        [[ $w == -r || $w == --repo ]] && repo=${words[i]}
        [[ $w == --ns ]] && ns=${words[i]}
      fi
      continue
    fi
    if (( npos == 0 )) && [[ " ${_cairn_subs[$path]} " == *" $w "* ]]; then
      if [[ $path == _ ]]; then path=$w; else path="$path $w"; fi
      valopts=" ${_cairn_valopts[_]} ${_cairn_valopts[$path]} "
      continue
    fi
    local -a names=(${_cairn_pos[$path]})
    [[ ${names[npos]} == SNAPSHOT ]] && snapshot=$w
    ((npos++))
  done
  COMPREPLY=()
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "${_cairn_opts[$path]} ${_cairn_opts[_]}" -- "$cur"))
  elif [[ -n $prev && $prev == -* && $valopts == *" $prev "* ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  elif (( npos == 0 )) && [[ -n ${_cairn_subs[$path]} ]]; then
    COMPREPLY=($(compgen -W "${_cairn_subs[$path]}" -- "$cur"))
  else
    local -a names=(${_cairn_pos[$path]})
    local what=${names[npos]:-${names[-1]}}
    local -a args=()
    [[ -n $repo ]] && args+=(-r "$repo")
    [[ -n $ns ]] && args+=(--ns "$ns")
    if [[ $what == SNAPSHOT && ( -n $repo || -n $CAIRN_REPO ) ]]; then
      local IFS=$'\n'
      COMPREPLY=($(compgen -W "$(cairn generate names "${args[@]}" 2>/dev/null)" -- "$cur"))
    elif [[ $what == ARCHIVE && -n $snapshot && ( -n $repo || -n $CAIRN_REPO ) ]]; then
      local IFS=$'\n'
      COMPREPLY=($(compgen -W "$(cairn generate names "${args[@]}" "$snapshot" 2>/dev/null)" -- "$cur"))
    else
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
  fi
  # Bash splits words at ':' (snapshot times have colons): complete only
  # the part after the last one.
  if [[ $cur == *:* && $COMP_WORDBREAKS == *:* ]]; then
    local colon_prefix=${cur%"${cur##*:}"}
    local k
    for k in "${!COMPREPLY[@]}"; do COMPREPLY[k]=${COMPREPLY[k]#"$colon_prefix"}; done
  fi
}
complete -o filenames -o bashdefault -F _cairn cairn
)BASH";

constexpr char kZshBody[] = R"ZSH(
# Completion for cairn; generated by `cairn generate completion zsh` from
# the command tree, do not edit.
_cairn() {
  local path=_ npos=0 repo= ns= snapshot= i w cur=${words[CURRENT]} prev=${words[CURRENT-1]}
  local valopts=" ${_cairn_valopts[_]} "
  local -a names
  for (( i = 2; i < CURRENT; i++ )); do
    w=${words[i]}
    if [[ $w == -* ]]; then
      if [[ $w == *=* ]]; then
        [[ $w == --repo=* ]] && repo=${w#--repo=}
        [[ $w == --ns=* ]] && ns=${w#--ns=}
      elif [[ $valopts == *" $w "* ]]; then
        (( i++ ))
        [[ $w == -r || $w == --repo ]] && repo=${words[i]}
        [[ $w == --ns ]] && ns=${words[i]}
      fi
      continue
    fi
    if (( npos == 0 )) && [[ " ${_cairn_subs[$path]} " == *" $w "* ]]; then
      if [[ $path == _ ]]; then path=$w; else path="$path $w"; fi
      valopts=" ${_cairn_valopts[_]} ${_cairn_valopts[$path]} "
      continue
    fi
    names=(${=_cairn_pos[$path]})
    [[ ${names[npos+1]} == SNAPSHOT ]] && snapshot=$w
    (( npos++ ))
  done
  local -a items
  if [[ $cur == -* ]]; then
    for w in ${=_cairn_opts[$path]} ${=_cairn_opts[_]}; do
      items+=("$w:${_cairn_desc[$path $w]:-${_cairn_desc[_ $w]}}")
    done
    _describe -t options option items
  elif [[ $prev == -* && $valopts == *" $prev "* ]]; then
    _files
  elif (( npos == 0 )) && [[ -n ${_cairn_subs[$path]} ]]; then
    for w in ${=_cairn_subs[$path]}; do items+=("$w:${_cairn_desc[$path $w]}"); done
    _describe -t commands command items
  else
    names=(${=_cairn_pos[$path]})
    local what=${names[npos+1]:-${names[-1]}}
    local -a args
    [[ -n $repo ]] && args+=(-r "$repo")
    [[ -n $ns ]] && args+=(--ns "$ns")
    if [[ $what == SNAPSHOT && ( -n $repo || -n $CAIRN_REPO ) ]]; then
      compadd -- ${(f)"$(cairn generate names "${args[@]}" 2>/dev/null)"}
    elif [[ $what == ARCHIVE && -n $snapshot && ( -n $repo || -n $CAIRN_REPO ) ]]; then
      compadd -- ${(f)"$(cairn generate names "${args[@]}" "$snapshot" 2>/dev/null)"}
    else
      _files
    fi
  fi
}
)ZSH";

}  // namespace

std::map<std::string, std::string> RenderManPages(const CLI::App& app, const std::string& version) {
  std::map<std::string, std::string> pages;
  pages["cairn.1"] = RenderPage("", app, app, version);
  std::vector<Command> commands;
  Walk(app, "", &commands);
  for (const Command& c : commands) {
    pages[PageName(c.path) + ".1"] = RenderPage(c.path, *c.app, app, version);
  }
  return pages;
}

Result<std::string> RenderCompletion(const CLI::App& app, const std::string& shell) {
  if (shell != "bash" && shell != "zsh") {
    return InvalidArgumentError(fmt::format("completion for '{}': only bash and zsh", shell));
  }
  const bool zsh = shell == "zsh";
  Tables t = BuildTables(app);
  std::string out = zsh ? "#compdef cairn\n" : "# bash completion for cairn            -*- shell-script -*-\n";
  out += Table("_cairn_subs", t.subs, zsh);
  out += Table("_cairn_opts", t.opts, zsh);
  out += Table("_cairn_valopts", t.valopts, zsh);
  out += Table("_cairn_pos", t.pos, zsh);
  if (zsh) out += Table("_cairn_desc", t.desc, zsh);
  out += zsh ? kZshBody : kBashBody;
  if (zsh) out += "\n_cairn \"$@\"\n";
  return out;
}

}  // namespace cairn::cli
