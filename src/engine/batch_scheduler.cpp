#include "engine/batch_scheduler.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "kernels/kv_cache.h"

namespace md::engine {

BatchScheduler::BatchScheduler(LanguageModel& model, const Tokenizer& tokenizer,
                               SchedulerOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      options_(options),
      eos_ids_(model.stop_token_ids()),
      vocab_(static_cast<int32_t>(model.vocab_size())) {
  if (options_.rows < 1) fail("the scheduler needs at least one row, got {}", options_.rows);
  if (options_.context < 2) fail("the scheduler's context must be at least 2 tokens");
  if (options_.prefill_chunk < 1) fail("the prefill chunk must be at least 1 token");
  if (!(options_.prefill_budget_ms >= 0)) fail("the prefill budget must be 0 ms or more");
  if (options_.drafter != nullptr) {
    int64_t block = checked_block_size(model_, *options_.drafter, options_.block_size, 0);
    rounds_ = std::make_unique<SpeculativeRounds>(
        model_, block, 0,
        checked_confidence_threshold(*options_.drafter, options_.confidence_threshold));
    model_.set_tap_layers(options_.drafter->tap_layers());
  }
  if (options_.prefix_cache_memory > 0) {
    if (rounds_) {
      log::info("prefix cache off: a drafter's context is not cached");
    } else {
      prefix_cache_ = std::make_unique<PrefixCache>(model_, options_.prefix_cache_memory);
      // Answer tokens are decoded one by one, which a cold prefill of the next turn's prompt
      // reproduces only on a split-invariant model.
      keeps_turns_ = model_.split_invariant();
    }
  }
  rows_.resize(static_cast<std::size_t>(options_.rows));
  slots_.resize(rows_.size());
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    rows_[i].state = model_.new_sequence(options_.context);
    if (rounds_) rows_[i].drafter = options_.drafter->new_sequence();
    slots_[i].id = static_cast<int32_t>(i);
  }
  thread_ = std::thread([this] { loop(); });
}

BatchScheduler::~BatchScheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

BatchScheduler::Admission BatchScheduler::submit(std::shared_ptr<RequestStream> stream,
                                                 std::vector<ChoiceWork> choices) {
  {
    std::lock_guard lock(mutex_);
    if (closed_ || stopping_) return Admission::kClosed;
    if (options_.state_memory_budget > 0) {
      for (const ChoiceWork& work : choices) {
        if (state_memory_need(work).total() > options_.state_memory_budget) {
          return Admission::kTooLarge;
        }
      }
    }
    if (static_cast<int64_t>(waiting_.size()) >= options_.max_queue) return Admission::kQueueFull;
    waiting_[stream.get()] += static_cast<int64_t>(choices.size());
    for (ChoiceWork& work : choices) queue_.push_back({stream, std::move(work)});
  }
  wake_.notify_all();
  return Admission::kAccepted;
}

BatchScheduler::MemoryNeed BatchScheduler::state_memory_need(const ChoiceWork& work) const {
  // KV memory comes in blocks (kernels::KvCache): the prompt's whole blocks can be shared by
  // the rows of one prefill, the rest (its last partial block, copied on a sibling's first write,
  // and the output's) is each row's own.
  const int64_t block = kernels::KvCache::kBlockPositions;
  const auto prompt = static_cast<int64_t>(work.request.prompt.size());
  const int64_t positions =
      std::min<int64_t>(options_.context, prompt + std::max<int64_t>(work.request.max_tokens, 0));
  const int64_t blocks = (positions + block - 1) / block;
  const int64_t prompt_blocks = std::min(blocks, prompt / block);
  const std::size_t block_bytes = model_.state_bytes_per_token() * static_cast<std::size_t>(block);
  return {
      model_.state_bytes_fixed() + block_bytes * static_cast<std::size_t>(blocks - prompt_blocks),
      block_bytes * static_cast<std::size_t>(prompt_blocks)};
}

void BatchScheduler::notify_cancelled() {
  wake_.notify_all();
}

void BatchScheduler::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
}

void BatchScheduler::abort_all(const std::string& message) {
  {
    std::lock_guard lock(mutex_);
    abort_message_ = message;
  }
  wake_.notify_all();
}

bool BatchScheduler::idle() const {
  std::lock_guard lock(mutex_);
  return queue_.empty() && running_.load() == 0;
}

SchedulerSnapshot BatchScheduler::snapshot() const {
  SchedulerSnapshot s;
  s.rows = options_.rows;
  s.running_rows = running_.load();
  s.decode_steps = decode_steps_.load();
  s.prefill_tokens = prefill_tokens_.load();
  s.worst_decode_gap_seconds = worst_decode_gap_.load();
  s.spec_rounds = spec_rounds_.load();
  s.spec_drafted = spec_drafted_.load();
  s.spec_accepted = spec_accepted_.load();
  s.state_usage = static_cast<double>(held_tokens_.load()) /
                  static_cast<double>(options_.context * options_.rows);
  std::lock_guard lock(mutex_);
  s.waiting_requests = static_cast<int64_t>(waiting_.size());
  s.state_memory_reserved = reserved_;
  s.state_memory_budget = options_.state_memory_budget;
  s.slots = slots_;
  if (prefix_cache_) s.prefix_cache = prefix_cache_->stats();
  return s;
}

bool BatchScheduler::has_work_locked() const {
  return !queue_.empty() || running_.load() > 0 || abort_message_.has_value();
}

void BatchScheduler::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || has_work_locked(); });
      if (stopping_) break;
    }
    try {
      handle_abort();
      reap_cancelled();
      admit();
      prefill_within_budget();
      plan_speculation();
      decode_step();
      speculative_rounds();
      held_tokens_.store(held_tokens());
    } catch (const std::exception& e) {
      // Row failures are handled where they happen; anything here is a scheduler bug. Every row
      // gets the error rather than the server dying.
      log::error("scheduler step failed: {}", e.what());
      for (Row& row : rows_) {
        if (row.stream) fail_row(row, e.what());
      }
    }
  }
  for (Row& row : rows_) {
    if (row.stream) fail_row(row, "the server is shutting down");
  }
}

int64_t BatchScheduler::held_tokens() const {
  int64_t held = 0;
  for (const Row& row : rows_) {
    if (row.stream) held += row.state->position();
  }
  return held;
}

void BatchScheduler::handle_abort() {
  std::optional<std::string> message;
  std::deque<Queued> dropped;
  {
    std::lock_guard lock(mutex_);
    if (!abort_message_) return;
    message = std::move(abort_message_);
    abort_message_.reset();
    dropped.swap(queue_);
    waiting_.clear();
  }
  for (Queued& q : dropped) {
    StreamEvent event = StreamEvent::of(StreamEvent::Kind::kError, q.work.choice);
    event.error = *message;
    q.stream->push(std::move(event));
  }
  for (Row& row : rows_) {
    if (row.stream) fail_row(row, *message);
  }
}

void BatchScheduler::reap_cancelled() {
  for (Row& row : rows_) {
    if (row.stream && row.stream->cancelled(row.work.choice)) free_row(row);
  }
  std::lock_guard lock(mutex_);
  auto gone = [](const Queued& q) { return q.stream->cancelled(q.work.choice); };
  for (const Queued& q : queue_) {
    if (!gone(q)) continue;
    auto waiting = waiting_.find(q.stream.get());
    if (waiting != waiting_.end() && --waiting->second == 0) waiting_.erase(waiting);
  }
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(), gone), queue_.end());
}

void BatchScheduler::admit() {
  std::vector<std::size_t> admitted;
  {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < rows_.size() && !queue_.empty(); ++i) {
      if (rows_[i].stream) continue;
      Row* leader = prefill_leader_for(queue_.front());
      const MemoryNeed need = state_memory_need(queue_.front().work);
      const std::size_t reserving = leader != nullptr ? need.own : need.total();
      // The oldest waits for memory, and the others wait behind it (no overtaking: a long
      // request must not starve behind a stream of short ones).
      if (options_.state_memory_budget > 0 &&
          reserved_ + reserving > options_.state_memory_budget) {
        break;
      }
      reserved_ += reserving;
      Row& row = rows_[i];
      row.reserved = need.own;
      row.prompt_reserved = leader != nullptr ? leader->prompt_reserved
                                              : std::make_shared<const std::size_t>(need.prompt);
      row.leader = leader;
      Queued q = std::move(queue_.front());
      queue_.pop_front();
      auto waiting = waiting_.find(q.stream.get());
      if (waiting != waiting_.end() && --waiting->second == 0) waiting_.erase(waiting);
      SlotInfo& slot = slots_[i];
      slot.busy = true;
      slot.request_id = q.stream->id();
      slot.prompt_tokens = static_cast<int64_t>(q.work.request.prompt.size());
      slot.decoded = 0;
      slot.params = q.work.request.sampling;
      slot.params.seed = q.work.seed;
      slot.max_tokens = q.work.request.max_tokens;
      row.stream = std::move(q.stream);  // marks the row taken before the lock is released
      row.work = std::move(q.work);
      admitted.push_back(i);
    }
  }
  for (std::size_t index : admitted) {
    Row& row = rows_[index];
    // Its state was reset when the row was freed (free_row).
    row.prefilled = 0;
    row.decoding = false;
    row.prompt_scores.clear();
    row.speculation = SpeculationStats{};
    row.emitted.clear();
    if (row.drafter) row.drafter->truncate_context(0);
    row.admitted = ++admissions_;
    running_.fetch_add(1);
    // A follower gets its leader's state when the prompt is in (and what it resumed from).
    row.cached = row.leader != nullptr ? 0 : resume_from_cache(row);
    row.stream->push(StreamEvent::of(StreamEvent::Kind::kRowAssigned, row.work.choice));
    try {
      row.decoder = std::make_unique<ChoiceDecoder>(row.work.request, eos_ids_, vocab_, tokenizer_,
                                                    row.work.seed, options_.context);
    } catch (const std::exception& e) {
      fail_row(row, e.what());
    }
  }
}

int64_t BatchScheduler::resume_from_cache(Row& row) {
  const std::vector<int32_t>& prompt = row.work.request.prompt;
  // Scored prompts need every position's logits; and at least the prompt's last token is
  // prefilled, for the logits of the first output token.
  if (!prefix_cache_ || row.work.prompt_top_logprobs >= 0 || prompt.size() < 2) return 0;
  PrefixCache::Hit hit;
  try {
    hit = prefix_cache_->lookup(prompt, static_cast<int64_t>(prompt.size()) - 1);
  } catch (const std::exception& e) {
    // The cache only saves work: a failure there (memory) costs this prompt a full prefill.
    log::warn("prefix cache lookup failed: {}", e.what());
    return 0;
  }
  if (!hit.state) return 0;
  row.state = std::move(hit.state);
  row.prefilled = hit.tokens;
  return hit.tokens;
}

void BatchScheduler::checkpoint(Row& row, std::span<const int32_t> tokens) {
  try {
    prefix_cache_->insert(tokens, *row.state);
  } catch (const std::exception& e) {
    log::warn("prefix cache could not keep a state: {}", e.what());
  }
}

void BatchScheduler::checkpoint_prefill(Row& row, int64_t begin) {
  if (!prefix_cache_) return;
  // A model whose bits depend on how a prompt is split is resumed only where every prefill
  // splits it alike: at whole chunks counted from the prompt's start. (Its rows resume only
  // from such states, never rewound, so their chunks stay on that grid.)
  const int64_t chunk = options_.prefill_chunk;
  const bool invariant = model_.split_invariant();
  if (!invariant && row.prefilled % chunk != 0) return;
  const auto length = static_cast<int64_t>(row.work.request.prompt.size());
  const int64_t end = row.prefilled;
  // The prompt's end (its last chunk boundary where the split matters) serves longer prompts
  // that start with it; the same prompt again resumes at most one token before its end, which a
  // model that cannot rewind needs a state for: the boundary before the last chunk.
  const int64_t last = invariant ? length : length / chunk * chunk;
  const bool before_last_chunk = end < length && end + chunk >= length;
  const int64_t interval =
      (std::max<int64_t>(options_.prefix_cache_interval, 1) + chunk - 1) / chunk * chunk;
  const bool crossed_interval = end / interval != begin / interval;
  const bool wanted =
      end == last || (!prefix_cache_->rewinds() && (before_last_chunk || crossed_interval));
  if (!wanted) return;
  checkpoint(
      row, std::span<const int32_t>(row.work.request.prompt.data(), static_cast<std::size_t>(end)));
}

void BatchScheduler::checkpoint_turn(Row& row) {
  if (!keeps_turns_) return;
  std::vector<int32_t> tokens = row.work.request.prompt;
  tokens.insert(tokens.end(), row.emitted.begin(), row.emitted.end());
  // The last token sampled was never fed.
  tokens.resize(static_cast<std::size_t>(row.state->position()));
  checkpoint(row, tokens);
}

BatchScheduler::Row* BatchScheduler::prefill_leader_for(const Queued& queued) {
  for (Row& other : rows_) {
    if (other.stream != queued.stream || other.decoding || other.leader != nullptr) continue;
    if (other.work.prompt_top_logprobs == queued.work.prompt_top_logprobs &&
        other.work.request.prompt == queued.work.request.prompt) {
      return &other;
    }
  }
  return nullptr;
}

std::chrono::steady_clock::time_point BatchScheduler::now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

void BatchScheduler::prefill_within_budget() {
  using Duration = std::chrono::steady_clock::duration;
  const auto budget = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double, std::milli>(options_.prefill_budget_ms));
  const auto start = now();
  Duration last_chunk{0};
  for (bool first = true;; first = false) {
    const auto before = now();
    // Stop before a chunk that would probably overrun (it would take as long as the last one).
    if (!first && before - start + last_chunk > budget) return;
    if (!prefill_chunk()) return;
    last_chunk = now() - before;
  }
}

// The oldest row still prefilling (followers wait for their leader) gets one chunk.
bool BatchScheduler::prefill_chunk() {
  Row* oldest = nullptr;
  for (Row& row : rows_) {
    if (row.stream && !row.decoding && row.leader == nullptr &&
        (oldest == nullptr || row.admitted < oldest->admitted)) {
      oldest = &row;
    }
  }
  if (oldest == nullptr) return false;
  Row& row = *oldest;
  const std::vector<int32_t>& prompt = row.work.request.prompt;
  auto begin = static_cast<std::size_t>(row.prefilled);
  std::size_t end =
      std::min(prompt.size(), begin + static_cast<std::size_t>(options_.prefill_chunk));
  bool scoring = row.work.prompt_top_logprobs >= 0;
  try {
    std::span<const int32_t> chunk(prompt.data() + begin, end - begin);
    model_.forward(*row.state, chunk, scoring ? LogitRows::kAll : LogitRows::kLast, logits_);
    if (row.drafter)
      row.drafter->append_context(model_.last_taps(), static_cast<int64_t>(chunk.size()));
    if (options_.test_hooks.prefill_delay_us_per_token > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(
          options_.test_hooks.prefill_delay_us_per_token * static_cast<int64_t>(end - begin)));
    }
    prefill_tokens_.fetch_add(static_cast<int64_t>(end - begin));
    row.prefilled = static_cast<int64_t>(end);
    if (scoring) score_prompt_rows(row, begin, end);
    checkpoint_prefill(row, static_cast<int64_t>(begin));
  } catch (const std::exception& e) {
    fail_row(row, e.what());
    return true;
  }
  if (end < prompt.size()) return true;

  auto vocab = static_cast<std::size_t>(vocab_);
  // The leader's sampling rewrites the logits in place: each follower gets its own copy, and the
  // state as it is now, before the leader's first decode step.
  std::vector<float> last(logits_.end() - static_cast<std::ptrdiff_t>(vocab), logits_.end());
  for (Row& follower : rows_) {
    if (follower.leader != &row) continue;
    follower.leader = nullptr;
    follower.state = row.state->clone();
    if (row.drafter) follower.drafter = row.drafter->clone();
    follower.prefilled = row.prefilled;
    follower.cached = row.cached;
    follower.prompt_scores = row.prompt_scores;
    std::vector<float> copy = last;
    finish_prefill(follower, copy);
  }
  std::vector<float> own = std::move(last);
  finish_prefill(row, own);
  return true;
}

void BatchScheduler::finish_prefill(Row& row, std::span<const float> last_logits) {
  if (!row.prompt_scores.empty() || row.work.prompt_top_logprobs >= 0) {
    StreamEvent event = StreamEvent::of(StreamEvent::Kind::kPromptLogprobs, row.work.choice);
    event.prompt_logprobs = std::move(row.prompt_scores);
    row.stream->push(std::move(event));
  }
  if (!row.work.generate) {
    std::shared_ptr<RequestStream> stream = row.stream;
    StreamEvent scored = StreamEvent::of(StreamEvent::Kind::kScored, row.work.choice);
    scored.cached_tokens = row.cached;
    free_row(row);
    stream->push(std::move(scored));
    return;
  }
  std::vector<float> logits(last_logits.begin(), last_logits.end());
  sample_into(row, logits, row.cached);
  if (row.stream) row.decoding = true;
}

// Row r of an all-rows forward predicts prompt token begin + r + 1.
void BatchScheduler::score_prompt_rows(Row& row, std::size_t begin, std::size_t end) {
  const std::vector<int32_t>& prompt = row.work.request.prompt;
  auto vocab = static_cast<std::size_t>(vocab_);
  for (std::size_t t = begin; t < end && t + 1 < prompt.size(); ++t) {
    std::span<const float> logits(logits_.data() + (t - begin) * vocab, vocab);
    row.prompt_scores.push_back(score_token(logits, prompt[t + 1], row.work.prompt_top_logprobs));
  }
}

void BatchScheduler::plan_speculation() {
  if (!rounds_) return;
  int64_t generating = 0;
  for (const Row& row : rows_) generating += row.stream && row.decoding ? 1 : 0;
  const bool crowded = generating > options_.spec_max_rows;
  for (Row& row : rows_) {
    row.speculating = row.stream && row.decoding && !(crowded && row.decoder->greedy());
  }
}

void BatchScheduler::decode_step() {
  std::vector<Row*> active;
  std::vector<SequenceState*> states;
  std::vector<int32_t> tokens;
  for (Row& row : rows_) {
    if (row.stream && row.decoding && !row.speculating) {
      active.push_back(&row);
      states.push_back(row.state.get());
      tokens.push_back(row.next_token);
    }
  }
  if (active.empty()) {
    last_decode_.reset();
    return;
  }
  const auto started = now();
  if (last_decode_) {
    const double gap = std::chrono::duration<double>(started - *last_decode_).count();
    if (gap > worst_decode_gap_.load()) worst_decode_gap_.store(gap);
  }
  last_decode_ = started;
  try {
    model_.decode(states, tokens, logits_);
  } catch (const std::exception& e) {
    for (Row* row : active) fail_row(*row, e.what());
    return;
  }
  decode_steps_.fetch_add(1);
  if (rounds_) append_step_taps(active);
  auto vocab = static_cast<std::size_t>(vocab_);
  for (std::size_t r = 0; r < active.size(); ++r) {
    std::span<float> logits(logits_.data() + r * vocab, vocab);
    sample_into(*active[r], logits);
  }
  update_decoded_counts();
}

void BatchScheduler::update_decoded_counts() {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].stream && rows_[i].decoder) slots_[i].decoded = rows_[i].decoder->generated();
  }
}

// Rows that decoded plainly keep their drafter's context current: row r of the step's taps.
void BatchScheduler::append_step_taps(const std::vector<Row*>& rows) {
  std::span<const float> taps = model_.last_taps();
  const std::size_t per_row = taps.size() / rows.size();
  for (std::size_t r = 0; r < rows.size(); ++r) {
    rows[r]->drafter->append_context(taps.subspan(r * per_row, per_row), 1);
  }
}

void BatchScheduler::speculative_rounds() {
  if (!rounds_) return;
  bool ran = false;
  for (Row& row : rows_) {
    if (!row.stream || !row.decoding || !row.speculating) continue;
    run_round(row);
    ran = true;
  }
  if (ran) update_decoded_counts();
}

void BatchScheduler::run_round(Row& row) {
  SpeculativeRound round;
  try {
    check_fault(row);
    round = rounds_->run(*row.state, *row.drafter, *row.decoder, row.next_token, row.speculation);
  } catch (const std::exception& e) {
    fail_row(row, e.what());
    return;
  }
  decode_steps_.fetch_add(1);
  if (round.drafted > 0) {
    spec_rounds_.fetch_add(1);
    spec_drafted_.fetch_add(round.drafted);
    spec_accepted_.fetch_add(round.accepted);
    if (options_.on_round) options_.on_round(round.drafted, round.accepted);
  }
  const TokenOutcome& last = round.outcomes.back();
  row.next_token = last.token.id;
  // As in sample_into: the row is free before the event that ends its choice goes out.
  std::shared_ptr<RequestStream> stream = row.stream;
  const int32_t choice = row.work.choice;
  if (last.finished) free_row(row);  // (no prefix cache beside a drafter)
  const SteadyClock::time_point at = SteadyClock::now();
  for (TokenOutcome& outcome : round.outcomes) {
    StreamEvent event = StreamEvent::of(StreamEvent::Kind::kToken, choice);
    event.at = at;
    event.step_tokens = static_cast<int32_t>(round.outcomes.size());
    event.outcome = std::move(outcome);
    stream->push(std::move(event));
  }
}

void BatchScheduler::check_fault(const Row& row) const {
  const int64_t after = options_.test_hooks.fault_after_tokens;
  if (after > 0 && row.decoder->generated() >= after) {
    fail("fault injected after {} tokens (--test-fault-after-tokens)", after);
  }
}

void BatchScheduler::force_scripted_token(const Row& row, std::span<float> logits) const {
  const std::vector<int32_t>& script = options_.test_hooks.scripted_tokens;
  const int64_t at = row.decoder->generated();
  if (at >= static_cast<int64_t>(script.size())) return;
  const int32_t token = script[static_cast<std::size_t>(at)];
  if (token < 0 || static_cast<std::size_t>(token) >= logits.size()) {
    fail("scripted token {} is outside the vocabulary", token);
  }
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (i != static_cast<std::size_t>(token)) logits[i] = -std::numeric_limits<float>::infinity();
  }
}

void BatchScheduler::sample_into(Row& row, std::span<float> logits, std::optional<int64_t> cached) {
  try {
    check_fault(row);
    force_scripted_token(row, logits);
    StreamEvent event = StreamEvent::of(StreamEvent::Kind::kToken, row.work.choice);
    event.cached_tokens = cached;
    event.outcome = row.decoder->next(logits, row.state->position());
    row.next_token = event.outcome.token.id;
    if (keeps_turns_) row.emitted.push_back(row.next_token);
    // A finished row is freed before its last event goes out: whoever sees the end of a request
    // also sees its row free (metrics, the next admission).
    std::shared_ptr<RequestStream> stream = row.stream;
    if (event.outcome.finished) {
      checkpoint_turn(row);
      free_row(row);
    }
    stream->push(std::move(event));
  } catch (const std::exception& e) {
    fail_row(row, e.what());
  }
}

void BatchScheduler::fail_row(Row& row, const std::string& message) {
  StreamEvent event = StreamEvent::of(StreamEvent::Kind::kError, row.work.choice);
  event.error = message;
  std::shared_ptr<RequestStream> stream = row.stream;
  free_row(row);
  stream->push(std::move(event));
}

void BatchScheduler::free_row(Row& row) {
  // Followers of a row that goes away before its prompt is in: the first of them prefills it for
  // the others (they keep sharing the prompt's reserved blocks).
  Row* successor = nullptr;
  for (Row& other : rows_) {
    if (other.leader != &row) continue;
    other.leader = successor;
    if (successor == nullptr) {
      successor = &other;
      other.cached = 0;  // it prefills the prompt from its first token
    }
  }
  row.leader = nullptr;
  row.stream.reset();
  row.decoder.reset();
  row.decoding = false;
  // A free row holds no sequence memory: a long request's KV goes back to the system when it ends.
  row.state->reset();
  running_.fetch_sub(1);
  auto index = static_cast<std::size_t>(&row - rows_.data());
  std::lock_guard lock(mutex_);
  reserved_ -= row.reserved;
  row.reserved = 0;
  if (row.prompt_reserved && row.prompt_reserved.use_count() == 1) {
    reserved_ -= *row.prompt_reserved;
  }
  row.prompt_reserved.reset();
  slots_[index] = SlotInfo{};
  slots_[index].id = static_cast<int32_t>(index);
}

}  // namespace md::engine
