#!/usr/bin/env python3
"""Reference renders of chat templates for megadecode's Jinja interpreter.

Renders a deterministic set of conversations with jinja2 set up exactly as transformers'
apply_chat_template sets it up (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, the {% generation %} tag, a json.dumps-based tojson filter, raise_exception and
strftime_now) and writes inputs plus expected output or expected error to
<out>/chat_template_goldens.json. The C++ test renders the same inputs and requires
byte-for-byte equality.

Templates: the real Qwen3 template (tests/data/qwen3-tokenizer), a Qwen3.5/3.8-style and a Kimi-K2-style
template and a torture template from tests/data/templates/, and the small templates of
tests/data/templates/snippets.txt (one per "### name" section).
"""

import argparse
import json
import random
import sys
from datetime import datetime
from pathlib import Path

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

REPO = Path(__file__).resolve().parent.parent
TEMPLATE_DIR = REPO / "tests" / "data" / "templates"
OUTPUT_NAME = "chat_template_goldens.json"


# --- the transformers environment ---------------------------------------------------------------


class GenerationTag(Extension):
    """transformers' {% generation %} tag: the body renders as a call block (its own scope)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_render_body")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def make_environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationTag, "jinja2.ext.loopcontrols"],
    )

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_case(env, source, case):
    """The variables apply_chat_template passes: messages, tools, documents,
    add_generation_prompt, the special tokens that are set, then the caller's kwargs."""
    kwargs = {}
    for key in ("bos_token", "eos_token"):
        if case.get(key):
            kwargs[key] = case[key]
    kwargs.update(case.get("extra", {}))
    template = env.from_string(source)
    return template.render(
        messages=case["messages"],
        tools=case.get("tools"),
        documents=None,
        add_generation_prompt=case.get("add_generation_prompt", False),
        **kwargs,
    )


# --- conversations -------------------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": 'Get the current weather for a city, e.g. "Paris".',
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web — returns 🔎 results with scores.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "max_results": {"type": "integer", "default": 5, "minimum": 1},
                    "threshold": {"type": "number", "default": 0.5},
                    "filters": {"type": "object", "additionalProperties": True},
                },
                "required": ["query"],
            },
        },
    },
]

TRICKY_TEXTS = [
    "Hello!",
    "What's the weather in Paris?",
    'She said "hi" and left.',
    "Back\\slash \\n not a newline, C:\\path\\to\\file",
    "Line one\nLine two\n\nLine four",
    "  padded with spaces and tabs\t ",
    "\n\nleading and trailing newlines\n\n",
    "Unicode: 你好，世界 — café naïve Ωμέγα 😀🎉 עברית العربية",
    "Zero\u200bwidth and line\u2028separator and nbsp\u00a0here",
    "Template-looking text: {{ not_a_var }} {% if %} {# c #}",
    "Tags inside: <tool_call>fake</tool_call> <|im_end|> <think>x</think>",
    "Math: 3 < 4 && 5 > 2, 50% off, x = y ** 2",
    "Emoji sequence 👩‍👩‍👧‍👦 and flags 🇫🇷🇯🇵",
    "",
]

ARG_VALUES = [
    "Paris",
    "São Paulo",
    'quote " and backslash \\',
    42,
    -7,
    0,
    3.14159,
    1.0,
    1e-7,
    1e16,
    -0.0,
    2.5,
    True,
    False,
    None,
    [1, 2, 3],
    ["a", None, 1.5],
    {"nested": {"deep": [True, {"x": "y"}]}},
    {},
    [],
]


def user(text):
    return {"role": "user", "content": text}


def system(text):
    return {"role": "system", "content": text}


def assistant(text, **extra):
    message = {"role": "assistant", "content": text}
    message.update(extra)
    return message


def tool_call(name, arguments, call_id=None, as_string=False):
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if as_string:
        call["function"]["arguments"] = json.dumps(arguments, ensure_ascii=False)
    if call_id:
        call = {"id": call_id, **call}
    return call


def tool_result(content, call_id="call_1", name=None):
    message = {"role": "tool", "tool_call_id": call_id, "content": content}
    if name:
        message["name"] = name
    return message


def scenarios():
    """Named conversations covering the features chat templates branch on."""
    weather = tool_call("get_weather", {"city": "Paris", "unit": "celsius"}, "call_1")
    search = tool_call("search", {"query": "jinja2 sandbox", "max_results": 3, "threshold": 0.25})
    return {
        "single_user": [user("Hello!")],
        "system_user": [system("You are a helpful assistant."), user("Hi there")],
        "multi_turn": [
            system("Be concise."),
            user("What is 2+2?"),
            assistant("4"),
            user("And 3+3?"),
        ],
        "assistant_last": [user("Say hi"), assistant("Hi!")],
        "reasoning_content": [
            user("Why is the sky blue?"),
            assistant("Rayleigh scattering.", reasoning_content="\nLight scatters...\n"),
            user("Explain more."),
        ],
        "reasoning_after_query": [
            user("Question?"),
            assistant("Answer.", reasoning_content="Thinking about it."),
        ],
        "think_in_content": [
            user("Plan a trip"),
            assistant("<think>\nConsider budget.\n</think>\n\nGo to Lisbon."),
            user("Thanks"),
        ],
        "think_in_content_last": [
            user("Plan a trip"),
            assistant("<think>\nConsider budget.\n</think>\n\nGo to Lisbon."),
        ],
        "tool_call_dict_args": [
            system("You can use tools."),
            user("Weather in Paris?"),
            assistant("", tool_calls=[weather]),
            tool_result('{"temperature": 21.5, "sky": "clear"}'),
            assistant("It is 21.5 °C and clear."),
        ],
        "tool_call_string_args": [
            user("Weather in Paris?"),
            assistant(
                "Let me check.",
                tool_calls=[tool_call("get_weather", {"city": "Paris"}, "c9", as_string=True)],
            ),
            tool_result("sunny", "c9"),
        ],
        "parallel_tool_calls": [
            user("Weather in Paris and Tokyo, and search news"),
            assistant(
                None,
                tool_calls=[
                    tool_call("get_weather", {"city": "Paris"}, "a"),
                    tool_call("get_weather", {"city": "東京"}, "b"),
                    search,
                ],
            ),
            tool_result("18C", "a"),
            tool_result("25C", "b"),
            tool_result("[]", "c"),
            assistant("Paris 18C, Tokyo 25C, no news."),
            user("Thanks!"),
        ],
        "multi_step_tools": [
            user("Find and summarize"),
            assistant("", tool_calls=[search], reasoning_content="Need to search first."),
            tool_result("result one"),
            assistant("", tool_calls=[weather], reasoning_content="Now the weather."),
            tool_result("rainy"),
            assistant("Summary: rainy.", reasoning_content="Done."),
        ],
        "numeric_tool_args": [
            user("Call with numbers"),
            assistant(
                "",
                tool_calls=[
                    tool_call(
                        "search",
                        {
                            "query": "q",
                            "max_results": 10,
                            "threshold": 0.1,
                            "big": 1e16,
                            "tiny": 1e-7,
                            "neg_zero": -0.0,
                            "whole_float": 3.0,
                            "flag": True,
                            "off": False,
                            "missing": None,
                            "list": [1, 2.5, "x", None],
                            "filters": {"lang": "en", "safe": True},
                        },
                    )
                ],
            ),
            tool_result("ok"),
        ],
        "unicode": [
            system("Réponds en français. 日本語も可。"),
            user(TRICKY_TEXTS[7]),
            assistant(TRICKY_TEXTS[12]),
            user(TRICKY_TEXTS[8]),
        ],
        "quotes_backslashes": [
            user(TRICKY_TEXTS[2]),
            assistant(TRICKY_TEXTS[3]),
            user(TRICKY_TEXTS[9]),
            assistant(TRICKY_TEXTS[10]),
            user(TRICKY_TEXTS[11]),
        ],
        "whitespace_content": [
            system("  \n spaced system \n  "),
            user(TRICKY_TEXTS[5]),
            assistant(TRICKY_TEXTS[6]),
            user(TRICKY_TEXTS[4]),
        ],
        "empty_strings": [system(""), user(""), assistant(""), user("x")],
        "tool_response_as_user": [
            user("Start"),
            assistant("", tool_calls=[weather]),
            user("<tool_response>\nmanual\n</tool_response>"),
        ],
        "content_parts": [
            system("You see images."),
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in "},
                    {"type": "image", "image": "file:///cat.png"},
                    {"type": "text", "text": " and "},
                    {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
                    {"type": "video", "video": "clip.mp4"},
                ],
            },
        ],
        "developer_role": [
            system("System rules."),
            {"role": "developer", "content": "Developer rules."},
            user("Go"),
        ],
        "named_messages": [
            {"role": "system", "content": "Group chat.", "name": "moderator"},
            {"role": "user", "content": "Hi all", "name": "alice"},
            {"role": "user", "content": "Hello", "name": "bob"},
            assistant("Welcome both."),
        ],
        "system_in_middle": [user("Hi"), system("Late system"), user("Again")],
        "unknown_role": [user("Hi"), {"role": "narrator", "content": "Meanwhile..."}],
        "image_in_system": [
            {"role": "system", "content": [{"type": "image", "image": "x.png"}]},
            user("Hi"),
        ],
        "only_tool_messages": [user("q"), tool_result("a"), tool_result("b")],
    }


VARIANTS = [
    {"add_generation_prompt": True},
    {"add_generation_prompt": False},
    {"add_generation_prompt": True, "extra": {"enable_thinking": False}},
    {"add_generation_prompt": True, "extra": {"enable_thinking": True}},
    {"add_generation_prompt": True, "tools": TOOLS},
    {"add_generation_prompt": True, "tools": TOOLS, "extra": {"enable_thinking": False}},
    {"add_generation_prompt": False, "extra": {"reasoning_effort": "low"}},
    {"add_generation_prompt": True, "extra": {"reasoning_effort": "medium", "preserve_thinking": False}},
    {"add_generation_prompt": True, "extra": {"reasoning_effort": "bogus"}},
    {"add_generation_prompt": True, "tools": [], "extra": {"add_vision_id": True}},
]


def random_conversation(rng):
    messages = []
    if rng.random() < 0.5:
        messages.append(system(rng.choice(TRICKY_TEXTS)))
    for _ in range(rng.randint(1, 6)):
        messages.append(user(rng.choice(TRICKY_TEXTS)))
        kind = rng.random()
        if kind < 0.35:
            args = {f"arg{i}": rng.choice(ARG_VALUES) for i in range(rng.randint(0, 4))}
            calls = [
                tool_call(
                    rng.choice(["get_weather", "search"]),
                    args,
                    f"call_{rng.randint(0, 99)}",
                    as_string=rng.random() < 0.3,
                )
                for _ in range(rng.randint(1, 3))
            ]
            extra = {"reasoning_content": rng.choice(TRICKY_TEXTS)} if rng.random() < 0.5 else {}
            messages.append(assistant(rng.choice(["", None, "Calling tools."]), tool_calls=calls, **extra))
            for call in calls:
                messages.append(tool_result(rng.choice(TRICKY_TEXTS), call.get("id", "x")))
            messages.append(assistant(rng.choice(TRICKY_TEXTS)))
        elif kind < 0.7:
            extra = {"reasoning_content": rng.choice(TRICKY_TEXTS)} if rng.random() < 0.4 else {}
            messages.append(assistant(rng.choice(TRICKY_TEXTS), **extra))
        elif kind < 0.85:
            messages.append(assistant(f"<think>{rng.choice(TRICKY_TEXTS)}</think>{rng.choice(TRICKY_TEXTS)}"))
    variant = {"add_generation_prompt": rng.random() < 0.6}
    if rng.random() < 0.4:
        variant["tools"] = TOOLS
    extra = {}
    if rng.random() < 0.4:
        extra["enable_thinking"] = rng.random() < 0.5
    if rng.random() < 0.2:
        extra["reasoning_effort"] = rng.choice(["low", "medium", "xhigh"])
    if rng.random() < 0.2:
        extra["preserve_thinking"] = rng.random() < 0.5
    variant["extra"] = extra
    return messages, variant


def model_cases(template_key, eos_token, rng, random_count):
    cases = []
    all_scenarios = scenarios()
    names = list(all_scenarios)
    # Every scenario once with the plain generation prompt, then scenario x variant pairs chosen
    # deterministically so that every variant meets many scenarios.
    for index, name in enumerate(names):
        for offset in (0, 1 + index % (len(VARIANTS) - 1)):
            variant = VARIANTS[offset]
            cases.append(
                {
                    "name": f"{template_key}/{name}/v{offset}",
                    "template": template_key,
                    "messages": all_scenarios[name],
                    "tools": variant.get("tools"),
                    "add_generation_prompt": variant["add_generation_prompt"],
                    "bos_token": None,
                    "eos_token": eos_token,
                    "extra": variant.get("extra", {}),
                }
            )
    for i in range(random_count):
        messages, variant = random_conversation(rng)
        cases.append(
            {
                "name": f"{template_key}/random{i:02d}",
                "template": template_key,
                "messages": messages,
                "tools": variant.get("tools"),
                "add_generation_prompt": variant["add_generation_prompt"],
                "bos_token": None,
                "eos_token": eos_token,
                "extra": variant["extra"],
            }
        )
    return cases


def torture_cases(rng):
    cases = []
    all_scenarios = scenarios()
    for index, name in enumerate(all_scenarios):
        variant = VARIANTS[index % len(VARIANTS)]
        extra = dict(variant.get("extra", {}))
        if index % 7 == 3:
            extra["fail_with"] = f"scenario {name}"
        cases.append(
            {
                "name": f"torture/{name}",
                "template": "torture",
                "messages": all_scenarios[name],
                "tools": variant.get("tools"),
                "add_generation_prompt": variant["add_generation_prompt"],
                "bos_token": "<s>" if index % 2 else None,
                "eos_token": "</s>" if index % 3 else None,
                "extra": extra,
            }
        )
    for i in range(10):
        messages, variant = random_conversation(rng)
        cases.append(
            {
                "name": f"torture/random{i:02d}",
                "template": "torture",
                "messages": messages,
                "tools": variant.get("tools"),
                "add_generation_prompt": variant["add_generation_prompt"],
                "bos_token": "<s>",
                "eos_token": "</s>",
                "extra": variant["extra"],
            }
        )
    return cases


# --- snippets ------------------------------------------------------------------------------------

SNIPPET_VARIABLES = {
    "d": {"a": 1, "items": 2},
    "l": [1, 2, 3],
    "s": "héllo",
    "nested": {"a": [{"b": "deep"}]},
    "users": [
        {"name": "ann", "age": 31},
        {"name": "Bob", "age": 25},
        {"name": "cy", "age": 40},
    ],
    "loop_list": [1, 2, 3, 4, 5, 6],
}

SNIPPET_MESSAGES = [
    system("  Be brief.  "),
    user("Hi"),
    assistant("Hello!"),
    user("Bye"),
]

# Whitespace the snippets file cannot hold literally (line endings and Unicode spaces).
EXTRA_SNIPPETS = {
    "ws_crlf_line_endings": "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n",
    "ws_cr_only": "a\r{% if true %}\rb\r{% endif %}\r",
    "ws_unicode_line_separators": "a\u2028b\u2029c\x0bd\x0ce\x1cf\x85g{% if true %}\u2028x{% endif %}",
    "ws_nbsp_before_tag": "line\n\u00a0\u3000{% if true %}nbsp-stripped{% endif %}\n\x1f {% if true %}unit-sep{% endif %}",
    "ws_minus_strips_unicode_space": "x\u3000\u2003 {%- if true %}y{% endif %}",
    "ws_trailing_crlf_dropped": "end\r\n",
    "ws_no_trailing_newline": "end",
    "ws_only_newline": "\n",
}


def read_snippets():
    text = (TEMPLATE_DIR / "snippets.txt").read_text(encoding="utf-8")
    snippets = {}
    name = None
    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith("### "):
            if name is not None:
                snippets[name] = "".join(lines)
            name = line[4:].strip()
            lines = []
        else:
            lines.append(line)
    if name is not None:
        snippets[name] = "".join(lines)
    snippets.update(EXTRA_SNIPPETS)
    return snippets


# --- driver --------------------------------------------------------------------------------------


def run_case(env, source, case):
    try:
        case["expected"] = render_case(env, source, case)
        case["error"] = None
    except Exception as exc:  # both implementations must fail; record how jinja2 failed
        case["expected"] = None
        if type(exc) is jinja2.exceptions.TemplateError:
            kind = "raised"
        elif isinstance(exc, jinja2.exceptions.TemplateSyntaxError):
            kind = "syntax"
        else:
            kind = "runtime"
        case["error"] = {
            "kind": kind,
            "type": type(exc).__name__,
            "message": str(exc),
            "line": getattr(exc, "lineno", None),
        }
    return case


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer-dir", required=True, help="the Qwen3 tokenizer directory (tests/data/qwen3-tokenizer)")
    parser.add_argument("--out", required=True, help="directory for the golden file")
    args = parser.parse_args()

    qwen3_config = json.loads(
        (Path(args.tokenizer_dir) / "tokenizer_config.json").read_text(encoding="utf-8")
    )
    templates = {
        "qwen3": qwen3_config["chat_template"],
        "qwen38_style": (TEMPLATE_DIR / "qwen38_style.jinja").read_text(encoding="utf-8"),
        "kimi_k2_style": (TEMPLATE_DIR / "kimi_k2_style.jinja").read_text(encoding="utf-8"),
        "torture": (TEMPLATE_DIR / "torture.jinja").read_text(encoding="utf-8"),
    }
    rng = random.Random(20240613)
    cases = []
    cases += model_cases("qwen3", qwen3_config.get("eos_token"), rng, 30)
    cases += model_cases("qwen38_style", "<|im_end|>", rng, 30)
    cases += model_cases("kimi_k2_style", "[EOS]", rng, 30)
    cases += torture_cases(rng)
    for name, source in read_snippets().items():
        key = f"snippet/{name}"
        templates[key] = source
        cases.append(
            {
                "name": key,
                "template": key,
                "messages": SNIPPET_MESSAGES,
                "tools": None,
                "add_generation_prompt": False,
                "bos_token": "<s>",
                "eos_token": "</s>",
                "extra": SNIPPET_VARIABLES,
            }
        )

    env = make_environment()
    for case in cases:
        run_case(env, templates[case["template"]], case)

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    golden = {
        "generator": f"tools/gen_template_goldens.py (jinja2 {jinja2.__version__})",
        "templates": templates,
        "cases": cases,
    }
    path = out_dir / OUTPUT_NAME
    path.write_text(json.dumps(golden, ensure_ascii=False, indent=1), encoding="utf-8")
    errors = sum(1 for c in cases if c["error"])
    print(f"wrote {len(cases)} cases ({errors} expected errors) for {len(templates)} templates to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
