// How many tokens a sequence may hold: what the user asked for, checked against the model's
// limit, or by default the model's limit capped so that the state fits comfortably in memory.
#pragma once

#include <cstdint>

#include "models/language_model.h"

namespace md::engine {

// requested <= 0 means "choose". Throws md::Error when a request exceeds the model's limit or
// needs more state memory than the machine has.
int64_t choose_context(const LanguageModel& model, int64_t requested, int sequences = 1);

// Physical memory in bytes (0 when unknown).
uint64_t physical_memory_bytes();

}  // namespace md::engine
