#include "engine/request_stream.h"

#include <algorithm>
#include <iterator>

namespace md::engine {

void RequestStream::push(StreamEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
    if (listener_) listener_();
  }
  ready_.notify_all();
}

void RequestStream::push_all(std::vector<StreamEvent> events) {
  if (events.empty()) return;
  {
    std::lock_guard lock(mutex_);
    std::move(events.begin(), events.end(), std::back_inserter(events_));
    if (listener_) listener_();
  }
  ready_.notify_all();
}

void RequestStream::set_listener(std::function<void()> listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

void RequestStream::cancel_choice(int32_t choice) {
  std::lock_guard lock(cancelled_choices_mutex_);
  cancelled_choices_.push_back(choice);
}

bool RequestStream::cancelled(int32_t choice) const {
  if (cancelled()) return true;
  std::lock_guard lock(cancelled_choices_mutex_);
  return std::find(cancelled_choices_.begin(), cancelled_choices_.end(), choice) !=
         cancelled_choices_.end();
}

std::vector<StreamEvent> RequestStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  std::vector<StreamEvent> out(std::make_move_iterator(events_.begin()),
                               std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

}  // namespace md::engine
