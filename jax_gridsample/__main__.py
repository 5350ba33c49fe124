"""``python -m jax_gridsample``: does jax_gridsample work here? ``--help`` says more."""

import sys

from jax_gridsample._acceptance._main import main

if __name__ == "__main__":
    sys.exit(main())
