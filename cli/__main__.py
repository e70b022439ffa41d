"""``python -m cli``: the ``ragstream`` command (see :mod:`cli.main`)."""
from cli.main import main

main()
