#include "base/status.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/io_error.h"

namespace cairn {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "Cancelled";
    case StatusCode::kUnknown: return "Unknown";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kDeadlineExceeded: return "DeadlineExceeded";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kUnauthenticated: return "Unauthenticated";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) rep_ = std::make_shared<const Rep>(Rep{code, std::move(message)});
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return fmt::format("{}: {}", StatusCodeName(code()), message());
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code(), fmt::format("{}: {}", context, message()));
}

Status CancelledError(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }
Status UnknownError(std::string m) { return Status(StatusCode::kUnknown, std::move(m)); }
Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
Status NotFoundError(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
Status AlreadyExistsError(std::string m) {
  return Status(StatusCode::kAlreadyExists, std::move(m));
}
Status PermissionDeniedError(std::string m) {
  return Status(StatusCode::kPermissionDenied, std::move(m));
}
Status ResourceExhaustedError(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
Status AbortedError(std::string m) { return Status(StatusCode::kAborted, std::move(m)); }
Status OutOfRangeError(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }
Status UnimplementedError(std::string m) {
  return Status(StatusCode::kUnimplemented, std::move(m));
}
Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
Status UnavailableError(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
Status DataLossError(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
Status UnauthenticatedError(std::string m) {
  return Status(StatusCode::kUnauthenticated, std::move(m));
}

Status ErrnoToStatus(int err, std::string_view what) {
  std::string msg = fmt::format("{}: {}", what, std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return NotFoundError(std::move(msg));
    case EEXIST:
    case ENOTEMPTY:
      return AlreadyExistsError(std::move(msg));
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDeniedError(std::move(msg));
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
      return ResourceExhaustedError(std::move(msg));
    case EINVAL:
    case EISDIR:
    case ENAMETOOLONG:
      return InvalidArgumentError(std::move(msg));
    case EAGAIN:
    case EINTR:
    case EBUSY:
      return UnavailableError(std::move(msg));
    case EIO:
      return DataLossError(fmt::format("{}: {}", what, kIoErrorText));
    default:
      return UnknownError(std::move(msg));
  }
}

}  // namespace cairn
