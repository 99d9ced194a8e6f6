#!/usr/bin/env bash
# Real Redis and Neo4j 5.26 Community without Docker: for the tests and CI, and for running
# cogmill distributed on one machine (docs/operations.md).
#
#   eval "$(deploy/services.sh start)"             # start both (idempotent); export the tests'
#                                                  # COGMILL_TEST_* URLs
#   eval "$(deploy/services.sh start --settings)"  # the same; export the COGMILL_* settings
#                                                  # cogmill reads instead (broker, state, graph)
#   deploy/services.sh status                      # exit 0 only if both answer
#   deploy/services.sh env [--settings]            # print the export lines only
#   deploy/services.sh stop                        # safe when nothing runs
#
# Options (after the command; each has an environment variable, read when the option is absent):
#   --redis-port N       COGMILL_TEST_REDIS_PORT      Redis                    (6390)
#   --neo4j-port N       COGMILL_TEST_NEO4J_PORT      Neo4j Bolt               (7697)
#   --neo4j-http-port N  COGMILL_TEST_NEO4J_HTTP_PORT Neo4j HTTP API; 0: none  (Bolt port - 213)
#   --password-file F    COGMILL_SERVICES_PASSWORD    the password of Redis (requirepass) and of
#                                                     Neo4j's user neo4j; F holds it, or the
#                                                     variable does; none: no authentication
#   --dir D              COGMILL_SERVICES_DIR         pids, logs, data, password ($PWD/.services)
# The ports default off the usual ones (6379, 7687, 7474) so a developer's own servers are left
# alone. The password is kept (mode 600) in the state dir for `env` and `status`; the tests run
# without one (their Neo4j settings carry none).
#
# Progress goes to stderr, the `export` lines to stdout. Needs redis-server (apt) and Java 17+
# with Maven (the Neo4j launcher in deploy/neo4j is built on first start).
#
# More env: COGMILL_NEO4J_HEAP (1g), COGMILL_NEO4J_JAVA_OPTS (extra JVM flags),
#   COGMILL_NEO4J_SETTINGS (space-separated Neo4j settings, key=value),
#   COGMILL_SERVICES_TIMEOUT (120 s).
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|status|env [--settings] [--redis-port N] [--neo4j-port N]" \
    "[--neo4j-http-port N] [--password-file F] [--dir D]" >&2
  exit 2
}

cmd=${1:-}
[[ $# -gt 0 ]] && shift
SETTINGS=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --settings) SETTINGS=1; shift; continue ;;
    --redis-port | --neo4j-port | --neo4j-http-port | --password-file | --dir)
      [[ $# -ge 2 ]] || usage ;;
    *) usage ;;
  esac
  case $1 in
    --redis-port) COGMILL_TEST_REDIS_PORT=$2 ;;
    --neo4j-port) COGMILL_TEST_NEO4J_PORT=$2 ;;
    --neo4j-http-port) COGMILL_TEST_NEO4J_HTTP_PORT=$2 ;;
    --password-file) COGMILL_SERVICES_PASSWORD=$(<"$2") ;;
    --dir) COGMILL_SERVICES_DIR=$2 ;;
  esac
  shift 2
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NEO4J_SRC=$HERE/neo4j
STATE=${COGMILL_SERVICES_DIR:-$PWD/.services}
REDIS_PORT=${COGMILL_TEST_REDIS_PORT:-6390}
NEO4J_PORT=${COGMILL_TEST_NEO4J_PORT:-7697}
NEO4J_HTTP_PORT=${COGMILL_TEST_NEO4J_HTTP_PORT:-$((NEO4J_PORT - 213))}
NEO4J_HEAP=${COGMILL_NEO4J_HEAP:-1g}
TIMEOUT=${COGMILL_SERVICES_TIMEOUT:-120}
PASSWORD=${COGMILL_SERVICES_PASSWORD:-}
for port in "$REDIS_PORT" "$NEO4J_PORT" "$NEO4J_HTTP_PORT"; do
  [[ $port =~ ^[0-9]+$ && $port -lt 65536 ]] || { echo "services: bad port '$port'" >&2; exit 2; }
done
# Redis URLs carry the password: keep it to characters a URL takes as they are.
[[ $PASSWORD =~ ^[A-Za-z0-9._~-]*$ ]] \
  || { echo "services: the password may hold only letters, digits and . _ ~ -" >&2; exit 2; }

# The flags Neo4j's own neo4j.conf passes. Without the add-opens, debug.log warns that the
# page cache falls back from DirectByteBuffer reflection and that fadvise on transaction
# logs fails ("Incorrect file descriptor"). -Xms = -Xmx silences the heap-size warning.
NEO4J_JVM_FLAGS=(
  "-Xms$NEO4J_HEAP" "-Xmx$NEO4J_HEAP" -XX:+UseG1GC -XX:-OmitStackTraceInFastThrow
  -XX:+DisableExplicitGC -Djdk.nio.maxCachedBufferSize=1024
  -Dio.netty.tryReflectionSetAccessible=true -Dlog4j2.disable.jmx=true
  --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens=java.base/java.io=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED
)
READY_MARKER=COGMILL_NEO4J_READY

say() { echo "services: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

redis_url() { echo "redis://${PASSWORD:+:$PASSWORD@}127.0.0.1:$REDIS_PORT/0"; }
neo4j_uri() { echo "bolt://127.0.0.1:$NEO4J_PORT"; }
print_env() {
  if [[ $SETTINGS == 1 ]]; then  # what every cogmill process (API, CLI, workers) reads
    echo "export COGMILL_BROKER_URL=$(redis_url)"
    echo "export COGMILL_RESULT_BACKEND=$(redis_url)"
    echo "export COGMILL_REDIS_URL=$(redis_url)"
    echo "export COGMILL_NEO4J_URI=$(neo4j_uri)"
    echo "export COGMILL_NEO4J_PASSWORD=$PASSWORD"
    echo "export COGMILL_VECTOR_STORE=neo4j"
  else
    echo "export COGMILL_TEST_REDIS_URL=$(redis_url)"
    echo "export COGMILL_TEST_NEO4J_URI=$(neo4j_uri)"
  fi
}

# The password of a running pair of services, kept from their start (for env and status).
load_password() {
  if [[ -z $PASSWORD && -f $STATE/password ]]; then PASSWORD=$(<"$STATE/password"); fi
  return 0
}

redis_up() {
  [[ $(REDISCLI_AUTH=$PASSWORD redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]
}
bolt_up() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$NEO4J_PORT" 2>/dev/null; }

# A pid from our pidfile, only while that process is still the one we started (pids recycle).
live_pid() { # pidfile pattern-in-cmdline
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$2" \
    && echo "$pid"
}

stop_pid() { # pid name
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 600; i++)); do  # Neo4j checkpoints on shutdown: a few seconds
    kill -0 "$pid" 2>/dev/null || { say "$2 stopped (pid $pid)"; return 0; }
    sleep 0.1
  done
  say "$2 did not stop in 60 s; killing pid $pid"
  kill -KILL "$pid" 2>/dev/null || true
}

start_redis() {
  command -v redis-server >/dev/null || die "redis-server not found: apt-get install -y redis-server"
  if redis_up; then
    live_pid "$STATE/redis.pid" redis-server >/dev/null \
      || say "note: a Redis not started by this script already answers on port $REDIS_PORT"
    say "redis already running on port $REDIS_PORT"
    return
  fi
  mkdir -p "$STATE/redis"
  # No persistence: test data is throwaway, and RDB/AOF writes only slow tests down. The
  # password goes in through the config on stdin (`-`), not the command line others can read.
  printf 'requirepass "%s"\n' "$PASSWORD" | redis-server - --port "$REDIS_PORT" \
    --bind 127.0.0.1 --daemonize yes --save '' --appendonly no --dir "$STATE/redis" \
    --pidfile "$STATE/redis.pid" --logfile "$STATE/redis.log" >/dev/null 9>&-
  local i
  for ((i = 0; i < TIMEOUT * 10; i++)); do
    redis_up && { say "redis up on port $REDIS_PORT"; return; }
    sleep 0.1
  done
  tail -n 20 "$STATE/redis.log" >&2 || true
  die "redis did not answer on port $REDIS_PORT within ${TIMEOUT}s (log: $STATE/redis.log)"
}

build_neo4j() {
  local stamp=$NEO4J_SRC/target/.cogmill-built
  if [[ -f $stamp && -z $(find "$NEO4J_SRC/pom.xml" "$NEO4J_SRC/src" -newer "$stamp" -print -quit) ]]; then
    return
  fi
  command -v mvn >/dev/null || die "mvn not found: apt-get install -y maven (needs Java 17+)"
  say "building the Neo4j launcher with Maven (a cold ~/.m2 first downloads ~160 MB of jars)"
  # A clean target/lib: jars of an older Neo4j version left there would share the classpath.
  rm -rf "$NEO4J_SRC/target"
  mvn -q -B -f "$NEO4J_SRC/pom.xml" compile >"$STATE/neo4j-build.log" 2>&1 || {
    tail -n 40 "$STATE/neo4j-build.log" >&2
    die "Neo4j launcher build failed (log: $STATE/neo4j-build.log)"
  }
  touch "$stamp"
}

start_neo4j() {
  local pid log=$STATE/neo4j.log
  if pid=$(live_pid "$STATE/neo4j.pid" dev.cogmill.Neo4jLauncher); then
    if ! bolt_up; then wait_neo4j "$pid"; fi  # e.g. another `start` is still waiting on it
    say "neo4j already running on port $NEO4J_PORT (pid $pid)"
    return
  fi
  bolt_up && die "port $NEO4J_PORT already answers but not our Neo4j; set COGMILL_TEST_NEO4J_PORT"
  build_neo4j
  : >"$log"  # here, not in the background child: the ready check must not see an old line
  local extra_opts settings=() setting
  read -r -a extra_opts <<<"${COGMILL_NEO4J_JAVA_OPTS:-}"
  for setting in ${COGMILL_NEO4J_SETTINGS:-}; do settings+=(--set "$setting"); done
  # setsid: its own session, so a Ctrl-C aimed at the caller (make, pytest) does not reach it.
  # The data under $STATE/neo4j is kept between runs; Neo4j reopens (and if need be recovers) it.
  # The password reaches the launcher through its environment (Neo4jLauncher.PASSWORD_ENV).
  COGMILL_NEO4J_LAUNCH_PASSWORD=$PASSWORD setsid "${COGMILL_NEO4J_JAVA:-java}" \
    "${NEO4J_JVM_FLAGS[@]}" "${extra_opts[@]}" \
    -cp "$NEO4J_SRC/target/classes:$NEO4J_SRC/target/lib/*" dev.cogmill.Neo4jLauncher \
    --port "$NEO4J_PORT" --http-port "$NEO4J_HTTP_PORT" --data "$STATE/neo4j" "${settings[@]}" \
    </dev/null >>"$log" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$STATE/neo4j.pid"
  wait_neo4j "$pid"
}

wait_neo4j() { # pid
  local pid=$1 log=$STATE/neo4j.log i
  for ((i = 0; i < TIMEOUT * 10; i++)); do
    if grep -q "^$READY_MARKER" "$log" 2>/dev/null; then
      local http=""
      [[ $NEO4J_HTTP_PORT != 0 ]] && http=", HTTP on port $NEO4J_HTTP_PORT"
      say "neo4j up on port $NEO4J_PORT$http (pid $pid; $(grep -o 'started_in_ms=[0-9]*' "$log" | tail -n 1))"
      return
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      neo4j_logs
      die "neo4j exited during startup"
    fi
    sleep 0.1
  done
  neo4j_logs
  stop_pid "$pid" neo4j
  die "neo4j not ready within ${TIMEOUT}s"
}

neo4j_logs() {  # the launcher's own output, then Neo4j's debug.log where startup stalls show
  local f
  for f in "$STATE/neo4j.log" "$STATE/neo4j/logs/debug.log"; do
    [[ -s $f ]] && { say "--- tail of $f"; tail -n 25 "$f" >&2; }
  done
  return 0
}

stop_all() {
  local pid
  if pid=$(live_pid "$STATE/neo4j.pid" dev.cogmill.Neo4jLauncher); then stop_pid "$pid" neo4j
  else say "neo4j not running"; fi
  rm -f "$STATE/neo4j.pid"
  if pid=$(live_pid "$STATE/redis.pid" redis-server); then stop_pid "$pid" redis
  else say "redis not running (or not started by this script)"; fi
  rm -f "$STATE/redis.pid" "$STATE/password"
}

redis_running() { live_pid "$STATE/redis.pid" redis-server >/dev/null; }

status() {
  local ok=0 pid
  local shown
  shown=$(redis_url)
  shown=${shown/:$PASSWORD@/:***@}  # status is for eyes and logs: no password
  if redis_up; then echo "redis: up, $shown"; else echo "redis: down"; ok=3; fi
  if pid=$(live_pid "$STATE/neo4j.pid" dev.cogmill.Neo4jLauncher) && bolt_up; then
    local http=""
    [[ $NEO4J_HTTP_PORT != 0 ]] && http=", http://127.0.0.1:$NEO4J_HTTP_PORT"
    echo "neo4j: up, $(neo4j_uri)$http (pid $pid, RSS $(($(awk '/VmRSS/ {print $2}' "/proc/$pid/status") / 1024)) MiB)"
  else echo "neo4j: down"; ok=3; fi
  return $ok
}

case $cmd in
  start | stop) ;;
  status) load_password; status; exit ;;
  env) load_password; print_env; exit ;;
  *) usage ;;
esac

if [[ $cmd == stop && ! -d $STATE ]]; then say "nothing to stop (no $STATE)"; exit 0; fi
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)
load_password
# One start/stop at a time per state dir (parallel CI steps or test workers); the servers
# get `9>&-` so they do not hold this lock after we exit.
exec 9>"$STATE/.lock"
flock 9
if [[ $cmd == start ]]; then
  if [[ -f $STATE/password && $(<"$STATE/password") != "$PASSWORD" ]] && redis_running; then
    die "the services in $STATE run with another password; stop them first"
  fi
  (umask 077 && printf '%s' "$PASSWORD" >"$STATE/password")
  start_redis
  start_neo4j
  print_env
else
  stop_all
fi
