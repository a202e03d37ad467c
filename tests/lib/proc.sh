# Process helpers shared by tests/apiserver/cluster.sh and
# tests/cilium/operator.sh (sourced, not run). The caller defines `die`.

# A port nothing listens on at address $1 (default 127.0.0.1).
free_port() {
  local bind="${1:-127.0.0.1}" p
  for _ in $(seq 1 200); do
    p=$(( 20000 + RANDOM % 40000 ))
    if ! (exec 3<>"/dev/tcp/$bind/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  die "no free port found on $bind"
}

# Whether the pid file $1 names a live process.
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Stops the process of pid file $1 (TERM, up to 10 s, then KILL) and removes
# the file.
stop_pid() {
  local f="$1"
  pid_alive "$f" || { rm -f "$f"; return 0; }
  local pid; pid=$(cat "$f")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}
