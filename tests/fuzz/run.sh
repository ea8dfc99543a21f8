#!/bin/sh
# Builds the libFuzzer target NAME (tests/fuzz/NAME_fuzz.c) with clang in
# build-fuzz/ and runs it for SECONDS (default 60) from its seed corpus
# (tests/fuzz/corpus/NAME) with the dictionary tests/fuzz/NAME.dict if any.
#   tests/fuzz/run.sh r66 20
# Exit status: 0 no finding, non-zero on a crash (the reproducer is left
# in build-fuzz/ as crash-*, leak-* or timeout-*).
set -eu
cd "$(dirname "$0")/../.."
name=${1:?usage: tests/fuzz/run.sh NAME [SECONDS]}
secs=${2:-60}
[ -f "tests/fuzz/${name}_fuzz.c" ] || { echo "run.sh: no tests/fuzz/${name}_fuzz.c" >&2; exit 2; }
command -v clang >/dev/null || { echo "run.sh: clang not found" >&2; exit 77; }
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DPROXYD_FUZZ=ON \
	-DPROXYD_FUZZ_SECONDS="$secs" -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-fuzz --target "${name}_fuzz" -j"$(nproc)"
corpus=build-fuzz/tests/fuzz/corpus/$name
mkdir -p "$corpus"
cd build-fuzz
dict=
[ -f "../tests/fuzz/$name.dict" ] && dict=-dict=../tests/fuzz/$name.dict
# shellcheck disable=SC2086
exec "./tests/fuzz/${name}_fuzz" -max_total_time="$secs" -timeout=10 \
	-rss_limit_mb=2048 -print_final_stats=1 $dict "../$corpus" \
	"../tests/fuzz/corpus/$name"
