#!/usr/bin/env bash
# DeepSeek-V4-Flash on vLLM, aggregated, GB200 (README.md).
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../../lib/recipe.sh"
recipe_init "$here"
recipe_up_begin
recipe_agent agg-0
recipe_router deepseek-ai/DeepSeek-V4-Flash
