// cairn key through the real binary: create, show, change-passphrase,
// export --paper and import; the files it writes (mode 0600, directories
// 0700, never overwritten); wrong passphrases, unsafe permissions and
// missing passphrases refused with messages that say which file and why.
// The passphrase prompt is driven through a pseudo-terminal, so the tests
// see what a user sees (and that the passphrase is not echoed).
//
// Every test runs with CAIRN_TEST_WEAK_KDF=1: keys take a millisecond.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "cli_fixture.h"
#include "scoped_env.h"

extern char** environ;

namespace cairn::cli_test {
namespace {

using Json = nlohmann::json;

int ModeOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Characters (code points) in a line of UTF-8.
size_t Columns(const std::string& line) {
  size_t n = 0;
  for (unsigned char c : line) n += (c & 0xc0) != 0x80;
  return n;
}

// The text between the paper markers (the key file as printed).
std::string BetweenMarkers(const std::string& paper) {
  const std::string begin = "-----BEGIN CAIRN KEY-----\n", end = "-----END CAIRN KEY-----";
  auto b = paper.find(begin), e = paper.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) return "";
  return paper.substr(b + begin.size(), e - b - begin.size());
}

struct TtyRun {
  int exit_code = -1;
  int term_signal = 0;
  std::string screen;  // what cairn wrote on its terminal
  std::string out, err;
  bool echo_after = false;  // the terminal echoes input after cairn ended
  std::string Describe() const {
    return "exit " + std::to_string(exit_code) + " signal " + std::to_string(term_signal) +
           "\nterminal: " + screen + "\nstdout: " + out + "\nstderr: " + err;
  }
};

class KeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Whatever the developer's shell holds must not leak into cairn (the
    // harness passes our environment on, and getenv finds the first entry).
    env_.Scrub({"CAIRN_PASSPHRASE", "CAIRN_PASSPHRASE_FILE", "CAIRN_NEW_PASSPHRASE",
                "CAIRN_KEYFILE", "XDG_CONFIG_HOME", "HOME", "CAIRN_TEST_WEAK_KDF"});
    ::setenv("CAIRN_TEST_WEAK_KDF", "1", 1);
    ::setenv("XDG_CONFIG_HOME", Path("xdg").c_str(), 1);
    ::setenv("HOME", Path("home").c_str(), 1);
  }
  void TearDown() override {
    env_.Restore();
  }

  std::string Path(std::string_view name) const { return tmp_.Join(name); }

  // cairn key ARGS… with extra environment entries.
  RunResult Key(std::vector<std::string> args, std::vector<std::string> env = {}) const {
    args.insert(args.begin(), "key");
    RunOptions options;
    options.env = std::move(env);
    return RunCairn(args, options);
  }

  // Creates a key file at `path` under `pass`; the parsed --json report.
  Json Create(const std::string& path, const std::string& pass,
              std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"create", path, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = Key(args, {"CAIRN_PASSPHRASE=" + pass});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    return r.exit_code == kExitOk ? ParseJson(r.out) : Json();
  }

  Json Show(const std::string& path) const {
    RunResult r = Key({"show", path, "--json"});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    return r.exit_code == kExitOk ? ParseJson(r.out) : Json();
  }

  // Runs cairn ARGS… in a session of its own: with a pseudo-terminal as its
  // controlling terminal when `terminal` (answering each passphrase prompt
  // with the next of `answers`), else with no terminal at all.
  TtyRun RunInSession(std::vector<std::string> args, bool terminal,
                      std::vector<std::string> answers = {},
                      std::vector<std::string> env = {}) const;

  TempDir tmp_;
  ScopedEnv env_;
};

TtyRun KeyTest::RunInSession(std::vector<std::string> args, bool terminal,
                             std::vector<std::string> answers, std::vector<std::string> env) const {
  TtyRun run;
  int master = -1;
  std::string slave_name;
  if (terminal) {
    master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
      ADD_FAILURE() << "posix_openpt: " << std::strerror(errno);
      return run;
    }
    slave_name = ::ptsname(master);
  }
  const std::string out_path = Path("session.out"), err_path = Path("session.err");
  std::vector<std::string> argv_s = {CairnBinary()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid == 0) {
    // A new session has no controlling terminal; opening the pty's slave
    // (without O_NOCTTY) makes it this session's terminal.
    if (::setsid() < 0) ::_exit(126);
    if (terminal && ::open(slave_name.c_str(), O_RDWR) < 0) ::_exit(126);
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 ||
        ::dup2(err, 2) < 0) {
      ::_exit(126);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    if (master >= 0) ::close(master);
    return run;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  size_t answered = 0;
  int status = 0;
  bool exited = false;
  while (!exited) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "cairn key did not finish in 60 s: " << run.screen;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    if (master >= 0) {
      struct pollfd p = {master, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        char buf[4096];
        ssize_t n = ::read(master, buf, sizeof buf);
        if (n > 0) run.screen.append(buf, static_cast<size_t>(n));
        // EIO once the slave is closed: keep polling the process.
        if (n <= 0) ::usleep(10000);
      }
      const size_t prompts =
          Count(run.screen, "phrase for key ") + Count(run.screen, "Repeat it: ");
      if (prompts > answered && run.screen.ends_with(": ") && answered < answers.size()) {
        const std::string line = answers[answered++] + "\n";
        if (::write(master, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
          ADD_FAILURE() << "writing to the pseudo-terminal: " << std::strerror(errno);
        }
      }
    } else {
      ::usleep(10000);
    }
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    exited = w == pid;
  }
  if (master >= 0) {
    // What is still buffered on the terminal.
    struct pollfd p = {master, POLLIN, 0};
    char buf[4096];
    ssize_t n;
    while (::poll(&p, 1, 0) > 0 && (n = ::read(master, buf, sizeof buf)) > 0) {
      run.screen.append(buf, static_cast<size_t>(n));
    }
    struct termios t;
    run.echo_after = ::tcgetattr(master, &t) == 0 && (t.c_lflag & ECHO) != 0;
    ::close(master);
  }
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.term_signal = WTERMSIG(status);
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  return run;
}

// --- create and show ---------------------------------------------------------

TEST_F(KeyTest, CreateWritesAPrivateKeyFileThatShowDescribes) {
  const std::string path = Path("keys/sub/key.json");
  Json created = Create(path, "pw");
  ASSERT_TRUE(created.is_object());
  EXPECT_EQ(created["path"], path);
  EXPECT_EQ(ModeOf(path), 0600);
  EXPECT_EQ(ModeOf(Path("keys")), 0700);
  EXPECT_EQ(ModeOf(Path("keys/sub")), 0700);
  EXPECT_EQ(ListDir(Path("keys/sub")), std::vector<std::string>{"key.json"});  // no temp left

  const std::string fp = created["fingerprint"];
  EXPECT_TRUE(std::regex_match(fp, std::regex("([0-9a-f]{2}:){7}[0-9a-f]{2}"))) << fp;
  const std::string fp_hex = created["fingerprint_hex"];
  EXPECT_EQ(fp_hex.size(), 64u);
  EXPECT_EQ(fp_hex.substr(0, 2), fp.substr(0, 2));

  Json shown = Show(path);
  EXPECT_EQ(shown["fingerprint"], fp);
  EXPECT_EQ(shown["fingerprint_hex"], fp_hex);
  EXPECT_EQ(shown["kdf"]["name"], "scrypt");
  EXPECT_EQ(shown["kdf"]["n"], 1024);  // CAIRN_TEST_WEAK_KDF
  EXPECT_TRUE(std::regex_match(shown["created"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << shown.dump();
  EXPECT_GT(shown["created_unix"].get<int64_t>(), 1700000000);

  // The file is the documented JSON.
  Json file = ParseJson(ReadFile(path));
  EXPECT_EQ(file["format"], "cairn-key");
  EXPECT_EQ(file["version"], 1);
  EXPECT_EQ(file["fingerprint"], fp_hex);

  RunResult text = Key({"show", path});
  ASSERT_EQ(text.exit_code, kExitOk) << text.Describe();
  EXPECT_NE(text.out.find(fp), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(fp_hex), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("scrypt N=1024 r=8 p=1"), std::string::npos) << text.out;
}

TEST_F(KeyTest, CreateWithoutJsonSaysWhereAndWhich) {
  RunResult r = Key({"create", Path("key.json")}, {"CAIRN_PASSPHRASE=pw"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.out.find("created key file " + Path("key.json")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(Show(Path("key.json"))["fingerprint"].get<std::string>()), std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("CAIRN_TEST_WEAK_KDF"), std::string::npos) << r.err;  // the warning
}

TEST_F(KeyTest, KeysAreRandom) {
  Json a = Create(Path("a.json"), "same");
  Json b = Create(Path("b.json"), "same");
  EXPECT_NE(a["fingerprint_hex"], b["fingerprint_hex"]);
}

TEST_F(KeyTest, Argon2idKeys) {
  Json created = Create(Path("key.json"), "pw", {"--kdf", "argon2id"});
  Json shown = Show(Path("key.json"));
  EXPECT_EQ(shown["kdf"]["name"], "argon2id");
  EXPECT_EQ(shown["kdf"]["t"], 1);
  EXPECT_EQ(shown["kdf"]["m_kib"], 256);
  EXPECT_EQ(shown["fingerprint"], created["fingerprint"]);
  // It unwraps: change-passphrase needs the key itself.
  RunResult r = Key({"change-passphrase", Path("key.json")},
                    {"CAIRN_PASSPHRASE=pw", "CAIRN_NEW_PASSPHRASE=pw2"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

TEST_F(KeyTest, UnknownKdfIsAUsageError) {
  RunResult r = Key({"create", Path("key.json"), "--kdf", "pbkdf2"}, {"CAIRN_PASSPHRASE=pw"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_NE(r.err.find("pbkdf2"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(Path("key.json")));
}

TEST_F(KeyTest, CreateDefaultPaths) {
  RunResult r = Key({"create", "--json"}, {"CAIRN_PASSPHRASE=pw"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["path"], Path("xdg/cairn/key.json"));
  EXPECT_EQ(ModeOf(Path("xdg/cairn/key.json")), 0600);
  EXPECT_EQ(ModeOf(Path("xdg/cairn")), 0700);
  // show finds it there too.
  RunResult shown = Key({"show", "--json"});
  ASSERT_EQ(shown.exit_code, kExitOk) << shown.Describe();
  EXPECT_EQ(ParseJson(shown.out)["fingerprint"], ParseJson(r.out)["fingerprint"]);

  ::unsetenv("XDG_CONFIG_HOME");
  r = Key({"create", "--json"}, {"CAIRN_PASSPHRASE=pw"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["path"], Path("home/.config/cairn/key.json"));
  EXPECT_EQ(ModeOf(Path("home/.config/cairn/key.json")), 0600);

  // CAIRN_KEYFILE names the key for every key verb.
  r = Key({"create", "--json"}, {"CAIRN_PASSPHRASE=pw", "CAIRN_KEYFILE=" + Path("env.json")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["path"], Path("env.json"));
}

TEST_F(KeyTest, CreateNeverOverwrites) {
  const std::string path = Path("key.json");
  Create(path, "pw");
  const std::string before = ReadFile(path);
  RunResult r = Key({"create", path}, {"CAIRN_PASSPHRASE=other"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find(path + " already exists"), std::string::npos) << r.err;
  EXPECT_EQ(ReadFile(path), before);
}

TEST_F(KeyTest, CreateRefusesAnEmptyPassphrase) {
  WriteFile(Path("pass"), "\n");
  RunResult r = Key({"create", Path("key.json"), "--passphrase-file", Path("pass")});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find("empty passphrase"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(Path("key.json")));
}

TEST_F(KeyTest, PassphraseFileLosesOneTrailingNewline) {
  WriteFile(Path("pass"), "secret words\n");
  RunResult r = Key({"create", Path("key.json"), "--passphrase-file", Path("pass")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  // The same passphrase from the environment, without the newline, opens it.
  r = Key({"change-passphrase", Path("key.json")},
          {"CAIRN_PASSPHRASE=secret words", "CAIRN_NEW_PASSPHRASE=x"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  // CAIRN_PASSPHRASE_FILE works as --passphrase-file does.
  WriteFile(Path("pass2"), "x\n");
  r = Key({"change-passphrase", Path("key.json")},
          {"CAIRN_PASSPHRASE_FILE=" + Path("pass2"), "CAIRN_NEW_PASSPHRASE=y"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

TEST_F(KeyTest, MissingPassphraseWithoutTerminalSaysHowToGiveIt) {
  TtyRun r = RunInSession({"key", "create", Path("key.json")}, /*terminal=*/false);
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("no passphrase for the new key file " + Path("key.json") +
                       " and no terminal to ask on"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("CAIRN_PASSPHRASE"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--passphrase-file"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(Path("key.json")));

  Create(Path("key.json"), "pw");
  r = RunInSession({"key", "change-passphrase", Path("key.json")}, /*terminal=*/false);
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("no passphrase for key file " + Path("key.json")), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("CAIRN_PASSPHRASE"), std::string::npos) << r.err;
  // The old passphrase given, the new one missing: named as such.
  r = RunInSession({"key", "change-passphrase", Path("key.json")}, /*terminal=*/false, {},
                   {"CAIRN_PASSPHRASE=pw"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("CAIRN_NEW_PASSPHRASE"), std::string::npos) << r.err;
}

// --- the terminal ---------------------------------------------------------------

TEST_F(KeyTest, CreatePromptsTwiceOnTheTerminalWithoutEcho) {
  const std::string path = Path("key.json");
  TtyRun r = RunInSession({"key", "create", path}, /*terminal=*/true, {"tty secret", "tty secret"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.screen.find("New passphrase for key " + path + ": "), std::string::npos) << r.screen;
  EXPECT_NE(r.screen.find("Repeat it: "), std::string::npos) << r.screen;
  EXPECT_EQ(r.screen.find("tty secret"), std::string::npos) << "echoed: " << r.screen;
  EXPECT_EQ(ModeOf(path), 0600);
  // The typed passphrase is the one that opens it.
  RunResult c = Key({"change-passphrase", path},
                    {"CAIRN_PASSPHRASE=tty secret", "CAIRN_NEW_PASSPHRASE=next"});
  EXPECT_EQ(c.exit_code, kExitOk) << c.Describe();
}

TEST_F(KeyTest, CreateRefusesTwoDifferentAnswers) {
  TtyRun r = RunInSession({"key", "create", Path("key.json")}, /*terminal=*/true, {"one", "two"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_NE(r.err.find("differ"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(Path("key.json")));
}

TEST_F(KeyTest, ChangePassphraseOnTheTerminal) {
  const std::string path = Path("key.json");
  Create(path, "old");
  TtyRun r =
      RunInSession({"key", "change-passphrase", path}, /*terminal=*/true, {"old", "new", "new"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.screen.find("Passphrase for key " + path + ": "), std::string::npos) << r.screen;
  EXPECT_NE(r.screen.find("New passphrase for key " + path + ": "), std::string::npos) << r.screen;
  RunResult c =
      Key({"change-passphrase", path}, {"CAIRN_PASSPHRASE=new", "CAIRN_NEW_PASSPHRASE=x"});
  EXPECT_EQ(c.exit_code, kExitOk) << c.Describe();
}

TEST_F(KeyTest, InterruptedPromptRestoresEcho) {
  const std::string path = Path("key.json");
  Create(path, "pw");
  // ^C (the terminal's VINTR) at the prompt: cairn dies of SIGINT, but puts
  // the terminal's echo back first.
  TtyRun r = RunInSession({"key", "change-passphrase", path}, /*terminal=*/true, {"\x03"});
  EXPECT_EQ(r.term_signal, SIGINT) << r.Describe();
  EXPECT_NE(r.screen.find("Passphrase for key"), std::string::npos) << r.screen;
  EXPECT_TRUE(r.echo_after) << "the terminal was left without echo";
}

// --- change-passphrase, wrong passphrases -------------------------------------

TEST_F(KeyTest, ChangePassphraseKeepsTheKeyAndChangesTheSalt) {
  const std::string path = Path("key.json");
  Json created = Create(path, "first");
  const Json before = ParseJson(ReadFile(path));
  RunResult r = Key({"change-passphrase", path, "--json"},
                    {"CAIRN_PASSPHRASE=first", "CAIRN_NEW_PASSPHRASE=second"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["fingerprint"], created["fingerprint"]);
  const Json after = ParseJson(ReadFile(path));
  EXPECT_EQ(after["fingerprint"], before["fingerprint"]);
  EXPECT_EQ(after["created_unix"], before["created_unix"]);
  EXPECT_NE(after["kdf"]["salt"], before["kdf"]["salt"]);
  EXPECT_NE(after["wrapped_key"], before["wrapped_key"]);
  EXPECT_EQ(ModeOf(path), 0600);
  EXPECT_EQ(ListDir(tmp_.path()), std::vector<std::string>{"key.json"});

  // The old passphrase no longer opens it; the new one does.
  r = Key({"change-passphrase", path}, {"CAIRN_PASSPHRASE=first", "CAIRN_NEW_PASSPHRASE=x"});
  EXPECT_EQ(r.exit_code, kExitWrongKey) << r.Describe();
  WriteFile(Path("old"), "second\n");
  WriteFile(Path("new"), "third\n");
  r = Key({"change-passphrase", path, "--passphrase-file", Path("old"), "--new-passphrase-file",
           Path("new")});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.out.find(created["fingerprint"].get<std::string>()), std::string::npos) << r.out;
}

TEST_F(KeyTest, ChangePassphraseCanSwitchTheKdf) {
  const std::string path = Path("key.json");
  Json created = Create(path, "pw");
  RunResult r = Key({"change-passphrase", path, "--kdf", "argon2id"},
                    {"CAIRN_PASSPHRASE=pw", "CAIRN_NEW_PASSPHRASE=pw"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  Json shown = Show(path);
  EXPECT_EQ(shown["kdf"]["name"], "argon2id");
  EXPECT_EQ(shown["fingerprint"], created["fingerprint"]);
}

TEST_F(KeyTest, WrongPassphraseIsRefusedAndChangesNothing) {
  const std::string path = Path("key.json");
  Create(path, "right");
  const std::string before = ReadFile(path);
  RunResult r =
      Key({"change-passphrase", path}, {"CAIRN_PASSPHRASE=wrong", "CAIRN_NEW_PASSPHRASE=new"});
  EXPECT_EQ(r.exit_code, kExitWrongKey) << r.Describe();
  EXPECT_NE(r.err.find("wrong passphrase for key file " + path), std::string::npos) << r.err;
  EXPECT_EQ(ReadFile(path), before);
}

TEST_F(KeyTest, UnsafePermissionsAreRefusedLikeSsh) {
  const std::string path = Path("key.json");
  Create(path, "pw");
  const std::string before = ReadFile(path);
  for (int mode : {0644, 0640, 0604, 0660, 0602}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    RunResult r =
        Key({"change-passphrase", path}, {"CAIRN_PASSPHRASE=pw", "CAIRN_NEW_PASSPHRASE=new"});
    EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", mode);
    EXPECT_NE(r.err.find("key file " + path + " has unsafe permissions " + octal +
                         ": run chmod 600 " + path),
              std::string::npos)
        << r.err;
    EXPECT_EQ(ReadFile(path), before);
    // show reads it (nothing secret is shown) but warns.
    RunResult s = Key({"show", path});
    EXPECT_EQ(s.exit_code, kExitOk) << s.Describe();
    EXPECT_NE(s.err.find("unsafe permissions"), std::string::npos) << s.err;
  }
  ASSERT_EQ(::chmod(path.c_str(), 0400), 0);  // read-only for the owner is fine
  RunResult r =
      Key({"change-passphrase", path}, {"CAIRN_PASSPHRASE=pw", "CAIRN_NEW_PASSPHRASE=new"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(ModeOf(path), 0600);
}

TEST_F(KeyTest, MissingKeyFileIsNamed) {
  const std::string path = Path("nope/key.json");
  for (std::string verb : {"show", "export", "change-passphrase"}) {
    RunResult r = Key({verb, path}, {"CAIRN_PASSPHRASE=pw", "CAIRN_NEW_PASSPHRASE=x"});
    EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
    EXPECT_NE(r.err.find("key file " + path + " does not exist"), std::string::npos) << r.err;
  }
}

TEST_F(KeyTest, DamagedKeyFileIsCorruption) {
  const std::string path = Path("key.json");
  Create(path, "pw");
  const std::string text = ReadFile(path);
  WriteFile(path, text.substr(0, text.size() / 2));
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  for (std::string verb : {"show", "export", "change-passphrase"}) {
    RunResult r = Key({verb, path}, {"CAIRN_PASSPHRASE=pw", "CAIRN_NEW_PASSPHRASE=x"});
    EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
    EXPECT_NE(r.err.find(path + ": malformed key file"), std::string::npos) << r.err;
  }
  // An altered fingerprint is found once the key is unwrapped.
  Json j = ParseJson(text);
  std::string fp = j["fingerprint"];
  fp[0] = fp[0] == '0' ? '1' : '0';
  j["fingerprint"] = fp;
  WriteFile(path, j.dump());
  RunResult r = Key({"change-passphrase", path}, {"CAIRN_PASSPHRASE=pw", "CAIRN_NEW_PASSPHRASE=x"});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;
}

// --- export and import ---------------------------------------------------------

TEST_F(KeyTest, PaperExportHasEverythingToRestoreTheKey) {
  const std::string path = Path("key.json");
  Json created = Create(path, "pw");
  RunResult r = Key({"export", "--paper", path});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  const std::string& paper = r.out;
  EXPECT_NE(paper.find(created["fingerprint"].get<std::string>()), std::string::npos);
  EXPECT_NE(paper.find(created["fingerprint_hex"].get<std::string>()), std::string::npos);
  EXPECT_NE(paper.find(Show(path)["created"].get<std::string>()), std::string::npos);
  EXPECT_NE(paper.find("still protected by its passphrase"), std::string::npos) << paper;
  EXPECT_EQ(BetweenMarkers(paper), ReadFile(path));  // verbatim

  // The QR code: lines of equal width after the END marker, starting and
  // ending with a blank quiet zone, the finder patterns' top edges on the
  // first module row ("█▀▀▀▀▀█" at both ends, behind 4 blank modules).
  std::vector<std::string> qr;
  size_t pos = paper.find("-----END CAIRN KEY-----\n\n");
  ASSERT_NE(pos, std::string::npos);
  std::string rest = paper.substr(pos + std::strlen("-----END CAIRN KEY-----\n\n"));
  for (size_t nl; (nl = rest.find('\n')) != std::string::npos; rest.erase(0, nl + 1)) {
    qr.push_back(rest.substr(0, nl));
  }
  ASSERT_GE(qr.size(), 15u) << paper;
  const std::string finder = "\u2588\u2580\u2580\u2580\u2580\u2580\u2588";
  EXPECT_EQ(qr[2].substr(0, 4 + finder.size()), "    " + finder) << qr[2];
  EXPECT_TRUE(qr[2].ends_with(finder + "    ")) << qr[2];
  EXPECT_EQ(qr[0].find_first_not_of(' '), std::string::npos);
  EXPECT_EQ(qr.back().find_first_not_of(' '), std::string::npos);
  for (const auto& line : qr) EXPECT_EQ(Columns(line), Columns(qr[2])) << line;
  EXPECT_EQ(Columns(qr[0]), qr[0].size());
}

TEST_F(KeyTest, ExportWithoutPaperPrintsTheKeyFile) {
  Create(Path("key.json"), "pw");
  RunResult r = Key({"export", Path("key.json")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(r.out, ReadFile(Path("key.json")));
}

TEST_F(KeyTest, ImportPaperRestoresAWorkingKey) {
  const std::string path = Path("key.json");
  Json created = Create(path, "pw");
  RunResult paper = Key({"export", "--paper", path});
  ASSERT_EQ(paper.exit_code, kExitOk) << paper.Describe();
  WriteFile(Path("paper.txt"), paper.out);

  const std::string restored = Path("restored/key.json");
  RunResult r = Key({"import", Path("paper.txt"), restored, "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["fingerprint"], created["fingerprint"]);
  EXPECT_EQ(ReadFile(restored), ReadFile(path));
  EXPECT_EQ(ModeOf(restored), 0600);
  EXPECT_EQ(ModeOf(Path("restored")), 0700);
  r = Key({"change-passphrase", restored}, {"CAIRN_PASSPHRASE=pw", "CAIRN_NEW_PASSPHRASE=x"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();

  // Never over an existing file.
  r = Key({"import", Path("paper.txt"), restored});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
}

TEST_F(KeyTest, ImportAKeyFileAndRetypedPaper) {
  const std::string path = Path("key.json");
  Json created = Create(path, "pw");
  RunResult r = Key({"import", path, Path("copy.json")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.out.find(created["fingerprint"].get<std::string>()), std::string::npos) << r.out;
  EXPECT_EQ(ReadFile(Path("copy.json")), ReadFile(path));

  // Retyped by hand: long lines broken, indentation lost, text around it.
  std::string text = ReadFile(path);
  std::string retyped = "my key, typed from the sheet\n-----BEGIN CAIRN KEY-----\n";
  for (size_t i = 0; i < text.size(); i += 50) retyped += text.substr(i, 50) + "\n";
  retyped += "-----END CAIRN KEY-----\nthe rest of the page\n";
  WriteFile(Path("typed.txt"), retyped);
  r = Key({"import", Path("typed.txt"), Path("typed.json"), "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["fingerprint"], created["fingerprint"]);
  r = Key({"change-passphrase", Path("typed.json")},
          {"CAIRN_PASSPHRASE=pw", "CAIRN_NEW_PASSPHRASE=x"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

TEST_F(KeyTest, ImportRefusesWhatIsNotAKey) {
  WriteFile(Path("junk.txt"), "hello\n");
  RunResult r = Key({"import", Path("junk.txt"), Path("key.json")});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE(r.err.find(Path("junk.txt")), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(Path("key.json")));

  WriteFile(Path("half.txt"), "-----BEGIN CAIRN KEY-----\n{\"format\":\"cairn-key\"\n");
  r = Key({"import", Path("half.txt"), Path("key.json")});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE(r.err.find("-----END CAIRN KEY-----"), std::string::npos) << r.err;

  r = Key({"import", Path("absent.txt"), Path("key.json")});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find(Path("absent.txt")), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(Path("key.json")));
}

// --- the key of other commands (LoadKey) -----------------------------------------

// What every command that takes --keyfile does before any work, seen
// through `cairn backup`.
class KeyOptionsTest : public KeyTest {
 protected:
  void SetUp() override {
    KeyTest::SetUp();
    RunResult r = RunCairn({"init", Path("store")});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    ImageWriter(Path("disk.raw"), 64 * kKiB, 1).Random(0, 64 * kKiB);
    Create(Path("key.json"), "pw");
  }
  RunResult Backup(std::vector<std::string> args, std::vector<std::string> env) const {
    std::vector<std::string> all = {"backup", "-r",     Path("store"),    "--id",
                                    "vm/1",   "--time", SnapTime(time_++)};
    all.insert(all.end(), args.begin(), args.end());
    all.push_back("disk0.img=" + Path("disk.raw"));
    RunOptions options;
    options.env = std::move(env);
    return RunCairn(all, options);
  }
  mutable int time_ = 0;
};

TEST_F(KeyOptionsTest, TheRightPassphraseFromAnySource) {
  const std::string key = Path("key.json");
  RunResult r = Backup({"--keyfile", key}, {"CAIRN_PASSPHRASE=pw"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  WriteFile(Path("pass"), "pw\n");
  r = Backup({"--keyfile", key, "--passphrase-file", Path("pass")}, {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  r = Backup({}, {"CAIRN_KEYFILE=" + key, "CAIRN_PASSPHRASE_FILE=" + Path("pass")});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  // --passphrase-file comes before CAIRN_PASSPHRASE.
  r = Backup({"--keyfile", key, "--passphrase-file", Path("pass")}, {"CAIRN_PASSPHRASE=wrong"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

TEST_F(KeyOptionsTest, AsksOnTheTerminalOrSaysHowToGiveIt) {
  const std::string key = Path("key.json");
  std::vector<std::string> args = {
      "backup", "-r",        Path("store"), "--id",
      "vm/1",   "--keyfile", key,           "disk0.img=" + Path("disk.raw")};
  TtyRun t = RunInSession(args, /*terminal=*/true, {"pw"});
  EXPECT_EQ(t.exit_code, kExitOk) << t.Describe();
  EXPECT_NE(t.screen.find("Passphrase for key " + key + ": "), std::string::npos) << t.screen;
  EXPECT_EQ(Count(t.screen, "phrase for key"), 1u) << t.screen;  // asked once

  t = RunInSession(args, /*terminal=*/false);
  EXPECT_EQ(t.exit_code, kExitFailure) << t.Describe();
  EXPECT_NE(t.err.find("no passphrase for key file " + key +
                       " and no terminal to ask on: set "
                       "CAIRN_PASSPHRASE, pass --passphrase-file FILE or --password-command CMD, "
                       "or set CAIRN_PASSPHRASE_FILE or CAIRN_PASSWORD_COMMAND"),
            std::string::npos)
      << t.err;
}

TEST_F(KeyOptionsTest, RefusalsSayWhichFileAndWhy) {
  const std::string key = Path("key.json");
  RunResult r = Backup({"--keyfile", key}, {"CAIRN_PASSPHRASE=wrong"});
  EXPECT_EQ(r.exit_code, kExitWrongKey) << r.Describe();
  EXPECT_NE(r.err.find("wrong passphrase for key file " + key), std::string::npos) << r.err;

  r = Backup({"--keyfile", Path("absent.json")}, {"CAIRN_PASSPHRASE=pw"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("key file " + Path("absent.json") + " does not exist"), std::string::npos)
      << r.err;

  ASSERT_EQ(::chmod(key.c_str(), 0640), 0);
  r = Backup({}, {"CAIRN_KEYFILE=" + key, "CAIRN_PASSPHRASE=pw"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("has unsafe permissions 0640: run chmod 600 " + key), std::string::npos)
      << r.err;
  ASSERT_EQ(::chmod(key.c_str(), 0600), 0);

  const std::string text = ReadFile(key);
  WriteFile(Path("cut.json"), text.substr(0, 100));
  ASSERT_EQ(::chmod(Path("cut.json").c_str(), 0600), 0);
  r = Backup({"--keyfile", Path("cut.json")}, {"CAIRN_PASSPHRASE=pw"});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE(r.err.find(Path("cut.json") + ": malformed key file"), std::string::npos) << r.err;

  // A passphrase without a key: not silently unencrypted.
  r = Backup({"--passphrase-file", Path("pass")}, {});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_NE(r.err.find("no key file"), std::string::npos) << r.err;

  r = Backup({"--keyfile", key, "--passphrase-file", Path("absent-pass")}, {});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find(Path("absent-pass")), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(Path("store/vm/1"))) << "a refused backup left a group";
}

}  // namespace
}  // namespace cairn::cli_test
