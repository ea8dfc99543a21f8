#!/usr/bin/env bash
# scripts/ctest-run on a small ctest project of its own: a test that passes
# slowly, one that skips (exit 77, as tests/integration/lib.sh's skip) and
# one that fails. With PROXYD_SKIPS=fail (CI) the skip fails the run and is
# named with its SKIP line; with allow it is listed and passes; a failure
# fails either way; the slowest test is listed first. Then: scripts/test
# runs its suite through it and .ci/run does not allow skips.
#   bash tests/ci/ctest_run.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: ctest_run.sh SOURCE_DIR}
run=$src/scripts/ctest-run
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL [ci.ctest_run]: $*"; exit 1; }

[[ -x $run ]] || fail "$run missing or not executable"
cat > "$T/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(ctest_run_probe NONE)
enable_testing()
add_test(NAME slowpass COMMAND sh -c "sleep 0.5")
add_test(NAME fastpass COMMAND true)
add_test(NAME skipper COMMAND sh -c "echo 'SKIP [skipper]: no widget here'; exit 77")
set_tests_properties(skipper PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME failer COMMAND false)
CM
cmake -S "$T" -B "$T/b" >/dev/null || fail "cmake of the probe project"
cd "$T/b"

# 1. as CI: the skip fails the run, named with its reason
rc=0
PROXYD_SKIPS=fail "$run" -E failer > out1 2>&1 || rc=$?
((rc != 0)) || { cat out1; fail "a skipped test passed with PROXYD_SKIPS=fail"; }
grep -q '^  SKIPPED  skipper: SKIP \[skipper\]: no widget here$' out1 ||
	{ cat out1; fail "the skipped test and its reason are not named"; }
grep -q '^FAIL: a test skipped' out1 || { cat out1; fail "no FAIL line for the skip"; }
# the slowest test comes first, with its duration
first=$(grep -A1 '^Slowest tests' out1 | tail -n 1)
[[ $first =~ ^\ +0\.[5-9]\ s\ \ slowpass$|^\ +[1-9][0-9]*\.[0-9]\ s\ \ slowpass$ ]] ||
	{ cat out1; fail "slowpass is not first among the slowest: '$first'"; }

# 2. skips allowed (not root): listed, and the run passes
PROXYD_SKIPS=allow "$run" -E failer > out2 2>&1 || { cat out2; fail "PROXYD_SKIPS=allow failed on a skip"; }
grep -q '^  SKIPPED  skipper:' out2 || { cat out2; fail "an allowed skip is not listed"; }

# 3. without skips it passes; a failure fails whatever PROXYD_SKIPS says
PROXYD_SKIPS=fail "$run" -R pass > out3 2>&1 || { cat out3; fail "passing tests failed"; }
grep -q SKIPPED out3 && { cat out3; fail "a skip listed where none happened"; }
rc=0
PROXYD_SKIPS=allow "$run" -R failer > out4 2>&1 || rc=$?
((rc != 0)) || { cat out4; fail "a failing test passed"; }

# 4. the default follows the user: fail as root, allow otherwise
rc=0
env -u PROXYD_SKIPS "$run" -R skipper > out5 2>&1 || rc=$?
if (($(id -u) == 0)); then
	((rc != 0)) || { cat out5; fail "as root a skip passed by default"; }
else
	((rc == 0)) || { cat out5; fail "as another user a skip failed by default"; }
fi

# 5. what CI runs goes through it, skips not allowed
grep -q '^exec \.\./scripts/ctest-run ' "$src/scripts/test" ||
	fail "scripts/test does not run its suite through scripts/ctest-run"
grep -q '^export PROXYD_SKIPS=fail$' "$src/.ci/run" ||
	fail ".ci/run does not set PROXYD_SKIPS=fail"
grep -q 'PROXYD_SKIPS=allow' "$src/.ci/run" &&
	fail ".ci/run allows skips somewhere"
echo "ci.ctest_run: ok"
