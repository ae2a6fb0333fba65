#!/usr/bin/env bash
# Speed of mailbench's storage I/O layer against fio on the same file, in one invocation:
#  1. database creation MB/s (storage init) vs fio sequential 1 MiB O_DIRECT writes of the same size;
#  2. 32 KiB random O_DIRECT reads at queue depth 16 and 64 through mailbench's I/O layer vs fio
#     (io_uring), each pair run back to back on the same file.
# Usage: bench/storage-vs-fio.sh [SCRATCH_DIR] [SIZE] [RUNTIME]   (defaults: ./mailbench-bench 4GiB 30s)
# MAILBENCH=path/to/mailbench measures another build (e.g. an older one) with the same steps.
# Fair measurement on a shared disk (fio's own figure moves by 2x within minutes):
#   ROUNDS=N        runs each read pair N times, which tool goes first alternating, and prints the
#                   median of the pairs' ratios (default 1);
#   ONLY=reads      skips the creation comparison (the file is still created, by storage init).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
dir=${1:-./mailbench-bench}; size=${2:-4GiB}; runtime=${3:-30s}
command -v fio >/dev/null || { echo "fio is needed: apt-get install fio" >&2; exit 2; }
if [ -z "${MAILBENCH:-}" ]; then cargo build --release -q -p mailbench; fi
mb=${MAILBENCH:-./target/release/mailbench}
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$dir"; mkdir -p "$dir"
secs=${runtime%s}

echo "== database creation ($size) vs fio sequential 1 MiB writes"
$mb storage init --path "$dir/db" --databases 1 --db-size "$size" --output "$dir/results" -q
if [ "${ONLY:-}" != reads ]; then
  init_mbps=$(json 'round(d["init"]["mb_per_s"],1)' < "$(ls -d "$dir"/results/storage-init-*/ | tail -1)/result.json")
  bytes=$(stat -c %s "$dir/db/DB01.mdb")
  fio_w=$(fio --name=seqwrite --filename="$dir/fio-seq.dat" --size="$bytes" --bs=1M --rw=write --direct=1 \
    --ioengine=io_uring --iodepth=8 --output-format=json | json 'round(d["jobs"][0]["write"]["bw_bytes"]/1e6,1)')
  rm -f "$dir/fio-seq.dat"
  echo "mailbench init: $init_mbps MB/s   fio seq write: $fio_w MB/s   ratio: $(python3 -c "print(round($init_mbps/$fio_w,3))")"
fi

rounds=${ROUNDS:-1}
mb_run() {
  mb_json=$($mb storage io-bench --file "$dir/db/DB01.mdb" --bs 32KiB --qd "$1" --runtime "$runtime")
  mb_iops=$(echo "$mb_json" | json 'round(d["iops"],0)')
  mb_p99=$(echo "$mb_json" | json 'd["lat_p99_us"]')
}
fio_run() {
  fio_json=$(fio --name=randread --filename="$dir/db/DB01.mdb" --bs=32k --rw=randread --direct=1 \
    --ioengine=io_uring --iodepth="$1" --runtime="$secs" --time_based --readonly --output-format=json)
  fio_iops=$(echo "$fio_json" | json 'round(d["jobs"][0]["read"]["iops"],0)')
  fio_p99=$(echo "$fio_json" | json 'round(d["jobs"][0]["read"]["clat_ns"]["percentile"]["99.000000"]/1000)')
}
for qd in 16 64; do
  echo "== 32 KiB random reads, O_DIRECT, QD $qd, $runtime, same file ($rounds pair(s))"
  ratios=""
  for ((k = 1; k <= rounds; k++)); do
    if ((k % 2 == 0)); then fio_run "$qd"; mb_run "$qd"; first=fio; else mb_run "$qd"; fio_run "$qd"; first=mailbench; fi
    r=$(python3 -c "print(round($mb_iops/$fio_iops,3))"); ratios+=" $r"
    echo "mailbench ($(echo "$mb_json" | json 'd["engine"]')): $mb_iops IOPS p99 ${mb_p99} us   fio: $fio_iops IOPS p99 ${fio_p99} us   ratio: $r   ($first first, load average $(cut -d' ' -f1 /proc/loadavg))"
  done
  if ((rounds > 1)); then
    echo "QD $qd: median ratio of $rounds pairs: $(median_ci 3 $ratios) ($ratios )"
  fi
done
rm -rf "$dir"
