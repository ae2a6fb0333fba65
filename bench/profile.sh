#!/usr/bin/env bash
# Where a mailbench command spends its CPU: perf samples with call graphs (DWARF unwinding,
# release builds keep debug line tables), folded stacks, a flame graph, and the top frames
# by own time taken from the folded stacks.
# Usage: bench/profile.sh OUT_PREFIX MAILBENCH_ARGS...
#   e.g. bench/profile.sh /tmp/run storage run --path /mnt/db --databases 2 --duration 30s
# Writes OUT_PREFIX.perf.data, OUT_PREFIX.folded and OUT_PREFIX.svg.
# Needs perf (Debian: apt-get install linux-perf) and inferno (cargo install inferno).
# MAILBENCH=path/to/mailbench profiles another build; FREQ sets the sampling rate (499 Hz).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
out=$1; shift
command -v perf >/dev/null || { echo "perf is needed: apt-get install linux-perf" >&2; exit 2; }
for t in inferno-collapse-perf inferno-flamegraph; do
  command -v "$t" >/dev/null || { echo "$t is needed: cargo install inferno" >&2; exit 2; }
done
if [ -z "${MAILBENCH:-}" ]; then cargo build --release -q -p mailbench; fi
mb=${MAILBENCH:-./target/release/mailbench}
perf record -q -F "${FREQ:-499}" -g --call-graph dwarf,16384 -o "$out.perf.data" -- "$mb" "$@" \
  >/dev/null || true
perf script -i "$out.perf.data" 2>/dev/null | inferno-collapse-perf > "$out.folded"
inferno-flamegraph --title "mailbench $*" < "$out.folded" > "$out.svg"
echo "flame graph: $out.svg"
echo "top frames by own time (share of all samples):"
python3 - "$out.folded" <<'EOF'
import collections, sys
own = collections.Counter(); total = 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n); total += n
    own[stack.split(";")[-1]] += n
for frame, n in own.most_common(10):
    print(f"  {100 * n / max(total, 1):5.1f} %  {frame[:110]}")
EOF
