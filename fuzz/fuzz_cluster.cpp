// A cluster file (configs/cluster/*.json).
#include "fuzz_common.hpp"
#include "sim/config/cluster_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  const std::string path = eldr::fuzz::write_input("cluster.json", data, size);
  return eldr::fuzz::expect_clean([&] { eldr::load_cluster(path); });
}
