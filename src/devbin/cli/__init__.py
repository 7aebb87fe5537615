"""The command-line interface: thin subcommands over the library."""
