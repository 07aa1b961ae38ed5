#include "sim/cost/moe_kernel.hpp"

namespace eldr {

int decode_graph_tokens(int batch)
{
  if (batch <= 2)
    return batch;
  if (batch <= 4)
    return 4;
  if (batch <= 256)
    return (batch + 7) / 8 * 8;
  if (batch <= 512)
    return (batch + 15) / 16 * 16;
  return batch;
}

int fused_moe_config(double tokens)
{
  if (tokens <= 32)
    return 0;
  if (tokens <= 64)
    return 1;
  if (tokens <= 96)
    return 2;
  return 3;
}

}  // namespace eldr
