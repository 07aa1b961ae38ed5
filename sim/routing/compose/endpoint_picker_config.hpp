#pragma once
// llm-d's scheduler configuration (an EndpointPickerConfig YAML file) read as a composition: its
// decode profile becomes the `composed` section's filters, scorers and picker, and a P/D file's prefill
// profile the prefill router's (the prefill_router section's). The format followed is
// llm-d-inference-scheduler v0.8.0 with gateway-api-inference-extension v1.5.0 (its plugin types and
// parameters: endpoint_picker_config.cpp; configs/scheduler/README.md).
#include "sim/common/json_reader.hpp"
#include "sim/routing/compose/plugin.hpp"

#include <string>
#include <vector>

namespace eldr {

// Which of a file's scheduling profiles is read: the decode router's, or the prefill router's (a P/D
// file's, named by its profile handler; llm-d's default "prefill").
enum class ProfileRole { decode, prefill };

// The `role` profile of the EndpointPickerConfig at `path`, as the composed section's JSON form
// without "name": {"filters": {...}, "scorers": {...}, "picker": {...}}. Only what is structural is
// checked here (the YAML, plugin types, references, weights, which parameters exist: the plugins are
// `catalog`, each under its own type name); the values go
// through the composed section's reader afterwards. Throws InputError(path, YAML path, problem).
// What llm-d runs but eldr-sim reads differently or drops (an older plugin name, a parameter llm-d
// ignores, a profile not read) is appended to `notes`, one line each ("FILE: FIELD: what").
Json read_endpoint_picker_config(const std::string& path, PluginCatalog catalog,
                                 std::vector<std::string>* notes = nullptr, ProfileRole role = ProfileRole::decode);

// Whether the file at `path` has a prefill profile: a P/D profile handler and the profile it names
// (false for a file that cannot be read: the reader that uses it says why).
bool has_prefill_profile(const std::string& path);

}  // namespace eldr
