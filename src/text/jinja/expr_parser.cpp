// Expression half of the Jinja parser. Precedence, loosest first, exactly as jinja2:
// inline if < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary - + <
// primary with postfix (. [] ()) and then filters/tests (| and is).
#include <algorithm>

#include "text/jinja/parser.h"
#include "text/jinja/parser_impl.h"

namespace md::jinja::detail {

namespace {

ExprPtr make(ExprKind kind, SourceLoc loc) {
  return std::make_unique<Expr>(kind, loc);
}

ExprPtr make_binary(ExprKind kind, SourceLoc loc, ExprPtr left, ExprPtr right) {
  ExprPtr e = make(kind, loc);
  e->children.push_back(std::move(left));
  e->children.push_back(std::move(right));
  return e;
}

}  // namespace

// Left-associative chains (a + b + c ..., x.y.z ...) nest the tree one level per link; each
// link counts against the depth limit until the chain's parse function returns.
class ChainDepth {
 public:
  ChainDepth(int& depth, int limit) : depth_(depth), limit_(limit) {}
  ~ChainDepth() { depth_ -= links_; }
  ChainDepth(const ChainDepth&) = delete;
  ChainDepth& operator=(const ChainDepth&) = delete;
  bool add() {
    ++links_;
    return ++depth_ <= limit_;
  }

 private:
  int& depth_;
  int limit_;
  int links_ = 0;
};

#define MD_CHAIN_LINK(chain, loc) \
  if (!(chain).add()) fail("expression nested too deeply", loc)

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this, cur().loc);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  ChainDepth chain(depth_, kMaxParseDepth);
  SourceLoc loc = cur().loc;
  ExprPtr expr = parse_or();
  while (skip_name("if")) {
    MD_CHAIN_LINK(chain, loc);
    ExprPtr node = make(ExprKind::kCondExpr, loc);
    node->children.push_back(parse_or());
    node->children.push_back(skip_name("else") ? parse_condexpr() : nullptr);
    node->operand = std::move(expr);
    expr = std::move(node);
    loc = cur().loc;
  }
  return expr;
}

ExprPtr Parser::parse_or() {
  ChainDepth chain(depth_, kMaxParseDepth);
  ExprPtr left = parse_and();
  while (cur().is_name("or")) {
    SourceLoc loc = advance().loc;
    MD_CHAIN_LINK(chain, loc);
    left = make_binary(ExprKind::kOr, loc, std::move(left), parse_and());
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ChainDepth chain(depth_, kMaxParseDepth);
  ExprPtr left = parse_not();
  while (cur().is_name("and")) {
    SourceLoc loc = advance().loc;
    MD_CHAIN_LINK(chain, loc);
    left = make_binary(ExprKind::kAnd, loc, std::move(left), parse_not());
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (!cur().is_name("not")) return parse_compare();
  SourceLoc loc = advance().loc;
  DepthGuard guard(*this, loc);
  ExprPtr node = make(ExprKind::kNot, loc);
  node->operand = parse_not();
  return node;
}

ExprPtr Parser::parse_compare() {
  SourceLoc loc = cur().loc;
  ExprPtr expr = parse_math1();
  ExprPtr node;
  static constexpr std::pair<std::string_view, CompareOp> kOps[] = {
      {"==", CompareOp::kEq}, {"!=", CompareOp::kNe}, {"<", CompareOp::kLt},
      {"<=", CompareOp::kLe}, {">", CompareOp::kGt},  {">=", CompareOp::kGe}};
  while (true) {
    std::optional<CompareOp> op;
    for (const auto& [text, value] : kOps) {
      if (cur().is_op(text)) op = value;
    }
    if (op) {
      advance();
    } else if (skip_name("in")) {
      op = CompareOp::kIn;
    } else if (cur().is_name("not") && peek().is_name("in")) {
      advance();
      advance();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    if (!node) {
      node = make(ExprKind::kCompare, loc);
      node->children.push_back(std::move(expr));
    }
    node->compare_ops.push_back(*op);
    node->children.push_back(parse_math1());
  }
  return node ? std::move(node) : std::move(expr);
}

ExprPtr Parser::parse_math1() {
  ChainDepth chain(depth_, kMaxParseDepth);
  ExprPtr left = parse_concat();
  while (cur().is_op("+") || cur().is_op("-")) {
    BinaryOp op = cur().value == "+" ? BinaryOp::kAdd : BinaryOp::kSub;
    SourceLoc loc = advance().loc;
    MD_CHAIN_LINK(chain, loc);
    left = make_binary(ExprKind::kBinary, loc, std::move(left), parse_concat());
    left->binary_op = op;
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  SourceLoc loc = cur().loc;
  ExprPtr first = parse_math2();
  if (!cur().is_op("~")) return first;
  ExprPtr node = make(ExprKind::kConcat, loc);
  node->children.push_back(std::move(first));
  while (skip_op("~")) node->children.push_back(parse_math2());
  return node;
}

ExprPtr Parser::parse_math2() {
  ChainDepth chain(depth_, kMaxParseDepth);
  ExprPtr left = parse_pow();
  while (true) {
    BinaryOp op;
    if (cur().is_op("*")) {
      op = BinaryOp::kMul;
    } else if (cur().is_op("/")) {
      op = BinaryOp::kDiv;
    } else if (cur().is_op("//")) {
      op = BinaryOp::kFloorDiv;
    } else if (cur().is_op("%")) {
      op = BinaryOp::kMod;
    } else {
      break;
    }
    SourceLoc loc = advance().loc;
    MD_CHAIN_LINK(chain, loc);
    left = make_binary(ExprKind::kBinary, loc, std::move(left), parse_pow());
    left->binary_op = op;
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ChainDepth chain(depth_, kMaxParseDepth);
  ExprPtr left = parse_unary(true);
  while (cur().is_op("**")) {
    SourceLoc loc = advance().loc;
    MD_CHAIN_LINK(chain, loc);
    left = make_binary(ExprKind::kBinary, loc, std::move(left), parse_unary(true));
    left->binary_op = BinaryOp::kPow;
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this, cur().loc);
  ExprPtr node;
  if (cur().is_op("-") || cur().is_op("+")) {
    bool neg = cur().value == "-";
    node = make(neg ? ExprKind::kNeg : ExprKind::kPos, advance().loc);
    node->operand = parse_unary(false);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& token = cur();
  ExprPtr node;
  switch (token.type) {
    case TokenType::kName: {
      const std::string& v = token.value;
      if (v == "true" || v == "false" || v == "True" || v == "False") {
        node = make(ExprKind::kConst, token.loc);
        node->value = Value::boolean(v == "true" || v == "True");
      } else if (v == "none" || v == "None") {
        node = make(ExprKind::kConst, token.loc);
        node->value = Value::none();
      } else {
        node = make(ExprKind::kName, token.loc);
        node->name = v;
      }
      advance();
      return node;
    }
    case TokenType::kString: {
      node = make(ExprKind::kConst, token.loc);
      std::string text;
      while (cur().type == TokenType::kString) text += advance().value;
      node->value = Value::string(std::move(text));
      return node;
    }
    case TokenType::kInteger:
    case TokenType::kFloat:
      node = make(ExprKind::kConst, token.loc);
      node->value = token.type == TokenType::kInteger ? Value::integer(token.int_value)
                                                      : Value::number(token.float_value);
      advance();
      return node;
    case TokenType::kOperator:
      if (token.value == "(") {
        advance();
        node = parse_tuple(false, true, {}, true);
        expect_op(")");
        return node;
      }
      if (token.value == "[") return parse_list();
      if (token.value == "{") return parse_dict();
      break;
    default:
      break;
  }
  fail_unexpected(token);
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr,
                            std::initializer_list<std::string_view> extra_end,
                            bool explicit_parentheses) {
  SourceLoc loc = cur().loc;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (!cur().is_op(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args.front());
    if (!explicit_parentheses) {
      fail(fmt::format("Expected an expression, got '{}'", describe(cur())), cur().loc);
    }
  }
  ExprPtr node = make(ExprKind::kTuple, loc);
  node->children = std::move(args);
  return node;
}

bool Parser::is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
  const Token& t = cur();
  if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || t.is_op(")")) return true;
  return t.type == TokenType::kName &&
         std::find(extra_end.begin(), extra_end.end(), t.value) != extra_end.end();
}

ExprPtr Parser::parse_list() {
  ExprPtr node = make(ExprKind::kList, expect_op("[").loc);
  while (!cur().is_op("]")) {
    if (!node->children.empty()) expect_op(",");
    if (cur().is_op("]")) break;
    node->children.push_back(parse_expression());
  }
  expect_op("]");
  return node;
}

ExprPtr Parser::parse_dict() {
  ExprPtr node = make(ExprKind::kDict, expect_op("{").loc);
  while (!cur().is_op("}")) {
    if (!node->children.empty()) expect_op(",");
    if (cur().is_op("}")) break;
    node->children.push_back(parse_expression());
    expect_op(":");
    node->children.push_back(parse_expression());
  }
  expect_op("}");
  return node;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  ChainDepth chain(depth_, kMaxParseDepth);
  while (true) {
    if (cur().is_op(".") || cur().is_op("[")) {
      MD_CHAIN_LINK(chain, cur().loc);
      node = parse_subscript(std::move(node));
    } else if (cur().is_op("(")) {
      MD_CHAIN_LINK(chain, cur().loc);
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  ChainDepth chain(depth_, kMaxParseDepth);
  while (true) {
    MD_CHAIN_LINK(chain, cur().loc);
    if (cur().is_op("|")) {
      node = parse_filter_chain(std::move(node), false);
    } else if (cur().is_name("is")) {
      node = parse_test(std::move(node));
    } else if (cur().is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token& token = advance();
  if (token.value == ".") {
    const Token& attr = cur();
    if (attr.type == TokenType::kName) {
      ExprPtr e = make(ExprKind::kGetattr, token.loc);
      e->name = attr.value;
      e->operand = std::move(node);
      advance();
      return e;
    }
    if (attr.type != TokenType::kInteger) fail("expected name or number", attr.loc);
    ExprPtr e = make(ExprKind::kGetitem, token.loc);
    ExprPtr index = make(ExprKind::kConst, attr.loc);
    index->value = Value::integer(attr.int_value);
    e->operand = std::move(node);
    e->children.push_back(std::move(index));
    advance();
    return e;
  }
  SourceLoc loc = token.loc;
  std::vector<ExprPtr> args;
  while (!cur().is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  ExprPtr e = make(ExprKind::kGetitem, loc);
  e->operand = std::move(node);
  if (args.size() == 1) {
    e->children.push_back(std::move(args.front()));
  } else {
    ExprPtr tuple = make(ExprKind::kTuple, loc);
    tuple->children = std::move(args);
    e->children.push_back(std::move(tuple));
  }
  return e;
}

ExprPtr Parser::parse_subscribed() {
  SourceLoc loc = cur().loc;
  ExprPtr slice = make(ExprKind::kSlice, loc);
  if (skip_op(":")) {
    slice->children.push_back(nullptr);
  } else {
    ExprPtr node = parse_expression();
    if (!skip_op(":")) return node;
    slice->children.push_back(std::move(node));
  }
  auto at_end = [&] { return cur().is_op("]") || cur().is_op(","); };
  if (cur().is_op(":") || at_end()) {
    slice->children.push_back(nullptr);
  } else {
    slice->children.push_back(parse_expression());
  }
  if (skip_op(":") && !at_end()) {
    slice->children.push_back(parse_expression());
  } else {
    slice->children.push_back(nullptr);
  }
  return slice;
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  // Errors inside a call point at the called expression, where the reader looks.
  ExprPtr node = make(ExprKind::kCall, callee->loc);
  node->operand = std::move(callee);
  parse_call_args(*node);
  return node;
}

void Parser::parse_call_args(Expr& node) {
  SourceLoc loc = expect_op("(").loc;
  bool require_comma = false;
  while (!cur().is_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (cur().is_op(")")) break;
    }
    if (cur().is_op("*") || cur().is_op("**")) {
      fail("*args and **kwargs in calls are not supported", cur().loc);
    }
    if (cur().type == TokenType::kName && peek().is_op("=")) {
      Keyword kw;
      kw.name = advance().value;
      advance();
      kw.value = parse_expression();
      node.kwargs.push_back(std::move(kw));
    } else {
      if (!node.kwargs.empty()) fail("invalid syntax for function call expression", loc);
      node.children.push_back(parse_expression());
    }
    require_comma = true;
  }
  advance();
}

ExprPtr Parser::parse_test(ExprPtr node) {
  SourceLoc loc = advance().loc;
  bool negated = skip_name("not");
  const Token& name_token = expect_name();
  std::string name = name_token.value;
  while (skip_op(".")) name += "." + expect_name().value;
  if (!is_known_test(name)) fail(fmt::format("No test named '{}'.", name), name_token.loc);
  ExprPtr test = make(ExprKind::kTest, loc);
  test->name = name;
  test->operand = std::move(node);
  const Token& t = cur();
  bool arg_start = t.type == TokenType::kName || t.type == TokenType::kString ||
                   t.type == TokenType::kInteger || t.type == TokenType::kFloat || t.is_op("[") ||
                   t.is_op("{");
  if (t.is_op("(")) {
    parse_call_args(*test);
  } else if (arg_start && !t.is_name("else") && !t.is_name("or") && !t.is_name("and")) {
    if (t.is_name("is")) fail("You cannot chain multiple tests with is", t.loc);
    test->children.push_back(parse_postfix(parse_primary()));
  }
  if (!negated) return test;
  ExprPtr n = make(ExprKind::kNot, loc);
  n->operand = std::move(test);
  return n;
}

ExprPtr Parser::parse_filter_chain(ExprPtr node, bool start_inline) {
  while (cur().is_op("|") || start_inline) {
    if (!start_inline) advance();
    start_inline = false;
    const Token& name_token = expect_name();
    std::string name = name_token.value;
    while (skip_op(".")) name += "." + expect_name().value;
    if (!is_known_filter(name)) fail(fmt::format("No filter named '{}'.", name), name_token.loc);
    ExprPtr filter = make(ExprKind::kFilter, name_token.loc);
    filter->name = name;
    filter->operand = std::move(node);
    if (cur().is_op("(")) parse_call_args(*filter);
    node = std::move(filter);
  }
  return node;
}

}  // namespace md::jinja::detail
