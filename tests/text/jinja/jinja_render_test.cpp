// Rendering semantics of the Jinja interpreter: every filter and test, undefined values, scoping,
// runtime errors with their location, and the limits that stop runaway templates. (The byte-exact
// comparison with jinja2 itself is tests/text/chat_template_golden_test.cpp.)
#include <gtest/gtest.h>

#include <thread>

#include "text/jinja/template.h"

namespace md::jinja {
namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json vars() {
  return ordered_json::parse(R"({
    "d": {"a": 1, "items": 2}, "l": [1, 2, 3], "s": "h\u00e9llo",
    "users": [{"name": "ann", "age": 31}, {"name": "Bob", "age": 25}, {"name": "cy", "age": 40}],
    "n": null, "f": 2.5, "t": true
  })");
}

std::string render(std::string_view source, const RenderLimits& limits = {}) {
  return Template(source, "t").render(vars(), limits);
}

struct Case {
  const char* source;
  const char* expected;
};

void expect_all(const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    try {
      EXPECT_EQ(render(c.source), c.expected) << c.source;
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.source << " threw " << e.what();
    }
  }
}

TEST(JinjaRender, EveryFilter) {
  expect_all({
      {"{{ -3 | abs }}{{ -2.5 | abs }}", "32.5"},
      {"{{ d | attr('a') }}", "1"},
      {"{{ [1, 2, 3] | batch(2) | list }}", "[[1, 2], [3]]"},
      {"{{ 'hello World' | capitalize }}", "Hello world"},
      {"[{{ 'x' | center(5) }}]", "[  x  ]"},
      {"{{ l | count }}{{ s | length }}", "35"},
      {"{{ n | default('a') }}{{ missing | default('b') }}{{ '' | d('c', true) }}", "Nonebc"},
      {"{{ {'b': 1, 'a': 2} | dictsort }}", "[('a', 2), ('b', 1)]"},
      {"{{ '<&>' | e }}{{ '\"' | escape }}{{ '<' | forceescape }}", "&lt;&amp;&gt;&#34;&lt;"},
      {"{{ l | first }}{{ l | last }}", "13"},
      {"{{ '2.5' | float }}{{ 'x' | float(1) }}", "2.51"},
      {"{{ '%s=%d' | format('a', 1) }}", "a=1"},
      {"{{ 'a\\nb' | indent(2) }}", "a\n  b"},
      {"{{ '42' | int }}{{ '4.9' | int }}{{ 'x' | int(-1) }}{{ 'ff' | int(base=16) }}", "424-1255"},
      {"{{ d | items | list }}", "[('a', 1), ('items', 2)]"},
      {"{{ l | join('-') }}{{ users | join(',', attribute='name') }}", "1-2-3ann,Bob,cy"},
      {"{{ 'ab' | list }}", "['a', 'b']"},
      {"{{ 'AbC' | lower }}{{ 'AbC' | upper }}", "abcABC"},
      {"{{ users | map(attribute='age') | list }}{{ ['a'] | map('upper') | list }}",
       "[31, 25, 40]['A']"},
      {"{{ l | max }}{{ l | min }}{{ users | max(attribute='age') }}",
       "31{'name': 'cy', 'age': 40}"},
      {"{{ l | reject('odd') | list }}{{ users | rejectattr('age', 'lt', 30) | list | length }}",
       "[2]2"},
      {"{{ 'aXa' | replace('a', 'b') }}{{ 'aXa' | replace('a', 'b', 1) }}", "bXbbXa"},
      {"{{ 'abc' | reverse }}{{ l | reverse | list }}", "cba[3, 2, 1]"},
      {"{{ 2.5 | round }}{{ 3.14159 | round(2) }}{{ 2.1 | round(0, 'ceil') }}", "2.03.143.0"},
      {"{{ '<' | safe }}", "<"},
      {"{{ l | select('odd') | list }}{{ users | selectattr('age', 'gt', 30) | list | length }}",
       "[1, 3]2"},
      {"{{ ['b', 'A', 'c'] | sort }}{{ users | sort(attribute='age', reverse=true) | first }}",
       "['A', 'b', 'c']{'name': 'cy', 'age': 40}"},
      {"{{ 1 | string }}{{ (1 | string) is string }}", "1True"},
      {"{{ l | sum }}{{ users | sum(attribute='age') }}", "696"},
      {"{{ 'hello big-world' | title }}", "Hello Big-World"},
      {"{{ {'k': [1, 'é']} | tojson }}", "{\"k\": [1, \"é\"]}"},
      {"{{ {'b': 1, 'a': 2} | tojson(indent=1, sort_keys=true) }}", "{\n \"a\": 2,\n \"b\": 1\n}"},
      {"{{ [1, {'a': 2}] | tojson(separators=(',', ':')) }}", "[1,{\"a\":2}]"},
      {"[{{ '  x  ' | trim }}][{{ 'xax' | trim('x') }}]", "[x][a]"},
      {"{{ ['a', 'A', 'b'] | unique | list }}", "['a', 'b']"},
      {"{{ 'one two, three' | wordcount }}", "3"},
  });
}

TEST(JinjaRender, EveryTest) {
  expect_all({
      {"{{ d is defined }}{{ nope is defined }}{{ nope is undefined }}", "TrueFalseTrue"},
      {"{{ n is none }}{{ s is string }}{{ f is number }}{{ t is number }}", "TrueTrueTrueTrue"},
      {"{{ 1 is integer }}{{ t is integer }}{{ f is float }}{{ d is mapping }}",
       "TrueFalseTrueTrue"},
      {"{{ l is iterable }}{{ 1 is iterable }}{{ l is sequence }}{{ d.items() is sequence }}",
       "TrueFalseTrueFalse"},
      {"{{ t is true }}{{ 1 is true }}{{ false is false }}{{ t is boolean }}", "TrueFalseTrueTrue"},
      {"{{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}",
       "TrueTrueTrueFalse"},
      {"{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 1 is le 1 }}",
       "TrueFalseTrueTrueTrue"},
      {"{{ 2 is gt 1 }}{{ 2 is ge 3 }}{{ 2 is in l }}{{ 'abc' is lower }}{{ 'ABC' is upper }}",
       "TrueFalseTrueTrueTrue"},
      {"{{ namespace is callable }}{{ none is sameas none }}{{ ('<' | e) is escaped }}",
       "TrueTrueTrue"},
      {"{{ 'trim' is filter }}{{ 'odd' is test }}{{ s is not none }}", "TrueTrueTrue"},
  });
}

TEST(JinjaRender, PythonValuePrinting) {
  expect_all({
      {"{{ [1, 'a', (1,), none, true, 1.5, {'k': 'v'}] }}",
       "[1, 'a', (1,), None, True, 1.5, {'k': 'v'}]"},
      {"{{ 4 / 2 }} {{ 3 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}",
       "2.0 1.5 3 -4 2 1024"},
      {"{{ 1e16 }} {{ 1e-5 }} {{ 0.1 + 0.2 }} {{ -0.0 }}", "1e+16 1e-05 0.30000000000000004 -0.0"},
      {"{{ \"it's\" }}{{ [\"it's\"] }}", "it's[\"it's\"]"},
      {"{{ d.items() }}", "dict_items([('a', 1), ('items', 2)])"},
      {"{{ range(3) }}", "range(0, 3)"},
  });
}

TEST(JinjaRender, UndefinedFollowsJinja2Defaults) {
  expect_all({
      {"[{{ nope }}][{{ nope | length }}][{{ d.missing }}][{{ l[9] }}]", "[][0][][]"},
      {"{% for x in nope %}x{% else %}empty{% endfor %}", "empty"},
      {"{{ nope ~ 'a' }}{{ not nope }}{{ nope == nope }}", "aTrueTrue"},
  });
  for (const char* bad : {"{{ nope.x }}", "{{ nope + 1 }}", "{{ nope() }}", "{{ nope | tojson }}",
                          "{{ nope.x is defined }}", "{{ nope['k'] }}"}) {
    EXPECT_THROW(render(bad), TemplateError) << bad;
  }
}

TEST(JinjaRender, ScopingMatchesJinja2) {
  expect_all({
      {"{% set x = 0 %}{% for i in l %}{% set x = i %}{% endfor %}{{ x }}", "0"},
      {"{% set ns = namespace(x=0) %}{% for i in l %}{% set ns.x = i %}{% endfor %}{{ ns.x }}",
       "3"},
      {"{% if true %}{% set y = 1 %}{% endif %}{{ y }}", "1"},
      {"{% macro m() %}{{ late }}{% endmacro %}{% set late = 5 %}{{ m() }}", "5"},
      {"{% set y = 9 %}{% for i in [1, 2] %}{{ y }}{% set y = i %}{{ y }}{% endfor %}", "9192"},
  });
}

TEST(JinjaRender, RuntimeErrorsCarryLocation) {
  try {
    render("line one\n{{ 'a' +\n 1 }}");
    FAIL();
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::kRuntime);
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(std::string(e.what()).find("can only concatenate str"), std::string::npos);
  }
  try {
    render("{% for x in l %}\n  {{ raise_exception('bad ' ~ x) }}{% endfor %}");
    FAIL();
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::kRaised);
    EXPECT_EQ(e.detail(), "bad 1");
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.column(), 6);
  }
}

TEST(JinjaRender, SandboxRefusesMutation) {
  EXPECT_EQ(render("[{{ l.append }}]{{ l.append is defined }}"), "[]False");
  for (const char* bad : {"{{ l.append(4) }}", "{{ d.update({}) }}", "{{ d.pop('a') }}",
                          "{% set d.x = 1 %}", "{{ ''.__class__() }}"}) {
    EXPECT_THROW(render(bad), TemplateError) << bad;
  }
}

TEST(JinjaRender, LimitsStopRunawayTemplates) {
  RenderLimits limits;
  limits.max_steps = 100000;
  limits.max_output_bytes = 1 << 16;
  auto kind_of = [&](std::string_view source) {
    try {
      render(source, limits);
    } catch (const TemplateError& e) {
      return e.kind();
    }
    return TemplateError::Kind::kSyntax;  // not thrown: reported as a mismatch below
  };
  EXPECT_EQ(kind_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(kind_of("{% for a in range(1000) %}{% for b in range(1000) %}{% endfor %}{% endfor %}"),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(kind_of("{% for a in range(100000) %}xxxxxxxxxx{% endfor %}"),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(kind_of("{{ 'a' * 100000000000 }}"), TemplateError::Kind::kLimit);
  EXPECT_EQ(kind_of("{{ range(10000000) | length }}"), TemplateError::Kind::kLimit);
  EXPECT_EQ(kind_of("{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(kind_of("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}"
                    "{% set ns.x = [ns.x] %}{% endfor %}"),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(kind_of("{% set h = namespace(v=none) %}{% for i in range(2000) %}"
                    "{% set h.v = namespace(x=h.v) %}{% endfor %}{{ h }}"),
            TemplateError::Kind::kLimit);
  // Self-referencing namespaces neither leak nor recurse forever when printed (as Python).
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", limits),
            "<Namespace {'me': <Namespace {...}>}>");
  EXPECT_THROW(render("{{ 2 ** 64 }}"), TemplateError);  // Python would print a big integer
}

TEST(JinjaRender, DeepJsonInputIsRefused) {
  ordered_json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = ordered_json::array({deep});
  EXPECT_THROW(Template("{{ x }}", "t").render(ordered_json{{"x", deep}}), TemplateError);
}

TEST(JinjaRender, ConcurrentRendersOfOneTemplate) {
  Template t(
      "{% set ns = namespace(n=0) %}{% for m in l %}{% set ns.n = ns.n + m %}"
      "{% endfor %}{{ ns.n }}-{{ who }}",
      "t");
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) {
        ordered_json v = {{"l", {1, 2, 3, i}}, {"who", i}};
        if (t.render(v) == std::to_string(6 + i) + "-" + std::to_string(i)) ++ok[i];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(ok[i], 200);
}

}  // namespace
}  // namespace md::jinja
