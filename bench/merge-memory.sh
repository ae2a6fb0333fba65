#!/usr/bin/env bash
# Memory of `report merge` on large inputs: two copies of a storage run whose
# intervals.jsonl is grown to SIZE_MB (default 100) by repeating its measured
# intervals with new sequence numbers and times; prints the inputs' size and
# the merge's peak RSS (/usr/bin/time -v) and wall time, and their ratio.
#   bench/merge-memory.sh RUN_DIR [SIZE_MB]   (RUN_DIR: a storage run folder)
set -euo pipefail
src=${1:?usage: bench/merge-memory.sh RUN_DIR [SIZE_MB]}
size_mb=${2:-100}
bin=${MAILBENCH:-$(dirname "$0")/../target/release/mailbench}
work=$(mktemp -d /tmp/merge-memory.XXXXXX)
trap 'rm -rf "$work"' EXIT
for side in a b; do
  mkdir -p "$work/$side"
  cp "$src/result.json" "$src/test.log" "$work/$side/"
  python3 - "$src/intervals.jsonl" "$work/$side/intervals.jsonl" "$size_mb" <<'PY'
import json, sys
src, dst, size = sys.argv[1], sys.argv[2], int(sys.argv[3]) << 20
lines = [json.loads(l) for l in open(src)]
measured = [l for l in lines if l["phase"] == "measured"] or lines
head = [l for l in lines if l["phase"] == "warmup"]
out, seq, t, n = open(dst, "w"), 0, 0.0, 0
def put(rec):
    global seq, t, n
    seq += 1; t += rec["seconds"]
    rec = dict(rec, seq=seq, end_s=t)
    s = json.dumps(rec, separators=(",", ":")) + "\n"
    out.write(s); n += len(s)
for r in head: put(r)
i = 0
while n < size:
    put(measured[i % len(measured)]); i += 1
print(f"{dst}: {seq} intervals, {n / 1e6:.1f} MB")
PY
done
in_mb=$(du -cm "$work/a" "$work/b" | tail -1 | cut -f1)
# Exit 0 or 1 (the merged verdict: pass or fail) is a merge that worked.
rc=0
/usr/bin/time -v "$bin" report merge "$work/a/result.json" "$work/b/result.json" \
  --output "$work/merged" >"$work/out.txt" 2>"$work/time.txt" || rc=$?
if ((rc > 1)); then cat "$work/out.txt" "$work/time.txt"; exit "$rc"; fi
rss_kb=$(awk -F: '/Maximum resident/ {gsub(/ /,"",$2); print $2}' "$work/time.txt")
wall=$(awk -F'): ' '/Elapsed \(wall/ {print $2}' "$work/time.txt")
echo "inputs ${in_mb} MB, peak RSS $((rss_kb / 1024)) MB ($(python3 -c "print(f'{$rss_kb/1024/$in_mb:.2f}')")x the inputs), wall $wall"
ls -la "$work"/merged/*/
