#!/usr/bin/env bash
# Runs fleet-role's fuzz targets (fuzz/, cargo-fuzz with libFuzzer, on the
# nightly toolchain), one after the other, each for a number of runs or of
# seconds, whichever comes first, and prints per target its executions,
# its coverage (libFuzzer's final `cov:` and `ft:`) and whether it crashed.
#
#   scripts/fuzz.sh [--runs N] [--seconds S] [--rss-mb M] [--timeout T]
#                   [--sanitizer address|none] [TARGET...]
#
# With no TARGET, every target (fuzz/fuzz_targets/*.rs). Defaults: 60 s
# each, no cap on runs, 2048 MB, 10 s per input, AddressSanitizer. A hang
# (an input past --timeout), an allocation or a footprint past --rss-mb, a
# panic or a sanitizer report all count as a crash: libFuzzer stops the
# target there and writes the input under target/fuzz/artifacts/TARGET/.
#
# cargo-fuzz is installed on first use into .cache/cargo-fuzz (git-ignored).
# Everything it builds and keeps goes under target/fuzz/: the binaries, the
# working corpus (target/fuzz/corpus/TARGET, the checked-in seeds of
# fuzz/seeds/TARGET copied in first), the crashes and each run's log. CI
# does not run this: it replays the seeds and a seeded run of mutations on
# stable (crates/fuzzing/tests/replay.rs).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

cargo_fuzz_version=0.13.2
runs=-1
seconds=60
rss_mb=2048
timeout=10
sanitizer=address
targets=()
while (($#)); do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rss-mb) rss_mb=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --sanitizer) sanitizer=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

rustup toolchain list | grep -q '^nightly' || {
  echo "the nightly toolchain is needed: rustup toolchain install nightly" >&2
  exit 2
}

# cargo-fuzz, pinned, in the repository's own cache.
export PATH="$top/.cache/cargo-fuzz/bin:$PATH"
if ! cargo fuzz --version 2>/dev/null | grep -q "$cargo_fuzz_version"; then
  cargo install cargo-fuzz --locked --version "$cargo_fuzz_version" \
    --root "$top/.cache/cargo-fuzz" --quiet
fi

if ((${#targets[@]} == 0)); then
  for f in fuzz/fuzz_targets/*.rs; do
    t=$(basename "$f" .rs)
    targets+=("$t")
  done
fi
for t in "${targets[@]}"; do
  [[ -f fuzz/fuzz_targets/$t.rs ]] || { echo "no fuzz target $t" >&2; exit 2; }
done

# The JSON targets share one dictionary of the names the objects use.
dict_of() {
  case "$1" in
    node_marks|lease_annotations|host_decision|fleet_view) echo fuzz/dicts/kube.dict ;;
    report|etcd_view) echo fuzz/dicts/report.dict ;;
    *) [[ -f fuzz/dicts/$1.dict ]] && echo "fuzz/dicts/$1.dict" ;;
  esac
  return 0
}

out=target/fuzz
mkdir -p "$out/logs"
# Built once for all targets (one build, one lock, shared dependencies).
start=$(date +%s)
cargo +nightly fuzz build --target-dir "$out" --sanitizer "$sanitizer"
echo "built the fuzz targets in $(($(date +%s) - start)) s"

failed=()
summary=()
for t in "${targets[@]}"; do
  corpus=$out/corpus/$t
  artifacts=$out/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  cp fuzz/seeds/"$t"/* "$corpus"/
  dict=$(dict_of "$t")
  log=$out/logs/$t.log
  echo "== $t ($corpus, log $log)"
  set +e
  cargo +nightly fuzz run --target-dir "$out" --sanitizer "$sanitizer" "$t" "$corpus" -- \
    -runs="$runs" -max_total_time="$seconds" -rss_limit_mb="$rss_mb" \
    -malloc_limit_mb="$rss_mb" -timeout="$timeout" -print_final_stats=1 \
    -artifact_prefix="$artifacts/" ${dict:+-dict="$dict"} > "$log" 2>&1
  status=$?
  set -e
  # libFuzzer's last status line (`#N DONE cov: C ft: F corp: ...`, or
  # the last `pulse`/`NEW` line before a crash) and its final stats.
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  crashes=$(grep -c 'Test unit written to' "$log" || true)
  line="$t: ${execs:-?} execs, ${rate:-?} exec/s, cov ${cov:-?}, ft ${ft:-?}, peak ${rss:-?} MB, crashes $crashes"
  if ((status != 0)) || ((crashes > 0)); then
    line="$line (exit $status; see $log)"
    failed+=("$t")
    grep -E 'Test unit written to|^==[0-9]+==ERROR|panicked at|SUMMARY' "$log" | head -5 || true
  fi
  echo "$line"
  summary+=("$line")
done

echo
echo "== summary (runs $runs, $seconds s, rss $rss_mb MB, timeout $timeout s, sanitizer $sanitizer)"
printf '%s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "crashed: ${failed[*]} (inputs under $out/artifacts/)" >&2
  exit 1
fi
