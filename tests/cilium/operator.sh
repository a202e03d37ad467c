#!/usr/bin/env bash
# Starts and stops a real cilium-operator-generic (built by build.sh) against
# a cluster started by tests/apiserver/cluster.sh, with its identity GC in CRD
# mode, on free ports. Everything of it lives in CLUSTER_DIR/operator.
#
#   operator.sh up CLUSTER_DIR v1.15|current [--owner PID] [-- OPERATOR_FLAGS...]
#       build (cached) and start the operator as the cluster's admin; wait
#       until it leads and its identity GC has started; write
#       CLUSTER_DIR/operator/env (METRICS_URL, OPERATOR_LOG, VERSION, ...).
#       OPERATOR_FLAGS come after the defaults and override them
#       (e.g. --identity-gc-interval=5s). With --owner, the operator is
#       stopped when that process exits (even if it is killed).
#   operator.sh restart CLUSTER_DIR    stop, then start again with the same
#                                      flags (its heartbeat memory is lost)
#   operator.sh down CLUSTER_DIR       stop it and remove CLUSTER_DIR/operator
#   operator.sh metrics CLUSTER_DIR    its identity GC metrics
#                                      (cilium_operator_identity_gc_*)
#
#   KCG_OPERATOR_BIND   address its API, metrics and gops listen on
#                       (default 127.0.0.1; inside a network namespace, an
#                       address of that namespace)
#   KCG_CILIUM_BIN      a directory with cilium-operator-generic (skips the build)
#
# Its log (CLUSTER_DIR/operator/operator.log) accumulates over restarts; each
# start begins with a line "=== operator.sh: start N ===".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

log() { echo "operator.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=../lib/proc.sh
. "$here/../lib/proc.sh"

load() {
  CLUSTER="$(cd "$1" && pwd)"
  OP="$CLUSTER/operator"
  [ -f "$OP/env" ] || die "$CLUSTER has no operator (no $OP/env)"
  # shellcheck disable=SC1091
  . "$OP/env"
}

stop_operator() { stop_pid "$OP/operator.pid"; }

start_operator() {
  local flags=() starts
  mapfile -t flags < "$OP/flags"
  starts=$(( $(grep -c '^=== operator.sh: start' "$OP/operator.log" 2>/dev/null || true) + 1 ))
  echo "=== operator.sh: start $starts ===" >> "$OP/operator.log"
  local mark; mark=$(wc -l < "$OP/operator.log")
  # The current release also serves a shell on a UNIX socket, by default
  # /var/run/cilium/shell.sock: one per operator, or the second one stops.
  [ "$VERSION" = current ] && flags=("--shell-sock-path=$OP/shell.sock" ${flags[@]+"${flags[@]}"})
  CILIUM_K8S_NAMESPACE=kube-system "$BIN/cilium-operator-generic" \
    --k8s-kubeconfig-path "$CLUSTER/admin.kubeconfig" \
    --identity-allocation-mode=crd \
    --identity-gc-interval=10s --identity-heartbeat-timeout=20s \
    --ipam=kubernetes --cilium-endpoint-gc-interval=30s \
    --remove-cilium-node-taints=false --set-cilium-is-up-condition=false \
    --operator-api-serve-addr "$BIND:$API_PORT" --gops-port "$GOPS_PORT" \
    --enable-metrics --operator-prometheus-serve-addr "$BIND:$METRICS_PORT" \
    --leader-election-lease-duration=4s --leader-election-renew-deadline=3s \
    --leader-election-retry-period=500ms \
    ${flags[@]+"${flags[@]}"} </dev/null >>"$OP/operator.log" 2>&1 &
  echo $! > "$OP/operator.pid"
  # Ready: it leads (a stopped predecessor's lease runs out first) and its
  # CRD identity GC has started; the metrics endpoint answers.
  for _ in $(seq 1 1200); do
    if tail -n +"$mark" "$OP/operator.log" | grep -q 'Starting CRD identity garbage collector' \
      && curl -sf "$METRICS_URL" >/dev/null 2>&1; then
      return 0
    fi
    pid_alive "$OP/operator.pid" || break
    sleep 0.1
  done
  tail -n 30 "$OP/operator.log" >&2
  if ! pid_alive "$OP/operator.pid"; then
    rm -f "$OP/operator.pid"
    die "cilium-operator exited during start (log: $OP/operator.log)"
  fi
  stop_operator
  die "cilium-operator did not start its identity GC within 120s (log: $OP/operator.log)"
}

# Stops the operator when the owner process is gone (a test binary that was
# killed never runs its destructors).
watchdog() {
  local owner="$1"
  (
    trap '' INT
    local pid=""
    while kill -0 "$owner" 2>/dev/null && [ -d "$OP" ]; do
      [ -f "$OP/operator.pid" ] && pid=$(cat "$OP/operator.pid" 2>/dev/null || true)
      sleep 1
    done
    # The cluster's own down may have removed the directory first: stop the
    # last operator seen by its pid, if it is still ours.
    if [ -n "$pid" ] && grep -q cilium-operator "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" 2>/dev/null; sleep 2; kill -9 "$pid" 2>/dev/null
    fi
    [ -d "$OP" ] && "$here/operator.sh" down "$CLUSTER" >/dev/null 2>&1
  ) </dev/null >/dev/null 2>&1 &
  disown
}

up() {
  local owner=""
  CLUSTER="$(cd "$1" && pwd)"; VERSION="$2"; shift 2
  case "$VERSION" in v1.15|current) ;; *) die "up: version is v1.15 or current, not $VERSION" ;; esac
  while [ $# -gt 0 ]; do
    case "$1" in
      --owner) owner="$2"; shift 2 ;;
      --) shift; break ;;
      *) die "up: unknown argument $1" ;;
    esac
  done
  [ -f "$CLUSTER/admin.kubeconfig" ] || die "$CLUSTER is not a cluster.sh directory"
  OP="$CLUSTER/operator"
  [ -d "$OP" ] && die "$CLUSTER already has an operator (operator.sh down first)"
  mkdir -p "$OP"
  BIN="${KCG_CILIUM_BIN:-$("$here/build.sh" "$VERSION")/bin}"
  BIND="${KCG_OPERATOR_BIND:-127.0.0.1}"
  API_PORT=$(free_port "$BIND"); GOPS_PORT=$(free_port "$BIND"); METRICS_PORT=$(free_port "$BIND")
  local host="$BIND"; [[ "$BIND" == *:* ]] && host="[$BIND]"
  printf '%s\n' "$@" | sed '/^$/d' > "$OP/flags"
  cat > "$OP/env" <<ENV
VERSION=$VERSION
BIN=$BIN
BIND=$BIND
API_PORT=$API_PORT
GOPS_PORT=$GOPS_PORT
METRICS_PORT=$METRICS_PORT
METRICS_URL=http://$host:$METRICS_PORT/metrics
OPERATOR_LOG=$OP/operator.log
ENV
  # shellcheck disable=SC1091
  . "$OP/env"
  [ -n "$owner" ] && watchdog "$owner"
  start_operator
  log "up: cilium-operator $VERSION ($(cat "$BIN/../version" 2>/dev/null || echo '?')), metrics http://$host:$METRICS_PORT/metrics, log $OP/operator.log"
}

down() {
  CLUSTER="$(cd "$1" 2>/dev/null && pwd)" || return 0
  OP="$CLUSTER/operator"
  [ -d "$OP" ] || return 0
  stop_operator
  rm -rf "$OP"
}

cmd="${1:-}"; shift || true
case "$cmd" in
  up) [ $# -ge 2 ] || die "usage: operator.sh up CLUSTER_DIR v1.15|current [--owner PID] [-- FLAGS...]"; up "$@" ;;
  down) [ $# -eq 1 ] || die "usage: operator.sh down CLUSTER_DIR"; down "$1" ;;
  restart) [ $# -eq 1 ] || die "usage: operator.sh restart CLUSTER_DIR"; load "$1"; stop_operator; start_operator ;;
  metrics) [ $# -eq 1 ] || die "usage: operator.sh metrics CLUSTER_DIR"; load "$1"
    curl -sf "$METRICS_URL" | grep '^cilium_operator_identity_gc_' || true ;;
  *) die "usage: operator.sh up|down|restart|metrics (see the header)" ;;
esac
