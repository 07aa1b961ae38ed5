#include "sim/routing/registry/plugin_table.hpp"
#include "sim/config/config_reader.hpp"
#include "sim/routing/compose/endpoint_picker_config.hpp"

namespace eldr {

namespace {

// One line per plugin: the name of its PluginEntry, defined in the plugin's own file (sim/routing/compose/,
// the policies' in sim/routing/eldr/, the worked examples' in examples/plugins/). Filters run, and scores
// add up, in this order whatever a config's; it is also the order of `eldrsim config keys`. The first
// picker is a composition's when it names none.
#define ELDR_PLUGINS(PLUGIN)                                                                                           \
  PLUGIN(kLabelPoolFilter)                                                                                             \
  PLUGIN(kLoadThresholdFilter)                                                                                         \
  PLUGIN(kLocalityBandFilter)                                                                                          \
  PLUGIN(kQueueScorer)                                                                                                 \
  PLUGIN(kKvCacheUtilizationScorer)                                                                                    \
  PLUGIN(kPrefixCacheScorer)                                                                                           \
  PLUGIN(kExpertLocalityScorer)                                                                                        \
  PLUGIN(kLabelMatchScorer)                                                                                            \
  PLUGIN(kPrecisePrefixCacheScorer)                                                                                    \
  PLUGIN(kActiveRequestScorer)                                                                                         \
  PLUGIN(kKvHeadroomScorer)                                                                                            \
  PLUGIN(kMaxScorePicker)                                                                                              \
  PLUGIN(kRandomPicker)                                                                                                \
  PLUGIN(kP2cPicker)                                                                                                   \
  PLUGIN(kRoundRobinPicker)

}  // namespace

#define ELDR_DECLARE(ENTRY) extern const PluginEntry ENTRY;
ELDR_PLUGINS(ELDR_DECLARE)
#undef ELDR_DECLARE

namespace {

#define ELDR_ADDRESS(ENTRY) &ENTRY,
const PluginEntry* const kPlugins[] = {ELDR_PLUGINS(ELDR_ADDRESS)};
#undef ELDR_ADDRESS

}  // namespace

PluginCatalog plugin_table()
{
  return kPlugins;
}

const CompositionSections& composition_sections()
{
  static const CompositionSections sections(kPlugins);
  return sections;
}

const RouterSection kComposedSection = {
    "composed",
    composition_sections().composed_keys(),
    [](ConfigReader& r, const std::string& root) { composition_sections().check_composed(r, root); },
    false,
    false,
    CompositionSections::check_composed_with};
const RouterSection kPrefillSection = {
    "prefill_router",
    composition_sections().prefill_keys(),
    [](ConfigReader& r, const std::string& root) { composition_sections().check_prefill(r, root); },
    true,
    false,
    [](const ConfigReader& r, const Experiment& x) { composition_sections().check_prefill_with(r, x); }};

Composition read_composition(const Json& section, const std::string& file)
{
  return composition_sections().read(section, file);
}

std::optional<Composition> read_prefill_composition(const Json& section, const std::string& file)
{
  return composition_sections().read_prefill(section, file);
}

Json read_endpoint_picker_config(const std::string& path, std::vector<std::string>* notes, ProfileRole role)
{
  return read_endpoint_picker_config(path, plugin_table(), notes, role);
}

}  // namespace eldr
