#!/usr/bin/env bash
# How the cost of `storage run` grows with the work, in one invocation: 1, 4 and 16 databases
# by 2, 8 and 32 threads. At each point: transactional IOPS, mailbench's CPU per I/O over the
# measured window (getrusage of the whole process / every I/O of the window), and fio's CPU per
# I/O doing 32 KiB random reads and writes at the run's read share on the same files, one job
# per database at queue depth 2 x sessions per database (8 threads on 2 databases: QD 8 each,
# as bench/engine-cpu-vs-fio.sh), so the ratio compares like with like at every point.
# Each database is DB_SIZE with 1/8 of that as cache, so the cache hit ratio is the same everywhere.
# fio's writes are not database pages: the databases are created again after each fio run.
# Usage: bench/engine-scaling.sh [SCRATCH_DIR] [SECONDS] [WARMUP_SECONDS] [DB_SIZE]
#        (defaults: ./mailbench-bench 20 5 256MiB)
# MAILBENCH=path/to/mailbench measures another build with the same steps.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-./mailbench-bench}; secs=${2:-20}; warm=${3:-5}; size=${4:-256MiB}
command -v fio >/dev/null || { echo "fio is needed: apt-get install fio" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 2; }
if [ -z "${MAILBENCH:-}" ]; then cargo build --release -q -p mailbench; fi
mb=${MAILBENCH:-./target/release/mailbench}
rm -rf "$dir"; mkdir -p "$dir"
bytes=$(python3 -c "s='$size'.lower(); u={'kib':1<<10,'mib':1<<20,'gib':1<<30}; \
  n=[k for k in u if s.endswith(k)][0]; print(int(float(s[:-len(n)])*u[n]))")
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $size databases, cache 1/8 of each, ${warm} s warm-up, ${secs} s measured"
printf '%-10s %-8s %12s %14s %14s %8s %10s\n' databases threads "trans. IOPS" "µs/IO mailbench" "µs/IO fio" ratio "fio IOPS"
for n in 1 4 16; do
  for t in 2 8 32; do
    db="$dir/db$n"
    if [ ! -f "$db/DB$(printf %02d "$n").mdb" ]; then
      rm -rf "$db"
      "$mb" storage init --path "$db" --databases "$n" --db-size "$size" --output "$dir/results" -q
    fi
    "$mb" storage run --path "$db" --open --databases "$n" --db-size "$size" \
      --cache-size $((bytes * n / 8)) --threads "$t" --duration "${secs}s" --warmup "${warm}s" \
      --no-verify --sample-interval 5s --output "$dir/results" -q || true
    r="$(ls -d "$dir"/results/storage-run-*/ | tail -1)result.json"
    read -r iops us rd <<<"$(python3 - "$r" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); h = d["host_performance"]; t = d["total"]
ios = max(1, sum(c["ops"] for c in t["classes"].values()))
print("%.0f %.1f %.0f" % (t["transactional_iops"], h["mailbench_cpu_s"] * 1e6 / ios,
                          t["db_read_share_pct"]))
EOF
)"
    qd=$(( (2 * ((t + n - 1) / n)) ))
    files=()
    for i in $(seq 1 "$n"); do files+=(--name="db$i" --filename="$db/DB$(printf %02d "$i").mdb"); done
    read -r fus fiops <<<"$(python3 - "$dir" "$secs" "$rd" "$qd" "${files[@]}" <<'EOF'
import json, resource, subprocess, sys
out, secs, rd, qd, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
subprocess.run(["fio", "--bs=32k", "--rw=randrw", f"--rwmixread={rd}", "--direct=1",
                "--ioengine=io_uring", f"--iodepth={qd}", f"--runtime={secs}", "--time_based",
                "--output-format=json", f"--output={out}/fio.json"] + files, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
d = json.load(open(f"{out}/fio.json"))
ios = sum(j["read"]["total_ios"] + j["write"]["total_ios"] for j in d["jobs"])
print("%.1f %.0f" % ((r.ru_utime + r.ru_stime) * 1e6 / max(ios, 1), ios / float(secs)))
EOF
)"
    rm -rf "$db"   # fio wrote over database pages
    ratio=$(python3 -c "print(round($us/$fus, 2))")
    printf '%-10s %-8s %12s %14s %14s %8s %10s\n' "$n" "$t" "$iops" "$us" "$fus" "$ratio" "$fiops"
  done
done
rm -rf "$dir"
