#!/usr/bin/env bash
# A Redis Cluster on loopback for the quota tests: 3 masters + 3 replicas on ports 7000-7005 (or the six ports
# in REDIS_CLUSTER_PORTS, space- or comma-separated, as scripts/test.ts passes), so that a failover promotes a
# real replica. Data lives in /tmp and nothing is persisted (no RDB, no AOF); each node's
# nodes.conf (cluster membership) is kept in its /tmp dir so a killed node restarted by `start` rejoins.
#   .ci/redis-cluster.sh start    start what is not answering, create the cluster if it has no slots, wait for ok
#   .ci/redis-cluster.sh stop     shut every node down and delete the data dir
#   .ci/redis-cluster.sh status   exit 0 when the topology is stable: all six nodes answer, cluster_state is ok,
#                                 all 16384 slots ok, 3 masters each with a replica that has synced and that
#                                 every node's CLUSTER SLOTS lists
# Idempotent: `start` on a healthy cluster only checks it. Needs redis-server and redis-cli (Debian's
# redis-server package, which pulls in redis-tools).
set -euo pipefail

read -r -a PORTS <<<"${REDIS_CLUSTER_PORTS:-7000 7001 7002 7003 7004 7005}"
[ "${#PORTS[@]}" -eq 1 ] && IFS=, read -r -a PORTS <<<"${PORTS[0]}"
[ "${#PORTS[@]}" -eq 6 ] || { echo "redis-cluster: REDIS_CLUSTER_PORTS needs six ports" >&2; exit 2; }
# The data dir holds each node's nodes.conf, so it must be the same for every call on the same ports.
if [ "${PORTS[*]}" = "7000 7001 7002 7003 7004 7005" ]; then DEFAULT_DIR=/tmp/expediter-redis-cluster; else DEFAULT_DIR=/tmp/expediter-redis-cluster-${PORTS[0]}; fi
DIR=${REDIS_CLUSTER_DIR:-$DEFAULT_DIR}
# Failure detection time: a dead master's replica is promoted about 1-2 s after the kill.
NODE_TIMEOUT_MS=1000

answers() { redis-cli -p "$1" PING 2>/dev/null | grep -q PONG; }
state_ok() { redis-cli -p "$1" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok'; }
slots_assigned() { redis-cli -p "$1" CLUSTER INFO 2>/dev/null | grep '^cluster_slots_assigned:' | tr -dc 0-9; }

all_ok() {
  for p in "${PORTS[@]}"; do answers "$p" && state_ok "$p" || return 1; done
  # every master has a replica (otherwise a failover test would lose its slots), and every replica has synced
  local masters replicas
  masters=$(redis-cli -p "${PORTS[0]}" CLUSTER NODES | awk '$3 ~ /master/ && $3 !~ /fail/' | wc -l)
  replicas=$(redis-cli -p "${PORTS[0]}" CLUSTER NODES | awk '$3 ~ /slave/ && $3 !~ /fail/' | wc -l)
  [ "$masters" -eq 3 ] && [ "$replicas" -eq 3 ] || return 1
  for p in "${PORTS[@]}"; do
    local info
    info=$(redis-cli -p "$p" INFO replication 2>/dev/null)
    grep -q '^role:slave' <<<"$info" || continue
    grep -q '^master_link_status:up' <<<"$info" && grep -q '^master_sync_in_progress:0' <<<"$info" || return 1
  done
  # and every node's CLUSTER SLOTS (what clients read) covers all 16384 slots in three ranges, each listing a
  # master and its replica: a replica shows there only once the others have heard of its replication offset
  for p in "${PORTS[@]}"; do
    local slots
    slots=$(redis-cli -p "$p" --json CLUSTER SLOTS 2>/dev/null) || return 1
    [ "$(grep -oE '\[[0-9]+,[0-9]+,' <<<"$slots" | wc -l)" -eq 3 ] || return 1
    [ "$(grep -oE '\["[0-9.]+",[0-9]+,' <<<"$slots" | wc -l)" -eq 6 ] || return 1
    redis-cli -p "$p" CLUSTER INFO 2>/dev/null | grep -q '^cluster_slots_ok:16384' || return 1
  done
}

start_node() {
  local p=$1
  mkdir -p "$DIR/$p"
  redis-server --port "$p" --bind 127.0.0.1 --daemonize yes --dir "$DIR/$p" \
    --cluster-enabled yes --cluster-config-file "nodes-$p.conf" --cluster-node-timeout "$NODE_TIMEOUT_MS" \
    --cluster-replica-validity-factor 0 --save "" --appendonly no --protected-mode no \
    --pidfile "$DIR/$p/redis.pid" --logfile "$DIR/$p/redis.log" --loglevel warning
}

start() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null \
    || { echo "redis-cluster: redis-server and redis-cli are needed (apt-get install redis-server)" >&2; exit 1; }
  if all_ok; then echo "redis-cluster: already up on ${PORTS[0]}-${PORTS[-1]}"; return 0; fi
  for p in "${PORTS[@]}"; do answers "$p" || start_node "$p"; done
  for p in "${PORTS[@]}"; do
    for _ in $(seq 1 50); do answers "$p" && break; sleep 0.1; done
    answers "$p" || { echo "redis-cluster: node $p did not start (see $DIR/$p/redis.log)" >&2; exit 1; }
  done
  if [ "$(slots_assigned "${PORTS[0]}")" = "0" ]; then
    local seeds=()
    for p in "${PORTS[@]}"; do seeds+=("127.0.0.1:$p"); done
    redis-cli --cluster create "${seeds[@]}" --cluster-replicas 1 --cluster-yes >"$DIR/create.log" 2>&1 \
      || { cat "$DIR/create.log" >&2; exit 1; }
  fi
  for _ in $(seq 1 300); do all_ok && break; sleep 0.1; done
  all_ok || { echo "redis-cluster: not healthy after 30 s" >&2; redis-cli -p "${PORTS[0]}" CLUSTER NODES >&2 || true; exit 1; }
  echo "redis-cluster: up on ${PORTS[0]}-${PORTS[-1]} (3 masters, 3 replicas)"
}

stop() {
  for p in "${PORTS[@]}"; do redis-cli -p "$p" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; done
  rm -rf "$DIR"
  echo "redis-cluster: stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) all_ok ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
