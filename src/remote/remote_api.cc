#include "remote/remote_api.h"

#include <fmt/format.h>

#include "base/read_buffer.h"
#include "protocol/routes.h"

namespace cairn::remote {

using nlohmann::json;

namespace {

Result<json> ParseObject(const RemoteClient& client, ByteSpan body, std::string_view what) {
  json j = json::parse(AsStringView(body), nullptr, false);
  if (!j.is_object()) {
    return DataLossError(fmt::format("server {}: the answer to {} is not a JSON object",
                                     client.url().ToString(), what));
  }
  return j;
}

}  // namespace

Result<json> CallStoreJson(RemoteClient& client, std::string_view method,
                           const std::string& suffix, ByteSpan body) {
  const std::string path = client.StorePath("/" + suffix);
  CAIRN_ASSIGN_OR_RETURN(Bytes answer, client.Call(method, path, body));
  return ParseObject(client, answer, fmt::format("{} {}", method, path));
}

Result<json> PruneOnServer(RemoteClient& client, const protocol::PruneRequest& request) {
  std::string text = protocol::Encode(request);
  return CallStoreJson(client, "POST", "prune", AsBytes(text));
}

Result<std::string> StartTask(RemoteClient& client, std::string_view kind, const json& options,
                              bool* already_running) {
  *already_running = false;
  const std::string path = client.StorePath("/" + std::string(kind));
  const std::string body = options.dump();
  // The 409 of a running task carries its id: the answer is read whatever
  // its status.
  CAIRN_ASSIGN_OR_RETURN(net::HttpResponse response, client.CallRaw("POST", path, AsBytes(body)));
  json answer = json::parse(AsStringView(response.body), nullptr, false);
  const bool has_task = answer.is_object() && answer.contains("task") && answer["task"].is_string();
  if ((response.status == 202 || response.status == 409) && has_task) {
    const std::string id = answer["task"].get<std::string>();
    const std::string running = answer.value("kind", std::string(kind));
    if (response.status == 409 && running != kind) {
      return FailedPreconditionError(fmt::format(
          "server {}: a {} task ({}) runs on the datastore, and the server runs one task per "
          "datastore at a time; wait for it (cairn task show --follow {}) and try again",
          client.url().ToString(), running, id, id));
    }
    *already_running = response.status == 409;
    return id;
  }
  Status s = client.ErrorFor(response, "POST", path);
  // A server error starting a task is worth another try later.
  if (response.status >= 500) return UnavailableError(std::string(s.message()));
  return s;
}

Result<json> GetTask(RemoteClient& client, const std::string& id) {
  CAIRN_ASSIGN_OR_RETURN(Bytes body, client.Call("GET", protocol::TaskPath(id)));
  json j = json::parse(AsStringView(body), nullptr, false);
  if (!j.is_object() || !j.contains("state") || !j["state"].is_string()) {
    return DataLossError(fmt::format("server {}: malformed status of task {}",
                                     client.url().ToString(), id));
  }
  return j;
}

Result<Bytes> GetTaskLog(RemoteClient& client, const std::string& id, size_t since) {
  return client.Call("GET", protocol::TaskLogPath(id, since));
}

Result<json> ListTasks(RemoteClient& client) {
  CAIRN_ASSIGN_OR_RETURN(Bytes body, client.Call("GET", protocol::TasksPath()));
  json j = json::parse(AsStringView(body), nullptr, false);
  if (!j.is_object() || !j.contains("tasks") || !j["tasks"].is_array()) {
    return DataLossError(fmt::format("server {}: malformed answer to GET {}",
                                     client.url().ToString(), protocol::TasksPath()));
  }
  return j;
}

Result<uint64_t> SpeedTestUpload(RemoteClient& client, ByteSpan data) {
  CAIRN_RETURN_IF_ERROR(client.Call("POST", protocol::SpeedTestPath(), data).status());
  return data.size();
}

Result<uint64_t> SpeedTestDownload(RemoteClient& client, uint64_t bytes, ReadBuffer* scratch) {
  const std::string path = protocol::SpeedTestPath(bytes);
  CAIRN_ASSIGN_OR_RETURN(auto connection, client.Acquire());
  CAIRN_ASSIGN_OR_RETURN(net::HttpResponse response, connection->Send("GET", path));
  if (response.status != 200) {
    Bytes text(64 << 10);
    size_t got = 0;
    CAIRN_RETURN_IF_ERROR(connection->ReadBody(text.data(), text.size(), &got));
    client.ChargeDownload(got);
    text.resize(got);
    response.body = std::move(text);
    return client.ErrorFor(response, "GET", path);
  }
  if (scratch->capacity() < bytes) scratch->Resize(bytes);
  scratch->Resize(scratch->capacity());
  uint64_t total = 0;
  for (;;) {
    size_t got = 0;
    CAIRN_RETURN_IF_ERROR(connection->ReadBody(scratch->data(), scratch->size(), &got));
    client.ChargeDownload(got);
    if (got == 0) break;
    total += got;
  }
  if (total != bytes) {
    return DataLossError(fmt::format("speedtest: {} bytes instead of {}", total, bytes));
  }
  client.Release(std::move(connection));
  return total;
}

}  // namespace cairn::remote
