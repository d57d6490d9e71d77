#include "text/grammar/json_schema_grammar.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>

#include "text/grammar/gbnf_parser.h"
#include "text/grammar/grammar_automaton.h"

namespace md::grammar {
namespace {

using Json = nlohmann::ordered_json;

class Schema {
 public:
  explicit Schema(const std::string& schema)
      : automaton_(parse_gbnf(json_schema_to_gbnf(Json::parse(schema)))) {}
  bool accepts(const std::string& text) {
    auto state = automaton_.step(automaton_.start(), text);
    return state != GrammarAutomaton::kDead && automaton_.accepting(state);
  }

 private:
  GrammarAutomaton automaton_;
};

std::string refusal(const std::string& schema) {
  try {
    json_schema_to_gbnf(Json::parse(schema));
  } catch (const JsonSchemaError& e) {
    return e.keyword + " @ " + e.location + " | " + e.what();
  }
  return "accepted";
}

TEST(JsonSchemaGrammar, ObjectsInSchemaOrderWithOptionalMembers) {
  Schema s(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
               "c":{"type":"boolean"}},"required":["b"],"additionalProperties":false})");
  EXPECT_TRUE(s.accepts(R"({"b":"x"})"));
  EXPECT_TRUE(s.accepts(R"({"a":1,"b":"x"})"));
  EXPECT_TRUE(s.accepts(R"({"a": 1, "b": "x", "c": true})"));
  EXPECT_TRUE(s.accepts(R"({ "b":"x","c":false })"));
  EXPECT_FALSE(s.accepts(R"({"a":1})"));          // b is required
  EXPECT_FALSE(s.accepts(R"({"b":"x","a":1})"));  // schema order
  EXPECT_FALSE(s.accepts(R"({,"b":"x"})"));
  EXPECT_FALSE(s.accepts(R"({"b":"x",})"));
  EXPECT_FALSE(s.accepts(R"({"b":"x","d":1})"));  // no extra members
  EXPECT_FALSE(s.accepts(R"({"b":"x"}  )"));
  EXPECT_FALSE(s.accepts(R"({"a":1.5,"b":"x"})"));  // integer
  EXPECT_FALSE(s.accepts(R"({  "b":"x"})"));        // at most one space
}

TEST(JsonSchemaGrammar, StringsEscapesLengthsAndFormats) {
  Schema any(R"({"type":"string"})");
  EXPECT_TRUE(any.accepts(R"("a\"b\\c\n\u00e9\uD7FF")"));
  EXPECT_TRUE(any.accepts("\"\xC3\xA9\xF0\x9F\x98\x80\""));
  EXPECT_FALSE(any.accepts("\"a\nb\""));  // raw control character
  EXPECT_FALSE(any.accepts(R"("\q")"));
  EXPECT_FALSE(any.accepts(R"("\ud800")"));  // lone surrogate escape
  Schema len(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(len.accepts(R"("a")"));
  EXPECT_TRUE(len.accepts(R"("a\"")"));  // an escape is one character
  EXPECT_TRUE(len.accepts(R"("abc")"));
  EXPECT_FALSE(len.accepts(R"("abcd")"));
  Schema date(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(date.accepts(R"("2024-02-28")"));
  EXPECT_TRUE(date.accepts(R"("1999-12-31")"));
  EXPECT_FALSE(date.accepts(R"("2024-02-30")"));
  EXPECT_FALSE(date.accepts(R"("2024-04-31")"));
  EXPECT_FALSE(date.accepts(R"("2024-13-01")"));
  Schema time(R"({"format":"date-time"})");
  EXPECT_TRUE(time.accepts(R"("2024-05-06T23:59:59.123+05:30")"));
  EXPECT_TRUE(time.accepts(R"("2024-05-06T00:00:00Z")"));
  EXPECT_FALSE(time.accepts(R"("2024-05-06T24:00:00Z")"));
  Schema ip(R"({"type":"string","format":"ipv4"})");
  EXPECT_TRUE(ip.accepts(R"("255.0.10.199")"));
  EXPECT_FALSE(ip.accepts(R"("256.0.0.1")"));
  EXPECT_FALSE(ip.accepts(R"("01.0.0.1")"));
  Schema uuid(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(uuid.accepts(R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(uuid.accepts(R"("123e4567-e89b-12d3-a456-42661417400")"));
  Schema duration(R"({"type":"string","format":"duration"})");
  EXPECT_TRUE(duration.accepts(R"("P1Y2M3DT4H5M6S")"));
  EXPECT_TRUE(duration.accepts(R"("PT36H")"));
  EXPECT_TRUE(duration.accepts(R"("P4W")"));
  EXPECT_FALSE(duration.accepts(R"("P")"));
  EXPECT_FALSE(duration.accepts(R"("PT")"));
  EXPECT_FALSE(duration.accepts(R"("P1H")"));
}

TEST(JsonSchemaGrammar, Patterns) {
  Schema code(R"({"type":"string","pattern":"^[A-Z]{3}-\\d{2,4}$"})");
  EXPECT_TRUE(code.accepts(R"("ABC-12")"));
  EXPECT_TRUE(code.accepts(R"("XYZ-1234")"));
  EXPECT_FALSE(code.accepts(R"("ABC-1")"));
  EXPECT_FALSE(code.accepts(R"("ABC-12345")"));
  EXPECT_FALSE(code.accepts(R"("abc-12")"));
  Schema search(R"({"type":"string","pattern":"(cat|dog)s?"})");  // unanchored: a search
  EXPECT_TRUE(search.accepts(R"("my dogs!")"));
  EXPECT_TRUE(search.accepts(R"("cat")"));
  EXPECT_FALSE(search.accepts(R"("bird")"));
  Schema quote(R"({"type":"string","pattern":"^a\"b\\\\c.$"})");  // the regex ^a"b\\c.$
  EXPECT_TRUE(quote.accepts(R"("a\"b\\cz")"));
  EXPECT_FALSE(quote.accepts(R"("a\"b\\c\n")"));  // '.' is not a line terminator
  EXPECT_FALSE(quote.accepts(R"("a\"b\\c")"));
  Schema classes(R"({"pattern":"^[^a-c\\d][\\w.-]+$"})");
  EXPECT_TRUE(classes.accepts(R"("z_a.b-9")"));
  EXPECT_TRUE(classes.accepts(R"("\"x")"));  // a quote is outside [^a-c\d]: written escaped
  EXPECT_FALSE(classes.accepts(R"("ax")"));
  EXPECT_FALSE(classes.accepts(R"("5x")"));
  EXPECT_NE(refusal(R"({"pattern":"(a)\\1"})").find("backreferences"), std::string::npos);
  EXPECT_NE(refusal(R"x({"pattern":"(?=a)"})x").find("lookaround"), std::string::npos);
  EXPECT_NE(refusal(R"({"pattern":"^a|b$"})").find("group it"), std::string::npos);
  EXPECT_NE(refusal(R"({"pattern":"a**"})").find("pattern @ #/pattern"), std::string::npos);
}

// Every integer in [-300, 300] is accepted exactly when it lies within the bounds.
TEST(JsonSchemaGrammar, IntegerBoundsAreExact) {
  struct Case {
    std::string bounds;
    std::optional<double> lo, hi;
    bool lo_x, hi_x;
  };
  const Case cases[] = {
      {R"("minimum":-17,"maximum":123)", -17, 123, false, false},
      {R"("exclusiveMinimum":-100,"exclusiveMaximum":0)", -100, 0, true, true},
      {R"("minimum":7)", 7, std::nullopt, false, false},
      {R"("maximum":-42)", std::nullopt, -42, false, false},
      {R"("minimum":0,"maximum":9)", 0, 9, false, false},
      {R"("minimum":10.5,"maximum":200.5)", 10.5, 200.5, false, false},
      {R"("minimum":99,"maximum":100)", 99, 100, false, false},
      {R"("minimum":-5,"exclusiveMinimum":-3)", -3, std::nullopt, true, false},
  };
  for (const Case& c : cases) {
    Schema s(R"({"type":"integer",)" + c.bounds + "}");
    for (int v = -300; v <= 300; ++v) {
      bool inside = (!c.lo || (c.lo_x ? v > *c.lo : v >= *c.lo)) &&
                    (!c.hi || (c.hi_x ? v < *c.hi : v <= *c.hi));
      ASSERT_EQ(s.accepts(std::to_string(v)), inside) << c.bounds << " at " << v;
    }
    EXPECT_FALSE(s.accepts("-0"));
    EXPECT_FALSE(s.accepts("007"));
  }
  EXPECT_TRUE(Schema(R"({"type":"integer","minimum":5})").accepts("123456789012"));
}

// Bounded numbers: whatever the grammar accepts lies within the bounds (sound), and integers and
// interior decimals are accepted.
TEST(JsonSchemaGrammar, NumberBoundsAreSound) {
  Schema s(R"({"type":"number","minimum":-2.5,"exclusiveMaximum":3})");
  int accepted = 0;
  for (int whole = -5; whole <= 5; ++whole) {
    for (const char* frac : {"", ".0", ".25", ".5", ".75", ".99"}) {
      for (bool negative_zero : {false, true}) {
        std::string text = (negative_zero && whole == 0 ? "-" : "") + std::to_string(whole) + frac;
        double value = std::stod(text);
        if (s.accepts(text)) {
          ++accepted;
          EXPECT_TRUE(value >= -2.5 && value < 3) << text;
        }
      }
    }
  }
  EXPECT_TRUE(s.accepts("2.999"));
  EXPECT_TRUE(s.accepts("-1.5"));
  EXPECT_TRUE(s.accepts("-2"));
  EXPECT_FALSE(s.accepts("3"));
  EXPECT_FALSE(s.accepts("1e2"));
  EXPECT_GT(accepted, 20);
  Schema open(R"({"type":"number"})");
  EXPECT_TRUE(open.accepts("-0.5e-7"));
  EXPECT_FALSE(open.accepts("01"));
  EXPECT_FALSE(open.accepts(".5"));
}

TEST(JsonSchemaGrammar, ArraysWithBoundsAndPrefixItems) {
  Schema s(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})");
  EXPECT_FALSE(s.accepts("[1]"));
  EXPECT_TRUE(s.accepts("[1,2]"));
  EXPECT_TRUE(s.accepts("[1, 2, 3]"));
  EXPECT_FALSE(s.accepts("[1,2,3,4]"));
  EXPECT_FALSE(s.accepts("[]"));
  Schema upto(R"({"type":"array","items":{"type":"integer"},"maxItems":2})");
  EXPECT_TRUE(upto.accepts("[]"));
  EXPECT_TRUE(upto.accepts("[1,2]"));
  EXPECT_FALSE(upto.accepts("[1,2,3]"));  // minItems 0: the first element is one of the two
  Schema exactly(R"({"type":"array","minItems":3,"maxItems":3})");
  EXPECT_FALSE(exactly.accepts("[1,2]"));
  EXPECT_TRUE(exactly.accepts("[1,2,3]"));
  EXPECT_FALSE(exactly.accepts("[1,2,3,4]"));
  Schema tuple(R"({"prefixItems":[{"type":"string"},{"type":"boolean"}],"items":false})");
  EXPECT_TRUE(tuple.accepts("[]"));
  EXPECT_TRUE(tuple.accepts(R"(["a"])"));
  EXPECT_TRUE(tuple.accepts(R"(["a",true])"));
  EXPECT_FALSE(tuple.accepts(R"([true])"));
  EXPECT_FALSE(tuple.accepts(R"(["a",true,1])"));
  Schema open(R"({"type":"array","prefixItems":[{"const":1}],"minItems":1})");
  EXPECT_TRUE(open.accepts(R"([1,"x",{"y":[null]}])"));
  EXPECT_FALSE(open.accepts(R"([2])"));
}

TEST(JsonSchemaGrammar, EnumsConstAnyOfRefsAndRecursion) {
  Schema e(R"({"enum":["red",1,null,{"a":[1]}]})");
  EXPECT_TRUE(e.accepts(R"("red")"));
  EXPECT_TRUE(e.accepts("1"));
  EXPECT_TRUE(e.accepts("null"));
  EXPECT_TRUE(e.accepts(R"({"a":[1]})"));
  EXPECT_FALSE(e.accepts(R"("blue")"));
  Schema typed_enum(R"({"type":"string","enum":["a",2]})");  // 2 is not a string
  EXPECT_FALSE(typed_enum.accepts("2"));
  Schema tree(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},
      "required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(tree.accepts(R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
  EXPECT_FALSE(tree.accepts(R"({"v":1,"kids":[{"kids":[]}]})"));
  Schema nullable(R"({"anyOf":[{"type":"string","maxLength":1},{"type":"null"}]})");
  EXPECT_TRUE(nullable.accepts("null"));
  EXPECT_TRUE(nullable.accepts(R"("x")"));
  EXPECT_FALSE(nullable.accepts(R"("xy")"));
  Schema types(R"({"type":["integer","boolean"]})");
  EXPECT_TRUE(types.accepts("true"));
  EXPECT_TRUE(types.accepts("-3"));
  EXPECT_FALSE(types.accepts("\"3\""));
  Schema map(R"({"type":"object","additionalProperties":{"type":"number"}})");
  EXPECT_TRUE(map.accepts(R"({"x":1,"y":2.5})"));
  EXPECT_FALSE(map.accepts(R"({"x":"1"})"));
  Schema self(R"({"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},
                  "required":["next"]})");
  EXPECT_TRUE(self.accepts(R"({"next":{"next":null}})"));
}

TEST(JsonSchemaGrammar, UnsupportedKeywordsAreNamed) {
  for (std::string keyword : {"allOf", "oneOf", "not", "if", "uniqueItems", "multipleOf",
                              "patternProperties", "minProperties", "contains"}) {
    std::string schema = R"({"type":"object","properties":{"x":{")" + keyword + R"(":[]}}})";
    EXPECT_EQ(refusal(schema).rfind(keyword + " @ #/properties/x", 0), 0u) << refusal(schema);
  }
  EXPECT_NE(refusal(R"({"type":"string","format":"uri"})").find("format"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref":"#/$defs/missing"})").find("does not resolve"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref":"http://x/y"})").find("within the schema"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"integer","minimum":5,"maximum":4})").find("no integer"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type":"strin"})").find("type @ #"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref":"#/$defs/a","maxLength":2,"$defs":{"a":{}}})").find("maxLength"),
            std::string::npos);
  EXPECT_NE(refusal("false").find("allows no value"), std::string::npos);
  // Annotations and unknown keywords are not assertions: accepted.
  EXPECT_EQ(refusal(R"({"type":"string","description":"d","title":"t","x-custom":1})"), "accepted");
}

TEST(JsonSchemaGrammar, JsonObjectMode) {
  GrammarAutomaton automaton(parse_gbnf(json_object_gbnf()));
  auto accepts = [&](const std::string& text) {
    auto s = automaton.step(automaton.start(), text);
    return s != GrammarAutomaton::kDead && automaton.accepting(s);
  };
  EXPECT_TRUE(accepts(R"({"a": [1, {"b": null}], "c": "d"})"));
  EXPECT_TRUE(accepts("{}"));
  EXPECT_FALSE(accepts("[]"));
  EXPECT_FALSE(accepts(R"({"a":})"));
}

}  // namespace
}  // namespace md::grammar

namespace md::grammar {
namespace {

// Every combination of prefixItems, minItems, maxItems and items: exactly the allowed lengths.
TEST(JsonSchemaGrammar, ArrayLengthsAreExactForEveryShape) {
  for (int prefix = 0; prefix <= 3; ++prefix) {
    for (int min = 0; min <= 4; ++min) {
      for (int max = min; max <= 6; ++max) {  // 6 stands for "no maxItems"
        for (bool closed : {false, true}) {
          nlohmann::ordered_json schema = {{"type", "array"}, {"minItems", min}};
          nlohmann::ordered_json items = nlohmann::ordered_json::array();
          for (int i = 0; i < prefix; ++i) items.push_back({{"const", i}});
          if (prefix > 0) schema["prefixItems"] = items;
          if (max < 6) schema["maxItems"] = max;
          if (closed)
            schema["items"] = false;
          else
            schema["items"] = {{"const", 9}};
          int top = max < 6 ? max : 6;
          if (closed) top = std::min(top, prefix);
          std::string text;
          try {
            text = json_schema_to_gbnf(schema);
          } catch (const JsonSchemaError&) {
            EXPECT_GT(min, top) << schema.dump();  // refused only when no length fits
            continue;
          }
          GrammarAutomaton automaton(parse_gbnf(text));
          for (int length = 0; length <= 7; ++length) {
            std::string doc = "[";
            for (int i = 0; i < length; ++i)
              doc += (i ? "," : "") + std::to_string(i < prefix ? i : 9);
            doc += "]";
            auto state = automaton.step(automaton.start(), doc);
            bool accepted = state != GrammarAutomaton::kDead && automaton.accepting(state);
            bool allowed = length >= min && length <= top && (max < 6 || closed || length <= max);
            if (max == 6 && !closed) allowed = length >= min;
            EXPECT_EQ(accepted, allowed) << schema.dump() << " " << doc;
          }
        }
      }
    }
  }
}

TEST(JsonSchemaGrammar, EnumAndConstRefuseSiblingAssertions) {
  auto refused = [](const std::string& schema) {
    try {
      json_schema_to_gbnf(nlohmann::ordered_json::parse(schema));
    } catch (const JsonSchemaError& e) {
      return e.keyword;
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refused(R"({"type":"string","enum":["ok","toolong"],"maxLength":3})"), "maxLength");
  EXPECT_EQ(refused(R"({"enum":[1,10],"maximum":5})"), "maximum");
  EXPECT_EQ(refused(R"({"const":"x","pattern":"^y$"})"), "pattern");
  EXPECT_EQ(refused(R"({"type":"string","enum":["a"],"description":"d"})"), "accepted");
}

TEST(JsonSchemaGrammar, IntegerBoundsAreReadExactly) {
  GrammarAutomaton automaton(parse_gbnf(json_schema_to_gbnf(
      nlohmann::ordered_json::parse(R"({"type":"integer","maximum":999999999999999999})"))));
  auto accepts = [&](const std::string& text) {
    auto s = automaton.step(automaton.start(), text);
    return s != GrammarAutomaton::kDead && automaton.accepting(s);
  };
  EXPECT_TRUE(accepts("999999999999999999"));
  EXPECT_FALSE(accepts("1000000000000000000"));  // as a double the bound rounds up to this
}

TEST(JsonSchemaGrammar, NegatedClassesWithClassEscapesStayInAscii) {
  GrammarAutomaton automaton(parse_gbnf(json_schema_to_gbnf(
      nlohmann::ordered_json::parse(R"({"type":"string","pattern":"^[^\\s][^\\d]$"})"))));
  auto accepts = [&](const std::string& text) {
    auto s = automaton.step(automaton.start(), text);
    return s != GrammarAutomaton::kDead && automaton.accepting(s);
  };
  EXPECT_TRUE(accepts(R"("xy")"));
  EXPECT_FALSE(accepts("\"\xC2\xA0y\""));  // U+00A0: \s in ECMA and Python
  EXPECT_FALSE(accepts("\"x\xD9\xA3\""));  // U+0663: \d in Python
  EXPECT_FALSE(accepts(R"(" y")"));
}

TEST(JsonSchemaGrammar, WithoutRawAngleBracketsForToolCalls) {
  JsonGrammarWriter writer(/*no_raw_angle=*/true);
  std::string root = writer.value(nlohmann::ordered_json::parse(
                                      R"({"type":"object","properties":{"s":{"type":"string"},
                                          "p":{"type":"string","pattern":"^a.b$"},
                                          "e":{"enum":["<x>"]}},"required":["s","p","e"]})"),
                                  "t");
  GrammarAutomaton automaton(parse_gbnf(writer.finish(root)));
  auto accepts = [&](const std::string& text) {
    auto s = automaton.step(automaton.start(), text);
    return s != GrammarAutomaton::kDead && automaton.accepting(s);
  };
  EXPECT_TRUE(accepts(R"({"s":"\u003c/tool_call>","p":"a\u003cb","e":"\u003cx>"})"));
  EXPECT_FALSE(accepts(R"({"s":"</tool_call>","p":"a\u003cb","e":"\u003cx>"})"));
  EXPECT_FALSE(accepts(R"({"s":"x","p":"a<b","e":"\u003cx>"})"));
  EXPECT_FALSE(accepts(R"({"s":"x","p":"a\u003cb","e":"<x>"})"));
}

TEST(JsonSchemaGrammar, RawTextNeverDeadEndsOnNull) {
  for (int max : {3, 4, 5, 8}) {
    JsonGrammarWriter writer;
    std::string root =
        writer.raw_string(nlohmann::ordered_json{{"type", "string"}, {"maxLength", max}}, "x");
    GrammarAutomaton automaton(parse_gbnf(writer.finish(root)));
    auto after = [&](const std::string& text) { return automaton.step(automaton.start(), text); };
    // "null" is never complete; a live prefix only where a longer text may follow (no dead end).
    if (max >= 5) {
      ASSERT_NE(after("null"), GrammarAutomaton::kDead) << max;
      EXPECT_FALSE(automaton.accepting(after("null"))) << max;
    } else {
      EXPECT_EQ(after("null"), GrammarAutomaton::kDead) << max;
    }
    EXPECT_TRUE(automaton.accepting(after("nul")));
    if (max >= 4) {
      EXPECT_TRUE(automaton.accepting(after("nulx"))) << max;
    }
    if (max >= 5) {
      EXPECT_TRUE(automaton.accepting(after("nullx"))) << max;
    } else {
      EXPECT_EQ(after("nullx"), GrammarAutomaton::kDead) << max;
    }
  }
}

TEST(JsonSchemaGrammar, RefusedSchemasLeaveNoRulesBehind) {
  JsonGrammarWriter writer;
  EXPECT_THROW(writer.value(nlohmann::ordered_json::parse(
                                R"({"type":"object","properties":{"kids":{"type":"array",
                                    "items":{"$ref":"#"}},"u":{"type":"string","format":"uri"}}})"),
                            "t0s"),
               JsonSchemaError);
  // What the failed schema had written is gone: the grammar is complete without it.
  EXPECT_NO_THROW(parse_gbnf(writer.finish("jobject")));
}

}  // namespace
}  // namespace md::grammar
