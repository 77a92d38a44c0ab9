#!/usr/bin/env bash
# Creates (once) the llama.cpp anchor's Python environment and prints its
# interpreter's path on standard output, as scripts/pyenv.sh does for the
# project's own environment.
#
# The environment is a virtualenv under $HACRL_LLAMACPP_DIR (default
# ${XDG_CACHE_HOME:-~/.cache}/hacrl/llamacpp-KEY, KEY a hash of
# requirements.txt, the base interpreter's version, the machine and
# CMAKE_ARGS) holding llama-cpp-python built from its source distribution
# for this CPU (-DGGML_NATIVE=ON: -march=native, so AVX2/FMA here and
# AVX-512 where the CPU has it) and its unpacked source tree, in src/: the
# same tree carries llama.cpp's converter (vendor/llama.cpp/
# convert_hf_to_gguf.py) and its gguf package (vendor/llama.cpp/gguf-py),
# which bench/llamacpp/convert.sh runs with the project's interpreter
# (scripts/pyenv.sh: the converter imports torch). Every package is pinned
# with its hashes in requirements.txt; the build runs without build
# isolation so that its backend (scikit-build-core) is pinned too. An
# install that stops half-way is redone: the environment counts only once
# its last step wrote .complete. One install runs at a time (flock).
#
#   HACRL_PYTHON_BASE    the interpreter the virtualenv is made from
#                        (default: python3 on PATH; 3.11 or newer)
#   HACRL_LLAMACPP_DIR   the environment's directory (overrides the default)
#   CMAKE_ARGS           llama.cpp's build options (default -DGGML_NATIVE=ON)
#
# It needs a C/C++ compiler, cmake 3.21 or newer and the package index. The
# build compiles about 190 files (llama.cpp, its common library and mtmd);
# on the shared 2-core machine of 2026-11-27, at a load average of about
# 19, it took 75 minutes. Later calls return at once.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lock="$here/requirements.txt"
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

base="${HACRL_PYTHON_BASE:-python3}"
if ! version="$("$base" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3]); sys.exit(sys.version_info < (3, 11))' 2>/dev/null)"; then
	echo "llamacpp/setup.sh: $base is missing or older than Python 3.11 (set HACRL_PYTHON_BASE)" >&2
	exit 1
fi
for tool in cc c++ cmake; do
	if ! command -v "$tool" >/dev/null; then
		echo "llamacpp/setup.sh: $tool is missing: building llama.cpp needs a C/C++ compiler and cmake" >&2
		exit 1
	fi
done

# The project's interpreter runs the converter (scripts/pyenv.sh installs it
# the first time).
project_python="$("$here/../../scripts/pyenv.sh")"
project_version="$("$project_python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
key="$( { cat "$lock"; echo "$version $project_version $(uname -m) $CMAKE_ARGS"; } | sha256sum | cut -c1-16)"
root="${XDG_CACHE_HOME:-$HOME/.cache}/hacrl"
env="${HACRL_LLAMACPP_DIR:-$root/llamacpp-$key}"
python="$env/bin/python"
if [[ -f "$env/.complete" ]]; then
	echo "$python"
	exit 0
fi

mkdir -p "$(dirname "$env")"
exec 9>"$env.lock"
flock 9
if [[ ! -f "$env/.complete" ]]; then
	start=$SECONDS
	pip=("$python" -m pip --disable-pip-version-check --no-input)
	work="$env/lock"
	# The lock split in three: the wheels of the environment (runtime and
	# build backend), llama-cpp-python's source distribution and the
	# converter's sentencepiece, each file checked by its hash.
	lock_part() { awk -v want="$1" '/^[a-z]/ { split($1, nv, "=="); keep = (want == "wheels") ? (nv[1] != "llama-cpp-python" && nv[1] != "sentencepiece") : (nv[1] == want) } keep' "$lock"; }
	# .built: the environment and the build, the long part, are done.
	if [[ ! -f "$env/.built" ]]; then
		echo "llamacpp/setup.sh: building llama-cpp-python into $env (CMAKE_ARGS=$CMAKE_ARGS, a few minutes)" >&2
		rm -rf "$env"
		"$base" -m venv "$env"
		mkdir -p "$work"
		lock_part wheels >"$work/wheels.txt"
		lock_part llama-cpp-python >"$work/sdist.txt"
		"${pip[@]}" install --quiet --require-hashes --no-deps --only-binary=:all: -r "$work/wheels.txt" >&2
		"${pip[@]}" download --quiet --require-hashes --no-deps --no-binary=:all: -d "$work" -r "$work/sdist.txt" >&2
		mkdir -p "$env/src"
		tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$env/src"
		src="$(echo "$env"/src/llama_cpp_python-*)"
		# --no-cache-dir: pip's wheel cache would not notice a changed CMAKE_ARGS.
		if ! "${pip[@]}" install --no-build-isolation --no-deps --no-cache-dir --verbose "$src" >"$env/build.log" 2>&1; then
			tail -n 40 "$env/build.log" >&2
			echo "llamacpp/setup.sh: building llama-cpp-python failed; the whole log is $env/build.log" >&2
			exit 1
		fi
		touch "$env/.built"
	fi
	# The converter runs with the project's interpreter (it imports torch
	# and transformers); sentencepiece goes into convert-lib, which
	# convert.sh puts on its PYTHONPATH with the source tree's gguf-py.
	rm -rf "$env/convert-lib"
	lock_part sentencepiece >"$work/convert.txt"
	"$project_python" -m pip install --quiet --disable-pip-version-check --no-input --require-hashes --no-deps \
		--only-binary=:all: --target "$env/convert-lib" -r "$work/convert.txt" >&2
	"$python" -c 'import llama_cpp; print("llamacpp/setup.sh: llama_cpp", llama_cpp.__version__, "ready in", end=" ")' >&2
	echo "$((SECONDS - start)) s" >&2
	touch "$env/.complete"
fi
echo "$python"
