#!/usr/bin/env bash
# CPU per I/O of `storage run` against fio on the same files, in one invocation.
#  1. 2 databases, 8 threads, no warm-up: mailbench's CPU over the measured window
#     (getrusage of the whole process) / every I/O of the window, vs fio 32 KiB
#     random reads and writes 66/34, 2 jobs (one per database file) at QD 8, whose
#     CPU is the getrusage of the whole fio process / every I/O it did;
#     then fio again at mailbench's own average I/Os in flight, 32 KiB and then its own
#     I/O sizes (each class's average size weighted by its I/Os);
#  2. the same after a 5 s warm-up: window CPU, and CPU counted from the warm-up's
#     start (the whole run) over the window's I/Os;
#  3. paced (--target-iops) against unpaced on 16 databases with a 10 s warm-up:
#     pacing must cost no more CPU per I/O than the unpaced run; for reference, fio's
#     own paced/unpaced ratio on the same 16 files (16 jobs at QD 2, unpaced, then
#     --rate_iops at the paced run's transactional IOPS): a device that idles between
#     I/Os costs a wake-up and a doorbell per I/O, whoever paces.
# fio runs last on each set of files (its writes are not database pages).
# Usage: bench/engine-cpu-vs-fio.sh [SCRATCH_DIR] [SECONDS] [DB_SIZE] [PACED_DB_SIZE] [PACED_PCT]
#        (defaults: ./mailbench-bench 30 1GiB 256MiB 50: the 16 paced databases get 1/8 of
#        their size as cache, and the paced run targets 50 % of the unpaced run's IOPS)
# MAILBENCH=path/to/mailbench measures another build (e.g. an older one) with the same steps.
# SECTIONS="fio pacing" (the default) runs both parts; SECTIONS=fio or SECTIONS=pacing one of them.
# ROUNDS=N (default 1) repeats part 1's no-warm-up run and its fio run N times, which goes first
# alternating (the files are created again before each mailbench run: fio's writes are not
# database pages), and prints the median of the rounds' ratios with a distribution-free 95 %
# interval (6 rounds or more) and whether that interval lies under or over the goal of 1.2:
# fio's own figure moves by up to 1.5x between invocations on a shared VM, so one pair says little.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
dir=${1:-./mailbench-bench}; secs=${2:-30}; size=${3:-1GiB}; psize=${4:-256MiB}; ppct=${5:-50}
((secs >= 5)) || { echo "SECONDS must be at least 5 (one 5 s sample interval)" >&2; exit 2; }
command -v fio >/dev/null || { echo "fio is needed: apt-get install fio" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 2; }
if [ -z "${MAILBENCH:-}" ]; then cargo build --release -q -p mailbench; fi
mb=${MAILBENCH:-./target/release/mailbench}
rm -rf "$dir"; mkdir -p "$dir"
latest() { echo "$(ls -d "$dir"/results/storage-run-*/ | tail -1)result.json"; }
# Runs a command; prints the CPU seconds (user + system) of it and its children.
cpu_of() {
  python3 - "$@" <<'EOF'
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{r.ru_utime + r.ru_stime:.3f}")
EOF
}
# Window CPU / window I/Os (µs), whole-run CPU / window I/Os (µs), transactional IOPS, all I/Os,
# the engine's average I/Os in flight over the window (Little's law: the sum over I/O classes of
# I/Os per second x mean latency) and its average bytes per I/O.
# Builds older than `host_performance.mailbench_run_cpu_s` reported only the whole-run figure
# (as `mailbench_cpu_s`): the window column then says n/a.
figures() {
  python3 - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); h = d["host_performance"]; cls = d["total"]["classes"].values()
ios = max(1, sum(c["ops"] for c in cls))
if "mailbench_run_cpu_s" in h:
    window, run = "%.1f" % (h["mailbench_cpu_s"] * 1e6 / ios), h["mailbench_run_cpu_s"]
else:
    window, run = "n/a", h["mailbench_cpu_s"]
inflight = sum(c["ops_per_s"] * c["latency_ms"]["avg"] / 1000 for c in cls)
nbytes = sum(c["ops"] * c["avg_bytes"] for c in cls) / ios
print(window, "%.1f" % (run * 1e6 / ios), "%.1f" % d["total"]["transactional_iops"], ios,
      "%.1f" % inflight, "%.0f" % nbytes)
EOF
}
# fio's queue depth per job (two jobs) for mailbench's average I/Os in flight.
depth_of() { python3 -c "print(max(1, round(float('$1') / 2)))"; }
# fio options doing mailbench's own I/O sizes: its read share of the I/Os (--rwmixread) and each
# I/O class's average size (rounded to 4 KiB) weighted by its I/Os (--bssplit reads,writes).
shape_of() {
  python3 - "$1" <<'EOF'
import json, sys
cls = json.load(open(sys.argv[1]))["total"]["classes"]
def split(kind):
    sizes = {}
    for name, c in cls.items():
        if name.endswith(kind) and c["ops"] > 0:
            kib = max(4, 4 * round(c["avg_bytes"] / 4096))
            sizes[kib] = sizes.get(kib, 0) + c["ops"]
    n = sum(sizes.values()) or 1
    pct = {k: round(100 * v / n) for k, v in sizes.items()}
    if pct:
        top = max(pct, key=pct.get); pct[top] += 100 - sum(pct.values())
    return ":".join(f"{k}k/{p}" for k, p in sorted(pct.items()) if p > 0) or "32k/100"
reads = sum(c["ops"] for n, c in cls.items() if n.endswith("read"))
ios = max(1, sum(c["ops"] for c in cls.values()))
print(f"--rwmixread={round(100 * reads / ios)} --bssplit={split('read')},{split('write')}")
EOF
}
ratio() { python3 -c "a='$1'; print('n/a' if a=='n/a' else round(float(a)/$2, 2))"; }

sections=${SECTIONS:-fio pacing}
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ " $sections " == *" fio "* ]]; then
common=(--databases 2 --db-size "$size" --threads 8 --no-verify --sample-interval 5s \
  --output "$dir/results" -q)
init_dbs() {
  rm -rf "$dir/db"
  $mb storage init --path "$dir/db" --databases 2 --db-size "$size" --output "$dir/results" -q
}
# fio: two jobs, one per database file, each at QD ${1:-8}, 32 KiB randrw 66/34 unless the
# following arguments say otherwise (shape_of); prints µs per I/O and IOPS.
fio_pair() {
  local out="$dir/fio.json" cpu depth=${1:-8}
  local shape=(--bs=32k --rwmixread=66)
  if (($# > 1)); then shift; shape=("$@"); fi
  cpu=$(cpu_of fio "${shape[@]}" --rw=randrw --direct=1 --ioengine=io_uring --iodepth="$depth" \
    --runtime="$secs" --time_based --output-format=json --output="$out" \
    --name=db1 --filename="$dir/db/DB01.mdb" --name=db2 --filename="$dir/db/DB02.mdb")
  python3 - "$out" "$cpu" "$secs" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); cpu = float(sys.argv[2])
ios = sum(j["read"]["total_ios"] + j["write"]["total_ios"] for j in d["jobs"])
print(f"{cpu * 1e6 / max(ios, 1):.1f} {ios / float(sys.argv[3]):.0f}")
EOF
}
init_dbs
$mb storage run --path "$dir/db" --open "${common[@]}" --duration "${secs}s" --warmup 0s || true
res1=$(latest); read -r w1 r1 iops1 n1 q1 b1 <<<"$(figures "$res1")"
$mb storage run --path "$dir/db" --open "${common[@]}" --duration "${secs}s" --warmup 5s || true
read -r w2 r2 iops2 n2 _ _ <<<"$(figures "$(latest)")"
read -r fio_us fio_iops <<<"$(fio_pair)"
d1=$(depth_of "$q1")
read -r fio_d fio_diops <<<"$(fio_pair "$d1")"
shape1=$(shape_of "$res1")
# shellcheck disable=SC2086 # shape_of prints two options
read -r fio_s fio_siops <<<"$(fio_pair "$d1" $shape1)"
rm -rf "$dir/db"
echo "== CPU per I/O, 2 x $size, 8 threads, ${secs} s (µs; window = measured window, run = whole run)"
echo "no warm-up:  mailbench window $w1 run $r1 ($iops1 transactional IOPS, $n1 I/Os)   fio $fio_us ($fio_iops IOPS)   ratio window $(ratio "$w1" "$fio_us") run $(ratio "$r1" "$fio_us")"
echo "no warm-up, fio at mailbench's own depth: mailbench kept $q1 I/Os in flight on average (Little's law over the window), $b1 bytes per I/O; fio 2 jobs x QD $d1: $fio_d µs per I/O ($fio_diops IOPS)   ratio window $(ratio "$w1" "$fio_d")"
echo "no warm-up, fio doing mailbench's I/O sizes at its depth ($shape1): $fio_s µs per I/O ($fio_siops IOPS)   ratio window $(ratio "$w1" "$fio_s")"
echo "5 s warm-up: mailbench window $w2 run $r2 ($iops2 transactional IOPS, $n2 I/Os)   fio $fio_us   ratio window $(ratio "$w2" "$fio_us") run $(ratio "$r2" "$fio_us")"
rounds=${ROUNDS:-1}
if ((rounds > 1)); then
  ratios="$(ratio "$w1" "$fio_us")"; dratios="$(ratio "$w1" "$fio_d")"; sratios="$(ratio "$w1" "$fio_s")"
  own="$w1"; fios="$fio_us"
  for ((k = 2; k <= rounds; k++)); do
    if ((k % 2 == 0)); then
      init_dbs; read -r fu fk <<<"$(fio_pair)"; init_dbs; first=fio
      $mb storage run --path "$dir/db" --open "${common[@]}" --duration "${secs}s" --warmup 0s || true
    else
      init_dbs
      $mb storage run --path "$dir/db" --open "${common[@]}" --duration "${secs}s" --warmup 0s || true
      read -r fu fk <<<"$(fio_pair)"; first=mailbench
    fi
    resk=$(latest); read -r wk rk iopsk nk qk bk <<<"$(figures "$resk")"
    dk=$(depth_of "$qk"); read -r fdu fdk <<<"$(fio_pair "$dk")"
    # shellcheck disable=SC2046 # shape_of prints two options
    read -r fsu fsk <<<"$(fio_pair "$dk" $(shape_of "$resk"))"
    ratios+=" $(ratio "$wk" "$fu")"; dratios+=" $(ratio "$wk" "$fdu")"; sratios+=" $(ratio "$wk" "$fsu")"
    own+=" $wk"; fios+=" $fu"
    echo "round $k, no warm-up ($first first): mailbench window $wk ($iopsk transactional IOPS, $qk in flight, $bk bytes per I/O)   fio $fu ($fk IOPS)   ratio $(ratio "$wk" "$fu");   fio 2 x QD $dk $fdu ($fdk IOPS)   ratio $(ratio "$wk" "$fdu");   fio with its I/O sizes $fsu ($fsk IOPS)   ratio $(ratio "$wk" "$fsu")"
  done
  rm -rf "$dir/db"
  echo "no warm-up, window: median ratio of $rounds rounds: $(median_ci 2 $ratios) ($ratios )"
  echo "  against the goal of 1.2: $(against_goal 1.2 $ratios)"
  echo "the same against fio at mailbench's own depth: median $(median_ci 2 $dratios) ($dratios )"
  echo "the same against fio doing mailbench's I/O sizes at its depth: median $(median_ci 2 $sratios) ($sratios )"
  echo "  against the goal of 1.2: $(against_goal 1.2 $sratios)"
  echo "µs per I/O: mailbench $(median_ci 1 $own) ($own )"
  echo "            fio 32 KiB QD 8 $(median_ci 1 $fios) ($fios )"
fi
fi
[[ " $sections " == *" pacing "* ]] || { rm -rf "$dir"; exit 0; }

echo "== pacing: 16 x $psize, cache 1/8 of each, 32 threads, 10 s warm-up, ${secs} s"
pcache=$(python3 -c "s='$psize'.lower(); u={'kib':1<<10,'mib':1<<20,'gib':1<<30}; \
  n=[k for k in u if s.endswith(k)][0]; print(int(float(s[:-len(n)])*u[n]*16/8))")
pflags=(--databases 16 --db-size "$psize" --cache-size "$pcache" --threads 32 --no-verify \
  --sample-interval 5s --output "$dir/results" -q)
$mb storage init --path "$dir/db16" --databases 16 --db-size "$psize" --output "$dir/results" -q
$mb storage run --path "$dir/db16" --open "${pflags[@]}" --duration "${secs}s" --warmup 10s || true
read -r wu ru iopsu nu _ _ <<<"$(figures "$(latest)")"
target=$(python3 -c "print(round($iopsu * $ppct / 100))")
$mb storage run --path "$dir/db16" --open "${pflags[@]}" --duration "${secs}s" --warmup 10s \
  --target-iops "$target" || true
read -r wp rp iopsp np _ _ <<<"$(figures "$(latest)")"
# fio on the same 16 files: 16 jobs (one per file) at QD 2 (32 threads over 16
# databases), unpaced, then paced at the paced run's transactional IOPS.
fio_on16() {
  local out="$dir/fio16.json" files=() cpu
  for f in "$dir"/db16/*.mdb; do files+=(--name="$(basename "$f")" --filename="$f"); done
  cpu=$(cpu_of fio --bs=32k --rw=randrw --rwmixread=66 --direct=1 --ioengine=io_uring --iodepth=2 \
    --runtime="$secs" --time_based --output-format=json --output="$out" "$@" "${files[@]}")
  python3 - "$out" "$cpu" "$secs" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); cpu = float(sys.argv[2])
ios = sum(j["read"]["total_ios"] + j["write"]["total_ios"] for j in d["jobs"])
print(f"{cpu * 1e6 / max(ios, 1):.1f} {ios / float(sys.argv[3]):.0f}")
EOF
}
read -r fu fiopsu <<<"$(fio_on16)"
per_job=$(python3 -c "t=$iopsp/16; print(f'{max(1,round(t*0.66))},{max(1,round(t*0.34))}')")
read -r fp fiopsp <<<"$(fio_on16 --rate_iops="$per_job")"
echo "unpaced: window $wu run $ru µs per I/O ($iopsu transactional IOPS)"
echo "paced at $target: window $wp run $rp µs per I/O ($iopsp transactional IOPS)   paced/unpaced window $( [ "$wu" = n/a ] && echo n/a || ratio "$wp" "$wu") run $(ratio "$rp" "$ru")"
echo "fio on the same files: unpaced $fu µs per I/O ($fiopsu IOPS), paced $fp ($fiopsp IOPS)   fio paced/unpaced $(ratio "$fp" "$fu")"
rm -rf "$dir"
