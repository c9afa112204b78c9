"""One module per `qmemo` command; see qmemo/cli.py for the contract."""
