#pragma once
#include "sim/cluster/cluster_state.hpp"
#include "sim/cost/eplb.hpp"
#include "sim/gating/expected_union.hpp"

#include <memory>
#include <optional>

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
// they fit (KV blocks for prompt + output reserved at admission, prompt blocks shared with prefix
// caching; at most max_decode_seqs); each step
// generates one token for every sequence in the batch (speculative decoding: verifies k + 1 of them
// and emits 1 + a, docs/speculative.md), its time given by the cost model from the distinct experts
// the batch's tokens pick.
//
// Speed: only admissions and finishes are visible to other actors, so the worker does not sleep
// step by step. It plans the steps up to the next finish (at most `max_block_steps`), each with its
// own expert union and cost, and sleeps through all of them at once; a KV arrival wakes it, and it
// then sleeps to the end of the step in progress, admits, and plans again from there, keeping the
// unions already built (the new sequences' tokens are ORed in). Step records and simulated times
// are those of one sleep per step (max_block_steps = 1) with one exception: SimGrid ends a sleep at
// any other event less than its timing precision (1 ns) before the sleep's end, which shifts that
// step's end by under 1 ns; a step slept through is not a SimGrid event, so it keeps its exact end.
// It happens in some runs (1 of the 15 calibration cells, not S1) and moves times by under 1 ns.
class DecodeWorker {
 public:
  DecodeWorker(ClusterState& state, int index, int max_block_steps);
  void operator()();

 private:
  struct Sequence {
    const Request* request;
    int prompt_tokens;    // request's, kept here: plan and commit read them for every sequence each step, and
    int output_tokens;    // the requests are spread over memory
    long private_blocks;  // KV blocks of its own (output, partial prompt block; all of them without prefix caching)
    int generated;        // output tokens so far, the first one included
    int planned;          // the upcoming steps whose union already holds this sequence's token
    int owner;            // expert parallel: the rank that holds its hidden state (dispatches its tokens)
    std::vector<uint32_t> hot;  // speculative sampled windows: hot_cells of its law
  };
  void admit();
  int plan(double start);
  int sleep_through(double start, int steps);
  void commit(int steps, double now);
  void finish(const Sequence& seq, double now);
  size_t slot(int k) const;
  std::span<uint64_t> step_union(int k);
  std::span<uint32_t> step_ranks(int k);
  void accumulate_ranks(int k);
  DecodeStepCost step_cost(int k, int batch, const AttentionLoad& attention);
  double step_distinct(int k);
  // Speculative decoding: the law of a sequence's verified window; the tokens sequence i had at the
  // start of planned step k.
  TokenLaw decode_law(const Request& r) const;
  int generated_at(size_t i, int k) const;
  int plan_speculative(int n);
  // EPLB (decode_eplb.cpp): the steps plan may run under the placement in force, applying a new one
  // whose weights have arrived; after committed step k, starting a rearrangement that is due.
  int eplb_steps(int n);
  void eplb_record(int k);

  ClusterState& s_;
  int index_;
  int max_block_;
  BlockCache& cache_;         // this worker's KV memory, in blocks
  long warmup_requests_ = 0;  // the driver waits for these to finish before the measured phase
  std::vector<Sequence> batch_;
  std::vector<uint64_t> unions_;     // ring of max_block_ unions of the upcoming steps
  int unions_ready_ = 0;             // how many of them exist
  std::vector<StepRecord> planned_;  // ring of the planned steps: start, duration, ...
  int head_ = 0;                     // the slot of the next step in both rings
  std::vector<TokenRef> tokens_;
  std::vector<uint16_t> counts_;  // sampled: distinct experts per layer of the step's union
  std::vector<double> distinct_;  // what the cost model gets: the counts, or their expectation
  // workload.union = expected: the batch's miss products, kept as sequences join and leave (the
  // per-step unions above are then unused).
  std::optional<ExpectedUnion> expected_;
  long distinct_of_    = -1;  // expected_->changes() when distinct_ was last read from it
  double distinct_sum_ = 0;   // and their sum
  // Expert parallel (ep_ > 1) only: per planned step, [layer][rank] picks then [layer][owner][rank]
  // tokens dispatched (a ring like unions_), accumulated from per-token masks; this instance's rank masks.
  int ep_ = 1;
  std::span<const uint64_t> rank_masks_;
  std::vector<uint32_t> rank_acc_;
  std::vector<int> owners_;  // owner of each of tokens_
  std::vector<uint16_t> rank_distinct_;
  std::vector<uint32_t> rank_picks_, pair_max_;
  // Speculative decoding (spec_ draft tokens a step, 0: none): per planned step the tokens each
  // sequence had at its start, [sequence][0 .. max_block_]; the window masks of a step's sequences.
  int spec_             = 0;
  uint64_t accept_seed_ = 0, expert_seed_ = 0;
  std::vector<int> gen_at_;
  std::vector<uint64_t> window_;
  // EPLB (eplb section): this instance's state and the weight flows of the rearrangement in flight
  // (flows still running, when the last ended: shared with the actors that send them).
  struct EplbFlows {
    int running  = 0;
    double end_s = 0;
  };
  std::optional<EplbInstance> eplb_;
  std::shared_ptr<EplbFlows> eplb_flows_;
  double eplb_started_s_      = 0;
  long admitted_              = 0;
  const Request* logged_wait_ = nullptr;  // verbose log: the request whose wait for admission was logged
};

}  // namespace eldr
