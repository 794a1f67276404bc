// Package layers holds no code: its test checks the direction of the
// repository's imports (DESIGN: cmd/train → sweetrl → model/llama → engine,
// model code never naming a concrete backend, internal packages below the
// model), so that a change that runs an import back up fails.
package layers
