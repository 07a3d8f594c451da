#!/usr/bin/env bash
# Fails when a source file of the project is over the length limit (default 1200 lines):
# files are kept small and named for what they hold (DESIGN.md). Run by `make test`.
#   scripts/check-file-length.sh [ROOT] [LIMIT]
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
limit="${2:-1200}"
cd "$root"
over=0
while IFS= read -r f; do
  n=$(wc -l < "$f")
  if [ "$n" -gt "$limit" ]; then
    echo "$f: $n lines (limit $limit)"
    over=1
  fi
done < <(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh' '*.def' 2>/dev/null || find src include tools tests bench fuzz examples -name '*.cpp' -o -name '*.h')
if [ "$over" -ne 0 ]; then
  echo "split the files above: each file holds one thing"
  exit 1
fi
echo "every source file is at most $limit lines"
