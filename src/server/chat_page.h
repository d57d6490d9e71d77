// The built-in chat page served at / (src/server/chat_page.html, compiled in by CMake: the
// server needs no files beside its binary and the page loads nothing from elsewhere).
#pragma once

#include <string_view>

namespace md::server {

std::string_view chat_page_html();

}  // namespace md::server
