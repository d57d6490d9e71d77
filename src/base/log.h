// Logging to stderr (results go to stdout). Level set once at start-up from --verbose/--quiet.
#pragma once

#include <fmt/format.h>

#include <cstdio>

namespace md::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

Level threshold();
void set_threshold(Level level);
void write(Level level, const std::string& message);

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (threshold() <= Level::kDebug)
    write(Level::kDebug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (threshold() <= Level::kInfo) write(Level::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (threshold() <= Level::kWarn) write(Level::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (threshold() <= Level::kError)
    write(Level::kError, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace md::log
