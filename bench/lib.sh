# Helpers shared by the bench scripts (sourced from the repository's root).
# json EXPR: prints EXPR evaluated with d = the JSON document read from standard input.
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# median DIGITS VALUE...: the median of the values, rounded to DIGITS places ("-" when there are none).
median() {
  python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[2:]]; print(round(statistics.median(v), int(sys.argv[1])) if v else '-')" "$@"
}
# median_ci DIGITS VALUE...: the median and a distribution-free 95 % confidence interval of it
# (order statistics: the k-th smallest and k-th largest value, k the largest with
# P(Binomial(n, 1/2) < k) <= 2.5 %); it needs 6 values or more. Values that are not numbers
# (a round that gave "n/a") are left out and counted.
median_ci() { python3 -c "$_order_ci" ci "$@"; }
# against_goal GOAL VALUE...: whether the median of the values is at or under GOAL for sure (the
# whole 95 % interval at or under it), over it for sure, or not decided by this many rounds.
against_goal() { python3 -c "$_order_ci" goal "$@"; }
_order_ci='
import math, statistics, sys
mode, arg = sys.argv[1], sys.argv[2]; v = []; bad = 0
for x in sys.argv[3:]:
    try: v.append(float(x))
    except ValueError: bad += 1
v.sort(); n = len(v)
below = lambda k: sum(math.comb(n, i) for i in range(k)) / 2 ** n
k = max((k for k in range(1, n // 2 + 1) if below(k) <= 0.025), default=0)
lo, hi = (v[k - 1], v[n - k]) if k else (None, None)
skipped = f"; {bad} left out (not a number)" if bad else ""
if mode == "goal":
    goal = float(arg)
    if k == 0: print(f"not decided (n = {n}: 6 or more rounds needed)")
    elif hi <= goal: print(f"met: the whole interval ({lo}-{hi}) is at or under {goal}")
    elif lo > goal: print(f"not met: the whole interval ({lo}-{hi}) is over {goal}")
    else: print(f"not decided: the interval {lo}-{hi} holds {goal}")
elif not v: print(f"- (no values{skipped})")
else:
    d = int(arg); m = round(statistics.median(v), d)
    if k == 0: print(f"{m} (n = {n}: 6 or more values give a 95 % interval{skipped})")
    else: print(f"{m} (95 % interval {round(lo, d)}-{round(hi, d)}, {1 - 2 * below(k):.1%} coverage, n = {n}{skipped})")
'
