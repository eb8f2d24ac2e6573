"""``python -m handoffs``: the same command line as the ``handoffs`` script."""

from handoffs.cli import main

if __name__ == "__main__":
    main(prog_name="handoffs")
