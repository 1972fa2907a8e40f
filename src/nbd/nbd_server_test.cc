// NbdServer against the real NBD clients Debian ships (libnbd-bin's nbdinfo
// and nbdcopy, qemu-utils' qemu-img); each test skips, saying why, when
// its tool is not installed (scripts/setup-deps.sh installs them).
#include "nbd/nbd_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nbd/nbd_test_util.h"
#include "tests/unit_test_util.h"

namespace cairn::nbd {
namespace {

using test_util::RandomBytes;

bool HaveTool(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// Runs a shell command; returns its exit code and stdout.
std::pair<int, std::string> Shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = ::pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

class NbdServerTest : public ::testing::Test {
 protected:
  void Serve(bool writable, const std::string& listen) {
    device_ = std::make_unique<MemoryDevice>(RandomBytes(kSize, 11), writable);
    NbdServerOptions o;
    o.export_info.name = "disk0.img";
    o.export_info.description = "a test export";
    auto s = NbdServer::Listen(listen, *device_, o);
    CAIRN_ASSERT_OK(s);
    server_ = std::move(*s);
  }
  std::string Socket() const { return tmp_.Join("nbd.sock"); }

  static constexpr size_t kSize = (8u << 20) + 4096;
  test_util::TempDir tmp_;
  std::unique_ptr<MemoryDevice> device_;
  std::unique_ptr<NbdServer> server_;
};

TEST_F(NbdServerTest, NbdinfoSeesSizeNameAndReadOnly) {
  if (!HaveTool("nbdinfo")) GTEST_SKIP() << "nbdinfo not installed (libnbd-bin)";
  Serve(false, "unix:" + Socket());
  auto [rc, out] = Shell("nbdinfo --json '" + server_->Uri() + "'");
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  const auto& e = j["exports"][0];
  EXPECT_EQ(e["export-size"], kSize);
  EXPECT_EQ(e["is_read_only"], true);
  EXPECT_EQ(e["can_multi_conn"], true);
  EXPECT_EQ(e["export-name"], "disk0.img");
  EXPECT_EQ(e["description"], "a test export");
  EXPECT_EQ(e["block_size_preferred"], 4096);
  auto [rc2, list] = Shell("nbdinfo --list --json 'nbd+unix://?socket=" + Socket() + "'");
  EXPECT_EQ(rc2, 0) << list;
  EXPECT_NE(list.find("disk0.img"), std::string::npos) << list;
}

TEST_F(NbdServerTest, NbdcopyOverTcpCopiesEveryByteOnSeveralConnections) {
  if (!HaveTool("nbdcopy")) GTEST_SKIP() << "nbdcopy not installed (libnbd-bin)";
  Serve(false, "127.0.0.1:0");
  const std::string out = tmp_.Join("copy.img");
  auto [rc, text] = Shell("nbdcopy --connections=4 --requests=16 '" + server_->Uri() + "' " + out);
  ASSERT_EQ(rc, 0) << text;
  EXPECT_EQ(test_util::ReadFileOrFail(out), device_->data());
  EXPECT_GE(server_->stats().connections, 2u);
}

TEST_F(NbdServerTest, QemuImgComparesEqualAndFindsADifference) {
  if (!HaveTool("qemu-img")) GTEST_SKIP() << "qemu-img not installed (qemu-utils)";
  Serve(false, "unix:" + Socket());
  const std::string file = tmp_.Join("same.img");
  test_util::WriteFileOrFail(file, device_->data());
  auto [rc, text] = Shell("qemu-img compare -f raw -F raw '" + server_->Uri() + "' " + file);
  EXPECT_EQ(rc, 0) << text;
  Bytes changed = device_->data();
  changed[kSize - 100] ^= 1;
  test_util::WriteFileOrFail(file, changed);
  auto [rc2, text2] = Shell("qemu-img compare -f raw -F raw '" + server_->Uri() + "' " + file);
  EXPECT_EQ(rc2, 1) << text2;
  // qemu-img names the 512-byte sector where the bytes differ.
  EXPECT_NE(text2.find("mismatch at offset " + std::to_string((kSize - 100) / 512 * 512)),
            std::string::npos) << text2;
}

TEST_F(NbdServerTest, QemuImgReadsAnExportWhoseSizeIsNotAMultipleOf512) {
  // QEMU pads the last read to 512 bytes: with simple replies it waited
  // for the padding forever; structured replies say how much came.
  if (!HaveTool("qemu-img")) GTEST_SKIP() << "qemu-img not installed (qemu-utils)";
  device_ = std::make_unique<MemoryDevice>(RandomBytes(kSize + 123, 13), false);
  NbdServerOptions o;
  o.export_info.name = "odd.img";
  auto s = NbdServer::Listen("unix:" + Socket(), *device_, o);
  CAIRN_ASSERT_OK(s);
  server_ = std::move(*s);
  const std::string file = tmp_.Join("odd.img");
  test_util::WriteFileOrFail(file, device_->data());
  auto [rc, text] = Shell("timeout 60 qemu-img compare -f raw -F raw '" + server_->Uri() + "' " + file);
  EXPECT_EQ(rc, 0) << text;
}

TEST_F(NbdServerTest, NbdcopyWritesAWritableExport) {
  if (!HaveTool("nbdcopy")) GTEST_SKIP() << "nbdcopy not installed (libnbd-bin)";
  Serve(true, "unix:" + Socket());
  const std::string in = tmp_.Join("in.img");
  Bytes fresh = RandomBytes(kSize, 12);
  test_util::WriteFileOrFail(in, fresh);
  auto [rc, text] = Shell("nbdcopy --flush " + in + " '" + server_->Uri() + "'");
  ASSERT_EQ(rc, 0) << text;
  EXPECT_EQ(device_->data(), fresh);
  EXPECT_GE(device_->flushes(), 1);  // --flush: NBD_CMD_FLUSH at the end
}

TEST_F(NbdServerTest, AStaleSocketIsReplacedAndALiveOneRefused) {
  Serve(false, "unix:" + Socket());
  MemoryDevice other(Bytes(4096), false);
  auto second = NbdServer::Listen("unix:" + Socket(), other, {});
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists);
  // A socket file left behind (a server killed before it removed it).
  const std::string stale = tmp_.Join("stale.sock");
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", stale.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::close(fd);
  }
  auto third = NbdServer::Listen("unix:" + stale, other, {});
  CAIRN_EXPECT_OK(third);
}

TEST_F(NbdServerTest, StopEndsConnectedClients) {
  Serve(false, "127.0.0.1:0");
  const std::string& addr = server_->address();
  const uint16_t port = static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)));
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  uint8_t hello[18];
  ASSERT_EQ(::recv(fd, hello, sizeof hello, MSG_WAITALL), 18);
  server_->Stop();  // the client never finished its handshake: must not hang
  uint8_t b;
  EXPECT_EQ(::recv(fd, &b, 1, 0), 0);  // closed
  ::close(fd);
}

}  // namespace
}  // namespace cairn::nbd
