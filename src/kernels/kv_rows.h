// One attention layer's keys and values of one sequence as position-indexed rows
// ([slots][kv_heads · head_dim] each, bf16 or f32): every position when it holds the whole
// context, or a ring of the last `slots` positions (position p in slot p mod slots) for a
// sliding-window layer, whose memory then does not grow with the context. Storage grows with the
// positions written (up to `slots`), so a long-context full layer costs what the sequence used.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kv_cache.h"

namespace md::kernels {

class KvRows {
 public:
  KvRows(int64_t slots, int64_t width, KvCacheType type)
      : slots_(slots), width_(width), type_(type) {}

  int64_t slots() const { return slots_; }
  int64_t width() const { return width_; }

  // Makes room for `position`. Not while another thread reads or writes these rows.
  void reserve(int64_t position);
  // Stores the whole row of `position` (reserving room), rounded to bf16 in a bf16 cache.
  void write(int64_t position, const float* key, const float* value);
  // Stores elements [offset, offset + n) of the row of `position` (one KV head's key and value),
  // which reserve() has made room for: tasks may write different heads of a row at once.
  void write_part(int64_t position, int64_t offset, int64_t n, const float* key,
                  const float* value);
  // `n` elements from `offset` of a stored row as f32: in place for f32, converted into
  // `scratch` for bf16.
  const float* key(int64_t position, int64_t offset, int64_t n, float* scratch) const {
    return read(keys_f32_, keys_bf16_, position, offset, n, scratch);
  }
  const float* value(int64_t position, int64_t offset, int64_t n, float* scratch) const {
    return read(values_f32_, values_bf16_, position, offset, n, scratch);
  }
  // Elements [offset, offset + n) (one KV head) of positions [first, last] as f32 rows of n in
  // position order: keys into `keys`, values into `values` (each (last − first + 1) · n floats).
  void gather(int64_t offset, int64_t n, int64_t first, int64_t last, float* keys,
              float* values) const;
  std::size_t bytes() const;
  void clear();

 private:
  int64_t slot(int64_t position) const { return position % slots_; }
  const float* read(const std::vector<float>& f32, const std::vector<uint16_t>& bf16,
                    int64_t position, int64_t offset, int64_t n, float* scratch) const;

  int64_t slots_ = 0;  // positions held: the window (sliding) or the capacity (full)
  int64_t width_ = 0;  // kv_heads · head_dim
  KvCacheType type_;
  std::vector<float> keys_f32_, values_f32_;
  std::vector<uint16_t> keys_bf16_, values_bf16_;
};

}  // namespace md::kernels
