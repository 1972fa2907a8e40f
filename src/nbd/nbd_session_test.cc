#include "nbd/nbd_session.h"

#include <sys/socket.h>

#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "nbd/nbd_protocol.h"
#include "nbd/nbd_test_util.h"
#include "tests/unit_test_util.h"

namespace cairn::nbd {
namespace {

using test_util::RandomBytes;

constexpr size_t kSize = 1u << 20;

// A server session on one end of a socketpair, a hand-driven client on the
// other.
class NbdSessionTest : public ::testing::Test {
 protected:
  void Start(bool writable = false, int workers = 2) {
    device_ = std::make_unique<MemoryDevice>(RandomBytes(kSize, 3), writable);
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    client_ = std::make_unique<SocketChannel>(fds[0]);
    server_ = std::make_unique<SocketChannel>(fds[1]);
    info_.name = "disk0.img";
    info_.description = "archive disk0.img of vm/1/T";
    info_.max_request = 256u << 10;
    thread_ = std::thread([this, workers] {
      Negotiated negotiated;
      auto go = Handshake(*server_, *device_, info_, &negotiated);
      handshake_ = go.status();
      if (go.ok() && *go) {
        SessionOptions o;
        o.workers = workers;
        transmission_ = Transmission(*server_, *device_, info_, negotiated, o, &stats_);
      }
      server_.reset();  // closes the server's end
    });
    uint8_t hello[18];
    ASSERT_TRUE(client_->ReadExact(hello).ok());
    EXPECT_EQ(GetBe64(hello), kMagic);
    EXPECT_EQ(GetBe64(hello + 8), kOptMagic);
    EXPECT_EQ(GetBe16(hello + 16), kFlagFixedNewstyle | kFlagNoZeroes);
  }
  void TearDown() override {
    client_.reset();
    if (thread_.joinable()) thread_.join();
  }

  void SendFlags(uint32_t flags = kClientFixedNewstyle | kClientNoZeroes) {
    uint8_t b[4];
    PutBe32(b, flags);
    ASSERT_TRUE(client_->WriteAll(b).ok());
  }
  void SendOption(uint32_t option, ByteSpan data = {}) {
    Bytes b(16 + data.size());
    PutBe64(b.data(), kOptMagic);
    PutBe32(b.data() + 8, option);
    PutBe32(b.data() + 12, static_cast<uint32_t>(data.size()));
    std::copy(data.begin(), data.end(), b.begin() + 16);
    ASSERT_TRUE(client_->WriteAll(b).ok());
  }
  static Bytes InfoData(const std::string& name, std::vector<uint16_t> infos) {
    Bytes d(4 + name.size() + 2 + 2 * infos.size());
    PutBe32(d.data(), static_cast<uint32_t>(name.size()));
    std::memcpy(d.data() + 4, name.data(), name.size());
    PutBe16(d.data() + 4 + name.size(), static_cast<uint16_t>(infos.size()));
    for (size_t i = 0; i < infos.size(); ++i) PutBe16(d.data() + 6 + name.size() + 2 * i, infos[i]);
    return d;
  }
  struct Reply {
    uint32_t option = 0, type = 0;
    Bytes data;
  };
  Reply ReadReply() {
    Reply r;
    uint8_t h[20];
    EXPECT_TRUE(client_->ReadExact(h).ok());
    EXPECT_EQ(GetBe64(h), kRepMagic);
    r.option = GetBe32(h + 8);
    r.type = GetBe32(h + 12);
    r.data.resize(GetBe32(h + 16));
    EXPECT_TRUE(client_->ReadExact(r.data).ok());
    return r;
  }
  // GO with the empty name; returns the transmission flags.
  uint16_t Go() {
    SendFlags();
    SendOption(kOptGo, InfoData("", {}));
    Reply info = ReadReply();
    EXPECT_EQ(info.type, kRepInfo);
    EXPECT_EQ(GetBe16(info.data.data()), kInfoExport);
    EXPECT_EQ(GetBe64(info.data.data() + 2), kSize);
    EXPECT_EQ(ReadReply().type, kRepAck);
    return GetBe16(info.data.data() + 10);
  }
  void SendRequest(uint16_t type, uint64_t handle, uint64_t offset, uint32_t length,
                   ByteSpan payload = {}, uint16_t flags = 0) {
    uint8_t h[kRequestHeaderSize];
    PutBe32(h, kRequestMagic);
    PutBe16(h + 4, flags);
    PutBe16(h + 6, type);
    PutBe64(h + 8, handle);
    PutBe64(h + 16, offset);
    PutBe32(h + 24, length);
    ASSERT_TRUE(client_->WriteAll(h).ok());
    if (!payload.empty()) {
      ASSERT_TRUE(client_->WriteAll(payload).ok());
    }
  }
  // A simple reply: (error, handle), and `data_len` bytes when error is 0.
  std::pair<uint32_t, uint64_t> ReadSimple(Bytes* data = nullptr, size_t data_len = 0) {
    uint8_t h[kSimpleReplySize];
    EXPECT_TRUE(client_->ReadExact(h).ok());
    EXPECT_EQ(GetBe32(h), kSimpleReplyMagic);
    uint32_t error = GetBe32(h + 4);
    if (error == 0 && data != nullptr) {
      data->resize(data_len);
      EXPECT_TRUE(client_->ReadExact(*data).ok());
    }
    return {error, GetBe64(h + 8)};
  }

  std::unique_ptr<MemoryDevice> device_;
  std::unique_ptr<SocketChannel> client_, server_;
  ExportInfo info_;
  std::thread thread_;
  Status handshake_, transmission_;
  SessionStats stats_;
};

TEST_F(NbdSessionTest, GoThenReadsServeTheDevice) {
  Start();
  uint16_t flags = Go();
  EXPECT_TRUE(flags & kTransHasFlags);
  EXPECT_TRUE(flags & kTransReadOnly);
  EXPECT_TRUE(flags & kTransCanMultiConn);
  EXPECT_FALSE(flags & kTransSendWriteZeroes);
  Bytes data;
  SendRequest(kCmdRead, 7, 1000, 5000);
  auto [error, handle] = ReadSimple(&data, 5000);
  EXPECT_EQ(error, 0u);
  EXPECT_EQ(handle, 7u);
  Bytes all = device_->data();
  EXPECT_TRUE(std::equal(data.begin(), data.end(), all.begin() + 1000));
  SendRequest(kCmdDisc, 8, 0, 0);
  thread_.join();
  CAIRN_EXPECT_OK(handshake_);
  CAIRN_EXPECT_OK(transmission_);
  EXPECT_EQ(stats_.bytes_read, 5000u);
}

TEST_F(NbdSessionTest, InfoListsNameDescriptionAndBlockSizes) {
  Start();
  SendFlags();
  SendOption(kOptList);
  Reply server = ReadReply();
  ASSERT_EQ(server.type, kRepServer);
  EXPECT_EQ(std::string(server.data.begin() + 4, server.data.end()), "disk0.img");
  EXPECT_EQ(ReadReply().type, kRepAck);
  SendOption(kOptInfo, InfoData("disk0.img", {kInfoName, kInfoDescription, kInfoBlockSize}));
  std::set<uint16_t> got;
  for (Reply r = ReadReply(); r.type == kRepInfo; r = ReadReply()) {
    uint16_t type = GetBe16(r.data.data());
    got.insert(type);
    if (type == kInfoDescription) {
      EXPECT_EQ(std::string(r.data.begin() + 2, r.data.end()), info_.description);
    }
    if (type == kInfoBlockSize) {
      EXPECT_EQ(GetBe32(r.data.data() + 2), 1u);
      EXPECT_EQ(GetBe32(r.data.data() + 10), info_.max_request);
    }
  }
  EXPECT_EQ(got, (std::set<uint16_t>{kInfoExport, kInfoName, kInfoDescription, kInfoBlockSize}));
  // INFO does not start transmission: GO still works.
  SendOption(kOptGo, InfoData("disk0.img", {}));
  EXPECT_EQ(ReadReply().type, kRepInfo);
  EXPECT_EQ(ReadReply().type, kRepAck);
}

TEST_F(NbdSessionTest, RefusalsAreRepliesAndTheHandshakeGoesOn) {
  Start();
  SendFlags();
  SendOption(kOptGo, InfoData("other.img", {}));
  Reply unknown = ReadReply();
  EXPECT_EQ(unknown.type, kRepErrUnknown);
  EXPECT_NE(std::string(unknown.data.begin(), unknown.data.end()).find("disk0.img"),
            std::string::npos);
  SendOption(kOptStartTls);
  EXPECT_EQ(ReadReply().type, kRepErrPolicy);
  SendOption(99, AsBytes("junk"));
  EXPECT_EQ(ReadReply().type, kRepErrUnsup);
  SendOption(kOptGo, AsBytes("bad"));  // too short to be GO's data
  EXPECT_EQ(ReadReply().type, kRepErrInvalid);
  SendOption(kOptList, AsBytes("x"));
  EXPECT_EQ(ReadReply().type, kRepErrInvalid);
  SendOption(kOptAbort);
  EXPECT_EQ(ReadReply().type, kRepAck);
  thread_.join();
  CAIRN_EXPECT_OK(handshake_);
}

TEST_F(NbdSessionTest, ExportNameWithAndWithoutZeroes) {
  for (bool no_zeroes : {true, false}) {
    Start();
    SendFlags(kClientFixedNewstyle | (no_zeroes ? kClientNoZeroes : 0));
    SendOption(kOptExportName, AsBytes("disk0.img"));
    Bytes reply(10 + (no_zeroes ? 0 : 124));
    ASSERT_TRUE(client_->ReadExact(reply).ok());
    EXPECT_EQ(GetBe64(reply.data()), kSize);
    EXPECT_TRUE(GetBe16(reply.data() + 8) & kTransReadOnly);
    Bytes data;
    SendRequest(kCmdRead, 1, kSize - 10, 10);
    EXPECT_EQ(ReadSimple(&data, 10).first, 0u);
    TearDown();
  }
}

TEST_F(NbdSessionTest, UnknownClientFlagsEndTheHandshake) {
  Start();
  SendFlags(0x80);
  thread_.join();
  EXPECT_EQ(handshake_.code(), StatusCode::kInvalidArgument);
}

TEST_F(NbdSessionTest, BadRequestsGetErrorsAndTheConnectionGoesOn) {
  Start();
  Go();
  Bytes payload(4096, 0xAA);
  SendRequest(kCmdWrite, 1, 0, 4096, payload);  // read-only: EPERM, payload consumed
  EXPECT_EQ(ReadSimple().first, kEperm);
  SendRequest(kCmdRead, 2, kSize - 4, 8);  // past the end
  EXPECT_EQ(ReadSimple().first, kEinval);
  SendRequest(kCmdRead, 3, 0, info_.max_request + 1);  // over the maximum
  EXPECT_EQ(ReadSimple().first, kEinval);
  SendRequest(42, 4, 0, 0);  // unknown command
  EXPECT_EQ(ReadSimple().first, kEinval);
  SendRequest(kCmdFlush, 5, 0, 0);
  EXPECT_EQ(ReadSimple().first, 0u);
  Bytes data;
  SendRequest(kCmdRead, 6, 0, 16);
  EXPECT_EQ(ReadSimple(&data, 16), (std::pair<uint32_t, uint64_t>{0, 6}));
  EXPECT_EQ(device_->data(), RandomBytes(kSize, 3));  // the refused write changed nothing
}

TEST_F(NbdSessionTest, ADamagedRegionFailsOnlyTheReadsThatTouchIt) {
  Start();
  Go();
  device_->Damage(8192, 12288);
  Bytes data;
  SendRequest(kCmdRead, 1, 4096, 8192);
  EXPECT_EQ(ReadSimple().first, kEio);
  SendRequest(kCmdRead, 2, 0, 8192);
  EXPECT_EQ(ReadSimple(&data, 8192).first, 0u);
  SendRequest(kCmdRead, 3, 12288, 4096);
  EXPECT_EQ(ReadSimple(&data, 4096).first, 0u);
}

TEST_F(NbdSessionTest, WritesZeroesAndFuaReachAWritableDevice) {
  Start(/*writable=*/true);
  uint16_t flags = Go();
  EXPECT_FALSE(flags & kTransReadOnly);
  EXPECT_TRUE(flags & kTransSendWriteZeroes);
  Bytes payload = RandomBytes(3000, 9);
  SendRequest(kCmdWrite, 1, 5, 3000, payload, kCmdFlagFua);
  EXPECT_EQ(ReadSimple().first, 0u);
  SendRequest(kCmdWriteZeroes, 2, 100000, 500);
  EXPECT_EQ(ReadSimple().first, 0u);
  Bytes data;
  SendRequest(kCmdRead, 3, 5, 3000);
  ASSERT_EQ(ReadSimple(&data, 3000).first, 0u);
  EXPECT_EQ(data, payload);
  Bytes all = device_->data();
  EXPECT_TRUE(std::all_of(all.begin() + 100000, all.begin() + 100500, [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(device_->flushes(), 1);
}

TEST_F(NbdSessionTest, ManyRequestsInFlightAreAllAnsweredByHandle) {
  Start(false, /*workers=*/4);
  Go();
  constexpr int kRequests = 64;
  for (int i = 0; i < kRequests; ++i) SendRequest(kCmdRead, 1000 + i, uint64_t(i) * 4096, 4096);
  std::set<uint64_t> handles;
  Bytes all = device_->data();
  for (int i = 0; i < kRequests; ++i) {
    Bytes data;
    auto [error, handle] = ReadSimple(&data, 4096);
    ASSERT_EQ(error, 0u);
    handles.insert(handle);
    uint64_t off = (handle - 1000) * 4096;
    EXPECT_TRUE(std::equal(data.begin(), data.end(), all.begin() + static_cast<ptrdiff_t>(off)));
  }
  EXPECT_EQ(handles.size(), static_cast<size_t>(kRequests));
}

TEST_F(NbdSessionTest, StructuredRepliesAndBaseAllocation) {
  Start();
  SendFlags();
  SendOption(kOptStructuredReply);
  EXPECT_EQ(ReadReply().type, kRepAck);
  // SET_META_CONTEXT "" [base:allocation, unknown:thing]
  Bytes q(4 + 4);
  PutBe32(q.data() + 4, 2);
  for (std::string name : {std::string(kBaseAllocation), std::string("unknown:thing")}) {
    uint8_t len[4];
    PutBe32(len, static_cast<uint32_t>(name.size()));
    q.insert(q.end(), len, len + 4);
    q.insert(q.end(), name.begin(), name.end());
  }
  SendOption(kOptSetMetaContext, q);
  Reply ctx = ReadReply();
  ASSERT_EQ(ctx.type, kRepMetaContext);
  EXPECT_EQ(GetBe32(ctx.data.data()), kBaseAllocationId);
  EXPECT_EQ(std::string(ctx.data.begin() + 4, ctx.data.end()), kBaseAllocation);
  EXPECT_EQ(ReadReply().type, kRepAck);
  SendOption(kOptGo, InfoData("", {}));
  EXPECT_EQ(ReadReply().type, kRepInfo);
  EXPECT_EQ(ReadReply().type, kRepAck);
  auto read_chunk = [&](uint16_t* type, uint64_t* handle) {
    uint8_t h[kStructuredHeaderSize];
    EXPECT_TRUE(client_->ReadExact(h).ok());
    EXPECT_EQ(GetBe32(h), kStructuredReplyMagic);
    EXPECT_EQ(GetBe16(h + 4), kReplyFlagDone);
    *type = GetBe16(h + 6);
    *handle = GetBe64(h + 8);
    Bytes payload(GetBe32(h + 16));
    EXPECT_TRUE(client_->ReadExact(payload).ok());
    return payload;
  };
  uint16_t type;
  uint64_t handle;
  SendRequest(kCmdRead, 1, 77, 100);
  Bytes data = read_chunk(&type, &handle);
  EXPECT_EQ(type, kReplyTypeOffsetData);
  EXPECT_EQ(GetBe64(data.data()), 77u);
  Bytes all = device_->data();
  EXPECT_TRUE(std::equal(data.begin() + 8, data.end(), all.begin() + 77));
  SendRequest(kCmdRead, 2, kSize, 1);
  Bytes err = read_chunk(&type, &handle);
  EXPECT_EQ(type, kReplyTypeError);
  EXPECT_EQ(GetBe32(err.data()), kEinval);
  SendRequest(kCmdBlockStatus, 3, 4096, 8192);
  Bytes status = read_chunk(&type, &handle);
  EXPECT_EQ(type, kReplyTypeBlockStatus);
  ASSERT_EQ(status.size(), 12u);
  EXPECT_EQ(GetBe32(status.data()), kBaseAllocationId);
  EXPECT_EQ(GetBe32(status.data() + 4), 8192u);  // one extent: data
  EXPECT_EQ(GetBe32(status.data() + 8), 0u);
  SendRequest(kCmdFlush, 4, 0, 0);
  EXPECT_EQ(read_chunk(&type, &handle).size(), 0u);
  EXPECT_EQ(type, kReplyTypeNone);
  EXPECT_EQ(handle, 4u);
}

TEST(NbdProtocolTest, InfoRequestLengthsMustAddUp) {
  Bytes ok(4 + 3 + 2 + 4);
  PutBe32(ok.data(), 3);
  std::memcpy(ok.data() + 4, "abc", 3);
  PutBe16(ok.data() + 7, 2);
  PutBe16(ok.data() + 9, kInfoName);
  PutBe16(ok.data() + 11, kInfoBlockSize);
  auto r = ParseInfoRequest(ok);
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->name, "abc");
  EXPECT_EQ(r->info, (std::vector<uint16_t>{kInfoName, kInfoBlockSize}));
  Bytes longer = ok;
  longer.push_back(0);
  EXPECT_FALSE(ParseInfoRequest(longer).ok());
  PutBe32(ok.data(), 0xFFFFFFFF);  // a name longer than the data
  EXPECT_FALSE(ParseInfoRequest(ok).ok());
  EXPECT_FALSE(ParseInfoRequest(Bytes(5)).ok());
}

}  // namespace
}  // namespace cairn::nbd
