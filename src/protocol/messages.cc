#include "protocol/messages.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

namespace cairn::protocol {

using nlohmann::json;

namespace {

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json Parse(ByteSpan body) { return json::parse(AsStringView(body), nullptr, false); }

}  // namespace

int HttpStatusFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound: return 404;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kUnavailable: return 503;
    // Locked by another operation (a running backup of the group, a gc).
    case StatusCode::kAborted: return 423;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kResourceExhausted: return 507;
    default: return 500;
  }
}

std::string ErrorBody(std::string_view message) { return Dump(json{{"error", message}}); }

std::string ErrorMessageOf(ByteSpan body) {
  json parsed = Parse(body);
  if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()) {
    return parsed["error"].get<std::string>();
  }
  return std::string(AsStringView(body).substr(0, 200));
}

Status StatusForHttp(int http_status, std::string message) {
  switch (http_status) {
    case 400: return InvalidArgumentError(std::move(message));
    case 401: return UnauthenticatedError(std::move(message));
    case 403: return PermissionDeniedError(std::move(message));
    case 404: return NotFoundError(std::move(message));
    case 409: return FailedPreconditionError(std::move(message));
    case 423: return AbortedError(std::move(message));  // locked by another operation
    case 429:  // too many requests of this token at once: retried
    case 503: return UnavailableError(std::move(message));
    default:
      return http_status >= 500 ? InternalError(std::move(message))
                                : UnknownError(std::move(message));
  }
}

std::string Encode(const BackupStart& m) {
  json j{{"ns", m.ns}, {"type", m.type}, {"id", m.id}, {"time", m.time}};
  if (m.repair) j["repair"] = true;
  return Dump(j);
}

Result<BackupStart> DecodeBackupStart(ByteSpan body) {
  json j = Parse(body);
  if (!j.is_object() || !j["type"].is_string() || !j["id"].is_string() || !j["time"].is_string() ||
      (j.contains("ns") && !j["ns"].is_string()) ||
      (j.contains("repair") && !j["repair"].is_boolean())) {
    return InvalidArgumentError(
        "the body must be {\"ns\", \"type\", \"id\", \"time\"[, \"repair\": bool]}");
  }
  BackupStart m;
  m.ns = j.value("ns", "");
  m.type = j["type"].get<std::string>();
  m.id = j["id"].get<std::string>();
  m.time = j["time"].get<std::string>();
  m.repair = j.value("repair", false);
  return m;
}

Result<std::string> DecodeSessionId(ByteSpan body) {
  json j = Parse(body);
  if (!j.is_object() || !j["session"].is_string()) {
    return DataLossError("malformed answer to a backup session start");
  }
  return j["session"].get<std::string>();
}

std::string EncodeBase(std::string_view time) { return Dump(json{{"time", time}}); }

Result<std::string> DecodeBase(ByteSpan body) {
  json j = Parse(body);
  if (!j.is_object() || !j["time"].is_string()) {
    return InvalidArgumentError("the body must be {\"time\": \"…\"}");
  }
  return j["time"].get<std::string>();
}

std::string Encode(const PruneRequest& m) {
  return Dump(json{{"ns", m.ns},
                   {"group", m.group},
                   {"keep",
                    {{"last", m.last},
                     {"hourly", m.hourly},
                     {"daily", m.daily},
                     {"weekly", m.weekly},
                     {"monthly", m.monthly},
                     {"yearly", m.yearly},
                     {"utc", m.utc}}},
                   {"dry_run", m.dry_run}});
}

namespace {

Status DecodeKeep(const json& keep, PruneRequest* m) {
  const std::pair<const char*, uint32_t*> counts[] = {
      {"last", &m->last},     {"hourly", &m->hourly},   {"daily", &m->daily},
      {"weekly", &m->weekly}, {"monthly", &m->monthly}, {"yearly", &m->yearly}};
  for (const auto& item : keep.items()) {
    const std::string key = item.key();
    const json& v = item.value();
    if (key == "utc" && v.is_boolean()) {
      m->utc = v.get<bool>();
      continue;
    }
    auto c = std::find_if(std::begin(counts), std::end(counts),
                          [&](const auto& p) { return key == p.first; });
    if (c == std::end(counts) || !v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX) {
      return InvalidArgumentError(fmt::format(
          "prune option \"keep.{}\": unknown, or not a count (known: last, hourly, daily, "
          "weekly, monthly, yearly, utc)",
          key));
    }
    *c->second = static_cast<uint32_t>(v.get<uint64_t>());
  }
  return Status::Ok();
}

}  // namespace

Result<PruneRequest> DecodePruneRequest(ByteSpan body) {
  json j = Parse(body);
  if (!j.is_object()) return InvalidArgumentError("the prune options must be a JSON object");
  PruneRequest m;
  for (const auto& item : j.items()) {
    const std::string key = item.key();
    const json& v = item.value();
    if ((key == "ns" || key == "group") && v.is_string()) {
      (key == "ns" ? m.ns : m.group) = v.get<std::string>();
    } else if (key == "dry_run" && v.is_boolean()) {
      m.dry_run = v.get<bool>();
    } else if (key == "keep" && v.is_object()) {
      CAIRN_RETURN_IF_ERROR(DecodeKeep(v, &m));
    } else {
      return InvalidArgumentError(fmt::format(
          "prune option \"{}\": unknown, or of the wrong type (known: ns and group strings, "
          "keep object, dry_run boolean)",
          key));
    }
  }
  return m;
}

}  // namespace cairn::protocol
