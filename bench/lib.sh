# Helpers of the bench scripts (sourced): free_port, json FILE EXPR, median,
# ratio A B, verdict EXPR. Python 3 does the arithmetic.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# json FILE EXPR: evaluates a Python expression over the JSON object d.
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
median() { python3 -c "import statistics,sys; print(round(statistics.median(map(float,sys.argv[1:])), 3))" "$@"; }
ratio() { python3 -c "import sys; a,b=map(float,sys.argv[1:]); print('%.2f' % (a/b) if b else 'inf')" "$1" "$2"; }
verdict() { python3 -c "import sys; print('MET' if eval(sys.argv[1]) else 'MISSED')" "$1"; }
