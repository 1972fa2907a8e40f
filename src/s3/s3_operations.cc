// The S3 operations of S3Client, each a request built for Submit() and an
// interpretation of the answer. The engine is in s3_client.cc.
#include <algorithm>
#include <charconv>
#include <future>
#include <set>

#include <fmt/format.h>

#include "s3/s3_client.h"
#include "s3/sigv4.h"

namespace cairn::s3 {
namespace {

std::string HeaderValue(const Pairs& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return {};
}

bool Is2xx(int status) { return status >= 200 && status < 300; }

// An empty key would address the bucket itself.
Status CheckKey(std::string_view operation, const std::string& key) {
  if (!key.empty()) return Status::Ok();
  return InvalidArgumentError(fmt::format("S3 {}: empty object key", operation));
}

// Waits for one asynchronous result. REQUIRES: not on the I/O thread.
template <typename T, typename Start>
T Wait(Start&& start) {
  std::promise<T> promise;
  std::future<T> future = promise.get_future();
  start([&promise](T value) { promise.set_value(std::move(value)); });
  return future.get();
}

}  // namespace

Result<S3Response> S3Client::Call(S3Request request) {
  return Wait<Result<S3Response>>(
      [&](auto done) { Submit(std::move(request), std::move(done)); });
}

void S3Client::PutObjectAsync(std::string key, Bytes body, PutOptions options,
                              std::function<void(Status)> done) {
  if (Status s = CheckKey("PutObject", key); !s.ok()) return done(s);
  S3Request r{"PutObject", "PUT", config().bucket, key, {}, {}, std::move(body), true, {}};
  r.headers.emplace_back("content-type", options.content_type);
  if (options.create_only) r.headers.emplace_back("if-none-match", "*");
  Submit(std::move(r), [this, key, done = std::move(done)](Result<S3Response> res) {
    if (!res.ok()) return done(res.status());
    if (Is2xx(res->http_status)) return done(Status::Ok());
    done(ErrorStatus({"PutObject", config().bucket, key, config().endpoint}, res->http_status,
                     res->body));
  });
}

void S3Client::GetObjectAsync(std::string key, std::optional<ByteRange> range,
                              std::function<void(Result<Bytes>)> done) {
  if (Status s = CheckKey("GetObject", key); !s.ok()) return done(s);
  S3Request r{"GetObject", "GET", config().bucket, key, {}, {}, {}, true, {}};
  if (range) {
    if (range->length == 0) {
      return done(InvalidArgumentError(fmt::format("S3 GetObject {}: empty byte range", key)));
    }
    r.headers.emplace_back("range", fmt::format("bytes={}-{}", range->offset,
                                                range->offset + range->length - 1));
  }
  Submit(std::move(r), [this, key, range, done = std::move(done)](Result<S3Response> res) {
    if (!res.ok()) return done(res.status());
    ErrorContext ctx{"GetObject", config().bucket, key, config().endpoint};
    if (res->http_status == 206 || (res->http_status == 200 && !range)) {
      return done(std::move(res->body));
    }
    if (res->http_status == 200 && range) {
      // A server that ignores Range sends the whole object: cut it here.
      Bytes& all = res->body;
      if (range->offset >= all.size()) return done(Bytes());
      size_t end = static_cast<size_t>(std::min<uint64_t>(all.size(), range->offset + range->length));
      return done(Bytes(all.begin() + static_cast<ptrdiff_t>(range->offset),
                        all.begin() + static_cast<ptrdiff_t>(end)));
    }
    done(ErrorStatus(ctx, res->http_status, res->body));
  });
}

void S3Client::HeadObjectAsync(std::string key, std::function<void(Result<ObjectInfo>)> done) {
  if (Status s = CheckKey("HeadObject", key); !s.ok()) return done(s);
  S3Request r{"HeadObject", "HEAD", config().bucket, key, {}, {}, {}, true, {}};
  Submit(std::move(r), [this, key, done = std::move(done)](Result<S3Response> res) {
    if (!res.ok()) return done(res.status());
    ErrorContext ctx{"HeadObject", config().bucket, key, config().endpoint};
    if (!Is2xx(res->http_status)) return done(ErrorStatus(ctx, res->http_status, res->body));
    ObjectInfo info;
    std::string len = HeaderValue(res->headers, "content-length");
    auto [p, ec] = std::from_chars(len.data(), len.data() + len.size(), info.size);
    if (len.empty() || ec != std::errc() || p != len.data() + len.size()) {
      return done(InternalError(fmt::format("{}: bad Content-Length '{}'", Describe(ctx), len)));
    }
    info.etag = HeaderValue(res->headers, "etag");
    done(std::move(info));
  });
}

// One PUT signed for other bytes than it carries: refused with
// XAmzContentSHA256Mismatch by a server that checks the hash. One that
// stores it does not check (the object is deleted again); any other answer
// (no permission, a transport error) tells nothing: false, MD5 stays.
bool S3Client::ProbeServerChecksPayloadHash(const std::string& probe_key) {
  if (probe_key.empty()) return false;
  const std::string_view text = "cairn: does this server check x-amz-content-sha256?";
  S3Request r{"PutObject", "PUT", config().bucket, probe_key, {}, {},
              Bytes(text.begin(), text.end()), true, {}};
  r.payload_hash = Sha256Hex(AsBytes(std::string_view("not the bytes sent")));
  auto res = Call(std::move(r));
  if (!res.ok()) return false;
  if (res->http_status == 400 && ParseErrorBody(res->body).code == "XAmzContentSHA256Mismatch") {
    return true;
  }
  if (Is2xx(res->http_status)) {
    (void)Call(S3Request{"DeleteObject", "DELETE", config().bucket, probe_key, {}, {}, {}, true, {}});
  }
  return false;
}

Status S3Client::PutObject(const std::string& key, Bytes body, const PutOptions& options) {
  return Wait<Status>([&](auto done) { PutObjectAsync(key, std::move(body), options, std::move(done)); });
}

Result<Bytes> S3Client::GetObject(const std::string& key, std::optional<ByteRange> range) {
  return Wait<Result<Bytes>>([&](auto done) { GetObjectAsync(key, range, std::move(done)); });
}

Result<ObjectInfo> S3Client::HeadObject(const std::string& key) {
  return Wait<Result<ObjectInfo>>([&](auto done) { HeadObjectAsync(key, std::move(done)); });
}

Result<DeleteReport> S3Client::DeleteObjects(std::span<const std::string> keys,
                                             size_t batch_size) {
  batch_size = std::clamp<size_t>(batch_size, 1, kMaxDeleteBatch);
  DeleteReport report;
  report.requested = keys.size();
  std::vector<std::future<Result<S3Response>>> batches;
  for (size_t i = 0; i < keys.size(); i += batch_size) {
    auto batch = keys.subspan(i, std::min(batch_size, keys.size() - i));
    std::string xml = BuildDeleteObjectsBody(batch);
    S3Request r{"DeleteObjects", "POST", config().bucket, "", {{"delete", ""}},
                {{"content-type", "application/xml"}}, Bytes(xml.begin(), xml.end()), true, {}};
    auto promise = std::make_shared<std::promise<Result<S3Response>>>();
    batches.push_back(promise->get_future());
    Submit(std::move(r), [promise](Result<S3Response> res) { promise->set_value(std::move(res)); });
  }
  ErrorContext ctx{"DeleteObjects", config().bucket, "", config().endpoint};
  Status first_error;
  for (auto& f : batches) {
    Result<S3Response> res = f.get();  // wait for every batch before returning
    if (!first_error.ok()) continue;
    if (!res.ok()) {
      first_error = res.status();
    } else if (!Is2xx(res->http_status)) {
      first_error = ErrorStatus(ctx, res->http_status, res->body);
    } else {
      auto failures = ParseDeleteResult(AsStringView(res->body));
      if (!failures.ok()) {
        first_error = failures.status().WithContext(Describe(ctx));
      } else {
        for (auto& f2 : *failures) report.failures.push_back(std::move(f2));
      }
    }
  }
  if (!first_error.ok()) return first_error;
  return report;
}

Result<ListResult> S3Client::ListObjectsV2(const ListOptions& options) {
  ListResult out;
  std::string token;
  std::set<std::string> seen_tokens;  // a server repeating a token would loop forever
  ErrorContext ctx{"ListObjectsV2", config().bucket, options.prefix, config().endpoint};
  while (true) {
    S3Request r{"ListObjectsV2", "GET", config().bucket, "", {{"list-type", "2"}}, {}, {}, true, {}};
    r.query.emplace_back("max-keys", std::to_string(std::clamp(options.max_keys, 1, 1000)));
    if (!options.prefix.empty()) r.query.emplace_back("prefix", options.prefix);
    if (!options.delimiter.empty()) r.query.emplace_back("delimiter", options.delimiter);
    if (!token.empty()) r.query.emplace_back("continuation-token", token);
    CAIRN_ASSIGN_OR_RETURN(S3Response res, Call(std::move(r)));
    if (!Is2xx(res.http_status)) return ErrorStatus(ctx, res.http_status, res.body);
    auto page = ParseListObjectsV2(AsStringView(res.body));
    if (!page.ok()) return page.status().WithContext(Describe(ctx));
    ++out.pages;
    for (auto& o : page->objects) out.objects.push_back(std::move(o));
    for (auto& p : page->common_prefixes) out.common_prefixes.push_back(std::move(p));
    if (!page->is_truncated) return out;
    token = page->next_continuation_token;
    if (!seen_tokens.insert(token).second) {
      return InternalError(fmt::format("{}: the server repeated continuation token '{}'", Describe(ctx), token));
    }
  }
}

Status S3Client::CreateBucket() {
  S3Request r{"CreateBucket", "PUT", config().bucket, "", {}, {}, {}, true, {}};
  if (config().region != "us-east-1") {
    // AWS wants the region spelled out for any region but its first.
    std::string xml = fmt::format(
        "<CreateBucketConfiguration><LocationConstraint>{}</LocationConstraint>"
        "</CreateBucketConfiguration>", config().region);
    r.body.assign(xml.begin(), xml.end());
    r.headers.emplace_back("content-type", "application/xml");
  }
  CAIRN_ASSIGN_OR_RETURN(S3Response res, Call(std::move(r)));
  if (Is2xx(res.http_status)) return Status::Ok();
  return ErrorStatus({"CreateBucket", config().bucket, "", config().endpoint}, res.http_status, res.body);
}

Status S3Client::HeadBucket() {
  CAIRN_ASSIGN_OR_RETURN(S3Response res,
                         Call(S3Request{"HeadBucket", "HEAD", config().bucket, "", {}, {}, {}, true, {}}));
  if (Is2xx(res.http_status)) return Status::Ok();
  ErrorContext ctx{"HeadBucket", config().bucket, "", config().endpoint};
  // A HEAD answer has no body to name the error: say what the status means.
  if (res.http_status == 404) {
    return FailedPreconditionError(Describe(ctx) + ": HTTP 404 NoSuchBucket (the bucket does not exist)");
  }
  if (res.http_status == 403) {
    return PermissionDeniedError(Describe(ctx) +
                                 ": HTTP 403 (bad credentials, or no access to the bucket)");
  }
  if (res.http_status == 400) {
    return InvalidArgumentError(Describe(ctx) +
                                ": HTTP 400 (often a wrong region: check region= or AWS_REGION)");
  }
  return ErrorStatus(ctx, res.http_status, res.body);
}

Status S3Client::DeleteBucket() {
  CAIRN_ASSIGN_OR_RETURN(S3Response res,
                         Call(S3Request{"DeleteBucket", "DELETE", config().bucket, "", {}, {}, {}, true, {}}));
  if (Is2xx(res.http_status)) return Status::Ok();
  return ErrorStatus({"DeleteBucket", config().bucket, "", config().endpoint}, res.http_status, res.body);
}

}  // namespace cairn::s3
