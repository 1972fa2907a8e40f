#include "tree/tree_format.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "format/coding.h"
#include "format/magic.h"
#include "tests/unit_test_util.h"

namespace cairn::tree {
namespace {

using test_util::CodeOf;
using ::testing::HasSubstr;

// ---- Entry builders (name and path both set, as the decoder returns them) ----

Entry Make(EntryKind kind, const std::string& path) {
  Entry e;
  e.kind = kind;
  e.path = path;
  e.name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  e.mode = kind == EntryKind::kDirectory ? 0755 : 0644;
  e.uid = 1000;
  e.gid = 1000;
  e.user = "alice";
  e.group = "staff";
  e.mtime_ns = 1'700'000'000'123'456'789;
  return e;
}
Entry Root() { return Make(EntryKind::kDirectory, ""); }
Entry Dir(const std::string& path) { return Make(EntryKind::kDirectory, path); }
Entry File(const std::string& path, uint64_t offset, uint64_t size, bool linked = false) {
  Entry e = Make(EntryKind::kFile, path);
  e.payload_offset = offset;
  e.size = size;
  e.linked = linked;
  return e;
}
Entry Link(EntryKind kind, const std::string& path, const std::string& target) {
  Entry e = Make(kind, path);
  e.link_target = target;
  return e;
}

// ---- Raw stream writer: emits records as given, bypassing the encoder -----

struct Raw {
  Bytes b;

  Raw& Header(uint16_t version = format::kTreeVersion, uint8_t reserved = 0) {
    b.insert(b.end(), format::kTreeMagic.begin(), format::kTreeMagic.end());
    b.resize(b.size() + 8, 0);
    format::PutU16(b.data() + b.size() - 8, version);
    b[b.size() - 1] = reserved;
    return *this;
  }
  Raw& U8(uint8_t v) {
    b.push_back(v);
    return *this;
  }
  Raw& Var(uint64_t v) {
    for (; v >= 0x80; v >>= 7) b.push_back(static_cast<uint8_t>(v) | 0x80);
    b.push_back(static_cast<uint8_t>(v));
    return *this;
  }
  Raw& Str(std::string_view s) {
    Var(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Raw& Zig(int64_t v) {
    return Var((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  // Kind byte and the fields every record has.
  Raw& Common(uint8_t kind, const Entry& e) {
    U8(kind).Str(e.name).Var(e.mode).Var(e.uid).Var(e.gid).Str(e.user).Str(e.group);
    Zig(e.mtime_ns);
    Var(e.xattrs.size());
    for (const Xattr& x : e.xattrs) Str(x.name).Str(x.value);
    return *this;
  }
  // A whole record, written as the encoder would but without its checks.
  Raw& Rec(const Entry& e) {
    Common(static_cast<uint8_t>(e.kind), e);
    switch (e.kind) {
      case EntryKind::kFile:
        return Var(e.size).Var(e.payload_offset).U8(e.linked ? 1 : 0).Var(e.inode).Zig(e.ctime_ns);
      case EntryKind::kSymlink:
      case EntryKind::kHardlink:
        return Str(e.link_target);
      case EntryKind::kCharDevice:
      case EntryKind::kBlockDevice:
        return Var(e.rdev);
      default:
        return *this;
    }
  }
  Raw& End() { return U8(0); }
};

// A valid stream start: header and root record.
Raw Start() {
  Raw r;
  r.Header().Rec(Root());
  return r;
}

void ExpectDataLoss(const Bytes& stream, std::string_view what, uint64_t payload = 1 << 20) {
  auto decoded = DecodeTree(stream, payload);
  ASSERT_FALSE(decoded.ok()) << "expected a refusal mentioning: " << what;
  EXPECT_EQ(CodeOf(decoded), StatusCode::kDataLoss) << decoded.status().ToString();
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr(std::string(what)));
}

// Decodes `stream` handed out in pieces of random sizes in [1, max_piece].
Result<std::vector<Entry>> DecodeInPieces(const Bytes& stream, uint64_t payload, size_t max_piece,
                                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  size_t pos = 0;
  Bytes piece;  // a copy, so reading past it would be caught by sanitizers
  TreeDecoder decoder(
      [&]() -> Result<ByteSpan> {
        size_t n = std::min<size_t>(1 + rng() % max_piece, stream.size() - pos);
        piece.assign(stream.begin() + static_cast<ptrdiff_t>(pos),
                     stream.begin() + static_cast<ptrdiff_t>(pos + n));
        pos += n;
        return ByteSpan(piece);
      },
      payload);
  std::vector<Entry> out;
  while (true) {
    CAIRN_ASSIGN_OR_RETURN(std::optional<Entry> e, decoder.Next());
    if (!e) return out;
    out.push_back(std::move(*e));
  }
}

// Every kind, with xattrs and edge values, in one tree.
std::vector<Entry> AllKindsTree() {
  std::vector<Entry> t;
  Entry root = Root();
  root.xattrs = {{"system.posix_acl_default", std::string("\x02\0\0\0", 4)}, {"user.note", "root"}};
  t.push_back(root);
  t.push_back(File("a-file", 0, 10));
  Entry dev = Make(EntryKind::kBlockDevice, "blk");
  dev.rdev = (uint64_t{8} << 8) | 1;
  t.push_back(dev);
  Entry chr = Make(EntryKind::kCharDevice, "chr");
  chr.rdev = UINT64_MAX;
  t.push_back(chr);
  t.push_back(Dir("d"));
  Entry big = File("d/big", 10, uint64_t{1} << 40, true);
  big.inode = UINT64_MAX;
  big.ctime_ns = INT64_MIN;
  t.push_back(big);
  t.push_back(Dir("d/e"));
  t.push_back(Make(EntryKind::kFifo, "d/e/fifo"));
  Entry odd = File("d/e/odd", (uint64_t{1} << 40) + 10, 0);
  odd.mode = 07777;
  odd.uid = UINT32_MAX;
  odd.gid = 0;
  odd.user = "";
  odd.group = "";
  odd.mtime_ns = INT64_MIN;
  odd.inode = 1234567;
  odd.ctime_ns = 1'700'000'001'000'000'007;
  odd.xattrs = {{"security.selinux", "system_u:object_r:etc_t:s0"},
                {"user.empty", ""},
                {"user.z", std::string(kMaxXattrValue, 'z')}};
  t.push_back(odd);
  t.push_back(Link(EntryKind::kHardlink, "d/f-link", "d/big"));
  Entry neg = Link(EntryKind::kSymlink, "d/sym", "../../etc/passwd");
  neg.mtime_ns = -1;
  t.push_back(neg);
  t.push_back(Link(EntryKind::kSymlink, "e-abs", "/absolute/target"));
  t.push_back(Dir("empty"));
  t.push_back(Link(EntryKind::kHardlink, "z-link", "d/big"));
  return t;
}

// ---- Round trips --------------------------------------------------------------

TEST(TreeFormat, RoundTripAllKinds) {
  std::vector<Entry> tree = AllKindsTree();
  auto stream = EncodeTree(tree);
  CAIRN_ASSERT_OK(stream);
  auto decoded = DecodeTree(*stream, (uint64_t{1} << 40) + 10);
  CAIRN_ASSERT_OK(decoded);
  EXPECT_EQ(*decoded, tree);
  // The encoding is canonical: decoding and encoding again gives the bytes.
  auto again = EncodeTree(*decoded);
  CAIRN_ASSERT_OK(again);
  EXPECT_EQ(*again, *stream);
}

TEST(TreeFormat, EncodeTreeInfersNamesAndEnds) {
  std::vector<Entry> tree = AllKindsTree();
  for (Entry& e : tree) e.name.clear();  // only paths given
  auto stream = EncodeTree(tree);
  CAIRN_ASSERT_OK(stream);
  auto decoded = DecodeTree(*stream, (uint64_t{1} << 40) + 10);
  CAIRN_ASSERT_OK(decoded);
  EXPECT_EQ(*decoded, AllKindsTree());
}

TEST(TreeFormat, RootOnly) {
  auto stream = EncodeTree({Root()});
  CAIRN_ASSERT_OK(stream);
  EXPECT_EQ(stream->size(), Start().End().b.size());
  auto decoded = DecodeTree(*stream, 0);
  CAIRN_ASSERT_OK(decoded);
  EXPECT_EQ(*decoded, std::vector<Entry>{Root()});
}

TEST(TreeFormat, UnicodeNamesSortByBytes) {
  // Byte order: "Z" < "a" < "é" (0xC3 0xA9) < "日本" (0xE6...) < "🌲" (0xF0...).
  std::vector<Entry> tree = {Root(),
                             File("Z", 0, 1),
                             File("a", 1, 1),
                             Dir("é"),
                             File("é/日本語.txt", 2, 3),
                             Link(EntryKind::kSymlink, "🌲", "é")};
  auto stream = EncodeTree(tree);
  CAIRN_ASSERT_OK(stream);
  auto decoded = DecodeTree(*stream, 5);
  CAIRN_ASSERT_OK(decoded);
  EXPECT_EQ(*decoded, tree);
  EXPECT_EQ((*decoded)[4].path, "é/日本語.txt");
}

TEST(TreeFormat, DeepTreeAtTheDepthLimit) {
  std::vector<Entry> tree = {Root()};
  std::string path;
  for (size_t d = 1; d <= kMaxDepth; ++d) {
    path += path.empty() ? "a" : "/a";
    tree.push_back(Dir(path));
  }
  tree.push_back(File(path.substr(0, path.size() - 2) + "/b", 0, 0));  // depth kMaxDepth
  auto stream = EncodeTree(tree);
  CAIRN_ASSERT_OK(stream);

  bool given = false;
  TreeDecoder decoder(
      [&]() -> Result<ByteSpan> {
        if (given) return ByteSpan();
        given = true;
        return ByteSpan(*stream);
      },
      0);
  size_t max_depth = 0, count = 0;
  while (true) {
    auto e = decoder.Next();
    CAIRN_ASSERT_OK(e);
    if (!*e) break;
    EXPECT_EQ(**e, tree[count]);
    max_depth = std::max(max_depth, decoder.depth());
    ++count;
  }
  EXPECT_EQ(count, tree.size());
  EXPECT_EQ(max_depth, kMaxDepth);
  EXPECT_EQ(decoder.depth(), kMaxDepth);  // the last entry, "a/.../b"
}

TEST(TreeFormat, LargeTreeThroughSmallPieces) {
  // 100k entries: 100 directories of 999 files plus a few specials; the
  // encoder's pieces are collected, the decoder gets 1..100-byte pieces.
  std::vector<Entry> tree = {Root()};
  uint64_t offset = 0;
  for (int d = 0; d < 100; ++d) {
    std::string dir = fmt::format("dir{:03d}", d);
    tree.push_back(Dir(dir));
    for (int f = 0; f < 998; ++f) {
      Entry e = File(fmt::format("{}/file{:04d}", dir, f), offset, static_cast<uint64_t>(f));
      if (f % 100 == 0) e.xattrs = {{"user.n", std::to_string(f)}};
      offset += e.size;
      tree.push_back(e);
    }
    tree.push_back(Link(EntryKind::kSymlink, dir + "/link", "file0000"));
  }
  ASSERT_EQ(tree.size(), 100'001u);

  std::vector<size_t> pieces;
  Bytes stream;
  TreeEncoder encoder([&](ByteSpan piece) {
    pieces.push_back(piece.size());
    stream.insert(stream.end(), piece.begin(), piece.end());
    return Status::Ok();
  });
  CAIRN_ASSERT_OK(encoder.BeginDirectory(tree[0]));
  for (size_t i = 1; i < tree.size(); ++i) {
    const Entry& e = tree[i];
    if (e.kind == EntryKind::kDirectory) {
      if (i > 1) CAIRN_ASSERT_OK(encoder.EndDirectory());
      CAIRN_ASSERT_OK(encoder.BeginDirectory(e));
    } else {
      CAIRN_ASSERT_OK(encoder.Add(e));
    }
  }
  CAIRN_ASSERT_OK(encoder.EndDirectory());
  CAIRN_ASSERT_OK(encoder.EndDirectory());
  CAIRN_ASSERT_OK(encoder.Finish());
  EXPECT_EQ(encoder.bytes_written(), stream.size());
  ASSERT_GE(pieces.size(), 2u);
  for (size_t i = 0; i + 1 < pieces.size(); ++i) EXPECT_GE(pieces[i], size_t{1} << 20);

  auto decoded = DecodeInPieces(stream, offset, 100, 7);
  CAIRN_ASSERT_OK(decoded);
  ASSERT_EQ(decoded->size(), tree.size());
  EXPECT_TRUE(*decoded == tree);
}

TEST(TreeFormat, LargeRecordThroughOneBytePieces) {
  Entry f = File("f", 0, 0);
  for (int i = 0; i < 40; ++i) {
    f.xattrs.push_back({fmt::format("user.x{:02d}", i), std::string(kMaxXattrValue, 'a' + i % 26)});
  }
  std::vector<Entry> tree = {Root(), f, File("g", 0, 0)};
  auto stream = EncodeTree(tree);
  CAIRN_ASSERT_OK(stream);
  ASSERT_GT(stream->size(), size_t{2} << 20);
  auto decoded = DecodeInPieces(*stream, 0, 1, 1);
  CAIRN_ASSERT_OK(decoded);
  EXPECT_EQ(*decoded, tree);
}

TEST(TreeFormat, RandomPieceSizesAllKinds) {
  auto stream = EncodeTree(AllKindsTree());
  CAIRN_ASSERT_OK(stream);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto decoded = DecodeInPieces(*stream, (uint64_t{1} << 40) + 10, 1 + seed * 7, seed);
    CAIRN_ASSERT_OK(decoded);
    EXPECT_EQ(*decoded, AllKindsTree());
  }
}

TEST(TreeFormat, SourceErrorIsPassedOn) {
  TreeDecoder decoder([]() -> Result<ByteSpan> { return UnavailableError("store offline"); }, 0);
  auto e = decoder.Next();
  EXPECT_EQ(CodeOf(e), StatusCode::kUnavailable);
}

TEST(TreeFormat, ErrorsAreSticky) {
  Raw r = Start();
  r.U8(99);
  bool given = false;
  TreeDecoder decoder(
      [&]() -> Result<ByteSpan> {
        if (given) return ByteSpan();
        given = true;
        return ByteSpan(r.b);
      },
      0);
  auto root = decoder.Next();
  CAIRN_ASSERT_OK(root);
  EXPECT_EQ(CodeOf(decoder.Next()), StatusCode::kDataLoss);
  EXPECT_EQ(CodeOf(decoder.Next()), StatusCode::kDataLoss);
}

// ---- Encoder misuse -------------------------------------------------------------

TreeEncoder::Sink Discard() {
  return [](ByteSpan) { return Status::Ok(); };
}

TEST(TreeFormat, EncoderRefusesMisuse) {
  {
    TreeEncoder enc(Discard());
    EXPECT_EQ(CodeOf(enc.Add(File("a", 0, 0))), StatusCode::kInvalidArgument);
    EXPECT_EQ(CodeOf(enc.BeginDirectory(Dir("named-root"))), StatusCode::kInvalidArgument);
    EXPECT_EQ(CodeOf(enc.BeginDirectory(File("", 0, 0))), StatusCode::kInvalidArgument);
    EXPECT_EQ(CodeOf(enc.EndDirectory()), StatusCode::kInvalidArgument);
    EXPECT_EQ(CodeOf(enc.Finish()), StatusCode::kFailedPrecondition);
  }
  TreeEncoder enc(Discard());
  CAIRN_ASSERT_OK(enc.BeginDirectory(Root()));
  EXPECT_EQ(CodeOf(enc.Add(Dir("d"))), StatusCode::kInvalidArgument);
  for (const std::string& bad : std::vector<std::string>{
           "", ".", "..", "a/b", std::string("a\0b", 3), std::string(256, 'n')}) {
    Entry e = File("x", 0, 0);
    e.name = bad;
    EXPECT_EQ(CodeOf(enc.Add(e)), StatusCode::kInvalidArgument) << bad;
  }
  Entry bad_mode = File("m", 0, 0);
  bad_mode.mode = 010000;
  EXPECT_EQ(CodeOf(enc.Add(bad_mode)), StatusCode::kInvalidArgument);
  Entry bad_xattrs = File("m", 0, 0);
  bad_xattrs.xattrs = {{"user.b", ""}, {"user.a", ""}};
  EXPECT_EQ(CodeOf(enc.Add(bad_xattrs)), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(enc.Add(Link(EntryKind::kSymlink, "s", ""))), StatusCode::kInvalidArgument);

  CAIRN_ASSERT_OK(enc.Add(File("m", 100, 10)));
  EXPECT_EQ(CodeOf(enc.Add(File("m", 200, 1))), StatusCode::kInvalidArgument);  // duplicate
  EXPECT_EQ(CodeOf(enc.Add(File("l", 200, 1))), StatusCode::kInvalidArgument);  // order
  EXPECT_EQ(CodeOf(enc.Add(File("n", 109, 1))), StatusCode::kInvalidArgument);  // overlap
  EXPECT_EQ(CodeOf(enc.Add(File("n", UINT64_MAX, 1))), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(enc.Add(Link(EntryKind::kHardlink, "o", "m"))),  // m is not linked
            StatusCode::kInvalidArgument);
  CAIRN_ASSERT_OK(enc.Add(File("n", 110, 0, true)));
  CAIRN_ASSERT_OK(enc.Add(Link(EntryKind::kHardlink, "o", "n")));
  CAIRN_ASSERT_OK(enc.BeginDirectory(Dir("p")));
  EXPECT_EQ(CodeOf(enc.Finish()), StatusCode::kFailedPrecondition);
  CAIRN_ASSERT_OK(enc.EndDirectory());
  CAIRN_ASSERT_OK(enc.EndDirectory());
  EXPECT_EQ(CodeOf(enc.Add(File("q", 200, 0))), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(enc.EndDirectory()), StatusCode::kInvalidArgument);
  CAIRN_ASSERT_OK(enc.Finish());
}

TEST(TreeFormat, EncoderRefusesOversizedRecordAndDepth) {
  TreeEncoder enc(Discard());
  CAIRN_ASSERT_OK(enc.BeginDirectory(Root()));
  Entry huge = File("huge", 0, 0);
  for (int i = 0; i < 100; ++i) {
    huge.xattrs.push_back({fmt::format("user.{:03d}", i), std::string(kMaxXattrValue, 'x')});
  }
  EXPECT_EQ(CodeOf(enc.Add(huge)), StatusCode::kInvalidArgument);
  CAIRN_ASSERT_OK(enc.Add(File("ok", 0, 0)));  // the refused record left no trace

  std::vector<Entry> deep = {Root()};
  std::string path;
  for (size_t d = 1; d <= kMaxDepth + 1; ++d) {
    path += path.empty() ? "a" : "/a";
    deep.push_back(Dir(path));
  }
  EXPECT_EQ(CodeOf(EncodeTree(deep)), StatusCode::kInvalidArgument);
}

TEST(TreeFormat, EncodeTreeRefusesBadOrder) {
  EXPECT_EQ(CodeOf(EncodeTree({})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(EncodeTree({File("a", 0, 0)})), StatusCode::kInvalidArgument);
  // "d/x" with "d" not listed before it.
  EXPECT_EQ(CodeOf(EncodeTree({Root(), File("d/x", 0, 0)})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(EncodeTree({Root(), File("b", 0, 0), File("a", 0, 0)})),
            StatusCode::kInvalidArgument);
}

TEST(TreeFormat, SinkErrorIsPassedOn) {
  TreeEncoder enc([](ByteSpan) { return ResourceExhaustedError("disk full"); });
  CAIRN_ASSERT_OK(enc.BeginDirectory(Root()));
  CAIRN_ASSERT_OK(enc.EndDirectory());
  EXPECT_EQ(CodeOf(enc.Finish()), StatusCode::kResourceExhausted);
}

// ---- Decoder refusals, from hand-crafted bytes -------------------------------

TEST(TreeFormat, RefusesBadHeader) {
  ExpectDataLoss({}, "shorter than");
  const Bytes start = Start().b;
  ExpectDataLoss(Bytes(start.begin(), start.begin() + 15), "shorter than");
  Raw bad_magic = Start();
  bad_magic.End();
  bad_magic.b[0] = 'X';
  ExpectDataLoss(bad_magic.b, "bad magic");
  ExpectDataLoss(Raw().Header(2).Rec(Root()).End().b, "version 2");
  ExpectDataLoss(Raw().Header(format::kTreeVersion, 1).Rec(Root()).End().b, "reserved");
}

TEST(TreeFormat, RefusesUnknownKind) {
  ExpectDataLoss(Start().Rec(Dir("d")).U8(8).b, "unknown kind 8");
  ExpectDataLoss(Start().U8(0xFF).b, "unknown kind 255");
}

TEST(TreeFormat, RefusesBadNames) {
  ExpectDataLoss(Start().Rec(File("", 0, 0)).End().b, "empty name");
  ExpectDataLoss(Start().Rec(File(".", 0, 0)).End().b, "'.'");
  ExpectDataLoss(Start().Rec(Dir("d")).Rec(Dir("..")).End().End().End().b, "'..'");
  Entry slash = File("x", 0, 0);
  slash.name = "etc/passwd";
  ExpectDataLoss(Start().Rec(slash).End().b, "'/'");
  Entry nul = File("x", 0, 0);
  nul.name = std::string("a\0b", 3);
  ExpectDataLoss(Start().Rec(nul).End().b, "NUL");
  ExpectDataLoss(Start().Rec(File(std::string(256, 'n'), 0, 0)).End().b, "exceeds 255");
}

TEST(TreeFormat, RefusesNamesOutOfOrderAndDuplicates) {
  ExpectDataLoss(Start().Rec(Dir("d")).Rec(File("d/b", 0, 0)).Rec(File("d/a", 0, 0)).End().End().b,
                 "entry 'd/a': name not after 'b'");
  ExpectDataLoss(Start().Rec(File("a", 0, 0)).Rec(Make(EntryKind::kFifo, "a")).End().b,
                 "entry 'a': name not after 'a'");
  // A duplicate directory would merge two subtrees.
  ExpectDataLoss(Start().Rec(Dir("d")).End().Rec(Dir("d")).End().End().b, "not after 'd'");
  // Sorting is by bytes: "é" (0xC3…) sorts after "z".
  ExpectDataLoss(Start().Rec(File("é", 0, 0)).Rec(File("z", 0, 0)).End().b, "not after 'é'");
}

TEST(TreeFormat, RefusesTooDeepAndTooLong) {
  Raw deep = Start();
  for (size_t d = 0; d <= kMaxDepth; ++d) deep.Rec(Dir("a"));
  ExpectDataLoss(deep.b, fmt::format("deeper than {}", kMaxDepth));

  Raw longpath = Start();
  for (int i = 0; i < 16; ++i) longpath.Rec(Dir(std::string(255, 'p')));  // 4095 bytes: fine
  longpath.Rec(File("x", 0, 0));
  ExpectDataLoss(longpath.b, "path of 4097 bytes exceeds 4095");
}

TEST(TreeFormat, RefusesBadFields) {
  Entry mode = File("f", 0, 0);
  mode.mode = 010644;
  ExpectDataLoss(Start().Rec(mode).End().b, "entry 'f': mode 10644");
  ExpectDataLoss(Start().Common(2, File("f", 0, 0)).b, "truncated");  // mid-record
  Raw big_uid = Start();
  big_uid.U8(2).Str("f").Var(0644).Var(uint64_t{1} << 32);
  ExpectDataLoss(big_uid.b, "uid 4294967296 out of range");
  Entry user = File("f", 0, 0);
  user.user = std::string(256, 'u');
  ExpectDataLoss(Start().Rec(user).End().b, "user name of 256 bytes");
  Entry group = File("f", 0, 0);
  group.group = std::string("wh\0eel", 6);
  ExpectDataLoss(Start().Rec(group).End().b, "group name contains a NUL");
}

TEST(TreeFormat, RefusesBadXattrs) {
  Raw many = Start();
  many.Common(2, File("f", 0, 0));
  many.b.pop_back();  // replace the count
  many.Var(kMaxXattrs + 1);
  ExpectDataLoss(many.b, "1025 xattrs exceed");
  auto with = [](std::vector<Xattr> x) {
    Entry e = File("f", 0, 0);
    e.xattrs = std::move(x);
    return Start().Rec(e).End().b;
  };
  ExpectDataLoss(with({{"", "v"}}), "xattr name '' is empty");
  ExpectDataLoss(with({{std::string("user.\0", 6), "v"}}), "contains NUL");
  ExpectDataLoss(with({{std::string(256, 'x'), "v"}}), "xattr name of 256 bytes");
  ExpectDataLoss(with({{"user.b", ""}, {"user.a", ""}}), "xattr 'user.a' out of order");
  ExpectDataLoss(with({{"user.a", ""}, {"user.a", ""}}), "duplicated");
  ExpectDataLoss(with({{"user.a", std::string(kMaxXattrValue + 1, 'v')}}),
                 "xattr value of 65537 bytes");
}

TEST(TreeFormat, RefusesBadSymlinks) {
  ExpectDataLoss(Start().Rec(Link(EntryKind::kSymlink, "s", "")).End().b, "empty symlink target");
  ExpectDataLoss(Start().Rec(Link(EntryKind::kSymlink, "s", std::string("a\0b", 3))).End().b,
                 "symlink target contains a NUL");
  ExpectDataLoss(Start().Rec(Link(EntryKind::kSymlink, "s", std::string(4096, 't'))).End().b,
                 "symlink target of 4096 bytes");
}

TEST(TreeFormat, RefusesBadHardlinks) {
  // Nothing of that name.
  ExpectDataLoss(Start().Rec(Link(EntryKind::kHardlink, "h", "nowhere")).End().b,
                 "entry 'h': hardlink target 'nowhere'");
  // A file not marked as linked.
  ExpectDataLoss(Start().Rec(File("a", 0, 1)).Rec(Link(EntryKind::kHardlink, "h", "a")).End().b,
                 "hardlink target 'a'");
  // A later file.
  ExpectDataLoss(
      Start().Rec(Link(EntryKind::kHardlink, "a", "b")).Rec(File("b", 0, 1, true)).End().b,
      "hardlink target 'b'");
  // A directory, and a hardlink to a hardlink.
  ExpectDataLoss(Start().Rec(Dir("d")).End().Rec(Link(EntryKind::kHardlink, "h", "d")).End().b,
                 "hardlink target 'd'");
  ExpectDataLoss(Start()
                     .Rec(File("a", 0, 1, true))
                     .Rec(Link(EntryKind::kHardlink, "b", "a"))
                     .Rec(Link(EntryKind::kHardlink, "c", "b"))
                     .End()
                     .b,
                 "hardlink target 'b'");
  // The valid case decodes.
  CAIRN_EXPECT_OK(DecodeTree(
      Start().Rec(File("a", 0, 1, true)).Rec(Link(EntryKind::kHardlink, "b", "a")).End().b, 1));
}

TEST(TreeFormat, RefusesBadPayloadRanges) {
  ExpectDataLoss(Start().Rec(File("f", 0, 11)).End().b, "outside the 10-byte payload", 10);
  ExpectDataLoss(Start().Rec(File("f", 10, 1)).End().b, "outside", 10);
  ExpectDataLoss(Start().Rec(File("f", UINT64_MAX, 2)).End().b, "outside", UINT64_MAX);
  ExpectDataLoss(Start().Rec(File("a", 0, 5)).Rec(File("b", 4, 1)).End().b,
                 "entry 'b': payload range starts at 4, before the previous file's end 5");
  ExpectDataLoss(Start().Rec(File("a", 5, 5)).Rec(File("b", 0, 1)).End().b, "before");
  Raw flags = Start();
  flags.Common(2, File("f", 0, 0)).Var(0).Var(0).U8(0x02).Var(0).Var(0).End();
  ExpectDataLoss(flags.b, "unknown file flags 0x02");
  // Exactly at the end of the payload is fine, and empty files may share an offset.
  CAIRN_EXPECT_OK(DecodeTree(
      Start().Rec(File("a", 0, 10)).Rec(File("b", 10, 0)).Rec(File("c", 10, 0)).End().b, 10));
}

TEST(TreeFormat, RefusesOversizedRecord) {
  Entry f = File("f", 0, 0);
  for (int i = 0; i < 70; ++i) {
    f.xattrs.push_back({fmt::format("user.{:02d}", i), std::string(kMaxXattrValue, 'v')});
  }
  Bytes stream = Start().Rec(f).End().b;
  ExpectDataLoss(stream, "entry 'f': record of");
  // Fed in pieces, the decoder stops buffering at the limit.
  auto decoded = DecodeInPieces(stream, 0, 4096, 3);
  EXPECT_EQ(CodeOf(decoded), StatusCode::kDataLoss);
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr("exceeds 4194304 bytes"));
}

TEST(TreeFormat, RefusesBadVarints) {
  Raw overlong = Start();
  overlong.U8(2).Str("f").U8(0x80).U8(0x00);  // mode 0 in two bytes
  ExpectDataLoss(overlong.b, "entry 'f': mode: overlong varint");
  Raw overflow = Start();
  overflow.U8(2).Str("f").Var(0).Var(0).Var(0).Str("").Str("");
  for (int i = 0; i < 9; ++i) overflow.U8(0xFF);
  overflow.U8(0x02);
  ExpectDataLoss(overflow.b, "mtime: varint overflows 64 bits");
  Raw huge_len = Start();
  huge_len.U8(2).Var(UINT64_MAX);
  ExpectDataLoss(huge_len.b, "name of 18446744073709551615 bytes");
}

TEST(TreeFormat, RefusesTruncationAtEveryByte) {
  auto stream = EncodeTree(AllKindsTree());
  CAIRN_ASSERT_OK(stream);
  for (size_t n = 0; n < stream->size(); ++n) {
    if (n > 200 && n < stream->size() - 200 && n % 997 != 0) continue;  // the big xattr
    Bytes cut(stream->begin(), stream->begin() + static_cast<ptrdiff_t>(n));
    auto decoded = DecodeTree(cut, (uint64_t{1} << 40) + 10);
    ASSERT_FALSE(decoded.ok()) << n;
    EXPECT_EQ(CodeOf(decoded), StatusCode::kDataLoss) << n;
  }
  ExpectDataLoss(Start().Rec(Dir("d")).End().b, "truncated");
}

TEST(TreeFormat, RefusesBadStructure) {
  ExpectDataLoss(Raw().Header().End().b, "no open directory");
  ExpectDataLoss(Raw().Header().Rec(File("f", 0, 0)).End().b,
                 "first record is a file named 'f', not the root");
  ExpectDataLoss(Raw().Header().Rec(Dir("d")).End().b, "not the root");
  ExpectDataLoss(Start().End().End().b, "bytes after the root directory's end");
  ExpectDataLoss(Start().End().Rec(Root()).End().b, "bytes after");
  ExpectDataLoss(Start().End().U8(0x42).b, "bytes after");
}

TEST(TreeFormat, MessagesEscapeHostileBytes) {
  Entry e = File("x", 0, 0);
  e.name = std::string("a\x01\xff", 3);
  e.mode = 077777;
  auto decoded = DecodeTree(Start().Rec(e).End().b, 0);
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr("a\\x01\\xff"));
}

TEST(TreeFormat, IsValidName) {
  EXPECT_TRUE(IsValidName("a"));
  EXPECT_TRUE(IsValidName("..."));
  EXPECT_TRUE(IsValidName(std::string(255, 'n')));
  EXPECT_FALSE(IsValidName(""));
  EXPECT_FALSE(IsValidName("."));
  EXPECT_FALSE(IsValidName(".."));
  EXPECT_FALSE(IsValidName("a/b"));
  EXPECT_FALSE(IsValidName(std::string("a\0", 2)));
  EXPECT_FALSE(IsValidName(std::string(256, 'n')));
}

}  // namespace
}  // namespace cairn::tree
