#pragma once
// The decode routers, in one table (router_registry.cpp): `eldrsim routers`, --router's help, the
// config's list of valid names and the factory all read it, so a new router is one line there
// (docs/adding-a-router.md).
#include "sim/config/experiment.hpp"
#include "sim/routing/compose/composition.hpp"
#include "sim/routing/decode_router.hpp"
#include "sim/routing/registry/plugin_table.hpp"
#include "sim/routing/router_setup.hpp"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace eldr {

// A column of a sweep's combined.csv: the value of `key` each point's run recorded (empty where its
// router does not read it).
struct ResultColumn {
  const char* header;
  const char* key;
};

struct RouterEntry {
  const char* name;
  const char* description;  // one line, for `eldrsim routers --describe`
  // Throws std::invalid_argument (or InputError) on a setup the router cannot work with.
  // nullptr for a built-in composition.
  std::unique_ptr<DecodeRouter> (*make)(const RouterSetup& setup);
  // The config section holding the router's own parameters, named after it (nullptr: none): its key
  // declarations and reader. Every section is read whichever router the config names, so a typo in one
  // is an error before any run.
  const RouterSection* section = nullptr;
  // Runs like any router, but `eldrsim routers` (what `make run` and the studies loop over) lists it
  // only with --all: the config's own composition, and the worked examples (examples/routers/).
  bool extra = false;
  // A built-in policy as a composition: the composed section's JSON form (its name is the router's).
  const char* composition = nullptr;
  // The router's parameters a sweep's combined.csv shows as columns of every row.
  std::span<const ResultColumn> columns = {};
};

std::span<const RouterEntry> decode_routers();
const RouterEntry* find_decode_router(std::string_view name);  // nullptr: no such router
std::vector<std::string> decode_router_names();                // in table order

// Builds a decode router by name; throws std::invalid_argument on an unknown name or a setup the
// router cannot work with.
std::unique_ptr<DecodeRouter> make_decode_router(const std::string& name, const RouterSetup& setup);

// The prefill router the experiment composes (its prefill_router section, `setup` for the prefill
// workers), nullptr when it composes none: the front end's consistent-hash ring routes prefill.
std::unique_ptr<DecodeRouter> make_prefill_router(const RouterSetup& setup);

// A built-in router's composition (std::logic_error for a router that is not one).
Composition builtin_composition(const RouterEntry& e);

// The composition the experiment's decode router runs: a built-in policy's, or the config's composed
// section for "composed"; nullopt for a router of its own making (the examples).
std::optional<Composition> decode_composition(const Experiment& x);

// The routers' result columns in table order, each key once (what a sweep's combined.csv shows).
std::vector<ResultColumn> result_columns();

// The table as the config reader sees it: the names with their descriptions, and the sections.
const RouterCatalog& router_catalog();

}  // namespace eldr
