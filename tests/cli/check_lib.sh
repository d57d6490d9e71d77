# Shared by the shell tests that run the megadecode binary: `check` runs one command and compares
# its exit code, stdout and stderr; counters are summarised by `report`. Source it after setting
# $work (a scratch directory).
failures=0; passes=0

# check NAME EXPECTED_RC STDOUT_REGEX STDERR_REGEX -- command...   (stdin is /dev/null)
check() {
  local name="$1" want_rc="$2" out_re="$3" err_re="$4"; shift 5
  "$@" >"$work/out" 2>"$work/err" </dev/null
  local rc=$?
  local ok=1
  [ "$rc" -eq "$want_rc" ] || { echo "FAIL $name: exit $rc, expected $want_rc"; ok=0; }
  if [ -n "$out_re" ] && ! grep -Eq -- "$out_re" "$work/out"; then
    echo "FAIL $name: stdout does not match /$out_re/"; ok=0; fi
  if [ -n "$err_re" ] && ! grep -Eq -- "$err_re" "$work/err"; then
    echo "FAIL $name: stderr does not match /$err_re/"; ok=0; fi
  if ((ok)); then passes=$((passes + 1)); else
    failures=$((failures + 1)); echo "--- stdout"; head -20 "$work/out"; echo "--- stderr"; head -20 "$work/err"; fi
}

# expect NAME CONDITION_RESULT MESSAGE: records a check done by other means.
expect() {
  if [ "$2" -eq 0 ]; then passes=$((passes + 1)); else failures=$((failures + 1)); echo "FAIL $1: $3"; fi
}

report() {
  echo "$passes passed, $failures failed"
  [ "$failures" -eq 0 ]
}
