#include "models/rank_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <utility>

#include "base/error.h"

namespace md {

namespace {

// What rank 0 announces; the arguments follow each opcode.
enum Op : int64_t {
  kEnd = 0,       // —
  kNew = 1,       // id, capacity
  kDrop = 2,      // id
  kClone = 3,     // source id, new id
  kReset = 4,     // id
  kForward = 5,   // id, all rows (0 / 1), tokens…
  kDecode = 6,    // count, ids…, tokens…
  kRewind = 7,    // id, position
  kExecutor = 8,  // ExecutorKind
  kVerify = 9,    // id, tokens…
  kCommit = 10,   // id, rows kept
  kTaps = 11,     // layers…
};

void send(dist::Communicator& world, const std::vector<int64_t>& message) {
  int64_t size = static_cast<int64_t>(message.size());
  world.broadcast(&size, sizeof size, 0);
  world.broadcast(const_cast<int64_t*>(message.data()), message.size() * sizeof(int64_t), 0);
}

std::vector<int64_t> receive(dist::Communicator& world) {
  int64_t size = 0;
  world.broadcast(&size, sizeof size, 0);
  if (size < 1) fail("rank {}: a malformed announcement of {} values", world.rank(), size);
  std::vector<int64_t> message(static_cast<std::size_t>(size));
  world.broadcast(message.data(), message.size() * sizeof(int64_t), 0);
  return message;
}

std::vector<int32_t> tokens_of(std::span<const int64_t> values) {
  return {values.begin(), values.end()};
}

}  // namespace

class RankStreamModel::Announcements {
 public:
  void queue(int64_t op, std::vector<int64_t> arguments) {
    arguments.insert(arguments.begin(), op);
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back(std::move(arguments));
  }
  int64_t next_id() {
    std::lock_guard<std::mutex> lock(mutex_);
    return next_id_++;
  }
  std::vector<std::vector<int64_t>> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(queued_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<std::vector<int64_t>> queued_;  // [op, arguments…]
  int64_t next_id_ = 0;
};

// Rank 0's sequence: its own shard's state, and the id the other ranks know it by.
class RankStreamModel::State final : public SequenceState {
 public:
  State(std::shared_ptr<Announcements> owner, int64_t id, std::unique_ptr<SequenceState> local)
      : SequenceState(local->capacity()),
        owner_(std::move(owner)),
        id_(id),
        local_(std::move(local)) {
    sync();
  }
  ~State() override { owner_->queue(kDrop, {id_}); }

  int64_t id() const { return id_; }
  SequenceState& local() { return *local_; }
  void sync() { position_ = local_->position(); }

  void reset() override {
    local_->reset();
    owner_->queue(kReset, {id_});
    sync();
  }
  std::unique_ptr<SequenceState> clone() const override {
    const int64_t copy = owner_->next_id();
    owner_->queue(kClone, {id_, copy});
    return std::make_unique<State>(owner_, copy, local_->clone());
  }
  std::size_t bytes() const override { return local_->bytes(); }
  void append_blocks(std::vector<std::pair<const void*, std::size_t>>& out) const override {
    local_->append_blocks(out);
  }

 private:
  std::shared_ptr<Announcements> owner_;
  int64_t id_;
  std::unique_ptr<SequenceState> local_;
};

RankStreamModel::RankStreamModel(std::unique_ptr<LanguageModel> shard, dist::Communicator& world,
                                 std::size_t other_ranks_decode_bytes)
    : shard_(std::move(shard)),
      world_(world),
      announcements_(std::make_shared<Announcements>()),
      other_ranks_decode_bytes_(other_ranks_decode_bytes) {
  if (world.rank() != 0) fail("rank {} cannot drive the model: rank 0 does", world.rank());
}

std::size_t gather_other_ranks_decode_bytes(const LanguageModel& shard, dist::Communicator& world) {
  const std::uint64_t mine = shard.decode_weight_bytes();
  std::vector<std::uint64_t> all(static_cast<std::size_t>(world.size()));
  world.all_gather(&mine, sizeof mine, all.data());
  std::uint64_t others = 0;
  for (std::size_t r = 1; r < all.size(); ++r) others += all[r];
  return static_cast<std::size_t>(others);
}

RankStreamModel::~RankStreamModel() {
  try {
    announce(kEnd, {});
  } catch (const std::exception&) {
    // The job is ending anyway; the other ranks end with it.
  }
}

std::string RankStreamModel::description() const {
  return fmt::format("{} ranks over {}; rank 0: {}", world_.size(), world_.transport(),
                     shard_->description());
}

void RankStreamModel::announce(int64_t op, std::vector<int64_t> arguments) const {
  std::vector<std::vector<int64_t>> messages = announcements_->take();
  arguments.insert(arguments.begin(), op);
  messages.push_back(std::move(arguments));
  for (const auto& message : messages) send(world_, message);
}

template <typename Call>
void RankStreamModel::on_shard(const char* what, Call&& call) const {
  try {
    call();
  } catch (const std::exception& e) {
    // The other ranks are making the same call; they would wait for this one in a collective.
    world_.abort(fmt::format("{}: {}", what, e.what()));
    throw;
  }
}

std::unique_ptr<SequenceState> RankStreamModel::new_sequence(int64_t capacity) const {
  std::unique_ptr<SequenceState> local = shard_->new_sequence(capacity);  // checks the capacity
  const int64_t id = announcements_->next_id();
  announce(kNew, {id, capacity});
  return std::make_unique<State>(announcements_, id, std::move(local));
}

void RankStreamModel::forward(SequenceState& sequence, std::span<const int32_t> tokens,
                              LogitRows rows, std::vector<float>& logits) {
  auto& state = dynamic_cast<State&>(sequence);
  check_append(state.local(), tokens, vocab_size());
  std::vector<int64_t> arguments{state.id(), rows == LogitRows::kAll ? 1 : 0};
  arguments.insert(arguments.end(), tokens.begin(), tokens.end());
  announce(kForward, std::move(arguments));
  on_shard("forward", [&] { shard_->forward(state.local(), tokens, rows, logits); });
  state.sync();
}

void RankStreamModel::decode(std::span<SequenceState* const> states,
                             std::span<const int32_t> tokens, std::vector<float>& logits) {
  if (states.size() != tokens.size()) {
    fail("decode: {} sequences but {} tokens", states.size(), tokens.size());
  }
  std::vector<State*> mine;
  for (std::size_t i = 0; i < states.size(); ++i) {
    auto& state = dynamic_cast<State&>(*states[i]);
    check_append(state.local(), tokens.subspan(i, 1), vocab_size());
    for (const State* other : mine) {
      if (other == &state) fail("decode: the same sequence appears twice in one step");
    }
    mine.push_back(&state);
  }
  // Steps of at most a program's rows, each announced and run in turn: every family takes that
  // many, so no rank can refuse a step after it was announced. One step (the usual case) writes
  // the caller's logits directly.
  const bool one_step = mine.size() <= static_cast<std::size_t>(program::kMaxStepRows);
  if (!one_step || mine.empty()) logits.clear();
  std::vector<float> step_logits;
  for (std::size_t first = 0; first < mine.size();
       first += static_cast<std::size_t>(program::kMaxStepRows)) {
    const std::size_t count =
        std::min(mine.size() - first, static_cast<std::size_t>(program::kMaxStepRows));
    std::vector<int64_t> arguments{static_cast<int64_t>(count)};
    std::vector<SequenceState*> local;
    for (std::size_t i = first; i < first + count; ++i) {
      arguments.push_back(mine[i]->id());
      local.push_back(&mine[i]->local());
    }
    const std::span<const int32_t> step_tokens = tokens.subspan(first, count);
    arguments.insert(arguments.end(), step_tokens.begin(), step_tokens.end());
    announce(kDecode, std::move(arguments));
    on_shard("decode",
             [&] { shard_->decode(local, step_tokens, one_step ? logits : step_logits); });
    if (!one_step) logits.insert(logits.end(), step_logits.begin(), step_logits.end());
  }
  for (State* s : mine) s->sync();
}

void RankStreamModel::verify(SequenceState& sequence, std::span<const int32_t> tokens,
                             std::vector<float>& logits) {
  auto& state = dynamic_cast<State&>(sequence);
  if (!shard_->supports_verify()) shard_->verify(state.local(), tokens, logits);  // its refusal
  if (tokens.empty() || static_cast<int64_t>(tokens.size()) > program::kMaxStepRows) {
    fail("verify takes 1..{} tokens, got {}", program::kMaxStepRows, tokens.size());
  }
  check_append(state.local(), tokens, vocab_size());
  std::vector<int64_t> arguments{state.id()};
  arguments.insert(arguments.end(), tokens.begin(), tokens.end());
  announce(kVerify, std::move(arguments));
  on_shard("verify", [&] { shard_->verify(state.local(), tokens, logits); });
  state.sync();
}

void RankStreamModel::commit(SequenceState& sequence, int64_t rows_kept) {
  auto& state = dynamic_cast<State&>(sequence);
  shard_->commit(state.local(), rows_kept);  // checks; no collective
  announce(kCommit, {state.id(), rows_kept});
  state.sync();
}

void RankStreamModel::set_tap_layers(std::vector<int64_t> layers) {
  shard_->set_tap_layers(layers);  // checks; no collective
  announce(kTaps, std::vector<int64_t>(layers.begin(), layers.end()));
}

void RankStreamModel::rewind(SequenceState& sequence, int64_t position) const {
  auto& state = dynamic_cast<State&>(sequence);
  shard_->rewind(state.local(), position);  // checks; no collective
  announce(kRewind, {state.id(), position});
  state.sync();
}

bool RankStreamModel::set_executor(ExecutorKind executor) {
  if (!shard_->set_executor(executor)) return false;
  announce(kExecutor, {static_cast<int64_t>(executor)});
  return true;
}

void follow_rank_stream(LanguageModel& shard, dist::Communicator& world) {
  std::map<int64_t, std::unique_ptr<SequenceState>> states;
  auto state = [&](int64_t id) -> SequenceState& {
    auto found = states.find(id);
    if (found == states.end())
      fail("rank {}: rank 0 named an unknown sequence {}", world.rank(), id);
    return *found->second;
  };
  std::vector<float> logits;
  for (;;) {
    const std::vector<int64_t> message = receive(world);
    const std::span<const int64_t> args = std::span(message).subspan(1);
    try {
      switch (message[0]) {
        case kEnd:
          return;
        case kNew:
          states[args[0]] = shard.new_sequence(args[1]);
          break;
        case kDrop:
          states.erase(args[0]);
          break;
        case kClone:
          states[args[1]] = state(args[0]).clone();
          break;
        case kReset:
          state(args[0]).reset();
          break;
        case kForward:
          shard.forward(state(args[0]), tokens_of(args.subspan(2)),
                        args[1] == 1 ? LogitRows::kAll : LogitRows::kLast, logits);
          break;
        case kDecode: {
          const auto count = static_cast<std::size_t>(args[0]);
          std::vector<SequenceState*> rows;
          for (std::size_t i = 0; i < count; ++i) rows.push_back(&state(args[1 + i]));
          shard.decode(rows, tokens_of(args.subspan(1 + count)), logits);
          break;
        }
        case kRewind:
          shard.rewind(state(args[0]), args[1]);
          break;
        case kExecutor:
          (void)shard.set_executor(static_cast<ExecutorKind>(args[0]));
          break;
        case kVerify:
          shard.verify(state(args[0]), tokens_of(args.subspan(1)), logits);
          break;
        case kCommit:
          shard.commit(state(args[0]), args[1]);
          break;
        case kTaps:
          shard.set_tap_layers(std::vector<int64_t>(args.begin(), args.end()));
          break;
        default:
          fail("rank {}: rank 0 announced an unknown call {}", world.rank(), message[0]);
      }
    } catch (const std::exception& e) {
      world.abort(e.what());
      throw;
    }
  }
}

void check_same_everywhere(dist::Communicator& world, const std::string& identity) {
  constexpr std::size_t kWidth = 512;
  char mine[kWidth] = {};
  std::memcpy(mine, identity.data(), std::min(identity.size(), kWidth - 1));
  std::vector<char> all(kWidth * static_cast<std::size_t>(world.size()));
  world.all_gather(mine, kWidth, all.data());
  const std::string first(all.data());
  for (int r = 1; r < world.size(); ++r) {
    const std::string other(all.data() + static_cast<std::size_t>(r) * kWidth);
    if (other != first) {
      fail(
          "rank {} differs from rank 0 (a different binary, model or options): rank 0 has [{}], "
          "rank {} has [{}]",
          r, first, r, other);
    }
  }
}

}  // namespace md
