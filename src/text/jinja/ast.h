// The syntax tree of a parsed Jinja template: expressions and statements, immutable after parsing
// so that one parsed template can be rendered from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/error.h"
#include "text/jinja/value.h"

namespace md::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

enum class ExprKind {
  kConst,  // literal: none, bool, int, float, string
  kName,
  kList,
  kTuple,
  kDict,
  kGetattr,  // obj.name
  kGetitem,  // obj[index]
  kSlice,    // start:stop:step (only as a Getitem index)
  kCall,
  kFilter,  // operand | name(args)
  kTest,    // operand is name(args)
  kNot,
  kNeg,
  kPos,
  kBinary,  // + - * / // % **
  kAnd,
  kOr,
  kConcat,    // a ~ b ~ c
  kCompare,   // a < b == c ...
  kCondExpr,  // a if cond else b
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Keyword {
  std::string name;
  ExprPtr value;
};

struct Expr {
  ExprKind kind;
  SourceLoc loc;
  // kConst
  Value value;
  // kName, kGetattr (attribute), kFilter/kTest (name)
  std::string name;
  // kGetattr/kGetitem/kFilter/kTest/kNot/kNeg/kPos/kCall (callee)/kCondExpr (true branch):
  // the operand; nullptr in a filter block's filter chain.
  ExprPtr operand;
  // kList/kTuple: items; kDict: alternating key, value; kCall/kFilter/kTest: positional args;
  // kBinary/kAnd/kOr: {left, right}; kConcat: pieces; kCompare: {first, operands...};
  // kSlice: {start, stop, step} (entries may be null); kGetitem: {index};
  // kCondExpr: {test, else-branch or null}.
  std::vector<ExprPtr> children;
  std::vector<Keyword> kwargs;
  BinaryOp binary_op = BinaryOp::kAdd;
  std::vector<CompareOp> compare_ops;

  Expr(ExprKind k, SourceLoc l) : kind(k), loc(l) {}
};

enum class StmtKind {
  kOutput,  // literal text and {{ expressions }}
  kIf,
  kFor,
  kSet,       // {% set target = expr %}
  kSetBlock,  // {% set target %}...{% endset %}
  kMacro,
  kFilterBlock,
  kWith,
  kBreak,
  kContinue,
  kScope,  // a body rendered in place ({% generation %} of transformers)
};

// Assignment targets: a name, a (nested) tuple of names, or namespace.attr.
struct Target {
  enum class Kind { kName, kTuple, kNamespaceAttr } kind = Kind::kName;
  std::string name;           // kName; kNamespaceAttr: the namespace variable
  std::string attr;           // kNamespaceAttr
  std::vector<Target> items;  // kTuple
  SourceLoc loc;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  StmtKind kind;
  SourceLoc loc;
  // kOutput: a sequence of pieces; a piece is either literal text (expr null) or an expression.
  std::vector<std::pair<std::string, ExprPtr>> pieces;
  // kIf: conditions[i] guards bodies[i]; else_body is the trailing else.
  std::vector<ExprPtr> conditions;
  std::vector<StmtList> bodies;
  StmtList body;       // kFor/kSetBlock/kMacro/kFilterBlock/kWith/kScope
  StmtList else_body;  // kIf/kFor
  // kFor: target in iter [if filter]; kSet: target = expr.
  Target target;
  ExprPtr expr;         // kFor: iterable; kSet: value; kSetBlock/kFilterBlock: filter chain
  ExprPtr loop_filter;  // kFor
  // kMacro
  std::string name;
  std::vector<MacroParam> params;
  bool catch_varargs = false;
  bool catch_kwargs = false;
  // kWith: targets[i] = values[i]
  std::vector<Target> targets;
  std::vector<ExprPtr> values;

  Stmt(StmtKind k, SourceLoc l) : kind(k), loc(l) {}
};

}  // namespace md::jinja
