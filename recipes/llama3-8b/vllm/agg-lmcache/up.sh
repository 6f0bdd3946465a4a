#!/usr/bin/env bash
# Llama 3.1 8B Instruct on vLLM with LMCache CPU offload (README.md).
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../../lib/recipe.sh"
recipe_init "$here"
recipe_up_begin
recipe_agent agg-0 --kv-offload lmcache
recipe_router meta-llama/Llama-3.1-8B-Instruct
