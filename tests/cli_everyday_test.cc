// The everyday options every command takes and what scripts act on
// (README "Exit codes", cairn(1)):
//   - exit codes 10 (no repository), 11 (locked by another operation),
//     12 (wrong passphrase or key), beside 0/1/2/3;
//   - -q prints nothing but errors, -v adds debug lines, before or after
//     the subcommand;
//   - --password-command and CAIRN_PASSWORD_COMMAND give the passphrase;
//   - the client config file: -r NAME, a default repository, a private
//     file for tokens.
// Lean on purpose: a few tiny backups, no server.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "cli_fixture.h"
#include "scoped_env.h"

namespace cairn::cli_test {
namespace {

class EverydayTest : public CliTest {
 protected:
  static constexpr const char* kEnvNames[] = {
      "CAIRN_PASSPHRASE", "CAIRN_PASSPHRASE_FILE", "CAIRN_PASSWORD_COMMAND", "CAIRN_KEYFILE",
      "CAIRN_CONFIG",     "CAIRN_TEST_WEAK_KDF",   "CAIRN_LIMIT_UPLOAD",     "CAIRN_LIMIT_DOWNLOAD"};

  void SetUp() override {
    env_.Scrub(kEnvNames);
    ::setenv("CAIRN_TEST_WEAK_KDF", "1", 1);
    CliTest::SetUp();
    file_ = Path("small.img");
    ImageWriter(file_, 64 * kKiB, 3).Random(0, 64 * kKiB);
  }
  void TearDown() override {
    env_.Restore();
  }

  // A key file protected by `pass`.
  std::string CreateKey(const std::string& pass) {
    const std::string key = Path("key.json");
    RunOptions o;
    o.env = {"CAIRN_PASSPHRASE=" + pass};
    RunResult r = Cairn({"key", "create", key}, o);
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    return key;
  }

  std::string file_;
  ScopedEnv env_;
};

TEST_F(EverydayTest, AMissingRepositoryExits10) {
  for (const std::string& missing : {Path("nothing-here"), tmp_.path()}) {  // absent; not a store
    RunResult r = Cairn({"snapshots", "-r", missing});
    EXPECT_EQ(r.exit_code, kExitNoRepository) << r.Describe();
    r = Cairn({"backup", "-r", missing, "--id", "host/a", "d.img=" + file_});
    EXPECT_EQ(r.exit_code, kExitNoRepository) << r.Describe();
  }
  // A missing snapshot in a store that exists is a plain failure.
  RunResult r = OnStore("restore", {"host/a/latest", "d.img", Path("out.img")});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
}

TEST_F(EverydayTest, AGroupLockedByAnotherBackupExits11) {
  // Hold the group's lock as a running backup would.
  const std::string group_dir = store() + "/host/a";
  std::filesystem::create_directories(group_dir);
  int fd = ::open((group_dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  RunResult r = OnStore("backup", {"--id", "host/a", "d.img=" + file_});
  EXPECT_EQ(r.exit_code, kExitLocked) << r.Describe();
  EXPECT_NE(r.err.find("another backup of host/a is running"), std::string::npos) << r.err;
  ::close(fd);
  r = OnStore("backup", {"--id", "host/a", "d.img=" + file_});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

TEST_F(EverydayTest, AWrongPassphraseOrKeyExits12) {
  const std::string key = CreateKey("right");
  RunOptions wrong;
  wrong.env = {"CAIRN_PASSPHRASE=wrong"};
  RunResult r = OnStore("backup", {"--id", "host/a", "--keyfile", key, "d.img=" + file_}, wrong);
  EXPECT_EQ(r.exit_code, kExitWrongKey) << r.Describe();
  RunOptions right;
  right.env = {"CAIRN_PASSPHRASE=right"};
  r = OnStore("backup", {"--id", "host/a", "--keyfile", key, "--time", SnapTime(1), "d.img=" + file_},
              right);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  // The encrypted snapshot restored without its key.
  r = OnStore("restore", {Snap("host/a", 1), "d.img", Path("out.img")});
  EXPECT_EQ(r.exit_code, kExitWrongKey) << r.Describe();
  // Usage errors stay 2.
  EXPECT_EQ(OnStore("restore", {"--jobs", "many", Snap("host/a", 1), "d.img", Path("o")}).exit_code,
            kExitUsage);
}

TEST_F(EverydayTest, QuietPrintsNothingButErrorsAndVerboseSaysMore) {
  RunResult plain = OnStore("backup", {"--id", "host/a", "--time", SnapTime(1), "d.img=" + file_});
  ASSERT_EQ(plain.exit_code, kExitOk) << plain.Describe();
  EXPECT_NE(plain.out.find("finished"), std::string::npos) << plain.out;
  // -q after the subcommand, and before it.
  RunResult quiet =
      OnStore("backup", {"-q", "--id", "host/a", "--time", SnapTime(2), "d.img=" + file_});
  EXPECT_EQ(quiet.exit_code, kExitOk) << quiet.Describe();
  EXPECT_EQ(quiet.out, "");
  EXPECT_EQ(quiet.err, "");
  quiet = Cairn({"-q", "restore", "-r", store(), Snap("host/a", 2), "d.img", Path("out.img")});
  EXPECT_EQ(quiet.exit_code, kExitOk) << quiet.Describe();
  EXPECT_EQ(quiet.out + quiet.err, "");
  EXPECT_EQ(CompareFiles(file_, Path("out.img")), "");
  // What the user asked to see stays: a listing.
  quiet = OnStore("snapshots", {"-q"});
  EXPECT_NE(quiet.out.find(Snap("host/a", 2)), std::string::npos) << quiet.Describe();
  // An error is still said.
  quiet = Cairn({"-q", "snapshots", "-r", Path("nothing-here")});
  EXPECT_NE(quiet.err.find("does not exist"), std::string::npos) << quiet.Describe();
  // -v: debug lines on stderr; -vv is accepted.
  RunResult verbose = OnStore("snapshots", {"-v"});
  EXPECT_NE(verbose.err.find("cairn: debug: opening local datastore " + store()), std::string::npos)
      << verbose.Describe();
  EXPECT_EQ(plain.err.find("debug"), std::string::npos) << plain.err;
  EXPECT_EQ(OnStore("snapshots", {"-vv"}).exit_code, kExitOk);
  EXPECT_EQ(OnStore("snapshots", {"-q", "-v"}).exit_code, kExitUsage);
}

TEST_F(EverydayTest, APasswordCommandGivesThePassphrase) {
  const std::string key = CreateKey("s3cret pass");
  WriteFile(Path("pass.sh"), "#!/bin/sh\nprintf '%s\\n' 's3cret pass'\n");
  ::chmod(Path("pass.sh").c_str(), 0755);
  RunResult r = OnStore("backup", {"--id", "host/a", "--keyfile", key, "--time", SnapTime(1),
                                   "--password-command", Path("pass.sh"), "d.img=" + file_});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  // From the environment, on another command.
  RunOptions env;
  env.env = {"CAIRN_PASSWORD_COMMAND=echo 's3cret pass'"};
  r = OnStore("restore", {"--keyfile", key, Snap("host/a", 1), "d.img", Path("out.img")}, env);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(file_, Path("out.img")), "");
  // A command printing the wrong passphrase: 12; one that fails: said, exit 1.
  r = OnStore("verify", {"--keyfile", key, "--password-command", "echo nope"});
  EXPECT_EQ(r.exit_code, kExitWrongKey) << r.Describe();
  r = OnStore("verify", {"--keyfile", key, "--password-command", "exit 3"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("password command `exit 3` failed (exit 3)"), std::string::npos) << r.err;
}

TEST_F(EverydayTest, TheConfigFileNamesRepositories) {
  const std::string config = Path("config.toml");
  WriteFile(config, "[defaults]\nrepository = \"home\"\n\n[repository.home]\nurl = \"" + store() +
                        "\"\n\n[repository.gone]\nurl = \"" + Path("gone") + "\"\n");
  RunOptions o;
  o.env = {"CAIRN_CONFIG=" + config};
  RunResult r = Cairn({"backup", "-r", "home", "--id", "host/a", "--time", SnapTime(1),
                       "d.img=" + file_},
                      o);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  // The default repository, with neither -r nor CAIRN_REPO.
  r = Cairn({"snapshots"}, o);
  EXPECT_NE(r.out.find(Snap("host/a", 1)), std::string::npos) << r.Describe();
  EXPECT_EQ(Cairn({"snapshots", "-r", "gone"}, o).exit_code, kExitNoRepository);
  // A typo names the file and the key (exit 2); a token in a file others
  // may read is refused.
  WriteFile(config, "[repository.home]\nurl = \"" + store() + "\"\ntokn = \"x\"\n");
  r = Cairn({"snapshots", "-r", "home"}, o);
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_NE(r.err.find(config + ": \"repository.home.tokn\": unknown key"), std::string::npos) << r.err;
  WriteFile(config, "[repository.home]\nurl = \"" + store() + "\"\ntoken = \"a:b\"\n");
  ::chmod(config.c_str(), 0644);
  r = Cairn({"snapshots", "-r", "home"}, o);
  EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.Describe();
  EXPECT_NE(r.exit_code, kExitOk);
}

}  // namespace
}  // namespace cairn::cli_test
