#!/usr/bin/env bash
# Llama 3.1 8B Instruct on SGLang, aggregated: one agent, one GPU, behind the router (README.md).
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../../lib/recipe.sh"
recipe_init "$here"
recipe_up_begin
recipe_agent agg-0
recipe_router meta-llama/Llama-3.1-8B-Instruct
