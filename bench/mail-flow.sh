#!/usr/bin/env bash
# Must-show figure: the mmb3 profile's measured mail flow on a run of at least 500
# users against the local Dovecot+Postfix, compared with the benchmark's expected
# 85 submitted / 210 delivered per user per day and 2.47 recipients per message.
#   bench/mail-flow.sh [USERS=500] [DAY=15m]
# Needs root and the packages in scripts/packages/mail.txt. Results in
# ${OUT:-./mailbench-results}; the local target is temporary.
set -euo pipefail
cd "$(dirname "$0")/.."
USERS=${1:-500}
DAY=${2:-15m}
OUT=${OUT:-./mailbench-results}
cargo build --release -q -p mailbench
set +e
./target/release/mailbench mail run --users "$USERS" --day-length "$DAY" --ramp-up 30s \
  --profile mmb3 --output "$OUT" --json > /tmp/mail-flow.$$.json
rc=$?
set -e
res=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["result"])' /tmp/mail-flow.$$.json)
rm -f /tmp/mail-flow.$$.json
python3 - "$res" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = r["mail_flow"]
rows = [("submitted per user per day", f["per_user_per_day"]["submitted"], 85.0),
        ("delivered per user per day", f["per_user_per_day"]["delivered"], 210.0),
        ("recipients per message", f["recipients_per_message"], 2.47)]
ok = True
print(f"users {r['users']}, day {r['window']['day_s']:.0f} s, verdict {r['verdict']['status']}")
for name, got, want in rows:
    dev = 100.0 * (got - want) / want
    ok &= abs(dev) <= 5.0
    print(f"  {name:<28} {got:8.2f}  expected {want:7.2f}  ({dev:+.2f} %)")
print("  weighted p95 score %.0f ms; delivery p95 %.0f ms" % (r["score"]["weighted_p95_ms"], r["delivery_latency"]["summary"]["p95_ms"]))
for k, t in r["tasks"].items():
    print(f"    {k:<22} n={t['count']:<7} p95={t['p95_ms']:.1f} ms")
print("mail flow within 5 %:", "YES" if ok else "NO")
sys.exit(0 if ok else 1)
PY
echo "mailbench exit code: $rc; result: $res"
