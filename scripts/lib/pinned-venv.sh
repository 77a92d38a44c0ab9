# pinned_venv makes (once) a virtualenv holding exactly the packages and
# hashes of a lock file, and prints its directory on standard output. It is
# sourced by scripts/pyenv.sh and scripts/mlflowenv.sh, which differ only in
# the arguments:
#
#   pinned_venv SCRIPT LOCK PREFIX LOCKNAME WHAT IMPORTS SIZE
#
# SCRIPT names the caller in messages; LOCK is the requirements file; the
# environment is $HACRL_PYENV_DIR/<PREFIX>py<version>-<hash of LOCK and the
# interpreter>, complete once .complete is written (an install that stopped
# half-way is redone), one install at a time under the flock file LOCKNAME;
# WHAT is what the tests skip without the package index (for messages);
# IMPORTS is a Python statement that must run once installed; SIZE says how
# big the first install is. Older environments of the same PREFIX are
# removed once the new one is complete. HACRL_PYTHON_BASE is the base
# interpreter (3.11 or newer); HACRL_SKIP_PYPI=1 exits 3 without installing.
pinned_venv() {
	local script=$1 lock=$2 prefix=$3 lockname=$4 what=$5 imports=$6 size=$7
	if [[ "${HACRL_SKIP_PYPI:-}" == 1 ]]; then
		echo "$script: HACRL_SKIP_PYPI=1: not installing" >&2
		exit 3
	fi
	local base="${HACRL_PYTHON_BASE:-python3}" version
	if ! version="$("$base" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3]); sys.exit(sys.version_info < (3, 11))' 2>/dev/null)"; then
		echo "$script: $base is missing or older than Python 3.11 (set HACRL_PYTHON_BASE to a Python 3.11+ interpreter," \
			"or HACRL_SKIP_PYPI=1 to skip $what)" >&2
		exit 1
	fi
	local root="${HACRL_PYENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hacrl/pyenv}"
	local key
	key="$( { cat "$lock"; echo "$version $(uname -m)"; } | sha256sum | cut -c1-16)"
	local env="$root/${prefix}py$version-$key"
	if [[ -f "$env/.complete" ]]; then
		echo "$env"
		return
	fi
	mkdir -p "$root"
	exec 9>"$root/$lockname"
	flock 9
	if [[ ! -f "$env/.complete" ]]; then
		local start=$SECONDS old
		echo "$script: installing the pinned packages of $lock into $env ($size)" >&2
		rm -rf "$env"
		"$base" -m venv "$env"
		# --no-deps: the lock names every package, each with its hashes.
		if ! "$env/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
			--require-hashes --no-deps --only-binary=:all: -r "$lock" >&2; then
			echo "$script: pip could not install $lock: the first install needs the Python package index" \
				"(set HACRL_SKIP_PYPI=1 to skip $what on a machine without it)" >&2
			exit 1
		fi
		"$env/bin/python" -c "$imports" >&2
		touch "$env/.complete"
		for old in "$root/${prefix}"py*; do
			[[ "$old" == "$env" ]] || rm -rf "$old"
		done
		echo "$script: installed in $((SECONDS - start)) s" >&2
	fi
	echo "$env"
}
