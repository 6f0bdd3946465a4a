#!/usr/bin/env bash
# Qwen3 8B on vLLM, aggregated (README.md).
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../../lib/recipe.sh"
recipe_init "$here"
recipe_up_begin
recipe_agent agg-0
recipe_router Qwen/Qwen3-8B
