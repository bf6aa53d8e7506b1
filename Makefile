# Shortcuts for the two set-up commands in the README.
.PHONY: demo test extension

demo:
	bash scripts/setup.sh demo

test:
	bash scripts/setup.sh test

extension:  # regenerate extension/ from udfs/loomdb.toml
	.venv/bin/python -m loomdb.udfs.pgsql extension
