#include "base/env.h"

#include <unistd.h>

#include <atomic>

#include <fmt/format.h>

namespace cairn {

namespace {

template <typename Buffer>
Status ReadWhole(Env& env, const std::string& path, uint64_t max_size, Buffer* out) {
  CAIRN_ASSIGN_OR_RETURN(auto file, env.OpenReadable(path));
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (size > max_size) {
    return InvalidArgumentError(
        fmt::format("{}: {} bytes is larger than the limit of {} bytes", path, size, max_size));
  }
  ResizeForWrite(out, size);
  CAIRN_ASSIGN_OR_RETURN(size_t n, file->ReadAt(0, std::span<uint8_t>(out->data(), size)));
  ResizeForWrite(out, n);
  return Status::Ok();
}

}  // namespace

Status WritableFile::SetOwner(uint32_t, uint32_t) {
  return UnimplementedError(fmt::format("{}: has no owner to set", path()));
}
Status WritableFile::SetMode(uint32_t) {
  return UnimplementedError(fmt::format("{}: has no mode to set", path()));
}
Status WritableFile::SetModTime(int64_t) {
  return UnimplementedError(fmt::format("{}: has no modification time to set", path()));
}
Status WritableFile::SetXattr(const std::string&, std::string_view) {
  return UnimplementedError(fmt::format("{}: has no xattrs", path()));
}

bool IsRefusedXattr(const Status& s) {
  return s.code() == StatusCode::kUnimplemented || s.code() == StatusCode::kPermissionDenied;
}

Status DirWrapper::CreateHardlink(const std::string& n, Dir& from, const std::string& from_name) {
  auto* wrapped = dynamic_cast<DirWrapper*>(&from);
  return target_->CreateHardlink(n, wrapped != nullptr ? *wrapped->target() : from, from_name);
}

Result<Bytes> ReadWholeFile(Env& env, const std::string& path, uint64_t max_size) {
  Bytes data;
  CAIRN_RETURN_IF_ERROR(ReadWhole(env, path, max_size, &data));
  return data;
}

Status ReadWholeFileInto(Env& env, const std::string& path, uint64_t max_size, ReadBuffer* out) {
  return ReadWhole(env, path, max_size, out);
}

Status WriteFileReplacing(Env& env, const std::string& path, ByteSpan data) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter.fetch_add(1));
  {
    CAIRN_ASSIGN_OR_RETURN(auto file, env.OpenWritable(tmp, OpenMode::kCreateNew));
    Status s = file->Append(data);
    if (s.ok()) s = file->Close();
    if (!s.ok()) {
      env.RemoveFile(tmp).IgnoreError();
      return s;
    }
  }
  Status s = env.Rename(tmp, path);
  if (!s.ok()) env.RemoveFile(tmp).IgnoreError();
  return s;
}

Status WriteFileAtomic(Env& env, const std::string& path, ByteSpan data) {
  std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  {
    CAIRN_ASSIGN_OR_RETURN(auto file, env.OpenWritable(tmp, OpenMode::kTruncate));
    Status s = file->WriteAt(0, data);
    if (s.ok()) s = file->Sync();
    if (s.ok()) s = file->Close();
    if (!s.ok()) {
      env.RemoveFile(tmp).IgnoreError();
      return s;
    }
  }
  Status s = env.Rename(tmp, path);
  if (!s.ok()) {
    env.RemoveFile(tmp).IgnoreError();
    return s;
  }
  return env.SyncDir(DirName(path));
}

Status CreateDirs(Env& env, const std::string& path) {
  auto info = env.Stat(path);
  if (info.ok()) {
    if (info->is_dir) return Status::Ok();
    return AlreadyExistsError(fmt::format("{} exists and is not a directory", path));
  }
  std::string parent = DirName(path);
  if (parent != path && parent != "." && parent != "/") {
    CAIRN_RETURN_IF_ERROR(CreateDirs(env, parent));
  }
  Status s = env.CreateDir(path);
  if (s.code() == StatusCode::kAlreadyExists) return Status::Ok();  // raced with another creator
  return s;
}

std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  std::string out(a);
  if (out.back() != '/') out.push_back('/');
  while (!b.empty() && b.front() == '/') b.remove_prefix(1);
  out.append(b);
  return out;
}

std::string DirName(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

}  // namespace cairn
