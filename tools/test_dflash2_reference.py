#!/usr/bin/env python3
"""Self-test of tools/dflash2_reference.py (numpy only; runs in .venv):

  conv      prepare/finish against the direct shift-sum formula, written with explicit loops
            and the flat kernel_projection index side*K*G + tap*G + group (spec 11.4, S5)
  rope      pairs j <-> j + D/2, and scores depend only on the position difference
  top-k     value descending, ties -> lower id, against a plain sort
  selector  greedy walk == the unique path whose every step is the first argmax given its prefix,
            found by brute force over all K^7 paths (spec 11.6), random and tied inputs;
            sampled walk: q rows sum to 1, T -> 0 gives the greedy path
  window    the visibility rule (s+i) - p < window against brute force; a context position
            outside every row's window changes nothing, one inside row 0's window only changes
            row 0's layer-0 attention output
  block     attention is bidirectional inside the block, the conv is causal with 2 taps
  ctx       context features are per position
  goldens   the reference reproduces tests/goldens/dflash2 from fixtures regenerated here
            (their sha256 checked against the goldens' record first)

Usage: .venv/bin/python tools/test_dflash2_reference.py   (or pytest tools/test_dflash2_reference.py)
"""

import hashlib
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
sys.path.insert(0, str(TOOLS))
import dflash2_reference as ref  # noqa: E402
import make_dflash2_fixture as mdf  # noqa: E402

GOLDENS = REPO / "tests" / "goldens" / "dflash2"


def random_drafter(seed=1, vocab=512) -> ref.DFlash2Reference:
    """The tiny-dflash2 geometry with the fixture's weights and a random target embedding/head."""
    weights = {k: v for k, (_, v) in mdf.make_weights().items()}
    rng = np.random.default_rng(seed)
    embed = rng.standard_normal((vocab, mdf.HIDDEN)) * 0.02
    head = rng.standard_normal((vocab, mdf.HIDDEN)) * 0.02
    return ref.DFlash2Reference(mdf.config(), weights, embed, head)


# --- conv ---------------------------------------------------------------------------------------


def direct_conv(x, proj_flat, base, side, kernel, groups, group_size):
    rows, channels = x.shape
    out = np.zeros((rows, channels))
    for t in range(rows):
        for c in range(channels):
            acc = 0.0
            for tap in range(kernel):
                if t - tap < 0:
                    continue
                dyn = proj_flat[t][side * kernel * groups + tap * groups + c // group_size]
                acc += (base[side][tap][c] + dyn) * x[t - tap][c]
            out[t][c] = acc
    return out


def test_conv_matches_direct_shift_sum():
    rng = np.random.default_rng(11)
    for channels, group_size, kernel in ((128, 16, 2), (48, 8, 3), (32, 32, 2)):
        groups = channels // group_size
        x = rng.standard_normal((8, channels))
        o = rng.standard_normal((8, channels))
        w_kp = rng.standard_normal((2 * kernel * groups, channels)) * 0.1
        base = rng.standard_normal((2, kernel, channels)) * 0.3
        d = ref.conv_coefficients(x, w_kp, kernel)
        xc = ref.grouped_conv(x, base[0], d[:, 0], group_size)
        of = ref.grouped_conv(o, base[1], d[:, 1], group_size)
        proj = np.array([[sum(w_kp[j][i] * x[t][i] for i in range(channels))
                          for j in range(2 * kernel * groups)] for t in range(8)])
        assert np.max(np.abs(xc - direct_conv(x, proj, base, 0, kernel, groups, group_size))) < 1e-12
        assert np.max(np.abs(of - direct_conv(o, proj, base, 1, kernel, groups, group_size))) < 1e-12
    # and through the drafter's own weights (layer 0 attention conv)
    r = random_drafter()
    x = rng.standard_normal((8, mdf.HIDDEN))
    xc, d1, _ = r.conv_prepare(x, "layers.0.attention_conv.")
    w_kp = r.w["layers.0.attention_conv.kernel_projection.weight"]
    base = r.w["layers.0.attention_conv.base_kernel"]
    proj = x @ w_kp.T
    groups = mdf.HIDDEN // mdf.CONV_GROUP
    assert np.max(np.abs(xc - direct_conv(x, proj, base, 0, 2, groups, 16))) < 1e-12
    o = rng.standard_normal((8, mdf.HIDDEN))
    of = r.conv_finish(o, d1, "layers.0.attention_conv.")
    assert np.max(np.abs(of - direct_conv(o, proj, base, 1, 2, groups, 16))) < 1e-12


# --- rope ---------------------------------------------------------------------------------------


def test_rope_pairs_and_relative_positions():
    d, theta = 32, 1e7
    half = d // 2
    for j in (0, 5, half - 1):
        for p in (0, 1, 7, 40):
            e = np.zeros((1, 1, d))
            e[0, 0, j] = 1.0
            y = ref.rope(e, np.array([p]), theta)[0, 0]
            a = p * theta ** (-2.0 * j / d)
            want = np.zeros(d)
            want[j], want[j + half] = np.cos(a), np.sin(a)
            assert np.max(np.abs(y - want)) < 1e-14
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((1, 1, d)), rng.standard_normal((1, 1, d))
    for p1, p2, shift in ((3, 1, 10), (25, 9, 17), (0, 0, 33)):
        a = np.sum(ref.rope(q, np.array([p1]), theta) * ref.rope(k, np.array([p2]), theta))
        b = np.sum(ref.rope(q, np.array([p1 + shift]), theta) *
                   ref.rope(k, np.array([p2 + shift]), theta))
        assert abs(a - b) < 1e-12


# --- top-k and selector ---------------------------------------------------------------------------


def test_topk_tie_order():
    rng = np.random.default_rng(5)
    for _ in range(50):
        logits = rng.integers(-3, 4, 64).astype(np.float64)
        vals, ids = ref.topk_sorted(logits, 6)
        want = sorted(range(64), key=lambda i: (-logits[i], i))[:6]
        assert ids.tolist() == want and vals.tolist() == [logits[i] for i in want]


def score_table(anchor, u, c, rho, pcb, scb):
    """table[i][kp][k]: the score of candidate k at step i when the previous step chose kp
    (step 0: kp is ignored, the predecessor is the anchor). Explicit loops."""
    steps, K = u.shape
    rank = rho.shape[1]
    table = np.zeros((steps, K, K))
    for i in range(steps):
        for kp in range(K):
            prev = anchor if i == 0 else c[i - 1][kp]
            for k in range(K):
                acc = u[i][k]
                for r_ in range(rank):
                    acc += pcb[prev][r_] * rho[i][r_] * scb[c[i][k]][r_]
                table[i][kp][k] = acc
    return table


def all_paths(steps, K) -> np.ndarray:
    """Every path (k_1..k_n) in lexicographic order, [K^n, n]."""
    return np.array(list(itertools.product(range(K), repeat=steps)), dtype=np.int64)


def step_scores_of_paths(table, paths) -> np.ndarray:
    """[N, n, K]: the scores each path's step i sees, given the path's own previous choice."""
    steps = table.shape[0]
    prev = np.concatenate([np.zeros((len(paths), 1), dtype=np.int64), paths[:, :-1]], axis=1)
    return np.stack([table[i][prev[:, i]] for i in range(steps)], axis=1)


def greedy_paths_by_brute_force(table, paths):
    """All paths whose every step takes a maximum of its scores, and the first one among equal
    maxima (the lowest candidate index)."""
    sc = step_scores_of_paths(table, paths)                       # [N, n, K]
    best = sc.max(axis=2, keepdims=True)
    is_best = sc == best
    first_best = np.where(is_best.any(axis=2), np.argmax(is_best, axis=2), -1)
    ok = np.all(first_best == paths, axis=1)
    return [tuple(p) for p in paths[ok].tolist()]


def test_selector_greedy_walk_equals_brute_force():
    r = random_drafter()
    pcb = r.w["candidate_selector.predecessor_codebook"]
    scb = r.w["candidate_selector.successor_codebook"]
    rng = np.random.default_rng(7)
    steps, K = r.block - 1, r.top_k
    viterbi_differs = 0
    paths = all_paths(steps, K)                                   # 4^7 = 16384
    for trial in range(24):
        logits = rng.standard_normal((steps, 512)) * 0.3
        if trial % 4 == 3:   # exact ties: quarter-integer logits, zero rho on some rows
            logits = rng.integers(-4, 5, (steps, 512)) / 4.0
        tops = [ref.topk_sorted(row, K) for row in logits]
        u, c = np.stack([t[0] for t in tops]), np.stack([t[1] for t in tops])
        rho = rng.standard_normal((steps, r.rank)) * 0.3
        if trial % 4 == 3:
            rho[::2] = 0.0
        anchor = int(rng.integers(0, 512))
        ks, toks, scores = r.walk(anchor, u, c, rho)
        table = score_table(anchor, u, c, rho, pcb, scb)
        found = greedy_paths_by_brute_force(table, paths)
        assert found == [tuple(ks.tolist())], (found, ks)
        assert toks.tolist() == [int(c[i][k]) for i, k in enumerate(ks)]
        for i, k in enumerate(ks):
            assert np.max(np.abs(scores[i] - table[i][ks[i - 1] if i else 0])) < 1e-12
        # the greedy walk is not Viterbi: count how often the best-total-score path differs
        sc = step_scores_of_paths(table, paths)
        totals = np.take_along_axis(sc, paths[:, :, None], axis=2)[:, :, 0].sum(axis=1)
        viterbi_differs += tuple(paths[np.argmax(totals)].tolist()) != tuple(ks.tolist())
    assert viterbi_differs > 0  # the distinction matters on these inputs


def test_sampled_walk():
    r = random_drafter()
    rng = np.random.default_rng(9)
    logits = rng.standard_normal((r.block - 1, 512)) * 0.5
    tops = [ref.topk_sorted(row, r.top_k) for row in logits]
    u, c = np.stack([t[0] for t in tops]), np.stack([t[1] for t in tops])
    rho = rng.standard_normal((r.block - 1, r.rank)) * 0.3
    gk, _, _ = r.walk(3, u, c, rho)
    for trial in range(20):
        uni = rng.random(r.block - 1)
        ks, toks, scores, q = r.sampled_walk(3, u, c, rho, 0.7, uni)
        assert np.allclose(q.sum(axis=1), 1.0, atol=1e-14)
        _, _, replay = r.walk(3, u, c, rho, ks)
        assert np.array_equal(replay, scores)
        assert np.allclose(q, ref.softmax(scores / 0.7, axis=-1), atol=1e-15)
        for i, k in enumerate(ks):
            cdf = np.cumsum(q[i])
            assert (k == 0 or cdf[k - 1] <= uni[i]) and (cdf[k] > uni[i] or k == len(cdf) - 1)
        cold, _, _, _ = r.sampled_walk(3, u, c, rho, 1e-9, uni)
        assert np.array_equal(cold, gk)


# --- window, bidirectional block, causal conv, ctx --------------------------------------------------


def test_window_rule():
    for s in (1, 5, 9, 16, 20, 40):
        vis = ref.context_visible(s, 8, s, 16)
        for i in range(8):
            for p in range(s):
                assert vis[i, p] == (abs((s + i) - p) < 16)


def test_window_masking_in_the_forward():
    r = random_drafter()
    rng = np.random.default_rng(13)
    s = 20                                    # row 0 sees p >= 5, row 7 sees p >= 12
    ctx = r.context_features(rng.standard_normal((s, 5, mdf.HIDDEN)))
    base = r.forward(42, s, ctx, trace=True)

    def perturbed(p):
        c2 = ctx.copy()
        c2[p] += rng.standard_normal(mdf.HIDDEN)
        return r.forward(42, s, c2, trace=True)

    out = perturbed(s - 16)                   # p = 4: outside every row's window
    assert np.array_equal(out["hf"], base["hf"])
    out = perturbed(s - 15)                   # p = 5: only row 0 (position 20) sees it
    diff = np.abs(out["trace"][0]["attn"] - base["trace"][0]["attn"]).max(axis=1)
    assert diff[0] > 1e-6 and np.all(diff[1:] == 0.0)
    out = perturbed(s - 8)                    # p = 12: every row sees it
    diff = np.abs(out["trace"][0]["attn"] - base["trace"][0]["attn"]).max(axis=1)
    assert np.all(diff > 1e-6)
    # the window also cuts positions only some rows see: p = 8 is seen by rows 0..3
    out = perturbed(8)
    diff = np.abs(out["trace"][0]["attn"] - base["trace"][0]["attn"]).max(axis=1)
    assert np.all(diff[:4] > 1e-6) and np.all(diff[4:] == 0.0)


def test_block_is_bidirectional_and_conv_causal():
    r = random_drafter()
    rng = np.random.default_rng(17)
    s = 12
    ctx = r.context_features(rng.standard_normal((s, 5, mdf.HIDDEN)))
    emb = r.embed[[42] + [r.mask_id] * 7]
    base = r.forward(42, s, ctx, trace=True, block_embeddings=emb)
    for row in (3, 7):
        e2 = emb.copy()
        e2[row] += rng.standard_normal(mdf.HIDDEN) * 0.02
        out = r.forward(42, s, ctx, trace=True, block_embeddings=e2)
        xc = np.abs(out["trace"][0]["xc"] - base["trace"][0]["xc"]).max(axis=1)
        changed = [t for t in range(8) if xc[t] > 0]
        assert changed == [t for t in (row, row + 1) if t < 8], changed
        attn = np.abs(out["trace"][0]["attn"] - base["trace"][0]["attn"]).max(axis=1)
        assert np.all(attn > 1e-9)            # every row, including the ones before `row`


def test_context_features_are_per_position():
    r = random_drafter()
    taps = np.random.default_rng(19).standard_normal((10, 5, mdf.HIDDEN))
    full = r.context_features(taps)
    for p in range(10):
        assert np.max(np.abs(r.context_features(taps[p:p + 1])[0] - full[p])) < 1e-13
    f = taps[3].reshape(-1)
    y = r.w["fc.weight"] @ f
    want = y / np.sqrt(np.mean(y * y) + 1e-6) * r.w["hidden_norm.weight"]
    assert np.max(np.abs(full[3] - want)) < 1e-13


# --- goldens ------------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_fixtures(tmp: Path, meta: dict) -> None:
    """tiny-dflash2 (whole folder) and tiny-qwen38's model.safetensors, checked byte for byte."""
    import make_qwen38_fixtures as mqf
    mdf.write_fixture(tmp)
    for name, digest in meta["fixture_sha256"].items():
        assert sha256_file(tmp / mdf.NAME / name) == digest, "tiny-dflash2/" + name
    target = tmp / meta["target_fixture"]
    target.mkdir()
    mqf.write_safetensors(target / "model.safetensors",
                          mqf.make_weights(mqf.FIXTURES[meta["target_fixture"]]))
    assert sha256_file(target / "model.safetensors") == \
        meta["target_fixture_sha256"]["model.safetensors"], "tiny-qwen38/model.safetensors"


def rel(a, b) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def test_reference_reproduces_goldens():
    meta_path = GOLDENS / (mdf.NAME + ".json")
    if not meta_path.exists():
        print("  (no goldens yet: skipped)")
        return
    meta = json.loads(meta_path.read_text())
    g = ref.read_safetensors(GOLDENS / (mdf.NAME + ".safetensors"))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        build_fixtures(tmp, meta)
        r = ref.DFlash2Reference.from_dirs(tmp / mdf.NAME, tmp / meta["target_fixture"])
    tol = 2e-7  # the goldens are float64 results stored as float32
    taps = g["taps"]
    assert np.array_equal(ref.bf16_round(taps), taps)          # taps are bf16 values
    ctx = r.context_features(taps)
    assert rel(ctx, g["ctx"]) < tol
    seq = g["prompt.ids"].astype(int)
    temperature = meta["temperature"]
    for j, s in enumerate(g["round.s"].astype(int)):
        anchor = int(g["round.anchor"][j])
        assert anchor == seq[s]
        rd = r.draft_round(anchor, s, ctx, temperature, g["round.sampled_uniform"][j],
                           trace=(j == meta["trace_round"]))
        for key, gkey in (("h", "round.hidden"), ("hf", "round.hf"), ("logits", "round.logits"),
                          ("topk_values", "round.topk_values"), ("rho", "round.rho"),
                          ("greedy_scores", "round.greedy_scores"),
                          ("greedy_q", "round.greedy_q"),
                          ("sampled_scores", "round.sampled_scores"),
                          ("sampled_q", "round.sampled_q")):
            assert rel(rd[key], g[gkey][j]) < tol, (s, key, rel(rd[key], g[gkey][j]))
        for key, gkey in (("topk_ids", "round.topk_ids"), ("greedy_k", "round.greedy_k"),
                          ("greedy_path", "round.greedy_path"), ("sampled_k", "round.sampled_k"),
                          ("sampled_path", "round.sampled_path")):
            assert np.array_equal(rd[key], g[gkey][j]), (s, key)
        if j == meta["trace_round"]:
            for layer, tr in enumerate(rd["trace"]):
                for key, value in tr.items():
                    gv = g["trace.layer%d.%s" % (layer, key)]
                    assert gv.shape == value.shape, key
                    assert rel(value, gv) < tol, (layer, key)
    # the synthetic tie case
    c_anchor = int(g["seltie.anchor"][0])
    tops = [ref.topk_sorted(row, r.top_k) for row in g["seltie.logits"]]
    u, c = np.stack([t[0] for t in tops]), np.stack([t[1] for t in tops])
    assert np.array_equal(c, g["seltie.topk_ids"]) and np.array_equal(u, g["seltie.topk_values"])
    ks, toks, scores = r.walk(c_anchor, u, c, g["seltie.rho"])
    assert np.array_equal(ks, g["seltie.greedy_k"]) and np.array_equal(toks, g["seltie.greedy_path"])
    assert rel(scores, g["seltie.scores"]) < tol


def main() -> int:
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    failed = 0
    for name, fn in tests:
        try:
            start = time.perf_counter()
            fn()
            print("PASS %s (%.1f s)" % (name, time.perf_counter() - start))
        except Exception as e:  # noqa: BLE001
            failed += 1
            print("FAIL", name, repr(e))
    print("%d passed, %d failed" % (len(tests) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
