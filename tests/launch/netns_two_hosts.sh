#!/bin/bash
# The `launch_netns_two_hosts` CTest test: a real two-host job, each host a network namespace with an address of
# its own, joined by a veth pair. Each host's /etc/hosts is Debian's layout ("127.0.1.1 <its own name>", the other
# host by its address), so that its own name resolves to loopback (docs/distributed.md, "Several hosts"):
#   1. c10d with --rdzv-endpoint host1:PORT, which host1 reaches over loopback: node 0 must publish the address the
#      other host reached it at (10.x), never 127.0.0.1, to every node's workers as MASTER_ADDR;
#   2. a training run over gloo across the two hosts: each worker's gloo device must bind the address of the
#      interface that reaches MASTER_ADDR, not what the host name resolves to (loopback here).
# Needs root and iproute2 (`ip netns`); otherwise it prints why and exits 77 (CTest: Skipped). The namespaces,
# the veth pair and their /etc/netns folders carry this process's id, and are removed on every exit.
#   usage: netns_two_hosts.sh BIN_DIR   (the folder holding megatron-run and megatron-run-worker)
set -u
bin=${1:?usage: $0 BIN_DIR}
run=$bin/megatron-run
[ -x "$run" ] || { echo "netns_two_hosts: no $run" >&2; exit 2; }
skip() { echo "netns_two_hosts: skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
for tool in ip unshare timeout; do command -v "$tool" >/dev/null || skip "no '$tool' on PATH"; done

tag=mrt$$                       # unique per run: namespaces, links and /etc/netns folders carry it
ns1=${tag}h1 ns2=${tag}h2
ip1=10.213.7.1 ip2=10.213.7.2
work=$(mktemp -d "${TMPDIR:-/tmp}/mr-netns.XXXXXX") || exit 2
made_etc_netns=0
[ -d /etc/netns ] || made_etc_netns=1

cleanup() {
  for ns in "$ns1" "$ns2"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  ip link del "${tag}a" 2>/dev/null  # normally gone with its namespace
  [ "$made_etc_netns" = 1 ] && rmdir /etc/netns 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns1" 2>"$work/err" || skip "cannot make a network namespace: $(cat "$work/err")"
ip netns add "$ns2" || exit 1
ip link add "${tag}a" netns "$ns1" type veth peer name "${tag}b" netns "$ns2" || exit 1
ip -n "$ns1" link set "${tag}a" name eth0 && ip -n "$ns2" link set "${tag}b" name eth0 || exit 1
for i in 1 2; do
  ns=${tag}h$i ip=10.213.7.$i
  ip -n "$ns" addr add "$ip/24" dev eth0 && ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || exit 1
  mkdir -p "/etc/netns/$ns" || exit 1
  other=$((3 - i))
  # Debian's installer layout: the host's own name on 127.0.1.1; the other host by its network address.
  printf '127.0.0.1 localhost\n127.0.1.1 host%s\n10.213.7.%s host%s\n' "$i" "$other" "$other" >"/etc/netns/$ns/hosts"
done

# on HOST ARGS...: megatron-run on host HOST (1 or 2) with its own host name, at most 45 s.
on() {
  local h=$1
  shift
  ip netns exec "${tag}h$h" unshare --uts sh -c 'hostname "host$0"; exec timeout -k 5 45 "$@"' "$h" "$run" "$@"
}
# both NAME ARGS...: the two launchers at once (host2 half a second later); fails unless both exit 0. An argument
# @RANK@ becomes 0 on host1, 1 on host2. With $after set (a text), host2 starts only once host1's output has it
# (at most 20 s): under c10d the first to arrive is node 0, and host1 must be.
both() {
  local name=$1
  shift
  on 1 "${@//@RANK@/0}" >"$work/$name.1" 2>&1 &
  local p1=$!
  sleep 0.5
  if [ -n "${after:-}" ]; then
    local i=0
    until grep -qF "$after" "$work/$name.1" || [ $i -ge 200 ]; do sleep 0.1; i=$((i + 1)); done
  fi
  on 2 "${@//@RANK@/1}" >"$work/$name.2" 2>&1 &
  local p2=$!
  wait "$p1"; local r1=$?
  wait "$p2"; local r2=$?
  if [ "$r1" != 0 ] || [ "$r2" != 0 ]; then
    echo "netns_two_hosts: $name: exit codes host1 $r1, host2 $r2"
    for h in 1 2; do echo "---- host$h:"; tail -n 30 "$work/$name.$h"; done
    return 1
  fi
}
fail() { echo "netns_two_hosts: FAILED: $*"; exit 1; }

# The hosts see each other, and each resolves its own name to loopback (the case under test).
ip netns exec "$ns1" getent hosts host1 | grep -q '^127\.0\.1\.1' || fail "host1 does not resolve to 127.0.1.1 in $ns1"
ip netns exec "$ns2" timeout 3 bash -c "exec 3<>/dev/tcp/$ip1/9" 2>&1 | grep -q refused ||
  fail "$ip1 is not reachable from $ns2"

export MR_DIST_TIMEOUT_S=20  # a regression fails in 20 s, not after the 10-minute distributed timeout
c10d="--nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint host1:29400 --join-timeout 20"

# A tiny model: three iterations of the synthetic run over gloo.
cat >"$work/tiny.yaml" <<'YAML'
--num-layers: 1
--hidden-size: 64
--num-attention-heads: 2
--seq-length: 32
--max-position-embeddings: 32
--micro-batch-size: 1
--global-batch-size: 4
--train-iters: 3
--lr: 0.0003
--min-lr: 0.00003
--lr-decay-style: cosine
--lr-warmup-iters: 1
--optimizer: adam
--mock-data: true
--tokenizer-type: NullTokenizer
--vocab-size: 128
--log-interval: 1
--distributed-backend: gloo
YAML

# Gloo's device (finding 2 alone): a static job whose master is host1's network address. torch's default device
# would bind what each host's name resolves to, 127.0.1.1, and the ranks could not connect to each other.
both static --nnodes 2 --node-rank @RANK@ --nproc-per-node 1 --master-addr "$ip1" --master-port 29500 \
  --join-timeout 20 --config "$work/tiny.yaml" || fail "the static two-host gloo training run"
cat "$work/static.1" "$work/static.2" | grep -q "the 2 data-parallel replicas hold identical parameters" ||
  { cat "$work/static.1" "$work/static.2"; fail "static: no 'training run finished' line with the replica check"; }
echo "netns_two_hosts: static, master $ip1: gloo across the two hosts passed"

# c10d (finding 1): the workers' master that node 0 (host1, first to arrive) publishes, as each node's worker sees it.
# Host2 starts once host1 has arrived at the round (host1 says it waits, every 0.2 s here), so host1 is node 0.
export MR_WAIT_NOTICE_S=0.2
after="node(s) arrived"
both probe $c10d --rdzv-id probe --config "$work/tiny.yaml" --no-append-args -- sh -c 'echo "MASTER=$MASTER_ADDR GROUP_RANK=$GROUP_RANK"' ||
  fail "the c10d probe job"
for h in 1 2; do
  grep -q "MASTER=$ip1 " "$work/probe.$h" || { cat "$work/probe.$h"; fail "host$h's worker did not get MASTER_ADDR=$ip1"; }
done
echo "netns_two_hosts: c10d through a loopback endpoint name: both hosts' workers got MASTER_ADDR=$ip1"

# c10d, then a training run over gloo across the hosts with that master.
both train $c10d --rdzv-id train --config "$work/tiny.yaml" || fail "the two-host gloo training run"
# The last rank (host2's) says the run finished with both replicas equal.
cat "$work/train.1" "$work/train.2" | grep -q "the 2 data-parallel replicas hold identical parameters" ||
  { cat "$work/train.1" "$work/train.2"; fail "no 'training run finished' line with the replica check"; }
echo "netns_two_hosts: a gloo training run across the two hosts passed"
exit 0
