#pragma once
// A decode routing policy: after prefill, which decode worker continues a request? Routers are plain
// C++; they see the request and a read-only view of the decode workers' load, nothing else.
#include "sim/workload/request.hpp"

#include <span>
#include <string_view>

namespace eldr {

// In-flight requests per decode worker, counted from the routing decision to the end of the decode.
struct DecodeLoadView {
  std::span<const int> in_flight;
  int workers() const { return int(in_flight.size()); }
};

class DecodeRouter {
public:
  virtual ~DecodeRouter() = default;
  virtual std::string_view name() const = 0;
  // Returns a worker index in [0, load.workers()).
  virtual int choose(const Request& r, const DecodeLoadView& load) = 0;
};

}  // namespace eldr
