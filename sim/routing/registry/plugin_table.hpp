#pragma once
// The composed routers' plugins, in one table (plugin_table.cpp): a new filter, scorer or picker is its
// own file and one line there (docs/adding-a-router.md). The composed and prefill_router sections, and
// the readers of compositions and of llm-d's scheduler files, run on this table.
#include "sim/config/experiment.hpp"
#include "sim/routing/compose/composition.hpp"
#include "sim/routing/compose/plugin.hpp"

#include <optional>
#include <string>
#include <vector>

namespace eldr {

// The registered plugins, in the pipeline's order (filters run, and scores add up, in this order).
PluginCatalog plugin_table();
// The composed and prefill_router sections generated from the table.
const CompositionSections& composition_sections();
extern const RouterSection kComposedSection;
extern const RouterSection kPrefillSection;

// composition_sections()'s readers (composition.hpp), and the scheduler-file reader
// (endpoint_picker_config.hpp), on the table's plugins.
Composition read_composition(const Json& section, const std::string& file);
std::optional<Composition> read_prefill_composition(const Json& section, const std::string& file);
Json read_endpoint_picker_config(const std::string& path, std::vector<std::string>* notes = nullptr,
                                 ProfileRole role = ProfileRole::decode);

}  // namespace eldr
