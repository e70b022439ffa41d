# ragstream — the two commands:  make demo   and   make test
.PHONY: demo test test-fast bootstrap up down worker bench clean

bootstrap:
	bash scripts/bootstrap.sh

demo: bootstrap
	.venv/bin/ragstream demo

test: bootstrap
	bash scripts/test.sh

test-fast: bootstrap
	bash scripts/test.sh -m "not slow"

up: bootstrap
	.venv/bin/ragstream dev up

down:
	.venv/bin/ragstream dev down

worker:
	.venv/bin/ragstream worker

bench: bootstrap
	.venv/bin/ragstream bench e2e

clean: down
	rm -rf .ragstream .ragstream-test
