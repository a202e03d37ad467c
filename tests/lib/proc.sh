# Process helpers shared by tests/apiserver/cluster.sh and
# tests/cilium/operator.sh (sourced, not run). The caller defines `die`.

# A port nothing listens on at address $1 (default 127.0.0.1), below the
# kernel's ephemeral range: a port inside it can be taken between this check
# and the server's bind by any outgoing connection (the tests open thousands),
# which once stopped a cilium-operator whose metrics listener lost the race.
free_port() {
  local bind="${1:-127.0.0.1}" p low
  low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  [ "${low:-0}" -gt 12000 ] || low=32768
  for _ in $(seq 1 200); do
    p=$(( 10000 + RANDOM % (low - 10000) ))
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
