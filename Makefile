# Shortcuts for the two set-up commands in the README.
.PHONY: demo test extension

demo:
	bash scripts/setup.sh demo

test:
	bash scripts/setup.sh test

extension:  # regenerate extension/ from python/loomdb/udfs/catalogue.toml
	rm -f extension/loomdb--*.sql
	.venv/bin/python -m loomdb.engines.postgres.extension extension
