#!/usr/bin/env bash
# Delivery latency with IMAP IDLE against polling (--no-idle) on the local
# Dovecot+Postfix: the same users, the same compressed day and the same seed
# run twice, and the end-to-end delivery latency (submission accepted -> the
# recipient's client saw the message) of both runs side by side.
#   bench/mail-idle-vs-poll.sh [USERS=20] [DAY=2m] [POLL=5s]
# Needs root and the packages in scripts/packages/mail.txt. MAILBENCH=<binary>
# skips the build. Results in ${OUT:-./mailbench-results}; the local target is
# provisioned once in a temporary folder and removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
USERS=${1:-20}
DAY=${2:-2m}
POLL=${3:-5s}
OUT=${OUT:-./mailbench-results}
if [ -z "${MAILBENCH:-}" ]; then
  cargo build --release -q -p mailbench
  MAILBENCH=./target/release/mailbench
fi
LOCAL=$(mktemp -d /tmp/mail-idle-vs-poll.XXXXXX)
trap 'rm -rf "$LOCAL"' EXIT

"$MAILBENCH" mail setup --users "$USERS" --local-dir "$LOCAL" --output "$OUT" -q

# run MODE [flags...]: one compressed day; prints the path of its result.json.
run() {
  local mode=$1
  shift
  set +e
  "$MAILBENCH" mail run --users "$USERS" --local-dir "$LOCAL" --skip-setup \
    --day-length "$DAY" --ramp-up 10s --drain 2m --seed 7 --output "$OUT" --json "$@" \
    > "$LOCAL/$mode.json"
  local rc=$?
  set -e
  echo "$mode: mailbench exit code $rc" >&2
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["result"])' "$LOCAL/$mode.json"
}
IDLE=$(run idle)
POLLING=$(run poll --no-idle --poll-interval "$POLL")

python3 - "$IDLE" "$POLLING" "$POLL" <<'PY'
import json, sys
rows = []
for name, path in (("IDLE", sys.argv[1]), ("polling " + sys.argv[3], sys.argv[2])):
    r = json.load(open(path))
    d = r["delivery_latency"]
    s = d["summary"]
    f = r["mail_flow"]
    polls = r["operations"].get("new_mail", {}).get("count", 0)
    rows.append((name, s, d, f, polls, r))
r0 = rows[0][5]
print(f"users {r0['users']}, day {r0['window']['day_s']:.0f} s (compressed), poll interval {sys.argv[3]}")
print(f"{'mode':<14} {'delivered':>9} {'expected':>8} {'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} {'max ms':>9} {'within 60 s':>11} {'new-mail ops':>12}  verdict")
ok = True
for name, s, d, f, polls, r in rows:
    ok &= f["delivered"] == f["expected_deliveries"]
    print(f"{name:<14} {f['delivered']:>9} {f['expected_deliveries']:>8} {s['p50_ms']:>9.0f} {s['p95_ms']:>9.0f} "
          f"{s['p99_ms']:>9.0f} {s['max_ms']:>9.0f} {d['within_pct']:>10.2f}% {polls:>12}  {r['verdict']['status']}")
print("every delivery seen in both runs:", "YES" if ok else "NO")
sys.exit(0 if ok else 1)
PY
