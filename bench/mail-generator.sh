#!/usr/bin/env bash
# Generator efficiency (a benchmark, not a timed test): CPU seconds of the mailbench
# process per 1000 commands and per 1000 simulated user-hours, and the largest user
# count this machine sustains while the generator's own scheduling delay stays
# under 10 ms p99. The command rate is held constant (RATE tasks/s over all users:
# the day is stretched as users grow) so that rising users measure the generator's
# cost per simulated user (connections, IDLE sessions, timers), not the server's.
#   bench/mail-generator.sh [USER COUNTS...]   (default: 100 250 500 1000 2000 4000)
# Env: RATE (default 60 tasks/s), OUT, TARGET (local, the default: Dovecot + Postfix;
# sink: mailbench's own endpoint, so the server takes no CPU from the generator).
# REALTIME_S=N: instead of a constant rate, each user count runs at the real-time
# mmb3 rate (the profile's 8-hour day) and is interrupted (SIGINT) N seconds after
# its ramp-up: a shortened run whose result holds what was simulated.
# Needs root + scripts/packages/mail.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-60}
TARGET=${TARGET:-local}
OUT=${OUT:-./mailbench-results/generator}
COUNTS=("$@")
[ ${#COUNTS[@]} -eq 0 ] && COUNTS=(100 250 500 1000 2000 4000)
mkdir -p "$OUT"
cargo build --release -q -p mailbench
BIN="${CARGO_TARGET_DIR:-./target}/release/mailbench"
# mmb3's tasks with a small initial mailbox, so setup stays quick at thousands of users.
PROFILE="$OUT/mmb3-small.toml"
sed -e 's/^inbox = 100/inbox = 10/' -e 's/^folders = 10/folders = 2/' \
    -e 's/^messages_per_folder = 10/messages_per_folder = 2/' -e 's/^calendar = 25/calendar = 5/' \
    -e 's/^name = "mmb3"/name = "mmb3-small"/' profiles/mail/mmb3.toml > "$PROFILE"
TASKS_PER_DAY=307
ulimit -n 65536 2>/dev/null || true
# The host's 1-minute load average at each run's end is printed too: other work on the host
# raises the scheduling delay (run the script under `nice -n -15` on a shared machine).
printf "%-7s %-8s %-10s %-14s %-16s %-14s %-12s %-12s %-9s %-10s %-12s %s\n" users day_s cpu_s "cpu/1000cmd" "cpu/1000user-h" "sched_p99_ms" "rss_KiB/user" "rss_end/start" tasks/s score_ms verdict load
best=0
for n in "${COUNTS[@]}"; do
  if [ -n "${REALTIME_S:-}" ]; then
    day=28800 stop=(timeout -s INT "$((30 + REALTIME_S))")
  else
    day=$(( n * TASKS_PER_DAY / RATE )) stop=()
  fi
  set +e
  "${stop[@]}" "$BIN" mail run --target "$TARGET" --users "$n" --profile "$PROFILE" --day-length "${day}s" \
    --ramp-up 30s --concurrency 32 --output "$OUT" --json > "$OUT/last.json" 2>"$OUT/last.err"
  set -e
  res=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["result"])' "$OUT/last.json" 2>/dev/null || true)
  if [ -z "$res" ]; then echo "$n users: run failed: $(tail -3 "$OUT/last.err")"; break; fi
  line=$(python3 - "$res" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); g = r["generator"]
p99 = g["sched_delay"]["p99_ms"]
per_user = g.get("rss_max_bytes_per_user", 0) / 1024
start, end = g.get("rss_day_start_bytes", 0), g.get("rss_day_end_bytes", 0)
growth = end / start if start else 0
# Real seconds of the day driven: user-hours over users, at the day's compression (mmb3: 8 h).
run_s = g["simulated_user_hours"] * 3600 * r["window"]["day_s"] / (r["users"] * 28800)
tasks_s = g["executed_tasks"] / max(run_s, 1e-9)
print(f'{r["users"]:<7} {r["window"]["day_s"]:<8.0f} {g["cpu_s"]:<10.1f} {g["cpu_s_per_1000_commands"]:<14.3f} '
      f'{g["cpu_s_per_1000_user_hours"]:<16.2f} {p99:<14.2f} {per_user:<12.1f} {growth:<12.2f} {tasks_s:<9.1f} '
      f'{r["response_time"]["weighted_p95_ms"]:<10.0f} {r["verdict"]["status"]:<12} {1 if p99 < 10 else 0}')
PY
)
  echo "${line% *} $(cut -d' ' -f1 /proc/loadavg)"
  [ "${line##* }" = "1" ] && best=$n || break
done
echo "largest user count with generator scheduling delay p99 < 10 ms: $best (at $RATE tasks/s)"
