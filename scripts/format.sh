#!/usr/bin/env bash
# Applies .clang-format to every C++ file of the project. With --check (./run.sh test, CI) it
# changes nothing and fails, listing the files and lines, when any file differs from the style;
# the whole tree is kept formatted, so this covers the changed files of any commit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
files=$(git ls-files '*.cpp' '*.h')
if [ "${1:-}" = "--check" ]; then
    command -v clang-format >/dev/null 2>&1 ||
        { echo "scripts/format.sh: clang-format not found (apt-get install clang-format)" >&2; exit 2; }
    clang-format --dry-run --Werror $files
else
    clang-format -i $files
fi
