#!/usr/bin/env bash
# Starts and stops a real etcd + kube-apiserver for the end-to-end suite, on
# free loopback ports, in one directory that holds everything of it (data,
# certificates, tokens, kubeconfigs, logs, pids).
#
#   cluster.sh up DIR [--owner PID] [-- EXTRA_APISERVER_FLAGS...]
#       build (cached) and start both; set up the Cilium CRDs, cilium-config,
#       the published RBAC (examples/cronjob.yaml) and its binding to the
#       non-admin user; write DIR/env, DIR/admin.kubeconfig and
#       DIR/cilium-gc.kubeconfig. With --owner, everything is stopped when
#       that process exits (the test binary, even if it is killed).
#   cluster.sh down DIR                stop both and remove DIR
#   cluster.sh stop-apiserver DIR      stop kube-apiserver only (etcd keeps the state)
#   cluster.sh start-apiserver DIR     start it again, same port, flags and etcd
#   cluster.sh compact DIR             compact etcd at its current revision
#                                      (expires every continue token taken before)
#   cluster.sh run -- CMD...           up in a temporary DIR, run CMD with
#                                      KCG_E2E_DIR set, down on every exit
#
# The release: KCG_K8S_VERSION (one of versions.env's K8S_VERSIONS, e.g.
# v1.28.15; default versions.env's K8S_VERSION), built by build.sh; or
# KCG_APISERVER_BIN, a directory with kube-apiserver, etcd and kubectl
# already built. DIR/env's K8S_VERSION is what the running server reports.
#
# Users: `admin` (system:masters, DIR/admin.kubeconfig) and `cilium-gc`
# (only the ClusterRole and Role examples/cronjob.yaml publishes,
# DIR/cilium-gc.kubeconfig). Logs: DIR/etcd.log, DIR/apiserver.log, and
# kube-apiserver's audit log DIR/audit.log (policy tests/apiserver/audit-policy.yaml:
# every write to identities, endpoints, endpoint slices and pods, with the
# objects; one file, never rotated, appended to across restarts;
# KCG_APISERVER_AUDIT=off leaves it out, for benches that want none).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

log() { echo "cluster.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=../lib/proc.sh
. "$here/../lib/proc.sh"

kubectl_admin() { "$BIN/kubectl" --kubeconfig "$DIR/admin.kubeconfig" "$@"; }

certs() {
  (
    cd "$DIR"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=kcg-e2e-ca" \
      -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
      -keyout apiserver.key -out apiserver.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > san.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -days 2 -extfile san.ext -out apiserver.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # token,user,uid,"groups"
    {
      echo "admin-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'),admin,uid-admin,\"system:masters\""
      echo "gc-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'),cilium-gc,uid-cilium-gc"
    } > tokens.csv
  )
}

token_of() { # user: its bearer token from tokens.csv
  awk -F, -v u="$1" '$2 == u { print $1 }' "$DIR/tokens.csv"
}

kubeconfig() { # user file
  local user="$1" token
  token=$(token_of "$user")
  cat > "$DIR/$user.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:${APISERVER_PORT}
    certificate-authority: $DIR/ca.crt
users:
- name: $user
  user:
    token: $token
contexts:
- name: $user
  context: {cluster: e2e, user: $user}
current-context: $user
KC
}

start_etcd() {
  "$BIN/etcd" --name e2e --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:${ETCD_PORT}" \
    --advertise-client-urls "http://127.0.0.1:${ETCD_PORT}" \
    --listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-cluster "e2e=http://127.0.0.1:${ETCD_PEER_PORT}" \
    --unsafe-no-fsync --log-level warn >"$DIR/etcd.log" 2>&1 &
  echo $! > "$DIR/etcd.pid"
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/${ETCD_PORT}") 2>/dev/null && return 0
    pid_alive "$DIR/etcd.pid" || break
    sleep 0.1
  done
  tail -20 "$DIR/etcd.log" >&2
  die "etcd did not start (log: $DIR/etcd.log)"
}

start_apiserver() {
  local extra=()
  [ -f "$DIR/apiserver.extra" ] && mapfile -t extra < "$DIR/apiserver.extra"
  # The audit log, whole: blocking (each request writes its own event, none
  # is dropped from a full buffer), no rotation (lumberjack rotates at
  # 100 MB when maxsize is 0).
  local audit=()
  [ "${KCG_APISERVER_AUDIT:-on}" = off ] || audit=(
    --audit-policy-file "$here/audit-policy.yaml" --audit-log-path "$DIR/audit.log"
    --audit-log-format json --audit-log-mode blocking
    --audit-log-maxsize 1000000 --audit-log-maxbackup 0 --audit-log-maxage 0)
  "$BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:${ETCD_PORT}" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "${APISERVER_PORT}" \
    --tls-cert-file "$DIR/apiserver.crt" --tls-private-key-file "$DIR/apiserver.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$DIR/sa.pub" --service-account-signing-key-file "$DIR/sa.key" \
    --authorization-mode RBAC --token-auth-file "$DIR/tokens.csv" \
    --service-cluster-ip-range 10.96.0.0/16 \
    --disable-admission-plugins ServiceAccount \
    --profiling=false --v 0 \
    ${audit[@]+"${audit[@]}"} \
    ${extra[@]+"${extra[@]}"} >>"$DIR/apiserver.log" 2>&1 &
  echo $! > "$DIR/apiserver.pid"
  # curl, not kubectl, polls: a kubectl process ten times a second costs a
  # loaded machine more than the server it waits for.
  local token
  token=$(token_of admin)
  for _ in $(seq 1 600); do
    if curl -sf --max-time 2 --cacert "$DIR/ca.crt" -H "Authorization: Bearer $token" \
      "https://127.0.0.1:${APISERVER_PORT}/readyz" >/dev/null 2>&1; then return 0; fi
    pid_alive "$DIR/apiserver.pid" || break
    sleep 0.1
  done
  tail -30 "$DIR/apiserver.log" >&2
  die "kube-apiserver did not become ready (log: $DIR/apiserver.log)"
}

# Stops everything when the owner process is gone (a test binary that was
# killed never runs its destructors).
watchdog() {
  local owner="$1"
  (
    trap '' INT
    while kill -0 "$owner" 2>/dev/null && [ -d "$DIR" ]; do sleep 1; done
    [ -d "$DIR" ] && "$here/cluster.sh" down "$DIR" >/dev/null 2>&1
  ) </dev/null >/dev/null 2>&1 &
  disown
}

load() {
  DIR="$(cd "$1" && pwd)"
  [ -f "$DIR/env" ] || die "$DIR has no running cluster (no env file)"
  # shellcheck disable=SC1091
  . "$DIR/env"
}

cluster_objects() {
  # The project's own Cilium CRDs (the simulator serves the same files).
  local crds=()
  for f in "$repo"/crates/cilium-gc-sim/src/crds/*.yaml; do crds+=(-f "$f"); done
  kubectl_admin apply "${crds[@]}" >/dev/null
  kubectl_admin wait --for condition=established --timeout 60s \
    crd/ciliumidentities.cilium.io crd/ciliumendpoints.cilium.io crd/ciliumendpointslices.cilium.io >/dev/null
  kubectl_admin -n kube-system create configmap cilium-config \
    --from-literal identity-allocation-mode=crd --from-literal cluster-id=0 >/dev/null
  # The published RBAC, applied as the README says, then bound to the user.
  kubectl_admin apply -f "$repo/examples/cronjob.yaml" >/dev/null
  kubectl_admin create clusterrolebinding cilium-gc-user --clusterrole cilium-gc --user cilium-gc >/dev/null
  kubectl_admin -n kube-system create rolebinding cilium-gc-user --role cilium-gc --user cilium-gc >/dev/null
}

up() {
  local owner=""
  DIR="$1"; shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --owner) owner="$2"; shift 2 ;;
      --) shift; break ;;
      *) die "up: unknown argument $1" ;;
    esac
  done
  mkdir -p "$DIR"; DIR="$(cd "$DIR" && pwd)"
  BIN="${KCG_APISERVER_BIN:-$("$here/build.sh" "${KCG_K8S_VERSION:-}")/bin}"
  # "Kubernetes v1.28.15": the release of the binaries, whoever built them.
  K8S_VERSION=$("$BIN/kube-apiserver" --version | awk '{ print $2 }')
  printf '%s\n' "$@" | sed '/^$/d' > "$DIR/apiserver.extra"
  ETCD_PORT=$(free_port); ETCD_PEER_PORT=$(free_port); APISERVER_PORT=$(free_port)
  cat > "$DIR/env" <<ENV
BIN=$BIN
K8S_VERSION=$K8S_VERSION
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
ETCD_URL=http://127.0.0.1:$ETCD_PORT
APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
ENV
  trap 'down "$DIR" >/dev/null 2>&1' ERR
  [ -n "$owner" ] && watchdog "$owner"
  certs
  kubeconfig admin; kubeconfig cilium-gc
  start_etcd
  start_apiserver
  cluster_objects
  trap - ERR
  log "up: kube-apiserver $K8S_VERSION on https://127.0.0.1:$APISERVER_PORT (etcd http://127.0.0.1:$ETCD_PORT) in $DIR"
}

down() {
  DIR="$1"
  [ -d "$DIR" ] || return 0
  # A real cilium-operator started on this cluster by tests/cilium/operator.sh.
  [ -d "$DIR/operator" ] && { "$repo/tests/cilium/operator.sh" down "$DIR" >/dev/null 2>&1 || true; }
  stop_pid "$DIR/apiserver.pid"
  stop_pid "$DIR/etcd.pid"
  rm -rf "$DIR"
}

compact() {
  load "$1"
  # etcd's JSON gateway: the current revision, then a physical compaction at it.
  local rev
  rev=$(curl -sf -X POST "$ETCD_URL/v3/kv/range" -d '{"key":"AA=="}' | sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')
  [ -n "$rev" ] || die "compact: cannot read etcd's revision"
  curl -sf -X POST "$ETCD_URL/v3/kv/compaction" -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null \
    || die "compact: etcd refused compaction at $rev"
  echo "$rev"
}

cmd="${1:-}"; shift || true
case "$cmd" in
  up) [ $# -ge 1 ] || die "usage: cluster.sh up DIR [--owner PID] [-- FLAGS...]"; up "$@" ;;
  down) [ $# -eq 1 ] || die "usage: cluster.sh down DIR"; down "$1" ;;
  stop-apiserver) load "$1"; stop_pid "$DIR/apiserver.pid" ;;
  start-apiserver) load "$1"; start_apiserver ;;
  compact) compact "$1" ;;
  run)
    [ "${1:-}" = "--" ] && shift
    [ $# -ge 1 ] || die "usage: cluster.sh run -- CMD..."
    DIR=$(mktemp -d "${TMPDIR:-/tmp}/kcg-e2e.XXXXXX")
    trap 'down "$DIR"' EXIT
    trap 'exit 130' INT TERM
    up "$DIR" --owner $$
    KCG_E2E_DIR="$DIR" "$@"
    ;;
  *) die "usage: cluster.sh up|down|stop-apiserver|start-apiserver|compact|run (see the header)" ;;
esac
