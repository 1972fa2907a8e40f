#include "tree/tree_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "format/coding.h"
#include "format/magic.h"

namespace cairn::tree {
namespace {

// Stream header (docs/FORMAT.md, "Tree archive metadata stream"): magic,
// u16 version, 6 zero bytes.
constexpr size_t kHeaderSize = 16;
constexpr size_t kOffVersion = 8;
constexpr size_t kOffReserved = 10;

constexpr uint8_t kEndRecord = 0;
constexpr uint8_t kFlagLinked = 0x01;
constexpr size_t kMaxVarintBytes = 10;
constexpr size_t kMaxOwnerName = 255;
constexpr size_t kMaxXattrName = 255;
constexpr size_t kMaxLinkTarget = 4095;
constexpr uint32_t kModeMask = 07777;
// The encoder hands the sink pieces of about this size.
constexpr size_t kFlushThreshold = 1u << 20;

bool IsKnownKind(uint8_t kind) {
  return kind >= static_cast<uint8_t>(EntryKind::kDirectory) &&
         kind <= static_cast<uint8_t>(EntryKind::kFifo);
}

std::string_view KindName(EntryKind kind) {
  switch (kind) {
    case EntryKind::kDirectory:
      return "directory";
    case EntryKind::kFile:
      return "file";
    case EntryKind::kSymlink:
      return "symlink";
    case EntryKind::kHardlink:
      return "hardlink";
    case EntryKind::kCharDevice:
      return "char device";
    case EntryKind::kBlockDevice:
      return "block device";
    case EntryKind::kFifo:
      return "fifo";
  }
  return "unknown kind";
}

// Length of the well-formed UTF-8 sequence at s[i], 0 when it is not one
// (the strict table: no overlongs, no surrogates, nothing past U+10FFFF).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t b = at(i);
  size_t n = b >= 0xC2 && b <= 0xDF   ? 2
             : b >= 0xE0 && b <= 0xEF ? 3
             : b >= 0xF0 && b <= 0xF4 ? 4
                                      : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b == 0xE0) lo = 0xA0;
  if (b == 0xED) hi = 0x9F;
  if (b == 0xF0) lo = 0x90;
  if (b == 0xF4) hi = 0x8F;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  }
  return n;
}

// Hostile names go into error messages (and from there into JSON output):
// control bytes, backslashes and bytes that are not valid UTF-8 become \xNN.
std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<uint8_t>(s[i]);
    if (b >= 0x80) {
      if (size_t n = Utf8SequenceLength(s, i); n != 0) {
        out.append(s.substr(i, n));
        i += n;
        continue;
      }
    }
    if (b < 0x20 || b == 0x7F || b == '\\' || b >= 0x80) {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += static_cast<char>(b);
    }
    ++i;
  }
  return out;
}

std::string Where(const std::string& path) {
  return path.empty() ? std::string("root directory") : "entry '" + Printable(path) + "'";
}

std::string JoinPath(const std::string& parent, std::string_view name) {
  if (parent.empty()) return std::string(name);
  std::string p;
  p.reserve(parent.size() + 1 + name.size());
  p.append(parent).append("/").append(name);
  return p;
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// What is wrong with an entry name ("" when nothing).
std::string NameProblem(std::string_view name) {
  if (name.empty()) return "empty name";
  if (name == "." || name == "..") return fmt::format("name '{}' is not allowed", name);
  if (name.find('/') != std::string_view::npos) return "name contains '/'";
  if (HasNul(name)) return "name contains a NUL byte";
  if (name.size() > kMaxNameLength) {
    return fmt::format("name of {} bytes exceeds {}", name.size(), kMaxNameLength);
  }
  return "";
}

// What is wrong with the fields of `e` that need no context (mode, owner
// names, xattrs, symlink target); "" when nothing. Shared by encoder and
// decoder so that what one writes the other accepts.
std::string FieldProblem(const Entry& e) {
  if (!IsKnownKind(static_cast<uint8_t>(e.kind))) {
    return fmt::format("unknown kind {}", static_cast<int>(e.kind));
  }
  if (e.mode > kModeMask) return fmt::format("mode {:o} has bits beyond 07777", e.mode);
  for (const auto* owner : {&e.user, &e.group}) {
    const char* what = owner == &e.user ? "user" : "group";
    if (owner->size() > kMaxOwnerName) {
      return fmt::format("{} name of {} bytes exceeds {}", what, owner->size(), kMaxOwnerName);
    }
    if (HasNul(*owner)) return fmt::format("{} name contains a NUL byte", what);
  }
  if (e.xattrs.size() > kMaxXattrs) {
    return fmt::format("{} xattrs exceed the limit of {}", e.xattrs.size(), kMaxXattrs);
  }
  for (size_t i = 0; i < e.xattrs.size(); ++i) {
    const Xattr& x = e.xattrs[i];
    if (x.name.empty() || HasNul(x.name) || x.name.size() > kMaxXattrName) {
      return fmt::format("xattr name '{}' is empty, contains NUL or exceeds {} bytes",
                         Printable(x.name), kMaxXattrName);
    }
    if (i > 0 && !(e.xattrs[i - 1].name < x.name)) {
      return fmt::format("xattr '{}' out of order or duplicated (xattrs must be sorted by name)",
                         Printable(x.name));
    }
    if (x.value.size() > kMaxXattrValue) {
      return fmt::format("xattr '{}' value of {} bytes exceeds {}", Printable(x.name),
                         x.value.size(), kMaxXattrValue);
    }
  }
  if (e.kind == EntryKind::kSymlink) {
    if (e.link_target.empty()) return "empty symlink target";
    if (HasNul(e.link_target)) return "symlink target contains a NUL byte";
    if (e.link_target.size() > kMaxLinkTarget) {
      return fmt::format("symlink target of {} bytes exceeds {}", e.link_target.size(),
                         kMaxLinkTarget);
    }
  }
  return "";
}

// ---- Encoding ---------------------------------------------------------------

void PutVarint(Bytes& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

void PutString(Bytes& out, std::string_view s) {
  PutVarint(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t UnZigZag(uint64_t u) { return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1)); }

void PutRecord(Bytes& out, const Entry& e) {
  out.push_back(static_cast<uint8_t>(e.kind));
  PutString(out, e.name);
  PutVarint(out, e.mode);
  PutVarint(out, e.uid);
  PutVarint(out, e.gid);
  PutString(out, e.user);
  PutString(out, e.group);
  PutVarint(out, ZigZag(e.mtime_ns));
  PutVarint(out, e.xattrs.size());
  for (const Xattr& x : e.xattrs) {
    PutString(out, x.name);
    PutString(out, x.value);
  }
  switch (e.kind) {
    case EntryKind::kFile:
      PutVarint(out, e.size);
      PutVarint(out, e.payload_offset);
      out.push_back(e.linked ? kFlagLinked : 0);
      PutVarint(out, e.inode);
      PutVarint(out, ZigZag(e.ctime_ns));
      break;
    case EntryKind::kSymlink:
    case EntryKind::kHardlink:
      PutString(out, e.link_target);
      break;
    case EntryKind::kCharDevice:
    case EntryKind::kBlockDevice:
      PutVarint(out, e.rdev);
      break;
    case EntryKind::kDirectory:
    case EntryKind::kFifo:
      break;
  }
}

// ---- Decoding ---------------------------------------------------------------

// A cursor over the buffered bytes of one record. A read that runs past the
// buffer sets `more` (fetch more and parse again); a malformed field sets
// `problem`. Either way the read returns false.
struct RecordReader {
  RecordReader(const uint8_t* begin, const uint8_t* stop) : p(begin), start(begin), end(stop) {}

  const uint8_t* p;
  const uint8_t* start;
  const uint8_t* end;
  bool more = false;
  std::string problem;

  size_t consumed() const { return static_cast<size_t>(p - start); }

  bool Byte(uint8_t* v) {
    if (p == end) return (more = true, false);
    *v = *p++;
    return true;
  }

  bool Varint(uint64_t* v, std::string_view what) {
    uint64_t result = 0;
    for (size_t i = 0; i < kMaxVarintBytes; ++i) {
      if (p == end) return (more = true, false);
      uint8_t b = *p++;
      if (i == kMaxVarintBytes - 1 && b > 1) {
        problem = fmt::format("{}: varint overflows 64 bits", what);
        return false;
      }
      result |= uint64_t{b & 0x7Fu} << (7 * i);
      if ((b & 0x80) == 0) {
        if (b == 0 && i > 0) {
          problem = fmt::format("{}: overlong varint", what);
          return false;
        }
        *v = result;
        return true;
      }
    }
    problem = fmt::format("{}: varint longer than {} bytes", what, kMaxVarintBytes);
    return false;
  }

  bool U32(uint32_t* v, std::string_view what) {
    uint64_t u;
    if (!Varint(&u, what)) return false;
    if (u > UINT32_MAX) {
      problem = fmt::format("{} {} out of range", what, u);
      return false;
    }
    *v = static_cast<uint32_t>(u);
    return true;
  }

  // A string of at most `max` bytes; longer ones are refused before their
  // bytes are read (hostile lengths never make the decoder wait or buffer).
  bool String(std::string* s, size_t max, std::string_view what) {
    uint64_t len;
    if (!Varint(&len, what)) return false;
    if (len > max) {
      problem = fmt::format("{} of {} bytes exceeds {}", what, len, max);
      return false;
    }
    if (static_cast<uint64_t>(end - p) < len) return (more = true, false);
    s->assign(reinterpret_cast<const char*>(p), len);
    p += len;
    return true;
  }
};

// The kind-specific tail of a record.
bool ReadKindFields(RecordReader& r, Entry& e) {
  switch (e.kind) {
    case EntryKind::kFile: {
      uint8_t flags;
      if (!r.Varint(&e.size, "file size") || !r.Varint(&e.payload_offset, "payload offset") ||
          !r.Byte(&flags)) {
        return false;
      }
      if ((flags & ~kFlagLinked) != 0) {
        r.problem = fmt::format("unknown file flags 0x{:02x}", flags);
        return false;
      }
      e.linked = (flags & kFlagLinked) != 0;
      uint64_t ctime;
      if (!r.Varint(&e.inode, "inode") || !r.Varint(&ctime, "ctime")) return false;
      e.ctime_ns = UnZigZag(ctime);
      return true;
    }
    case EntryKind::kSymlink:
      return r.String(&e.link_target, kMaxLinkTarget, "symlink target");
    case EntryKind::kHardlink:
      return r.String(&e.link_target, kMaxPathLength, "hardlink target");
    case EntryKind::kCharDevice:
    case EntryKind::kBlockDevice:
      return r.Varint(&e.rdev, "rdev");
    case EntryKind::kDirectory:
    case EntryKind::kFifo:
      return true;
  }
  return true;
}

// Parses the non-END record at r.p (its kind byte already read) into `e`,
// with e.path = parent + name.
bool ReadEntryFields(RecordReader& r, const std::string& parent, Entry& e) {
  if (!r.String(&e.name, kMaxNameLength, "name")) return false;
  e.path = JoinPath(parent, e.name);
  uint64_t count;
  if (!r.U32(&e.mode, "mode") || !r.U32(&e.uid, "uid") || !r.U32(&e.gid, "gid") ||
      !r.String(&e.user, kMaxOwnerName, "user name") ||
      !r.String(&e.group, kMaxOwnerName, "group name")) {
    return false;
  }
  uint64_t mtime;
  if (!r.Varint(&mtime, "mtime") || !r.Varint(&count, "xattr count")) return false;
  e.mtime_ns = UnZigZag(mtime);
  if (count > kMaxXattrs) {
    r.problem = fmt::format("{} xattrs exceed the limit of {}", count, kMaxXattrs);
    return false;
  }
  e.xattrs.resize(count);
  for (Xattr& x : e.xattrs) {
    if (!r.String(&x.name, kMaxXattrName, "xattr name") ||
        !r.String(&x.value, kMaxXattrValue, "xattr value")) {
      return false;
    }
  }
  return ReadKindFields(r, e);
}

}  // namespace

int CompareTreePaths(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    auto x = static_cast<unsigned char>(a[i] == '/' ? 0 : a[i]);
    auto y = static_cast<unsigned char>(b[i] == '/' ? 0 : b[i]);
    if (x != y) return x < y ? -1 : 1;
  }
  return a.size() == b.size() ? 0 : (a.size() < b.size() ? -1 : 1);
}

bool IsValidName(std::string_view name) { return NameProblem(name).empty(); }

// ---- TreeEncoder ------------------------------------------------------------

TreeEncoder::TreeEncoder(Sink sink) : sink_(std::move(sink)) {}

Status TreeEncoder::Flush(bool force) {
  if (buf_.empty() || (!force && buf_.size() < kFlushThreshold)) return Status::Ok();
  CAIRN_RETURN_IF_ERROR(sink_(ByteSpan(buf_)));
  bytes_written_ += buf_.size();
  buf_.clear();
  return Status::Ok();
}

Status TreeEncoder::CheckNext(const Entry& e, std::string* path) {
  auto misuse = [&](std::string_view what) {
    return InvalidArgumentError(fmt::format("tree encoder: {}: {}", Where(*path), what));
  };
  if (finished_ || (started_ && open_.empty())) {
    return InvalidArgumentError("tree encoder: entry after the root directory was ended");
  }
  if (!started_) {
    if (e.kind != EntryKind::kDirectory || !e.name.empty()) {
      return InvalidArgumentError(
          "tree encoder: the first entry must be the root directory (kind directory, name \"\")");
    }
    path->clear();
  } else {
    OpenDir& parent = open_.back();
    *path = JoinPath(parent.path, e.name);
    if (std::string p = NameProblem(e.name); !p.empty()) return misuse(p);
    if (parent.has_child && !(parent.last_child < e.name)) {
      return misuse(fmt::format("name not after '{}' (names must be strictly increasing)",
                                Printable(parent.last_child)));
    }
    if (open_.size() > kMaxDepth) return misuse(fmt::format("deeper than {}", kMaxDepth));
    if (path->size() > kMaxPathLength) {
      return misuse(fmt::format("path of {} bytes exceeds {}", path->size(), kMaxPathLength));
    }
  }
  if (std::string p = FieldProblem(e); !p.empty()) return misuse(p);
  if (e.kind == EntryKind::kFile) {
    if (e.payload_offset < next_payload_) {
      return misuse(fmt::format("payload range starts at {}, before the previous file's end {}",
                                e.payload_offset, next_payload_));
    }
    if (e.size > UINT64_MAX - e.payload_offset) return misuse("payload range overflows");
  }
  if (e.kind == EntryKind::kHardlink && !linked_files_.contains(e.link_target)) {
    return misuse(fmt::format("hardlink target '{}' is not an earlier file marked as linked",
                              Printable(e.link_target)));
  }
  return Status::Ok();
}

Status TreeEncoder::Emit(const Entry& e) {
  std::string path;
  CAIRN_RETURN_IF_ERROR(CheckNext(e, &path));
  const size_t mark = buf_.size();
  if (!started_) {
    buf_.resize(mark + kHeaderSize, 0);
    std::memcpy(buf_.data() + mark, format::kTreeMagic.data(), format::kTreeMagic.size());
    format::PutU16(buf_.data() + mark + kOffVersion, format::kTreeVersion);
  }
  const size_t record_start = buf_.size();
  PutRecord(buf_, e);
  if (size_t n = buf_.size() - record_start; n > kMaxRecordSize) {
    buf_.resize(mark);
    return InvalidArgumentError(fmt::format("tree encoder: {}: record of {} bytes exceeds {}",
                                            Where(path), n, kMaxRecordSize));
  }
  started_ = true;
  if (!open_.empty()) {
    open_.back().last_child = e.name;
    open_.back().has_child = true;
  }
  if (e.kind == EntryKind::kFile) {
    next_payload_ = e.payload_offset + e.size;
    if (e.linked) linked_files_.insert(path);
  }
  if (e.kind == EntryKind::kDirectory) open_.push_back(OpenDir{std::move(path), "", false});
  return Flush(false);
}

Status TreeEncoder::BeginDirectory(const Entry& dir) {
  if (dir.kind != EntryKind::kDirectory) {
    return InvalidArgumentError(fmt::format("tree encoder: BeginDirectory with a {} entry '{}'",
                                            KindName(dir.kind), Printable(dir.name)));
  }
  return Emit(dir);
}

Status TreeEncoder::Add(const Entry& entry) {
  if (entry.kind == EntryKind::kDirectory) {
    return InvalidArgumentError(fmt::format(
        "tree encoder: Add with directory '{}' (use BeginDirectory)", Printable(entry.name)));
  }
  if (!started_) {
    return InvalidArgumentError("tree encoder: Add before BeginDirectory(root)");
  }
  return Emit(entry);
}

Status TreeEncoder::EndDirectory() {
  if (finished_ || open_.empty()) {
    return InvalidArgumentError("tree encoder: EndDirectory with no open directory");
  }
  buf_.push_back(kEndRecord);
  open_.pop_back();
  return Flush(false);
}

Status TreeEncoder::Finish() {
  if (finished_) return FailedPreconditionError("tree encoder: Finish called twice");
  if (!started_ || !open_.empty()) {
    return FailedPreconditionError(
        fmt::format("tree encoder: Finish with {} directories still open{}", open_.size(),
                    started_ ? "" : " (no root directory written)"));
  }
  CAIRN_RETURN_IF_ERROR(Flush(true));
  finished_ = true;
  return Status::Ok();
}

// ---- TreeDecoder ------------------------------------------------------------

TreeDecoder::TreeDecoder(Source source, uint64_t payload_size)
    : source_(std::move(source)), payload_size_(payload_size) {}

Status TreeDecoder::Corrupt(std::string_view what) const {
  return DataLossError(fmt::format("tree metadata: {} (record at byte {})", what, record_start_));
}

Status TreeDecoder::Fill(size_t want) {
  while (buf_.size() - pos_ < want && !source_done_) {
    if (pos_ > 0) {  // drop consumed bytes before growing
      buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(pos_));
      consumed_ += pos_;
      pos_ = 0;
    }
    CAIRN_ASSIGN_OR_RETURN(ByteSpan piece, source_());
    if (piece.empty()) {
      source_done_ = true;
      break;
    }
    buf_.insert(buf_.end(), piece.begin(), piece.end());
  }
  return Status::Ok();
}

Status TreeDecoder::ReadHeader() {
  CAIRN_RETURN_IF_ERROR(Fill(kHeaderSize));
  record_start_ = 0;
  if (buf_.size() - pos_ < kHeaderSize) {
    return Corrupt(fmt::format("stream of {} bytes is shorter than the {}-byte header",
                               buf_.size() - pos_, kHeaderSize));
  }
  const uint8_t* h = buf_.data() + pos_;
  if (std::memcmp(h, format::kTreeMagic.data(), format::kTreeMagic.size()) != 0) {
    return Corrupt("not a cairn tree metadata stream (bad magic)");
  }
  if (uint16_t v = format::GetU16(h + kOffVersion); v != format::kTreeVersion) {
    return Corrupt(fmt::format("unsupported tree metadata version {}", v));
  }
  if (!std::all_of(h + kOffReserved, h + kHeaderSize, [](uint8_t b) { return b == 0; })) {
    return Corrupt("reserved header bytes not zero");
  }
  pos_ += kHeaderSize;
  return Status::Ok();
}

Result<std::optional<Entry>> TreeDecoder::Next() {
  if (!error_.ok()) return error_;
  auto next = NextImpl();
  if (!next.ok()) error_ = next.status();
  return next;
}

Result<std::optional<Entry>> TreeDecoder::NextImpl() {
  if (done_) return std::optional<Entry>();
  if (!started_) {
    CAIRN_RETURN_IF_ERROR(ReadHeader());
    started_ = true;
  }
  while (true) {
    record_start_ = consumed_ + pos_;
    static const std::string kRootPath;
    const std::string& parent = stack_.empty() ? kRootPath : stack_.back().path;
    RecordReader r(buf_.data() + pos_, buf_.data() + buf_.size());
    uint8_t kind = 0;
    Entry e;
    bool complete = r.Byte(&kind);
    if (complete && kind != kEndRecord) {
      if (!IsKnownKind(kind)) {
        return Corrupt(fmt::format("entry in {}: unknown kind {}", Where(parent), kind));
      }
      e.kind = static_cast<EntryKind>(kind);
      complete = ReadEntryFields(r, parent, e);
    }
    if (!r.problem.empty()) {
      std::string where = !e.name.empty()  ? Where(e.path)
                          : stack_.empty() ? std::string("first record")
                                           : "entry in " + Where(parent);
      return Corrupt(fmt::format("{}: {}", where, r.problem));
    }
    const size_t avail = buf_.size() - pos_;
    if (!complete) {
      if (avail >= kMaxRecordSize) {
        return Corrupt(fmt::format("record in {} exceeds {} bytes", Where(parent), kMaxRecordSize));
      }
      if (source_done_) {
        return Corrupt(fmt::format("stream truncated after {} bytes, inside a record in {}",
                                   consumed_ + buf_.size(), Where(parent)));
      }
      // Ask for twice what is buffered so reparsing a long record costs
      // linear time in total, not quadratic.
      CAIRN_RETURN_IF_ERROR(Fill(std::min(std::max(2 * avail, avail + 256), kMaxRecordSize)));
      continue;
    }
    if (r.consumed() > kMaxRecordSize) {
      return Corrupt(fmt::format("{}: record of {} bytes exceeds {}", Where(e.path), r.consumed(),
                                 kMaxRecordSize));
    }
    pos_ += r.consumed();
    if (kind == kEndRecord) {
      if (stack_.empty()) {
        return Corrupt("end-of-directory record with no open directory (the root must come first)");
      }
      stack_.pop_back();
      if (stack_.empty()) {
        CAIRN_RETURN_IF_ERROR(CheckStreamEnd());
        done_ = true;
        return std::optional<Entry>();
      }
      continue;
    }
    CAIRN_RETURN_IF_ERROR(Accept(e));
    return std::optional<Entry>(std::move(e));
  }
}

Status TreeDecoder::CheckStreamEnd() {
  CAIRN_RETURN_IF_ERROR(Fill(1));
  if (buf_.size() > pos_) {
    record_start_ = consumed_ + pos_;
    return Corrupt("bytes after the root directory's end");
  }
  return Status::Ok();
}

Status TreeDecoder::Accept(const Entry& e) {
  auto bad = [&](std::string_view what) {
    return Corrupt(fmt::format("{}: {}", Where(e.path), what));
  };
  if (stack_.empty()) {
    if (e.kind != EntryKind::kDirectory || !e.name.empty()) {
      return Corrupt(fmt::format("first record is a {} named '{}', not the root directory",
                                 KindName(e.kind), Printable(e.name)));
    }
  } else {
    Open& parent = stack_.back();
    if (std::string p = NameProblem(e.name); !p.empty()) {
      return Corrupt(
          fmt::format("entry in {}: {} ('{}')", Where(parent.path), p, Printable(e.name)));
    }
    if (parent.has_child && !(parent.last_child < e.name)) {
      return bad(
          fmt::format("name not after '{}' (names must be strictly increasing, "
                      "without duplicates)",
                      Printable(parent.last_child)));
    }
    if (stack_.size() > kMaxDepth) return bad(fmt::format("deeper than {}", kMaxDepth));
    if (e.path.size() > kMaxPathLength) {
      return bad(fmt::format("path of {} bytes exceeds {}", e.path.size(), kMaxPathLength));
    }
  }
  if (std::string p = FieldProblem(e); !p.empty()) return bad(p);
  if (e.kind == EntryKind::kFile) {
    if (e.size > UINT64_MAX - e.payload_offset || e.payload_offset + e.size > payload_size_) {
      return bad(fmt::format("payload range [{}, +{}) outside the {}-byte payload stream",
                             e.payload_offset, e.size, payload_size_));
    }
    if (e.payload_offset < next_payload_) {
      return bad(fmt::format("payload range starts at {}, before the previous file's end {}",
                             e.payload_offset, next_payload_));
    }
  }
  if (e.kind == EntryKind::kHardlink && !linked_files_.contains(e.link_target)) {
    return bad(fmt::format("hardlink target '{}' is not an earlier file marked as linked",
                           Printable(e.link_target)));
  }
  // Accepted: update the state.
  if (!stack_.empty()) {
    stack_.back().last_child = e.name;
    stack_.back().has_child = true;
  }
  depth_ = stack_.size();
  if (e.kind == EntryKind::kFile) {
    next_payload_ = e.payload_offset + e.size;
    if (e.linked) linked_files_.insert(e.path);
  }
  if (e.kind == EntryKind::kDirectory) stack_.push_back(Open{e.path, "", false});
  return Status::Ok();
}

// ---- Whole-stream helpers ---------------------------------------------------

Result<std::vector<Entry>> DecodeTree(ByteSpan stream, uint64_t payload_size) {
  bool given = false;
  TreeDecoder decoder(
      [&]() -> Result<ByteSpan> {
        if (given) return ByteSpan();
        given = true;
        return stream;
      },
      payload_size);
  std::vector<Entry> entries;
  while (true) {
    CAIRN_ASSIGN_OR_RETURN(std::optional<Entry> e, decoder.Next());
    if (!e) return entries;
    entries.push_back(std::move(*e));
  }
}

Result<Bytes> EncodeTree(const std::vector<Entry>& entries) {
  Bytes out;
  TreeEncoder encoder([&](ByteSpan piece) {
    out.insert(out.end(), piece.begin(), piece.end());
    return Status::Ok();
  });
  if (entries.empty()) return InvalidArgumentError("EncodeTree: no entries (not even the root)");
  std::vector<const std::string*> open;  // paths of the open directories
  auto is_under = [](const std::string& path, const std::string& dir) {
    return dir.empty() ||
           (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& src = entries[i];
    if (i == 0 && (src.kind != EntryKind::kDirectory || !src.path.empty())) {
      return InvalidArgumentError(
          "EncodeTree: the first entry must be the root directory (path \"\")");
    }
    if (i > 0 && src.path.empty()) {
      return InvalidArgumentError(fmt::format("EncodeTree: entry {} has an empty path", i));
    }
    while (!open.empty() && !is_under(src.path, *open.back())) {
      CAIRN_RETURN_IF_ERROR(encoder.EndDirectory());
      open.pop_back();
    }
    if (i > 0 && open.empty()) {
      return InvalidArgumentError(
          fmt::format("EncodeTree: entry '{}' after the root was closed", Printable(src.path)));
    }
    Entry e = src;
    e.name = i == 0 ? "" : src.path.substr(open.back()->empty() ? 0 : open.back()->size() + 1);
    if (e.name.find('/') != std::string::npos) {
      return InvalidArgumentError(fmt::format(
          "EncodeTree: the parent directory of '{}' is not the directory listed before it",
          Printable(src.path)));
    }
    if (e.kind == EntryKind::kDirectory) {
      CAIRN_RETURN_IF_ERROR(encoder.BeginDirectory(e));
      open.push_back(&src.path);
    } else {
      CAIRN_RETURN_IF_ERROR(encoder.Add(e));
    }
  }
  while (!open.empty()) {
    CAIRN_RETURN_IF_ERROR(encoder.EndDirectory());
    open.pop_back();
  }
  CAIRN_RETURN_IF_ERROR(encoder.Finish());
  return out;
}

}  // namespace cairn::tree
