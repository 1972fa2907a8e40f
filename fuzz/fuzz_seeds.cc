// Writes seed corpora for the fuzz targets: valid encodings of each format,
// so the fuzzers start from inputs that reach deep into the decoders.
//
//   fuzz_seeds OUT_DIR   → OUT_DIR/{blob,fixed_index,manifest,dynamic_index,tree,
//                          http_request,chunk_frames}_fuzz/seed-N
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "access/overlay_device.h"
#include "blob/blob.h"
#include "index/dynamic_index.h"
#include "index/fixed_index.h"
#include "index/manifest.h"
#include "tree/tree_format.h"

namespace {

using cairn::Bytes;
using cairn::ByteSpan;

std::shared_ptr<const cairn::crypto::CryptConfig> FuzzKey() {
  cairn::crypto::Key256 k;
  k.fill(0x42);
  return cairn::crypto::CryptConfig::FromMasterKey(k);
}

bool Write(const std::filesystem::path& dir, int n, ByteSpan data) {
  std::filesystem::create_directories(dir);
  std::ofstream f(dir / ("seed-" + std::to_string(n)), std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return f.good();
}

Bytes Pattern(size_t n, uint32_t seed) {
  Bytes out(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return out;
}

cairn::crypto::Digest DigestOf(uint32_t i) { return cairn::crypto::Sha256(Pattern(8, i)); }

// Dynamic indexes: empty stream, one one-byte chunk, chunks of the default
// chunker sizes with a short tail, and one chunk of the largest size.
bool WriteDynamicIndexSeeds(const std::filesystem::path& out, int& n) {
  const auto dir = out / "dynamic_index_fuzz";
  bool ok = true;
  for (const std::vector<uint64_t>& lengths : {std::vector<uint64_t>{},
                                               {1},
                                               {512u << 10, 2u << 20, 8u << 20, 100},
                                               {cairn::blob::kMaxRawSize}}) {
    std::vector<cairn::index::DynamicEntry> entries;
    uint64_t end = 0;
    for (uint64_t len : lengths) {
      end += len;
      entries.push_back({end, DigestOf(static_cast<uint32_t>(entries.size()))});
    }
    ok = ok && Write(dir, n++, cairn::index::DynamicIndex(std::move(entries)).Encode());
  }
  return ok;
}

// Tree metadata streams, each after its payload size (8 bytes, LE): the root
// alone, and a tree with every kind, xattrs and a hardlink.
bool WriteTreeSeeds(const std::filesystem::path& out, int& n) {
  using cairn::tree::Entry;
  using cairn::tree::EntryKind;
  auto make = [](EntryKind kind, std::string path) {
    Entry e;
    e.kind = kind;
    e.path = std::move(path);
    e.mode = kind == EntryKind::kDirectory ? 0755 : 0644;
    e.uid = 1000;
    e.gid = 100;
    e.user = "alice";
    e.group = "users";
    e.mtime_ns = 1'700'000'000'123'456'789;
    return e;
  };
  std::vector<Entry> full = {make(EntryKind::kDirectory, "")};
  full[0].xattrs = {{"user.note", "root"}};
  full.push_back(make(EntryKind::kFile, "a"));
  full.back().size = 10;
  full.push_back(make(EntryKind::kDirectory, "d"));
  full.push_back(make(EntryKind::kFile, "d/f"));
  full.back().payload_offset = 10;
  full.back().size = 5;
  full.back().linked = true;
  full.back().inode = 131077;
  full.back().ctime_ns = 1'700'000'001'000'000'000;
  full.push_back(make(EntryKind::kBlockDevice, "d/sda"));
  full.back().rdev = 0x801;
  full.push_back(make(EntryKind::kFifo, "d/z"));
  full.push_back(make(EntryKind::kHardlink, "h"));
  full.back().link_target = "d/f";
  full.push_back(make(EntryKind::kSymlink, "s"));
  full.back().link_target = "../etc/hosts";
  const auto dir = out / "tree_fuzz";
  bool ok = true;
  for (const auto& [tree, payload] :
       {std::pair{std::vector<Entry>{full[0]}, uint64_t{0}}, std::pair{full, uint64_t{15}}}) {
    auto stream = cairn::tree::EncodeTree(tree);
    if (!stream.ok()) return false;
    Bytes seed(8);
    for (int i = 0; i < 8; ++i) seed[i] = static_cast<uint8_t>(payload >> (8 * i));
    seed.insert(seed.end(), stream->begin(), stream->end());
    ok = ok && Write(dir, n++, seed);
  }
  return ok;
}

}  // namespace

// Requests as a client sends them (http_request_fuzz): every route, with the
// token placeholders $R (reader), $B (backup), $A (admin), the dashboard's
// session placeholders $S (cookie) and $C (CSRF token), and a keep-alive
// pair on one connection.
bool WriteHttpRequestSeeds(const std::filesystem::path& out, int& n) {
  using namespace std::string_literals;
  const auto dir = out / "http_request_fuzz";
  const std::string snap = "ns=&snapshot=vm/100/2026-01-01T00:00:00Z";
  const std::string chunk(64, '1');
  std::string digests(64, '\x11');  // the planted chunk, and one that is not there
  digests[40] = '\x22';
  auto get = [](const std::string& target, const std::string& auth) {
    std::string r = "GET " + target + " HTTP/1.1\r\nHost: x\r\n";
    if (!auth.empty()) r += "Authorization: Bearer " + auth + "\r\n";
    return r + "\r\n";
  };
  bool ok = true;
  for (const std::string& req : {
           get("/api/v1/version", ""),
           get("/api/v1/stores", "$R"),
           get("/api/v1/stores/main/snapshots", "$B"),
           get("/api/v1/stores/main/file?" + snap + "&name=index.json.blob", "$R"),
           get("/api/v1/stores/main/file?" + snap + "&name=disk0.img.fidx", "$A"),
           get("/api/v1/stores/main/chunk/" + chunk, "$R"),
           "POST /api/v1/stores/main/chunks HTTP/1.1\r\nAuthorization: Bearer $R\r\n"
           "Content-Length: 64\r\n\r\n" + digests,
           "POST /api/v1/stores/main/chunks HTTP/1.1\r\nAuthorization: Bearer $A\r\n"
           "Transfer-Encoding: chunked\r\n\r\n20\r\n" + digests.substr(0, 32) + "\r\n0\r\n\r\n",
           get("/api/v1/version", "") + get("/api/v1/stores/other/snapshots", "$A"),
           // The web dashboard: pages, the login form, and the API with the
           // session ($S) and its CSRF token ($C).
           get("/", "") + get("/ui/login", "") + get("/ui/app.js", ""),
           "POST /ui/login HTTP/1.1\r\nCookie: __Host-cairn_login=ab\r\n"s +
           "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 20\r\n\r\n"
           "token=a%3Ab&csrf=ab+",
           "GET /api/v1/stores/main/snapshots?details=1 HTTP/1.1\r\n"
           "Cookie: __Host-cairn_session=$S\r\n\r\n"s,
           "PUT /api/v1/stores/main/protected?" + snap + " HTTP/1.1\r\n"
           "Cookie: __Host-cairn_session=$S\r\nX-CSRF-Token: $C\r\nContent-Length: 19\r\n\r\n"
           "{\"protected\": true}",
       }) {
    ok = ok && Write(dir, n++, cairn::AsBytes(req));
  }
  return ok;
}

// Batched chunk answers (chunk_frames_fuzz): byte 0 the number of digests
// asked, their 32 bytes each, a byte that seeds the cuts, then the frames.
bool WriteChunkFramesSeeds(const std::filesystem::path& out, int& n) {
  const auto dir = out / "chunk_frames_fuzz";
  auto frame = [](Bytes* s, uint8_t d, uint8_t status, std::string_view payload) {
    s->insert(s->end(), 32, d);
    s->push_back(status);
    uint32_t len = static_cast<uint32_t>(payload.size());
    for (int i = 0; i < 4; ++i) s->push_back(static_cast<uint8_t>(len >> (8 * i)));
    s->insert(s->end(), payload.begin(), payload.end());
  };
  bool ok = true;
  Bytes none = {0, 7};
  ok = ok && Write(dir, n++, none);
  Bytes three = {3};
  for (uint8_t d : {1, 2, 3}) three.insert(three.end(), 32, d);
  three.push_back(5);
  frame(&three, 2, 0, "chunk two");
  frame(&three, 1, 1, "");
  frame(&three, 3, 2, "read error");
  ok = ok && Write(dir, n++, three);
  Bytes dup = {2};
  dup.insert(dup.end(), 64, 9);
  dup.push_back(3);
  frame(&dup, 9, 0, "a");
  frame(&dup, 9, 0, "a");
  ok = ok && Write(dir, n++, dup);
  return ok;
}

// NBD client streams (nbd_session_fuzz: byte 0 picks a writable device):
// GO, then reads, a write, a flush, block status and DISC; EXPORT_NAME; LIST.
bool WriteNbdSeeds(const std::filesystem::path& out, int& n) {
  const auto dir = out / "nbd_session_fuzz";
  auto be = [](Bytes& b, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  auto option = [&](Bytes& b, uint32_t opt, const Bytes& data) {
    be(b, 0x49484156454F5054, 8);
    be(b, opt, 4);
    be(b, data.size(), 4);
    b.insert(b.end(), data.begin(), data.end());
  };
  auto request = [&](Bytes& b, uint16_t type, uint64_t offset, uint32_t length) {
    be(b, 0x25609513, 4);
    be(b, 0, 2);
    be(b, type, 2);
    be(b, 7, 8);
    be(b, offset, 8);
    be(b, length, 4);
  };
  Bytes go_data;
  be(go_data, 0, 4);  // the default export
  be(go_data, 1, 2);
  be(go_data, 3, 2);  // NBD_INFO_BLOCK_SIZE
  Bytes meta;
  be(meta, 0, 4);
  be(meta, 1, 4);
  be(meta, 15, 4);
  for (char c : std::string("base:allocation")) meta.push_back(static_cast<uint8_t>(c));
  bool ok = true;
  for (int writable = 0; writable < 2; ++writable) {
    Bytes b = {static_cast<uint8_t>(writable)};
    be(b, 3, 4);  // client flags
    option(b, 8, {});     // structured replies
    option(b, 10, meta);  // base:allocation
    option(b, 7, go_data);
    request(b, 0, 0, 4096);
    request(b, 7, 0, 65536);
    request(b, 1, 100, 8);
    b.insert(b.end(), 8, 0xab);
    request(b, 3, 0, 0);
    request(b, 2, 0, 0);
    ok = ok && Write(dir, n++, b);
  }
  Bytes old = {0};
  be(old, 1, 4);
  option(old, 3, {});  // LIST
  option(old, 1, Bytes{'d', 'i', 's', 'k', '0', '.', 'i', 'm', 'g'});
  request(old, 0, 65000, 536);
  ok = ok && Write(dir, n++, old);
  return ok;
}

// Overlay headers (overlay_header_fuzz).
bool WriteOverlaySeeds(const std::filesystem::path& out, int& n) {
  const auto dir = out / "overlay_header_fuzz";
  bool ok = true;
  for (uint64_t size : {uint64_t{0}, uint64_t{4096}, (uint64_t{2} << 30) + 123}) {
    ok = ok && Write(dir, n++, cairn::access::EncodeOverlayHeader(cairn::access::OverlayLayout(size, DigestOf(9))));
  }
  return ok;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path out = argv[1];
  bool ok = true;
  int n = 0;

  // Blobs: empty, small raw, compressible (zstd), incompressible (raw).
  const auto blob_dir = out / "blob_fuzz";
  std::string text(600, 'a');
  for (size_t i = 0; i < text.size(); ++i) text[i] = "cairn blob "[i % 11];
  const auto key = FuzzKey();
  for (const Bytes& plain :
       {Bytes{}, Pattern(10, 1), Bytes(text.begin(), text.end()), Pattern(300, 2)}) {
    auto stored = cairn::blob::Encode(plain);
    ok = ok && stored.ok() && Write(blob_dir, n++, *stored);
    // Encrypted with blob_fuzz's fixed key (0x42 × 32), so the fuzzer starts
    // from blobs that authenticate.
    cairn::blob::EncodeOptions encrypted;
    encrypted.crypt = key.get();
    stored = cairn::blob::Encode(plain, encrypted);
    ok = ok && stored.ok() && Write(blob_dir, n++, *stored);
  }

  // Fixed indexes: empty image, one short chunk, three chunks and a tail.
  const auto fidx_dir = out / "fixed_index_fuzz";
  const uint32_t cs = cairn::index::kMinChunkSize;
  for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{3} * cs + 100}) {
    std::vector<cairn::crypto::Digest> ids;
    for (uint64_t i = 0; i < cairn::index::FixedIndex::ChunkCount(size, cs); ++i) {
      ids.push_back(DigestOf(static_cast<uint32_t>(i)));
    }
    ok = ok && Write(fidx_dir, n++, cairn::index::FixedIndex(size, cs, ids).Encode());
  }

  // Manifests, as JSON text and as stored blobs.
  const auto man_dir = out / "manifest_fuzz";
  cairn::index::Manifest m;
  m.type = "vm";
  m.id = "100";
  m.time = "2026-11-30T05:00:00Z";
  m.created_unix = 1796014800;
  m.created_by = "cairn 0.1.0";
  std::string json_empty = cairn::index::ManifestToJson(m);
  m.ns = "a/b";
  m.archives.push_back({"disk0.img", cairn::index::ArchiveKind::kImage, uint64_t{2} << 30,
                        DigestOf(1), 4u << 20});
  m.archives.push_back({"vm.conf.blob", cairn::index::ArchiveKind::kBlob, 812, DigestOf(2), 0});
  std::string json_full = cairn::index::ManifestToJson(m);
  ok = ok && Write(man_dir, n++, cairn::AsBytes(json_empty));
  ok = ok && Write(man_dir, n++, cairn::AsBytes(json_full));
  auto stored = cairn::index::EncodeManifest(m);
  ok = ok && stored.ok() && Write(man_dir, n++, *stored);
  ok = ok && Write(man_dir, n++, cairn::AsBytes(cairn::index::ManifestToJson(m, key.get())));

  ok = WriteDynamicIndexSeeds(out, n) && ok;
  ok = WriteTreeSeeds(out, n) && ok;
  ok = WriteHttpRequestSeeds(out, n) && ok;
  ok = WriteChunkFramesSeeds(out, n) && ok;
  ok = WriteNbdSeeds(out, n) && ok;
  ok = WriteOverlaySeeds(out, n) && ok;

  if (!ok) {
    std::fprintf(stderr, "fuzz_seeds: failed writing seeds under %s\n", argv[1]);
    return 1;
  }
  return 0;
}
