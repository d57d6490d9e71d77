// Internal to the Jinja parser: the token cursor and the recursive-descent parser shared by the
// statement half (parser.cpp) and the expression half (expr_parser.cpp).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace md::jinja::detail {

// Deeper nesting than this (brackets, unary minus chains, nested blocks) is refused so that a
// hostile template cannot exhaust the stack.
inline constexpr int kMaxParseDepth = 150;

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name)
      : tokens_(std::move(tokens)), name_(name) {}

  StmtList parse_all();

  // --- expressions (expr_parser.cpp) ---
  ExprPtr parse_expression(bool with_condexpr = true);
  // A comma-separated list becomes a tuple; `simplified` only allows primaries (assignment
  // targets); `extra_end` names end the tuple early (e.g. "in" in a for loop).
  ExprPtr parse_tuple(bool simplified = false, bool with_condexpr = true,
                      std::initializer_list<std::string_view> extra_end = {},
                      bool explicit_parentheses = false);
  ExprPtr parse_filter_chain(ExprPtr node, bool start_inline);

 private:
  // --- token cursor ---
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  const Token& advance() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool skip_op(std::string_view op) {
    if (!cur().is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!cur().is_name(name)) return false;
    advance();
    return true;
  }
  const Token& expect_op(std::string_view op);
  const Token& expect_name();
  void expect_block_end();
  [[noreturn]] void fail(const std::string& message, SourceLoc loc) const;
  [[noreturn]] void fail_unexpected(const Token& token) const;

  // Guards recursion depth for the lifetime of one nested parse call.
  class DepthGuard {
   public:
    DepthGuard(Parser& p, SourceLoc loc) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth) p_.fail("template nested too deeply", loc);
    }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& p_;
  };

  // --- statements (parser.cpp) ---
  StmtList subparse(std::initializer_list<std::string_view> end_tokens);
  StmtList parse_statements(std::initializer_list<std::string_view> end_tokens, bool drop_needle);
  StmtPtr parse_statement();
  StmtPtr parse_for();
  StmtPtr parse_if();
  StmtPtr parse_set();
  StmtPtr parse_macro();
  StmtPtr parse_filter_block();
  StmtPtr parse_with();
  StmtPtr parse_scope();
  StmtPtr parse_print();
  Target parse_assign_target(bool with_tuple, bool name_only,
                             std::initializer_list<std::string_view> extra_end,
                             bool with_namespace);
  Target to_target(const Expr& expr) const;
  [[noreturn]] void fail_eof(std::initializer_list<std::string_view> end_tokens) const;

  // --- expression levels (expr_parser.cpp) ---
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_test(ExprPtr node);
  void parse_call_args(Expr& node);
  ExprPtr parse_list();
  ExprPtr parse_dict();
  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const;

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  const std::string& name_;
  int depth_ = 0;
  int loop_depth_ = 0;  // enclosing for loops in the current macro (for break/continue)
  std::vector<std::string_view> open_tags_;  // for "Jinja was looking for ..." messages
};

}  // namespace md::jinja::detail
