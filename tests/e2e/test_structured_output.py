"""Structured output end to end: response_format json_object / json_schema and the `grammar`
extension (a GBNF grammar) on /v1/chat/completions and /v1/completions, and `megadecode grammar`.

The fixture model has random weights and samples at temperature 1, so whatever it writes is the
grammar's doing: every finished answer must parse and validate against its schema (jsonschema,
Draft 2020-12, with a FormatChecker). The corpus is structured_schemas.py.

The token masks are checked against an independent engine, llguidance (grammar_oracle.py), fed
the same GBNF text that `megadecode grammar --schema` prints: for prefixes found by walking our
own masks, both must allow exactly the same next tokens.

Under the sanitizers (MD_E2E_SANITIZED) fewer schemas, seeds and prefixes are used.
"""
import concurrent.futures
import json
import os
import random
import re
import subprocess
import tempfile
from pathlib import Path

import jsonschema
import pytest

from conftest import BIN, MODEL_DIR
from structured_schemas import OPEN_ENDED, SCHEMAS, UNSUPPORTED

SANITIZED = bool(os.environ.get("MD_E2E_SANITIZED"))
MODEL = "tiny-qwen38"
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MESSAGES = [{"role": "user", "content": "Answer with JSON."}]
# The fixture's template opens a <think> block unless thinking is off; with it off the whole
# answer is `content`.
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
MAX_TOKENS = 400
# Added tokens, special or not (<think>, <tool_call>, ...), are never allowed under a grammar (the
# reasoning and tool-call parsers act on them); the end ids only where the text is complete.
# This is llguidance's own rule too.
ADDED_AS_TEXT = False
VALIDATOR = jsonschema.Draft202012Validator
FORMATS = VALIDATOR.FORMAT_CHECKER

# A few schemas of every kind for the sanitized run and for the mask comparison.
SMALL_SET = ["flat_object", "optional_properties", "tuple_prefix_items", "mixed_enum",
             "number_exclusive", "pattern_anchored", "format_date_time", "any_of_nullable",
             "recursive_tree", "dictionary"]
AGREEMENT_SET = ["flat_object", "nested_object", "optional_properties", "tuple_prefix_items",
                 "prefix_items_then_items", "string_enum", "mixed_enum", "const_fields",
                 "integer_negative_range", "integer_large_bounds", "number_exclusive",
                 "number_negative_range", "string_length_bounds", "pattern_anchored",
                 "pattern_unanchored", "format_date_time", "format_ipv6", "format_hostname",
                 "any_of_nullable", "type_array", "recursive_tree", "recursive_linked_list",
                 "dictionary", "event_record"]
if SANITIZED:
    AGREEMENT_SET = ["flat_object", "mixed_enum", "format_date_time", "recursive_tree"]
CORPUS = SMALL_SET if SANITIZED else list(SCHEMAS)

# Hand-written GBNF grammars and the same language as a Python regex (full match).
GRAMMARS = [
    ('root ::= "yes" | "no"\n', r"yes|no"),
    ('# an ISO date, months and days in range\n'
     'root ::= year "-" month "-" day\n'
     'year ::= [0-9]{4}\n'
     'month ::= "0" [1-9] | "1" [0-2]\n'
     'day ::= "0" [1-9] | [12] [0-9] | "3" [01]   # no calendar check\n',
     r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"),
    ('root ::= "[" item ("," item){0,2} "]"\nitem ::= [a-c]{1,3}\n',
     r"\[[a-c]{1,3}(,[a-c]{1,3}){0,2}\]"),
    ('root ::= "<" [^<>\\x00-\\x1f]{1,4} ">" ( "\\u00e9" | "\\x41" )?\n',
     r"<[^<>\x00-\x1f]{1,4}>(é|A)?"),
    ('root ::= ( [A-Z] [a-z]{0,6} " " ){1,2} [0-9]{1,3} "."\n',
     r"([A-Z][a-z]{0,6} ){1,2}[0-9]{1,3}\."),
]
# Grammars the server must refuse (400, param "grammar"): an unterminated literal, an undefined
# rule, no root, an unclosed group, an unterminated class, {m,n} with m > n, left recursion, an
# unknown escape.
BAD_GRAMMARS = [
    'root ::= "unterminated\n',
    'root ::= missing-rule\n',
    'other ::= "a"\n',
    'root ::= ( "a" | "b"\n',
    'root ::= [a-\n',
    'root ::= "a"{3,1}\n',
    'root ::= root "a" | "a"\n',
    'root ::= "\\q"\n',
]


def compact(doc):
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def spaced(doc):
    return json.dumps(doc, separators=(", ", ": "), ensure_ascii=False)


def schema_format(name, strict=True):
    return {"type": "json_schema",
            "json_schema": {"name": name, "schema": SCHEMAS[name]["schema"], "strict": strict}}


def closing_bias():
    """logit_bias favouring the tokens that close a string, object or array: the random model
    then ends its strings early (the grammar still decides what is allowed)."""
    vocab = json.loads((Path(MODEL_DIR) / "tokenizer.json").read_text())["model"]["vocab"]
    return {str(i): 5 for piece, i in vocab.items() if any(c in piece for c in '"}]')}


def chat(client, **kw):
    kw.setdefault("model", MODEL)
    kw.setdefault("messages", MESSAGES)
    kw.setdefault("temperature", 1)
    kw.setdefault("max_tokens", MAX_TOKENS)
    extra = {**NO_THINKING, **kw.pop("extra_body", {})}
    return client.chat.completions.create(extra_body=extra, **kw)


# ---- `megadecode grammar` ----------------------------------------------------------------------

def run_cli(*args, check=True):
    r = subprocess.run([BIN, "grammar", *args], capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, f"grammar {' '.join(args)}: exit {r.returncode}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(prefix="md-structured-") as d:
        yield Path(d)


def cli_source(workdir, kind, value):
    """The CLI's grammar arguments for kind "schema" (value: a dict), "grammar" (value: GBNF text)
    or "json_object"."""
    if kind == "json_object":
        return ["--json-object"]
    path = workdir / f"{kind}-{abs(hash(json.dumps(value, sort_keys=True)))}.txt"
    path.write_text(json.dumps(value) if kind == "schema" else value)
    return ["--schema" if kind == "schema" else "--grammar", str(path)]


_GBNF = {}


def compiled_gbnf(workdir, kind, value):
    """The GBNF megadecode compiles from a schema / json_object; a grammar is used as given."""
    if kind == "grammar":
        return value
    key = (kind, json.dumps(value, sort_keys=True))
    if key not in _GBNF:
        _GBNF[key] = run_cli(*cli_source(workdir, kind, value)).stdout
    return _GBNF[key]


def end_ids():
    """The model's end tokens: eos_token_id of generation_config.json ∪ config.json."""
    ids = set()
    for name in ("generation_config.json", "config.json"):
        path = Path(MODEL_DIR) / name
        config = json.loads(path.read_text()) if path.exists() else {}
        for obj in (config, config.get("text_config") or {}):
            value = obj.get("eos_token_id")
            ids.update(value if isinstance(value, list) else [] if value is None else [value])
    return sorted(ids)


def our_masks(workdir, source, prefixes):
    """megadecode's answer for each prefix: {"allowed", "accepting", "mask_us"} or {"error"}."""
    path = workdir / "prefixes.jsonl"
    path.write_text("".join(json.dumps({"prefix": p}) + "\n" for p in prefixes))
    ends = [str(i) for i in end_ids()]
    out = run_cli(*source, "-m", MODEL_DIR, "--masks", str(path), "--end-ids", *ends).stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(lines) == len(prefixes), out[-2000:]
    return lines


def tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(Path(MODEL_DIR) / "tokenizer.json"))


def encode(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


@pytest.fixture(scope="module")
def oracle():
    pytest.importorskip("llguidance")
    from grammar_oracle import Oracle
    oracle = Oracle(MODEL_DIR, added_as_text=ADDED_AS_TEXT)
    assert oracle.eos_ids == set(end_ids())
    return oracle


def maybe_oracle():
    try:
        from grammar_oracle import Oracle
        return Oracle(MODEL_DIR, added_as_text=ADDED_AS_TEXT)
    except ImportError:
        return None


# ---- the corpus itself --------------------------------------------------------------------------

def test_corpus_is_consistent():
    """Every schema is a valid Draft 2020-12 schema, its valid documents validate and its invalid
    ones do not; the unsupported schemas name their keyword; the corpus is large enough."""
    assert len(SCHEMAS) >= 35 and len(UNSUPPORTED) >= 8
    assert OPEN_ENDED <= set(SCHEMAS)
    for name, entry in SCHEMAS.items():
        VALIDATOR.check_schema(entry["schema"])
        v = VALIDATOR(entry["schema"], format_checker=FORMATS)
        for doc in entry["valid"]:
            v.validate(doc)
        for doc in entry["invalid"]:
            assert not v.is_valid(doc), (name, doc)
        for doc in entry.get("beyond", []):
            v.validate(doc)
    for name, schema, keyword in UNSUPPORTED:
        VALIDATOR.check_schema(schema)
        assert f'"{keyword}"' in json.dumps(schema), name
    # The format checks the outputs rely on are really there (their optional packages installed).
    for fmt in ("date", "date-time", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"):
        assert fmt in FORMATS.checkers, fmt


# ---- what megadecode's grammar accepts ---------------------------------------------------------

def test_grammar_cli_accepts_valid_and_rejects_invalid_documents(workdir):
    """Each corpus schema's valid documents (compact, and with single spaces) are complete
    sentences of the compiled grammar; its invalid ones are not. Cross-checked with llguidance on
    the same GBNF when it is installed, together with the documents beyond the documented subset."""
    tok = tokenizer()
    oracle = maybe_oracle()
    failures = []
    for name in CORPUS:
        entry = SCHEMAS[name]
        source = cli_source(workdir, "schema", entry["schema"])
        valid = [compact(d) for d in entry["valid"]]
        if not entry.get("compact_only"):
            valid += [spaced(d) for d in entry["valid"]]
        invalid = [compact(d) for d in entry["invalid"]]
        beyond = [compact(d) for d in entry.get("beyond", [])]
        answers = our_masks(workdir, source, [encode(tok, t) for t in valid + invalid + beyond])
        for text, ans in zip(valid, answers):
            if "error" in ans or not ans["accepting"]:
                failures.append(f"{name}: rejects valid {text!r}: {ans}")
        for text, ans in zip(invalid, answers[len(valid):]):
            if "error" not in ans and ans["accepting"]:
                failures.append(f"{name}: accepts invalid {text!r}")
        if oracle is not None:
            judge = oracle.judge(compiled_gbnf(workdir, "schema", entry["schema"]))
            for text, ans in zip(valid + invalid + beyond, answers):
                ours = "error" not in ans and ans["accepting"]
                if judge.accepts(text.encode())[1] != ours:
                    failures.append(f"{name}: llguidance disagrees on {text!r} (ours: {ours})")
    assert not failures, "\n".join(failures)


def test_grammar_cli_refuses_unsupported_keywords(workdir):
    for name, schema, keyword in UNSUPPORTED[:3] if SANITIZED else UNSUPPORTED:
        r = run_cli(*cli_source(workdir, "schema", schema), check=False)
        assert r.returncode != 0, name
        assert keyword in r.stderr, (name, r.stderr)


# ---- the server: schemas ----------------------------------------------------------------------

def _generate(client, name, variant, seed):
    kw = dict(response_format=schema_format(name), seed=seed)
    if variant == "plain":
        kw["n"] = 2
    else:
        kw["logit_bias"] = closing_bias()
    r = chat(client, **kw)
    return [(name, variant, seed, c.message.content, c.finish_reason) for c in r.choices]


def test_schema_outputs_validate(client, workdir):
    """(a) Every corpus schema, sampled at temperature 1: two choices of a seeded request and one
    more with a closing logit_bias. Every finished answer parses and validates; only open-ended
    schemas may run into max_tokens, and not often; every answer, finished or cut, is a sentence
    (or a prefix) of the compiled grammar by llguidance's judgement."""
    jobs = [(name, variant, 1000 * k + i)
            for i, name in enumerate(CORPUS) for k, variant in enumerate(["plain", "biased"])]
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(_generate, client, *job) for job in jobs]
        results = [x for f in futures for x in f.result()]
    assert len(results) == 3 * len(CORPUS)

    oracle = maybe_oracle()
    judges = {}
    failures, cut = [], []
    for name, variant, seed, text, finish in results:
        text = text or ""
        where = f"{name} ({variant}, seed {seed}): {text!r}"
        assert finish in ("stop", "length"), where
        if oracle is not None:
            if name not in judges:
                gbnf = compiled_gbnf(workdir, "schema", SCHEMAS[name]["schema"])
                judges[name] = oracle.judge(gbnf)
            # A cut answer may end inside a character, shown as U+FFFD.
            shown = text if finish == "stop" else text.rstrip("\ufffd")
            viable, complete = judges[name].accepts(shown.encode())
            if not viable or (finish == "stop" and not complete):
                what = "sentence" if finish == "stop" else "prefix"
                failures.append(f"not a {what} of the grammar: {where}")
        if finish == "length":
            cut.append(name)
            continue
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            failures.append(f"does not parse ({e}): {where}")
            continue
        errors = list(VALIDATOR(SCHEMAS[name]["schema"], format_checker=FORMATS).iter_errors(doc))
        if errors:
            failures.append(f"invalid ({errors[0].message}): {where}")
    assert not failures, "\n".join(failures)
    closed = [n for n in cut if n not in OPEN_ENDED]
    assert not closed, f"bounded schemas ran into max_tokens: {closed}"
    # The open-ended ones finish most of the time (uniform sampling over the allowed tokens
    # finishes about 95% of them within 400 tokens).
    open_outputs = sum(1 for r in results if r[0] in OPEN_ENDED)
    assert len(cut) <= max(2, open_outputs // 4), f"{len(cut)} of {open_outputs} cut: {cut}"


def test_json_object_mode(client):
    """(b) response_format json_object: every finished answer is a JSON object."""
    finished = 0
    seeds = range(2) if SANITIZED else range(4)
    for seed in seeds:
        r = chat(client, response_format={"type": "json_object"}, seed=seed, n=2,
                 logit_bias=closing_bias())
        for c in r.choices:
            if c.finish_reason == "length":
                continue
            assert isinstance(json.loads(c.message.content), dict), c.message.content
            finished += 1
    assert finished >= len(seeds), finished  # at least half finish


def test_completions_endpoint_schema(client):
    """response_format on /v1/completions."""
    name = "flat_object"
    r = client.completions.create(model=MODEL, prompt="JSON:", temperature=1, seed=5, n=2,
                                  max_tokens=MAX_TOKENS,
                                  extra_body={"response_format": schema_format(name)})
    for c in r.choices:
        assert c.finish_reason == "stop", c
        VALIDATOR(SCHEMAS[name]["schema"], format_checker=FORMATS).validate(json.loads(c.text))


# ---- the server: GBNF grammars -----------------------------------------------------------------

@pytest.mark.parametrize("gbnf,regex", GRAMMARS, ids=[f"grammar{i}" for i in range(len(GRAMMARS))])
def test_grammar_field_constrains_output(client, gbnf, regex):
    """(c) The `grammar` field: every answer is a full match of the same language as a regex, on
    both endpoints."""
    seeds = range(2) if SANITIZED else range(4)
    for seed in seeds:
        r = chat(client, seed=seed, n=2, max_tokens=64, extra_body={"grammar": gbnf})
        for c in r.choices:
            assert c.finish_reason == "stop", (gbnf, c)
            assert re.fullmatch(regex, c.message.content, re.DOTALL), (gbnf, c.message.content)
    r = client.completions.create(model=MODEL, prompt="Answer:", temperature=1, seed=11,
                                  max_tokens=64, extra_body={"grammar": gbnf})
    assert r.choices[0].finish_reason == "stop"
    assert re.fullmatch(regex, r.choices[0].text, re.DOTALL), (gbnf, r.choices[0].text)


def test_grammar_masks_logit_bias(client):
    """A +100 logit_bias on tokens the grammar forbids changes nothing about what is allowed."""
    vocab = json.loads((Path(MODEL_DIR) / "tokenizer.json").read_text())["model"]["vocab"]
    bias = {str(i): 100 for piece, i in vocab.items() if any(c in piece for c in "qxz0123456789")}
    r = chat(client, seed=3, n=2, max_tokens=8, logit_bias=bias,
             extra_body={"grammar": 'root ::= "yes" | "no"\n'})
    for c in r.choices:
        assert (c.message.content, c.finish_reason) in (("yes", "stop"), ("no", "stop")), c


# ---- streaming, n, seeds -----------------------------------------------------------------------

def test_stream_matches_non_streaming(client):
    """(d) The same seeded request gives the same text and finish reason streamed and not."""
    names = ["flat_object", "recursive_tree"] if SANITIZED else [
        "flat_object", "nested_object", "recursive_tree", "format_date_time", "mixed_enum",
        "event_record"]
    for i, name in enumerate(names):
        kw = dict(response_format=schema_format(name), seed=77 + i)
        full = chat(client, **kw).choices[0]
        text, finish = "", None
        for chunk in chat(client, stream=True, **kw):
            for c in chunk.choices:
                text += c.delta.content or ""
                finish = c.finish_reason or finish
        assert (text, finish) == (full.message.content, full.finish_reason), name


def test_n3_choices_and_seed_invariant(client):
    """(e) n=3: three valid answers; choice 0 is the answer of n=1 with the same seed."""
    name = "optional_properties"
    v = VALIDATOR(SCHEMAS[name]["schema"], format_checker=FORMATS)
    r = chat(client, response_format=schema_format(name), seed=21, n=3)
    assert [c.index for c in r.choices] == [0, 1, 2]
    for c in r.choices:
        assert c.finish_reason == "stop", c
        v.validate(json.loads(c.message.content))
    single = chat(client, response_format=schema_format(name), seed=21, n=1)
    assert single.choices[0].message.content == r.choices[0].message.content


# ---- errors -----------------------------------------------------------------------------------

def _error(r):
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error", error
    return error


@pytest.mark.parametrize("name,schema,keyword", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_keyword_is_400(http, name, schema, keyword):
    """(f) A schema keyword the compiler does not support: 400 naming the keyword, on both
    endpoints; param points into response_format."""
    fmt = {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    for path, body in [(CHAT, {"messages": MESSAGES}), (COMPLETIONS, {"prompt": "x"})]:
        r = http.post(path, json={"model": MODEL, "max_tokens": 8, "response_format": fmt, **body})
        error = _error(r)
        assert re.search(rf"(?<![A-Za-z]){keyword}(?![A-Za-z])", error["message"]), error
        assert (error["param"] or "").startswith("response_format"), error


@pytest.mark.parametrize("gbnf", BAD_GRAMMARS, ids=[f"bad{i}" for i in range(len(BAD_GRAMMARS))])
def test_malformed_grammar_is_400(http, gbnf):
    for path, body in [(CHAT, {"messages": MESSAGES}), (COMPLETIONS, {"prompt": "x"})]:
        r = http.post(path, json={"model": MODEL, "max_tokens": 8, "grammar": gbnf, **body})
        error = _error(r)
        assert error["param"] == "grammar", error


def test_server_still_serves_after_errors(client):
    r = chat(client, seed=1, max_tokens=8, extra_body={"grammar": 'root ::= "ok"\n'})
    assert r.choices[0].message.content == "ok" and r.choices[0].finish_reason == "stop"


# ---- agreement with llguidance -----------------------------------------------------------------

CLOSERS = set(b'"}],')


def show(oracle, prefix):
    data = oracle.text_bytes(prefix)
    return f"...{prefix[-6:]} = {data!r}" if data is not None else str(prefix)


def show_tokens(oracle, ids):
    shown = [(i, oracle.token_bytes.get(i, "special")) for i in ids[:12]]
    return shown + (["..."] if len(ids) > 12 else [])


def _walks(oracle, judge, workdir, source, starts, rounds, rng):
    """Walks megadecode's own masks from each start prefix (one CLI call per round holding every
    walk's prefix) and compares each answer with llguidance's; also asks both about the previous
    prefix plus one token ours forbade there. Returns (prefixes compared, mismatches)."""
    walks = [list(s) for s in starts]
    fresh = [True] * len(walks)  # still at its start prefix (not one our masks led to)
    probes = [None] * len(walks)
    compared, mismatches = 0, []
    never = oracle.special_ids - oracle.eos_ids
    for _ in range(rounds):
        live = [i for i, w in enumerate(walks) if w is not None]
        if not live:
            break
        probing = [i for i in live if probes[i] is not None]
        answers = our_masks(workdir, source, [walks[i] for i in live] + [probes[i] for i in probing])
        for i, ans in zip(probing, answers[len(live):]):
            refused = judge.allowed(probes[i]) is None
            if "error" not in ans or not refused:
                mismatches.append(f"prefix {show(oracle, probes[i])} (a forbidden token): ours {ans}, "
                                  f"llguidance {'refuses' if refused else 'accepts'} it")
        for i, ans in zip(live, answers):
            prefix = walks[i]
            compared += 1
            theirs = judge.allowed(prefix)
            if "error" in ans or theirs is None:
                # Both refusing a start prefix is agreement (test_grammar_cli_accepts_valid_... says
                # whether it should have been refused); a prefix our own masks built must be valid.
                if not ("error" in ans and theirs is None and fresh[i]):
                    mismatches.append(f"prefix {show(oracle, prefix)}: ours {ans.get('error', 'valid')}, "
                                      f"llguidance {'refuses' if theirs is None else 'accepts'} it")
                walks[i] = None
                continue
            fresh[i] = False
            ours = set(ans["allowed"])
            eos = ours & oracle.eos_ids
            want = oracle.eos_ids if ans["accepting"] else set()
            if eos != want or ours & never:
                mismatches.append(f"prefix {show(oracle, prefix)}: accepting={ans['accepting']}, EOS "
                                  f"allowed {sorted(eos)} (want {sorted(want)}), special "
                                  f"{sorted(ours & never)}")
            if (sorted(ours), ans["accepting"]) != theirs:
                mismatches.append(
                    f"prefix {show(oracle, prefix)}: accepting {ans['accepting']} (llguidance "
                    f"{theirs[1]}); only ours allow {show_tokens(oracle, sorted(ours - set(theirs[0])))}; "
                    f"only llguidance {show_tokens(oracle, sorted(set(theirs[0]) - ours))}")
                walks[i] = None
                continue
            forbidden = [t for t in range(oracle.vocab_size) if t not in ours and t not in never]
            probes[i] = prefix + [rng.choice(forbidden)] if forbidden else None
            choices = sorted(ours - oracle.eos_ids)
            if not choices or (eos and rng.random() < 0.3):
                walks[i] = None
                continue
            # Now and then a token that closes something, to reach the ends of strings and objects.
            closing = [t for t in choices if CLOSERS & set(oracle.token_bytes.get(t, b""))]
            walks[i] = prefix + [rng.choice(closing if closing and rng.random() < 0.35 else choices)]
    return compared, mismatches


def _agreement_cases():
    cases = [(name, "schema", SCHEMAS[name]["schema"]) for name in AGREEMENT_SET]
    cases.append(("json_object", "json_object", None))
    grammars = GRAMMARS[:2] if SANITIZED else GRAMMARS
    cases += [(f"grammar{i}", "grammar", g) for i, (g, _) in enumerate(grammars)]
    return cases


def test_masks_agree_with_llguidance(oracle, workdir):
    """(g) For prefixes found by walking our own masks (from the empty prefix and from random cuts
    of the corpus's valid documents), megadecode and llguidance allow the same next tokens and
    agree on accepting, given the same GBNF; a token ours forbids is refused by both."""
    rng = random.Random(20260601)
    tok = tokenizer()
    rounds = 10 if SANITIZED else 16
    total, failures = 0, []
    for name, kind, value in _agreement_cases():
        gbnf = compiled_gbnf(workdir, kind, value)
        judge = oracle.judge(gbnf)
        # Two walks from the start, two from random cuts of valid documents (deep states early).
        docs = {"schema": SCHEMAS[name]["valid"] if kind == "schema" else [],
                "json_object": SCHEMAS["event_record"]["valid"] + SCHEMAS["nested_object"]["valid"],
                "grammar": []}[kind]
        cuts = []
        for doc in docs:
            if kind == "schema" and SCHEMAS[name].get("compact_only"):
                ids = encode(tok, compact(doc))
            else:
                ids = encode(tok, rng.choice([compact, spaced])(doc))
            cuts.append(ids[:rng.randrange(len(ids) + 1)])
        rng.shuffle(cuts)
        compared, mismatches = _walks(oracle, judge, workdir, cli_source(workdir, kind, value),
                                      [[], []] + cuts[:2], rounds, rng)
        total += compared
        failures += [f"{name}: {m}" for m in mismatches[:5]]
    assert not failures, "\n".join(failures)
    assert total >= (60 if SANITIZED else 200), total


def test_agreement_negative_control(oracle, workdir):
    """The comparison finds a difference when the grammars differ: ours compiled from one enum,
    llguidance given the GBNF of another; and two hand grammars one digit apart."""
    rng = random.Random(7)
    ours = {"enum": ["alpha", "beta", "gamma"]}
    other = {"enum": ["alpha", "beta", "delta"]}
    judge = oracle.judge(compiled_gbnf(workdir, "schema", other))
    source = cli_source(workdir, "schema", ours)
    _, mismatches = _walks(oracle, judge, workdir, source, [[], []], 4, rng)
    assert mismatches, "a different enum went unnoticed"
    g_ours = 'root ::= [0-9]{2} "-" [0-9]{2}\n'
    g_other = 'root ::= [0-9]{2} "-" [0-8] [0-9]\n'
    source = cli_source(workdir, "grammar", g_ours)
    _, mismatches = _walks(oracle, oracle.judge(g_other), workdir, source, [[]], 4, rng)
    assert mismatches, "a different digit class went unnoticed"
