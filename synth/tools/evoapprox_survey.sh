#!/usr/bin/env bash
# evoapprox_survey.sh - every 8-bit unsigned and signed multiplier of
# EvoApproxLib through `mantis synth`, and the Spearman rank correlation of
# our area, power and delay with the library's published PDK45 figures
# (PDK45_AREA/_PWR/_DELAY in each file's header), unsigned and signed apart.
# A measuring tool, not part of the build or the tests (docs/synth.md).
#
#   synth/tools/evoapprox_survey.sh EVOAPPROXLIB_GIT_DIR OUT_DIR [MANTIS]
#
# EVOAPPROXLIB_GIT_DIR: a clone of github.com/ehw-fit/evoapproxlib (a bare
# one will do), read with `git show` at its HEAD; nothing of it enters this
# tree. The designs (multiplers/8x8_{unsigned,signed}/*/NAME.v, each name
# once, the _pdk45 netlists left out) go to OUT_DIR/designs/NAME/, one
# directory each (a design's directory is its submodule search path),
# results to OUT_DIR/json/, the cache to OUT_DIR/cache. One design at a
# time under nice; a design already in OUT_DIR/json is not run again.
# Writes OUT_DIR/survey.tsv and prints the summary (also OUT_DIR/summary.txt).
set -uo pipefail
evo="${1:?usage: evoapprox_survey.sh EVOAPPROXLIB_GIT_DIR OUT_DIR [MANTIS]}"
out="${2:?usage: evoapprox_survey.sh EVOAPPROXLIB_GIT_DIR OUT_DIR [MANTIS]}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mantis="${3:-$root/build/bin/mantis}"
[ -x "$mantis" ] || { echo "evoapprox_survey.sh: $mantis: not an executable (build Mantis first)" >&2; exit 2; }
commit="$(git -C "$evo" rev-parse HEAD)" || { echo "evoapprox_survey.sh: $evo: not a git repository" >&2; exit 2; }
mkdir -p "$out/designs" "$out/json" "$out/log"
: >"$out/runs.tsv"
git -C "$evo" ls-tree -r --name-only HEAD multiplers/8x8_unsigned multiplers/8x8_signed |
  grep -E '/mul8[us]_[A-Za-z0-9]+\.v$' | sort |
  while read -r path; do
    name="$(basename "$path" .v)"
    grep -q "^$name	" "$out/runs.tsv" && continue # in several Pareto sets: once
    group="$(basename "$(dirname "$(dirname "$path")")")"
    mkdir -p "$out/designs/$name"
    v="$out/designs/$name/$name.v"
    git -C "$evo" show "HEAD:$path" >"$v"
    pub() { grep -o "PDK45_$1 = [0-9.]*" "$v" | head -1 | awk '{print $3}'; }
    rc=0
    if [ ! -s "$out/json/$name.json" ]; then
      nice "$mantis" synth --rtl "$v" --cache "$out/cache" --json "$out/json/$name.json" \
        >"$out/log/$name.out" 2>"$out/log/$name.err" || rc=$?
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$group" "$rc" "$(pub AREA)" "$(pub PWR)" "$(pub DELAY)" \
      "$(head -1 "$out/log/$name.err" 2>/dev/null)" >>"$out/runs.tsv"
  done
python3 - "$out" "$commit" <<'PY' | tee "$out/summary.txt"
import json, os, sys
out, commit = sys.argv[1], sys.argv[2]

def ranks(x):
    order = sorted(range(len(x)), key=lambda i: x[i])
    r = [0.0] * len(x)
    i = 0
    while i < len(x):  # ties share their mean rank
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r

def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va and vb else float("nan")

rows, rejected = [], []
for line in open(os.path.join(out, "runs.tsv")):
    name, group, rc, pa, pp, pd, msg = line.rstrip("\n").split("\t")
    j = os.path.join(out, "json", name + ".json")
    if not os.path.exists(j):
        rejected.append((name, group, msg))
        continue
    r = json.load(open(j))
    fa = r["cell_counts"].get("MTS45_FA", 0) + r["cell_counts"].get("MTS45_HA", 0)
    rows.append((group, name, float(pa), float(pp), float(pd), r["area_um2"], r["power"]["total_uw"],
                 r["delay_ps"], r["cells"], fa, r["logic_depth"]))
with open(os.path.join(out, "survey.tsv"), "w") as f:
    f.write("group\tdesign\tpub_area_um2\tpub_power_mw\tpub_delay_ns\tarea_um2\ttotal_uw\tdelay_ps\tcells\tadders\tdepth\n")
    for r in rows:
        f.write("\t".join(str(x) for x in r) + "\n")
print("EvoApproxLib %s: %d designs, %d synthesized, %d rejected" % (commit[:7], len(rows) + len(rejected),
                                                                     len(rows), len(rejected)))
for name, group, msg in rejected:
    print("  rejected %s (%s): %s" % (name, group, msg))
for group in ("8x8_unsigned", "8x8_signed"):
    g = [r for r in rows if r[0] == group]
    if len(g) < 2:
        continue
    rho = [spearman([r[5 + k] for r in g], [r[2 + k] for r in g]) for k in range(3)]
    print("%-13s n=%2d  Spearman rho: area %.3f  power %.3f  delay %.3f" % (group, len(g), *rho))
PY
