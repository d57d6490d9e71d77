#!/usr/bin/env python3
"""Records how huggingface_hub itself locates its cache and resolves revisions offline, so the C++
hf_cache tests compare against the library that fills the cache rather than against our reading
of it. Writes OUT/io/hf_cache/{hub/..., expected.json}.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

# Environment combinations: every variable huggingface_hub consults for the cache location.
ENV_CASES = [
    {"HOME": "/h"},
    {"HOME": "/h", "XDG_CACHE_HOME": "/x"},
    {"HOME": "/h", "XDG_CACHE_HOME": "/x", "HF_HOME": "/hf"},
    {"HOME": "/h", "HF_HOME": "/hf", "HUGGINGFACE_HUB_CACHE": "/legacy"},
    {"HOME": "/h", "HF_HOME": "/hf", "HUGGINGFACE_HUB_CACHE": "/legacy", "HF_HUB_CACHE": "/new"},
    {"HOME": "/h", "HF_HOME": "~/hf/"},
    {"HOME": "/h", "HF_HUB_CACHE": "~/hub"},
    {"HOME": "/h", "XDG_CACHE_HOME": "/x/", "HF_HUB_CACHE": "/c/hub/"},
]

COMMITS = {"main": "a" * 40, "dev": "0123456789abcdef0123456789abcdef01234567",
           "refs/pr/1": "c" * 40, "dangling": "d" * 40}
QUERIES = [("org/repo", rev) for rev in
           ["main", "dev", "refs/pr/1", "v1.0", "nope", "dangling", COMMITS["dev"], "e" * 40]]
QUERIES += [("other/repo", "main"), ("org/repo-with.dots_x", "main")]


def cache_root_for(env: dict) -> str:
    code = "from huggingface_hub import constants; print(constants.HF_HUB_CACHE)"
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    return subprocess.run([sys.executable, "-c", code], env=clean, check=True, text=True,
                          capture_output=True).stdout.strip()


def build_cache(hub: Path) -> None:
    shutil.rmtree(hub, ignore_errors=True)
    for repo in ("models--org--repo", "models--org--repo-with.dots_x"):
        for ref, commit in COMMITS.items():
            (hub / repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
            (hub / repo / "refs" / ref).write_text(commit)
        for name in [c for r, c in COMMITS.items() if r != "dangling"] + ["v1.0"]:
            (hub / repo / "snapshots" / name).mkdir(parents=True, exist_ok=True)
            (hub / repo / "snapshots" / name / "config.json").write_text("{}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, type=Path)
    out = parser.parse_args().out / "io" / "hf_cache"
    hub = out / "hub"
    build_cache(hub)

    from huggingface_hub import try_to_load_from_cache
    lookups = []
    for repo, revision in QUERIES:
        found = try_to_load_from_cache(repo, "config.json", cache_dir=str(hub), revision=revision)
        lookups.append({"repo": repo, "revision": revision,
                        "config": found if isinstance(found, str) else None})
    roots = [{"env": env, "root": cache_root_for(env)} for env in ENV_CASES]
    (out / "expected.json").write_text(json.dumps({"hub": str(hub), "roots": roots,
                                                   "lookups": lookups}, indent=1))


if __name__ == "__main__":
    main()
