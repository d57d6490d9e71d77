#include "models/tensor_parallel_model.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "base/error.h"

namespace md {

// Ranks 1.. each on a thread of its own, kept for the model's life (a decode step is a few
// milliseconds; starting threads per call would show). Rank 0 runs on the caller's thread.
class TensorParallelModel::Threads {
 public:
  explicit Threads(int ranks) {
    for (int r = 1; r < ranks; ++r) threads_.emplace_back([this, r] { serve(r); });
  }
  ~Threads() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // body(r) for every rank; the exceptions they threw, by rank (null where none).
  std::vector<std::exception_ptr> run(const std::function<void(int)>& body) {
    const int ranks = static_cast<int>(threads_.size()) + 1;
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      errors_ = &errors;
      pending_ = ranks - 1;
      ++generation_;
    }
    start_.notify_all();
    run_one(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    body_ = nullptr;
    errors_ = nullptr;
    return errors;
  }

  // Set by the owner: what a rank that threw does before the others can go on (abort the group).
  std::function<void(int, const std::string&)> on_failure;

 private:
  void run_one(int r) {
    try {
      (*body_)(r);
    } catch (const std::exception& e) {
      (*errors_)[static_cast<std::size_t>(r)] = std::current_exception();
      on_failure(r, e.what());
    } catch (...) {
      (*errors_)[static_cast<std::size_t>(r)] = std::current_exception();
      on_failure(r, "an unknown exception");
    }
  }

  void serve(int r) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      run_one(r);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* body_ = nullptr;
  std::vector<std::exception_ptr>* errors_ = nullptr;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

// A sequence on every rank: each rank's state holds its own KV heads.
class TensorParallelModel::States final : public SequenceState {
 public:
  explicit States(std::vector<std::unique_ptr<SequenceState>> ranks)
      : SequenceState(ranks[0]->capacity()), ranks_(std::move(ranks)) {
    sync();
  }
  SequenceState& rank(int r) { return *ranks_[static_cast<std::size_t>(r)]; }
  // The position every rank reached (they move together).
  void sync() { position_ = ranks_[0]->position(); }

  void reset() override {
    for (auto& s : ranks_) s->reset();
    sync();
  }
  std::unique_ptr<SequenceState> clone() const override {
    std::vector<std::unique_ptr<SequenceState>> copies;
    for (const auto& s : ranks_) copies.push_back(s->clone());
    return std::make_unique<States>(std::move(copies));
  }
  std::size_t bytes() const override {
    std::size_t total = 0;
    for (const auto& s : ranks_) total += s->bytes();
    return total;
  }
  void append_blocks(std::vector<std::pair<const void*, std::size_t>>& out) const override {
    for (const auto& s : ranks_) s->append_blocks(out);
  }

 private:
  std::vector<std::unique_ptr<SequenceState>> ranks_;
};

TensorParallelModel::TensorParallelModel(int ranks, const ModelRunOptions& options,
                                         const Loader& load) {
  if (ranks < 1) fail("tensor parallelism needs at least one rank, not {}", ranks);
  group_ = std::make_unique<dist::InProcessGroup>(ranks);
  const int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  for (int r = 0; r < ranks; ++r) {
    ModelRunOptions rank_options = options;
    rank_options.ranks = &group_->rank(r);
    rank_options.threads = std::max(1, threads / ranks);
    try {
      models_.push_back(load(rank_options));
    } catch (const Error& e) {
      fail("rank {} of {} cannot load: {}", r, ranks, e.what());
    }
  }
  logits_.resize(static_cast<std::size_t>(ranks));
  threads_ = std::make_unique<Threads>(ranks);
  threads_->on_failure = [this](int r, const std::string& why) { group_->rank(r).abort(why); };
}

TensorParallelModel::~TensorParallelModel() = default;

void TensorParallelModel::on_every_rank(const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors = threads_->run(body);
  bool failed = false;
  for (const auto& e : errors) failed = failed || e != nullptr;
  if (!failed) return;
  group_->recover();  // every rank has returned: none waits in a collective
  // Rank 0's own error when it had one (a request every rank refused reads as itself),
  // otherwise the abort's, which names the rank that failed.
  for (const auto& e : errors) {
    if (e != nullptr) std::rethrow_exception(errors[0] != nullptr ? errors[0] : e);
  }
}

std::string TensorParallelModel::description() const {
  return fmt::format("{} in-process tensor-parallel ranks; rank 0: {}", ranks(),
                     models_[0]->description());
}

template <typename Figure>
std::size_t TensorParallelModel::sum_over_ranks(Figure figure) const {
  std::size_t total = 0;
  for (const auto& m : models_) total += figure(*m);
  return total;
}

std::size_t TensorParallelModel::state_bytes_per_token() const {
  return sum_over_ranks([](const LanguageModel& m) { return m.state_bytes_per_token(); });
}

std::size_t TensorParallelModel::state_bytes_fixed() const {
  return sum_over_ranks([](const LanguageModel& m) { return m.state_bytes_fixed(); });
}

std::size_t TensorParallelModel::decode_weight_bytes() const {
  return sum_over_ranks([](const LanguageModel& m) { return m.decode_weight_bytes(); });
}

std::size_t TensorParallelModel::last_step_weight_bytes() const {
  return sum_over_ranks([](const LanguageModel& m) { return m.last_step_weight_bytes(); });
}

std::unique_ptr<SequenceState> TensorParallelModel::new_sequence(int64_t capacity) const {
  std::vector<std::unique_ptr<SequenceState>> states;
  for (const auto& m : models_) states.push_back(m->new_sequence(capacity));
  return std::make_unique<States>(std::move(states));
}

void TensorParallelModel::forward(SequenceState& state, std::span<const int32_t> tokens,
                                  LogitRows rows, std::vector<float>& logits) {
  auto& states = dynamic_cast<States&>(state);
  on_every_rank([&](int r) {
    models_[static_cast<std::size_t>(r)]->forward(
        states.rank(r), tokens, rows, r == 0 ? logits : logits_[static_cast<std::size_t>(r)]);
  });
  states.sync();
}

void TensorParallelModel::decode(std::span<SequenceState* const> states,
                                 std::span<const int32_t> tokens, std::vector<float>& logits) {
  std::vector<States*> sequences;
  for (SequenceState* s : states) sequences.push_back(&dynamic_cast<States&>(*s));
  on_every_rank([&](int r) {
    std::vector<SequenceState*> mine;
    for (States* s : sequences) mine.push_back(&s->rank(r));
    models_[static_cast<std::size_t>(r)]->decode(
        mine, tokens, r == 0 ? logits : logits_[static_cast<std::size_t>(r)]);
  });
  for (States* s : sequences) s->sync();
}

void TensorParallelModel::verify(SequenceState& state, std::span<const int32_t> tokens,
                                 std::vector<float>& logits) {
  auto& states = dynamic_cast<States&>(state);
  on_every_rank([&](int r) {
    models_[static_cast<std::size_t>(r)]->verify(
        states.rank(r), tokens, r == 0 ? logits : logits_[static_cast<std::size_t>(r)]);
  });
  states.sync();
}

void TensorParallelModel::commit(SequenceState& state, int64_t rows_kept) {
  auto& states = dynamic_cast<States&>(state);
  // No collective: each rank keeps the same rows of its own heads' state.
  for (int r = 0; r < ranks(); ++r) {
    models_[static_cast<std::size_t>(r)]->commit(states.rank(r), rows_kept);
  }
  states.sync();
}

void TensorParallelModel::set_tap_layers(std::vector<int64_t> layers) {
  for (auto& m : models_) m->set_tap_layers(layers);
}

void TensorParallelModel::rewind(SequenceState& state, int64_t position) const {
  auto& states = dynamic_cast<States&>(state);
  for (int r = 0; r < ranks(); ++r)
    models_[static_cast<std::size_t>(r)]->rewind(states.rank(r), position);
  states.sync();
}

bool TensorParallelModel::set_executor(ExecutorKind executor) {
  bool all = true;
  for (auto& m : models_) all = m->set_executor(executor) && all;
  return all;
}

}  // namespace md
