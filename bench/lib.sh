# Helpers shared by the bench scripts (sourced from the repository's root).
# json EXPR: prints EXPR evaluated with d = the JSON document read from standard input.
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# median DIGITS VALUE...: the median of the values, rounded to DIGITS places ("-" when there are none).
median() {
  python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[2:]]; print(round(statistics.median(v), int(sys.argv[1])) if v else '-')" "$@"
}
