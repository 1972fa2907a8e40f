#include "base/fault_injection_env.h"

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "base/io_error.h"

namespace cairn {
namespace {

class FaultyReadable final : public ReadableFile {
 public:
  FaultyReadable(FaultInjectionEnv& env, std::unique_ptr<ReadableFile> base)
      : env_(env), base_(std::move(base)) {}
  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> buf) override {
    CAIRN_RETURN_IF_ERROR(env_.CheckRead(base_->path()));
    return base_->ReadAt(offset, buf);
  }
  Result<uint64_t> Size() override { return base_->Size(); }
  Result<FileInfo> Stat() override { return base_->Stat(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectionEnv& env_;
  std::unique_ptr<ReadableFile> base_;
};

class FaultyWritable final : public WritableFile {
 public:
  FaultyWritable(FaultInjectionEnv& env, std::unique_ptr<WritableFile> base)
      : env_(env), base_(std::move(base)) {}
  Status WriteAt(uint64_t offset, ByteSpan data) override {
    CAIRN_RETURN_IF_ERROR(env_.ChargeWrite(base_->path(), data.size()));
    return base_->WriteAt(offset, data);
  }
  Status Append(ByteSpan data) override {
    CAIRN_RETURN_IF_ERROR(env_.ChargeWrite(base_->path(), data.size()));
    return base_->Append(data);
  }
  Status Truncate(uint64_t size) override { return base_->Truncate(size); }
  Status Sync() override { return base_->Sync(); }
  Status Close() override { return base_->Close(); }
  Result<FileInfo> Stat() override { return base_->Stat(); }
  Status SetOwner(uint32_t uid, uint32_t gid) override { return base_->SetOwner(uid, gid); }
  Status SetMode(uint32_t mode) override { return base_->SetMode(mode); }
  Status SetModTime(int64_t ns) override { return base_->SetModTime(ns); }
  Status SetXattr(const std::string& key, std::string_view value) override {
    return base_->SetXattr(key, value);
  }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectionEnv& env_;
  std::unique_ptr<WritableFile> base_;
};

class FaultyDir final : public DirWrapper {
 public:
  FaultyDir(FaultInjectionEnv& env, std::unique_ptr<Dir> base)
      : DirWrapper(std::move(base)), env_(env) {}

  Result<std::unique_ptr<Dir>> OpenDir(const std::string& name) override {
    CAIRN_ASSIGN_OR_RETURN(auto dir, target()->OpenDir(name));
    return std::unique_ptr<Dir>(std::make_unique<FaultyDir>(env_, std::move(dir)));
  }
  Result<std::unique_ptr<ReadableFile>> OpenFile(const std::string& name) override {
    CAIRN_ASSIGN_OR_RETURN(auto file, target()->OpenFile(name));
    return std::unique_ptr<ReadableFile>(std::make_unique<FaultyReadable>(env_, std::move(file)));
  }
  Result<std::unique_ptr<WritableFile>> CreateFile(const std::string& name,
                                                   uint32_t mode) override {
    CAIRN_RETURN_IF_ERROR(env_.CheckCreate(JoinPath(path(), name)));
    CAIRN_ASSIGN_OR_RETURN(auto file, target()->CreateFile(name, mode));
    return std::unique_ptr<WritableFile>(std::make_unique<FaultyWritable>(env_, std::move(file)));
  }
  Status CreateDir(const std::string& name, uint32_t mode) override {
    CAIRN_RETURN_IF_ERROR(env_.CheckCreate(JoinPath(path(), name)));
    return target()->CreateDir(name, mode);
  }
  Status CreateSymlink(const std::string& name, const std::string& link_target) override {
    CAIRN_RETURN_IF_ERROR(env_.CheckCreate(JoinPath(path(), name)));
    return target()->CreateSymlink(name, link_target);
  }
  Status CreateNode(const std::string& name, uint32_t mode, uint64_t rdev) override {
    CAIRN_RETURN_IF_ERROR(env_.CheckCreate(JoinPath(path(), name)));
    return target()->CreateNode(name, mode, rdev);
  }
  Status CreateHardlink(const std::string& name, Dir& from, const std::string& from_name) override {
    CAIRN_RETURN_IF_ERROR(env_.CheckCreate(JoinPath(path(), name)));
    return DirWrapper::CreateHardlink(name, from, from_name);
  }

 private:
  FaultInjectionEnv& env_;
};

}  // namespace

void FaultInjectionEnv::FailReadsMatching(std::string pattern) {
  MutexLock lock(mu_);
  read_fail_pattern_ = std::move(pattern);
}

void FaultInjectionEnv::FailCreatesMatching(std::string pattern) {
  MutexLock lock(mu_);
  create_fail_pattern_ = std::move(pattern);
}

Status FaultInjectionEnv::CheckCreate(const std::string& path) {
  MutexLock lock(mu_);
  if (!create_fail_pattern_.empty() && path.find(create_fail_pattern_) != std::string::npos) {
    return DataLossError(fmt::format("create {}: Input/output error (injected)", path));
  }
  return Status::Ok();
}

Status FaultInjectionEnv::ChargeWrite(const std::string& path, size_t bytes) {
  if (int64_t us = write_latency_us_.load(); us > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
  int64_t budget = write_budget_.load();
  if (budget >= 0) {
    int64_t left = write_budget_.fetch_sub(static_cast<int64_t>(bytes));
    if (left < static_cast<int64_t>(bytes)) {
      write_budget_.store(0);
      return ResourceExhaustedError(
          fmt::format("write {}: No space left on device (injected)", path));
    }
  }
  bytes_written_.fetch_add(bytes);
  return Status::Ok();
}

Status FaultInjectionEnv::CheckRead(const std::string& path) {
  if (int64_t us = read_latency_us_.load(); us > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
  MutexLock lock(mu_);
  if (!read_fail_pattern_.empty() && path.find(read_fail_pattern_) != std::string::npos) {
    return DataLossError(fmt::format("read {}: {} (injected)", path, kIoErrorText));
  }
  return Status::Ok();
}

Result<std::unique_ptr<ReadableFile>> FaultInjectionEnv::OpenReadable(const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(auto base, target()->OpenReadable(path));
  return std::unique_ptr<ReadableFile>(std::make_unique<FaultyReadable>(*this, std::move(base)));
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::OpenWritable(const std::string& path,
                                                                      OpenMode mode) {
  CAIRN_ASSIGN_OR_RETURN(auto base, target()->OpenWritable(path, mode));
  return std::unique_ptr<WritableFile>(std::make_unique<FaultyWritable>(*this, std::move(base)));
}

Result<std::unique_ptr<Dir>> FaultInjectionEnv::OpenDir(const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(auto base, target()->OpenDir(path));
  return std::unique_ptr<Dir>(std::make_unique<FaultyDir>(*this, std::move(base)));
}

}  // namespace cairn
