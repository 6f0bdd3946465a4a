#!/usr/bin/env bash
# Llama 3.3 70B Instruct on vLLM, disaggregated on one 8-GPU node (README.md).
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../../lib/recipe.sh"
recipe_init "$here"
recipe_up_begin
recipe_agent prefill-0 --nixl-side-channel-port "$((5600 + ${CGN_PORT_OFFSET:-0} % 20000))"
recipe_agent decode-0 --nixl-side-channel-port "$((5601 + ${CGN_PORT_OFFSET:-0} % 20000))"
recipe_router meta-llama/Llama-3.3-70B-Instruct
