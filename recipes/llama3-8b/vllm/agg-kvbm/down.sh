#!/usr/bin/env bash
# Stops everything up.sh started and removes its state folder (recipes/lib/recipe.sh).
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../../lib/recipe.sh"
recipe_init "$here"
recipe_down
