#!/usr/bin/env bash
# The log's I/O shape at the published reports' own settings: log writes per database transfer, log
# write size and the database read share, each report's run scaled to this machine (docs/storage.md,
# "Log behaviour at the published rates"). Each report keeps its per-database rate, its sessions per
# database and its cache-to-database proportion; the number of databases and the sizes are scaled
# down together.
# Usage: bench/log-shape.sh DIR [DURATION] [WHICH...]
#   DIR      an empty folder on the file system to measure (tmpfs or a loop-mounted file system: the
#            databases of one report take up to 9 GiB)
#   DURATION the measured window of each run (default 120s)
#   WHICH    any of 2007-performance 2007-stress 2013-server1 (default: all three)
# MAILBENCH=path/to/mailbench measures another build; PROFILES=folder takes each run's profile from
# folder/PROFILE.toml (e.g. a shipped profile with one value changed) instead of the shipped one.
# Prints one row per run and keeps each run's folder (result.json, test.log) under DIR/runs.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
[ $# -ge 1 ] || { sed -n '2,14p' "$0" >&2; exit 2; }
dir=$1; dur=${2:-120s}; shift $(( $# >= 2 ? 2 : 1 ))
which=("$@"); [ ${#which[@]} -gt 0 ] || which=(2007-performance 2007-stress 2013-server1)
if [ -z "${MAILBENCH:-}" ]; then cargo build --release -q -p mailbench; fi
mb=${MAILBENCH:-./target/release/mailbench}
mkdir -p "$dir/runs"

# report: profile type databases threads target-IOPS db-size cache (over all databases) published...
# Report A (Exchange 2007, 8 storage groups x 7 sessions, 256 MiB cache each, databases of
# 1,634,515,156,992 / 8 bytes: cache 1/760 of a database) at 2 storage groups: 14 sessions, a
# quarter of the rate (1,776.9 / 4 and 1,736.1 / 4), 4 MiB of cache and 3 GiB per database (1/768).
# Report B server 1 (Exchange 2013, 14 databases, 16 sessions, 256 MiB cache each, databases of
# 16,174,214,414,336 / 14 bytes: 1/4,513) at 7 databases: 8 sessions, half the rate (633.7 / 2),
# 64 pages of cache (2 MiB) and 1 GiB per database (1/512: the smallest cache the engine takes,
# the proportion not reached).
row() {
  case $1 in
    2007-performance) echo "exchange2007 performance 2 14 444.2 3GiB 8MiB 31.0 4501 53.0" ;;
    2007-stress) echo "exchange2007 stress 2 14 434.0 3GiB 8MiB 30.5 4397 54.4" ;;
    2013-server1) echo "exchange2013 performance 7 8 316.9 1GiB 14MiB 7.36 20698 68.7" ;;
    *) echo "unknown run $1" >&2; exit 2 ;;
  esac
}
printf '| run | settings | published: log writes / transfer, log write size, reads | ours | log bytes written per transfer: published / ours |\n|---|---|---|---|---|\n'
for w in "${which[@]}"; do
  read -r profile type dbs threads iops size cache plw pls prd <<<"$(row "$w")"
  data="$dir/$profile-$dbs"; out="$dir/runs/$w"
  rm -rf "$out" && mkdir -p "$out"
  # The same databases serve the runs of one profile (created by the first); another profile's are
  # removed first (memory is short when DIR is a tmpfs).
  open=()
  if [ -e "$data/.mailbench-owned" ]; then open=(--open); else rm -rf "$dir"/exchange*; fi
  prof=$profile
  if [ -n "${PROFILES:-}" ]; then prof=$PROFILES/$profile.toml; fi
  "$mb" storage run --profile "$prof" --type "$type" --path "$data" --databases "$dbs" \
    --threads "$threads" --target-iops "$iops" --db-size "$size" --cache-size "$cache" \
    --duration "$dur" --warmup 10m --no-verify --output "$out" "${open[@]}" >/dev/null 2>"$out.err" || true
  res=$(ls -d "$out"/*/result.json 2>/dev/null | tail -1)
  [ -n "$res" ] || { echo "$w: no result (see $out.err)" >&2; continue; }
  ours=$(json "(lambda c, t: '%.2f %%, %.0f B, %.1f %% (%.1f transactional IOPS) | %.0f' % (100*c['log_write']['ops']/t, c['log_write']['avg_bytes'], 100*c['db_read']['ops']/t, d['total']['transactional_iops'], c['log_write']['ops']*c['log_write']['avg_bytes']/t))(d['total']['classes'], d['total']['classes']['db_read']['ops']+d['total']['classes']['db_write']['ops'])" <"$res")
  pub=$(python3 -c "print(round($plw * $pls / 100))")
  echo "| $w | $profile, $type, $dbs databases x $size, $threads threads, --target-iops $iops, --cache-size $cache | $plw %, $pls B, $prd % | ${ours% |*} | $pub / ${ours##*| } |"
done
