// The decode worker's EPLB steps (docs/eplb.md): when rearrangements start and when they take effect.
//
// vLLM's default is asynchronous (EPLBConfig.use_async = true at vllm-project/vllm 00193b82): the
// instance keeps decoding on the old placement while the weights move, and the new one serves from the
// first step after they have all arrived. So a rearrangement here stalls nothing: it starts the moves
// as SimGrid flows between the instance's GPUs (their links' bandwidth and sharing decide how long
// they take), and plan() runs one step at a time until they end.
#include "sim/cluster/decode_worker.hpp"

namespace sg4 = simgrid::s4u;

namespace eldr {

int DecodeWorker::eplb_steps(int n)
{
  if (eplb_->transfer_pending()) {
    if (eplb_flows_->running > 0)
      return 1;  // still moving: the old placement serves this step
    s_.recorder.eplb.transfer_s += eplb_flows_->end_s - eplb_started_s_;
    eplb_->finish_rearrangement();
    // Steps planned ahead counted their picks on the old replicas: they are planned again.
    unions_ready_ = 0;
    for (Sequence& seq : batch_)
      seq.planned = 0;
  }
  return int(std::min<long>(n, eplb_->steps_until_rearrangement()));
}

void DecodeWorker::eplb_record(int k)
{
  if (!eplb_->commit(slot(k), step_ranks(k)))
    return;
  const std::vector<double> bytes = eplb_->start_rearrangement(s_.experiment.model.expert_bytes);
  const auto& gpus                = s_.decode_gpu_hosts[size_t(index_)];
  eplb_started_s_                 = sg4::Engine::get_clock();  // the end of step k, the last committed
  eplb_flows_                     = std::make_shared<EplbFlows>(EplbFlows{0, eplb_started_s_});
  // One sending actor per pair of GPUs, each a blocking flow: a run that ends while weights move
  // leaves no activity behind.
  for (int from = 0; from < ep_; ++from)
    for (int to = 0; to < ep_; ++to) {
      const double b = bytes[size_t(from * ep_ + to)];
      if (b <= 0)
        continue;
      ++eplb_flows_->running;
      sg4::Host* src = gpus[size_t(from)];
      sg4::Host* dst = gpus[size_t(to)];
      sg4::Actor::create("eplb-" + std::to_string(index_), src, [flows = eplb_flows_, src, dst, b] {
        sg4::Comm::sendto(src, dst, uint64_t(b));
        flows->end_s = std::max(flows->end_s, sg4::Engine::get_clock());
        --flows->running;
      })->daemonize();
    }
}

}  // namespace eldr
