// GET /: the built-in chat page (chat_page.h). Open to everyone like /health: the page itself
// holds nothing, and it sends the API key the user types with each request it makes.
#include <string>

#include "server/chat_page.h"
#include "server/routes.h"

namespace md::server {

void handle_chat_page(ServerContext&, const HttpRequest&, HttpResponse& res) {
  res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
  res.set_header("Cache-Control", "no-cache");
  // Only this server: the page's own inline script and style, requests to its API; it may not
  // be framed, change its base or submit forms anywhere. (The page writes model text with
  // textContent only, never as markup.)
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                 "connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
                 "form-action 'none'");
}

}  // namespace md::server
