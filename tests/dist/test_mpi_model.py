"""A model spread over MPI ranks, end to end: `mpirun -np 2 megadecode run|serve --tp 2` over
TCP on loopback (the transport a multi-host run takes), on the tiny-llama fixture.

- `run`: the greedy text of two MPI ranks equals one process's and two in-process ranks', on
  tiny-llama, tiny-qwen38 (Gated DeltaNet heads shared by key head), muse-spark-tiny and
  kimi-k3-tiny (KDA and MLA heads shared, experts split among the ranks).
- `serve`: rank 0 listens; the official openai client gets from it the completion one process
  gives, concurrent requests included; in-process ranks (`serve --tp 2` without mpirun) too.
- `bench --tp 2` under mpirun reports what all ranks stream, as in-process ranks do.
- A weight pack (`megadecode pack --tp 2`) mapped by both ranks (`--weights`) gives the same text.
- Faults: a rank killed mid-service ends the whole job, non-zero, with mpirun's message naming
  the rank, well within a bound; so does a rank that cannot load its shard, with its message; ranks started with different options are refused at start-up,
  every rank naming the one that differs; a process count unlike --tp is refused.

Environment (set by ctest): MEGADECODE_BIN, MD_MPIEXEC, MD_TINY_LLAMA, MD_TINY_QWEN38,
MD_TINY_MUSE, MD_TINY_KIMI.
"""
import json
import os
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest

BIN = os.environ["MEGADECODE_BIN"]
MPIEXEC = os.environ["MD_MPIEXEC"]
MODEL = os.environ["MD_TINY_LLAMA"]
QWEN = os.environ["MD_TINY_QWEN38"]
MUSE = os.environ["MD_TINY_MUSE"]
KIMI = os.environ["MD_TINY_KIMI"]
FAMILIES = [MODEL, QWEN, MUSE, KIMI]
FAMILY_IDS = ["llama", "qwen38", "muse_spark", "kimi_k3"]
MPI = [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "tcp,self",
       "--mca", "btl_tcp_if_include", "lo"]
PROMPT = "The quick brown fox"
LIMIT_S = 60


def run(*command, timeout=LIMIT_S):
    return subprocess.run(list(command), capture_output=True, text=True, timeout=timeout)


# Greedy text is compared with an f32 KV cache: the ranks' sums round differently (1e-6..1e-4 of
# the logits), and a bf16 cache rounds a key that moved across a bf16 boundary by 2^-9, which on
# these random-weight models is enough to flip a near-tie (muse-spark-tiny's fourth token: top two
# log-probabilities 0.002 apart, flipped under TP with a bf16 cache, not with f32).
def generate(*launch, extra=(), model=MODEL):
    result = run(*launch, BIN, "run", "-m", model, "--raw", "-p", PROMPT, "--greedy", "-n", "16",
                 "-t", "1", "--kv-cache", "f32", *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("model", FAMILIES, ids=FAMILY_IDS)
def test_run_over_two_mpi_ranks_gives_the_one_process_text(model):
    one = generate(model=model)
    assert generate(*MPI, "-np", "2", extra=("--tp", "2"), model=model) == one
    assert generate(extra=("--tp", "2"), model=model) == one


@pytest.mark.parametrize("model", FAMILIES, ids=FAMILY_IDS)
def test_mpi_ranks_run_from_a_weight_pack_as_from_the_checkpoint(model, tmp_path):
    pack = tmp_path / "pack"
    made = run(BIN, "pack", "-m", model, "--tp", "2", "--out", str(pack))
    assert made.returncode == 0, made.stderr
    one = generate(model=model)
    assert generate(*MPI, "-np", "2", extra=("--tp", "2", "--weights", str(pack)), model=model) == one
    # No pack there: every rank refuses it, the job ends with the message.
    wrong = run(*MPI, "-np", "2", BIN, "run", "-m", model, "--tp", "2", "--weights",
                str(tmp_path / "nowhere"), "-p", PROMPT, "-n", "2", "-t", "1")
    assert wrong.returncode != 0
    assert "no manifest.json" in wrong.stdout + wrong.stderr


def test_mpi_ranks_refuse_a_pack_for_another_tp_size_or_packs_that_differ(tmp_path):
    four, two = tmp_path / "tp4", tmp_path / "tp2"
    for pack, tp in ((four, "4"), (two, "2")):
        made = run(BIN, "pack", "-m", MODEL, "--tp", tp, "--out", str(pack))
        assert made.returncode == 0, made.stderr
    common = ["-m", MODEL, "--raw", "-p", PROMPT, "-n", "2", "-t", "1", "--tp", "2"]
    wrong = run(*MPI, "-np", "2", BIN, "run", *common, "--weights", str(four))
    assert wrong.returncode != 0
    assert "packed for --tp 4; this run has 2 ranks" in wrong.stdout + wrong.stderr
    # Rank 1 given another pack than rank 0: refused at start-up, before any rank loads.
    mixed = run(*MPI, "-np", "1", BIN, "run", *common, "--weights", str(two), ":",
                "-np", "1", BIN, "run", *common, "--weights", str(four))
    assert mixed.returncode != 0
    assert "rank 1 differs from rank 0" in mixed.stdout + mixed.stderr


def bench_figures(*launch):
    result = run(*launch, BIN, "bench", "-m", MODEL, "--tp", "2", "--seconds", "0.2", "--rounds",
                 "1", "-t", "1", "--context", "128", "--json")
    assert result.returncode == 0, result.stderr
    [figure] = json.loads(result.stdout)["tensor_parallel"]
    return figure


def test_bench_over_mpi_counts_every_ranks_weights():
    # The bytes all ranks stream per step do not depend on the transport: rank 0 reports the
    # others' too (not only its own shard's).
    mpi = bench_figures(*MPI, "-np", "2")
    local = bench_figures()
    assert mpi["transport"] == "mpi" and local["transport"] == "in-process"
    assert mpi["weight_bytes_per_step_all_ranks"] == local["weight_bytes_per_step_all_ranks"]
    assert mpi["tokens_per_s"] > 0
    listed = run(*MPI, "-np", "2", BIN, "bench", "-m", MODEL, "--tp", "1,2", "--seconds", "0.1")
    assert listed.returncode != 0
    assert "under mpirun, bench measures the job's own rank count" in listed.stdout + listed.stderr


class Server:
    def __init__(self, *launch, extra=()):
        self.log = Path(os.environ.get("TMPDIR", "/tmp")) / f"md-mpi-{os.getpid()}-{time.monotonic_ns()}.log"
        self.out = open(self.log, "w+")
        self.proc = subprocess.Popen(
            [*launch, BIN, "serve", "-m", MODEL, "--port", "0", "--threads", "1", *extra],
            stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)
        self.port = int(self.wait_for(r"listening on http://127\.0\.0\.1:(\d+)").group(1))
        self.wait_for(r"megadecode serve: ready")
        self.client = openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key="x",
                                    max_retries=0, timeout=30)
        self.model = self.client.models.list().data[0].id

    def text(self):
        return self.log.read_text()

    def wait_for(self, pattern, timeout=LIMIT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.text())
            if match:
                return match
            if self.proc.poll() is not None:
                raise RuntimeError(f"exited {self.proc.returncode}:\n{self.text()}")
            time.sleep(0.05)
        raise TimeoutError(f"no {pattern!r}:\n{self.text()}")

    def complete(self, prompt, tokens=12):
        reply = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=tokens,
                                               temperature=0)
        return reply.choices[0].text

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=LIMIT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.out.close()


PROMPTS = ["The quick brown fox", "Hello", "1, 2, 3,", "Once upon a time"]


def answers(server):
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        return list(pool.map(server.complete, PROMPTS))


def test_serve_over_mpi_and_in_process_ranks_answers_as_one_process():
    one = Server()
    try:
        expected = answers(one)
    finally:
        one.stop()
    for launch, extra in ((MPI + ["-np", "2"], ("--tp", "2")), ((), ("--tp", "2"))):
        server = Server(*launch, extra=extra)
        try:
            assert answers(server) == expected, server.text()
            chat = server.client.chat.completions.create(
                model=server.model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                temperature=0)
            assert chat.choices[0].finish_reason in ("length", "stop")
        finally:
            server.stop()


def rank_pid(mpirun_pid, rank):
    """The pid of the megadecode process mpirun started as `rank`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
        except OSError:
            continue
        ppid = int(re.search(r"PPid:\s+(\d+)", status).group(1))
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ and ppid == mpirun_pid:
            return int(entry.name)
    raise AssertionError(f"no rank {rank} under mpirun {mpirun_pid}")


def test_a_killed_rank_ends_the_job_with_a_message():
    server = Server(*MPI, "-np", "2", extra=("--tp", "2"))
    try:
        assert server.complete("Hello")
        os.kill(rank_pid(server.proc.pid, 1), signal.SIGKILL)
        start = time.monotonic()
        code = server.proc.wait(timeout=LIMIT_S)
        elapsed = time.monotonic() - start
        assert code != 0
        assert elapsed < 30, elapsed
        assert re.search(r"rank 1 .*exited on signal 9", server.text().replace("\n", " ")), \
            server.text()
    finally:
        server.stop()


def test_ranks_with_different_options_are_refused_at_start_up():
    common = ["-m", MODEL, "--raw", "-p", PROMPT, "-n", "4", "-t", "1", "--tp", "2"]
    result = run(*MPI, "-np", "1", BIN, "run", *common, "--executor", "mega", ":",
                 "-np", "1", BIN, "run", *common, "--executor", "ops")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert output.count("rank 1 differs from rank 0") == 2, output
    assert "executor mega" in output and "executor ops" in output


def test_a_rank_that_cannot_load_ends_the_job_with_its_message(tmp_path):
    # The same directory name (so the start-up comparison passes), but rank 1's weights are cut.
    broken = tmp_path / Path(MODEL).name
    broken.mkdir()
    for item in Path(MODEL).iterdir():
        (broken / item.name).write_bytes(item.read_bytes())
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    common = ["--raw", "-p", PROMPT, "-n", "4", "-t", "1", "--tp", "2"]
    start = time.monotonic()
    result = run(*MPI, "-np", "1", BIN, "run", "-m", MODEL, *common, ":",
                 "-np", "1", BIN, "run", "-m", str(broken), *common)
    assert result.returncode != 0
    assert time.monotonic() - start < 30
    output = result.stdout + result.stderr
    assert "rank 1 failed: cannot load its shard" in output, output


def test_a_process_count_unlike_tp_is_refused():
    result = run(*MPI, "-np", "2", BIN, "run", "-m", MODEL, "-p", PROMPT, "-n", "4", "--tp", "3")
    assert result.returncode != 0
    assert "--tp 3 but the MPI job has 2 processes" in result.stdout + result.stderr
