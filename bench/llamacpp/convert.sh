#!/usr/bin/env bash
# Converts a checkpoint directory in the Hugging Face layout (config.json,
# model.safetensors or its shards, tokenizer.json, tokenizer_config.json:
# what bench/standin and hacrl write) into a GGUF file with llama.cpp's own
# converter, convert_hf_to_gguf.py, from the source tree setup.sh unpacked
# (never a copy in this repository):
#
#   bench/llamacpp/convert.sh CHECKPOINT f32|bf16|f16 OUT.gguf
#
# The converter imports torch and transformers, so it runs with the
# project's interpreter (scripts/pyenv.sh), offline, with the source tree's
# gguf package and setup.sh's convert-lib (sentencepiece) on PYTHONPATH.
# f32 keeps every tensor in float32; bf16 and f16 convert the matrices and
# keep the norms' gains in float32, as the converter does.
set -euo pipefail

if [[ $# -ne 3 ]] || [[ "$2" != f32 && "$2" != bf16 && "$2" != f16 ]]; then
	echo "usage: bench/llamacpp/convert.sh CHECKPOINT f32|bf16|f16 OUT.gguf" >&2
	exit 2
fi
ckpt=$1 outtype=$2 out=$3
if [[ ! -f "$ckpt/config.json" ]]; then
	echo "convert.sh: $ckpt/config.json: missing; want a checkpoint directory in the Hugging Face layout" >&2
	exit 1
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
env="$(dirname "$(dirname "$("$here/setup.sh")")")"
project_python="$("$here/../../scripts/pyenv.sh")"
src="$(echo "$env"/src/llama_cpp_python-*/vendor/llama.cpp)"
if [[ ! -f "$src/convert_hf_to_gguf.py" ]]; then
	echo "convert.sh: $src/convert_hf_to_gguf.py: missing from the llama-cpp-python source tree" >&2
	exit 1
fi
tmp="$out.tmp-$$"
trap 'rm -f "$tmp"' EXIT
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH="$src/gguf-py:$env/convert-lib" \
	"$project_python" "$src/convert_hf_to_gguf.py" "$ckpt" --outtype "$outtype" --outfile "$tmp" >"$tmp.log" 2>&1 ||
	{
		tail -n 20 "$tmp.log" >&2
		echo "convert.sh: convert_hf_to_gguf.py failed on $ckpt (log above)" >&2
		rm -f "$tmp.log"
		exit 1
	}
rm -f "$tmp.log"
mv "$tmp" "$out"
