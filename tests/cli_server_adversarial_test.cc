// A compromised backup host against `cairn serve` (issue 31). One datastore
// is shared by host A (group vm/100, its token hostA) and host B (token
// hostB). Host B is the attacker: it sends raw API requests, as a hostile
// client would, and each test replays one probe of the security review
// against a real server on loopback; each would pass against a server
// without the fix it covers. docs/SECURITY.md ("Threat model of the
// server") names these tests line by line.
//
//   1. B can neither read A's chunks nor learn which exist (fake uploads,
//      snapshots made of them, other groups' files); a reader downloads
//      only chunks of indexes it read; an admin any.
//   2. A fake "encrypted" chunk planted under A's future digest gives way
//      to A's real upload: A's backup restores.
//   3. Repeated frames decode once; a request decodes no more than its cap.
//   4. Refused requests are answered before their bodies are read; failed
//      logins are rate limited per address, logged with their reason, and
//      audited without secrets.
//   5. Idle sockets cannot take every connection slot.
//   6. Clients that stop reading hold no worker.
//   7. An aborted session claims no group.
//   8. Error answers and task logs name no server path; task files and the
//      state directory are private; a TLS key others can read is refused.
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "blob/blob.h"
#include "cli_server_fixture.h"
#include "crypto/crypt_config.h"
#include "crypto/sha256.h"
#include "format/coding.h"
#include "index/fixed_index.h"
#include "index/manifest.h"
#include "net/http_client.h"

namespace cairn::cli_test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

struct TestToken {
  std::string name, store, role;
  uint8_t fill = 0;  // the secret: 32 bytes of this value
  std::string Credential() const { return name + ":" + crypto::DigestHex(Secret()); }
  crypto::Digest Secret() const {
    crypto::Digest s;
    s.fill(fill);
    return s;
  }
};

const TestToken kHostA{"hostA", "main", "backup", 0xa1};
const TestToken kHostB{"hostB", "main", "backup", 0xb2};
const TestToken kReader{"reader1", "main", "reader", 0xc3};
const TestToken kReader2{"reader2", "main", "reader", 0xc4};
const TestToken kAdmin{"admin1", "*", "admin", 0xd4};

// tokens.json with the tokens above (docs/SERVER.md: the SHA-256 of each
// secret, mode 0600): no `cairn token` process per token.
void WriteTokens(const std::string& state_dir) {
  json tokens = json::array();
  for (const TestToken* t : {&kHostA, &kHostB, &kReader, &kReader2, &kAdmin}) {
    tokens.push_back({{"name", t->name},
                      {"store", t->store},
                      {"role", t->role},
                      {"created", 1},
                      {"secret_sha256", crypto::DigestHex(crypto::Sha256(t->Secret()))}});
  }
  std::string path = state_dir + "/tokens.json";
  WriteFile(path, json{{"version", 1}, {"tokens", tokens}}.dump());
  chmod(path.c_str(), 0600);
}

int StatusOf(const std::string& text) {
  return text.rfind("HTTP/1.1 ", 0) == 0 && text.size() >= 12 ? std::atoi(text.substr(9, 3).c_str())
                                                              : 0;
}

// A raw connection from a chosen loopback address, with or without TLS:
// what a misbehaving client does (send a header and stop, never read).
class RawClient {
 public:
  RawClient(int port, const std::string& from, bool tls) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    inet_pton(AF_INET, from.c_str(), &src.sin_addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) return;
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(static_cast<uint16_t>(port));
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) return;
    connected_ = true;
    if (!tls) return;
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_NONE, nullptr);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    tls_ = SSL_connect(ssl_) == 1;
  }
  ~RawClient() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    ERR_clear_error();
    close(fd_);
  }
  bool connected() const { return connected_; }
  bool tls() const { return tls_; }

  bool Send(std::string_view data) {
    size_t off = 0;
    while (off < data.size()) {
      int n = SSL_write(ssl_, data.data() + off, static_cast<int>(data.size() - off));
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads until a whole response with a Content-Length arrived, the peer
  // closed, or `timeout` passed.
  std::string ReadResponse(std::chrono::milliseconds timeout) {
    std::string text;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      size_t end = text.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t cl = text.find("Content-Length: ");
        if (cl != std::string::npos && cl < end &&
            text.size() >= end + 4 + std::stoul(text.substr(cl + 16))) {
          break;
        }
      }
      if (SSL_pending(ssl_) == 0) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
      }
      char buf[4096];
      int n = SSL_read(ssl_, buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    return text;
  }

  // True once the server closed the connection (within `timeout`).
  bool WaitClosed(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool tls_ = false;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

struct Upload {
  crypto::Digest id;
  Bytes blob;
};

Upload PlainChunk(const Bytes& plain) {
  return {crypto::Sha256(plain), blob::Encode(plain).value()};
}

// An encrypted blob under `key` of 80 bytes of nothing, claiming `id`: a
// fake the server cannot tell from a real encrypted chunk.
Upload FakeEncrypted(const crypto::Digest& id, const crypto::CryptConfig& key) {
  blob::EncodeOptions options;
  options.crypt = &key;
  return {id, blob::Encode(Bytes(80, 0x5a), options).value()};
}

std::shared_ptr<const crypto::CryptConfig> AttackerKey() {
  crypto::Key256 master;
  master.fill(0x66);
  return crypto::CryptConfig::FromMasterKey(master);
}

Bytes Frames(const std::vector<Upload>& uploads) {
  Bytes out;
  for (const Upload& u : uploads) {
    size_t at = out.size();
    out.resize(at + 36 + u.blob.size());
    std::memcpy(&out[at], u.id.data(), 32);
    format::PutU32(&out[at + 32], static_cast<uint32_t>(u.blob.size()));
    std::memcpy(&out[at + 36], u.blob.data(), u.blob.size());
  }
  return out;
}

class AdversarialTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    // Host A's backup: three chunks of random data.
    image_ = Path("a.img");
    WriteChunkImage(image_, {11, 12, 13});
    Backup("vm/100", 1, {"disk0.img=" + image_}, false);
    WriteFile(store() + "/vm/100/owner", "hostA\n");
    for (const std::string& hex :
         IndexDigests(SnapshotDir(store(), Snap("vm/100", 1)) + "/disk0.img.fidx")) {
      a_chunks_.push_back(*crypto::ParseDigestHex(hex));
    }
    state_ = Path("state");
    mkdir(state_.c_str(), 0700);
    WriteTokens(state_);
  }

  // Starts `cairn serve --config` with `limits` as the config's "limits".
  void StartServer(const json& limits = json::object()) {
    std::string config = Path("server.json");
    WriteFile(config, json{{"listen", {"127.0.0.1:0"}},
                           {"state_dir", state_},
                           {"stores", {{"main", store()}}},
                           {"limits", limits}}
                          .dump());
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{"serve", "--config", config},
                                              Path("server.err"));
    ASSERT_GT(server_->port(), 0);
    url_ = "https://127.0.0.1:" + std::to_string(server_->port()) + "/main";
  }

  // One request as `token` on a keep-alive connection of its own.
  net::HttpResponse Call(const TestToken& token, std::string_view method, const std::string& target,
                         ByteSpan body = {}) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto& c = connections_[token.name];
      if (c == nullptr || !c->open()) {
        net::ClientOptions o;
        o.host = "127.0.0.1";
        o.port = static_cast<uint16_t>(server_->port());
        o.fingerprint = server_->fingerprint();
        o.authorization = "Bearer " + token.Credential();
        o.connect_timeout = 5s;
        o.io_timeout = 20s;
        auto made = net::HttpConnection::Connect(o);
        if (!made.ok()) {
          ADD_FAILURE() << made.status().ToString();
          return {};
        }
        c = std::move(*made);
      }
      auto r = c->Request(method, target, body);
      if (r.ok()) return std::move(*r);
      c.reset();  // closed by the server after an error answer: once more
    }
    ADD_FAILURE() << method << " " << target << ": no answer";
    return {};
  }
  static std::string Text(const net::HttpResponse& r) { return std::string(AsStringView(r.body)); }

  std::string Api(const std::string& suffix) const { return "/api/v1/stores/main" + suffix; }

  // Opens a backup session of `token` for vm/ID at SnapTime(t).
  std::string Begin(const TestToken& token, const std::string& id, int t) {
    auto r = Call(token, "POST", Api("/backup"),
                  AsBytes(json{{"type", "vm"}, {"id", id}, {"time", SnapTime(t)}}.dump()));
    EXPECT_EQ(r.status, 201) << Text(r);
    auto j = json::parse(Text(r), nullptr, false);
    return j.is_object() && j["session"].is_string()
               ? Api("/backup/" + j["session"].get<std::string>())
               : "";
  }

  // Uploads an image index over `digests` and finishes with a manifest
  // (encrypted with `key` when given: the server cannot check its
  // signature). The status of finish.
  int FinishImage(const TestToken& token, const std::string& session, const std::string& id, int t,
                  const std::vector<crypto::Digest>& digests,
                  const crypto::CryptConfig* key = nullptr) {
    index::FixedIndex idx(uint64_t{kChunk} * digests.size(), kChunk, digests);
    auto put = Call(token, "POST", session + "/file?name=disk0.img.fidx", idx.Encode());
    if (put.status != 200) return put.status;
    index::Manifest m;
    m.type = "vm";
    m.id = id;
    m.time = SnapTime(t);
    m.archives.push_back({"disk0.img", index::ArchiveKind::kImage, idx.image_size(), idx.csum(),
                          static_cast<uint32_t>(kChunk)});
    return Call(token, "POST", session + "/finish", index::EncodeManifest(m, key).value()).status;
  }

  std::string image_;
  std::string state_;
  std::vector<crypto::Digest> a_chunks_;
  std::unique_ptr<ServerProcess> server_;
  std::string url_;
  std::map<std::string, std::unique_ptr<net::HttpConnection>> connections_;
};

std::string Hex(const crypto::Digest& d) { return crypto::DigestHex(d); }

// Finding 1 and the reader mode: PBS's rules, probe by probe.
TEST_F(AdversarialTest, ABackupTokenCannotReadOrProbeAnotherHostsChunks) {
  StartServer();
  const crypto::Digest target = a_chunks_[0];  // A's chunk, its digest known to B
  auto key = AttackerKey();
  crypto::Digest unknown;
  unknown.fill(0x42);

  // The probe of the review: a fake "encrypted" upload under A's digest,
  // then a download. The upload's answer is the one a new digest gets.
  std::string s1 = Begin(kHostB, "200", 10);
  auto known = Call(kHostB, "POST", s1 + "/chunks", Frames({FakeEncrypted(target, *key)}));
  auto fresh = Call(kHostB, "POST", s1 + "/chunks", Frames({FakeEncrypted(unknown, *key)}));
  EXPECT_EQ(known.status, 200) << Text(known);
  EXPECT_EQ(Text(known), Text(fresh));
  EXPECT_EQ(Call(kHostB, "GET", Api("/chunk/" + Hex(target))).status, 404);
  auto batch = Call(kHostB, "POST", Api("/chunks"), ByteSpan(target.data(), 32));
  ASSERT_EQ(batch.status, 200);
  ASSERT_GE(batch.body.size(), 37u);
  EXPECT_EQ(batch.body[32], 1) << "frame status: not found";  // never the chunk
  // A plain upload must prove itself: A's digest with other content is refused.
  Upload liar = PlainChunk(Bytes(1000, 7));
  liar.id = target;
  EXPECT_EQ(Call(kHostB, "POST", s1 + "/chunks", Frames({liar})).status, 400);
  // The fake may be referenced, but a plain snapshot made of it is refused.
  EXPECT_EQ(FinishImage(kHostB, s1, "200", 10, {target}), 400);

  // Made into an encrypted snapshot (the server cannot tell), the fake
  // becomes the next session's base: still no read of A's (plain) chunk.
  std::string s2 = Begin(kHostB, "201", 11);
  ASSERT_EQ(Call(kHostB, "POST", s2 + "/chunks", Frames({FakeEncrypted(target, *key)})).status,
            200);
  ASSERT_EQ(FinishImage(kHostB, s2, "201", 11, {target}, key.get()), 200);
  std::string s3 = Begin(kHostB, "201", 12);
  ASSERT_EQ(Call(kHostB, "POST", s3 + "/base", AsBytes(json{{"time", SnapTime(11)}}.dump())).status,
            200);
  EXPECT_EQ(Call(kHostB, "GET", Api("/chunk/" + Hex(target))).status, 404);
  EXPECT_EQ(Call(kHostB, "DELETE", s3).status, 200);

  // Another group's snapshot: the answer of a group that does not exist.
  auto theirs =
      Call(kHostB, "GET", Api("/file?snapshot=" + Snap("vm/100", 1) + "&name=index.json.blob"));
  auto none =
      Call(kHostB, "GET", Api("/file?snapshot=vm/999/" + SnapTime(1) + "&name=index.json.blob"));
  EXPECT_EQ(theirs.status, 404) << Text(theirs);
  EXPECT_EQ(none.status, 404) << Text(none);
  std::string told = Text(theirs);
  if (size_t at = told.find("vm/100/"); at != std::string::npos) told.replace(at, 6, "vm/999");
  EXPECT_EQ(told, Text(none));
  // Store-wide counts are not a backup token's.
  EXPECT_EQ(Call(kHostB, "GET", Api("/status")).status, 403);

  // A reader downloads only chunks of indexes it read; an admin any.
  EXPECT_EQ(Call(kReader, "GET", Api("/chunk/" + Hex(target))).status, 404);
  std::string fidx = "/file?snapshot=" + Snap("vm/100", 1) + "&name=disk0.img.fidx";
  ASSERT_EQ(Call(kReader, "GET", Api(fidx)).status, 200);
  EXPECT_EQ(Call(kReader, "GET", Api("/chunk/" + Hex(target))).status, 200);
  EXPECT_EQ(Call(kAdmin, "GET", Api("/chunk/" + Hex(a_chunks_[1]))).status, 200);
  // A client with the index cached registers it (POST …/grant) instead.
  std::string grant = "/grant?snapshot=" + Snap("vm/201", 11) + "&name=disk0.img.fidx";
  auto granted = Call(kReader, "POST", Api(grant));
  EXPECT_EQ(granted.status, 200) << Text(granted);
  // Restores with reader tokens: the first fetches the index; the second,
  // another token with nothing granted yet, finds it cached and registers
  // it (the grant route).
  for (int round = 0; round < 2; ++round) {
    RunOptions o;
    o.env = {"CAIRN_CACHE_DIR=" + Path("cache"),
             "CAIRN_TOKEN=" + (round == 0 ? kReader : kReader2).Credential(),
             "CAIRN_FINGERPRINT=" + server_->fingerprint()};
    std::string out = Path("restored" + std::to_string(round) + ".img");
    RunResult r = RunCairn({"restore", "-r", url_, Snap("vm/100", 1), "disk0.img", out}, o);
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_EQ(CompareFiles(image_, out), "");
  }
}

// Finding 2: a fake planted under A's future digest gives way to A's
// verified upload, and A's backup restores.
TEST_F(AdversarialTest, AFakeChunkNeverStandsOverAHostsRealData) {
  StartServer();
  // A's next image has a chunk B can guess (a well-known file's block).
  std::string next = Path("a2.img");
  WriteChunkImage(next, {11, 12, 14});
  std::string plain = ReadFile(next).substr(2 * kChunk, kChunk);
  crypto::Digest guessed = crypto::Sha256(AsBytes(plain));
  auto key = AttackerKey();
  std::string s = Begin(kHostB, "300", 20);
  ASSERT_EQ(Call(kHostB, "POST", s + "/chunks", Frames({FakeEncrypted(guessed, *key)})).status,
            200);
  ASSERT_EQ(Call(kHostB, "DELETE", s).status, 200);
  std::string file = store() + "/.chunks/" + Hex(guessed).substr(0, 3) + "/" + Hex(guessed);
  ASSERT_EQ(ReadFile(file).at(11), 1) << "the fake is stored (encryption byte 1)";

  // A backs up with the real client: the verified upload replaces the fake.
  RunOptions a;
  a.env = {"CAIRN_CACHE_DIR=" + Path("cache-a"), "CAIRN_TOKEN=" + kHostA.Credential(),
           "CAIRN_FINGERPRINT=" + server_->fingerprint()};
  RunResult r = RunCairn(
      {"backup", "-r", url_, "--id", "vm/100", "--time", SnapTime(21), "disk0.img=" + next}, a);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ReadFile(file).at(11), 0) << "now plain: A's chunk";
  // A second fake does not replace it.
  s = Begin(kHostB, "300", 22);
  ASSERT_EQ(Call(kHostB, "POST", s + "/chunks", Frames({FakeEncrypted(guessed, *key)})).status,
            200);
  EXPECT_EQ(ReadFile(file).at(11), 0);
  RunOptions reader;
  reader.env = {"CAIRN_CACHE_DIR=" + Path("cache-r"), "CAIRN_TOKEN=" + kReader.Credential(),
                "CAIRN_FINGERPRINT=" + server_->fingerprint()};
  std::string out = Path("restored.img");
  r = RunCairn({"restore", "-r", url_, Snap("vm/100", 21), "disk0.img", out}, reader);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(next, out), "");
}

// Finding 3: a small frame that expands to 16 MiB, sent 40 times, is
// decoded once; distinct ones past the request's cap are refused.
TEST_F(AdversarialTest, UploadsCostBoundedCpu) {
  StartServer({{"max_decoded_mib_per_request", 40}});
  auto expanding = [](uint8_t tag) {
    Bytes plain(blob::kMaxRawSize, 0);
    plain[0] = tag;
    return PlainChunk(plain);
  };
  Upload bomb = expanding(1);
  ASSERT_LT(bomb.blob.size(), 4096u);
  std::string s = Begin(kHostB, "400", 30);
  auto r = Call(kHostB, "POST", s + "/chunks", Frames(std::vector<Upload>(40, bomb)));
  EXPECT_EQ(r.status, 200) << Text(r);
  r = Call(kHostB, "POST", s + "/chunks", Frames({expanding(2), expanding(3), expanding(4)}));
  EXPECT_EQ(r.status, 413) << Text(r);
  EXPECT_NE(Text(r).find("max_decoded_mib_per_request"), std::string::npos) << Text(r);
}

// Finding 4 and the logins: refusals come before the body; guessing is
// slowed per address, logged with its reason and audited without secrets.
TEST_F(AdversarialTest, RequestsAreRefusedBeforeTheirBodiesAreRead) {
  StartServer();  // at most 20 failed logins per address and minute
  const std::string upload =
      "POST " + Api("/backup/x/chunks") + " HTTP/1.1\r\nHost: x\r\nContent-Length: 62914560\r\n";
  {
    // No token, 60 MiB announced: 401 at once, no byte of the body read.
    RawClient c(server_->port(), "127.0.0.1", true);
    ASSERT_TRUE(c.tls());
    ASSERT_TRUE(c.Send(upload + "\r\n"));
    EXPECT_EQ(StatusOf(c.ReadResponse(10s)), 401);
  }
  {
    // A reader's body on a route that takes digests: over its limit, 413.
    RawClient c(server_->port(), "127.0.0.1", true);
    ASSERT_TRUE(c.tls());
    ASSERT_TRUE(c.Send("POST " + Api("/chunks") + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                       kReader.Credential() + "\r\nContent-Length: 2097152\r\n\r\n"));
    EXPECT_EQ(StatusOf(c.ReadResponse(10s)), 413);
  }
  // Wrong secrets from 127.0.0.5: twenty, then that address is locked
  // out, a right secret included; 127.0.0.1 is not.
  TestToken wrong = kReader;
  wrong.fill = 0x01;
  TestToken nobody{"nobody", "main", "reader", 0x02};
  for (int i = 0; i <= 20; ++i) {
    RawClient c(server_->port(), "127.0.0.5", true);
    ASSERT_TRUE(c.tls());
    const TestToken& t = i < 20 ? (i % 2 ? nobody : wrong) : kReader;
    ASSERT_TRUE(c.Send("GET " + Api("/snapshots") +
                       " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + t.Credential() +
                       "\r\n\r\n"));
    EXPECT_EQ(StatusOf(c.ReadResponse(10s)), i < 20 ? 401 : 429) << "attempt " << i;
  }
  EXPECT_EQ(Call(kReader, "GET", Api("/snapshots")).status, 200);
  // The log says which check failed; the audit log has token, route and
  // reason, never a secret.
  server_->Stop();
  std::string log = ReadFile(Path("server.err"));
  EXPECT_NE(log.find("wrong secret for token 'reader1'"), std::string::npos) << log;
  EXPECT_NE(log.find("unknown token 'nobody'"), std::string::npos) << log;
  std::string audit = ReadFile(state_ + "/audit.log");
  EXPECT_NE(audit.find("\"token\":\"reader1\""), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"path\":\"/api/v1/stores/main/snapshots\""), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"status\":429"), std::string::npos) << audit;
  EXPECT_EQ(audit.find(crypto::DigestHex(kReader.Secret())), std::string::npos);
  EXPECT_EQ(audit.find(crypto::DigestHex(wrong.Secret())), std::string::npos);
  struct stat st;
  ASSERT_EQ(stat((state_ + "/audit.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Finding 5: connections that never authenticate (here: TCP sockets left
// idle, from two addresses) cannot take the slots clients need.
TEST_F(AdversarialTest, IdleSocketsCannotLockClientsOut) {
  StartServer({{"max_connections", 16}});
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(
        std::make_unique<RawClient>(server_->port(), i % 2 ? "127.0.0.2" : "127.0.0.3", false));
  }
  // A client from elsewhere still gets in and is answered.
  RunOptions o;
  o.env = {"CAIRN_CACHE_DIR=" + Path("cache"), "CAIRN_TOKEN=" + kReader.Credential(),
           "CAIRN_FINGERPRINT=" + server_->fingerprint()};
  RunResult r = RunCairn({"snapshots", "-r", url_}, o);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  // The idle ones are being closed: the oldest made room.
  EXPECT_TRUE(idle.front()->WaitClosed(10s));
}

// Finding 6: four readers ask for big answers and never read them; with
// two workers, everyone else is still served at once.
TEST_F(AdversarialTest, ClientsThatStopReadingHoldNoWorker) {
  // 24 MiB per batch: more than loopback's socket buffers take.
  std::string big = Path("big.img");
  WriteChunkImage(big, {21, 22, 23, 24, 25, 26});
  Backup("vm/101", 2, {"disk0.img=" + big}, false);
  StartServer({{"worker_threads", 2}});
  std::string fidx = Api("/file?snapshot=" + Snap("vm/101", 2) + "&name=disk0.img.fidx");
  std::string batch;
  for (const std::string& hex :
       IndexDigests(SnapshotDir(store(), Snap("vm/101", 2)) + "/disk0.img.fidx")) {
    auto d = crypto::ParseDigestHex(hex);
    batch.append(reinterpret_cast<const char*>(d->data()), 32);
  }
  std::vector<std::unique_ptr<RawClient>> stalled;
  for (int i = 0; i < 4; ++i) {
    auto c = std::make_unique<RawClient>(server_->port(), "127.0.0.1", true);
    ASSERT_TRUE(c->tls());
    std::string auth = "Authorization: Bearer " + kReader.Credential() + "\r\n";
    // The index (the reader's grant), then the chunks, many times over:
    // answers nobody reads.
    std::string requests = "GET " + fidx + " HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n";
    for (int k = 0; k < 8; ++k) {
      requests += "POST " + Api("/chunks") + " HTTP/1.1\r\nHost: x\r\n" + auth +
                  "Content-Length: " + std::to_string(batch.size()) + "\r\n\r\n" + batch;
    }
    ASSERT_TRUE(c->Send(requests));
    stalled.push_back(std::move(c));
  }
  // Another token's requests are answered while those wait for readers.
  for (int i = 0; i < 3; ++i) {
    auto r = Call(kAdmin, "GET", Api("/snapshots"));
    EXPECT_EQ(r.status, 200) << Text(r);
  }
  // speedtest is bounded: at most 4 MiB per request.
  EXPECT_EQ(Call(kReader, "GET", "/api/v1/speedtest?bytes=67108864").status, 400);
  EXPECT_EQ(Call(kReader, "GET", "/api/v1/speedtest?bytes=4194304").status, 200);
}

// Finding 7: a session that begins and is aborted claims nothing.
TEST_F(AdversarialTest, AnAbortedSessionClaimsNoGroup) {
  StartServer();
  for (int i = 0; i < 3; ++i) {
    std::string s = Begin(kHostB, "500", 40 + i);
    ASSERT_EQ(Call(kHostB, "DELETE", s).status, 200);
  }
  EXPECT_FALSE(Exists(store() + "/vm/500/owner"));
  // The group's real owner backs it up, and owns it.
  std::string s = Begin(kHostA, "500", 50);
  EXPECT_EQ(FinishImage(kHostA, s, "500", 50, {}), 200);
  EXPECT_EQ(ReadFile(store() + "/vm/500/owner"), "hostA\n");
  auto r = Call(kHostB, "POST", Api("/backup"),
                AsBytes(json{{"type", "vm"}, {"id", "500"}, {"time", SnapTime(51)}}.dump()));
  EXPECT_EQ(r.status, 403) << Text(r);
}

// Findings 8 and 9: error answers and task logs show no path of the server;
// its state is private; a TLS key others can read stops it.
TEST_F(AdversarialTest, ServerPathsStayPrivate) {
  // A damaged chunk, for a verify task with something to report.
  FlipBit(ChunkFiles(store()).at(Hex(a_chunks_[2])), 100, 3);
  StartServer();
  const std::string snap = Snap("vm/100", 1);
  std::vector<std::string> answers;
  auto keep = [&](const net::HttpResponse& r) {
    EXPECT_GE(r.status, 400);
    answers.push_back(Text(r));
  };
  ASSERT_EQ(Call(kReader, "GET", Api("/file?snapshot=" + snap + "&name=disk0.img.fidx")).status,
            200);
  keep(Call(kReader, "GET", Api("/file?snapshot=" + snap + "&name=nothere.blob")));
  keep(Call(kAdmin, "GET", Api("/chunk/" + std::string(64, 'e'))));
  auto batch = Call(kAdmin, "POST", Api("/chunks"), AsBytes(std::string(32, 'e')));
  answers.push_back(Text(batch));
  keep(Call(kAdmin, "DELETE", Api("/snapshot?snapshot=vm/100/" + SnapTime(59))));
  auto started = Call(kAdmin, "POST", Api("/verify"));
  ASSERT_EQ(started.status, 202) << Text(started);
  std::string task = json::parse(Text(started))["task"];
  json info;
  for (int i = 0; i < 600; ++i) {  // until it ends (a condition, not a time)
    info = json::parse(Text(Call(kAdmin, "GET", "/api/v1/tasks/" + task)), nullptr, false);
    if (info.is_object() && info["state"] != "running") break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(info["state"], "failed") << info.dump();
  answers.push_back(info.dump());
  std::string log = Text(Call(kAdmin, "GET", "/api/v1/tasks/" + task + "/log"));
  EXPECT_NE(log.find("BAD"), std::string::npos) << log;
  answers.push_back(log);
  for (const std::string& a : answers) {
    EXPECT_EQ(a.find(store()), std::string::npos) << a;
    EXPECT_EQ(a.find(state_), std::string::npos) << a;
    EXPECT_EQ(a.find(tmp_.path()), std::string::npos) << a;
  }
  auto mode = [](const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0777u;
  };
  EXPECT_EQ(mode(state_ + "/tasks"), 0700u);
  EXPECT_EQ(mode(state_ + "/tasks/" + task + ".json"), 0600u);
  EXPECT_EQ(mode(state_ + "/tasks/" + task + ".log"), 0600u);
  server_->Stop();

  // A state directory `serve` makes is 0700, its key 0600; a key others may
  // read stops the next start.
  std::string fresh = Path("fresh-state");
  std::vector<std::string> args = {"serve",           "--listen",    "127.0.0.1:0", "--store",
                                   "main=" + store(), "--state-dir", fresh};
  { ServerProcess first(args, Path("fresh.err")); }
  EXPECT_EQ(mode(fresh), 0700u);
  EXPECT_EQ(mode(fresh + "/tls/key.pem"), 0600u);
  chmod((fresh + "/tls/key.pem").c_str(), 0644);
  RunOptions quick;
  quick.kill_after = 10s;
  RunResult r = RunCairn(args, quick);
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.Describe();
}

}  // namespace
}  // namespace cairn::cli_test
