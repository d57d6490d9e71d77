// Statement half of the Jinja parser: template structure, tags and assignment targets.
#include "text/jinja/parser.h"

#include <algorithm>

#include "text/jinja/parser_impl.h"

namespace md::jinja {

namespace detail {

namespace {

bool in_list(std::string_view name, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

std::string quoted_list(std::initializer_list<std::string_view> names) {
  std::string out;
  std::size_t i = 0;
  for (std::string_view n : names) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += fmt::format("'{}'", n);
    ++i;
  }
  return out;
}

// Tags jinja2 knows that this interpreter deliberately does not implement.
constexpr std::string_view kUnsupportedTags[] = {"block", "extends",   "include",    "import",
                                                 "from",  "call",      "autoescape", "do",
                                                 "trans", "pluralize", "debug"};

bool references_name(const Expr* e, std::string_view name);

bool references_name(const StmtList& body, std::string_view name) {
  for (const auto& s : body) {
    for (const auto& piece : s->pieces) {
      if (references_name(piece.second.get(), name)) return true;
    }
    for (const auto& c : s->conditions) {
      if (references_name(c.get(), name)) return true;
    }
    for (const auto& b : s->bodies) {
      if (references_name(b, name)) return true;
    }
    for (const auto& v : s->values) {
      if (references_name(v.get(), name)) return true;
    }
    for (const auto& p : s->params) {
      if (references_name(p.default_value.get(), name)) return true;
    }
    if (references_name(s->body, name) || references_name(s->else_body, name) ||
        references_name(s->expr.get(), name) || references_name(s->loop_filter.get(), name)) {
      return true;
    }
  }
  return false;
}

bool references_name(const Expr* e, std::string_view name) {
  if (!e) return false;
  if (e->kind == ExprKind::kName && e->name == name) return true;
  if (references_name(e->operand.get(), name)) return true;
  for (const auto& c : e->children) {
    if (references_name(c.get(), name)) return true;
  }
  for (const auto& k : e->kwargs) {
    if (references_name(k.value.get(), name)) return true;
  }
  return false;
}

}  // namespace

void Parser::fail(const std::string& message, SourceLoc loc) const {
  throw TemplateError(TemplateError::Kind::kSyntax, name_, loc, message);
}

void Parser::fail_unexpected(const Token& token) const {
  fail(fmt::format("unexpected '{}'", describe(token)), token.loc);
}

const Token& Parser::expect_op(std::string_view op) {
  if (!cur().is_op(op)) {
    fail(fmt::format("expected token '{}', got '{}'", op, describe(cur())), cur().loc);
  }
  return advance();
}

const Token& Parser::expect_name() {
  if (cur().type != TokenType::kName) {
    fail(fmt::format("expected token 'name', got '{}'", describe(cur())), cur().loc);
  }
  return advance();
}

void Parser::expect_block_end() {
  if (cur().type != TokenType::kBlockEnd) {
    fail(fmt::format("expected token 'end of statement block', got '{}'", describe(cur())),
         cur().loc);
  }
  advance();
}

void Parser::fail_eof(std::initializer_list<std::string_view> end_tokens) const {
  std::string message = "Unexpected end of template.";
  if (end_tokens.size() > 0) {
    message += " Jinja was looking for the following tags: " + quoted_list(end_tokens) + ".";
  }
  if (!open_tags_.empty()) {
    message +=
        fmt::format(" The innermost block that needs to be closed is '{}'.", open_tags_.back());
  }
  fail(message, cur().loc);
}

StmtList Parser::parse_all() {
  StmtList body = subparse({});
  if (cur().type != TokenType::kEof) fail_unexpected(cur());
  return body;
}

StmtList Parser::subparse(std::initializer_list<std::string_view> end_tokens) {
  StmtList body;
  StmtPtr output;
  auto output_stmt = [&](SourceLoc loc) -> Stmt& {
    if (!output) output = std::make_unique<Stmt>(StmtKind::kOutput, loc);
    return *output;
  };
  while (cur().type != TokenType::kEof) {
    const Token& token = cur();
    if (token.type == TokenType::kData) {
      output_stmt(token.loc).pieces.emplace_back(token.value, nullptr);
      advance();
    } else if (token.type == TokenType::kVarBegin) {
      advance();
      Stmt& out = output_stmt(token.loc);
      out.pieces.emplace_back(std::string(), parse_tuple());
      if (cur().type != TokenType::kVarEnd) {
        fail(fmt::format("expected token 'end of print statement', got '{}'", describe(cur())),
             cur().loc);
      }
      advance();
    } else if (token.type == TokenType::kBlockBegin) {
      if (output) body.push_back(std::move(output));
      advance();
      if (cur().type == TokenType::kName && in_list(cur().value, end_tokens)) return body;
      body.push_back(parse_statement());
      expect_block_end();
    } else {
      fail_unexpected(token);
    }
  }
  if (output) body.push_back(std::move(output));
  return body;
}

StmtList Parser::parse_statements(std::initializer_list<std::string_view> end_tokens,
                                  bool drop_needle) {
  skip_op(":");
  expect_block_end();
  StmtList body = subparse(end_tokens);
  if (cur().type == TokenType::kEof) fail_eof(end_tokens);
  if (drop_needle) advance();
  return body;
}

StmtPtr Parser::parse_statement() {
  const Token& token = cur();
  if (token.type != TokenType::kName) fail("tag name expected", token.loc);
  DepthGuard guard(*this, token.loc);
  const std::string tag = token.value;
  open_tags_.push_back(tag);
  StmtPtr result;
  if (tag == "for") {
    result = parse_for();
  } else if (tag == "if") {
    result = parse_if();
  } else if (tag == "set") {
    result = parse_set();
  } else if (tag == "macro") {
    result = parse_macro();
  } else if (tag == "filter") {
    result = parse_filter_block();
  } else if (tag == "with") {
    result = parse_with();
  } else if (tag == "generation") {
    result = parse_scope();
  } else if (tag == "print") {
    result = parse_print();
  } else if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) fail(fmt::format("'{}' outside loop", tag), token.loc);
    result =
        std::make_unique<Stmt>(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, token.loc);
    advance();
  } else if (std::find(std::begin(kUnsupportedTags), std::end(kUnsupportedTags), tag) !=
             std::end(kUnsupportedTags)) {
    fail(fmt::format("the '{}' tag is not supported by this template engine", tag), token.loc);
  } else {
    fail(fmt::format("Encountered unknown tag '{}'.", tag), token.loc);
  }
  open_tags_.pop_back();
  return result;
}

StmtPtr Parser::parse_for() {
  auto stmt = std::make_unique<Stmt>(StmtKind::kFor, advance().loc);
  stmt->target = parse_assign_target(true, false, {"in"}, false);
  if (!skip_name("in")) {
    fail(fmt::format("expected token 'in', got '{}'", describe(cur())), cur().loc);
  }
  stmt->expr = parse_tuple(false, false, {"recursive"});
  if (skip_name("if")) stmt->loop_filter = parse_expression();
  if (cur().is_name("recursive")) fail("recursive for loops are not supported", cur().loc);
  ++loop_depth_;
  stmt->body = parse_statements({"endfor", "else"}, false);
  --loop_depth_;
  if (advance().value != "endfor") stmt->else_body = parse_statements({"endfor"}, true);
  return stmt;
}

StmtPtr Parser::parse_if() {
  auto stmt = std::make_unique<Stmt>(StmtKind::kIf, advance().loc);
  stmt->conditions.push_back(parse_tuple(false, false));
  stmt->bodies.push_back(parse_statements({"elif", "else", "endif"}, false));
  while (true) {
    const Token& needle = advance();
    if (needle.value == "elif") {
      stmt->conditions.push_back(parse_tuple(false, false));
      stmt->bodies.push_back(parse_statements({"elif", "else", "endif"}, false));
    } else if (needle.value == "else") {
      stmt->else_body = parse_statements({"endif"}, true);
      break;
    } else {
      break;
    }
  }
  return stmt;
}

StmtPtr Parser::parse_set() {
  SourceLoc loc = advance().loc;
  Target target = parse_assign_target(true, false, {}, true);
  if (skip_op("=")) {
    auto stmt = std::make_unique<Stmt>(StmtKind::kSet, loc);
    stmt->target = std::move(target);
    stmt->expr = parse_tuple();
    return stmt;
  }
  auto stmt = std::make_unique<Stmt>(StmtKind::kSetBlock, loc);
  stmt->target = std::move(target);
  stmt->expr = parse_filter_chain(nullptr, false);
  int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;  // break/continue out of a captured block is refused (not supported)
  stmt->body = parse_statements({"endset"}, true);
  loop_depth_ = saved_loop_depth;
  return stmt;
}

StmtPtr Parser::parse_macro() {
  auto stmt = std::make_unique<Stmt>(StmtKind::kMacro, advance().loc);
  stmt->name = expect_name().value;
  expect_op("(");
  while (!cur().is_op(")")) {
    if (!stmt->params.empty()) expect_op(",");
    MacroParam param;
    param.name = expect_name().value;
    if (skip_op("=")) {
      param.default_value = parse_expression();
    } else if (!stmt->params.empty() && stmt->params.back().default_value) {
      fail("non-default argument follows default argument", cur().loc);
    }
    stmt->params.push_back(std::move(param));
  }
  advance();
  int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;  // a macro body is a function: break/continue cannot leave it
  stmt->body = parse_statements({"endmacro"}, true);
  loop_depth_ = saved_loop_depth;
  stmt->catch_varargs = references_name(stmt->body, "varargs");
  stmt->catch_kwargs = references_name(stmt->body, "kwargs");
  return stmt;
}

StmtPtr Parser::parse_filter_block() {
  auto stmt = std::make_unique<Stmt>(StmtKind::kFilterBlock, advance().loc);
  stmt->expr = parse_filter_chain(nullptr, true);
  int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;  // break/continue out of a captured block is refused (not supported)
  stmt->body = parse_statements({"endfilter"}, true);
  loop_depth_ = saved_loop_depth;
  return stmt;
}

StmtPtr Parser::parse_with() {
  auto stmt = std::make_unique<Stmt>(StmtKind::kWith, advance().loc);
  while (cur().type != TokenType::kBlockEnd) {
    if (!stmt->targets.empty()) expect_op(",");
    stmt->targets.push_back(parse_assign_target(true, false, {}, false));
    expect_op("=");
    stmt->values.push_back(parse_expression());
  }
  stmt->body = parse_statements({"endwith"}, true);
  return stmt;
}

StmtPtr Parser::parse_scope() {
  auto stmt = std::make_unique<Stmt>(StmtKind::kScope, advance().loc);
  int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;  // jinja2 renders the body as a nested function (a call block)
  stmt->body = parse_statements({"endgeneration"}, true);
  loop_depth_ = saved_loop_depth;
  return stmt;
}

StmtPtr Parser::parse_print() {
  auto stmt = std::make_unique<Stmt>(StmtKind::kOutput, advance().loc);
  // {% print a, b %} prints each expression, not a tuple.
  while (cur().type != TokenType::kBlockEnd) {
    if (!stmt->pieces.empty()) expect_op(",");
    stmt->pieces.emplace_back(std::string(), parse_expression());
  }
  return stmt;
}

Target Parser::parse_assign_target(bool with_tuple, bool name_only,
                                   std::initializer_list<std::string_view> extra_end,
                                   bool with_namespace) {
  if (with_namespace && cur().type == TokenType::kName && peek().is_op(".")) {
    Target target;
    target.kind = Target::Kind::kNamespaceAttr;
    target.loc = cur().loc;
    target.name = advance().value;
    advance();
    target.attr = expect_name().value;
    return target;
  }
  if (name_only) {
    Target target;
    target.loc = cur().loc;
    target.name = expect_name().value;
    return target;
  }
  ExprPtr expr = with_tuple ? parse_tuple(true, true, extra_end) : parse_primary();
  return to_target(*expr);
}

Target Parser::to_target(const Expr& expr) const {
  Target target;
  target.loc = expr.loc;
  if (expr.kind == ExprKind::kName) {
    target.name = expr.name;
    return target;
  }
  if (expr.kind == ExprKind::kTuple) {
    target.kind = Target::Kind::kTuple;
    for (const auto& item : expr.children) target.items.push_back(to_target(*item));
    return target;
  }
  static constexpr const char* kNames[] = {"const",   "name",    "list",   "tuple",   "dict",
                                           "getattr", "getitem", "slice",  "call",    "filter",
                                           "test",    "not",     "neg",    "pos",     "binexpr",
                                           "and",     "or",      "concat", "compare", "condexpr"};
  fail(fmt::format("can't assign to '{}'", kNames[static_cast<int>(expr.kind)]), expr.loc);
}

}  // namespace detail

StmtList parse_template(std::string_view source, const std::string& template_name) {
  detail::Parser parser(tokenize(source, template_name), template_name);
  return parser.parse_all();
}

}  // namespace md::jinja
