#pragma once
// Collectives among the GPUs of one multi-GPU instance, over the node's fully connected fabric (one
// xGMI link per GPU pair, each direction with its own bandwidth: configs/cluster/*.json). Every GPU
// sends to every other at once over its own link, so an exchange lasts as long as its largest
// message. These closed forms stand in for SimGrid communications inside a decode step (one per MoE
// layer per step would cost more than the rest of the simulation); tests/integration checks them
// against SimGrid flows on the platform.
//
// Plain C++ (no SimGrid).

namespace eldr {

struct IntraNodeLinks {
  double bandwidth_Bps = 0;  // per GPU pair, each direction
  double latency_s     = 0;
};

// An all-to-all whose largest message between two GPUs is `max_pair_bytes` (0: nothing is sent).
inline double all_to_all_s(const IntraNodeLinks& l, double max_pair_bytes)
{
  return max_pair_bytes > 0 ? l.latency_s + max_pair_bytes / l.bandwidth_Bps : 0.0;
}

// An all-reduce of `bytes` over `ranks` GPUs, done directly on the full mesh: a reduce-scatter (each
// GPU sends each other its bytes / ranks share) then an all-gather (the same volume back).
inline double all_reduce_s(const IntraNodeLinks& l, int ranks, double bytes)
{
  return ranks > 1 ? 2 * all_to_all_s(l, bytes / ranks) : 0.0;
}

}  // namespace eldr
