#!/usr/bin/env bash
# Two "hosts" on one machine: two network namespaces joined by a veth pair, one MPI rank in
# each, launched by mpirun (started in the first) with an rsh agent that enters the other
# namespace instead of ssh-ing to a host (--mca plm_rsh_agent), the ranks talking TCP over the
# veth only (btl and oob restricted to its subnet). `run --tp 2` must print the text one process
# prints, and the veth must have carried the ranks' traffic. Where namespaces cannot be made (not
# root, no CAP_NET_ADMIN, no iproute2), the test says so and skips (exit 77).
# Usage: mpi_two_hosts_test.sh MPIEXEC MEGADECODE MODEL_DIR
set -u
mpiexec="$1"; bin="$2"; model="$3"
a="mdtp$$a"; b="mdtp$$b"; va="mdv$$a"; vb="mdv$$b"
work="$(mktemp -d)"
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
skip() { echo "SKIP: $*"; exit 77; }

command -v ip >/dev/null || skip "no iproute2 (ip) on this machine"
ip netns add "$a" 2>"$work/err" || skip "cannot create network namespaces: $(cat "$work/err")"
ip netns add "$b" || skip "cannot create a second network namespace"
ip link add "$va" type veth peer name "$vb" 2>"$work/err" || skip "no veth pair: $(cat "$work/err")"
ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" || skip "cannot move the veth ends"
ip netns exec "$a" ip addr add 10.77.0.1/24 dev "$va"
ip netns exec "$b" ip addr add 10.77.0.2/24 dev "$vb"
for ns in "$a" "$b"; do ip netns exec "$ns" ip link set lo up; done
ip netns exec "$a" ip link set "$va" up
ip netns exec "$b" ip link set "$vb" up

# The agent mpirun calls as it would call ssh: [options] HOST COMMAND...
cat >"$work/agent" <<AGENT
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host="\$1"; shift
case "\$host" in 10.77.0.1) ns=$a ;; 10.77.0.2) ns=$b ;; *) echo "no host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
chmod +x "$work/agent"
printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' >"$work/hosts"

prompt=(-m "$model" --raw -p "The quick brown fox" --greedy -n 16 -t 1)
expected="$("$bin" run "${prompt[@]}" 2>/dev/null)"
rx_before=$(ip netns exec "$b" cat "/sys/class/net/$vb/statistics/rx_bytes")
got="$(timeout 120 ip netns exec "$a" "$mpiexec" --allow-run-as-root --hostfile "$work/hosts" \
  -np 2 --mca plm_rsh_agent "$work/agent" --mca btl tcp,self \
  --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
  "$bin" run "${prompt[@]}" --tp 2 2>"$work/stderr")"
code=$?
rx_after=$(ip netns exec "$b" cat "/sys/class/net/$vb/statistics/rx_bytes")
status=0
if [ "$code" -ne 0 ]; then echo "FAIL: mpirun exited $code"; cat "$work/stderr"; status=1; fi
if [ "$got" != "$expected" ]; then
  echo "FAIL: two hosts printed [$got], one process [$expected]"; status=1
fi
if ! grep -q "rank 1 of 2: following rank 0" "$work/stderr"; then
  echo "FAIL: rank 1 did not follow"; cat "$work/stderr"; status=1
fi
carried=$((rx_after - rx_before))
if [ "$carried" -lt 10000 ]; then echo "FAIL: the veth carried only $carried bytes"; status=1; fi
[ "$status" -eq 0 ] && echo "PASS: equal text over two namespaces; the veth carried $carried bytes"
exit "$status"
