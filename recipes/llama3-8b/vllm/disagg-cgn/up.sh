#!/usr/bin/env bash
# Llama 3.1 8B Instruct on vLLM, disaggregated, with cgn-kvcached offload (README.md).
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../../lib/recipe.sh"
recipe_init "$here"
recipe_up_begin
recipe_kvcached
recipe_agent prefill-0 --kv-offload cgn --nixl-side-channel-port "$((5600 + ${CGN_PORT_OFFSET:-0} % 20000))"
recipe_agent decode-0 --kv-offload cgn --nixl-side-channel-port "$((5601 + ${CGN_PORT_OFFSET:-0} % 20000))"
recipe_router meta-llama/Llama-3.1-8B-Instruct
