#include "s3/s3_protocol.h"

#include <charconv>

#include <fmt/format.h>

#include "s3/s3_xml.h"

namespace cairn::s3 {

S3ErrorKind ClassifyError(int http_status, std::string_view code) {
  if (http_status >= 200 && http_status < 300) return S3ErrorKind::kNone;
  if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch") {
    return S3ErrorKind::kBadCredentials;
  }
  if (code == "NoSuchBucket") return S3ErrorKind::kNoSuchBucket;
  if (code == "NoSuchKey") return S3ErrorKind::kNoSuchKey;
  if (code == "SlowDown" || http_status == 503 || http_status == 429) {
    return S3ErrorKind::kThrottled;
  }
  if (code == "RequestTimeout" || http_status == 408) return S3ErrorKind::kTimeout;
  if (http_status == 501 || code == "NotImplemented") return S3ErrorKind::kNotImplemented;
  if (http_status >= 500) return S3ErrorKind::kServerError;
  if (http_status == 412 || code == "PreconditionFailed" || code == "BucketAlreadyOwnedByYou" ||
      code == "BucketAlreadyExists") {
    return S3ErrorKind::kAlreadyExists;
  }
  if (http_status == 403 || code == "AccessDenied") return S3ErrorKind::kAccessDenied;
  // A HEAD answer has no body: 404 on an object is the missing key.
  if (http_status == 404 && code.empty()) return S3ErrorKind::kNoSuchKey;
  return S3ErrorKind::kClientError;
}

bool IsRetryable(S3ErrorKind kind) {
  return kind == S3ErrorKind::kThrottled || kind == S3ErrorKind::kServerError ||
         kind == S3ErrorKind::kTimeout;
}

S3ErrorBody ParseErrorBody(ByteSpan body) {
  S3ErrorBody out;
  auto doc = ParseXml(AsStringView(body));
  if (!doc.ok() || doc->name != "Error") return out;
  out.code = doc->ChildText("Code");
  out.message = doc->ChildText("Message");
  out.resource = doc->ChildText("Resource");
  out.request_id = doc->ChildText("RequestId");
  return out;
}

std::string Describe(const ErrorContext& c) {
  std::string what = c.bucket.empty() ? std::string("s3://")
                     : c.key.empty()  ? fmt::format("s3://{}", c.bucket)
                                      : fmt::format("s3://{}/{}", c.bucket, c.key);
  return fmt::format("S3 {} {} at {}", c.operation, what, c.endpoint);
}

Status ErrorStatus(const ErrorContext& context, int http_status, ByteSpan body) {
  S3ErrorBody e = ParseErrorBody(body);
  S3ErrorKind kind = ClassifyError(http_status, e.code);
  std::string why = fmt::format("HTTP {}", http_status);
  if (!e.code.empty()) why += " " + e.code;
  if (!e.message.empty()) why += ": " + e.message;
  if (e.code.empty() && e.message.empty() && !body.empty() && body.size() < 200) {
    why += fmt::format(" ({})", AsStringView(body));
  }
  std::string msg = fmt::format("{}: {}", Describe(context), why);
  switch (kind) {
    case S3ErrorKind::kNone: return Status::Ok();
    case S3ErrorKind::kBadCredentials:
      return PermissionDeniedError(
          msg + " (bad credentials: check the access key and secret key, and the clock)");
    case S3ErrorKind::kAccessDenied: return PermissionDeniedError(msg + " (access denied)");
    case S3ErrorKind::kNoSuchBucket:
      return FailedPreconditionError(msg + " (the bucket does not exist)");
    case S3ErrorKind::kNoSuchKey: return NotFoundError(msg + " (no such key)");
    case S3ErrorKind::kAlreadyExists: return AlreadyExistsError(msg + " (the object already exists)");
    case S3ErrorKind::kThrottled:
    case S3ErrorKind::kServerError:
    case S3ErrorKind::kTimeout: return UnavailableError(msg);
    case S3ErrorKind::kNotImplemented:
      return UnimplementedError(msg + " (not supported by this server)");
    case S3ErrorKind::kClientError: break;
  }
  if (http_status == 416) return OutOfRangeError(msg);
  return http_status == 409 ? FailedPreconditionError(msg) : InvalidArgumentError(msg);
}

namespace {

Status Malformed(std::string_view what, std::string_view why) {
  return InvalidArgumentError(fmt::format("S3 {} response: {}", what, why));
}

}  // namespace

Result<ListPage> ParseListObjectsV2(std::string_view xml) {
  auto doc = ParseXml(xml);
  if (!doc.ok()) return Malformed("ListObjectsV2", doc.status().message());
  if (doc->name != "ListBucketResult") {
    return Malformed("ListObjectsV2", fmt::format("root element <{}>, expected <ListBucketResult>", doc->name));
  }
  ListPage page;
  for (const XmlElement* c : doc->Children("Contents")) {
    const XmlElement* key = c->Child("Key");
    if (key == nullptr || key->text.empty()) return Malformed("ListObjectsV2", "<Contents> without <Key>");
    ObjectEntry entry{key->text, 0, c->ChildText("ETag")};
    if (entry.etag.size() >= 2 && entry.etag.front() == '"' && entry.etag.back() == '"') {
      entry.etag = entry.etag.substr(1, entry.etag.size() - 2);
    }
    std::string size = c->ChildText("Size");
    if (!size.empty()) {
      auto [p, ec] = std::from_chars(size.data(), size.data() + size.size(), entry.size);
      if (ec != std::errc() || p != size.data() + size.size()) {
        return Malformed("ListObjectsV2", fmt::format("bad <Size> '{}' of key '{}'", size, entry.key));
      }
    }
    page.objects.push_back(std::move(entry));
  }
  for (const XmlElement* c : doc->Children("CommonPrefixes")) {
    const XmlElement* prefix = c->Child("Prefix");
    if (prefix == nullptr) return Malformed("ListObjectsV2", "<CommonPrefixes> without <Prefix>");
    page.common_prefixes.push_back(prefix->text);
  }
  std::string truncated = doc->ChildText("IsTruncated");
  if (truncated == "true") {
    page.is_truncated = true;
  } else if (!truncated.empty() && truncated != "false") {
    return Malformed("ListObjectsV2", fmt::format("<IsTruncated> is '{}'", truncated));
  }
  page.next_continuation_token = doc->ChildText("NextContinuationToken");
  if (page.is_truncated && page.next_continuation_token.empty()) {
    return Malformed("ListObjectsV2", "truncated listing without <NextContinuationToken>");
  }
  return page;
}

std::string BuildDeleteObjectsBody(std::span<const std::string> keys) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Delete><Quiet>true</Quiet>";
  for (const std::string& k : keys) out += "<Object><Key>" + EscapeXml(k) + "</Key></Object>";
  out += "</Delete>";
  return out;
}

Result<std::vector<DeleteFailure>> ParseDeleteResult(std::string_view xml) {
  auto doc = ParseXml(xml);
  if (!doc.ok()) return Malformed("DeleteObjects", doc.status().message());
  if (doc->name != "DeleteResult") {
    return Malformed("DeleteObjects", fmt::format("root element <{}>, expected <DeleteResult>", doc->name));
  }
  std::vector<DeleteFailure> out;
  for (const XmlElement* e : doc->Children("Error")) {
    out.push_back({e->ChildText("Key"), e->ChildText("Code"), e->ChildText("Message")});
  }
  return out;
}

}  // namespace cairn::s3
