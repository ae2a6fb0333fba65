#!/usr/bin/env bash
# Speed of mailbench's integrity tests against fio on the same file, in one invocation:
#  1. storage verify MB/s  vs fio sequential 1 MiB O_DIRECT reads at QD 8 (verify's read size and depth);
#  2. storage backup MB/s  vs fio sequential 256 KiB O_DIRECT reads at QD 4 (backup's) and 1 MiB at QD 8;
#  3. storage recover: seconds per replayed log file vs fio reading as many random pages as the
#     replay read, in as many requests (the replay reads a few neighbouring pages together: fio's
#     requests are one or two pages, in the same share), at the same queue depth (16): replay
#     should be bound by those reads, not by the CPU; beside it fio reading one page per replay
#     request (fewer pages than the replay: the yardstick of earlier rounds) and the same pages
#     one a request;
#     plus the replay shape (database page reads per log file, average log read size); and the
#     replay's whole I/O mix for fio (page reads, log-sized reads, page writes at once) beside it.
# Usage: bench/integrity-vs-fio.sh [SCRATCH_DIR] [DB_SIZE] [LOG_FILES] [PROFILE]
#        (defaults: ./mailbench-bench 2GiB 50 exchange2013)
# MAILBENCH=path/to/mailbench measures another build (e.g. an older one) with the same steps.
# Fair measurement on a shared machine (fio's own time moves by 2x between minutes):
#   ROUNDS=N         repeats step 3 N times (each round: a new crash and replay, then fio right
#                    after it) and prints the median of the rounds' ratios (default 1);
#   MAILBENCH_BASE=path  also replays with that build in every round, alternating with the first
#                    (which goes first alternates too), each against its own fio run;
#   FIO_RUNS=N       runs fio's same-pages job N times after each replay and takes the median
#                    (default 3);
#   ONLY=recover     skips steps 1 and 2.
# What step 3 compares: the replay's `seconds` run from its setup (I/O ring, frame memory started)
# to the database marked clean, so they include, beside the page reads, the log reads, the final
# flush's tail after the last page read, two fdatasyncs and the checkpoint file (its
# `checkpoint_seconds`, printed, run from the end of decoding the log to the clean mark); fio's
# figure is its job's runtime (one job, numjobs=1, io_uring, O_DIRECT, iodepth 16, fio's default
# buffers), which leaves out fio's own setup. The ratio is thus a bound the replay meets only when
# its other I/O hides behind its page reads.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
dir=${1:-./mailbench-bench}; size=${2:-2GiB}; logs=${3:-50}; profile=${4:-exchange2013}
command -v fio >/dev/null || { echo "fio is needed: apt-get install fio" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 2; }
if [ -z "${MAILBENCH:-}" ]; then cargo build --release -q -p mailbench; fi
mb=${MAILBENCH:-./target/release/mailbench}
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$dir"; mkdir -p "$dir"
flags=(--path "$dir/db" --databases 1 --db-size "$size" --profile "$profile" --output "$dir/results" -q)
latest() { echo "$(ls -d "$dir"/results/"$1"-*/ | tail -1)result.json"; }
ratio() { python3 -c "print(round($1/$2,3))"; }

$mb storage init "${flags[@]}"
db="$dir/db/DB01.mdb"
bytes=$(stat -c %s "$db")
echo "database: $db ($((bytes >> 20)) MiB, profile $profile)"

if [ "${ONLY:-}" != recover ]; then
echo "== verify vs fio sequential 1 MiB reads, QD 8"
$mb storage verify "${flags[@]}" || true
v_mbps=$(json 'round(d["verify"]["mb_per_s"],1)' < "$(latest storage-verify)")
fio_1m=$(fio --name=seq1m --filename="$db" --bs=1M --rw=read --direct=1 --ioengine=io_uring --iodepth=8 \
  --readonly --output-format=json | json 'round(d["jobs"][0]["read"]["bw_bytes"]/1e6,1)')
echo "mailbench verify: $v_mbps MB/s   fio: $fio_1m MB/s   ratio: $(ratio "$v_mbps" "$fio_1m")"

echo "== backup vs fio sequential 256 KiB reads, QD 4"
b_mbps=$($mb storage backup "${flags[@]}" --json | json 'round(d["total_mb_per_s"],1)')
fio_256=$(fio --name=seq256k --filename="$db" --bs=256k --rw=read --direct=1 --ioengine=io_uring --iodepth=4 \
  --readonly --output-format=json | json 'round(d["jobs"][0]["read"]["bw_bytes"]/1e6,1)')
echo "mailbench backup: $b_mbps MB/s   fio 256K QD4: $fio_256 MB/s (ratio $(ratio "$b_mbps" "$fio_256"))   fio 1M QD8: $fio_1m MB/s (ratio $(ratio "$b_mbps" "$fio_1m"))"

fi

# fio's time for the job in "$@", run FIO_RUNS times (default 3) one after the other: prints the
# median and the times. A single fio run on a shared disk moved 0.34-1.76 s within a minute for
# the same job; the median of runs right after the replay is a steadier yardstick.
fio_median() {
  local t=() k
  for ((k = 0; k < ${FIO_RUNS:-3}; k++)); do
    t+=("$(fio "$@" --output-format=json | json 'round(d["jobs"][0]["read"]["runtime"]/1000,4)')")
  done
  echo "$(median 4 "${t[@]}") (${t[*]})"
}

# One crash and replay with build $1 (named $2), then fio's yardsticks right after it.
declare -A ratios_pages ratios_req ratios_mix
recover_round() {
  "$1" storage recover "${flags[@]}" --log-files "$logs" || true
  r=$(latest storage-recover)
  read -r files secs reads rbytes lavg wps ckpt <<<"$(json '"%d %.4f %d %.0f %.0f %.1f %.4f" % (d["instances"][0]["log_files_replayed"], d["instances"][0]["seconds"], d["instances"][0]["db_read"]["ops"], d["instances"][0]["db_read"]["avg_bytes"], d["instances"][0]["log_read"]["avg_bytes"], d["instances"][0]["db_write"]["ops"], d["instances"][0]["checkpoint_seconds"])' < "$r")"
  ps=$(json 'd["spec"]["profile"]["page_size"]' < "$r" | tr -d '"' )
  ps_bytes=$(python3 -c "s='$ps'.lower().replace('kib','*1024').replace('mib','*1048576').replace('b',''); print(eval(s))")
  cpu=$(json '"%.3f" % d["instances"][0]["cpu_seconds"]' < "$r")
  echo "$2 replay: $files log files in $secs s = $(python3 -c "print(round($secs/max($files,1),4))") s/file; $reads page reads ($rbytes B avg), $wps writes; CPU $cpu s; from the log decoded to the clean mark $ckpt s"
  # The goal's yardstick: fio reading as many pages as the replay (its requests average more
  # than a page: neighbours read together) in as many requests, at the same depth: one- and
  # two-page random reads in the share that gives the replay's page count.
  npages=$(python3 -c "print(round($reads*$rbytes/$ps_bytes))")
  two=$(python3 -c "print(round(max(0.0, min(100.0, 100.0*($npages-$reads)/max($reads,1))), 3))")
  read -r fio_same fio_runs <<<"$(fio_median --name=samepages --filename="$db" \
    --bssplit="$ps_bytes/$(python3 -c "print(round(100-$two,3))"):$((2 * ps_bytes))/$two" --blockalign="$ps_bytes" \
    --rw=randread --direct=1 --ioengine=io_uring --iodepth=16 --number_ios="$reads" --readonly)"
  echo "fio: as many pages ($npages) in as many requests ($reads, $two % of them two pages), random, QD 16, in $fio_same s (the median of $fio_runs s) = $(python3 -c "print(round($fio_same/max($files,1),4))") s/file   ratio replay/fio: $(ratio "$secs" "$fio_same")"
  ratios_pages[$2]+=" $(ratio "$secs" "$fio_same")"
  fio_secs=$(fio --name=randpages --filename="$db" --bs="$ps_bytes" --rw=randread --direct=1 --ioengine=io_uring \
    --iodepth=16 --number_ios="$reads" --readonly --output-format=json \
    | json 'round(d["jobs"][0]["read"]["runtime"]/1000,4)')
  echo "fio: one page per replay request ($reads, fewer pages than the replay) at QD 16 in $fio_secs s   ratio replay/fio: $(ratio "$secs" "$fio_secs")"
  ratios_req[$2]+=" $(ratio "$secs" "$fio_secs")"
  fio_pg=$(fio --name=randpages --filename="$db" --bs="$ps_bytes" --rw=randread --direct=1 --ioengine=io_uring \
    --iodepth=16 --number_ios="$npages" --readonly --output-format=json \
    | json 'round(d["jobs"][0]["read"]["runtime"]/1000,4)')
  echo "fio: as many pages ($npages) one a request at QD 16 in $fio_pg s   ratio replay/fio: $(ratio "$secs" "$fio_pg")"
  echo "replay shape: $(python3 -c "print(round($reads/max($files,1),1))") database page reads per log file, average log read $lavg bytes"
  # The same work as the replay, for fio: besides its page reads, the replay reads the log (each log
  # file's 4 KiB header alone, then its data in reads of at most 256 KiB, 4 ahead) and writes the pages the crash left dirty (a few writes in flight): fio does the
  # same three at once (the log-sized reads from the database file, the page writes into a file of
  # their own), and its time is that of the longest of the three.
  read -r lreads lbytes <<<"$(json '"%d %d" % (d["instances"][0]["log_read"]["ops"], d["instances"][0]["log_read"]["ops"] * d["instances"][0]["log_read"]["avg_bytes"])' < "$r")"
  # The log reads' shape for fio: one 4 KiB header read per log file opened (the files replayed and
  # the one after the last), the rest 256 KiB data reads.
  hdr_pct=$(python3 -c "print(min(99, max(1, round(100 * ($files + 1) / max($lreads, 1)))))")
  wcount=${wps%.*}
  mix_jobs=(--name=pages --filename="$db" --bs="$ps_bytes" --rw=randread --iodepth=16 --number_ios="$reads"
    --name=log --filename="$db" --bssplit="4k/$hdr_pct:256k/$((100 - hdr_pct))" --rw=read --iodepth=4
    --size="$((lbytes > 0 ? lbytes : 262144))")
  if [ "$wcount" -gt 0 ]; then
    mix_jobs+=(--name=writes --filename="$dir/fio-writes.dat" --size="$((wcount * ps_bytes))" --bs="$ps_bytes"
      --rw=randwrite --iodepth=4 --number_ios="$wcount")
  fi
  fio --direct=1 --ioengine=io_uring "${mix_jobs[@]}" --output-format=json --output="$dir/fio-mix.json" >/dev/null
  fio_mix=$(json 'round(max(j["read"]["runtime"] + j["write"]["runtime"] for j in d["jobs"])/1000,4)' < "$dir/fio-mix.json")
  echo "fio, the same mix at once ($reads page reads QD 16, $lreads log-sized reads QD 4, $wcount page writes QD 4): $fio_mix s   ratio replay/fio mix: $(ratio "$secs" "$fio_mix")"
  ratios_mix[$2]+=" $(ratio "$secs" "$fio_mix")"
}

rounds=${ROUNDS:-1}
echo "== recover ($logs log files) vs fio random reads of as many pages in as many requests, QD 16 ($rounds round(s))"
for ((k = 1; k <= rounds; k++)); do
  echo "-- round $k"
  if [ -n "${MAILBENCH_BASE:-}" ] && ((k % 2 == 0)); then
    recover_round "$MAILBENCH_BASE" base; recover_round "$mb" mailbench
  else
    recover_round "$mb" mailbench
    if [ -n "${MAILBENCH_BASE:-}" ]; then recover_round "$MAILBENCH_BASE" base; fi
  fi
done
for b in mailbench ${MAILBENCH_BASE:+base}; do
  echo "$b replay/fio same pages, median of $rounds: $(median_ci 3 ${ratios_pages[$b]}) (${ratios_pages[$b]# })   replay/fio one page per request: $(median 3 ${ratios_req[$b]}) (${ratios_req[$b]# })   replay/fio mix: $(median 3 ${ratios_mix[$b]}) (${ratios_mix[$b]# })"
done
rm -rf "$dir"
