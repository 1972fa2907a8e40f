#include "index/manifest.h"

#include <nlohmann/json.hpp>

#include <functional>

#include <gtest/gtest.h>

#include "blob/blob.h"
#include "tests/unit_test_util.h"

namespace cairn::index {
namespace {

using nlohmann::json;
using test_util::CodeOf;

Manifest Sample() {
  Manifest m;
  m.type = "vm";
  m.id = "100";
  m.time = "2026-11-30T05:00:00Z";
  m.ns = "";
  m.created_unix = 1796014800;
  m.created_by = "cairn 0.1.0";
  ArchiveEntry disk{"disk0.img", ArchiveKind::kImage, uint64_t{3} << 40,
                    crypto::Sha256(AsBytes("index")), 4u << 20};
  ArchiveEntry conf{"vm.conf.blob", ArchiveKind::kBlob, 812, crypto::Sha256(AsBytes("blob")), 0};
  m.archives = {disk, conf};
  return m;
}

void ExpectSame(const Manifest& a, const Manifest& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.time, b.time);
  EXPECT_EQ(a.ns, b.ns);
  EXPECT_EQ(a.created_unix, b.created_unix);
  EXPECT_EQ(a.created_by, b.created_by);
  ASSERT_EQ(a.archives.size(), b.archives.size());
  for (size_t i = 0; i < a.archives.size(); ++i) {
    EXPECT_EQ(a.archives[i].name, b.archives[i].name);
    EXPECT_EQ(a.archives[i].kind, b.archives[i].kind);
    EXPECT_EQ(a.archives[i].size, b.archives[i].size);
    EXPECT_EQ(a.archives[i].csum, b.archives[i].csum);
    EXPECT_EQ(a.archives[i].chunk_size, b.archives[i].chunk_size);
    EXPECT_EQ(a.archives[i].meta_size, b.archives[i].meta_size);
    EXPECT_EQ(a.archives[i].meta_csum, b.archives[i].meta_csum);
  }
}

// The sample as JSON, for tests that break one field.
json SampleJson() { return json::parse(ManifestToJson(Sample())); }

Status FromJson(const json& j) { return ManifestFromJson(j.dump()).status(); }

TEST(ManifestTest, JsonRoundTrip) {
  Manifest m = Sample();
  m.ns = "site-a/rack1";
  auto back = ManifestFromJson(ManifestToJson(m));
  CAIRN_ASSERT_OK(back);
  ExpectSame(*back, m);
}

TEST(ManifestTest, TreeEntryRoundTripsWithBothStreams) {
  Manifest m = Sample();
  ArchiveEntry tree{"root.tree", ArchiveKind::kTree, 1091795817, crypto::Sha256(AsBytes("data")),
                    0};
  tree.meta_size = 2310144;
  tree.meta_csum = crypto::Sha256(AsBytes("meta"));
  m.archives.push_back(tree);
  EXPECT_EQ(tree.FileName(), "root.tree.data.didx");
  EXPECT_EQ(tree.MetaFileName(), "root.tree.meta.didx");
  auto back = ManifestFromJson(ManifestToJson(m));
  CAIRN_ASSERT_OK(back);
  ExpectSame(*back, m);

  json j = json::parse(ManifestToJson(m));
  j["archives"][2].erase("meta_csum");
  EXPECT_EQ(FromJson(j).code(), StatusCode::kDataLoss);
  j = json::parse(ManifestToJson(m));
  j["archives"][2]["meta_csum"] = "xyz";
  EXPECT_EQ(FromJson(j).code(), StatusCode::kDataLoss);
  j = json::parse(ManifestToJson(m));
  j["archives"][2]["kind"] = "img";
  EXPECT_EQ(FromJson(j).code(), StatusCode::kDataLoss);
}

TEST(ManifestTest, EmptyArchiveListRoundTrips) {
  Manifest m = Sample();
  m.archives.clear();
  auto back = ManifestFromJson(ManifestToJson(m));
  CAIRN_ASSERT_OK(back);
  EXPECT_TRUE(back->archives.empty());
}

TEST(ManifestTest, BlobRoundTrip) {
  auto stored = EncodeManifest(Sample());
  CAIRN_ASSERT_OK(stored);
  CAIRN_ASSERT_OK(blob::Check(*stored));
  auto back = DecodeManifest(*stored);
  CAIRN_ASSERT_OK(back);
  ExpectSame(*back, Sample());
}

TEST(ManifestTest, DecodeRejectsCorruptBlob) {
  auto stored = EncodeManifest(Sample());
  CAIRN_ASSERT_OK(stored);
  Bytes t = *stored;
  t[t.size() / 2] ^= 4;
  EXPECT_EQ(CodeOf(DecodeManifest(t)), StatusCode::kDataLoss);
  EXPECT_EQ(CodeOf(DecodeManifest(ByteSpan(stored->data(), 10))), StatusCode::kDataLoss);
  // A valid blob that does not hold JSON.
  auto not_json = blob::Encode(AsBytes("definitely not json"));
  CAIRN_ASSERT_OK(not_json);
  EXPECT_EQ(CodeOf(DecodeManifest(*not_json)), StatusCode::kDataLoss);
}

TEST(ManifestTest, FindLooksUpByName) {
  Manifest m = Sample();
  ASSERT_NE(m.Find("disk0.img"), nullptr);
  EXPECT_EQ(m.Find("disk0.img")->size, uint64_t{3} << 40);
  EXPECT_EQ(m.Find("disk1.img"), nullptr);
  EXPECT_EQ(m.archives[0].FileName(), "disk0.img.fidx");
  EXPECT_EQ(m.archives[1].FileName(), "vm.conf.blob");
}

TEST(ManifestTest, RejectsMalformedJson) {
  for (std::string_view text : {"", "{", "[]", "null", "42", "\"x\"", "{\"version\": 1,}",
                                "{\"version\": 1} trailing"}) {
    EXPECT_EQ(CodeOf(ManifestFromJson(text)), StatusCode::kDataLoss) << text;
  }
  std::string good = ManifestToJson(Sample());
  EXPECT_EQ(CodeOf(ManifestFromJson(good.substr(0, good.size() - 1))), StatusCode::kDataLoss);
}

TEST(ManifestTest, RejectsMissingFields) {
  for (const char* key :
       {"version", "type", "id", "time", "ns", "archives", "created_unix", "created_by"}) {
    json j = SampleJson();
    j.erase(key);
    Status s = FromJson(j);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << key;
    EXPECT_NE(s.message().find(key), std::string_view::npos) << s.ToString();
  }
  for (const char* key : {"name", "kind", "size", "csum", "chunk_size"}) {
    json j = SampleJson();
    j["archives"][0].erase(key);
    Status s = FromJson(j);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << key;
    EXPECT_NE(s.message().find(key), std::string_view::npos) << s.ToString();
  }
}

TEST(ManifestTest, RejectsWrongTypes) {
  const std::vector<std::pair<std::string, json>> top = {
      {"version", "1"},      {"version", 1.0},         {"version", true},
      {"version", 1.5},      {"version", 1e300},       {"type", 5},
      {"id", 100},           {"time", json::array()},  {"ns", nullptr},
      {"created_unix", "x"}, {"created_unix", 1.5},    {"created_unix", 1e300},
      {"created_by", false}, {"archives", json::object()}, {"archives", "disk0.img"}};
  for (const auto& [key, value] : top) {
    json j = SampleJson();
    j[key] = value;
    EXPECT_EQ(FromJson(j).code(), StatusCode::kDataLoss) << key << "=" << value.dump();
  }
  const std::vector<std::pair<std::string, json>> entry = {
      {"name", 1},          {"kind", 1},           {"size", "812"},    {"size", -1},
      {"size", 1.5},        {"size", -1e300},      {"size", true},     {"csum", 0},
      {"chunk_size", "4M"}, {"chunk_size", -4},    {"chunk_size", uint64_t{1} << 40},
      {"chunk_size", 1e20}};
  for (const auto& [key, value] : entry) {
    json j = SampleJson();
    j["archives"][0][key] = value;
    EXPECT_EQ(FromJson(j).code(), StatusCode::kDataLoss) << key << "=" << value.dump();
  }
  json j = SampleJson();
  j["archives"][0] = "disk0.img";
  EXPECT_EQ(FromJson(j).code(), StatusCode::kDataLoss);
}

TEST(ManifestTest, AcceptsIntegerExtremesThatFit) {
  json j = SampleJson();
  j["archives"][0]["size"] = ~uint64_t{0};
  j["created_unix"] = -1;
  auto m = ManifestFromJson(j.dump());
  CAIRN_ASSERT_OK(m);
  EXPECT_EQ(m->archives[0].size, ~uint64_t{0});
  EXPECT_EQ(m->created_unix, -1);
}

TEST(ManifestTest, RejectsUnknownVersion) {
  for (int v : {0, 2, -1, 1000}) {
    json j = SampleJson();
    j["version"] = v;
    Status s = FromJson(j);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << v;
    EXPECT_NE(s.message().find("version"), std::string_view::npos);
  }
}

TEST(ManifestTest, RejectsDuplicateArchiveNames) {
  json j = SampleJson();
  j["archives"].push_back(j["archives"][0]);
  Status s = FromJson(j);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("twice"), std::string_view::npos) << s.ToString();
}

TEST(ManifestTest, RejectsBadArchiveNamesAndKinds) {
  for (const char* name : {"", "disk0", ".img", "../disk0.img", "a/b.img", "-x.img", "disk 0.img",
                           "disk0.IMG"}) {
    json j = SampleJson();
    j["archives"][0]["name"] = name;
    EXPECT_EQ(FromJson(j).code(), StatusCode::kDataLoss) << name;
  }
  json j = SampleJson();
  j["archives"][0]["kind"] = "blob";  // disk0.img is an image
  EXPECT_EQ(FromJson(j).code(), StatusCode::kDataLoss);
  j = SampleJson();
  j["archives"][1]["kind"] = "img";
  EXPECT_EQ(FromJson(j).code(), StatusCode::kDataLoss);
  j = SampleJson();
  j["archives"][0]["kind"] = "tree";
  EXPECT_EQ(FromJson(j).code(), StatusCode::kDataLoss);
}

TEST(ManifestTest, RejectsMalformedCsum) {
  std::string good = crypto::DigestHex(crypto::Sha256(AsBytes("x")));
  for (std::string bad : {std::string(), good.substr(1), good + "0", "zz" + good.substr(2)}) {
    json j = SampleJson();
    j["archives"][1]["csum"] = bad;
    EXPECT_EQ(FromJson(j).code(), StatusCode::kDataLoss) << bad;
  }
}

TEST(ManifestTest, ParseArchiveName) {
  auto img = ParseArchiveName("disk0.img");
  CAIRN_ASSERT_OK(img);
  EXPECT_EQ(*img, ArchiveKind::kImage);
  auto blob = ParseArchiveName("vm.conf.blob");
  CAIRN_ASSERT_OK(blob);
  EXPECT_EQ(*blob, ArchiveKind::kBlob);
  CAIRN_EXPECT_OK(ParseArchiveName("A_b-c.9.img"));
  CAIRN_EXPECT_OK(ParseArchiveName("x.blob"));
  auto tree = ParseArchiveName("root.tree");
  CAIRN_ASSERT_OK(tree);
  EXPECT_EQ(*tree, ArchiveKind::kTree);
  CAIRN_EXPECT_OK(ParseArchiveName(std::string(124, 'a') + ".img"));  // 128 bytes

  for (std::string bad : {std::string(), std::string("disk0"), std::string(".img"),
                          std::string(".blob"), std::string("img"), std::string(".tree"),
                          std::string(".hidden.img"), std::string("-x.img"),
                          std::string("a/b.img"), std::string("a\\b.img"), std::string("a b.img"),
                          std::string("d\xc3\xa9.img"), std::string("x.img\n"),
                          std::string(125, 'a') + ".img"}) {
    auto r = ParseArchiveName(bad);
    EXPECT_EQ(CodeOf(r), StatusCode::kInvalidArgument) << bad;
  }
}

std::shared_ptr<const crypto::CryptConfig> ManifestKey(uint8_t fill) {
  crypto::Key256 k;
  k.fill(fill);
  return crypto::CryptConfig::FromMasterKey(k);
}

TEST(ManifestSignatureTest, SignedManifestRoundTripsAndChecks) {
  auto key = ManifestKey(1);
  std::string text = ManifestToJson(Sample(), key.get());
  auto m = ManifestFromJson(text);
  CAIRN_ASSERT_OK(m);
  ExpectSame(*m, Sample());
  EXPECT_TRUE(m->encrypted);
  EXPECT_EQ(m->key_fingerprint, key->fingerprint());
  CAIRN_EXPECT_OK(CheckManifestSignature(*m, *key));
  // Through the blob form too.
  auto stored = EncodeManifest(Sample(), key.get());
  CAIRN_ASSERT_OK(stored);
  auto decoded = DecodeManifest(*stored);
  CAIRN_ASSERT_OK(decoded);
  CAIRN_EXPECT_OK(CheckManifestSignature(*decoded, *key));
  // A plain manifest is not encrypted and needs no signature.
  auto plain = ManifestFromJson(ManifestToJson(Sample()));
  CAIRN_ASSERT_OK(plain);
  EXPECT_FALSE(plain->encrypted);
  CAIRN_EXPECT_OK(CheckManifestSignature(*plain, *key));
}

TEST(ManifestSignatureTest, AnotherKeyIsUnauthenticated) {
  auto m = ManifestFromJson(ManifestToJson(Sample(), ManifestKey(1).get()));
  CAIRN_ASSERT_OK(m);
  Status s = CheckManifestSignature(*m, *ManifestKey(2));
  EXPECT_EQ(CodeOf(s), StatusCode::kUnauthenticated);
  EXPECT_NE(s.message().find("another key"), std::string_view::npos) << s.ToString();
}

TEST(ManifestSignatureTest, EveryChangeWithoutTheKeyIsDetected) {
  auto key = ManifestKey(1);
  json j = json::parse(ManifestToJson(Sample(), key.get()));
  std::vector<std::function<void(json&)>> edits = {
      [](json& x) { x["archives"][0]["size"] = 1; },
      [](json& x) { x["archives"][0]["csum"] = crypto::DigestHex(crypto::Sha256(AsBytes("x"))); },
      [](json& x) { x["archives"].erase(1); },
      [](json& x) { x["created_by"] = "mallory"; },
      [](json& x) { x["extra"] = 1; },
      [](json& x) { x["signature"] = crypto::DigestHex(crypto::Sha256(AsBytes("forged"))); },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    json t = j;
    edits[i](t);
    auto m = ManifestFromJson(t.dump(2));
    CAIRN_ASSERT_OK(m);
    EXPECT_EQ(CodeOf(CheckManifestSignature(*m, *key)), StatusCode::kDataLoss) << "edit " << i;
  }
  // Claiming another key: not this key's manifest (so not trusted either).
  json other = j;
  other["crypt"]["key_fingerprint"] = crypto::DigestHex(ManifestKey(3)->fingerprint());
  auto m = ManifestFromJson(other.dump());
  CAIRN_ASSERT_OK(m);
  EXPECT_EQ(CodeOf(CheckManifestSignature(*m, *key)), StatusCode::kUnauthenticated);
  // Malformed crypt sections are DataLoss when parsing.
  for (auto edit : std::vector<std::function<void(json&)>>{
           [](json& x) { x.erase("signature"); },
           [](json& x) { x["crypt"]["mode"] = "sign"; },
           [](json& x) { x["crypt"]["key_fingerprint"] = "zz"; },
           [](json& x) { x["crypt"] = 5; },
       }) {
    json t = j;
    edit(t);
    EXPECT_EQ(CodeOf(ManifestFromJson(t.dump())), StatusCode::kDataLoss) << t.dump();
  }
  json stripped = j;
  stripped.erase("crypt");
  EXPECT_EQ(CodeOf(ManifestFromJson(stripped.dump())), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn::index
