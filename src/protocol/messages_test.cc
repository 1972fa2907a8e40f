#include "protocol/messages.h"

#include <gtest/gtest.h>

namespace cairn::protocol {
namespace {

// The codes a script tells apart by exit code (issue 27) survive the trip
// server Status -> HTTP status -> client Status.
TEST(ProtocolStatus, CodesScriptsTellApartSurviveTheWire) {
  const StatusCode codes[] = {StatusCode::kNotFound,         StatusCode::kInvalidArgument,
                              StatusCode::kPermissionDenied, StatusCode::kFailedPrecondition,
                              StatusCode::kUnavailable,      StatusCode::kAborted,
                              StatusCode::kUnauthenticated};
  for (StatusCode code : codes) {
    const Status server(code, "x");
    const int http = HttpStatusFor(server);
    EXPECT_EQ(StatusForHttp(http, "x").code(), code) << server.ToString() << " -> " << http;
  }
}

TEST(ProtocolStatus, LockedIs423AndAWrongTokenIs401) {
  EXPECT_EQ(HttpStatusFor(AbortedError("group locked")), 423);
  EXPECT_EQ(HttpStatusFor(UnauthenticatedError("bad token")), 401);
  EXPECT_EQ(HttpStatusFor(ResourceExhaustedError("disk full")), 507);
  EXPECT_EQ(StatusForHttp(401, "x").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(StatusForHttp(403, "x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusForHttp(423, "x").code(), StatusCode::kAborted);
  EXPECT_EQ(StatusForHttp(429, "x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(StatusForHttp(507, "x").code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace cairn::protocol
