"""A rank that aborts ends the whole MPI job: every rank exits, the job's status is non-zero,
the aborting rank's message is printed, and it all happens well within the time limit (a rank
left waiting in a collective would hang until the limit).

Usage: mpi_abort_check.py MPIEXEC MD_MPI_RANKS
"""

import subprocess
import sys
import time

LIMIT_S = 60


def main() -> int:
    mpiexec, binary = sys.argv[1], sys.argv[2]
    command = [mpiexec, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "tcp,self",
               "--mca", "btl_tcp_if_include", "lo", "-np", "2", binary, "abort"]
    start = time.monotonic()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        print(f"FAILED: the job still ran after {LIMIT_S} s", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - start
    output = result.stdout + result.stderr
    print(output)
    ok = True
    if result.returncode == 0:
        print("FAILED: the job exited 0", file=sys.stderr)
        ok = False
    if "rank 1 failed: test abort while rank 0 waits" not in output:
        print("FAILED: rank 1's message is missing", file=sys.stderr)
        ok = False
    if "passed a barrier" in output:
        print("FAILED: rank 0 went on", file=sys.stderr)
        ok = False
    print(f"exit {result.returncode} after {elapsed:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
