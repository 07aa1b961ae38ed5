#pragma once
#include "sim/cluster/cluster_state.hpp"

namespace eldr {

// Watches the KV transfers headed for one decode instance and hands each request to the worker the
// moment its transfer completes, in completion order (a small cache is not held up behind a large
// one). Separate from the worker so arrivals are timed exactly while the worker sleeps through a step.
class KvReceiver {
public:
  KvReceiver(ClusterState& state, int index) : s_(state), index_(index) {}
  void operator()();

private:
  ClusterState& s_;
  int index_;
};

// One decode instance: continuous batching. Between steps it admits arrived requests FIFO while
// they fit (KV blocks for prompt + output reserved at admission; at most max_decode_seqs); each step
// generates one token for every sequence in the batch, its time given by the cost model from the
// distinct experts the batch's tokens pick.
class DecodeWorker {
public:
  DecodeWorker(ClusterState& state, int index);
  void operator()();

private:
  struct Sequence {
    const Request* request;
    double kv_bytes;  // reserved
    int generated;    // output tokens so far, the first one included
  };
  void admit();
  double step_time(double now);
  void finish(const Sequence& seq, double now);

  ClusterState& s_;
  int index_;
  double kv_capacity_;
  double kv_used_ = 0;
  long warmup_requests_ = 0;  // the driver waits for these to finish before the measured phase
  std::vector<Sequence> batch_;
  std::vector<uint64_t> union_;
  std::vector<TokenRef> tokens_;
  std::vector<uint16_t> distinct_;
};

}  // namespace eldr
