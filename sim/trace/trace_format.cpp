#include "sim/trace/trace_format.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/input_file.hpp"
#include "sim/common/json_reader.hpp"
#include "sim/trace/gating_file.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

namespace eldr {

namespace fs = std::filesystem;

std::string Trace::manifest_path() const
{
  return (fs::path(dir) / kTraceManifestName).string();
}

std::string Trace::requests_path() const
{
  return (fs::path(dir) / kTraceRequestsName).string();
}

std::string Trace::routing_path() const
{
  return manifest.routing_file.empty() ? "" : (fs::path(dir) / manifest.routing_file).string();
}

// ------------------------------------------------------------------------------------------ manifest

TraceManifest read_trace_manifest(const std::string& path)
{
  Json doc = load_json_file(path);
  JsonReader r(doc, path);
  TraceManifest m;
  const std::string format = r.require_string("format");
  if (format != "eldr-trace")
    r.fail("format", "expected \"eldr-trace\", got \"" + format + "\"");
  const long version = r.require_integer("version", 1, std::numeric_limits<long>::max());
  if (version != kTraceFormatVersion)
    r.fail("version", "version " + std::to_string(version) + " is not supported (this eldrsim reads version " +
                          std::to_string(kTraceFormatVersion) + ")");
  if (!doc.contains("model"))
    r.fail("model", "is required (null when the trace has no routing)");
  if (!r.is_null("model")) {
    JsonReader mr = r.object("model");
    TraceModel tm;
    tm.name    = mr.require_string("name");
    tm.layers  = int(mr.require_integer("layers", 1, 65535));
    tm.experts = int(mr.require_integer("experts", 1, 65535));
    tm.top_k   = int(mr.require_integer("top_k", 1, tm.experts));
    mr.finish();
    m.model = tm;
  }
  r.ignore("labels");
  const Json* labels = doc.contains("labels") ? &doc["labels"] : nullptr;
  if (!labels || !labels->is_array() || labels->empty())
    r.fail("labels", "must be a non-empty list of strings");
  if (labels->size() > 65535)
    r.fail("labels", "at most 65535 labels");
  for (const auto& l : *labels) {
    if (!l.is_string() || l.get<std::string>().empty())
      r.fail("labels", "must be a list of non-empty strings, found " + l.dump());
    for (const auto& seen : m.labels)
      if (seen == l.get<std::string>())
        r.fail("labels", "label \"" + seen + "\" appears twice");
    m.labels.push_back(l.get<std::string>());
  }
  if (!doc.contains("routing_file"))
    r.fail("routing_file", "is required (null when the trace has no routing)");
  const bool no_routing = r.is_null("routing_file");
  m.routing_file        = no_routing ? "" : r.string("routing_file", "");
  if (!no_routing) {
    if (m.routing_file.empty())
      r.fail("routing_file", "must be a file name or null");
    if (!m.model)
      r.fail("model", "is required when routing_file is given (layers, experts, top_k of the routing)");
    const fs::path rf = fs::path(path).parent_path() / m.routing_file;
    std::error_code ec;
    if (!fs::exists(rf, ec))
      r.fail("routing_file", "file not found: " + rf.string());
    check_input_file(rf.string());
  } else if (m.model) {
    // A model without routing is allowed (it documents what the lengths came from).
  }
  m.prefix_block_tokens = r.is_null("prefix_block_tokens") ? 0 : int(r.integer("prefix_block_tokens", 0, 1, 1 << 24));
  m.source              = r.string("source", "");
  m.request_count =
      r.has("request_count") ? r.require_integer("request_count", 1, std::numeric_limits<uint32_t>::max()) : -1;
  auto checksum = [&](const char* key) {
    if (!r.has(key) || r.is_null(key))
      return std::string();
    const std::string v = r.require_string(key);
    if (v.size() != 16 || v.find_first_not_of("0123456789abcdef") != std::string::npos)
      r.fail(key, "must be 16 lowercase hex digits (FNV-1a 64), got \"" + v + "\"");
    return v;
  };
  m.requests_fnv1a64 = checksum("requests_fnv1a64");
  m.routing_fnv1a64  = checksum("routing_fnv1a64");
  if (no_routing && !m.routing_fnv1a64.empty())
    r.fail("routing_fnv1a64", "given, but routing_file is null");
  r.finish();
  return m;
}

// ------------------------------------------------------------------------------------------ requests

namespace {

// One line's checks; errors name "line N: key".
struct LineContext {
  const std::string& file;
  long line;
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const
  {
    throw InputError(file, "line " + std::to_string(line) + (key.empty() ? "" : ": " + key), problem);
  }
  long integer(const Json& v, const std::string& key, long min, long max) const
  {
    if (!v.is_number_integer())
      fail(key, std::string("must be an integer, got ") + (v.is_number() ? v.dump() : v.type_name()));
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<long>::max()))
      fail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + v.dump());
    const long x = v.get<long>();
    if (x < min || x > max)
      fail(key,
           "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + std::to_string(x));
    return x;
  }
};

std::string format_number(double v)
{
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// The reader's rules, shared with the writer: `file` names the file the errors blame.
class RequestChecker {
 public:
  RequestChecker(const std::string& file, const TraceManifest& m) : file_(file), m_(m)
  {
    for (size_t i = 0; i < m.labels.size(); ++i)
      label_index_[m.labels[i]] = uint16_t(i);
  }

  TraceRequest parse(const Json& obj, long line)
  {
    LineContext c{file_, line};
    if (!obj.is_object())
      c.fail("", std::string("must be a JSON object, got ") + obj.type_name());
    TraceRequest q;
    bool have_id = false, have_arrival = false, have_prompt = false, have_output = false, have_label = false;
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const std::string& key = it.key();
      const Json& v          = it.value();
      if (key == "id") {
        q.id    = uint32_t(c.integer(v, key, 0, std::numeric_limits<uint32_t>::max()));
        have_id = true;
      } else if (key == "arrival_s") {
        if (!v.is_number())
          c.fail(key, std::string("must be a number, got ") + v.type_name());
        q.arrival_s  = v.get<double>();
        have_arrival = true;
      } else if (key == "prompt_tokens") {
        q.prompt_tokens = int(c.integer(v, key, 1, 1 << 30));
        have_prompt     = true;
      } else if (key == "output_tokens") {
        q.output_tokens = int(c.integer(v, key, 2, 1 << 30));
        have_output     = true;
      } else if (key == "label") {
        if (!v.is_string())
          c.fail(key, std::string("must be a string, got ") + v.type_name());
        auto f = label_index_.find(v.get<std::string>());
        if (f == label_index_.end())
          c.fail(key, "\"" + v.get<std::string>() + "\" is not one of the labels in " + kTraceManifestName);
        q.label    = f->second;
        have_label = true;
      } else if (key == "calibration") {
        if (!v.is_boolean())
          c.fail(key, std::string("must be true or false, got ") + v.type_name());
        q.calibration = v.get<bool>();
      } else if (key == "prefix_hashes") {
        if (!v.is_array())
          c.fail(key, std::string("must be a list of unsigned 64-bit integers, got ") + v.type_name());
        q.prefix_hashes.reserve(v.size());
        for (const auto& h : v) {
          if (!h.is_number_unsigned() && !(h.is_number_integer() && h.get<long>() >= 0))
            c.fail(key, "must be a list of unsigned 64-bit integers, found " + h.dump());
          q.prefix_hashes.push_back(h.get<uint64_t>());
        }
      } else if (key == "routing_record") {
        q.routing_record = int32_t(c.integer(v, key, 0, std::numeric_limits<int32_t>::max()));
      } else {
        c.fail(key, "unknown key");
      }
    }
    if (!have_id)
      c.fail("id", "is required");
    if (!have_arrival)
      c.fail("arrival_s", "is required");
    if (!have_prompt)
      c.fail("prompt_tokens", "is required");
    if (!have_output)
      c.fail("output_tokens", "is required");
    if (!have_label)
      c.fail("label", "is required");
    check(q, line);
    return q;
  }

  // Rules across fields and lines (also applied by the writer to structs).
  void check(const TraceRequest& q, long line)
  {
    LineContext c{file_, line};
    if (q.id != uint32_t(count_))
      c.fail("id",
             "expected " + std::to_string(count_) + " (ids are 0, 1, ... in file order), got " + std::to_string(q.id));
    if (!std::isfinite(q.arrival_s) || q.arrival_s < 0)
      c.fail("arrival_s", "must be a finite number >= 0, got " + format_number(q.arrival_s));
    if (q.arrival_s < last_arrival_)
      c.fail("arrival_s", format_number(q.arrival_s) + " is before the previous request's " +
                              format_number(last_arrival_) + " (arrivals must be non-decreasing)");
    if (q.prompt_tokens < 1)
      c.fail("prompt_tokens", "must be at least 1, got " + std::to_string(q.prompt_tokens));
    if (q.output_tokens < 2)
      c.fail("output_tokens", "must be at least 2, got " + std::to_string(q.output_tokens));
    if (q.label >= m_.labels.size())
      c.fail("label", "index " + std::to_string(q.label) + " is not a label of the manifest");
    if (!q.prefix_hashes.empty()) {
      if (m_.prefix_block_tokens == 0)
        c.fail("prefix_hashes", std::string("given, but ") + kTraceManifestName + " has no prefix_block_tokens");
      const long blocks = (long(q.prompt_tokens) + m_.prefix_block_tokens - 1) / m_.prefix_block_tokens;
      if (long(q.prefix_hashes.size()) > blocks)
        c.fail("prefix_hashes", std::to_string(q.prefix_hashes.size()) + " hashes for a prompt of " +
                                    std::to_string(q.prompt_tokens) + " tokens (" + std::to_string(blocks) +
                                    " blocks of " + std::to_string(m_.prefix_block_tokens) + ")");
    }
    if (m_.routing_file.empty() && q.routing_record >= 0)
      c.fail("routing_record", std::string("given, but ") + kTraceManifestName + " has no routing_file");
    if (!m_.routing_file.empty() && q.routing_record < 0)
      c.fail("routing_record", std::string("is required: ") + kTraceManifestName + " names a routing file");
    last_arrival_ = q.arrival_s;
    ++count_;
  }

 private:
  const std::string& file_;
  const TraceManifest& m_;
  std::map<std::string, uint16_t> label_index_;
  long count_          = 0;
  double last_arrival_ = 0;
};

// With a routing file: its model dimensions match the manifest, and every request's record exists
// and has exactly the request's prompt and output lengths.
void check_routing(const Trace& t, const std::vector<TraceRequest>& requests, const std::string& requests_file)
{
  const GatingFile rf   = GatingFile::load_index(t.routing_path());
  const GatingHeader& h = rf.header();
  const TraceModel& m   = *t.manifest.model;
  if (h.layers != m.layers || h.experts != m.experts || h.top_k != m.top_k)
    throw InputError(t.manifest_path(), "model",
                     "layers " + std::to_string(m.layers) + ", experts " + std::to_string(m.experts) + ", top_k " +
                         std::to_string(m.top_k) + " differ from the routing file's header (" + t.routing_path() +
                         ": " + std::to_string(h.layers) + ", " + std::to_string(h.experts) + ", " +
                         std::to_string(h.top_k) + ")");
  for (size_t i = 0; i < requests.size(); ++i) {
    const TraceRequest& q   = requests[i];
    const std::string field = "line " + std::to_string(i + 1) + ": routing_record";
    if (uint64_t(q.routing_record) >= rf.records())
      throw InputError(requests_file, field,
                       "record " + std::to_string(q.routing_record) + " does not exist (" + t.routing_path() + " has " +
                           std::to_string(rf.records()) + ")");
    const GatingRecordInfo& info = rf.record(size_t(q.routing_record));
    // The last output token is sampled but never fed through the model, so its routing is optional.
    const bool output_ok =
        info.output_tokens == uint32_t(q.output_tokens) || info.output_tokens + 1 == uint32_t(q.output_tokens);
    if (info.prompt_tokens != uint32_t(q.prompt_tokens) || !output_ok)
      throw InputError(requests_file, field,
                       "record " + std::to_string(q.routing_record) + " holds " + std::to_string(info.prompt_tokens) +
                           " prompt + " + std::to_string(info.output_tokens) + " output tokens, the request has " +
                           std::to_string(q.prompt_tokens) + " + " + std::to_string(q.output_tokens) +
                           " (prompts must be equal; the record's output may lack the request's last token only)");
  }
}

}  // namespace

namespace {

[[noreturn]] void cut_or_edited(const std::string& file, const std::string& what)
{
  throw InputError(file, "",
                   what + std::string(" recorded in ") + kTraceManifestName +
                       ": the file was cut or edited after the trace was written (regenerate or re-import the trace)");
}

}  // namespace

std::vector<TraceRequest> read_trace_requests(const std::string& path, const TraceManifest& manifest)
{
  const std::string all = read_input_file(path);
  if (!manifest.requests_fnv1a64.empty() &&
      fnv1a64_text(fnv1a64(all.data(), all.size())) != manifest.requests_fnv1a64) {
    long lines = 0;
    std::istringstream scan(all);
    for (std::string l; std::getline(scan, l);)
      lines += l.find_first_not_of(" \t\r") != std::string::npos;
    if (manifest.request_count >= 0 && lines != manifest.request_count)
      cut_or_edited(path, std::to_string(lines) + " requests, not the " + std::to_string(manifest.request_count));
    cut_or_edited(path, "contents differ from the checksum " + manifest.requests_fnv1a64);
  }
  std::istringstream in(all);
  RequestChecker checker(path, manifest);
  std::vector<TraceRequest> out;
  std::string text;
  long line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) {
      if (in.peek() == std::char_traits<char>::eof())
        break;  // a trailing blank line
      throw InputError(path, "line " + std::to_string(line), "empty line (one JSON object per line)");
    }
    out.push_back(checker.parse(parse_json(text, path, "line " + std::to_string(line)), line));
  }
  if (out.empty())
    throw InputError(path, "", "no requests");
  if (manifest.request_count >= 0 && long(out.size()) != manifest.request_count)
    cut_or_edited(path, std::to_string(out.size()) + " requests, not the " + std::to_string(manifest.request_count));
  return out;
}

void check_routing_checksum(const TraceManifest& manifest, const std::string& routing_path, uint64_t checksum)
{
  if (!manifest.routing_fnv1a64.empty() && fnv1a64_text(checksum) != manifest.routing_fnv1a64)
    cut_or_edited(routing_path, "contents differ from the checksum " + manifest.routing_fnv1a64);
}

Trace read_trace(const std::string& dir)
{
  Trace t;
  t.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(dir, "", "not a trace directory");
  t.manifest = read_trace_manifest(t.manifest_path());
  t.requests = read_trace_requests(t.requests_path(), t.manifest);
  if (!t.manifest.routing_file.empty())
    check_routing(t, t.requests, t.requests_path());
  return t;
}

// -------------------------------------------------------------------------------------------- writer

void write_trace(const std::string& dir, const TraceManifest& manifest, const std::vector<TraceRequest>& requests,
                 const std::string& named_dir)
{
  Trace t;
  t.dir       = dir;
  t.manifest  = manifest;
  Trace shown = t;  // what errors name
  if (!named_dir.empty())
    shown.dir = named_dir;
  const std::string req_path = shown.requests_path();
  const std::string man_path = shown.manifest_path();
  // The manifest's own rules.
  if (manifest.labels.empty())
    throw InputError(man_path, "labels", "must list at least one label");
  if (!manifest.routing_file.empty() && !manifest.model)
    throw InputError(man_path, "model", "is required when routing_file is given");
  if (requests.empty())
    throw InputError(req_path, "", "no requests");
  RequestChecker checker(req_path, manifest);
  for (size_t i = 0; i < requests.size(); ++i)
    checker.check(requests[i], long(i) + 1);
  std::error_code ec;
  if (!manifest.routing_file.empty() && fs::is_regular_file(t.routing_path(), ec))
    check_routing(t, requests, req_path);

  std::string text;
  text.reserve(requests.size() * 96);
  char buf[64];
  for (const TraceRequest& q : requests) {
    text += "{\"id\":" + std::to_string(q.id);
    // Shortest round-trip representation of the arrival time.
    std::snprintf(buf, sizeof buf, "%.17g", q.arrival_s);
    for (int prec = 1; prec < 17; ++prec) {
      char tmp[64];
      std::snprintf(tmp, sizeof tmp, "%.*g", prec, q.arrival_s);
      if (std::strtod(tmp, nullptr) == q.arrival_s) {
        std::snprintf(buf, sizeof buf, "%s", tmp);
        break;
      }
    }
    text += ",\"arrival_s\":";
    text += buf;
    text += ",\"prompt_tokens\":" + std::to_string(q.prompt_tokens);
    text += ",\"output_tokens\":" + std::to_string(q.output_tokens);
    text += ",\"label\":" + Json(manifest.labels[q.label]).dump();
    if (q.calibration)
      text += ",\"calibration\":true";
    if (!q.prefix_hashes.empty()) {
      text += ",\"prefix_hashes\":[";
      for (size_t i = 0; i < q.prefix_hashes.size(); ++i)
        text += (i ? "," : "") + std::to_string(q.prefix_hashes[i]);
      text += "]";
    }
    if (q.routing_record >= 0)
      text += ",\"routing_record\":" + std::to_string(q.routing_record);
    text += "}\n";
  }

  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  doc["format"]              = "eldr-trace";
  doc["version"]             = kTraceFormatVersion;
  if (manifest.model)
    doc["model"] = nlohmann::ordered_json{{"name", manifest.model->name},
                                          {"layers", manifest.model->layers},
                                          {"experts", manifest.model->experts},
                                          {"top_k", manifest.model->top_k}};
  else
    doc["model"] = nullptr;
  doc["labels"] = manifest.labels;
  doc["routing_file"] =
      manifest.routing_file.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(manifest.routing_file);
  doc["prefix_block_tokens"] = manifest.prefix_block_tokens > 0 ? nlohmann::ordered_json(manifest.prefix_block_tokens)
                                                                : nlohmann::ordered_json(nullptr);
  doc["source"]              = manifest.source;
  doc["request_count"]       = requests.size();
  doc["requests_fnv1a64"]    = fnv1a64_text(fnv1a64(text.data(), text.size()));
  if (!manifest.routing_file.empty() && fs::is_regular_file(t.routing_path(), ec))
    doc["routing_fnv1a64"] = fnv1a64_text(fnv1a64_file(t.routing_path()));

  write_file_atomically(t.requests_path(), text);
  write_file_atomically(t.manifest_path(), doc.dump(2) + "\n");
}

}  // namespace eldr
