// I/O errors (EIO) as Status: how one is recognised, apart from damage.
//
// PosixEnv maps EIO to DataLoss (ErrnoToStatus), as the CLI's exit 3 wants
// (the data cannot be had), and FaultInjectionEnv injects it the same way.
// But an I/O error proves nothing about the bytes stored: the medium could
// not deliver them this time (a retry, or the disk after a repair, may read
// them fine). Code that would act on damage (verify's quarantine, an insert
// deciding whether a stored chunk is whole) asks IsIoError first.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include "base/status.h"

namespace cairn {

// The words every EIO is reported with (ErrnoToStatus, FaultInjectionEnv),
// whatever the locale: what IsIoError looks for.
inline constexpr std::string_view kIoErrorText = "Input/output error";

// True for a DataLoss that is an I/O error (EIO) rather than bytes proven
// wrong. Judged by the message, which keeps kIoErrorText through
// WithContext and across the server's wire.
inline bool IsIoError(const Status& s) {
  return s.code() == StatusCode::kDataLoss &&
         s.message().find(kIoErrorText) != std::string_view::npos;
}

}  // namespace cairn
